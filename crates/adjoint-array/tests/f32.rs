//! `f32` arrays: values against the same computation in plain Rust `f32` (bit-identical where
//! the operation order is the same), gradients against the `f64` program and finite
//! differences, casts and their adjoints, the mixed-type build error, thread-count identity.

use adjoint_array::{Buffer, Builder, DType, Error, Input, Rep};

mod common;

fn f32s(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed as f32).sin() * 1.3) + 0.05)
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The engine's row-sum order: four interleaved accumulators (rows shorter than a block).
fn sum_lanes(v: &[f32]) -> f32 {
    let mut a = [0.0f32; 4];
    let mut it = v.chunks_exact(4);
    for c in &mut it {
        for k in 0..4 {
            a[k] += c[k];
        }
    }
    let mut s = (a[0] + a[1]) + (a[2] + a[3]);
    for &x in it.remainder() {
        s += x;
    }
    s
}

fn rel_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "element {i}: {x} vs {y} (scale {scale})"
        );
    }
}

#[test]
fn map_chain_is_plain_f32_arithmetic() {
    let n = 5000;
    let x = f32s(n, 1);
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let y = a
        .map(|v| v * 1.5 + 0.25)
        .map(|v| v * v)
        .map(|v| v - 0.5)
        .map(|v| v.max(0.1))
        .map(|v| (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p());
    assert_eq!(y.dtype(), DType::F32);
    let p = b.build(&[&y]).unwrap();
    let out = p.run_typed(&[Input::F32(&x)]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let v = v * 1.5 + 0.25;
            let v = v * v;
            let v = v - 0.5;
            let v = v.max(0.1);
            (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p()
        })
        .collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    // and it is not the f64 computation rounded at the end
    let b64 = Builder::new();
    let a64 = b64.input(&[n]);
    let y64 = a64
        .map(|v| v * 1.5 + 0.25)
        .map(|v| v * v)
        .map(|v| v - 0.5)
        .map(|v| v.max(0.1))
        .map(|v| (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p());
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let o64 = b64.build(&[&y64]).unwrap().run(&[&x64]).unwrap();
    let rounded: Vec<f32> = o64[0].data().iter().map(|&v| v as f32).collect();
    assert_ne!(bits(&rounded), bits(&want));
}

#[test]
fn weak_constants_round_once_when_they_meet_f32() {
    let b = Builder::new();
    let a = b.input_f32(&[3]);
    // 0.1 + 0.2 is folded in f64 (a weak constant) and rounded once
    let y = a.map(|v| v * 0.1 + 0.2);
    let z = a.map(|_| adjoint_array::lit(0.1)); // a constant map of an f32 array is f32
    let p = b.build(&[&y, &z]).unwrap();
    let x = [1.0f32, 3.0, -7.5];
    let out = p.run_typed(&[x.as_slice().into()]).unwrap();
    let want: Vec<f32> = x.iter().map(|&v| v * 0.1 + 0.2).collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    assert_eq!(out[1], Buffer::F32(vec![0.1; 3]));
}

#[test]
fn sums_and_zip_with_are_plain_f32() {
    let (r, c) = (7, 301);
    let x = f32s(r * c, 2);
    let w = f32s(r * c, 3);
    let b = Builder::new();
    let xa = b.input_f32(&[r, c]);
    let wa = b.input_f32(&[r, c]);
    let z = xa.zip_with(&wa, |a, v| a * v + a.sin());
    let rows = z.sum(); // fused: a sum over the zip_with
    let zm = z.materialize();
    let p = b.build(&[&rows, &zm.sum()]).unwrap();
    let out = p.run_typed(&[(&x).into(), (&w).into()]).unwrap();
    let zz: Vec<f32> = x.iter().zip(&w).map(|(&a, &v)| a * v + a.sin()).collect();
    let want: Vec<f32> = (0..r).map(|i| sum_lanes(&zz[i * c..(i + 1) * c])).collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    assert_eq!(bits(out[1].as_f32().unwrap()), bits(&want));
    // a scalar total of a vector
    let b = Builder::new();
    let v = b.input_f32(&[c]);
    let p = b.build(&[&v.map(|t| t * t).sum()]).unwrap();
    let out = p.run_typed(&[(&x[..c]).into()]).unwrap();
    let sq: Vec<f32> = x[..c].iter().map(|t| t * t).collect();
    assert_eq!(out[0], Buffer::F32(vec![sum_lanes(&sq)]));
}

/// Mean logistic loss of `w` on data `x` (n × d), labels `y` ∈ {−1, 1}, built over `dt`.
fn logistic(dt: DType, n: usize, d: usize) -> adjoint_array::Program {
    let b = Builder::new();
    let w = b.input_with(&[d], dt);
    let x = match dt {
        DType::F32 => b.constant_input_f32(&[n, d]),
        DType::F64 => b.constant_input(&[n, d]),
    };
    let y = match dt {
        DType::F32 => b.constant_input_f32(&[n]),
        DType::F64 => b.constant_input(&[n]),
    };
    let z = w
        .replicate(&[Rep::New(n), Rep::All])
        .zip_with(&x, |a, c| a * c)
        .sum();
    let l = z
        .zip_with(&y, |zi, yi| (-(yi * zi)).exp().ln_1p())
        .sum()
        .map(|s| s / n as f64);
    b.build_scalar(&l).unwrap()
}

#[test]
fn logistic_regression_gradient_in_f32() {
    let (n, d) = (64, 5);
    let x = f32s(n * d, 4);
    let y: Vec<f32> = (0..n)
        .map(|i| if i % 3 == 0 { 1.0 } else { -1.0 })
        .collect();
    let w: Vec<f32> = vec![0.3, -0.2, 0.5, 0.1, -0.4];
    let p32 = logistic(DType::F32, n, d);
    assert_eq!(p32.input_dtypes(), vec![DType::F32; 3]);
    let g32 = p32
        .gradient_typed(&[(&w).into(), (&x).into(), (&y).into()])
        .unwrap();
    assert_eq!(g32.value.dtype(), DType::F32);
    assert_eq!(g32.grads[0].dtype(), DType::F32);
    assert_eq!(g32.grads[1], Buffer::F32(vec![0.0; n * d]));
    // the value is the plain f32 computation
    let zs: Vec<f32> = (0..n)
        .map(|i| {
            let t: Vec<f32> = (0..d).map(|j| w[j] * x[i * d + j]).collect();
            sum_lanes(&t)
        })
        .collect();
    let ls: Vec<f32> = (0..n).map(|i| (-(y[i] * zs[i])).exp().ln_1p()).collect();
    assert_eq!(g32.value, Buffer::F32(vec![sum_lanes(&ls) / n as f32]));
    // gradient against the f64 program (reverse mode) and finite differences
    let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let y64: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
    let p64 = logistic(DType::F64, n, d);
    let g64 = p64.gradient_a(&[&w64, &x64, &y64]).unwrap();
    rel_close(&g32.grads[0].to_f64_vec(), &g64.grads[0], 1e-5);
    let h = 1e-6;
    let fd: Vec<f64> = (0..d)
        .map(|j| {
            let mut wp = w64.clone();
            wp[j] += h;
            let mut wm = w64.clone();
            wm[j] -= h;
            let f = |v: &[f64]| p64.run(&[v, &x64, &y64]).unwrap()[0].data()[0];
            (f(&wp) - f(&wm)) / (2.0 * h)
        })
        .collect();
    rel_close(&g32.grads[0].to_f64_vec(), &fd, 1e-5);
}

#[test]
fn gmm_like_log_sum_exp_gradient_in_f32() {
    // Σᵢ log Σₖ exp(−½ ‖xᵢ − μₖ‖² + αₖ), x: n × d data, μ: k × d, α: k.
    let (n, k, d) = (40, 6, 3);
    let build = |dt: DType| {
        let b = Builder::new();
        let mu = b.input_with(&[k, d], dt);
        let al = b.input_with(&[k], dt);
        let x = b.input_with(&[n, d], dt);
        let diff = x
            .replicate(&[Rep::All, Rep::New(k), Rep::All])
            .zip_with(&mu.replicate(&[Rep::New(n), Rep::All, Rep::All]), |a, m| {
                a - m
            });
        let q = diff.map(|t| t * t).sum(); // n × k
        let e = q
            .zip_with(&al.replicate(&[Rep::New(n), Rep::All]), |q, a| {
                (a - q * 0.5).exp()
            })
            .sum()
            .map(|s| s.ln())
            .sum();
        b.build_scalar(&e).unwrap()
    };
    let mu = f32s(k * d, 5);
    let al = f32s(k, 6);
    let x = f32s(n * d, 7);
    let p32 = build(DType::F32);
    let g32 = p32
        .gradient_typed(&[(&mu).into(), (&al).into(), (&x).into()])
        .unwrap();
    let w = |v: &[f32]| v.iter().map(|&t| f64::from(t)).collect::<Vec<f64>>();
    let p64 = build(DType::F64);
    let g64 = p64.gradient_a(&[&w(&mu), &w(&al), &w(&x)]).unwrap();
    let v32 = f64::from(g32.value.as_f32().unwrap()[0]);
    assert!((v32 - g64.value).abs() <= 1e-5 * g64.value.abs());
    for (a, b) in g32.grads.iter().zip(&g64.grads) {
        assert_eq!(a.dtype(), DType::F32);
        rel_close(&a.to_f64_vec(), b, 1e-5);
    }
}

#[test]
fn casts_and_their_adjoints() {
    // f64 input, f32 computation: the gradient is the f32 adjoint widened
    let b = Builder::new();
    let x = b.input(&[3]);
    let s = x.cast_f32().map(|v| v * v).sum();
    let p = b.build_scalar(&s).unwrap();
    let xs = [0.1, 0.2, 1.0 / 3.0];
    let g = p.gradient_typed(&[Input::F64(&xs)]).unwrap();
    let r: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    assert_eq!(g.value.dtype(), DType::F32);
    assert_eq!(
        g.grads[0],
        Buffer::F64(r.iter().map(|&v| f64::from(v * 2.0)).collect())
    );
    // f32 input, f64 computation: the f64 adjoint is rounded to f32
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let s = x.cast_f64().map(|v| v * 0.1).sum();
    assert_eq!(s.dtype(), DType::F64);
    let p = b.build_scalar(&s).unwrap();
    let g = p.gradient_typed(&[Input::F32(&[1.0, 2.0])]).unwrap();
    assert_eq!(g.value, Buffer::F64(vec![0.1 + 0.2]));
    assert_eq!(g.grads[0], Buffer::F32(vec![0.1f32; 2]));
    // casts inside closures
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let y = b.input(&[2]);
    let z = x.zip_with(&y, |a, c| a * c.cast_f32()).sum();
    let p = b.build_scalar(&z).unwrap();
    let g = p
        .gradient_typed(&[Input::F32(&[2.0, 3.0]), Input::F64(&[0.1, 0.2])])
        .unwrap();
    assert_eq!(g.grads[0], Buffer::F32(vec![0.1, 0.2]));
    assert_eq!(g.grads[1], Buffer::F64(vec![2.0, 3.0]));
}

#[test]
fn mixing_f32_and_f64_is_a_build_error() {
    let b = Builder::new();
    let x = b.input_f32(&[3]);
    let y = b.input(&[3]);
    let z = x.zip_with(&y, |a, c| a + c);
    let e = b.build(&[&z]).unwrap_err();
    assert_eq!(
        e,
        Error::DTypeMismatch {
            combinator: "zip_with",
            left: DType::F32,
            right: DType::F64
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("zip_with") && msg.contains("f32") && msg.contains("f64"),
        "{msg}"
    );
    // reading an f64 array inside a map over f32
    let b = Builder::new();
    let x = b.input_f32(&[3]);
    let y = b.input(&[3]);
    let z = x.map(|a| a * y.at(&[adjoint_array::lit(0.0)]));
    let msg = b.build(&[&z]).unwrap_err().to_string();
    assert!(
        msg.contains("map") && msg.contains("f32") && msg.contains("f64"),
        "{msg}"
    );
    // acond branches of different types
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let y = b.input(&[2]);
    let z = b.acond(|| adjoint_array::lit(1.0), &x, &y);
    let msg = b.build(&[&z]).unwrap_err().to_string();
    assert!(msg.contains("acond"), "{msg}");
    // a fold whose step mixes an f32 accumulator with an f64 array
    let b = Builder::new();
    let x = b.input_f32(&[2, 3]);
    let w = b.input(&[1]);
    let m = x.fold(0.0, |a, v| a + v * w.at(&[adjoint_array::lit(0.0)]));
    let e = b.build(&[&m]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DTypeMismatch {
                combinator: "fold",
                ..
            }
        ),
        "{e}"
    );
    // a scan step whose result is f64 for an f32 array
    let b = Builder::new();
    let x = b.input_f32(&[2, 3]);
    let w = b.input(&[1]);
    let m = x.scanl(0.0, |_, _| w.at(&[adjoint_array::lit(0.0)]));
    let e = b.build(&[&m]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DTypeMismatch {
                combinator: "scan",
                ..
            }
        ),
        "{e}"
    );
    // permute of f32 values into an f64 default
    let b = Builder::new();
    let x = b.input_f32(&[4]);
    let d = b.input(&[2]);
    let m = x.permute(adjoint_array::Combine::Add, &d, |i| {
        (adjoint_array::lit(1.0), vec![i[0].imod(2.0)])
    });
    let e = b.build(&[&m]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DTypeMismatch {
                combinator: "permute",
                ..
            }
        ),
        "{e}"
    );
    // an awhile body that changes the state's type
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let out = b.awhile(
        &[&x],
        &[],
        |s, _| s[0].sum().map(|t| t.lt(10.0)),
        |s, _| vec![s[0].cast_f64().map(|v| v * 2.0)],
    );
    let e = b.build(&[&out[0]]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DTypeMismatch {
                left: DType::F32,
                right: DType::F64,
                ..
            }
        ),
        "{e}"
    );
    // an f64 constant array meets f32 values: a cast is needed
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let c = b.use_array(&[2], vec![1.0, 2.0]);
    let z = x.zip_with(&c, |a, v| a * v);
    assert!(matches!(
        b.build(&[&z]).unwrap_err(),
        Error::DTypeMismatch { .. }
    ));
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let c = b.use_array(&[2], vec![1.0, 2.0]).cast_f32();
    let z = x.zip_with(&c, |a, v| a * v);
    let out = b
        .build(&[&z])
        .unwrap()
        .run_typed(&[Input::F32(&[3.0, 4.0])]);
    assert_eq!(out.unwrap()[0], Buffer::F32(vec![3.0, 8.0]));
}

