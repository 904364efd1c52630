//! The generated CUDA C, checked without a GPU: the prelude and each kernel are compiled as C99
//! with the host's C compiler (`cc`, which every Rust toolchain on Linux links with), every
//! thread is run in a loop, and the results are compared with the rule table and with the
//! interpreter.

use super::*;
use crate::expr::lit as elit;
use crate::kernel::{combine_windows, run_store, Inputs};
use crate::{cond, Builder, Combine, Program, Rep};
use adjoint_core::rules;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Compile `c` and run it on `input`; returns what it wrote.
fn run_c(c: &str, input: &[u8]) -> Vec<u8> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "adjoint-cuda-emu-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, bin, inp, out) = (
        dir.join("k.c"),
        dir.join("k"),
        dir.join("in.bin"),
        dir.join("out.bin"),
    );
    std::fs::write(&src, c).unwrap();
    std::fs::write(&inp, input).unwrap();
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c99", "-O1", "-fno-fast-math", "-o"])
        .arg(&bin)
        .arg(&src)
        .arg("-lm")
        .output()
        .expect("a C compiler (`cc`) to check the generated CUDA C");
    assert!(
        cc.status.success(),
        "the generated code does not compile:\n{}\n{c}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&bin).arg(&inp).arg(&out).output().unwrap();
    assert!(run.status.success(), "the emulated kernel failed: {run:?}");
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    bytes
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Equal to the rule table up to the host libm's rounding (a few ulps), NaNs alike.
fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= 1e-13 * a.abs().max(b.abs()) + 1e-300
}

const POINTS: [f64; 10] = [0.3, 0.75, 1.5, 2.25, 7.0, 0.0, -0.4, -1.7, 21.5, -123.4];

#[test]
fn prelude_rules_are_the_rule_table() {
    prelude_matches_the_rule_table(&POINTS);
}

/// The CUDA C prelude's every unary and binary rule at every point of `points` against the
/// rule table (values and first and second partials), compiled by the host's C compiler.
fn prelude_matches_the_rule_table(points: &[f64]) {
    // One C program evaluates every unary and binary rule at every point.
    let mut c = String::from(PRELUDE);
    c.push_str("#include <stdio.h>\nint main(int argc, char** argv) {\n");
    c.push_str("  FILE* o = fopen(argv[2], \"wb\"); (void)argc;\n  double v, d, dd, dx, dy, dxx, dxy, dyy;\n");
    let pts: Vec<String> = points.iter().map(|&x| lit(x)).collect();
    for &op in Op1::ALL {
        for x in &pts {
            let call = call1(
                op,
                x,
                [Some("v".into()), Some("d".into()), Some("dd".into())],
            );
            c.push_str(&format!(
                "  {{ double t_v, t_d, t_dd; (void)t_v; (void)t_d; (void)t_dd; {call} }}\n  fwrite(&v, 8, 1, o); fwrite(&d, 8, 1, o); fwrite(&dd, 8, 1, o);\n"
            ));
        }
    }
    for &op in Op2::ALL {
        for x in &pts {
            for y in &pts {
                let outs = ["v", "dx", "dy", "dxx", "dxy", "dyy"].map(|s| Some(s.to_string()));
                let call = call2(op, x, y, outs);
                c.push_str(&format!(
                    "  {{ double t_v, t_d, t_d2, t_dxx, t_dxy, t_dyy; (void)t_v; (void)t_d; (void)t_d2; (void)t_dxx; (void)t_dxy; (void)t_dyy; {call} }}\n"
                ));
                for s in ["v", "dx", "dy", "dxx", "dxy", "dyy"] {
                    c.push_str(&format!("  fwrite(&{s}, 8, 1, o);\n"));
                }
            }
        }
    }
    c.push_str("  fclose(o);\n  return 0;\n}\n");
    let got = f64s(&run_c(&c, &[]));
    compare_with_the_rule_table(points, got, "C");
}

/// A kernel that evaluates every unary and binary rule of the prelude at run-time points (no
/// constant folding): thread `i` takes point `i` (and every second argument), writing in
/// [`compare_with_the_rule_table`]'s order. The GPU runs it ([`prelude_rules_on_the_gpu`]), and
/// so does the host, one thread after another ([`rules_kernel_emulated`]).
fn rules_kernel() -> String {
    let n1 = Op1::ALL.len();
    let mut c = String::from(
        "ADJ_KERNEL adj_rules_at_points(unsigned long long n, const double* pts, double* out) {\n\
         \x20 unsigned long long i = ADJ_ELEMENT;\n\
         \x20 if (i >= n) return;\n\
         \x20 double x = pts[i], v, d, dd, dx, dy, dxx, dxy, dyy;\n\
         \x20 double t_v, t_d, t_dd, t_d2, t_dxx, t_dxy, t_dyy;\n\
         \x20 (void)t_v; (void)t_d; (void)t_dd; (void)t_d2; (void)t_dxx; (void)t_dxy; (void)t_dyy;\n",
    );
    for (k, &op) in Op1::ALL.iter().enumerate() {
        let call = call1(
            op,
            "x",
            [Some("v".into()), Some("d".into()), Some("dd".into())],
        );
        c.push_str(&format!(
            "  {call}\n  {{ double* o = out + ({k}ULL * n + i) * 3; o[0] = v; o[1] = d; o[2] = dd; }}\n"
        ));
    }
    c.push_str("  for (unsigned long long j = 0; j < n; j++) {\n    double y = pts[j];\n");
    for (k, &op) in Op2::ALL.iter().enumerate() {
        let outs = ["v", "dx", "dy", "dxx", "dxy", "dyy"].map(|s| Some(s.to_string()));
        let call = call2(op, "x", "y", outs);
        c.push_str(&format!(
            "    {call}\n    {{ double* o = out + {n1}ULL * n * 3 + (({k}ULL * n + i) * n + j) * 6;\n      \
             o[0] = v; o[1] = dx; o[2] = dy; o[3] = dxx; o[4] = dxy; o[5] = dyy; }}\n"
        ));
    }
    c.push_str("  }\n}\n");
    c
}

