//! ADBench GMM and BA: readers, objectives against independent implementations, gradients
//! against forward mode and finite differences, the sparse Jacobian's layout.

// The reference implementations here are deliberately written with plain index loops.
#![allow(clippy::needless_range_loop)]

use adjoint::check::check_gradient;
use adjoint::forward;
use adjoint_bench::adbench::{ba, gmm, io, protocol};

const SMALL_GMM: &str = include_str!("data/gmm_d3_K4_n6.txt");

/// Straightforward GMM kept in test code: explicit lower-triangular Q, plain loops.
fn gmm_reference(g: &io::GmmInput) -> f64 {
    let (d, k) = (g.d, g.k);
    let isz = g.icf_size();
    let lse = |v: &[f64]| {
        let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        v.iter().map(|a| (a - mx).exp()).sum::<f64>().ln() + mx
    };
    let q_of = |c: usize| {
        let icf = &g.icf[c * isz..(c + 1) * isz];
        let mut q = vec![vec![0.0; d]; d];
        for i in 0..d {
            q[i][i] = icf[i].exp();
        }
        let mut li = d;
        for col in 0..d {
            for row in col + 1..d {
                q[row][col] = icf[li];
                li += 1;
            }
        }
        q
    };
    let qs: Vec<Vec<Vec<f64>>> = (0..k).map(q_of).collect();
    let mut total = 0.0;
    for i in 0..g.n {
        let xi = &g.x[i * d..(i + 1) * d];
        let terms: Vec<f64> = (0..k)
            .map(|c| {
                let xc: Vec<f64> = (0..d).map(|j| xi[j] - g.means[c * d + j]).collect();
                let sq: f64 = (0..d)
                    .map(|r| (0..d).map(|j| qs[c][r][j] * xc[j]).sum::<f64>().powi(2))
                    .sum();
                let sum_q: f64 = g.icf[c * isz..c * isz + d].iter().sum();
                g.alphas[c] + sum_q - 0.5 * sq
            })
            .collect();
        total += lse(&terms);
    }
    let (df, n) = (d as f64, g.n as f64);
    let nn = df + g.m + 1.0;
    let c = nn * df * (g.gamma.ln() - 0.5 * 2f64.ln()) - gmm::log_gamma_distrib(0.5 * nn, d);
    let prior: f64 = (0..k)
        .map(|c| {
            let icf = &g.icf[c * isz..(c + 1) * isz];
            let frob: f64 = icf[..d].iter().map(|q| (2.0 * q).exp()).sum::<f64>()
                + icf[d..].iter().map(|l| l * l).sum::<f64>();
            0.5 * g.gamma * g.gamma * frob - g.m * icf[..d].iter().sum::<f64>()
        })
        .sum::<f64>()
        - k as f64 * c;
    -n * df * 0.5 * (2.0 * gmm::PI).ln() + total - n * lse(&g.alphas) + prior
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

#[test]
fn gmm_reader_roundtrips_and_reports_bad_input() {
    let g = io::generate_gmm(4, 3, 10, 1);
    let text = io::write_gmm(&g);
    let h = io::parse_gmm(&text, "gen").unwrap();
    assert_eq!((h.d, h.k, h.n), (4, 3, 10));
    assert_eq!(h.icf.len(), 3 * 10);
    assert!(g.x.iter().zip(&h.x).all(|(a, b)| (a - b).abs() <= 5e-7));
    assert_eq!(io::write_gmm(&h), text);
    let err = io::parse_gmm("2 2 1\n0.1\nabc", "bad.txt").unwrap_err();
    assert!(
        err.to_string()
            .contains("bad.txt: line 3, alphas: \"abc\" is not a number"),
        "{err}"
    );
    let err = io::parse_gmm("2 2 1\n0.1", "short.txt").unwrap_err();
    assert!(
        err.to_string().contains(
            "short.txt: line 2, alphas: the header asks for 2 values here, the file holds 1 more"
        ),
        "{err}"
    );
    let r = io::replicate_points(&g, 25);
    assert_eq!(r.x.len(), 25 * 4);
    assert_eq!(&r.x[40..44], &g.x[0..4]);
}

#[test]
fn gmm_objective_matches_independent_implementations() {
    let g = io::parse_gmm(SMALL_GMM, "small").unwrap();
    let p = g.params();
    let ours: f64 = gmm::gmm_objective(&g, &p);
    assert!(
        rel(ours, gmm_reference(&g)) < 1e-12,
        "{ours} vs {}",
        gmm_reference(&g)
    );
    // Value from the independent pure-Python implementation, computed with
    // `python3 crates/adjoint-bench/peers/gmm_reference.py crates/adjoint-bench/tests/data/gmm_d3_K4_n6.txt`
    let python = 8.00902287196211;
    assert!(rel(ours, python) < 1e-12, "{ours} vs {python}");
    for (d, k, n) in [(2, 5, 40), (7, 3, 25), (12, 6, 10)] {
        let g = io::generate_gmm(d, k, n, 99);
        let ours: f64 = gmm::gmm_objective(&g, &g.params());
        assert!(rel(ours, gmm_reference(&g)) < 1e-12, "d={d} k={k}");
    }
}

#[test]
fn gmm_objective_on_adbench_file_when_present() {
    // The same Python implementation gives −5240.590562549647 on ADBench's gmm_d2_K5 (1k).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/adbench/gmm/1k/gmm_d2_K5.txt");
    if let Ok(g) = io::read_gmm(&path) {
        let ours: f64 = gmm::gmm_objective(&g, &g.params());
        assert!(rel(ours, -5240.590562549647) < 1e-12, "{ours}");
    }
}

#[test]
fn gmm_gradient_matches_forward_and_finite_differences() {
    let g = io::parse_gmm(SMALL_GMM, "small").unwrap();
    let p = g.params();
    let mut grad = vec![0.0; p.len()];
    let v = gmm::gmm_gradient_tape(&g, &p, &mut grad);
    assert!(rel(v, gmm::gmm_objective(&g, &p)) < 1e-12);
    let fwd = forward::gradient(|x| gmm::gmm_objective(&g, x), &p);
    protocol::agree(&grad, &fwd).unwrap();
    check_gradient(|x| gmm::gmm_objective(&g, x), &p, &grad).assert_passed();
    // Many chunks (n large enough to split) give the same gradient as one recording.
    let big = io::generate_gmm(2, 3, 3000, 5);
    let pb = big.params();
    let mut gb = vec![0.0; pb.len()];
    gmm::gmm_gradient_tape(&big, &pb, &mut gb);
    let whole = adjoint_tape::grad(|x: &[adjoint_tape::Var]| gmm::gmm_objective(&big, x), &pb);
    protocol::agree(&gb, &whole).unwrap();
}

#[test]
fn ba_reader_replicates_like_the_reference() {
    let b = io::parse_ba(&io::write_ba(3, 5, 7), "gen").unwrap();
    assert_eq!((b.n, b.m, b.p), (3, 5, 7));
    assert_eq!(b.cams.len(), 33);
    assert_eq!(b.obs[6], [0, 1]);
    assert_eq!(b.obs[4], [1, 4]);
    assert_eq!(&b.cams[22..33], &b.cams[0..11]);
    assert_eq!(b.n_cols(), 33 + 15 + 7);
}

/// BA projection kept in test code: rotation matrix from Rodrigues' formula, then distortion.
fn project_reference(cam: &[f64], x: &[f64]) -> [f64; 2] {
    let r = [cam[0], cam[1], cam[2]];
    let th = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
    let k = [r[0] / th, r[1] / th, r[2] / th];
    let (s, c) = th.sin_cos();
    let kx = [[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]];
    let mut rot = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            let kk: f64 = (0..3).map(|l| kx[i][l] * kx[l][j]).sum();
            rot[i][j] = if i == j { 1.0 } else { 0.0 } + s * kx[i][j] + (1.0 - c) * kk;
        }
    }
    let xo = [x[0] - cam[3], x[1] - cam[4], x[2] - cam[5]];
    let xc: Vec<f64> = (0..3)
        .map(|i| (0..3).map(|j| rot[i][j] * xo[j]).sum())
        .collect();
    let p = [xc[0] / xc[2], xc[1] / xc[2]];
    let rsq = p[0] * p[0] + p[1] * p[1];
    let l = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq;
    [p[0] * l * cam[6] + cam[7], p[1] * l * cam[6] + cam[8]]
}