#[test]
fn typed_inputs_are_checked() {
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let p = b.build(&[&x.map(|v| v + 1.0)]).unwrap();
    assert!(matches!(
        p.run(&[&[1.0, 2.0]]),
        Err(Error::InputType {
            index: 0,
            expected: DType::F32,
            got: DType::F64
        })
    ));
    assert!(matches!(
        p.run_typed(&[Input::F64(&[1.0, 2.0])]),
        Err(Error::InputType { .. })
    ));
    assert_eq!(
        p.run_typed(&[Input::F32(&[1.0, 2.0])]).unwrap()[0],
        Buffer::F32(vec![2.0, 3.0])
    );
    // an f64 program through the typed API gives f64 buffers
    let b = Builder::new();
    let x = b.input(&[2]);
    let p = b.build(&[&x.map(|v| v * 0.1)]).unwrap();
    assert_eq!(
        p.run_typed(&[Input::F64(&[1.0, 2.0])]).unwrap()[0],
        Buffer::F64(vec![0.1, 0.2])
    );
}

#[test]
fn f32_results_are_bit_identical_for_any_thread_count() {
    let n = 200_000;
    let x = f32s(n, 8);
    let idx: Vec<f32> = (0..n).map(|i| ((i * 7919) % n) as f32).collect();
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let ix = b.constant_input_f32(&[n]);
    // a gather (scatter-add in the gradient), a long sum, an element-wise chain
    let g = ix.map(|i| a.at(&[i]));
    let s = g.zip_with(&a, |u, v| (u * v).sin() + u.exp() * 0.01).sum();
    let p = b.build_scalar(&s).unwrap();
    let run = || p.gradient_typed(&[(&x).into(), (&idx).into()]).unwrap();
    let g1 = common::in_pool(1, run);
    for t in [2, 3, 4] {
        let gt = common::in_pool(t, run);
        assert_eq!(gt, g1, "{t} threads");
    }
    assert_eq!(g1.grads[0].dtype(), DType::F32);
}