/// What the host's C or the GPU (`who`) computed for every rule at every point (unary rules
/// first, then binary, op-major: [`prelude_matches_the_rule_table`]'s order) against the rule
/// table.
fn compare_with_the_rule_table(points: &[f64], got: Vec<f64>, who: &str) {
    let mut it = got.into_iter();
    let mut bad = Vec::new();
    for &op in Op1::ALL {
        for &x in points {
            let r = rules::unary(op, x);
            for (what, want) in [("value", r.value), ("d", r.d), ("dd", r.dd)] {
                let g = it.next().unwrap();
                if !close(g, want) {
                    bad.push(format!("{op:?}({x}) {what}: {who} {g} vs rules {want}"));
                }
            }
        }
    }
    for &op in Op2::ALL {
        for &x in points {
            for &y in points {
                let r = rules::binary(op, x, y);
                let want = [
                    ("value", r.value),
                    ("dx", r.dx),
                    ("dy", r.dy),
                    ("dxx", r.dxx),
                    ("dxy", r.dxy),
                    ("dyy", r.dyy),
                ];
                for (what, want) in want {
                    let g = it.next().unwrap();
                    if !close(g, want) {
                        bad.push(format!(
                            "{op:?}({x}, {y}) {what}: {who} {g} vs rules {want}"
                        ));
                    }
                }
            }
        }
    }
    assert!(it.next().is_none(), "every value read");
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Special points for the prelude's rules (signed zeros, subnormals, overflow edges,
/// infinities, NaN), checked against the rule table (a hunter: `powf` at
/// (NaN, 0) gave the partials NaN where the table gives 0, `isinf` for `!is_finite`); (1e-160, 2)
/// runs `powf`'s branch for an `x^y` that underflows (its values differ from the other branch's
/// only below `close`'s 1e-300: the branch is for second-order engines, which the GPU has not).
const SPECIAL_POINTS: [f64; 18] = [
    -0.0,
    0.0,
    1.0,
    -1.0,
    1e-310,
    -1e-310,
    1e300,
    -1e300,
    710.0,
    -746.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    0.5,
    -2.0,
    40.0,
    1e-160,
    2.0,
];

#[test]
fn prelude_rules_at_special_points() {
    prelude_matches_the_rule_table(&SPECIAL_POINTS);
}

/// [`rules_kernel`] compiled by the host's C compiler, run one thread after another (and two
/// past the end, which must do nothing) over `points` read at run time.
fn rules_kernel_emulated(points: &[f64]) -> Vec<f64> {
    let len = Op1::ALL.len() * points.len() * 3 + Op2::ALL.len() * points.len().pow(2) * 6;
    let c = format!(
        "{PRELUDE}\n{}\n#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int argc, char** argv) {{\n\
         \x20 double pts[64]; FILE* f = fopen(argv[1], \"rb\"); (void)argc;\n\
         \x20 unsigned long long n = fread(pts, 8, 64, f); fclose(f);\n\
         \x20 double* out = malloc({len} * 8);\n\
         \x20 for (adj_element = 0; adj_element < n + 2; adj_element++) adj_rules_at_points(n, pts, out);\n\
         \x20 FILE* o = fopen(argv[2], \"wb\"); fwrite(out, 8, {len}, o); fclose(o); free(out);\n\
         \x20 return 0;\n}}\n",
        rules_kernel()
    );
    assert!(points.len() <= 64);
    f64s(&run_c(&c, &bytes(points)))
}

#[test]
fn the_rules_kernel_matches_the_rule_table() {
    let got = rules_kernel_emulated(&SPECIAL_POINTS);
    compare_with_the_rule_table(&SPECIAL_POINTS, got, "emulated kernel");
}

/// The prelude's rules compiled by NVRTC and run on the GPU (libdevice's `atan`, `erf`, `pow`,
/// `hypot`… where the host test has the host's libm), at [`POINTS`] and [`SPECIAL_POINTS`],
/// against the rule table: only with `ADJOINT_CUDA_TESTS=1`, as [`on_the_gpu`].
#[cfg(feature = "cuda")]
#[test]
fn prelude_rules_on_the_gpu() {
    use cudarc::driver::PushKernelArg;
    if std::env::var("ADJOINT_CUDA_TESTS").as_deref() != Ok("1") {
        eprintln!("GPU tests skipped: set ADJOINT_CUDA_TESTS=1 on a machine with a GPU");
        return;
    }
    let gpu = super::device::Gpu::new().expect("ADJOINT_CUDA_TESTS=1 but no GPU");
    let f = gpu
        .compiled(&rules_kernel(), "adj_rules_at_points")
        .expect("the rules kernel compiles");
    for points in [&POINTS[..], &SPECIAL_POINTS[..]] {
        let n = points.len();
        let pts = gpu.upload(points).unwrap();
        let mut out = gpu
            .zeros::<f64>(Op1::ALL.len() * n * 3 + Op2::ALL.len() * n * n * 6)
            .unwrap();
        let n64 = n as u64;
        // SAFETY: the kernel takes (n, pts, out) as pushed here; thread i < n reads pts[..n]
        // and writes out at offsets below Op1::ALL.len()·n·3 + Op2::ALL.len()·n²·6, its length.
        unsafe {
            gpu.launch_n(&f, &n64, |b| {
                b.arg(&pts).arg(&mut out);
            })
            .expect("launch");
        }
        let got: Vec<f64> = gpu.download(&out).unwrap();
        compare_with_the_rule_table(points, got, "GPU");
        eprintln!("GPU: every prelude rule at {n} points = the rule table");
    }
}

/// What an emulated kernel wrote.
struct Emulated {
    roots: Vec<Vec<f64>>,
    /// per scatter: (value, target offset or −1) of each element
    contributions: Vec<(Vec<f64>, Vec<i64>)>,
    bad: u64,
}

/// Run kernel `k` over its whole space as the GPU would, one thread after another (and a few
/// threads past the end, which must do nothing).
fn emulate(k: &Kernel, params: &[Vec<f64>], arrays: &[Vec<f64>]) -> Emulated {
    emulate_layout(k, params, arrays, false)
}

/// [`emulate`] of the kernel with its contributions packed (`kernel_source_layout`), read
/// back per scatter.
fn emulate_layout(k: &Kernel, params: &[Vec<f64>], arrays: &[Vec<f64>], packed: bool) -> Emulated {
    let ks = kernel_source_layout(k, "adj_test", Roots::Separate, &|_| true, packed)
        .expect("a supported kernel");
    let n: usize = k.space.iter().product();
    let mut c = module_source(std::slice::from_ref(&ks));
    c.push_str(
        "#include <stdio.h>\n#include <stdlib.h>\n\
         static double* rd(FILE* f, size_t m) { double* p = malloc((m ? m : 1) * 8); \
         if (fread(p, 8, m, f) != m) exit(3); return p; }\n\
         /* n elements and 3 past the end, marked: threads past the end must not write */\n\
         static double* fresh(size_t n) { double* p = malloc((n + 3) * 8); \
         for (size_t i = 0; i < n + 3; i++) memcpy(&p[i], \"\\xad\\xde\\xad\\xde\\xad\\xde\\xf4\\x7f\", 8); \
         return p; }\n\
         int main(int argc, char** argv) {\n  (void)argc;\n  FILE* in = fopen(argv[1], \"rb\");\n  FILE* o = fopen(argv[2], \"wb\");\n",
    );
    c.push_str(&format!("  unsigned long long n = {n}ULL;\n"));
    let mut args = vec!["n".to_string()];
    for p in 0..ks.params {
        c.push_str(&format!("  const double* p{p} = rd(in, n);\n"));
        args.push(format!("p{p}"));
    }
    for (a, data) in arrays.iter().enumerate() {
        c.push_str(&format!("  const double* a{a} = rd(in, {});\n", data.len()));
        args.push(format!("a{a}"));
    }
    for r in 0..ks.roots {
        c.push_str(&format!("  double* r{r} = fresh(n);\n"));
        args.push(format!("r{r}"));
    }
    let nsc = ks.scatters.len();
    if packed {
        if nsc > 0 {
            // the packed arrays as `nsc` runs of `n + 3` (each run's last 3 marked, unwritten)
            c.push_str(&format!(
                "  double* cv = fresh({nsc}ULL * n);\n  long long* ci = (long long*)fresh({nsc}ULL * n);\n"
            ));
            args.push("cv".into());
            args.push("ci".into());
        }
    } else {
        for j in 0..nsc {
            c.push_str(&format!(
                "  double* cv{j} = fresh(n);\n  long long* ci{j} = (long long*)fresh(n);\n"
            ));
            args.push(format!("cv{j}"));
            args.push(format!("ci{j}"));
        }
    }
    c.push_str("  unsigned long long bad = ~0ULL;\n");
    args.push("&bad".into());
    c.push_str(&format!(
        "  for (adj_element = 0; adj_element < n + 3; adj_element++) adj_test({});\n",
        args.join(", ")
    ));
    for r in 0..ks.roots {
        c.push_str(&format!("  fwrite(r{r}, 8, n + 3, o);\n"));
    }
    for j in 0..nsc {
        if packed {
            // scatter j's run, then 3 marks (the array's own end marks for the last run)
            c.push_str(&format!(
                "  fwrite(cv + {j}ULL * n, 8, n, o); fwrite(cv + {nsc}ULL * n, 8, 3, o);\n  fwrite(ci + {j}ULL * n, 8, n, o); fwrite(ci + {nsc}ULL * n, 8, 3, o);\n"
            ));
        } else {
            c.push_str(&format!(
                "  fwrite(cv{j}, 8, n + 3, o);\n  fwrite(ci{j}, 8, n + 3, o);\n"
            ));
        }
    }
    c.push_str("  fwrite(&bad, 8, 1, o);\n  fclose(o);\n  return 0;\n}\n");
    let mut input = Vec::new();
    for p in params.iter().take(ks.params) {
        assert_eq!(p.len(), n);
        input.extend(bytes(p));
    }
    for a in arrays {
        input.extend(bytes(a));
    }
    let out = run_c(&c, &input);
    let words: Vec<u64> = out
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // every output array comes back with its 3 marked elements past the end, untouched
    const MARK: u64 = 0x7ff4_dead_dead_dead;
    let mut w = words.chunks(n + 3);
    let mut take = || {
        let a = w.next().unwrap();
        assert!(
            a[n..].iter().all(|&x| x == MARK),
            "a thread past the end wrote an output"
        );
        a[..n].to_vec()
    };
    let roots = (0..ks.roots)
        .map(|_| take().into_iter().map(f64::from_bits).collect())
        .collect();
    let contributions = (0..ks.scatters.len())
        .map(|_| {
            let v = take().into_iter().map(f64::from_bits).collect();
            let i = take().into_iter().map(|x| x as i64).collect();
            (v, i)
        })
        .collect();
    Emulated {
        roots,
        contributions,
        bad: *words.last().unwrap(),
    }
}

/// Compare kernel `k` run by the interpreter and by the emulated CUDA C on the same data.
/// Returns whether the interpreter reported an index out of bounds (which the C must flag).
/// How a test runs a kernel: emulated on the CPU, or on a GPU.
type Runner<'a> = &'a dyn Fn(&Kernel, &[Vec<f64>], &[Vec<f64>]) -> Emulated;

/// `q > 0`: the data are multiples of `q` (ties and halves for discrete operations).
fn compare_with(k: &Kernel, seed: u64, (lo, hi, q): (f64, f64, f64), run: Runner) -> bool {
    let k = k.clone().with_jit(false);
    let n: usize = k.space.iter().product();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let v = lo + (hi - lo) * ((state >> 11) as f64 / (1u64 << 53) as f64);
        if q > 0.0 {
            (v / q).round() * q
        } else {
            v
        }
    };
    let nparams = k.params.len();
    let params: Vec<Vec<f64>> = (0..nparams)
        .map(|_| (0..n).map(|_| next()).collect())
        .collect();
    let arrays: Vec<Vec<f64>> = k
        .array_shapes
        .iter()
        .map(|s| (0..s.iter().product::<usize>()).map(|_| next()).collect())
        .collect();
    let em = run(&k, &params, &arrays);
    let inp = Inputs {
        params: params.iter().map(|p| p.as_slice()).collect(),
        arrays: arrays.iter().map(|a| a.as_slice()).collect(),
    };
    let groups: Vec<Vec<usize>> = (0..k.roots.len()).map(|r| vec![r]).collect();
    let mut outs: Vec<Vec<f64>> = vec![vec![0.0; n]; k.roots.len()];
    let wins = match run_store(&k, &inp, &groups, &mut outs) {
        Ok(w) => w,
        Err(e) => {
            assert!(
                matches!(e, Error::OutOfBounds { .. }),
                "unexpected error {e}"
            );
            assert_ne!(em.bad, u64::MAX, "the C kernel missed the bad index: {e}");
            return true;
        }
    };
    assert_eq!(em.bad, u64::MAX, "the C kernel flagged element {}", em.bad);
    for (r, (a, b)) in outs.iter().zip(&em.roots).enumerate() {
        for (e, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                close(*x, *y),
                "root {r} element {e}: interpreter {x} vs C {y}\n{}",
                kernel_source(&k, "k").unwrap().code
            );
        }
    }
    // The contributions, added in element order, give the interpreter's targets.
    let mut want: Vec<Vec<f64>> = k.target_lens.iter().map(|&l| vec![0.0; l]).collect();
    {
        let mut t: Vec<&mut [f64]> = want.iter_mut().map(|v| v.as_mut_slice()).collect();
        combine_windows(&wins, &mut t, &k.target_f32, &k.windows);
    }
    let ks = kernel_source(&k, "k").unwrap();
    let mut got: Vec<Vec<f64>> = k.target_lens.iter().map(|&l| vec![0.0; l]).collect();
    for ((vals, idx), &t) in em.contributions.iter().zip(&ks.scatters) {
        for (&v, &i) in vals.iter().zip(idx) {
            if i >= 0 {
                got[t][i as usize] += v;
            }
        }
    }
    for (t, (a, b)) in want.iter().zip(&got).enumerate() {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            // the interpreter sums per block, the contributions in element order
            assert!(
                (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                "target {t}[{i}]: interpreter {x} vs C {y}"
            );
        }
    }
    // The executor's combining kernels, where a target's indices are affine and one-to-one,
    // give the same sums from the contribution values alone.
    for (t, want_t) in want.iter().enumerate() {
        let js: Vec<usize> = (0..ks.scatters.len())
            .filter(|&j| ks.scatters[j] == t)
            .collect();
        if js.is_empty() {
            continue;
        }
        // packed as the executor packs them (every scatter indexed: slot = scatter)
        let cv: Vec<f64> = em.contributions.iter().flat_map(|c| c.0.clone()).collect();
        let ci: Vec<i64> = em.contributions.iter().flat_map(|c| c.1.clone()).collect();
        // the scanning kernel combines any scatter
        let scan = scan_combine_source(&js, &js, n, want_t.len(), "adj_combine");
        let got = emulate_combine(&scan, &cv, Some(&ci), want_t.len());
        for (i, (x, y)) in want_t.iter().zip(&got).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                "scan-combined target {t}[{i}]: interpreter {x} vs combining kernel {y}"
            );
        }
        if let Some(idx) = static_offsets(&k, t, ks.scatters.len(), 1 << 26) {
            // position-only offsets: each contribution added where it lands
            let got = emulate_direct(&cv, &idx, want_t.len());
            if !affine_target(&k, t) {
                STATIC.fetch_add(1, Ordering::Relaxed);
            }
            for (i, (x, y)) in want_t.iter().zip(&got).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                    "target {t}[{i}] at position-only offsets: interpreter {x} vs {y}"
                );
            }
        }
        let Some(comb) = combine_source(&k, t, &js, want_t.len(), "adj_combine") else {
            continue;
        };
        let code = &comb.code;
        let got = emulate_combine(&comb, &cv, None, want_t.len());
        if let Some(idx) = direct_offsets(&k, t, &js, ks.scatters.len(), 1 << 26) {
            // each contribution added where it lands (`adj_scatter_direct`)
            let got = emulate_direct(&cv, &idx, want_t.len());
            DIRECT.fetch_add(1, Ordering::Relaxed);
            for (i, (x, y)) in want_t.iter().zip(&got).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                    "directly combined target {t}[{i}]: interpreter {x} vs {y}"
                );
            }
        }
        if comb.parts > 1 {
            SPLIT.fetch_add(1, Ordering::Relaxed);
        }
        COMBINED.fetch_add(1, Ordering::Relaxed);
        for (i, (x, y)) in want_t.iter().zip(&got).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                "combined target {t}[{i}]: interpreter {x} vs combining kernel {y}\n{code}"
            );
        }
    }
    false
}