#[test]
fn ba_objective_matches_independent_implementation() {
    let b = io::parse_ba(&io::write_ba(2, 3, 4), "gen").unwrap();
    let mut out = Vec::new();
    ba::ba_objective(&b, &mut out);
    assert_eq!(out.len(), 12);
    let pr = project_reference(&b.cams[0..11], &b.x[0..3]);
    let ours: [f64; 2] = ba::project(&b.cams[0..11], &b.x[0..3]);
    assert!(
        rel(ours[0], pr[0]) < 1e-12 && rel(ours[1], pr[1]) < 1e-12,
        "{ours:?} vs {pr:?}"
    );
    // The residual subtracts the feature: compare it in absolute terms scaled by the projection.
    let expect = [b.w[0] * (pr[0] - b.feats[0]), b.w[0] * (pr[1] - b.feats[1])];
    for c in 0..2 {
        assert!(
            (out[c] - expect[c]).abs() < 1e-12 * pr[c].abs(),
            "{} vs {}",
            out[c],
            expect[c]
        );
    }
    assert_eq!(out[8], 1.0 - b.w[0] * b.w[0]);
    // Zero rotation takes the reference's special branch.
    let mut cam = b.cams[0..11].to_vec();
    cam[..3].fill(0.0);
    let p: [f64; 2] = ba::project(&cam, &b.x[0..3]);
    let xo = [b.x[0] - cam[3], b.x[1] - cam[4], b.x[2] - cam[5]];
    let q = [xo[0] / xo[2], xo[1] / xo[2]];
    let rsq = q[0] * q[0] + q[1] * q[1];
    let l = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq;
    assert!(rel(p[0], q[0] * l * cam[6] + cam[7]) < 1e-12);
}