// ---------------------------------------------------------------------------------------------
// Folds, scans, permute, awhile, use_array and gradient_e over f32.

fn w64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&t| f64::from(t)).collect()
}

/// Plain f32 `scanl`: `o[0] = init`, `o[j + 1] = f(o[j], x[j])`, row by row.
fn scanl32(x: &[f32], c: usize, init: f32, f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    let mut out = Vec::new();
    for row in x.chunks(c) {
        let mut a = init;
        out.push(a);
        for &v in row {
            a = f(a, v);
            out.push(a);
        }
    }
    out
}

/// Plain f32 `scanr`: `o[c] = init`, `o[j] = f(x[j], o[j + 1])`, row by row.
fn scanr32(x: &[f32], c: usize, init: f32, f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    let mut out = Vec::new();
    for row in x.chunks(c) {
        let mut o = vec![init; c + 1];
        for j in (0..c).rev() {
            o[j] = f(row[j], o[j + 1]);
        }
        out.extend(o);
    }
    out
}

/// The f32 program's value and gradient against the same program over f64 (reverse mode) and
/// central differences of the f64 program, each within `tol` relative; every gradient of an
/// f32 input is f32.
fn check_grads(build: &dyn Fn(DType) -> adjoint_array::Program, xs: &[Vec<f32>], tol: f64) {
    let p32 = build(DType::F32);
    let ins: Vec<Input> = xs.iter().map(|x| x.into()).collect();
    let g32 = p32.gradient_typed(&ins).unwrap();
    let x64: Vec<Vec<f64>> = xs.iter().map(|x| w64(x)).collect();
    let p64 = build(DType::F64);
    let run64 = |v: &[Vec<f64>]| {
        let r: Vec<&[f64]> = v.iter().map(|x| x.as_slice()).collect();
        p64.run(&r).unwrap()[0].data()[0]
    };
    let refs: Vec<&[f64]> = x64.iter().map(|x| x.as_slice()).collect();
    let g64 = p64.gradient_a(&refs).unwrap();
    let v32 = f64::from(g32.value.as_f32().expect("an f32 value")[0]);
    assert!(
        (v32 - g64.value).abs() <= tol * g64.value.abs().max(1.0),
        "value {v32} vs {}",
        g64.value
    );
    let h = 1e-6;
    for (k, (a, b)) in g32.grads.iter().zip(&g64.grads).enumerate() {
        assert_eq!(a.dtype(), DType::F32, "gradient {k}");
        rel_close(&a.to_f64_vec(), b, tol);
        let fd: Vec<f64> = (0..b.len())
            .map(|j| {
                let mut p = x64.clone();
                p[k][j] += h;
                let mut m = x64.clone();
                m[k][j] -= h;
                (run64(&p) - run64(&m)) / (2.0 * h)
            })
            .collect();
        rel_close(&a.to_f64_vec(), &fd, tol);
    }
}