/// How many targets the combining kernels have been checked on (by any test), and how many of
/// those with their sums split into parts.
static COMBINED: AtomicUsize = AtomicUsize::new(0);
static SPLIT: AtomicUsize = AtomicUsize::new(0);
static DIRECT: AtomicUsize = AtomicUsize::new(0);
/// How many targets that are not affine have been combined at position-only offsets.
static STATIC: AtomicUsize = AtomicUsize::new(0);

/// C statements that read `m` doubles into a fresh `double* name`.
fn read_into(name: &str, m: usize) -> String {
    format!(
        "  double* {name} = malloc({} * 8); if (fread({name}, 8, {m}, in) != {m}) return 3;\n",
        m.max(1)
    )
}

/// A C program around kernel text `code` (with the prelude and the executor's fixed kernels)
/// whose `main` runs `body` (`in`, `o` open).
fn c_program(code: &str, body: &str) -> String {
    let mut c = module_source(&[]);
    c.push_str(RUNTIME);
    c.push_str(code);
    c.push_str(
        "#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int argc, char** argv) {\n  (void)argc;\n  FILE* in = fopen(argv[1], \"rb\");\n  FILE* o = fopen(argv[2], \"wb\");\n",
    );
    c.push_str(body);
    c.push_str("  fclose(o);\n  return 0;\n}\n");
    c
}

/// Run a combining kernel (`combine_source`) over `m` target elements, one thread after
/// another, adding into zeros (through the parts and `adj_add_parts` when it has parts).
fn emulate_combine(comb: &CombineSource, cv: &[f64], ci: Option<&[i64]>, m: usize) -> Vec<f64> {
    let mut body = String::new();
    let threads = m * comb.parts;
    let mut args = vec![format!("{threads}ULL"), "cv".to_string()];
    let mut input = bytes(cv);
    body.push_str(&read_into("cv", cv.len()));
    if let Some(ci) = ci {
        body.push_str(&read_into("cf", ci.len()));
        body.push_str("  const long long* ci = (const long long*)cf;\n");
        args.push("ci".into());
        input.extend(ci.iter().flat_map(|x| x.to_le_bytes()));
    }
    body.push_str(&format!(
        "  double* out = calloc({}, 8);\n  double* part = calloc({}, 8);\n",
        m.max(1),
        threads.max(1)
    ));
    args.push(if comb.parts > 1 { "part" } else { "out" }.into());
    body.push_str(&format!(
        "  for (adj_element = 0; adj_element < {}ULL; adj_element++) adj_combine({});\n",
        threads + 3,
        args.join(", ")
    ));
    if comb.parts > 1 {
        body.push_str(&format!(
            "  for (adj_element = 0; adj_element < {}ULL; adj_element++) adj_add_parts({m}ULL, {}ULL, part, out);\n",
            m + 3,
            comb.parts
        ));
    }
    body.push_str(&format!("  fwrite(out, 8, {m}, o);\n"));
    f64s(&run_c(&c_program(&comb.code, &body), &input))
}

/// Run `adj_scatter_direct` over the packed contributions `cv` with offsets `idx`.
fn emulate_direct(cv: &[f64], idx: &[i64], m: usize) -> Vec<f64> {
    let n = cv.len();
    let mut body = read_into("cv", n);
    body.push_str(&read_into("xf", n));
    body.push_str(&format!(
        "  const long long* idx = (const long long*)xf;\n  double* out = calloc({}, 8);\n\
         for (adj_element = 0; adj_element < {}ULL; adj_element++) adj_scatter_direct({n}ULL, cv, idx, out);\n\
         fwrite(out, 8, {m}, o);\n",
        m.max(1),
        n + 3
    ));
    let mut input = bytes(cv);
    input.extend(idx.iter().flat_map(|x| x.to_le_bytes()));
    f64s(&run_c(&c_program("", &body), &input))
}

#[test]
fn combining_kernels_reach_every_gmm_target() {
    // The scatter targets of the GMM gradient's kernels that have affine, one-to-one indices
    // are combined by an affine kernel (`compare_with` checks each against the interpreter):
    // all of them in the unrolled form (d < 4); in the matrix-product form all but one, the
    // triangular read of `icf` that builds `Q` (index arithmetic), which a scanning kernel takes.
    for (d, non_affine) in [(3, 0), (5, 1)] {
        let (gmm, ks) = gmm_gradient_kernels(12, d, 4);
        let mut seen = 0;
        for kern in &ks {
            let src = kernel_source(kern, "k").unwrap();
            for t in 0..kern.targets.len() {
                let js: Vec<usize> = (0..src.scatters.len())
                    .filter(|&j| src.scatters[j] == t)
                    .collect();
                let m = p_len(&gmm.program, kern.targets[t]);
                if !js.is_empty() && combine_source(kern, t, &js, m, "c").is_none() {
                    seen += 1;
                }
            }
        }
        assert_eq!(
            seen, non_affine,
            "d = {d}: targets without an affine combining kernel"
        );
    }
    let (_gmm, ks) = gmm_gradient_kernels(12, 3, 4);
    let mut targets = 0;
    for kern in &ks {
        let src = kernel_source(kern, "k").unwrap();
        targets += (0..kern.targets.len())
            .filter(|&t| src.scatters.contains(&t))
            .count();
    }
    assert!(targets >= 3, "GMM scatters into {targets} targets");
    // The executor's kernels write no target offsets for affine targets, and still compile.
    let mut unindexed = 0;
    for kern in &ks {
        let src = kernel_source_layout(
            kern,
            "adj_k",
            Roots::Separate,
            &|t| !affine_target(kern, t),
            false,
        )
        .unwrap();
        for (j, &t) in src.scatters.iter().enumerate() {
            assert_eq!(src.indexed[j], !affine_target(kern, t));
            unindexed += usize::from(!src.indexed[j]);
            assert_eq!(src.code.contains(&format!("ci{j}[e]")), src.indexed[j]);
        }
        run_c(&c_program(&src.code, ""), &[]);
    }
    assert!(unindexed >= 3);
}