#[test]
fn ba_jacobian_layout_and_values() {
    let b = io::parse_ba(&io::write_ba(3, 4, 9), "gen").unwrap();
    let j = ba::ba_jacobian_tape(&b);
    assert_eq!((j.rows, j.cols), (27, b.n_cols()));
    for r in 0..18 {
        assert_eq!(j.row_ptr[r + 1] - j.row_ptr[r], 15, "row {r}");
    }
    for r in 18..27 {
        assert_eq!(j.row_ptr[r + 1] - j.row_ptr[r], 1);
    }
    // Row 2i+c against finite differences of the objective over the full parameter vector.
    let flat = |b: &io::BaInput| [&b.cams[..], &b.x, &b.w].concat();
    let unflat = |v: &[f64]| {
        let mut c = b.clone();
        c.cams.copy_from_slice(&v[..33]);
        c.x.copy_from_slice(&v[33..45]);
        c.w.copy_from_slice(&v[45..]);
        c
    };
    let x0 = flat(&b);
    for row in [0usize, 5, 13, 20] {
        let mut dense = vec![0.0; x0.len()];
        for k in j.row_ptr[row] as usize..j.row_ptr[row + 1] as usize {
            dense[j.col_idx[k] as usize] = j.vals[k];
        }
        check_gradient(
            |v| {
                let mut out = Vec::new();
                ba::ba_objective(&unflat(v), &mut out);
                out[row]
            },
            &x0,
            &dense,
        )
        .assert_passed();
    }
}

#[test]
fn agreement_rule_and_protocol() {
    assert!(protocol::agree(&[1.0, 1e9], &[1.0 + 1e-9, 1e9 + 1.0]).is_ok());
    let e = protocol::agree(&[1.0, 2.0], &[1.0, 2.1]).unwrap_err();
    assert!(e.contains("element 1"), "{e}");
    // The protocol returns a per-evaluation time (no bound on it: machines are noisy).
    let mut calls = 0u64;
    let t = protocol::time_min(
        || {
            calls += 1;
            calls
        },
        protocol::Budget::QUICK,
    );
    assert!(t.is_finite() && t > 0.0 && calls >= 2);
}

#[test]
fn ba_jacobian_by_vector_forward_mode_equals_the_tape() {
    let b = io::parse_ba(&io::write_ba(4, 5, 23), "gen").unwrap();
    let t = ba::ba_jacobian_tape(&b);
    let f = ba::ba_jacobian_forward(&b);
    assert_eq!(
        (t.row_ptr.clone(), t.col_idx.clone()),
        (f.row_ptr, f.col_idx)
    );
    protocol::agree(&f.vals, &t.vals).unwrap();
}

#[test]
fn reversible_gmm_gradient_matches_forward_mode_and_the_tape() {
    use adjoint_bench::adbench::reversible::Reversible;
    for g in [
        io::parse_gmm(SMALL_GMM, "small").unwrap(),
        io::generate_gmm(5, 3, 40, 9),
    ] {
        let p = g.params();
        let mut grad = vec![0.0; p.len()];
        let v = gmm::gmm_gradient(&Reversible, &g, &p, &mut grad);
        assert!(rel(v, gmm::gmm_objective(&g, &p)) < 1e-12, "value {v}");
        let fwd = forward::gradient(|x| gmm::gmm_objective(&g, x), &p);
        protocol::agree(&grad, &fwd).unwrap();
        let mut tape = vec![0.0; p.len()];
        gmm::gmm_gradient_tape(&g, &p, &mut tape);
        protocol::agree(&grad, &tape).unwrap();
        // The checked program: every ancilla comes back to zero, and the inverse undoes it.
        use adjoint_bench::adbench::reversible::i_gmm_data;
        let (mut out, mut pv, mut x) = (0.0, p.clone(), &g.x[..]);
        let (mut d, mut k, mut from, mut to) = (g.d, g.k, 0, g.n);
        i_gmm_data(
            &mut out, &mut pv, &mut x, &mut d, &mut k, &mut from, &mut to,
        )
        .unwrap();
        assert!(rel(out, gmm::gmm_data_term(&g, &p, 0, g.n)) < 1e-12);
        i_gmm_data::uncall(
            &mut out, &mut pv, &mut x, &mut d, &mut k, &mut from, &mut to,
        )
        .unwrap();
        assert!(out.abs() < 1e-9 && pv == p);
    }
}