#[test]
fn folds_are_plain_f32() {
    let (r, c) = (7, 301);
    let x = f32s(r * c, 10);
    let b = Builder::new();
    let a = b.input_f32(&[r, c]);
    let w = b.input_f32(&[2]);
    let near1 = a.map(|v| v * 0.01 + 1.0);
    let outs = [
        a.fold(0.5, |acc, v| acc * 0.9 + v.sin()),
        a.fold1(|acc, v| acc * 0.5 + v * v),
        a.maximum(),
        a.minimum(),
        near1.product(),
        a.fold(0.25, |acc, v| acc + v),
        // a step that reads an f32 array
        a.fold(0.0, |acc, v| {
            acc * w.at(&[adjoint_array::lit(0.0)]) + v * w.at(&[adjoint_array::lit(1.0)])
        }),
    ];
    for o in &outs {
        assert_eq!(o.dtype(), DType::F32);
    }
    let refs: Vec<&adjoint_array::Acc> = outs.iter().collect();
    let p = b.build(&refs).unwrap();
    let ws = [0.75f32, 0.3];
    let got = p.run_typed(&[(&x).into(), (&ws).into()]).unwrap();
    let rows = || x.chunks(c);
    let want: [Vec<f32>; 7] = [
        rows()
            .map(|row| row.iter().fold(0.5f32, |a, &v| a * 0.9 + v.sin()))
            .collect(),
        rows()
            .map(|row| row[1..].iter().fold(row[0], |a, &v| a * 0.5 + v * v))
            .collect(),
        rows()
            .map(|row| row[1..].iter().fold(row[0], |a, &v| a.max(v)))
            .collect(),
        rows()
            .map(|row| row[1..].iter().fold(row[0], |a, &v| a.min(v)))
            .collect(),
        rows()
            .map(|row| row.iter().fold(1.0f32, |a, &v| a * (v * 0.01 + 1.0)))
            .collect(),
        // `+` is the lane-order sum after the initial value
        rows().map(|row| 0.25f32 + sum_lanes(row)).collect(),
        rows()
            .map(|row| row.iter().fold(0.0f32, |a, &v| a * ws[0] + v * ws[1]))
            .collect(),
    ];
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(bits(g.as_f32().unwrap()), bits(w), "fold {k}");
    }
    // and the sequential ones are not the f64 computation rounded at the end
    let x64 = w64(&x);
    let rounded: Vec<f32> = x64
        .chunks(c)
        .map(|row| row.iter().fold(0.5f64, |a, &v| a * 0.9 + v.sin()) as f32)
        .collect();
    assert_ne!(bits(&rounded), bits(&want[0]));
    let rounded: Vec<f32> = x64
        .chunks(c)
        .map(|row| row.iter().fold(1.0f64, |a, &v| a * (v * 0.01 + 1.0)) as f32)
        .collect();
    assert_ne!(bits(&rounded), bits(&want[4]));
}