#[test]
fn position_only_indices_are_combined_directly() {
    // GMM's triangular read of `icf` (d = 5) is not affine, but each element's index is
    // arithmetic on its position, and no two land on one element: the executor adds each
    // contribution where it lands (`compare_with` checks the sums against the interpreter).
    let before = STATIC.load(Ordering::Relaxed);
    case_gmm_kernels(&emulate);
    assert!(STATIC.load(Ordering::Relaxed) > before);
    let (_gmm, ks) = gmm_gradient_kernels(12, 5, 4);
    let mut found = 0;
    for kern in &ks {
        let src = kernel_source(kern, "k").unwrap();
        for t in 0..kern.targets.len() {
            if src.scatters.contains(&t) && !affine_target(kern, t) {
                assert!(static_offsets(kern, t, src.scatters.len(), 1 << 26).is_some());
                found += 1;
            }
        }
    }
    assert_eq!(found, 1, "GMM's non-affine targets");
    // Not position-only, or not one-to-one, or past the limit: no offsets.
    let non_affine = |p: &Program, inputs: &[&[f64]]| -> Vec<Option<Vec<i64>>> {
        p.gradient_a(inputs).unwrap();
        let mut v = Vec::new();
        for kern in kernels(p) {
            let src = kernel_source(&kern, "k").unwrap();
            for t in 0..kern.targets.len() {
                if src.scatters.contains(&t) && !affine_target(&kern, t) {
                    v.push(static_offsets(&kern, t, src.scatters.len(), 1 << 26));
                }
            }
        }
        v
    };
    let data = ramp(6, 0.0, 5.0);
    // an index read from the data
    let b = Builder::new();
    let x = b.input(&[6]);
    let y = b.generate(&[6], |i| {
        let j = x.at(&[i[0]]).abs().floor().imod(3.0);
        x.at(&[j]) * x.at(&[i[0]])
    });
    let offs = non_affine(&b.build_scalar(&y.sum()).unwrap(), &[&data]);
    assert!(!offs.is_empty() && offs.iter().all(|o| o.is_none()));
    // two elements reading one (`x[⌊i/2⌋]`)
    let b = Builder::new();
    let x = b.input(&[6]);
    let y = b.generate(&[6], |i| x.at(&[(i[0] * 0.5).floor()]).sin());
    let offs = non_affine(&b.build_scalar(&y.sum()).unwrap(), &[&data]);
    assert!(!offs.is_empty() && offs.iter().all(|o| o.is_none()));
    // A live offset past the end (`x[i + 1]` at i = 5, unguarded) never reaches an adjoint:
    // the forward kernel reads the same index and reports it (on the GPU too:
    // `programs_on_the_gpu`'s bad-index case); `static_offsets` would refuse it (`at >= len`).
    let b = Builder::new();
    let x = b.input(&[6]);
    let y = b.generate(&[6], |i| x.at(&[(i[0] + 1.0).floor()]).sin());
    let e = b
        .build_scalar(&y.sum())
        .unwrap()
        .gradient_a(&[&data])
        .unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
    // a reversal (`x[5 − i]`) and a shifted read under a position-only guard whose off element
    // would read out of bounds (`w[i + 1]` for i < 5): each one-to-one
    let b = Builder::new();
    let x = b.input(&[6]);
    let w = b.input(&[6]);
    let y = b.generate(&[6], |i| {
        let r = x.at(&[(i[0] * -1.0 + 5.0).floor()]);
        i[0].lt(5.0).select(w.at(&[(i[0] + 1.0).floor()]) * r, r)
    });
    let p = b.build_scalar(&y.sum()).unwrap();
    let wd = ramp(6, -1.0, 2.0);
    let offs = non_affine(&p, &[&data, &wd]);
    assert_eq!(offs.len(), 2);
    for o in offs {
        let o = o.expect("position-only offsets");
        let mut live: Vec<i64> = o.into_iter().filter(|&v| v >= 0).collect();
        live.sort();
        assert!(
            live == [0, 1, 2, 3, 4, 5] || live == [1, 2, 3, 4, 5],
            "{live:?}"
        );
    }
    let n = check_program(&p, &[data, wd], (-1.0, 1.0, 0.0), &emulate);
    assert!(n >= 1);
}

/// The length of graph node `key`.
fn p_len(p: &Program, key: u32) -> usize {
    p.g.nodes[key as usize].shape.iter().product()
}

#[test]
fn reads_whose_guards_read_each_other_match_the_interpreter() {
    // A cycle through guards: one read's guard is dropped, its offset quiet (element 0 where
    // out of bounds) and its bounds checked by a later offset with the guard (the CUDA C's
    // `if (bad_) o_ = 0;` and a reporting offset), value and gradient kernels alike.
    let n = 6;
    let b = Builder::new();
    let x = b.input(&[n]);
    let last = n as f64 - 1.0;
    let z = b.generate(&[n], |i| {
        let (c1, c2) = (i[0].gt(0.0), i[0].lt(last));
        let (up, down) = (i[0] + 1.0, i[0] - 1.0);
        let t1 = cond(
            c1,
            cond(x.at(&[down]).gt(0.0).and(c2), x.at(&[up]), elit(0.0)),
            elit(0.0),
        );
        let t2 = cond(
            c2,
            cond(x.at(&[up]).gt(0.0).and(c1), x.at(&[down]), elit(0.0)),
            elit(0.0),
        );
        t1 + t2 * 2.0
    });
    let p = b.build_scalar(&z.map(|v| v * v).sum()).unwrap();
    let quiet = |p: &Program| {
        kernels(p).iter().any(|k| {
            k.ops
                .iter()
                .any(|op| matches!(op, KOp::Offset { quiet: true, .. }))
        })
    };
    check_program(&p, &[ramp(n, -1.0, 1.0)], (-1.0, 1.0, 0.0), &emulate);
    assert!(quiet(&p), "the program has a quiet offset");
}

#[test]
fn combining_kernels_match_the_interpreter() {
    // `compare_with` runs every combining kernel of the cases; the GMM case has several.
    let before = COMBINED.load(Ordering::Relaxed);
    case_gmm_kernels(&emulate);
    case_indices_reads_selects_and_discrete_ops(&emulate);
    assert!(COMBINED.load(Ordering::Relaxed) >= before + 3);
    // Long sums (300 · 2 terms per element of `w`, 300 per element of `v`) in parts.
    let split = SPLIT.load(Ordering::Relaxed);
    let b = Builder::new();
    let x = b.input(&[300, 2, 4]);
    let w = b.input(&[4]);
    let v = b.input(&[2, 4]);
    let y = b.generate(&[300, 2, 4], |i| {
        x.at(&[i[0], i[1], i[2]]) * w.at(&[i[2]]) + v.at(&[i[1], i[2]]).sin()
    });
    let p = b.build_scalar(&y.reshape(&[2400]).sum()).unwrap();
    let inputs = [ramp(2400, -1.0, 1.0), ramp(4, 0.5, 1.5), ramp(8, -0.5, 0.5)];
    check_program(&p, &inputs, (-1.0, 1.0, 0.0), &emulate);
    assert!(
        SPLIT.load(Ordering::Relaxed) >= split + 2,
        "sums split into parts"
    );
    assert!(
        DIRECT.load(Ordering::Relaxed) >= 1,
        "a target combined directly"
    );
}

#[test]
fn packed_contributions_are_the_separate_ones() {
    // The executor packs every scatter's contributions into one array; they must be exactly
    // what the per-scatter layout writes.
    let (_gmm, ks) = gmm_gradient_kernels(12, 3, 4);
    let mut checked = 0;
    for kern in ks {
        let kern = (*kern).clone().with_jit(false);
        if kern.targets.is_empty() {
            continue;
        }
        let len: usize = kern.space.iter().product();
        let params: Vec<Vec<f64>> = (0..kern.params.len())
            .map(|p| ramp(len, -0.5, 0.5 + p as f64))
            .collect();
        let arrays: Vec<Vec<f64>> = kern
            .array_shapes
            .iter()
            .map(|sh| ramp(sh.iter().product(), -0.7, 0.8))
            .collect();
        let a = emulate_layout(&kern, &params, &arrays, false);
        let b = emulate_layout(&kern, &params, &arrays, true);
        assert_eq!(a.contributions, b.contributions);
        assert_eq!(a.roots, b.roots);
        checked += 1;
    }
    assert!(checked >= 3);
}

#[test]
fn a_non_affine_scatter_has_no_combining_kernel() {
    // `x[⌊x⌋ mod 3]`: the index depends on data, so the executor combines it on the host.
    let b = Builder::new();
    let x = b.input(&[6]);
    let y = b.generate(&[6], |i| {
        let j = x.at(&[i[0]]).abs().floor().imod(3.0);
        x.at(&[j]) * x.at(&[i[0]])
    });
    let p = b.build_scalar(&y.sum()).unwrap();
    p.gradient_a(&[&ramp(6, 0.0, 5.0)]).unwrap();
    let mut seen = false;
    for kern in kernels(&p) {
        let ks = kernel_source(&kern, "k").unwrap();
        for t in 0..kern.targets.len() {
            let js: Vec<usize> = (0..ks.scatters.len())
                .filter(|&j| ks.scatters[j] == t)
                .collect();
            let m = p_len(&p, kern.targets[t]);
            if !js.is_empty() && combine_source(&kern, t, &js, m, "c").is_none() {
                seen = true;
            }
        }
    }
    assert!(
        seen,
        "the data-dependent read's scatter was given a combining kernel"
    );
}

#[test]
fn interleaved_roots_are_the_cpu_layout() {
    // A `generate_n` stores its results interleaved, `[space.., n]`, on either backend.
    let b = Builder::new();
    let x = b.input(&[5]);
    let y = b.generate_n(&[5], 3, |i| {
        let v = x.at(&[i[0]]);
        vec![v * 2.0, v.sin(), v * i[0]]
    });
    let p = b.build(&[&y]).unwrap();
    let xs = ramp(5, -1.0, 2.0);
    let want = p.run(&[&xs]).unwrap()[0].data().to_vec();
    let kern =
        p.g.primal
            .iter()
            .find_map(|c| c.get().cloned())
            .expect("a kernel");
    let ks = kernel_source_layout(&kern, "k", Roots::Interleaved, &|_| true, false).unwrap();
    assert_eq!(ks.roots, 1);
    let mut body = String::new();
    let mut args = vec!["5ULL".to_string()];
    for q in 0..ks.params {
        body.push_str(&read_into(&format!("p{q}"), 5));
        args.push(format!("p{q}"));
    }
    for a in 0..ks.arrays {
        body.push_str(&read_into(&format!("a{a}"), 5));
        args.push(format!("a{a}"));
    }
    body.push_str("  double* r0 = calloc(15, 8);\n  unsigned long long bad = ~0ULL;\n");
    args.push("r0".into());
    args.push("&bad".into());
    body.push_str(&format!(
        "  for (adj_element = 0; adj_element < 8; adj_element++) k({});\n  fwrite(r0, 8, 15, o);\n",
        args.join(", ")
    ));
    let mut input = Vec::new();
    for _ in 0..ks.params + ks.arrays {
        input.extend(bytes(&xs));
    }
    let got = f64s(&run_c(&c_program(&ks.code, &body), &input));
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert!(close(*a, *b), "{got:?} vs {want:?}");
    }
}