#[test]
fn reversible_ba_jacobian_matches_the_tape_and_the_reversible_code_is_checked() {
    use adjoint::rev::{Cotangents, GVar};
    use adjoint_bench::adbench::reversible::{i_reproj, Reversible};
    use adjoint_bench::adbench::Engine;
    let b = io::parse_ba(&io::write_ba(4, 5, 23), "gen").unwrap();
    let r = ba::ba_jacobian(&Reversible, &b);
    let t = ba::ba_jacobian_tape(&b);
    assert_eq!(
        (r.row_ptr.clone(), r.col_idx.clone()),
        (t.row_ptr, t.col_idx)
    );
    protocol::agree(&r.vals, &t.vals).unwrap();
    // The checked version runs clean (every ancilla uncomputed) and its inverse restores the
    // inputs; a zero rotation takes Rodrigues' other branch.
    let mut v: [f64; 15] = core::array::from_fn(|i| 0.1 + 0.05 * i as f64);
    let mut f = [0.3, -0.2];
    for rot_zero in [false, true] {
        if rot_zero {
            v[..3].fill(0.0);
        }
        let mut e = [0.0; 2];
        i_reproj(&mut e, &mut v, &mut f).unwrap();
        let plain = ba::reproj_error(&v[..11], &v[11..14], v[14], &f);
        assert!(
            rel(e[0], plain[0]) < 1e-13 && rel(e[1], plain[1]) < 1e-13,
            "{e:?} vs {plain:?}"
        );
        let mut ge = [GVar::new(e[0], 1.0), GVar::new(e[1], 0.0)];
        let mut gv = v.map(|x| GVar::new(x, 0.0));
        i_reproj::uncall(&mut ge, &mut gv, &mut f).unwrap();
        assert!(ge[0].x.abs() < 1e-14 && ge[1].x.abs() < 1e-14);
        let grad: Vec<f64> = gv.iter().map(|x| x.g).collect();
        check_gradient(
            |x| ba::reproj_error(&x[..11], &x[11..14], x[14], &f)[0],
            &v,
            &grad,
        )
        .assert_passed();
        // Both rows in one inverse run (gradient lanes, as the BA column computes them): lane
        // `r` is bit for bit the run seeded with residual `r` alone.
        let mut ge = [
            GVar::new(e[0], Cotangents::unit(0)),
            GVar::new(e[1], Cotangents::unit(1)),
        ];
        let mut gl = v.map(|x| GVar::new(x, Cotangents::<f64, 2>::zero()));
        i_reproj::uncall(&mut ge, &mut gl, &mut f).unwrap();
        for r in 0..2 {
            let mut ge = [GVar::new(e[0], 0.0), GVar::new(e[1], 0.0)];
            ge[r].g = 1.0;
            let mut gv = v.map(|x| GVar::new(x, 0.0));
            i_reproj::uncall(&mut ge, &mut gv, &mut f).unwrap();
            for i in 0..15 {
                assert_eq!(
                    gl[i].g[r].to_bits(),
                    gv[i].g.to_bits(),
                    "row {r}, input {i}"
                );
            }
        }
        // The BA column (unchecked, both rows in one run): the same rows bit for bit as the
        // checked inverse above.
        let mut rows = [0.0; 30];
        Reversible.ba_rows(&v, &f, &mut rows);
        for i in 0..15 {
            for r in 0..2 {
                assert_eq!(
                    rows[15 * r + i].to_bits(),
                    gl[i].g[r].to_bits(),
                    "row {r}, input {i}"
                );
            }
        }
    }
}

#[test]
fn gmm_gradient_is_chunked_for_parallelism_and_bit_identical_for_1_2_and_4_threads() {
    // 1000 points: the memory bound alone made this one chunk (a sequential "parallel" gradient).
    let g = io::generate_gmm(3, 4, 1000, 7);
    for tape in [false, true] {
        let chunk = gmm::chunk_points(&g, tape);
        assert!(g.n.div_ceil(chunk) >= 32, "{chunk} points per chunk");
    }
    // ADBench's 10k d10 K200 with a tape: chunks sized to the caches (250 000 tape entries:
    // 8 points), more than one group of chunks held at once (1250 chunks of 13 200
    // parameters) — the gradient below still adds them in chunk order.
    let big = io::generate_gmm(10, 200, 10_000, 1);
    assert_eq!(gmm::chunk_points(&big, true), 8);
    // without a tape: 157 points for 64 chunks, cut to 138 by the memory bound (4·10⁶ entries)
    assert_eq!(gmm::chunk_points(&big, false), 138);
    let p = g.params();
    let run = |threads: usize, reversible: bool| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut grad = vec![0.0; p.len()];
            let v = if reversible {
                gmm::gmm_gradient(
                    &adjoint_bench::adbench::reversible::Reversible,
                    &g,
                    &p,
                    &mut grad,
                )
            } else {
                gmm::gmm_gradient_tape(&g, &p, &mut grad)
            };
            (
                v.to_bits(),
                grad.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            )
        })
    };
    for reversible in [false, true] {
        let one = run(1, reversible);
        for threads in [2, 4] {
            assert!(
                run(threads, reversible) == one,
                "{threads} threads, reversible: {reversible}"
            );
        }
    }
    // Chunk gradients held a few at a time (as at 10k d10 K200): the same bits.
    for reversible in [false, true] {
        let whole = run(2, reversible);
        for group in [1, 3] {
            let mut grad = vec![0.0; p.len()];
            let v = if reversible {
                gmm::gmm_gradient_in_groups(
                    &adjoint_bench::adbench::reversible::Reversible,
                    &g,
                    &p,
                    &mut grad,
                    group,
                )
            } else {
                gmm::gmm_gradient_in_groups(&adjoint_bench::adbench::Tape, &g, &p, &mut grad, group)
            };
            let bits = (
                v.to_bits(),
                grad.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            );
            assert!(bits == whole, "groups of {group}, reversible: {reversible}");
        }
    }
    // And the chunked sum is the gradient: against forward mode.
    let mut grad = vec![0.0; p.len()];
    gmm::gmm_gradient_tape(&g, &p, &mut grad);
    let reference = forward::gradient(|v| gmm::gmm_objective(&g, v), &p);
    for (i, (a, b)) in grad.iter().zip(&reference).enumerate() {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{i}: {a} vs {b}");
    }
}