#[test]
fn scans_are_plain_f32() {
    let (r, c) = (5, 203);
    let x = f32s(r * c, 11);
    let b = Builder::new();
    let a = b.input_f32(&[r, c]);
    // the initial value is an f32 constant (seen through a widening cast)
    let first = a.scanl(0.1, |acc, v| acc + v).cast_f64();
    let p = b.build(&[&first]).unwrap();
    let got = p.run_typed(&[(&x).into()]).unwrap();
    assert_eq!(got[0].as_f64().unwrap()[0], f64::from(0.1f32));
    // so is a step's constant result
    let b2 = Builder::new();
    let a2 = b2.input_f32(&[2, 3]);
    let k = a2.scanl(0.5, |_, _| adjoint_array::lit(0.1)).cast_f64();
    let got = b2
        .build(&[&k])
        .unwrap()
        .run_typed(&[(&x[..6]).into()])
        .unwrap();
    let want = [0.5, 0.1f32.into(), 0.1f32.into(), 0.1f32.into()].repeat(2);
    assert_eq!(got[0], Buffer::F64(want));
    let outs = [
        a.scanl(1.0, |acc, v| acc * 0.5 + v.cos()),
        a.scanr(0.25, |v, acc| v - acc * 0.75),
        a.scanl(0.1, |acc, v| acc + v),
        a.scanr(1.0, |v, acc| v.max(acc)),
        a.map(|v| v * 0.01 + 1.0).scanl(1.0, |acc, v| acc * v),
    ];
    let refs: Vec<&adjoint_array::Acc> = outs.iter().collect();
    let p = b.build(&refs).unwrap();
    let got = p.run_typed(&[(&x).into()]).unwrap();
    let want = [
        scanl32(&x, c, 1.0, |a, v| a * 0.5 + v.cos()),
        scanr32(&x, c, 0.25, |v, a| v - a * 0.75),
        scanl32(&x, c, 0.1, |a, v| a + v),
        scanr32(&x, c, 1.0, |v, a| v.max(a)),
        scanl32(&x, c, 1.0, |a, v| a * (v * 0.01 + 1.0)),
    ];
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(bits(g.as_f32().unwrap()), bits(w), "scan {k}");
    }
    // the running sum is not the f64 running sum rounded
    let x64 = w64(&x);
    let mut rounded = Vec::new();
    for row in x64.chunks(c) {
        let mut s = f64::from(0.1f32);
        rounded.push(s as f32);
        for &v in row {
            s += v;
            rounded.push(s as f32);
        }
    }
    assert_ne!(bits(&rounded), bits(&want[2]));
}

#[test]
fn fold_gradients_in_f32() {
    let (r, c) = (4, 9);
    type Op = fn(&adjoint_array::Acc) -> adjoint_array::Acc;
    let ops: [(&str, Op); 7] = [
        ("fold general", |a| {
            a.fold(0.5, |acc, v| acc * 0.9 + v.sin())
        }),
        ("fold1 general", |a| a.fold1(|acc, v| acc * 0.5 + v * v)),
        ("maximum", |a| a.maximum()),
        ("minimum", |a| a.minimum()),
        ("product", |a| a.product()),
        ("fold +", |a| a.fold(0.25, |acc, v| acc + v)),
        ("fold1 *", |a| a.fold1(|acc, v| acc * v)),
    ];
    let x = f32s(r * c, 12);
    for (name, op) in ops {
        eprintln!("{name}");
        let build = |dt: DType| {
            let b = Builder::new();
            let a = b.input_with(&[r, c], dt);
            let s = op(&a).map(|v| (v * 0.7).sin()).sum();
            b.build_scalar(&s).unwrap()
        };
        check_grads(&build, std::slice::from_ref(&x), 1e-5);
    }
    // a step that reads a differentiated array: its gradient is a scatter-add in f32
    let build = |dt: DType| {
        let b = Builder::new();
        let a = b.input_with(&[r, c], dt);
        let w = b.input_with(&[2], dt);
        let s = a
            .fold(0.0, |acc, v| {
                acc * w.at(&[adjoint_array::lit(0.0)])
                    + (v * w.at(&[adjoint_array::lit(1.0)])).tanh()
            })
            .map(|v| v * v)
            .sum();
        b.build_scalar(&s).unwrap()
    };
    check_grads(&build, &[x.clone(), vec![0.8, 1.3]], 1e-5);
}

#[test]
fn the_reverse_pass_of_a_fold_is_f32_arithmetic() {
    // ∂(x₀·x₁·…)/∂xⱼ by the sequential adjoint: the suffix product (right to left) times the
    // prefix product (left to right), every product rounded to f32
    let c = 60;
    let x: Vec<f32> = f32s(c, 26).iter().map(|v| v * 0.05 + 1.0).collect();
    let b = Builder::new();
    let a = b.input_f32(&[c]);
    let p = b.build_scalar(&a.product()).unwrap();
    let g = p.gradient_typed(&[(&x).into()]).unwrap();
    let mut pre = vec![1.0f32; c + 1];
    for j in 0..c {
        pre[j + 1] = pre[j] * x[j];
    }
    let mut suf = vec![1.0f32; c + 1];
    for j in (0..c).rev() {
        suf[j] = suf[j + 1] * x[j];
    }
    let want: Vec<f32> = (0..c).map(|j| suf[j + 1] * pre[j]).collect();
    assert_eq!(g.value, Buffer::F32(vec![pre[c]]));
    assert_eq!(bits(g.grads[0].as_f32().unwrap()), bits(&want));
    // not the f64 adjoint rounded at the end
    let x64 = w64(&x);
    let g64 = Builder::new();
    let a64 = g64.input(&[c]);
    let p64 = g64.build_scalar(&a64.product()).unwrap();
    let r: Vec<f32> = p64.gradient_a(&[&x64]).unwrap().grads[0]
        .iter()
        .map(|&v| v as f32)
        .collect();
    assert_ne!(bits(&r), bits(&want));
    // a constant partial meets f32: ∂(acc · 0.1 + x)/∂acc is 0.1f32, so ∂/∂xⱼ is 0.1f32
    // multiplied in f32 (c − 1 − j) times
    let b = Builder::new();
    let a = b.input_f32(&[c]);
    let p = b
        .build_scalar(&a.fold(0.0, |acc, v| acc * 0.1 + v))
        .unwrap();
    let g = p.gradient_typed(&[(&x).into()]).unwrap();
    let mut want = vec![1.0f32; c];
    for j in (0..c - 1).rev() {
        want[j] = want[j + 1] * 0.1;
    }
    assert_eq!(bits(g.grads[0].as_f32().unwrap()), bits(&want));
    // the step's adjoint kernel is f32: ∂(acc + sin x · x)/∂x = sin x + x · cos x, with sin in
    // f32 and the rule table's cos(x) rounded
    let b = Builder::new();
    let a = b.input_f32(&[c]);
    let p = b
        .build_scalar(&a.fold(0.0, |acc, v| acc + v.sin() * v))
        .unwrap();
    let g = p.gradient_typed(&[(&x).into()]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| v.sin() + v * (f64::from(v).cos() as f32))
        .collect();
    assert_eq!(bits(g.grads[0].as_f32().unwrap()), bits(&want));
}