#[test]
fn executor_kernels_fold_multiply_and_broadcast() {
    // Row folds (short rows in one pass, long rows in parts then over the parts), matrix
    // products of strided views (a transpose), and broadcast adds, against plain loops.
    let rows = 3;
    let long = 2500; // > the executor's split length: 10 parts of 256
    let x: Vec<f64> = (0..rows * long)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
        .collect();
    let body = format!(
        "{}  double* part = calloc({p}, 8); double* fin = calloc({rows}, 8); double* sh = calloc({rows}, 8); double* mx = calloc({rows}, 8);\n\
         for (adj_element = 0; adj_element < {p}ULL; adj_element++) adj_fold_add({p}ULL, {long}ULL, 10ULL, 256ULL, x, part);\n\
         for (adj_element = 0; adj_element < {rows}ULL; adj_element++) adj_fold_add({rows}ULL, 10ULL, 1ULL, 10ULL, part, fin);\n\
         for (adj_element = 0; adj_element < {rows}ULL; adj_element++) adj_fold_add({rows}ULL, {long}ULL, 1ULL, {long}ULL, x, sh);\n\
         for (adj_element = 0; adj_element < {rows}ULL; adj_element++) adj_fold_max({rows}ULL, {long}ULL, 1ULL, {long}ULL, x, mx);\n\
         /* c = xᵀ-view (cols 0..4 of rows 0..2 as a 4×3 matrix) times a 3×2 matrix */\n\
         double b[6] = {{1.0, -2.0, 0.5, 3.0, -1.5, 2.5}}; double* c = calloc(8, 8);\n\
         for (adj_element = 0; adj_element < 4; adj_element++) adj_matmul(1ULL, 4ULL, 2ULL, 3ULL, x, 1ULL, {long}ULL, b, 2ULL, 1ULL, c);\n\
         /* a 5 × 7 view (x as rows of 7) times x[100..142] as 7 × 6: 2 × 2 blocks, cut at the edges */\n\
         double* c3 = calloc(30, 8);\n\
         for (adj_element = 0; adj_element < 7; adj_element++) adj_matmul(4ULL, 5ULL, 6ULL, 7ULL, x, 7ULL, 1ULL, x + 100, 6ULL, 1ULL, c3);\n\
         double d[6] = {{0}}; double bc[2] = {{1.5, -4.0}};\n\
         for (adj_element = 0; adj_element < 6; adj_element++) adj_add_bc(6ULL, 3ULL, d, bc);\n\
         for (adj_element = 0; adj_element < 6; adj_element++) adj_add(6ULL, d, b);\n\
         /* a 2 × 300 view (rows of x) times x[0..900] as 300 × 3, the inner dimension in 5 parts of 64 */\n\
         double* mp = calloc(30, 8); double* c2 = calloc(6, 8);\n\
         for (adj_element = 0; adj_element < 8; adj_element++) adj_matmul_parts(5ULL, 2ULL, 3ULL, 300ULL, 1ULL, 64ULL, x, {long}ULL, 1ULL, x, 3ULL, 1ULL, mp);\n\
         for (adj_element = 0; adj_element < 6; adj_element++) adj_add_parts(6ULL, 5ULL, mp, c2);\n\
         fwrite(fin, 8, {rows}, o); fwrite(sh, 8, {rows}, o); fwrite(mx, 8, {rows}, o); fwrite(c, 8, 8, o); fwrite(d, 8, 6, o); fwrite(c2, 8, 6, o); fwrite(c3, 8, 30, o);\n",
        read_into("x", rows * long),
        p = rows * 10,
    );
    let got = f64s(&run_c(&c_program("", &body), &bytes(&x)));
    for r in 0..rows {
        let row = &x[r * long..(r + 1) * long];
        let seq: f64 = row.iter().sum();
        let parts: f64 = row.chunks(256).map(|c| c.iter().sum::<f64>()).sum();
        assert_eq!(got[r], parts, "row {r}: in parts, then over the parts");
        assert_eq!(got[rows + r], seq, "row {r}: one pass, left to right");
        assert_eq!(
            got[2 * rows + r],
            row.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        );
    }
    let b = [1.0, -2.0, 0.5, 3.0, -1.5, 2.5];
    for i in 0..4 {
        for j in 0..2 {
            let want: f64 = (0..3).map(|k| x[k * long + i] * b[k * 2 + j]).sum();
            assert_eq!(got[3 * rows + i * 2 + j], want, "c[{i}, {j}]");
        }
    }
    let d: Vec<f64> = (0..6).map(|e| [1.5, -4.0][e / 3] + b[e]).collect();
    assert_eq!(&got[3 * rows + 8..3 * rows + 14], &d[..]);
    for i in 0..2 {
        for j in 0..3 {
            let want: f64 = (0..5)
                .map(|p| {
                    (p * 64..(p * 64 + 64).min(300))
                        .map(|k| x[i * long + k] * x[k * 3 + j])
                        .sum::<f64>()
                })
                .sum();
            assert_eq!(
                got[3 * rows + 14 + i * 3 + j],
                want,
                "split product [{i}, {j}]"
            );
        }
    }
    // blocks of 4 × 4 cut at the edges: every element, in the order of k
    for i in 0..5 {
        for j in 0..6 {
            let want = (0..7).fold(0.0, |s, k| s + x[i * 7 + k] * x[100 + k * 6 + j]);
            assert_eq!(
                got[3 * rows + 20 + i * 6 + j],
                want,
                "block product [{i}, {j}]"
            );
        }
    }
}

// (The tiling plan and the block size live in the device layer, behind the feature.)
#[cfg(feature = "cuda")]
#[test]
fn tiled_products_equal_sums_in_the_order_of_k() {
    // `adj_matmul_tiled` run as the emulation runs it (one thread doing a block's 256 threads'
    // work, block by block): every element equal, bit for bit, to its sum in the order of k
    // from 0.0 (with one part, what `adj_mm_block` computes), and each part's sums added in
    // order by `adj_add_parts`. Shapes cut at the tiles' edges, views that are transposes
    // (neither operand's unit stride along the staged axis), an empty inner dimension, an empty
    // product, and products whose inner dimension `tiled_plan` splits into parts. Every array
    // ends where a page that may not be read begins (`guarded`), so a read or write past the
    // end of an operand or a result stops the program. (Barriers cannot be checked here: one
    // emulated thread never races itself.)
    use super::run::{tiled_plan, TM};
    assert!(RUNTIME.contains(&format!(
        "#define ADJ_TILE_THREADS {}",
        super::device::BLOCK
    )));
    assert!(RUNTIME.contains(&format!("#define ADJ_TM {TM}")));
    let guard = "#include <sys/mman.h>\n\
        /* n doubles ending where an unreadable page begins */\n\
        static double* guarded(size_t n) {\n\
          size_t bytes = n * 8, page = 4096, pages = (bytes + page - 1) / page;\n\
          char* m = mmap(0, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n\
          if (m == MAP_FAILED || mprotect(m + pages * page, page, PROT_NONE) != 0) abort();\n\
          return (double*)(m + pages * page - bytes);\n\
        }\n";
    let x: Vec<f64> = (0..120_000)
        .map(|i| ((i * 7919 % 2003) as f64 - 1001.0) / 97.0)
        .collect();
    // (rows, cols, inner, a transposed, b transposed)
    let cases = [
        (70, 130, 37, false, false),
        (65, 3, 16, true, false),
        (1, 64, 17, false, true),
        (5, 7, 0, false, false),
        (0, 5, 300, false, false),
        (3, 70, 900, false, false),
        (66, 2, 300, true, true),
        (130, 66, 40, true, true),
    ];
    let mut body = read_into("x", x.len());
    let mut want = Vec::new();
    for (c, &(rows, cols, inner, at, bt)) in cases.iter().enumerate() {
        let (tiles, parts, chunk) = tiled_plan(rows, cols, inner);
        assert!(parts * chunk >= inner && (parts - 1) * chunk < inner.max(1));
        if inner > 256 && rows * cols > 0 {
            assert!(
                parts > 1,
                "case {c}: a long inner dimension under few tiles is split"
            );
        }
        // a: rows × inner from x[0..], b: inner × cols from x[50000..], each copied into an
        // array of exactly its size
        let (ars, acs) = if at { (1, rows) } else { (inner, 1) };
        let (brs, bcs) = if bt { (1, inner) } else { (cols, 1) };
        let (m, na, nb) = (rows * cols, rows * inner, inner * cols);
        body += &format!(
            "  {{ double* a = guarded({na}); memcpy(a, x, {na} * 8); double* b = guarded({nb}); memcpy(b, x + 50000, {nb} * 8);
             double* part = guarded({pm}); double* c = guarded({m}); memset(c, 0, {m} * 8);
             for (adj_element = 0; adj_element < {n}ULL; adj_element++) adj_matmul_tiled({n}ULL, {rows}ULL, {cols}ULL, {inner}ULL, {chunk}ULL, a, {ars}ULL, {acs}ULL, b, {brs}ULL, {bcs}ULL, part);
             for (adj_element = 0; adj_element < {m}ULL; adj_element++) adj_add_parts({m}ULL, {parts}ULL, part, c);
             fwrite(c, 8, {m}, o); }}
",
            pm = m * parts,
            n = tiles * parts,
        );
        for i in 0..rows {
            for j in 0..cols {
                let sum = |ks: std::ops::Range<usize>| {
                    ks.fold(0.0, |s, k| {
                        s + x[i * ars + k * acs] * x[50000 + k * brs + j * bcs]
                    })
                };
                // the parts in order, each from 0.0 (one part: the whole sum)
                let w =
                    (0..parts).fold(0.0, |s, p| s + sum(p * chunk..((p + 1) * chunk).min(inner)));
                want.push((c, i, j, w));
            }
        }
    }
    let program = format!("#define _DEFAULT_SOURCE\n{}", c_program(guard, &body));
    let got = f64s(&run_c(&program, &bytes(&x)));
    assert_eq!(got.len(), want.len());
    for (g, (c, i, j, w)) in got.iter().zip(&want) {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "case {c}: c[{i}, {j}] = {g}, want {w}"
        );
    }
}