#[test]
fn an_explicit_data_directory_that_does_not_exist_is_an_error() {
    use adjoint_bench::adbench::data_dir;
    let e = data_dir(Some(std::path::Path::new("/nonexistent/adbench"))).unwrap_err();
    assert!(
        e.contains("/nonexistent/adbench") && e.contains("no such directory"),
        "{e}"
    );
    let empty = std::env::temp_dir().join(format!("adjoint-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let e = data_dir(Some(&empty)).unwrap_err();
    assert!(e.contains("not an ADBench data directory"), "{e}");
    std::fs::remove_dir(&empty).unwrap();
}

/// A scratch directory laid out like ADBench's data: `gmm/1k/` with one truncated file.
fn scratch_adbench_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("adjoint-adbench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("gmm/1k")).unwrap();
    std::fs::create_dir_all(dir.join("ba")).unwrap();
    let full = io::write_gmm(&io::generate_gmm(2, 5, 1000, 1));
    std::fs::write(dir.join("gmm/1k/gmm_d2_K5.txt"), &full[..full.len() / 2]).unwrap();
    dir
}

#[test]
fn missing_and_truncated_inputs_are_substituted_by_named_generated_inputs() {
    use adjoint_bench::adbench::{ba_inputs, gmm_inputs, Selection};
    let dir = scratch_adbench_dir("inputs");
    let sel = |f: &str| Selection {
        filter: Some(f.into()),
        engines: None,
    };
    // Truncated file: replaced, and the name and source say so.
    let v = gmm_inputs(Some(&dir), true, &sel("d2_K5"));
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].0, "gen-1k/gmm_d2_K5");
    assert_eq!(v[0].1, "generated (file missing or unreadable)");
    // Missing file: the same.
    let v = gmm_inputs(Some(&dir), true, &sel("d10_K25"));
    assert_eq!(
        (v[0].0.as_str(), v[0].1.as_str()),
        (
            "gen-1k/gmm_d10_K25",
            "generated (file missing or unreadable)"
        )
    );
    // Not in ADBench's data at all: generated, named so, and not called missing.
    let v = gmm_inputs(Some(&dir), false, &sel("1k/gmm_d64_K200"));
    assert_eq!(
        (v[0].0.as_str(), v[0].1.as_str()),
        ("gen-1k/gmm_d64_K200", "generated")
    );
    let v = ba_inputs(Some(&dir), true, &sel("ba2"));
    assert_eq!((v.len(), v[0].0.as_str()), (1, "gen-ba2"));
    // Without a data directory every input is generated and named so; the filter selects.
    let v = gmm_inputs(None, true, &sel("d10"));
    assert!(
        !v.is_empty()
            && v.iter()
                .all(|x| x.0.starts_with("gen-") && x.0.contains("d10"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn engine_selection_rejects_unknown_names() {
    use adjoint_bench::adbench::Selection;
    let sel = Selection {
        filter: None,
        engines: Some(vec!["tape".into(), "jax".into(), "tensorflow".into()]),
    };
    let e = sel.check_engines().unwrap_err();
    assert!(e.contains("tensorflow") && e.contains("reversible"), "{e}");
    assert!(sel.engine("tape") && !sel.engine("reversible"));
    assert!(Selection::default().engine("anything"));
}

/// The peers check their derivative against the reference file of the manifest, and name the
/// engine that wrote it: the first engine selected, or the tape when only peers are selected.
/// Both references equal the tape's gradient computed here independently.
#[test]
fn the_manifest_names_the_engine_whose_derivative_is_the_reference() {
    use adjoint_bench::adbench::{gmm_inputs, run, Selection};
    let work = std::env::temp_dir().join(format!("adjoint-manifest-{}", std::process::id()));
    let sel = |engine: &str| Selection {
        filter: Some("gmm_d2_K5".into()),
        engines: Some(vec![engine.into()]),
    };
    let g = gmm_inputs(None, true, &sel("tape")).remove(0).3;
    let p = g.params();
    let mut want = vec![0.0; p.len()];
    gmm::gmm_gradient_tape(&g, &p, &mut want);
    for (engine, named) in [("reversible", "reversible"), ("jax", "tape")] {
        let (_, manifest) = run(None, true, false, &sel(engine), &work);
        assert_eq!(manifest.len(), 1);
        assert_eq!(manifest[0].reference_engine, named);
        let got: Vec<f64> = std::fs::read(&manifest[0].reference)
            .unwrap()
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "{engine}: {a} vs {b}"
            );
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
}

#[test]
fn adbench_command_reports_substitutions_and_writes_every_engines_result() {
    let dir = scratch_adbench_dir("cli");
    let out = dir.join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
        .args([
            "adbench",
            "--quick",
            "--threads",
            "1",
            "--filter",
            "gmm_d2_K5",
        ])
        .args(["--engines", "tape,reversible", "--data"])
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("gmm_d2_K5.txt unreadable")
            && stderr.contains("measuring generated input gen-1k/gmm_d2_K5 instead"),
        "{stderr}"
    );
    let table = std::fs::read_to_string(out.join("adbench.md")).unwrap();
    assert!(
        table.contains("gen-1k/gmm_d2_K5") && !table.contains("| 1k/gmm_d2_K5"),
        "{table}"
    );
    // Each engine's gradient is written, and they agree.
    let read = |e: &str| {
        let b =
            std::fs::read(out.join(format!("adbench-inputs/gen-1k_gmm_d2_K5.{e}.f64"))).unwrap();
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    let (t, r) = (read("tape"), read("reversible"));
    assert_eq!(t.len(), 5 * (1 + 2 + 3));
    assert!(t
        .iter()
        .zip(&r)
        .all(|(a, b)| (a - b).abs() <= 1e-9 * a.abs().max(1.0)));
    // A missing --data directory and a filter before the subcommand are errors.
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
        .args(["adbench", "--data", "/nonexistent/adbench"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no such directory"));
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
        .args(["adbench", "--data"])
        .arg(dir.join("gmm/1k/gmm_d2_K5.txt"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("gmm_d2_K5.txt: not a directory"));
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
        .args(["--filter", "d2", "adbench"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("after the subcommand"));
    // Errors read as messages (not `Error: "…"`); an unwritable --out fails before anything is
    // measured, naming the path; a filter that matches nothing leaves the last run's manifests.
    let adbench = |args: &[&str]| {
        let r = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
            .arg("adbench")
            .args(args)
            .arg("--data")
            .arg(&dir)
            .output()
            .unwrap();
        (
            r.status.success(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    let (ok, e) = adbench(&["--engines", "nosuch"]);
    assert!(
        !ok && e.contains("adjoint-bench: --engines: unknown"),
        "{e}"
    );
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let (ok, e) = adbench(&["--quick", "--out", file.join("x").to_str().unwrap()]);
    assert!(
        !ok && e.contains(&format!("--out {}", file.join("x").display())),
        "{e}"
    );
    assert!(!e.contains("  gmm "), "measured before failing: {e}");
    let manifest = std::fs::read_to_string(out.join("adbench-inputs/manifest.json")).unwrap();
    let (ok, e) = adbench(&[
        "--quick",
        "--filter",
        "nosuch",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        !ok && e.contains("no input matches --filter \"nosuch\""),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("adbench-inputs/manifest.json")).unwrap(),
        manifest
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An input whose plain objective is not finite fails every row, a peer's too: the peers compare
/// only with adjoint's derivative, and agreeing on the gradient of a NaN objective is no pass (a
/// peer's row said `ok`). The peer here is a stand-in script that reports `ok` for whatever it
/// is given (`ADJOINT_PEERS_PYTHON`, as `peers/install.sh`'s interpreter would be).
#[cfg(unix)]
#[test]
fn a_non_finite_objective_fails_the_peers_rows_too() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("adjoint-adbench-inf-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("gmm/1k")).unwrap();
    // One point far beyond f64's squares: every component's log-density is −∞.
    let text = io::write_gmm(&io::generate_gmm(2, 5, 1000, 1));
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[1 + 5 + 5 + 5] = "1e200 -1e200".into();
    std::fs::write(dir.join("gmm/1k/gmm_d2_K5.txt"), lines.join("\n")).unwrap();
    let g = io::read_gmm(&dir.join("gmm/1k/gmm_d2_K5.txt")).unwrap();
    assert!(!gmm::gmm_objective(&g, &g.params()).is_finite());
    let peer = dir.join("fake-python");
    let row = r#"{"task":"gmm","input":"1k/gmm_d2_K5","source":"shared","params":30,"engine":"jax","objective_s":0.001,"derivative_s":0.002,"ratio":2.0,"peak_bytes":null,"check":"ok (= tape)","threads":0}"#;
    std::fs::write(
        &peer,
        format!("#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho '{row}'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_adjoint-bench"))
        .args([
            "adbench",
            "--quick",
            "--threads",
            "1",
            "--filter",
            "gmm_d2_K5",
        ])
        .args(["--engines", "tape,jax", "--data"])
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .env("ADJOINT_PEERS_PYTHON", &peer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let table = std::fs::read_to_string(out.join("adbench.md")).unwrap();
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("| 1k/gmm_d2_K5"))
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    for r in rows {
        assert!(r.contains("objective: element 0 is NaN"), "{r}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gmm_with_slice_primitives_equals_the_scalar_source() {
    for (d, k) in [(1, 3), (2, 5), (5, 4), (10, 2)] {
        let g = io::generate_gmm(d, k, 40, 3);
        let p = g.params();
        let (a, b) = (
            gmm::gmm_data_term_vector(&g, &p, 0, g.n),
            gmm::gmm_data_term(&g, &p, 0, g.n),
        );
        assert!((a - b).abs() <= 1e-12 * b.abs(), "d={d} K={k}: {a} vs {b}");
        let (_, gv) = adjoint::tape::value_and_grad(
            |v: &[adjoint::tape::Var]| gmm::gmm_data_term_vector(&g, v, 0, g.n),
            &p,
        );
        let gf = forward::gradient(|v| gmm::gmm_data_term(&g, v, 0, g.n), &p);
        for (x, y) in gv.iter().zip(&gf) {
            assert!(
                (x - y).abs() <= 1e-10 * y.abs().max(1.0),
                "d={d} K={k}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn array_engine_gmm_column_matches_forward_mode_and_reuses_its_program() {
    use adjoint_bench::adbench::{array::Array, GmmColumn};
    let col = Array::default();
    for (d, k) in [(2, 3), (3, 2)] {
        let g = io::generate_gmm(d, k, 30, 5);
        let p = g.params();
        let mut grad = vec![0.0; p.len()];
        for _ in 0..2 {
            let v = col.gmm(&g, &p, &mut grad);
            assert!((v - gmm::gmm_objective(&g, &p)).abs() <= 1e-10 * v.abs());
            let reference = forward::gradient(|v| gmm::gmm_objective(&g, v), &p);
            for (a, b) in grad.iter().zip(&reference) {
                assert!(
                    (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                    "d={d} K={k}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn filters_take_alternatives_and_whole_names() {
    use adjoint_bench::adbench::{ba_inputs, gmm_inputs, Selection};
    let sel = |f: &str| Selection {
        filter: Some(f.into()),
        engines: None,
    };
    let names = |v: Vec<(
        String,
        String,
        Option<std::path::PathBuf>,
        adjoint_bench::adbench::io::BaInput,
    )>| { v.into_iter().map(|x| x.0).collect::<Vec<_>>() };
    // `ba1` matches ba1 and ba10–19 of the full grid; `ba1$` only ba1.
    assert_eq!(names(ba_inputs(None, false, &sel("ba1"))).len(), 11);
    assert_eq!(
        names(ba_inputs(None, false, &sel("ba1$,ba20$"))),
        ["gen-ba1", "gen-ba20"]
    );
    let g: Vec<String> = gmm_inputs(None, true, &sel("d2_K5,d10_K25"))
        .into_iter()
        .map(|x| x.0)
        .collect();
    assert_eq!(g, ["gen-1k/gmm_d2_K5", "gen-1k/gmm_d10_K25"]);
}

/// A GMM input of dimension `d` with the given means (two components) and points.
fn two_cluster_gmm(d: usize, means: Vec<f64>, x: Vec<f64>) -> io::GmmInput {
    let icf_sz = d * (d + 1) / 2;
    io::GmmInput {
        d,
        k: 2,
        n: x.len() / d,
        alphas: vec![0.3, -0.2],
        means,
        icf: (0..2 * icf_sz)
            .map(|i| 0.05 * ((i * 13) % 7) as f64 - 0.1)
            .collect(),
        x,
        gamma: 1.0,
        m: 0.0,
    }
}

#[test]
fn reversible_gmm_with_a_component_far_from_the_points() {
    use adjoint_bench::adbench::{reversible::Reversible, GmmColumn, Tape};
    // Means 1e8 apart: the reversible program undid `mt += α + Σq; mt -= ½‖Qxc‖²` in floating
    // point and carried fl(fl(A − S) + S) − A (all of −A) into the next point: the objective
    // was −4.3098 for −4.1098 and a gradient entry 0.19 for 2.41 (a hunter); a component whose
    // ½‖Qxc‖² overflows made it NaN. The tape is the reference.
    //
    // Then `xc` and `qxc`, reused by every point and component, carried their gradients' rounding
    // residue (of values ~e^q or ~1e6 away) from one component's uncomputation into the next:
    // with Q's log-diagonal 50, ∂/∂μ₀ was −0.5 where component 0's weight is exactly 0 and the
    // derivative 0; one outlier point 1e6 away left 2.4e-4 relative errors (a hunter). They are
    // fresh per component now.
    let wide = io::GmmInput {
        d: 1,
        k: 2,
        n: 1,
        alphas: vec![0.0, 0.0],
        means: vec![1.0, 0.0],
        icf: vec![50.0, 0.0],
        x: vec![0.5],
        gamma: 1.0,
        m: 0.0,
    };
    let mut outlier = two_cluster_gmm(3, vec![0.1, -0.2, 0.3, 1.0, 0.5, -0.4], vec![0.0; 18]);
    for (i, x) in outlier.x.iter_mut().enumerate() {
        *x = 0.1 * ((i * 7) % 5) as f64 - 0.2;
    }
    outlier.x[3..6].copy_from_slice(&[1e6, -1e6, 1e6]);
    let mut steep = two_cluster_gmm(
        2,
        vec![0.0, 0.0, 1.0, 1.0],
        vec![0.2, 0.1, 0.9, 1.1, 0.5, 0.4],
    );
    steep.icf[0] = 30.0;
    let cases = [
        two_cluster_gmm(1, vec![0.0, 1e8], vec![0.1, 1e8 + 0.1, 0.7, 1e8 - 0.3]),
        two_cluster_gmm(1, vec![0.0, 1e200], vec![0.1, 0.7, -0.3]),
        two_cluster_gmm(1, vec![0.0, 1e6], vec![0.1, 1e6 + 0.1, 0.7, 1e6 - 0.3, 3.0]),
        wide,
        outlier,
        steep,
    ];
    for g in &cases {
        let p = g.params();
        let (mut gt, mut gr) = (vec![0.0; p.len()], vec![0.0; p.len()]);
        let vt = Tape.gmm(g, &p, &mut gt);
        let vr = Reversible.gmm(g, &p, &mut gr);
        assert!(
            (vt - gmm_reference(g)).abs() < 1e-12 * vt.abs().max(1.0),
            "the tape's value"
        );
        protocol::agree(&[vr], &[vt]).unwrap_or_else(|e| panic!("value at {:?}: {e}", g.means));
        protocol::agree(&gr, &gt).unwrap_or_else(|e| panic!("gradient at {:?}: {e}", g.means));
    }
}

/// Malformed input files are refused with the file, line and field (a hunter: a stray value, or
/// a header count one short, shifted every later field and was measured as ADBench's input with
/// the check `ok`; γ < 0 gave a NaN objective, `ok`; BA with no camera panicked, a huge `p`
/// aborted in the allocator, an LSTM header whose sizes overflowed panicked).
#[test]
fn malformed_input_files_are_refused_with_line_and_field() {
    let g = io::generate_gmm(2, 2, 3, 5);
    let text = io::write_gmm(&g);
    let lines: Vec<&str> = text.lines().collect();
    let err = |r: Result<io::GmmInput, io::ReadError>| r.unwrap_err().to_string();
    // lines: header, 2 alphas, 2 means, 2 icf rows, 3 points (8–10), `γ m` (11)
    assert_eq!(lines.len(), 11);
    // a stray value on the last point line: it is read as γ, and `γ m`'s m is left over
    let mut stray = lines.clone();
    let extra = format!("{} 0.5", lines[9]);
    stray[9] = &extra;
    let e = err(io::parse_gmm(&stray.join("\n"), "stray.txt"));
    assert!(
        e.contains("stray.txt: line 11, after the last field: \"0\"")
            && e.contains("beyond what the header (d = 2, K = 2, n = 3) asks for"),
        "{e}"
    );
    // the header's n one short: the last point (line 10) is read as `γ m`
    let short = text.replacen("2 2 3", "2 2 2", 1);
    let e = err(io::parse_gmm(&short, "n.txt"));
    assert!(
        e.contains("n.txt: line 10, Wishart γ, m: γ = -2.072086"),
        "{e}"
    );
    // γ ≤ 0, a zero count, a non-finite value
    let e = err(io::parse_gmm(
        &text.replace("1.000000 0", "-1.000000 0"),
        "g.txt",
    ));
    assert!(
        e.contains("line 11, Wishart γ, m: γ = -1, m = 0: need γ > 0"),
        "{e}"
    );
    let e = err(io::parse_gmm(&text.replacen("2 2 3", "2 0 3", 1), "k.txt"));
    assert!(
        e.contains("k.txt: line 1, K: 0 is not a count from 1"),
        "{e}"
    );
    let e = err(io::parse_gmm(&text.replacen(lines[3], "NaN", 1), "nan.txt"));
    assert!(
        e.contains("nan.txt: line 4, means: NaN is not a finite number"),
        "{e}"
    );
    // BA: no camera, a huge count, a huge replication, an extra value
    let ba = io::write_ba(2, 3, 5);
    for (text, want) in [
        (
            ba.replacen("2 3 5", "0 3 5", 1),
            "b.txt: line 1, n: 0 is not a count from 1",
        ),
        (
            ba.replacen("2 3 5", "2 3 1000000000000", 1),
            "b.txt: line 1, p: 1000000000000 is not a count",
        ),
        (
            ba.replacen("2 3 5", "2 3 300000000", 1),
            "the header (n = 2, m = 3, p = 300000000) asks for more than",
        ),
        (
            format!("{ba} 7"),
            "b.txt: line 6, after the last field: \"7\"",
        ),
    ] {
        let e = io::parse_ba(&text, "b.txt").unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    // LSTM: sizes that overflow, and a short sequence
    let e = io::parse_lstm("65536 2 65536\n1", "l.txt")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("l.txt: the header (l = 65536, c = 2, b = 65536)"),
        "{e}"
    );
    let l = io::write_lstm(&io::generate_lstm(1, 3, 2, 1));
    let cut = &l[..l.trim_end().rfind('\n').unwrap()];
    let e = io::parse_lstm(cut, "l.txt").unwrap_err().to_string();
    assert!(
        e.contains("sequence: the header asks for 6 values here, the file holds 4 more"),
        "{e}"
    );
}