#[test]
fn scan_gradients_in_f32() {
    let (r, c) = (3, 8);
    type Op = fn(&adjoint_array::Acc) -> adjoint_array::Acc;
    let ops: [(&str, Op); 5] = [
        ("scanl general", |a| {
            a.scanl(1.0, |acc, v| acc * 0.5 + v.cos())
        }),
        ("scanr general", |a| a.scanr(0.25, |v, acc| v - acc * 0.75)),
        ("scanl +", |a| a.scanl(0.1, |acc, v| acc + v)),
        ("scanr max", |a| a.scanr(-5.0, |v, acc| v.max(acc))),
        ("scanl *", |a| a.scanl(1.0, |acc, v| acc * v)),
    ];
    let x = f32s(r * c, 13);
    for (name, op) in ops {
        eprintln!("{name}");
        let build = |dt: DType| {
            let b = Builder::new();
            let a = b.input_with(&[r, c], dt);
            let s = op(&a).map(|v| (v * 0.7).sin()).sum().sum();
            b.build_scalar(&s).unwrap()
        };
        check_grads(&build, std::slice::from_ref(&x), 1e-5);
    }
}

/// `permute` of `n` source elements into `m` targets (`default`), element `s` kept unless
/// `s % 3 == 0`, into target `(5 s) % m`.
fn permute_target(s: usize, m: usize) -> Option<usize> {
    (s % 3 != 0).then_some((5 * s) % m)
}

fn permute_prog(
    comb: adjoint_array::Combine,
    x: &adjoint_array::Acc,
    d: &adjoint_array::Acc,
) -> adjoint_array::Acc {
    let m = d.shape()[0] as f64;
    x.permute(comb, d, |i| {
        (i[0].imod(3.0).ne(0.0), vec![(i[0] * 5.0).imod(m)])
    })
}

#[test]
fn permute_is_plain_f32_and_differentiates_in_f32() {
    use adjoint_array::Combine;
    let (n, m) = (200, 7);
    let x = f32s(n, 14);
    let d = f32s(m, 15);
    let b = Builder::new();
    let xa = b.input_f32(&[n]);
    let da = b.input_f32(&[m]);
    let outs: Vec<_> = [Combine::Add, Combine::Max, Combine::Min]
        .iter()
        .map(|&c| permute_prog(c, &xa, &da))
        .collect();
    let refs: Vec<&adjoint_array::Acc> = outs.iter().collect();
    let got = b
        .build(&refs)
        .unwrap()
        .run_typed(&[(&x).into(), (&d).into()]);
    let got = got.unwrap();
    let plain = |f: fn(f32, f32) -> f32| {
        let mut o = d.clone();
        for (s, &v) in x.iter().enumerate() {
            if let Some(t) = permute_target(s, m) {
                o[t] = f(o[t], v);
            }
        }
        o
    };
    assert_eq!(bits(got[0].as_f32().unwrap()), bits(&plain(|a, v| a + v)));
    assert_eq!(bits(got[1].as_f32().unwrap()), bits(&plain(f32::max)));
    assert_eq!(bits(got[2].as_f32().unwrap()), bits(&plain(f32::min)));
    // the f32 scatter-add is not the f64 one rounded
    let mut o64 = w64(&d);
    for (s, &v) in x.iter().enumerate() {
        if let Some(t) = permute_target(s, m) {
            o64[t] += f64::from(v);
        }
    }
    let rounded: Vec<f32> = o64.iter().map(|&v| v as f32).collect();
    assert_ne!(bits(&rounded), bits(got[0].as_f32().unwrap()));
    // gradients (small sizes for the finite differences)
    let (n, m) = (20, 7);
    let x = f32s(n, 16);
    let d = f32s(m, 17);
    for comb in [Combine::Add, Combine::Max, Combine::Min] {
        let build = |dt: DType| {
            let b = Builder::new();
            let xa = b.input_with(&[n], dt);
            let da = b.input_with(&[m], dt);
            let s = permute_prog(comb, &xa.map(|v| v * 1.5), &da)
                .map(|v| (v * 0.5).sin())
                .sum();
            b.build_scalar(&s).unwrap()
        };
        check_grads(&build, &[x.clone(), d.clone()], 1e-5);
    }
}