/// Every primal and adjoint kernel a program made while computing its gradient.
fn kernels(p: &Program) -> Vec<Arc<Kernel>> {
    let mut ks = Vec::new();
    for (i, cell) in p.g.primal.iter().enumerate() {
        ks.extend(cell.get().cloned());
        ks.extend(p.g.adjoint[i].lock().unwrap().values().cloned());
    }
    ks
}

use std::sync::Arc;

/// Build, take the gradient on the CPU, then check every kernel it used.
fn check_program(p: &Program, inputs: &[Vec<f64>], data: (f64, f64, f64), run: Runner) -> usize {
    let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
    p.gradient_a(&refs).expect("gradient on the CPU");
    let ks = kernels(p);
    assert!(!ks.is_empty());
    for (s, k) in ks.iter().enumerate() {
        compare_with(k, s as u64 + 1, data, run);
    }
    ks.len()
}

/// ADBench's GMM program for (n, d, K) ([`crate::models::Gmm::new`]) and ramp data for its
/// inputs.
fn gmm_case(n: usize, d: usize, k: usize) -> (crate::models::Gmm, Vec<Vec<f64>>) {
    gmm_case_form(n, d, k, d >= crate::models::NORMS_AS_ARRAYS_MIN_D)
}

/// [`gmm_case`] with the squared norms as sums over arrays or unrolled.
fn gmm_case_form(
    n: usize,
    d: usize,
    k: usize,
    arrays: bool,
) -> (crate::models::Gmm, Vec<Vec<f64>>) {
    let gmm = crate::models::Gmm::with_norms_as_arrays(n, d, k, 1.0, 0.0, arrays).unwrap();
    let icf = d * (d + 1) / 2;
    let inputs = vec![
        ramp(k, -0.3, 0.4),
        ramp(k * d, -1.0, 1.0),
        ramp(k * icf, -0.2, 0.3),
        ramp(n * d, -1.5, 1.5),
    ];
    (gmm, inputs)
}

/// [`gmm_case`]'s program after a gradient on the CPU, with every kernel that gradient used.
fn gmm_gradient_kernels(n: usize, d: usize, k: usize) -> (crate::models::Gmm, Vec<Arc<Kernel>>) {
    let (gmm, inputs) = gmm_case(n, d, k);
    let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
    gmm.program.gradient_a(&refs).unwrap();
    let ks = kernels(&gmm.program);
    (gmm, ks)
}

fn ramp(n: usize, a: f64, b: f64) -> Vec<f64> {
    (0..n)
        .map(|i| a + (b - a) * i as f64 / n.max(2) as f64)
        .collect()
}

#[test]
fn every_primitive_in_a_map_and_its_adjoint() {
    case_every_primitive_in_a_map_and_its_adjoint(&emulate);
}

fn case_every_primitive_in_a_map_and_its_adjoint(run: Runner) {
    for &op in Op1::ALL {
        let b = Builder::new();
        let x = b.input(&[40]);
        let y = x.map(move |v| (v * 0.5 + 0.7).un(op) * v);
        let p = b.build_scalar(&y.sum()).unwrap();
        let n = check_program(&p, &[ramp(40, 0.1, 0.9)], (0.05, 0.95, 0.0), run);
        assert!(n >= 2, "{op:?}: a primal and an adjoint kernel");
    }
    for &op in Op2::ALL {
        let b = Builder::new();
        let x = b.input(&[30]);
        let y = b.input(&[30]);
        let z = x.zip_with(&y, move |a, c| (a + 0.2).bin(op, c * 1.5) + a * c);
        let p = b.build_scalar(&z.sum()).unwrap();
        check_program(
            &p,
            &[ramp(30, 0.1, 0.9), ramp(30, 0.3, 1.2)],
            (0.05, 0.95, 0.0),
            run,
        );
    }
}

#[test]
fn indices_reads_selects_and_discrete_ops() {
    case_indices_reads_selects_and_discrete_ops(&emulate);
}

fn case_indices_reads_selects_and_discrete_ops(run: Runner) {
    // A generate that reads two arrays at computed indices, branches with cond, and uses
    // floor, idiv, imod and comparisons: gathers, guarded reads and scatter-adds.
    let b = Builder::new();
    let m = b.input(&[6, 5]);
    let v = b.input(&[5]);
    let (m2, v2) = (m, v);
    let g = b.generate(&[6, 5, 4], move |ix| {
        let (i, j, l) = (ix[0], ix[1], ix[2]);
        let a = m2.at(&[i, (j + l).imod(5.0)]);
        let w = v2.at(&[(j * 3.0 + l).imod(5.0)]);
        let t = (a * 7.0).floor() + (l + 1.0).idiv(2.0);
        cond(
            a.gt(w).and(i.lt(4.0)),
            a * w + t,
            (w * 0.5).exp() - a.sin() * j,
        )
    });
    let p = b.build_scalar(&g.reshape(&[120]).sum()).unwrap();
    let n = check_program(
        &p,
        &[ramp(30, -0.5, 1.5), ramp(5, 0.1, 0.9)],
        (-0.5, 1.5, 0.0),
        run,
    );
    assert!(n >= 2);
}

#[test]
fn every_discrete_operation() {
    case_every_discrete_operation(&emulate);
}

fn case_every_discrete_operation(run: Runner) {
    // Each of the 15 discrete operations, weighted so that a wrong one changes the sum; the
    // data has halves and equal pairs (ties for the comparisons, .5 for round).
    let b = Builder::new();
    let x = b.input(&[40]);
    let y = b.input(&[40]);
    let z = x.zip_with(&y, |a, c| {
        let terms = [
            a.floor(),
            a.ceil(),
            a.round(),
            a.trunc(),
            a.lt(c),
            a.le(c),
            a.gt(c),
            a.ge(c),
            a.eq(c),
            a.ne(c),
            a.gt(0.0).and(c.gt(0.0)),
            a.gt(0.0).or(c.gt(0.0)),
            !a.gt(0.0),
            a.idiv(c + 2.5),
            a.imod(c + 2.5),
        ];
        let mut sum = a * c;
        for (i, t) in terms.into_iter().enumerate() {
            sum += t * (i as f64 + 1.0).sqrt();
        }
        sum
    });
    let p = b.build_scalar(&z.sum()).unwrap();
    let xs: Vec<f64> = (0..40).map(|i| (i as f64 - 20.0) * 0.25).collect();
    let ys: Vec<f64> = (0..40)
        .map(|i| {
            if i % 3 == 0 {
                (i as f64 - 20.0) * 0.25
            } else {
                1.0 - i as f64 * 0.1
            }
        })
        .collect();
    check_program(&p, &[xs, ys], (-2.5, 2.5, 0.25), run);
}

#[test]
fn out_of_bounds_indices_are_flagged() {
    case_out_of_bounds_indices_are_flagged(&emulate);
}

fn case_out_of_bounds_indices_are_flagged(run: Runner) {
    // An index read from data: in bounds for data in [0, 5), out of bounds for some in [−3, 9).
    let b = Builder::new();
    let idx = b.constant_input(&[64]);
    let v = b.input(&[5]);
    let v2 = v;
    let y = idx.map(move |i| v2.at(&[i.floor()]) * 2.0);
    let p = b.build_scalar(&y.sum()).unwrap();
    p.gradient_a(&[&ramp(64, 0.0, 4.9), &ramp(5, 0.0, 1.0)])
        .unwrap();
    let ks = kernels(&p);
    let mut flagged = 0;
    for (s, k) in ks.iter().enumerate() {
        assert!(
            !compare_with(k, s as u64 + 1, (0.0, 4.99, 0.0), run),
            "in bounds"
        );
        flagged += usize::from(compare_with(k, s as u64 + 1, (-3.0, 9.0, 0.0), run));
    }
    assert!(flagged > 0, "some kernel met a bad index");
}

#[test]
fn gmm_kernels() {
    case_gmm_kernels(&emulate);
}

fn case_gmm_kernels(run: Runner) {
    let (gmm, inputs) = gmm_case(12, 3, 4);
    let count = check_program(&gmm.program, &inputs, (-1.0, 1.0, 0.0), run);
    assert!(count >= 3, "GMM uses {count} kernels");
    // the matrix-product form, its squared norms unrolled and as sums over arrays
    for arrays in [false, true] {
        let (gmm, inputs) = gmm_case_form(9, 5, 3, arrays);
        let count = check_program(&gmm.program, &inputs, (-1.0, 1.0, 0.0), run);
        assert!(count >= 3, "GMM d = 5 uses {count} kernels");
    }
}

#[test]
fn lstm_kernels() {
    case_lstm_kernels(&emulate);
}

/// ADBench's LSTM: a `scan_n` step kernel over `[steps] ++ lanes`, its adjoint (state
/// adjoints and scatters into the weights), the init kernels and the loss kernels.
fn case_lstm_kernels(run: Runner) {
    let (l, c, b) = (2, 5, 3);
    let lstm = crate::models::Lstm::new(l, c, b).unwrap();
    let seq: Vec<f64> = (0..c * b)
        .map(|i| f64::from(u8::from(i % 2 == 0)))
        .collect();
    let inputs = vec![
        ramp(8 * l * b, -0.5, 0.5),
        ramp(3 * b, -0.4, 0.6),
        ramp(2 * l * b, 0.1, 0.9),
        seq,
    ];
    let count = check_program(&lstm.program, &inputs, (-1.0, 1.0, 0.0), run);
    assert!(count >= 6, "the LSTM uses {count} kernels");
}

#[test]
fn folds_scans_permute_and_replicate() {
    case_folds_scans_permute_and_replicate(&emulate);
}