/// `s ← 1.25 s + 0.5 w` (invariant `w`) while `Σ s < 40`, then `Σ s²`.
fn awhile_prog(dt: DType, n: usize) -> (Builder, adjoint_array::Acc, adjoint_array::Acc) {
    let b = Builder::new();
    let x = b.input_with(&[n], dt);
    let w = b.input_with(&[n], dt);
    let out = b.awhile(
        &[&x],
        &[&w],
        |s, _| s[0].sum().map(|t| t.lt(40.0)),
        |s, v| vec![s[0].zip_with(&v[0], |a, c| a * 1.25 + c * 0.5)],
    );
    let s = out[0].clone();
    let l = s.map(|v| v * v).sum();
    (b, s, l)
}

#[test]
fn awhile_over_f32() {
    let n = 6;
    let x = f32s(n, 18);
    let w: Vec<f32> = f32s(n, 19).iter().map(|v| v.abs() + 0.5).collect();
    let (b, s, _) = awhile_prog(DType::F32, n);
    assert_eq!(s.dtype(), DType::F32);
    let got = b
        .build(&[&s])
        .unwrap()
        .run_typed(&[(&x).into(), (&w).into()]);
    let mut st = x.clone();
    let mut iters = 0;
    while sum_lanes(&st) < 40.0 {
        st = st
            .iter()
            .zip(&w)
            .map(|(&a, &c)| a * 1.25 + c * 0.5)
            .collect();
        iters += 1;
    }
    assert!(iters > 3, "{iters} iterations");
    assert_eq!(bits(got.unwrap()[0].as_f32().unwrap()), bits(&st));
    let build = |dt: DType| {
        let (b, _, l) = awhile_prog(dt, n);
        b.build_scalar(&l).unwrap()
    };
    check_grads(&build, &[x, w], 1e-5);
}

#[test]
fn the_reverse_pass_of_an_awhile_is_f32_arithmetic() {
    // s ← s · w while Σ s < 30; loss Σ s. Backwards over the iterations (last first):
    // ∂/∂w += ḡ · sₖ (accumulated in f32), ḡ ← ḡ · w.
    let n = 4;
    let x: Vec<f32> = f32s(n, 27).iter().map(|v| v.abs() + 0.3).collect();
    let w: Vec<f32> = f32s(n, 28).iter().map(|v| v.abs() * 0.3 + 1.2).collect();
    let b = Builder::new();
    let xa = b.input_f32(&[n]);
    let wa = b.input_f32(&[n]);
    let out = b.awhile(
        &[&xa],
        &[&wa],
        |s, _| s[0].sum().map(|t| t.lt(30.0)),
        |s, v| vec![s[0].zip_with(&v[0], |a, c| a * c)],
    );
    let p = b.build_scalar(&out[0].sum()).unwrap();
    let g = p.gradient_typed(&[(&x).into(), (&w).into()]).unwrap();
    let mut states = vec![x.clone()];
    while sum_lanes(states.last().unwrap()) < 30.0 {
        let s: Vec<f32> = states
            .last()
            .unwrap()
            .iter()
            .zip(&w)
            .map(|(a, c)| a * c)
            .collect();
        states.push(s);
    }
    assert!(states.len() > 4, "{} iterations", states.len() - 1);
    let mut gs = vec![1.0f32; n];
    let mut gw: Option<Vec<f32>> = None;
    for sk in states[..states.len() - 1].iter().rev() {
        let c: Vec<f32> = gs.iter().zip(sk).map(|(g, s)| g * s).collect();
        gw = Some(match gw {
            None => c,
            Some(a) => a.iter().zip(&c).map(|(a, c)| a + c).collect(),
        });
        gs = gs.iter().zip(&w).map(|(g, c)| g * c).collect();
    }
    assert_eq!(
        g.value,
        Buffer::F32(vec![sum_lanes(states.last().unwrap())])
    );
    assert_eq!(bits(g.grads[0].as_f32().unwrap()), bits(&gs));
    assert_eq!(bits(g.grads[1].as_f32().unwrap()), bits(&gw.unwrap()));
}

#[test]
fn use_array_f32_is_an_f32_constant() {
    let n = 5;
    let x = f32s(n, 20);
    let c = f32s(n, 21);
    let build = |dt: DType| {
        let b = Builder::new();
        let a = b.input_with(&[n], dt);
        let k = match dt {
            DType::F32 => b.use_array_f32(&[n], c.clone()),
            DType::F64 => b.use_array(&[n], w64(&c)),
        };
        assert_eq!(k.dtype(), dt);
        let s = a.zip_with(&k, |u, v| (u * v).exp()).sum();
        b.build_scalar(&s).unwrap()
    };
    let got = build(DType::F32).run_typed(&[(&x).into()]).unwrap();
    let t: Vec<f32> = x.iter().zip(&c).map(|(&u, &v)| (u * v).exp()).collect();
    assert_eq!(got[0], Buffer::F32(vec![sum_lanes(&t)]));
    check_grads(&build, &[x], 1e-5);
}

#[test]
fn gradient_e_and_jacobian_e_over_f32() {
    use adjoint_array::{gradient_e, jacobian_e};
    let n = 6;
    let x = f32s(n, 22);
    let y = f32s(n, 23);
    // d/dv (sin v · v): values in f32, partials of the rule table in f64 at the f32 point,
    // rounded
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let d = a.map(|v| gradient_e(&[v], |p| p[0].sin() * p[0])[0]);
    assert_eq!(d.dtype(), DType::F32);
    let got = b.build(&[&d]).unwrap().run_typed(&[(&x).into()]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| v.sin() + v * (f64::from(v).cos() as f32))
        .collect();
    assert_eq!(bits(got[0].as_f32().unwrap()), bits(&want));
    // a Jacobian block per element: ∂(a·exp c)/∂(a, c)
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let c = b.input_f32(&[n]);
    let j = b.generate_n(&[n], 2, |i| {
        let (u, v) = (a.at(&[i[0]]), c.at(&[i[0]]));
        let j = jacobian_e(&[u, v], |p| vec![p[0] * p[1].exp()]);
        vec![j[0][0], j[0][1]]
    });
    assert_eq!(j.dtype(), DType::F32);
    let got = b.build(&[&j]).unwrap();
    let got = got.run_typed(&[(&x).into(), (&y).into()]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .flat_map(|(&u, &v)| [v.exp(), u * (f64::from(v).exp() as f32)])
        .collect();
    assert_eq!(bits(got[0].as_f32().unwrap()), bits(&want));
    // second order: the gradient of those derivatives, against f64 and finite differences
    let build = |dt: DType| {
        let b = Builder::new();
        let a = b.input_with(&[n], dt);
        let c = b.input_with(&[n], dt);
        let j = b.generate_n(&[n], 2, |i| {
            let (u, v) = (a.at(&[i[0]]), c.at(&[i[0]]));
            let j = jacobian_e(&[u, v], |p| vec![p[0] * p[1].exp() + p[0].sin() * p[1]]);
            vec![j[0][0], j[0][1]]
        });
        let s = j.map(|t| t * t).sum().sum();
        b.build_scalar(&s).unwrap()
    };
    check_grads(&build, &[x, y], 1e-5);
}

#[test]
fn f32_folds_scans_permutes_and_loops_are_bit_identical_for_any_thread_count() {
    let (r, c) = (3000, 40);
    let x = f32s(r * c, 24);
    let w = f32s(2, 25);
    let b = Builder::new();
    let a = b.input_f32(&[r, c]);
    let wa = b.input_f32(&[2]);
    let f = a.fold(0.5, |acc, v| {
        acc * 0.9 + (v * wa.at(&[adjoint_array::lit(0.0)])).sin()
    });
    let m = a.maximum();
    let p = a.map(|v| v * 0.01 + 1.0).product();
    let sl = a.scanl(0.0, |acc, v| acc * 0.5 + v).sum();
    let sr = a.scanr(1.0, |v, acc| (v + acc).tanh()).sum();
    let pm = a
        .reshape(&[r * c])
        .permute(adjoint_array::Combine::Add, &m, |i| {
            (adjoint_array::lit(1.0), vec![(i[0] * 7.0).imod(r as f64)])
        });
    let mx = a
        .reshape(&[r * c])
        .permute(adjoint_array::Combine::Max, &f, |i| {
            (adjoint_array::lit(1.0), vec![(i[0] * 13.0).imod(r as f64)])
        });
    let lp = b.awhile(
        &[&sl],
        &[&wa],
        |s, _| s[0].sum().map(|t| t.lt(1e6)),
        |s, v| vec![s[0].map(|t| t * v[0].at(&[adjoint_array::lit(1.0)]) + 1.0)],
    );
    let all = [&f, &p, &sr, &pm, &mx, &lp[0]]
        .iter()
        .fold(None::<adjoint_array::Acc>, |s, t| {
            let t = t.map(|v| v.sin()).sum();
            Some(match s {
                None => t,
                Some(s) => s.zip_with(&t, |u, v| u + v),
            })
        })
        .unwrap();
    let p = b.build_scalar(&all).unwrap();
    let w2 = [w[0], w[1].abs() + 1.5];
    let run = || p.gradient_typed(&[(&x).into(), (&w2).into()]).unwrap();
    let g1 = common::in_pool(1, run);
    for t in [2, 3, 4] {
        assert_eq!(common::in_pool(t, run), g1, "{t} threads");
    }
    assert_eq!(g1.value.dtype(), DType::F32);
    assert_eq!(g1.grads[0].dtype(), DType::F32);
    assert!(g1.grads[1].as_f32().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn a_cast_constant_keeps_its_type() {
    use adjoint_array::{lit, Combine};
    // `lit(c).cast_f32()` is an f32 value (the cast of a constant was folded into an untyped
    // constant, which takes its type from where it is used: the generate was f64).
    let b = Builder::new();
    let g = b.generate(&[5], |_| lit(-0.5).cast_f32());
    assert_eq!(g.dtype(), DType::F32);
    let out = b.build(&[&g]).unwrap().run_typed(&[]).unwrap();
    assert_eq!(out[0], Buffer::F32(vec![-0.5; 5]));
    // Folding typed constants keeps their type.
    let b = Builder::new();
    let g = b.generate(&[3], |_| {
        lit(0.5).cast_f32() * lit(0.25).cast_f32() + lit(1.0).cast_f32()
    });
    assert_eq!(g.dtype(), DType::F32);
    let out = b.build(&[&g]).unwrap().run_typed(&[]).unwrap();
    assert_eq!(out[0], Buffer::F32(vec![1.125; 3]));
    // … so it can be the default of an f32 permute (the error asked for the cast written).
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let d = b.generate(&[2], |_| lit(0.0).cast_f32());
    let pm = x.permute(Combine::Add, &d, |i| (lit(1.0), vec![i[0]]));
    let out = b
        .build(&[&pm])
        .unwrap()
        .run_typed(&[Input::F32(&[1.5, 2.5])])
        .unwrap();
    assert_eq!(out[0], Buffer::F32(vec![1.5, 2.5]));
    // An f64 constant in f32 arithmetic is the mixing error, not an f32 constant in disguise.
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let y = x.map(|v| v * lit(0.1).cast_f64());
    let e = b.build(&[&y]).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    let b = Builder::new();
    let x = b.input(&[2]);
    let y = x.map(|v| v * lit(0.1).cast_f32());
    assert!(matches!(
        b.build(&[&y]).unwrap_err(),
        Error::DTypeMismatch { .. }
    ));
}