fn case_folds_scans_permute_and_replicate(run: Runner) {
    let b = Builder::new();
    let x = b.input(&[4, 6]);
    let s = x.scanl(0.5, |a, c| a * 0.9 + c.sin());
    let f = x.fold(1.0, |a, c| a * 0.5 + c * c);
    let r = f.replicate(&[Rep::All, Rep::New(6)]);
    let zero = b.generate(&[3], |_| elit(0.0));
    let perm = x.permute(Combine::Add, &zero, |ix| {
        (elit(1.0), vec![(ix[0] + ix[1]).imod(3.0)])
    });
    let (ss, rs, ps) = (s.reshape(&[28]).sum(), r.reshape(&[24]).sum(), perm.sum());
    let out = b.generate(&[], move |_| ss.the() + rs.the() + ps.the());
    let p = b.build_scalar(&out).unwrap();
    check_program(&p, &[ramp(24, -1.0, 1.0)], (-1.0, 1.0, 0.0), run);
}

#[test]
fn f32_kernels_are_refused_with_a_clear_error() {
    let b = Builder::new();
    let x = b.input_f32(&[8]);
    let y = x.map(|v| v.exp());
    let p = b.build_scalar(&y.sum()).unwrap();
    let xs = [0.5f32; 8];
    p.gradient_typed(&[xs.as_slice().into()]).unwrap();
    let ks = kernels(&p);
    let e = ks
        .iter()
        .find_map(|k| kernel_source(k, "k").err())
        .expect("an f32 kernel is refused");
    assert!(e.to_string().contains("f32"), "{e}");
}

/// The same cases on a GPU, and run-to-run bit identity: only with `ADJOINT_CUDA_TESTS=1` (and
/// the `cuda` feature), where the machine has an NVIDIA GPU with its driver and NVRTC.
#[cfg(feature = "cuda")]
#[test]
fn on_the_gpu() {
    use super::device::Gpu;
    let gpu = Gpu::new();
    if std::env::var("ADJOINT_CUDA_TESTS").as_deref() != Ok("1") {
        // Without a GPU, creating the backend is a clear error, never a panic.
        if let Err(e) = gpu {
            assert!(
                e.to_string().starts_with("CUDA backend unavailable: "),
                "{e}"
            );
        }
        eprintln!("GPU tests skipped: set ADJOINT_CUDA_TESTS=1 on a machine with a GPU");
        return;
    }
    let gpu = gpu.expect("ADJOINT_CUDA_TESTS=1 but no GPU");
    let on_gpu = |k: &Kernel, params: &[Vec<f64>], arrays: &[Vec<f64>]| -> Emulated {
        let p: Vec<_> = params.iter().map(|p| gpu.upload(p).unwrap()).collect();
        let a: Vec<_> = arrays.iter().map(|a| gpu.upload(a).unwrap()).collect();
        let pr: Vec<_> = p.iter().collect();
        let ar: Vec<_> = a.iter().collect();
        let run = || {
            let l = gpu.launch(k, &pr, &ar).expect("launch");
            let roots: Vec<Vec<f64>> = l.roots.iter().map(|r| gpu.download(r).unwrap()).collect();
            let contributions: Vec<(Vec<f64>, Vec<i64>)> = l
                .contributions
                .iter()
                .map(|(v, i)| (gpu.download(v).unwrap(), gpu.download(i).unwrap()))
                .collect();
            Emulated {
                roots,
                contributions,
                bad: l.bad.unwrap_or(u64::MAX),
            }
        };
        let first = run();
        let second = run();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (a, b) in first.roots.iter().zip(&second.roots) {
            assert_eq!(bits(a), bits(b), "roots bit-identical from run to run");
        }
        for (a, b) in first.contributions.iter().zip(&second.contributions) {
            assert_eq!(bits(&a.0), bits(&b.0), "contributions bit-identical");
            assert_eq!(a.1, b.1);
        }
        assert_eq!(first.bad, second.bad);
        first
    };
    case_every_primitive_in_a_map_and_its_adjoint(&on_gpu);
    case_indices_reads_selects_and_discrete_ops(&on_gpu);
    case_every_discrete_operation(&on_gpu);
    case_out_of_bounds_indices_are_flagged(&on_gpu);
    case_gmm_kernels(&on_gpu);
    case_lstm_kernels(&on_gpu);
    case_folds_scans_permute_and_replicate(&on_gpu);

    // Read-backs through the page-locked staging buffer (2¹⁶ values and more), a smaller one
    // after a larger one: the buffer stays larger than the copy (CUDA_ERROR_INVALID_VALUE
    // before `download_into` copied into its first `len` values only), and a part of a
    // larger device array.
    let big: Vec<f64> = (0..200_000).map(|i| i as f64 * 0.5 - 3.0).collect();
    for len in [150_000, 70_000, 200_000, 65_536] {
        let d = gpu.upload(&big[..len]).unwrap();
        let mut out = Vec::new();
        gpu.download_into(&d, len, &mut out).unwrap();
        assert_eq!(out, big[..len], "read back {len} values");
    }
    let d = gpu.upload(&big).unwrap();
    let mut out = Vec::new();
    gpu.download_into(&d, 100_000, &mut out).unwrap();
    assert_eq!(out, big[..100_000], "the first 100 000 of 200 000 values");
}

/// Whole programs on the GPU (`Backend::cuda`) against the CPU backend: values and gradients
/// to 1e-12 (relative), run-to-run bit identity, and the errors of what the GPU does not run.
/// Only with `ADJOINT_CUDA_TESTS=1` (and the `cuda` feature) on a machine with a GPU.
#[cfg(feature = "cuda")]
#[test]
fn programs_on_the_gpu() {
    use crate::Backend;
    if std::env::var("ADJOINT_CUDA_TESTS").as_deref() != Ok("1") {
        if let Err(e) = Backend::cuda() {
            assert!(
                e.to_string().starts_with("CUDA backend unavailable: "),
                "{e}"
            );
        }
        eprintln!("GPU tests skipped: set ADJOINT_CUDA_TESTS=1 on a machine with a GPU");
        return;
    }
    let gpu = Backend::cuda().expect("ADJOINT_CUDA_TESTS=1 but no GPU");
    let cpu = Backend::cpu();

    // A bad index is an error (first: quick, and a time limit on a cold machine cuts the slow
    // cases below, not this).
    let b = Builder::new();
    let x = b.input(&[4]);
    let y = b.generate(&[4], |i| x.at(&[i[0] + 1.0]));
    let p = b.build_scalar(&y.sum()).unwrap();
    let e = p.gradient_on(&gpu, &[&[1.0, 2.0, 3.0, 4.0]]).unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
    eprintln!("GPU: a bad index is an error");

    // Relative to the array's largest value: the GPU adds long sums in another (fixed) order
    // than the CPU's blocks, so a component that is a sum with cancellation (GMM's icf gradient
    // at n = 1000: 0.0112499529393590 vs …33594) differs by more than 1e-12 of itself.
    let near = |what: &str, a: &[f64], b: &[f64]| {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * scale + 1e-300 || (x.is_nan() && y.is_nan()),
                "{what}[{i}]: CPU {x} vs GPU {y} (largest |value| {scale})"
            );
        }
    };
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let check = |what: &str, p: &Program, inputs: &[Vec<f64>]| {
        let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
        let c = p.gradient_on(&cpu, &refs).unwrap();
        let g1 = p
            .gradient_on(&gpu, &refs)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let g2 = p.gradient_on(&gpu, &refs).unwrap();
        near(&format!("{what} value"), &[c.value], &[g1.value]);
        for (k, (a, b)) in c.grads.iter().zip(&g1.grads).enumerate() {
            near(&format!("{what} gradient {k}"), a, b);
        }
        assert_eq!(
            g1.value.to_bits(),
            g2.value.to_bits(),
            "{what}: value run to run"
        );
        for (a, b) in g1.grads.iter().zip(&g2.grads) {
            assert_eq!(bits(a), bits(b), "{what}: gradient run to run");
        }
        let o = p.run_on(&gpu, &refs).unwrap();
        near(&format!("{what} run_on"), &[c.value], o[0].data());
        eprintln!("GPU: {what}: value and gradient = CPU's, bit-identical twice");
    };

    // Maps, zips, sums, a fold (max), reshape, stop_gradient, matmul, a generate reading other
    // arrays at computed indices (scatters in the reverse pass), a broadcast adjoint.
    let b = Builder::new();
    let x = b.input(&[6, 5]);
    let w = b.input(&[5, 4]);
    let y = x.matmul(&w).map(|v| v.tanh());
    let mx = y.maximum().stop_gradient();
    let z = b.generate(&[6, 4], |i| {
        (y.at(&[i[0], i[1]]) - mx.at(&[i[0]])).exp() * w.at(&[i[1] + 1.0, i[1]])
    });
    let s = z.sum().zip_with(&mx, |a, m| a.ln() + m).sum();
    let sq = x.zip_with(&x, |a, c| a * c.sin()).reshape(&[30]).sum();
    let out = b.generate(&[], move |_| s.the() + sq.the() * 0.5);
    let p = b.build_scalar(&out).unwrap();
    let inputs = [ramp(30, -1.0, 1.2), ramp(20, -0.7, 0.9)];
    check("seed-004-style program", &p, &inputs);
    // And against central differences of the GPU's own values (independent of the CPU).
    let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
    let g = p.gradient_on(&gpu, &refs).unwrap();
    for (a, i) in [(0, 0), (0, 17), (1, 3), (1, 19)] {
        let h = 1e-6;
        let value_at = |dx: f64| {
            let mut xs = inputs.clone();
            xs[a][i] += dx;
            let r: Vec<&[f64]> = xs.iter().map(|v| v.as_slice()).collect();
            p.run_on(&gpu, &r).unwrap()[0].data()[0]
        };
        let fd = (value_at(h) - value_at(-h)) / (2.0 * h);
        assert!(
            (fd - g.grads[a][i]).abs() <= 1e-6 * (1.0 + fd.abs()),
            "input {a}[{i}]: GPU gradient {} vs central difference {fd}",
            g.grads[a][i]
        );
    }

    // A long row (folded in parts on the GPU).
    let b = Builder::new();
    let x = b.input(&[5000]);
    let p = b
        .build_scalar(&x.map(|v| (v * 0.01).sin() * v).sum())
        .unwrap();
    check("long sum", &p, &[ramp(5000, -3.0, 4.0)]);

    // Matrix products in tiles (shared memory and barriers, which the emulation cannot
    // check): tiles cut at the edges, transposes in the adjoint products, and a long inner
    // dimension split into parts.
    let b = Builder::new();
    let x = b.input(&[150, 130]);
    let w = b.input(&[130, 300]);
    let u = b.input(&[3, 900]);
    let v = b.input(&[900, 70]);
    let y = x.matmul(&w).map(|e| e.sin()).sum().sum();
    let z = u.matmul(&v).map(|e| e * e).sum().sum();
    let p = b
        .build_scalar(&y.zip_with(&z, |a, c| a + c * 1e-3))
        .unwrap();
    let inputs = [
        ramp(150 * 130, -1.0, 1.0),
        ramp(130 * 300, -0.5, 0.7),
        ramp(2700, -2.0, 2.0),
        ramp(900 * 70, -0.3, 0.2),
    ];
    check("matrix products", &p, &inputs);

    // A read whose index depends on data: combined on the host.
    let b = Builder::new();
    let x = b.input(&[6]);
    let y = b.generate(&[6], |i| {
        let j = x.at(&[i[0]]).abs().floor().imod(3.0);
        x.at(&[j]) * x.at(&[i[0]])
    });
    let p = b.build_scalar(&y.sum()).unwrap();
    check("data-dependent read", &p, &[ramp(6, 0.0, 5.0)]);

    // ADBench GMM: the unrolled kernels (d < 4) and the matrix-product form, its squared
    // norms unrolled (the CPU's form below d = 64) and as sums over arrays (the GPU's).
    for (n, d, k) in [(12, 3, 4), (200, 2, 5), (1000, 10, 25), (500, 20, 7)] {
        for arrays in [false, true] {
            if arrays && d < crate::models::MATMUL_MIN_D {
                continue;
            }
            let (gmm, mut inputs) = gmm_case_form(n, d, k, arrays);
            inputs[3] = (0..n * d)
                .map(|i| ((i * 7919 % 1000) as f64 / 500.0) - 1.0)
                .collect();
            let form = if arrays { "arrays" } else { "unrolled" };
            check(
                &format!("GMM n = {n}, d = {d}, K = {k}, norms {form}"),
                &gmm.program,
                &inputs,
            );
        }
    }

    // ADBench BA: the Jacobian blocks (a generate_n, stored interleaved); p = 3000 makes
    // 90 000 values, read back through page-locked memory (≥ 2¹⁶ values).
    let (n, m, p) = (5, 40, 3000);
    let ba = crate::models::Ba::new(n, m, p).unwrap();
    let cams: Vec<f64> = (0..n * 11).map(|i| 0.1 + (i % 11) as f64 * 0.05).collect();
    let xs: Vec<f64> = (0..m * 3)
        .map(|i| 0.2 * (i % 3) as f64 - 0.1 + i as f64 * 1e-3)
        .collect();
    let ws = vec![0.8; p];
    let feats: Vec<f64> = (0..p * 2).map(|i| 100.0 + i as f64).collect();
    let obs: Vec<f64> = (0..p)
        .flat_map(|i| [(i % n) as f64, (i % m) as f64])
        .collect();
    let (mut on_cpu, mut on_gpu, mut again) = (Vec::new(), Vec::new(), Vec::new());
    ba.blocks_on(&cpu, &cams, &xs, &ws, &feats, &obs, &mut on_cpu)
        .unwrap();
    ba.blocks_on(&gpu, &cams, &xs, &ws, &feats, &obs, &mut on_gpu)
        .unwrap();
    ba.blocks_on(&gpu, &cams, &xs, &ws, &feats, &obs, &mut again)
        .unwrap();
    near("BA blocks", &on_cpu, &on_gpu);
    assert_eq!(bits(&on_gpu), bits(&again), "BA blocks run to run");
    eprintln!("GPU: BA blocks = CPU's, bit-identical twice");

    // Nodes the host runs inside a GPU program (`run.rs`'s `placement`), between nodes the GPU
    // runs: their operands read back, their results and adjoints uploaded.
    for (what, p, inputs) in host_node_programs() {
        check(what, &p, &inputs);
    }
}

/// Programs with the nodes the CUDA backend runs on the host (`run.rs`'s `placement`: scans,
/// `scan_n`, permutes, folds other than sums, `awhile`, `acond`'s condition), between nodes
/// the GPU runs, with inputs: the GPU test compares them with the CPU backend, and
/// `host_node_programs_are_right` checks them on the CPU against finite differences.
fn host_node_programs() -> Vec<(&'static str, Program, Vec<Vec<f64>>)> {
    let mut out = Vec::new();
    let data = |n: usize, seed: u64| -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2654435761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
            .collect()
    };
    let b = Builder::new();
    let x = b.input(&[3, 5]);
    let y = x
        .map(|v| v.sin())
        .scanl(0.5, |a, c| a * c + c)
        .map(|v| v * v);
    let z = x.scanr(1.0, |a, c| a.max(c)).sum().sum();
    let p = b
        .build_scalar(&y.sum().sum().zip_with(&z, |u, v| u + v))
        .unwrap();
    out.push(("scanl (general step), scanr (max)", p, vec![data(15, 1)]));
    let b = Builder::new();
    let a = b.input(&[8]);
    let d = b.input(&[3]);
    let h1 = a
        .map(|v| v * 2.0)
        .permute(Combine::Add, &d, |i| (i[0].ne(5.0), vec![i[0].imod(3.0)]));
    let h2 = a.permute(Combine::Max, &d, |i| (elit(1.0), vec![i[0].imod(3.0)]));
    let p = b
        .build_scalar(&(h1.map(|v| v * v).sum() + h2.map(|v| v * v * v).sum()))
        .unwrap();
    out.push(("permute (+, max)", p, vec![data(8, 2), data(3, 3)]));
    let b = Builder::new();
    let x = b.input(&[4]);
    let m = x.fold1(|u, v| u.max(v));
    let q = x.map(|v| v + 2.0).fold1(|u, v| u * v);
    let r = x.fold(1.0, |u, v| u * 0.5 + v);
    let p = b.build_scalar(&(m + q + r)).unwrap();
    out.push(("folds (max, ×, with an initial value)", p, vec![data(4, 4)]));
    let b = Builder::new();
    let k = b.input(&[2]);
    let s = b.scan_n(
        &[2],
        3,
        2,
        |_| vec![elit(1.0), elit(0.0)],
        |i, s| vec![s[0] + 0.1 * s[1], s[1] - 0.1 * k.at(&[i[1]]) * s[0]],
    );
    let p = b.build_scalar(&s.map(|v| v * v).sum().sum().sum()).unwrap();
    out.push(("scan_n", p, vec![vec![4.0, 9.0]]));
    let b = Builder::new();
    let x = b.input(&[3]);
    let c = b.input(&[3]);
    let w = b.awhile(
        &[&x.map(|v| v * 1.0), &b.generate(&[1], |_| elit(0.0))],
        &[&c],
        |s, _| s[1].map(|k| k.lt(6.0)).sum(),
        |s, inv| {
            let nx = s[0].zip_with(&inv[0], |x, c| x - 0.1 * (x * x * x - c));
            vec![nx, s[1].map(|k| k + 1.0)]
        },
    );
    let t = x.sum();
    let pick = b.acond(|| t.at(&[]).gt(0.0), &w[0], &x.map(|v| v * 3.0));
    let p = b.build_scalar(&pick.map(|v| v.sin()).sum()).unwrap();
    out.push((
        "awhile, acond",
        p.clone(),
        vec![vec![0.5, 1.0, 1.5], vec![1.0, 2.0, 0.5]],
    ));
    out.push((
        "acond's other branch",
        p,
        vec![vec![-0.5, -1.0, 0.5], vec![1.0, 2.0, 0.5]],
    ));
    out
}

#[test]
fn host_node_programs_are_right() {
    for (what, p, inputs) in host_node_programs() {
        let refs: Vec<&[f64]> = inputs.iter().map(|v| v.as_slice()).collect();
        let g = p.gradient_a(&refs).unwrap();
        for (k, x) in inputs.iter().enumerate() {
            for j in 0..x.len() {
                let at = |h: f64| {
                    let mut v = inputs.clone();
                    v[k][j] += h;
                    let r: Vec<&[f64]> = v.iter().map(|v| v.as_slice()).collect();
                    p.run(&r).unwrap()[0].data()[0]
                };
                let fd = (at(1e-6) - at(-1e-6)) / 2e-6;
                let an = g.grads[k][j];
                assert!(
                    (fd - an).abs() <= 1e-6 * (1.0 + an.abs()),
                    "{what}: input {k}[{j}]: gradient {an}, finite differences {fd}"
                );
            }
        }
    }
}

#[test]
fn gmm_kernels_stay_small_at_adbench_dimensions() {
    // At d = 64 and 128 (ADBench's largest GMM inputs) no gradient kernel reads a number of
    // values that grows with icf's d(d+1)/2 entries: the Wishart prior once read all 2080
    // (8256) of a component's in one unrolled kernel, whose adjoint scattered each one — a
    // megabyte of CUDA C for NVRTC at d = 64, where the GPU gradient did not finish. The
    // quadratic form's d-term sums are sums over arrays there (unrolled, they made 2d + 1
    // scatters, 44 kB at d = 64).
    for d in [64, 128] {
        let (_gmm, ks) = gmm_gradient_kernels(3, d, 2);
        let mut largest = (0, 0);
        for kern in &ks {
            let src = kernel_source(kern, "k").unwrap();
            largest.0 = largest.0.max(src.scatters.len());
            largest.1 = largest.1.max(src.code.len());
        }
        eprintln!(
            "d = {d}: at most {} scatters, {} bytes of source",
            largest.0, largest.1
        );
        assert!(
            largest.0 <= 2 * d + 1,
            "d = {d}: a kernel with {} scatters",
            largest.0
        );
        assert!(
            largest.1 <= 1000 * d,
            "d = {d}: a kernel of {} bytes",
            largest.1
        );
    }
}
