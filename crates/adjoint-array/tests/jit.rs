//! Kernels compiled with Cranelift against the block interpreter (`Builder::set_jit(false)`)
//! and against forward mode: the same values bit for bit, the same gradients up to the order
//! in which scattered adjoints are summed, the same out-of-bounds errors, and bit-identical
//! results for any thread count. Spaces have at least 2048 elements (smaller ones are
//! interpreted either way).

use adjoint_array::{cond, gradient_e, lit, Acc, Builder, Error, Exp, Program};
use adjoint_core::forward::{self, Dual64};

mod common;
use common::{bits, in_pool};

/// The values element-wise lanes must treat as the scalar code does: NaNs of both signs, ±0,
/// ±∞.
const EDGES: [f64; 6] = [
    f64::NAN,
    -0.0,
    0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -f64::NAN,
];

fn data(n: usize, seed: u64) -> Vec<f64> {
    common::uniform(n, seed, -1.5, 1.5)
}

/// Build `f` twice, compiled and interpreted.
fn both(n: usize, f: impl Fn(&Builder, &Acc) -> Acc) -> (Program, Program) {
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        let out = f(&b, &a);
        b.build_scalar(&out).expect("build")
    };
    (mk(true), mk(false))
}

fn sum_all(a: &Acc) -> Acc {
    let n: usize = a.shape().iter().product();
    a.reshape(&[n]).sum()
}

/// Compiled and interpreted programs agree: values bit for bit, gradients to `1e-10` (scattered terms are summed in another order).
fn agree(jit: &Program, interp: &Program, x: &[f64]) -> Vec<f64> {
    let vj = jit.run(&[x]).expect("run");
    let vi = interp.run(&[x]).expect("run");
    assert_eq!(bits(vj[0].data()), bits(vi[0].data()), "values");
    let gj = jit.gradient_a(&[x]).expect("gradient");
    let gi = interp.gradient_a(&[x]).expect("gradient");
    assert_eq!(gj.value.to_bits(), gi.value.to_bits());
    for (i, (a, b)) in gj.grads[0].iter().zip(&gi.grads[0]).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs())),
            "∂/∂x{i}: compiled {a} vs interpreted {b}"
        );
    }
    gj.grads[0].clone()
}

fn close_to_forward(g: &[f64], x: &[f64], reference: impl Fn(&[Dual64]) -> Dual64) {
    let gf = forward::gradient(&reference, x);
    for (i, (a, b)) in g.iter().zip(&gf).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs())),
            "∂/∂x{i}: {a} vs forward {b}"
        );
    }
}

#[test]
fn element_wise_rules_match_the_interpreter_and_forward_mode() {
    let n = 3000;
    let x = data(n, 3);
    let prog = |b: &Builder, a: &Acc| {
        let _ = b;
        let y = a.map(|v| {
            let s = v.sin() * v.exp() - v.tanh() / (v * v + 1.0).sqrt();
            let t = (-v).abs().max(v * 0.5).min(1.2) + v.atan2(lit(0.7)) + v.hypot(lit(2.0));
            s * t + (v * v + 0.5).powf(lit(1.5)) + v.powi(3) - (v * v + 1.0).ln()
        });
        y.sum()
    };
    let (j, i) = both(n, prog);
    let g = agree(&j, &i, &x);
    close_to_forward(&g, &x, |v| {
        v.iter().fold(Dual64::constant(0.0), |acc, &v| {
            let s = v.sin() * v.exp() - v.tanh() / (v * v + 1.0).sqrt();
            let t = (-v).abs().max(v * 0.5).min(Dual64::constant(1.2))
                + v.atan2(Dual64::constant(0.7))
                + v.hypot(Dual64::constant(2.0));
            acc + s * t + (v * v + 0.5).powf(Dual64::constant(1.5)) + v.powi(3) - (v * v + 1.0).ln()
        })
    });
}

#[test]
fn gathers_scatters_guards_and_discrete_ops_match() {
    let n = 40;
    let x = data(n, 5);
    let (rows, cols) = (3, 1500);
    let prog = move |b: &Builder, a: &Acc| {
        let g = b.generate(&[rows, cols], |i| {
            let (r, c) = (i[0], i[1]);
            let j = c.imod(37.0);
            let branch = cond(c.lt(700.0), a.at(&[r + 1.0]).exp(), a.at(&[j + 2.0]) * 3.0);
            let fl = (a.at(&[j]) * 4.0).floor();
            a.at(&[j]) * a.at(&[(j + 1.0).min(39.0)]) + branch * a.at(&[lit(7.0)]) + fl
                - cond(a.at(&[r]).gt(0.0), a.at(&[r + 30.0]), 0.25)
        });
        sum_all(&g)
    };
    let (j, i) = both(n, prog);
    let g = agree(&j, &i, &x);
    close_to_forward(&g, &x, move |v| {
        let mut s = Dual64::constant(0.0);
        for r in 0..rows {
            for c in 0..cols {
                let jj = c % 37;
                let branch = if c < 700 {
                    v[r + 1].exp()
                } else {
                    v[jj + 2] * 3.0
                };
                let fl = Dual64::constant((v[jj].re * 4.0).floor());
                let last = if v[r].re > 0.0 {
                    v[r + 30]
                } else {
                    Dual64::constant(0.25)
                };
                s = s + v[jj] * v[(jj + 1).min(39)] + branch * v[7] + fl - last;
            }
        }
        s
    });
}

#[test]
fn a_generate_with_many_reads_matches() {
    // A GMM-like quadratic form: hundreds of nodes per element, gathers of a parameter
    // matrix, and one scatter per read in the adjoint kernel.
    let (m, d) = (600, 6);
    let n = d * d + d;
    let x = data(n, 11);
    let prog = move |b: &Builder, a: &Acc| {
        let g = b.generate(&[m, 4], |i| {
            let p = i[0] * 0.01 + i[1];
            let v: Vec<Exp> = (0..d)
                .map(|r| {
                    (0..d).fold(a.at(&[lit((d * d + r) as f64)]), |s, c| {
                        s + a.at(&[lit((r * d + c) as f64)]) * (p + c as f64).sin()
                    })
                })
                .collect();
            v.iter().fold(lit(0.0), |s, &e| s + e * e)
        });
        sum_all(&g)
    };
    let (j, i) = both(n, prog);
    let g = agree(&j, &i, &x);
    close_to_forward(&g, &x, move |v| {
        let mut s = Dual64::constant(0.0);
        for i0 in 0..m {
            for i1 in 0..4 {
                let p = i0 as f64 * 0.01 + i1 as f64;
                for r in 0..d {
                    let e =
                        (0..d).fold(v[d * d + r], |s, c| s + v[r * d + c] * (p + c as f64).sin());
                    s += e * e;
                }
            }
        }
        s
    });
}

#[test]
fn an_index_out_of_bounds_is_the_same_error() {
    let n = 3000;
    let x = data(n, 2);
    let (j, i) = both(n, |b, a| {
        b.generate(&[n], |i| a.at(&[i[0] + 1.0]) * 2.0).sum()
    });
    let ej = j.run(&[&x]).expect_err("out of bounds");
    let ei = i.run(&[&x]).expect_err("out of bounds");
    assert_eq!(ej.to_string(), ei.to_string());
    match ej {
        Error::OutOfBounds { index, shape, .. } => {
            assert_eq!(index, vec![3000.0]);
            assert_eq!(shape, vec![3000]);
        }
        e => panic!("unexpected error {e}"),
    }
    assert!(j.gradient_a(&[&x]).is_err());
    // below the first element, and a component past its axis whose flat index is in range
    // (the compiled code indexes with `i[0] − 1` as an integer: a negative one must fail its
    // unsigned bounds check, as the float did its two)
    let (j, i) = both(n, |b, a| {
        b.generate(&[n], |i| a.at(&[i[0] - 1.0]) * 2.0).sum()
    });
    let (ej, ei) = (j.run(&[&x]).unwrap_err(), i.run(&[&x]).unwrap_err());
    assert_eq!(ej.to_string(), ei.to_string());
    assert!(
        matches!(ej, Error::OutOfBounds { ref index, .. } if index == &[-1.0]),
        "{ej}"
    );
    let (r, c) = (60, 50);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let m = b.input(&[r, c]);
        let y = b.generate(&[r, c], |i| m.at(&[i[0], i[1] + 1.0]) + m.at(&[i[0], i[1]]));
        b.build_scalar(&sum_all(&y)).expect("build")
    };
    let x = data(r * c, 3);
    let (ej, ei) = (
        mk(true).gradient_a(&[&x]).unwrap_err(),
        mk(false).gradient_a(&[&x]).unwrap_err(),
    );
    assert_eq!(ej.to_string(), ei.to_string());
    assert!(
        matches!(ej, Error::OutOfBounds { ref index, .. } if index == &[0.0, 50.0]),
        "{ej}"
    );
}

#[test]
fn compiled_kernels_are_bit_identical_for_any_thread_count() {
    let n = 50;
    let x = data(n, 9);
    let (j, _) = both(n, |b, a| {
        let g = b.generate(&[8, 2000], |i| {
            let k = i[1].imod(50.0);
            a.at(&[k]).sin() * a.at(&[i[0] * 3.0]) + a.at(&[(k + i[0]).min(49.0)]).exp()
        });
        sum_all(&g)
    });
    let g1 = in_pool(1, || j.gradient_a(&[&x]).expect("gradient"));
    let g2 = in_pool(2, || j.gradient_a(&[&x]).expect("gradient"));
    let g3 = in_pool(3, || j.gradient_a(&[&x]).expect("gradient"));
    assert_eq!(g1.value.to_bits(), g2.value.to_bits());
    assert_eq!(bits(&g1.grads[0]), bits(&g2.grads[0]));
    assert_eq!(bits(&g1.grads[0]), bits(&g3.grads[0]));
}

#[test]
fn a_branch_not_taken_contributes_no_nan() {
    // sqrt's partial is NaN below zero and ∞ at zero: the branch not taken meets a zero
    // adjoint, which must stay zero (`AdjMul`), compiled as interpreted.
    let n = 4000;
    let mut x = data(n, 21);
    x[7] = 0.0;
    let (j, i) = both(n, |_, a| {
        a.map(|v| cond(v.gt(0.0), v.sqrt() * 2.0, v * v)).sum()
    });
    let g = agree(&j, &i, &x);
    assert!(
        g.iter().all(|d| d.is_finite()),
        "a NaN leaked into the gradient"
    );
    close_to_forward(&g, &x, |v| {
        v.iter().fold(Dual64::constant(0.0), |s, &v| {
            s + if v.re > 0.0 { v.sqrt() * 2.0 } else { v * v }
        })
    });
}

#[test]
fn max_and_min_ties_split_the_adjoint_as_the_rule_table_says() {
    let n = 3000;
    // every third element ties with the constant
    let x: Vec<f64> = data(n, 4)
        .iter()
        .enumerate()
        .map(|(k, &v)| if k % 3 == 0 { 0.5 } else { v })
        .collect();
    let (j, i) = both(n, |_, a| {
        a.map(|v| v.max(lit(0.5)) * 3.0 + v.min(lit(0.5))).sum()
    });
    let g = agree(&j, &i, &x);
    for (k, (&d, &v)) in g.iter().zip(&x).enumerate() {
        let want = if v == 0.5 {
            0.5 * 3.0 + 0.5
        } else if v > 0.5 {
            3.0
        } else {
            1.0
        };
        assert_eq!(d, want, "element {k} at {v}");
    }
}

#[test]
fn several_outputs_per_element_are_stored_in_place() {
    // `generate_n`: the compiled kernel stores its three roots interleaved straight into the
    // output, beside a second output from the same program.
    let n = 2500;
    let x = data(n, 13);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        let g = b.generate_n(&[n], 3, |i| {
            let v = a.at(&[i[0]]);
            let w = a.at(&[(i[0] + 1.0).min((n - 1) as f64)]);
            vec![v * w, v.sin() + w, (v - w).exp()]
        });
        let m = a.map(|v| v * 2.0 + 1.0);
        b.build(&[&g, &m]).expect("build")
    };
    let (j, i) = (mk(true), mk(false));
    let oj = j.run(&[&x]).expect("run");
    let oi = i.run(&[&x]).expect("run");
    assert_eq!(oj.len(), 2);
    for (a, b) in oj.iter().zip(&oi) {
        assert_eq!(bits(a.data()), bits(b.data()));
    }
    for e in [0, 1, 1234, n - 1] {
        let (v, w) = (x[e], x[(e + 1).min(n - 1)]);
        assert_eq!(oj[0].data()[3 * e], v * w);
        assert_eq!(oj[0].data()[3 * e + 1], v.sin() + w);
        assert_eq!(oj[0].data()[3 * e + 2], (v - w).exp());
        assert_eq!(oj[1].data()[e], x[e] * 2.0 + 1.0);
    }
}

#[test]
fn negative_nan_and_guarded_indices_at_the_edges() {
    let n = 3000;
    let x = data(n, 6);
    // a negative index (−1 at element 0), and a NaN index (0/0 at element 5)
    let (j, i) = both(n, |b, a| b.generate(&[n], |i| a.at(&[i[0] - 1.0])).sum());
    let (ej, ei) = (j.run(&[&x]).unwrap_err(), i.run(&[&x]).unwrap_err());
    assert_eq!(ej.to_string(), ei.to_string());
    assert!(matches!(ej, Error::OutOfBounds { ref index, .. } if index == &vec![-1.0]));
    let (j, i) = both(n, |b, a| {
        b.generate(&[n], |i| a.at(&[i[0] / (i[0] - 5.0) * 0.0 + i[0]]))
            .sum()
    });
    let (ej, ei) = (j.run(&[&x]).unwrap_err(), i.run(&[&x]).unwrap_err());
    assert_eq!(ej.to_string(), ei.to_string());
    assert!(matches!(ej, Error::OutOfBounds { ref index, .. } if index[0].is_nan()));
    // the same read under a branch that is not taken at the bad element (no error), and the
    // largest valid index (n − 1) in the other branch
    let (j, i) = both(n, |b, a| {
        b.generate(&[n], |i| {
            cond(
                i[0].gt(0.0),
                a.at(&[i[0] - 1.0]),
                a.at(&[lit((n - 1) as f64)]),
            )
        })
        .sum()
    });
    let g = agree(&j, &i, &x);
    // elements 1.. read a[0..n−1] once each; element 0 reads a[n − 1]
    assert!(
        g.iter().all(|&d| d == 1.0),
        "each element read exactly once"
    );
}

#[test]
fn element_wise_kernels_run_two_elements_at_a_time_bit_for_bit() {
    // Call-free element-wise kernels compute two elements per iteration in vector registers
    // (an odd count leaves the last element to the scalar loop); each lane must compute what
    // the interpreter and plain Rust compute, NaN, ±0 and ±∞ included.
    let n = 4099;
    let mut x = data(n, 91);
    let special: Vec<f64> = EDGES.iter().copied().chain([0.5]).collect();
    x[..special.len()].copy_from_slice(&special);
    x[n - 1] = f64::NAN;
    let y_of = |v: f64| ((v * 1.5 + 0.25).max(v * v).min(v.abs().sqrt()) / (v - 0.5)).max(-3.0);
    let z_of = |u: f64, w: f64| if u != 0.0 { -w } else { w.min(u) };
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        let y = a.map(|v| ((v * 1.5 + 0.25).max(v * v).min(v.abs().sqrt()) / (v - 0.5)).max(-3.0));
        let z = a.zip_with(&y, |u, w| cond(u, -w, w.min(u)));
        // two outputs per element, stored interleaved
        let g = b.generate_n(&[n], 2, |i| {
            let v = a.at(&[i[0]]);
            vec![v.max(0.25) - v + i[0] * 0.5, (-v).min(v * 2.0)]
        });
        b.build(&[&y, &z, &g]).expect("build")
    };
    let (j, i) = (mk(true), mk(false));
    let oj = j.run(&[&x]).expect("run");
    let oi = i.run(&[&x]).expect("run");
    for (a, b) in oj.iter().zip(&oi) {
        assert_eq!(bits(a.data()), bits(b.data()), "compiled vs interpreted");
    }
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for (e, &v) in x.iter().enumerate() {
        let y = y_of(v);
        assert!(same(oj[0].data()[e], y), "y[{e}] of {v}");
        assert!(same(oj[1].data()[e], z_of(v, y)), "z[{e}] of {v}");
        assert!(
            same(oj[2].data()[2 * e], v.max(0.25) - v + e as f64 * 0.5),
            "g[{e}].0 of {v}"
        );
        assert!(
            same(oj[2].data()[2 * e + 1], (-v).min(v * 2.0)),
            "g[{e}].1 of {v}"
        );
    }
}

#[test]
fn partials_computed_inline_are_the_rule_tables_bit_for_bit() {
    // tanh′ = 1 − tanh², ln′ = 1/x, recip′ = −recip², sqrt′ = 1/(2·sqrt), and both partials
    // of `/` are emitted inline by the compiler; with no scatter in the program the compiled
    // gradient must equal the interpreter's (which calls the rule table) bit for bit.
    let n = 3000;
    let x = common::uniform(n, 17, 0.1, 3.0);
    let prog = |_: &Builder, a: &Acc| {
        a.map(|v| {
            let t = (v * 0.7 - 1.0).tanh() * (v * v + 1.0).ln();
            let r = (v + 0.25).recip() + (v * 3.0).sqrt();
            t / (r + 2.0) + 1.5 / v
        })
        .sum()
    };
    let (j, i) = both(n, prog);
    let (gj, gi) = (j.gradient_a(&[&x]).unwrap(), i.gradient_a(&[&x]).unwrap());
    assert_eq!(bits(&gj.grads[0]), bits(&gi.grads[0]));
    close_to_forward(&gj.grads[0], &x, |v| {
        v.iter().fold(Dual64::constant(0.0), |acc, &v| {
            let t = (v * 0.7 - 1.0).tanh() * (v * v + 1.0).ln();
            let r = (v + 0.25).recip() + (v * 3.0).sqrt();
            acc + t / (r + 2.0) + 1.5 / v
        })
    });
}

/// `powi` with a small exponent is compiled inline (binary powering, as `f64::powi`: `a.powi(2)`
/// ran 7× slower than `a * a` through the rule-table call; a new user): values and partials
/// bit for bit the interpreter's (the rule table's), for exponents −7..=9 and 64, at ordinary
/// points, at ±0, ±∞ and NaN, and on values that overflow or underflow in between, in the
/// scalar and the paired (two-at-a-time) code; gradients against forward mode.
#[test]
fn powi_compiled_inline_is_the_rule_tables_bit_for_bit() {
    let n = 3000;
    let mut x = common::uniform(n, 29, -2.5, 2.5);
    x[..EDGES.len()].copy_from_slice(&EDGES);
    x[10] = 1e200;
    x[11] = -3e-160;
    x[12] = 1.0000001;
    let exps: Vec<i32> = (-7..=9).chain([64, -64, 65]).collect();
    for &k in &exps {
        let prog = |_: &Builder, a: &Acc| a.map(|v| v.powi(k) + (v * 0.5).powi(k)).sum();
        let (j, i) = both(n, prog);
        let (vj, vi) = (j.run(&[&x]).unwrap(), i.run(&[&x]).unwrap());
        assert_eq!(bits(vj[0].data()), bits(vi[0].data()), "value, n = {k}");
        // the elements one by one (the sum could hide a difference)
        let each = |jit: bool| {
            let b = Builder::new();
            b.set_jit(jit);
            let a = b.input(&[n]);
            let y = a.map(|v| v.powi(k) * 3.0);
            b.build(&[&y]).unwrap().run(&[&x]).unwrap()[0]
                .data()
                .to_vec()
        };
        let want: Vec<f64> = x.iter().map(|v| v.powi(k) * 3.0).collect();
        assert_eq!(bits(&each(true)), bits(&want), "elements, n = {k}");
        assert_eq!(
            bits(&each(false)),
            bits(&want),
            "elements interpreted, n = {k}"
        );
        let (gj, gi) = (j.gradient_a(&[&x]).unwrap(), i.gradient_a(&[&x]).unwrap());
        assert_eq!(bits(&gj.grads[0]), bits(&gi.grads[0]), "gradient, n = {k}");
        // (away from 0, where negative powers overflow: ±0.5..2.5)
        let finite: Vec<f64> = common::uniform(n, 31, 0.5, 2.5)
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 2 == 0 { *v } else { -v })
            .collect();
        let g = j.gradient_a(&[&finite]).unwrap();
        close_to_forward(&g.grads[0], &finite, |v| {
            v.iter().fold(Dual64::constant(0.0), |acc, &v| {
                acc + v.powi(k) + (v * 0.5).powi(k)
            })
        });
    }
}

/// A stencil's neighbours (`x.at(&[i[0] + 1.0])`, `i[0] + 2.0 - 1.0`) are affine too: the
/// gradient's scatter into a large `x` gets per-chunk windows and is compiled (it was
/// interpreted: the Rosenbrock of a new user, `100·(xᵢ₊₁ − xᵢ²)² + (1 − xᵢ)²` over 10⁶
/// elements, took 2–3× longer). Compiled against interpreted and forward mode, and bit-identical
/// for any thread count.
#[test]
fn a_stencil_s_neighbours_scatter_through_windows() {
    let n = 100_000;
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let x = b.input(&[n]);
        let y = b.generate(&[n - 2], |i| {
            let (p, c) = (x.at(&[i[0]]), x.at(&[i[0] + 1.0]));
            let e = x.at(&[i[0] + 2.0 - 1.0]) * x.at(&[lit(2.0) + i[0]]);
            100.0 * (c - p.powi(2)).powi(2) + (1.0 - p).powi(2) + e.sin()
        });
        b.build_scalar(&y.sum()).expect("build")
    };
    let x = data(n, 41);
    let (j, i) = (mk(true), mk(false));
    let (gj, gi) = (j.gradient_a(&[&x]).unwrap(), i.gradient_a(&[&x]).unwrap());
    assert_eq!(gj.value.to_bits(), gi.value.to_bits());
    for (k, (a, b)) in gj.grads[0].iter().zip(&gi.grads[0]).enumerate() {
        assert!(
            (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
            "∂/∂x{k}: compiled {a} vs interpreted {b}"
        );
    }
    close_to_forward(&gj.grads[0][..998], &x[..1000], |v| {
        // the terms of the first 1000 inputs: complete for the first 998 coordinates
        (0..1000 - 2).fold(Dual64::constant(0.0), |acc, k| {
            let (p, c) = (v[k], v[k + 1]);
            acc + (c - p.powi(2)).powi(2) * 100.0 + (-p + 1.0).powi(2) + (v[k + 1] * v[k + 2]).sin()
        })
    });
    let g1 = in_pool(1, || j.gradient_a(&[&x]).unwrap());
    for t in [2, 3] {
        let g = in_pool(t, || j.gradient_a(&[&x]).unwrap());
        assert_eq!(bits(&g.grads[0]), bits(&g1.grads[0]), "{t} threads");
    }
}

/// A full-grid stencil reads neighbours before the first element too, guarded off
/// (`x.at(&[i[0] - 1.0])` where `i[0] ≥ 1`): their scatters' constant is negative. They are
/// windowed and compiled like those after (a negative constant made the whole target not
/// affine, and the gradient ran interpreted, 2.6× slower: a hunter's central difference).
/// 1-D and 2-D (a 5-point Laplacian), compiled against interpreted and forward mode,
/// bit-identical for any thread count.
#[test]
fn a_full_grid_stencil_s_neighbours_before_the_first_element_scatter_through_windows() {
    let (n, r, c) = (100_000, 300, 300);
    let inside = |j: &Exp, m: usize| j.ge(0.0).and(j.lt(m as f64));
    let mk = |jit: bool, two_d: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        if two_d {
            let x = b.input(&[r, c]);
            let y = b.generate(&[r, c], |i| {
                let at = |d0: f64, d1: f64| {
                    let (j0, j1) = (i[0] + d0, i[1] + d1);
                    cond(
                        inside(&j0, r).and(inside(&j1, c)),
                        x.at(&[j0, j1]),
                        lit(0.0),
                    )
                };
                let lap = at(-1.0, 0.0) + at(1.0, 0.0) + at(0.0, -1.0) + at(0.0, 1.0)
                    - 4.0 * at(0.0, 0.0);
                lap * lap + at(0.0, 0.0).sin()
            });
            b.build_scalar(&sum_all(&y)).expect("build")
        } else {
            let x = b.input(&[n]);
            let y = b.generate(&[n], |i| {
                let at = |d: f64| {
                    let j = i[0] + d;
                    cond(inside(&j, n), x.at(&[j]), lit(0.0))
                };
                let g = (at(1.0) - at(-1.0)) * 0.5;
                g * g * at(0.0)
            });
            b.build_scalar(&y.sum()).expect("build")
        }
    };
    for two_d in [false, true] {
        let len = if two_d { r * c } else { n };
        let x = data(len, 44);
        let (j, i) = (mk(true, two_d), mk(false, two_d));
        let (gj, gi) = (j.gradient_a(&[&x]).unwrap(), i.gradient_a(&[&x]).unwrap());
        assert_eq!(gj.value.to_bits(), gi.value.to_bits());
        for (k, (a, b)) in gj.grads[0].iter().zip(&gi.grads[0]).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                "2-D {two_d}, ∂/∂x{k}: compiled {a} vs interpreted {b}"
            );
        }
        // forward mode along a direction, over the same function written with loops
        let f = |v: &[Dual64]| {
            let get = |p: i64, q: i64| {
                let (rows, cols) = if two_d { (r, c) } else { (1, n) };
                if (0..rows as i64).contains(&p) && (0..cols as i64).contains(&q) {
                    v[p as usize * cols + q as usize]
                } else {
                    Dual64::constant(0.0)
                }
            };
            let mut t = Dual64::constant(0.0);
            if two_d {
                for p in 0..r as i64 {
                    for q in 0..c as i64 {
                        let lap = get(p - 1, q) + get(p + 1, q) + get(p, q - 1) + get(p, q + 1)
                            - get(p, q) * 4.0;
                        t += lap * lap + get(p, q).sin();
                    }
                }
            } else {
                for q in 0..n as i64 {
                    let g = (get(0, q + 1) - get(0, q - 1)) * 0.5;
                    t += g * g * get(0, q);
                }
            }
            vec![t]
        };
        let dir = data(len, 45);
        let (_, jv) = forward::jvp(f, &x, &dir);
        let dot: f64 = gj.grads[0].iter().zip(&dir).map(|(g, v)| g * v).sum();
        assert!(
            (dot - jv[0]).abs() <= 1e-9 * (1.0 + jv[0].abs()),
            "2-D {two_d}: gradient · v {dot} vs forward {}",
            jv[0]
        );
        let g1 = in_pool(1, || j.gradient_a(&[&x]).unwrap());
        for t in [2, 3] {
            let g = in_pool(t, || j.gradient_a(&[&x]).unwrap());
            assert_eq!(
                bits(&g.grads[0]),
                bits(&g1.grads[0]),
                "2-D {two_d}, {t} threads"
            );
        }
    }
}

/// Parameters packed into one vector (`p = [a; b; c]`, read as `p.at(&[i[0] + n])`): the
/// gradient's scatters into far-apart blocks of `p`'s adjoint get a window each per chunk
/// (one window spanned all blocks, nearly the whole adjoint per chunk), a neighbour
/// (`i + 2n + 1`) shares its block's. Compiled against interpreted and forward mode, and
/// bit-identical for any thread count.
#[test]
fn a_packed_vector_s_far_apart_blocks_scatter_through_windows() {
    let n = 50_000;
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let p = b.input(&[3 * n]);
        let y = b.generate(&[n - 1], |i| {
            let nn = n as f64;
            let (a, bb) = (p.at(&[i[0]]), p.at(&[i[0] + nn]));
            let (c, c1) = (p.at(&[i[0] + 2.0 * nn]), p.at(&[i[0] + (2.0 * nn + 1.0)]));
            a * bb + (c * c1).sin() * a
        });
        b.build_scalar(&y.sum()).expect("build")
    };
    let p = data(3 * n, 43);
    let (j, i) = (mk(true), mk(false));
    let (gj, gi) = (j.gradient_a(&[&p]).unwrap(), i.gradient_a(&[&p]).unwrap());
    assert_eq!(gj.value.to_bits(), gi.value.to_bits());
    for (k, (a, b)) in gj.grads[0].iter().zip(&gi.grads[0]).enumerate() {
        assert!(
            (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
            "∂/∂p{k}: compiled {a} vs interpreted {b}"
        );
    }
    // the closed form: ∂/∂a_k = b_k + sin(c_k c_k+1), ∂/∂b_k = a_k, ∂/∂c_k = cos(c_k-1 c_k) c_k-1
    // a_k-1 + cos(c_k c_k+1) c_k+1 a_k (terms k < n − 1 only)
    let (a, b, c) = (&p[..n], &p[n..2 * n], &p[2 * n..]);
    for k in (0..n).step_by(997).chain([n - 2, n - 1]) {
        let live = |k: usize| k < n - 1;
        let ga = if live(k) {
            b[k] + (c[k] * c[k + 1]).sin()
        } else {
            0.0
        };
        let gb = if live(k) { a[k] } else { 0.0 };
        let mut gc = 0.0;
        if k > 0 && live(k - 1) {
            gc += (c[k - 1] * c[k]).cos() * c[k - 1] * a[k - 1];
        }
        if live(k) {
            gc += (c[k] * c[k + 1]).cos() * c[k + 1] * a[k];
        }
        for (what, got, want) in [
            ("a", gj.grads[0][k], ga),
            ("b", gj.grads[0][n + k], gb),
            ("c", gj.grads[0][2 * n + k], gc),
        ] {
            assert!(
                (got - want).abs() <= 1e-12 * (1.0 + want.abs()),
                "∂/∂{what}{k}: {got} vs {want}"
            );
        }
    }
    let g1 = in_pool(1, || j.gradient_a(&[&p]).unwrap());
    for t in [2, 3] {
        let g = in_pool(t, || j.gradient_a(&[&p]).unwrap());
        assert_eq!(bits(&g.grads[0]), bits(&g1.grads[0]), "{t} threads");
    }
}

/// `f32` kernels are compiled too (they were interpreted): every kind of `f32` operation —
/// `+ − × ÷`, negation, `abs`, `sqrt` and reciprocals inline in `f32` registers (two elements
/// at a time in `f32x4` lanes, and one at a time for the last element: `n` is odd), the other
/// values and every partial by calls, comparisons, a `cond`, a cast from `f64`, gathers from a
/// small `f32` table whose adjoint windows add in `f32` (one scatter per element, so the same
/// order) — gives the interpreter's bits, values and gradients, at edge values too, and the
/// same bits for any thread count.
#[test]
fn f32_kernels_are_compiled_bit_for_bit() {
    use adjoint_array::{Buffer, Input};
    let n = 4099;
    let mut x: Vec<f32> = data(n, 51).iter().map(|&v| v as f32).collect();
    let edges = [
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 4.0,
        3.0e38,
        -1.0e-30,
    ];
    for (k, v) in edges.iter().enumerate() {
        x[3 * k + 1] = *v;
    }
    let w: Vec<f32> = data(37, 52).iter().map(|&v| v as f32 + 2.0).collect();
    let y = data(n, 53);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let (xa, wa, ya) = (b.input_f32(&[n]), b.input_f32(&[37]), b.input(&[n]));
        let z = b.generate(&[n], |i| {
            let (v, t) = (xa.at(&[i[0]]), wa.at(&[i[0].imod(37.0)]));
            let c = ya.at(&[i[0]]).cast_f32();
            let s = (v * t).sin() + (v * 0.5).exp() * t;
            let m = (v * v).max(t * 0.25) / (t * t + 1.0) - v.min(t);
            let r = (v.abs() + 0.5).sqrt().recip() - (s * 0.1).tanh() + (-v).abs();
            let q = cond(v.gt(0.0), m * 2.0, r * t);
            s * m + q + (v.abs() + 1.5).powf(t) * c + v.powi(3) - v.hypot(t)
                + v.atan2(c)
                + v.max(-v)
                - (-v).min(v).max(0.5)
        });
        b.build_scalar(&z.sum()).expect("build")
    };
    let (j, i) = (mk(true), mk(false));
    // element-wise results (a sum would hide a zero's sign): max and min at ties of ±0 and
    // against NaN, the arithmetic and the inline functions at the edges
    let maps = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let xa = b.input_f32(&[n]);
        let outs = [
            xa.map(|v| v.max(-v)),
            xa.map(|v| (-v).min(v)),
            xa.map(|v| v.max(0.0) + v.min(-0.0)),
            xa.map(|v| (v * v - v / 3.0).sqrt().recip() + v.abs()),
        ];
        b.build(&outs.iter().collect::<Vec<_>>()).expect("build")
    };
    let (mj, mi) = (maps(true), maps(false));
    let (oj, oi) = (
        mj.run_typed(&[Input::F32(&x)]).unwrap(),
        mi.run_typed(&[Input::F32(&x)]).unwrap(),
    );
    for (k, (a, b)) in oj.iter().zip(&oi).enumerate() {
        let (a, b) = (a.as_f32().unwrap(), b.as_f32().unwrap());
        if let Some(e) = (0..n).find(|&e| a[e].to_bits() != b[e].to_bits()) {
            panic!(
                "map {k}, x = {}: compiled {} vs interpreted {}",
                x[e], a[e], b[e]
            );
        }
    }
    let ins = [Input::F32(&x), Input::F32(&w), Input::F64(&y)];
    let bits_of = |b: &Buffer| -> Vec<u64> { b.to_f64_vec().iter().map(|v| v.to_bits()).collect() };
    let (rj, ri) = (j.run_typed(&ins).unwrap(), i.run_typed(&ins).unwrap());
    assert!(matches!(rj[0], Buffer::F32(_)));
    assert_eq!(bits_of(&rj[0]), bits_of(&ri[0]), "value");
    let (gj, gi) = (
        j.gradient_typed(&ins).unwrap(),
        i.gradient_typed(&ins).unwrap(),
    );
    for (k, (a, b)) in gj.grads.iter().zip(&gi.grads).enumerate() {
        assert_eq!(bits_of(a), bits_of(b), "gradient {k}");
    }
    let g1 = in_pool(1, || j.gradient_typed(&ins).unwrap());
    for t in [2, 3] {
        let g = in_pool(t, || j.gradient_typed(&ins).unwrap());
        for (a, b) in g.grads.iter().zip(&g1.grads) {
            assert_eq!(bits_of(a), bits_of(b), "{t} threads");
        }
    }
    // and against f64 forward mode, to f32 accuracy, on the finite part: ∂/∂x of one element
    let x2: Vec<f32> = data(n, 54).iter().map(|&v| v as f32).collect();
    let ins2 = [Input::F32(&x2), Input::F32(&w), Input::F64(&y)];
    let g = j.gradient_typed(&ins2).unwrap().grads[0].to_f64_vec();
    for e in [0usize, 1, 777, n - 1] {
        let (t, c) = (f64::from(w[e % 37]), f64::from(y[e] as f32));
        let f = |v: Dual64| {
            let s = (v * t).sin() + (v * 0.5).exp() * t;
            let m = (v * v).max(Dual64::constant(t * 0.25)) / (t * t + 1.0)
                - v.min(Dual64::constant(t));
            let r = (v.abs() + 0.5).sqrt().recip() - (s * 0.1).tanh() + (-v).abs();
            let q = if v.re > 0.0 { m * 2.0 } else { r * t };
            s * m + q + (v.abs() + 1.5).powf(Dual64::constant(t)) * c + v.powi(3)
                - v.hypot(Dual64::constant(t))
                + v.atan2(Dual64::constant(c))
                + v.max(-v)
                - (-v).min(v).max(Dual64::constant(0.5))
        };
        let d = f(Dual64::new(f64::from(x2[e]), 1.0)).eps;
        assert!(
            (g[e] - d).abs() <= 1e-4 * (1.0 + d.abs()),
            "∂/∂x{e}: {} vs forward {d}",
            g[e]
        );
    }
}

/// An `f32` stencil's gradient: each element receives three scattered terms, which compiled
/// code sums element by element and the interpreter node by node — the same terms, so equal to
/// rounding (a reviewer found 1 ulp on about half the elements), bit-identical for any thread
/// count, and the closed form to `f32` accuracy.
#[test]
fn an_f32_stencil_s_gradient_sums_its_terms_in_element_order() {
    use adjoint_array::Input;
    let n = 4099;
    let x: Vec<f32> = data(n, 61).iter().map(|&v| v as f32).collect();
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let xa = b.input_f32(&[n]);
        let y = b.generate(&[n - 2], |i| {
            xa.at(&[i[0]]) * 1.1 + xa.at(&[i[0] + 1.0]) * 0.7 + (xa.at(&[i[0] + 2.0]) * 1.3).sin()
        });
        b.build_scalar(&y.sum()).expect("build")
    };
    let grad = |p: &Program| p.gradient_typed(&[Input::F32(&x)]).unwrap().grads[0].to_f64_vec();
    let (j, i) = (mk(true), mk(false));
    let (gj, gi) = (grad(&j), grad(&i));
    for e in 0..n {
        // the closed form: 1.1 (as e), 0.7 (as e − 1), 1.3·cos(1.3 x) (as e − 2), where in range
        let v = f64::from(x[e]);
        let mut want = 0.0;
        if e < n - 2 {
            want += 1.1;
        }
        if (1..n - 1).contains(&e) {
            want += 0.7;
        }
        if e >= 2 {
            want += 1.3 * (1.3 * v).cos();
        }
        assert!(
            (gj[e] - gi[e]).abs() <= 2e-7 * gi[e].abs().max(1.0),
            "{e}: {} vs {}",
            gj[e],
            gi[e]
        );
        assert!(
            (gj[e] - want).abs() <= 1e-5 * want.abs().max(1.0),
            "{e}: {} vs {want}",
            gj[e]
        );
    }
    let g1 = in_pool(1, || grad(&j));
    for t in [2, 3] {
        assert_eq!(bits(&in_pool(t, || grad(&j))), bits(&g1), "{t} threads");
    }
}

/// One element of [`paired_kernels_mix_vector_and_scalar_operations_bit_for_bit`], written once
/// for `Exp` and for forward mode (`c` makes a constant, `w` reads the table).
macro_rules! mixed {
    ($v:expr, $e:expr, $w:expr, $c:expr, $sel:expr) => {{
        let (v, e, w, c, sel) = ($v, $e, $w, $c, $sel);
        // a gather (the table at e mod 37), calls with inline and called partials, a discrete
        // op, a select on a comparison, the index itself, and vector arithmetic between them
        let t = w(e);
        let s = (v * t).sin() + (v * c(0.5)).exp() * t;
        let m = (v * v).max(t * c(0.25)) / (t * t + c(1.0));
        let r = (v.abs() + c(0.5)).sqrt().recip() - (s * c(0.1)).tanh();
        let q = sel(v, m * c(2.0), r * t);
        [
            s * m + q,
            r / (q * q + c(1.0)) - (t - v) * c(0.3),
            (v + c(1.5)).powf(t),
        ]
    }};
}

#[test]
fn paired_kernels_mix_vector_and_scalar_operations_bit_for_bit() {
    // Every compiled kernel runs two elements per iteration: vector arithmetic for both, the
    // scalar code (calls, gathers, scatters, index arithmetic) once per element. An odd count
    // leaves the last element to the scalar loop. Values must be the interpreter's bit for
    // bit, NaN and ±∞ included; gradients too where no scatter is involved (∂/∂a: identity
    // reads), and to rounding where adjoints are scattered (∂/∂w).
    let n = 4097;
    let mut a = data(n, 23);
    for (k, v) in [f64::NAN, f64::INFINITY, -0.0, f64::NEG_INFINITY, 0.0]
        .iter()
        .enumerate()
    {
        a[2 * k + 1] = *v; // in the second lane of a pair
    }
    let w = data(37, 24);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let ai = b.input(&[n]);
        let wi = b.input(&[37]);
        let g = b.generate_n(&[n], 3, |i| {
            let v = ai.at(&[i[0]]);
            let row = (i[0] * 0.5).floor();
            let sel = |v: Exp, x: Exp, y: Exp| cond(v.gt(0.0), x, y);
            let out = mixed!(v, i[0].imod(37.0), |j: Exp| wi.at(&[j]), lit, sel);
            vec![out[0] + row * 0.001, out[1], out[2]]
        });
        let total = sum_all(&g.map(|x| x * 0.5));
        (
            b.build(&[&g]).expect("build"),
            b.build_scalar(&total).expect("build"),
        )
    };
    let ((vj, j), (vi, i)) = (mk(true), mk(false));
    let (oj, oi) = (vj.run(&[&a, &w]).unwrap(), vi.run(&[&a, &w]).unwrap());
    assert_eq!(
        bits(oj[0].data()),
        bits(oi[0].data()),
        "values: compiled vs interpreted"
    );
    // gradients on finite inputs (the specials make NaN gradients)
    let a = data(n, 25);
    let (gj, gi) = (
        j.gradient_a(&[&a, &w]).unwrap(),
        i.gradient_a(&[&a, &w]).unwrap(),
    );
    assert_eq!(gj.value.to_bits(), gi.value.to_bits());
    assert_eq!(bits(&gj.grads[0]), bits(&gi.grads[0]), "∂/∂a");
    for (x, y) in gj.grads[1].iter().zip(&gi.grads[1]) {
        assert!((x - y).abs() <= 1e-10 * (1.0 + x.abs()), "∂/∂w: {x} vs {y}");
    }
    // and right: forward mode over all of w and a few elements of a
    let elem = |v: Dual64, e: usize, w: &[Dual64]| {
        let sel = |v: Dual64, x: Dual64, y: Dual64| if v.re > 0.0 { x } else { y };
        let out = mixed!(v, e % 37, |j: usize| w[j], Dual64::constant, sel);
        (out[0] + (e / 2) as f64 * 0.001 + out[1] + out[2]) * 0.5
    };
    let gw = forward::gradient(
        |wd: &[Dual64]| {
            (0..n).fold(Dual64::constant(0.0), |s, e| {
                s + elem(Dual64::constant(a[e]), e, wd)
            })
        },
        &w,
    );
    for (x, y) in gj.grads[1].iter().zip(&gw) {
        assert!(
            (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
            "∂/∂w: {x} vs forward {y}"
        );
    }
    let wc: Vec<Dual64> = w.iter().map(|&v| Dual64::constant(v)).collect();
    for e in [0, 1, 2, 37, 2047, 4095, 4096] {
        let d = forward::gradient(|v: &[Dual64]| elem(v[0], e, &wc), &[a[e]])[0];
        let x = gj.grads[0][e];
        assert!(
            (x - d).abs() <= 1e-10 * (1.0 + d.abs()),
            "∂/∂a[{e}]: {x} vs forward {d}"
        );
    }
}

#[test]
fn paired_kernels_alternating_scalar_calls_and_vector_arithmetic() {
    // Slots are reused once their value is dead, so a slot last written by vector arithmetic
    // is later written by a call (run per element) and read again by vector arithmetic: the
    // paired code must read the call's value, not the slot's earlier one.
    let n = 3001;
    let x = data(n, 31);
    let f = |v: f64| {
        let mut a = v;
        for k in 0..6 {
            let s = (a * 0.9 + k as f64).sin();
            a = s * 2.0 - a * 0.5;
            a = (a * 0.3).exp() + s;
        }
        a
    };
    let (j, i) = both(n, |_, a| {
        a.map(|v| {
            let mut a = v;
            for k in 0..6 {
                let s = (a * 0.9 + k as f64).sin();
                a = s * 2.0 - a * 0.5;
                a = (a * 0.3).exp() + s;
            }
            a
        })
        .sum()
    });
    let (vj, vi) = (j.run(&[&x]).unwrap(), i.run(&[&x]).unwrap());
    assert_eq!(vj[0].data()[0].to_bits(), vi[0].data()[0].to_bits());
    let total: f64 = x.iter().map(|&v| f(v)).sum();
    assert!((vj[0].data()[0] - total).abs() <= 1e-12 * total.abs().max(1.0));
    let g = agree(&j, &i, &x);
    close_to_forward(&g, &x, |v| {
        v.iter().fold(Dual64::constant(0.0), |acc, &v| {
            let mut a = v;
            for k in 0..6 {
                let s = (a * 0.9 + k as f64).sin();
                a = s * 2.0 - a * 0.5;
                a = (a * 0.3).exp() + s;
            }
            acc + a
        })
    });
}

#[test]
fn sin_and_cos_partials_are_the_rule_tables_bit_for_bit() {
    // The partial of sin is the cos node (and of cos, −sin; sinh ↔ cosh), so that a kernel
    // evaluating both functions calls each once: the numbers must be the rule table's.
    use adjoint_core::rules::{unary, Op1};
    let n = 2500;
    let x = common::uniform(n, 41, -20.0, 20.0);
    for jit in [true, false] {
        for (op, f) in [
            (Op1::Sin, (|v: Exp| v.sin()) as fn(Exp) -> Exp),
            (Op1::Cos, |v: Exp| v.cos()),
            (Op1::Sinh, |v: Exp| (v * 0.1).sinh()),
            (Op1::Cosh, |v: Exp| (v * 0.1).cosh()),
        ] {
            let b = Builder::new();
            b.set_jit(jit);
            let a = b.input(&[n]);
            let p = b.build_scalar(&a.map(f).sum()).unwrap();
            let g = p.gradient_a(&[&x]).unwrap();
            for (e, (&d, &v)) in g.grads[0].iter().zip(&x).enumerate() {
                let want = match op {
                    Op1::Sinh | Op1::Cosh => unary(op, v * 0.1).d * 0.1,
                    _ => unary(op, v).d,
                };
                assert_eq!(
                    d.to_bits(),
                    want.to_bits(),
                    "{op:?}′ at x[{e}] = {v}, jit {jit}"
                );
            }
        }
    }
}

#[test]
fn index_components_counted_along_the_loop_are_exact() {
    // The compiled loop carries the index components from element to element (no division
    // per element). 2405 elements: three blocks starting mid-row, and an odd count, so the
    // last element runs in the scalar loop.
    let (d0, d1, d2) = (37, 5, 13);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let x = b.input(&[d0]);
        let g = b.generate(&[d0, d1, d2], |i| {
            i[0] * 1000.0 + i[1] * 10.0 + i[2] + x.at(&[i[0]]) * 0.0
        });
        // only inner axes read
        let h = b.generate(&[d0, d1, d2], |i| i[2] * 3.0 + i[1]);
        b.build(&[&g, &h]).expect("build")
    };
    let x = data(d0, 3);
    let (oj, oi) = (mk(true).run(&[&x]).unwrap(), mk(false).run(&[&x]).unwrap());
    for (e, (g, h)) in oj[0].data().iter().zip(oj[1].data()).enumerate() {
        let (i0, i1, i2) = (e / (d1 * d2), e / d2 % d1, e % d2);
        assert_eq!(*g, (i0 * 1000 + i1 * 10 + i2) as f64, "element {e}");
        assert_eq!(*h, (i2 * 3 + i1) as f64, "element {e}");
    }
    assert_eq!(bits(oj[0].data()), bits(oi[0].data()));
    // An index component past a smaller array's extent is still an error.
    let mk_oob = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let y = b.input(&[d0, d1 - 1]);
        let g = b.generate(&[d0, d1, d2], |i| y.at(&[i[0], i[1]]));
        b.build(&[&g]).expect("build")
    };
    let y = data(d0 * (d1 - 1), 4);
    let (ej, ei) = (
        mk_oob(true).run(&[&y]).unwrap_err(),
        mk_oob(false).run(&[&y]).unwrap_err(),
    );
    assert_eq!(ej.to_string(), ei.to_string());
    assert!(
        matches!(ej, Error::OutOfBounds { ref index, .. } if index[1] == 4.0),
        "{ej}"
    );
}

#[test]
fn large_scatter_targets_get_windows_over_what_each_chunk_touches() {
    // The adjoint of reading x [300, 7, 5] (more than 8192 elements) at affine indices from a
    // [300, 7] space scatters into x's adjoint. Compiled code gives each chunk a window over
    // the rows it touches instead of all of x (which would not pay, so it was interpreted).
    let (r, k, d) = (300, 7, 5);
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let x = b.input(&[r, k, d]);
        let w = b.input(&[k, d]);
        let y = b.generate(&[r, k], |i| {
            let s = (0..d).fold(lit(0.0), |s, c| {
                let c = lit(c as f64);
                s + (x.at(&[i[0], i[1], c]) * w.at(&[i[1], c])).sin()
            });
            s * x.at(&[i[0], lit(0.0), lit(4.0)])
        });
        b.build_scalar(&sum_all(&y)).expect("build")
    };
    let reference = |x: &[Dual64], w: &[Dual64]| {
        let mut t = Dual64::constant(0.0);
        for i0 in 0..r {
            for i1 in 0..k {
                let s = (0..d).fold(Dual64::constant(0.0), |s, c| {
                    s + (x[(i0 * k + i1) * d + c] * w[i1 * d + c]).sin()
                });
                t += s * x[i0 * k * d + 4];
            }
        }
        t
    };
    let x = data(r * k * d, 5);
    let w = data(k * d, 6);
    let (j, i) = (mk(true), mk(false));
    let (gj, gi) = (
        j.gradient_a(&[&x, &w]).unwrap(),
        i.gradient_a(&[&x, &w]).unwrap(),
    );
    assert_eq!(gj.value.to_bits(), gi.value.to_bits());
    for (a, b) in gj.grads.concat().iter().zip(&gi.grads.concat()) {
        assert!(
            (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
            "compiled {a} vs interpreted {b}"
        );
    }
    // against forward mode: all of w, and x along one direction
    let gw = forward::gradient(
        |wd: &[Dual64]| {
            let xd: Vec<Dual64> = x.iter().map(|&v| Dual64::constant(v)).collect();
            reference(&xd, wd)
        },
        &w,
    );
    for (a, b) in gj.grads[1].iter().zip(&gw) {
        assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "∂/∂w: {a} vs {b}");
    }
    let dir = data(r * k * d, 7);
    let (_, jv) = forward::jvp(
        |xd: &[Dual64]| {
            let wd: Vec<Dual64> = w.iter().map(|&v| Dual64::constant(v)).collect();
            vec![reference(xd, &wd)]
        },
        &x,
        &dir,
    );
    let dot: f64 = gj.grads[0].iter().zip(&dir).map(|(g, v)| g * v).sum();
    assert!(
        (dot - jv[0]).abs() <= 1e-10 * (1.0 + jv[0].abs()),
        "x·dir: {dot} vs {}",
        jv[0]
    );
    // and bit-identical for any thread count
    let g1 = in_pool(1, || j.gradient_a(&[&x, &w]).unwrap());
    for t in [2, 3] {
        let g = in_pool(t, || j.gradient_a(&[&x, &w]).unwrap());
        assert_eq!(
            bits(&g.grads.concat()),
            bits(&g1.grads.concat()),
            "{t} threads"
        );
    }
}

#[test]
fn a_stored_exponential_is_read_back_by_its_adjoint() {
    // A generate whose result is exp/tanh/ln of something gives its adjoint kernel its own
    // array to read instead of computing the function again; the partials come from the stored
    // value with the rule table's operations. Seeds broadcast from a sum and dense from a map.
    let n = 3001;
    let x = data(n, 31)
        .iter()
        .map(|v| v.abs() + 0.1)
        .collect::<Vec<_>>();
    type Prim = fn(Exp) -> Exp;
    type PrimD = fn(Dual64) -> Dual64;
    let cases: [(Prim, PrimD); 3] = [
        (|v| v.exp(), |v| v.exp()),
        (|v| v.tanh(), |v| v.tanh()),
        (|v| v.ln(), |v| v.ln()),
    ];
    for (f, fd) in cases {
        for materialize in [true, false] {
            let (j, i) = both(n, |b, a| {
                let e = b.generate(&[n], |i| f(a.at(i) * 0.5 + 0.25));
                let e = if materialize { e.materialize() } else { e };
                // both seed kinds: a sum (broadcast) and an element-wise map (dense)
                let sq = e.map(|v| v * v).sum();
                let s = e.sum();
                b.generate(&[], |_| sq.the() * 0.3 + s.the())
            });
            let g = agree(&j, &i, &x);
            close_to_forward(&g, &x, |xd| {
                xd.iter().fold(Dual64::constant(0.0), |acc, &v| {
                    let e = fd(v * 0.5 + 0.25);
                    acc + e * e * 0.3 + e
                })
            });
        }
    }
}

#[test]
fn sin_and_cos_of_one_value_share_a_call_bit_for_bit() {
    // A compiled kernel computes `sin v` and `cos v` of the same value with one call
    // (`jit::sin_cos`); the values must be the interpreter's (`Op1::eval`, one function each)
    // bit for bit, also for special arguments and where sin and cos of two values interleave.
    // 3001 elements: pairs and a scalar tail.
    let n = 3001;
    let mut x = common::uniform(n, 77, -30.0, 30.0);
    let special = [
        0.0,
        -0.0,
        1e22,
        -1e300,
        7.0e-320,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::PI,
    ];
    x[..special.len()].copy_from_slice(&special);
    x[n - 1] = 1e22; // in the scalar tail
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        // sin before cos, cos before sin, and two angles interleaved
        let r = a.map(|v| {
            let w = v * 3.0 + 1.0;
            v.sin() * 2.0 + w.cos() - v.cos() * w.sin() + (v.cos() - w.sin()) * 0.5
        });
        b.build(&[&r]).expect("build")
    };
    let (pj, pi) = (mk(true), mk(false));
    let (vj, vi) = (pj.run(&[&x]).unwrap(), pi.run(&[&x]).unwrap());
    assert_eq!(
        bits(vj[0].data()),
        bits(vi[0].data()),
        "values, compiled and interpreted"
    );
    // Against the same expression in plain Rust (to rounding: the compiler may merge its
    // calls into another libm entry point).
    for (e, (&got, &v)) in vj[0].data().iter().zip(&x).enumerate() {
        let w = v * 3.0 + 1.0;
        let want = v.sin() * 2.0 + w.cos() - v.cos() * w.sin() + (v.cos() - w.sin()) * 0.5;
        assert!(
            got == want
                || (got - want).abs() <= 1e-14 * (1.0 + want.abs())
                || (got.is_nan() && want.is_nan()),
            "x[{e}] = {v}: {got} vs {want}"
        );
    }
    // The gradient (whose kernel evaluates sin and cos of both angles again) against forward
    // mode, on the finite arguments.
    let xs: Vec<f64> = x[special.len()..n - 1].to_vec();
    let m = xs.len();
    let b = Builder::new();
    let a = b.input(&[m]);
    let r = a.map(|v| {
        let w = v * 3.0 + 1.0;
        v.sin() * 2.0 + w.cos() - v.cos() * w.sin()
    });
    let p = b.build_scalar(&r.sum()).unwrap();
    let g = p.gradient_a(&[&xs]).unwrap();
    for (e, (&d, &v)) in g.grads[0].iter().zip(&xs).enumerate().step_by(97) {
        let (_, jv) = forward::jvp(
            |q: &[Dual64]| {
                let w = q[0] * 3.0 + 1.0;
                vec![q[0].sin() * 2.0 + w.cos() - q[0].cos() * w.sin()]
            },
            &[v],
            &[1.0],
        );
        assert!(
            (d - jv[0]).abs() <= 1e-12 * (1.0 + jv[0].abs()),
            "x[{e}] = {v}: {d} vs {}",
            jv[0]
        );
    }
}

#[test]
fn max_and_min_with_a_constant_operand_are_the_interpreters_bit_for_bit() {
    // With a constant operand that is not NaN, `max`/`min` compile to one comparison (the
    // constant decides what a NaN picks); with a NaN constant, to the general two. Either
    // side, constants ±0 against inputs ±0, NaN and ±∞, in both lanes of a pair and in the
    // scalar loop (odd count): the interpreter, bit for bit, and the engine's definition,
    // `y` where it wins or `x` is NaN, else `x` (Rust's `f64::max`, whose sign of a ±0 tie is
    // unspecified: the engine keeps `x`).
    let n = 4099;
    let mut x = data(n, 57);
    let special: Vec<f64> = EDGES.iter().copied().chain([0.1]).collect();
    for (k, v) in special.iter().enumerate() {
        x[2 * k] = *v;
        x[2 * k + 1] = *v;
    }
    x[n - 1] = -0.0;
    let consts = [0.0, -0.0, 0.1, f64::INFINITY, f64::NAN];
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        let outs: Vec<Acc> = consts
            .iter()
            .map(|&c| {
                b.generate_n(&[n], 4, |i| {
                    let v = a.at(&[i[0]]);
                    vec![v.max(c), v.min(c), lit(c).max(v), lit(c).min(v)]
                })
            })
            .collect();
        b.build(&outs.iter().collect::<Vec<_>>()).expect("build")
    };
    let (oj, oi) = (mk(true).run(&[&x]).unwrap(), mk(false).run(&[&x]).unwrap());
    for (k, &c) in consts.iter().enumerate() {
        assert_eq!(
            bits(oj[k].data()),
            bits(oi[k].data()),
            "compiled vs interpreted, c = {c}"
        );
        for (e, &v) in x.iter().enumerate() {
            let max = |x: f64, y: f64| if x < y || x.is_nan() { y } else { x };
            let min = |x: f64, y: f64| if x > y || x.is_nan() { y } else { x };
            let want = [max(v, c), min(v, c), max(c, v), min(c, v)];
            let canon = |w: f64| if w.is_nan() { 0 } else { w.to_bits() };
            if v != 0.0 || c != 0.0 {
                assert_eq!(
                    want.map(canon),
                    [v.max(c), v.min(c), c.max(v), c.min(v)].map(canon),
                    "the definition is Rust's"
                );
            }
            for (w, want) in want.iter().enumerate() {
                let got = oj[k].data()[4 * e + w];
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "c = {c}, x[{e}] = {v}, form {w}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn adding_a_signed_zero_constant_keeps_ieee_signs() {
    // `x + 0.0` is not `x` at x = −0 (−0 + +0 = +0), so the expression builder may fold only
    // `x + (−0.0)`, `x − 0.0` and `(−0.0) + x`. The signs show through `1/…` (±∞), compiled and
    // interpreted, against plain Rust bit for bit.
    let n = 4099;
    let mut x = data(n, 11);
    x[0] = -0.0;
    x[1] = 0.0;
    x[n - 1] = -0.0;
    let forms = |v: f64| {
        [
            1.0 / (v + 0.0),
            1.0 / (0.0 + v),
            1.0 / (v - (-0.0)),
            1.0 / (v + (-0.0)),
            1.0 / ((-0.0) + v),
            1.0 / (v - 0.0),
        ]
    };
    let mk = |jit: bool| {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[n]);
        let y = b.generate_n(&[n], 6, |i| {
            let v = a.at(&[i[0]]);
            let one = lit(1.0);
            vec![
                one / (v + 0.0),
                one / (lit(0.0) + v),
                one / (v - (-0.0)),
                one / (v + (-0.0)),
                one / (lit(-0.0) + v),
                one / (v - 0.0),
            ]
        });
        b.build(&[&y]).expect("build")
    };
    for jit in [true, false] {
        let out = mk(jit).run(&[&x]).unwrap();
        for (e, &v) in x.iter().enumerate() {
            for (w, want) in forms(v).iter().enumerate() {
                let got = out[0].data()[6 * e + w];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "jit {jit}, x[{e}] = {v}, form {w}: {got} vs {want}"
                );
            }
        }
    }
}

/// A padded copy's gradient (`y = [x·x, 0, …]` over twice `x`'s length) with `x` larger than a
/// dense scatter window: the chunks over the padding scatter nothing live, got an empty window,
/// and the compiled kernel panicked ("a window outside its target", from 8193 elements; a
/// hunter). Closed form: 2x; the interpreter agrees.
#[test]
fn a_padded_copys_gradient_compiles_for_large_arrays() {
    for m in [8192usize, 8193, 50_000] {
        let xs: Vec<f64> = (0..m).map(|i| (i % 7) as f64 * 0.5).collect();
        for jit in [true, false] {
            let b = Builder::new();
            b.set_jit(jit);
            let x = b.input(&[m]);
            let y = b.generate(&[2 * m], |i| {
                i[0].lt(m as f64).select(x.at(&[i[0]]) * x.at(&[i[0]]), 0.0)
            });
            let p = b.build_scalar(&y.sum()).unwrap();
            let g = p.gradient_a(&[&xs]).unwrap();
            assert_eq!(g.value, xs.iter().map(|v| v * v).sum::<f64>(), "m = {m}");
            let wrong = g.grads[0]
                .iter()
                .zip(&xs)
                .filter(|(g, x)| **g != 2.0 * **x)
                .count();
            assert_eq!(wrong, 0, "m = {m}, jit {jit}");
        }
    }
}

/// √'s partial at −0 is +∞ (the rule table's `+ 0`, the one-sided limit), compiled as
/// interpreted: the JIT's inline partial was `1/(v + v)` = −∞ where √ and its partial share a
/// kernel (a hunter).
#[test]
fn the_compiled_sqrt_partial_at_negative_zero_is_the_rule_tables() {
    let n = 4096; // compiled by Cranelift from 2048 elements
    let xs = vec![-0.0f64; n];
    let ys = vec![-1.0f64; n];
    for jit in [true, false] {
        let b = Builder::new();
        b.set_jit(jit);
        let x = b.input(&[n]);
        let y = b.input(&[n]);
        let d = x.zip_with(&y, |v, w| gradient_e(&[v, w], |u| u[0].sqrt() * u[1])[0]);
        let out = b.build(&[&d]).unwrap().run(&[&xs, &ys]).unwrap();
        assert_eq!(out[0].data()[0], f64::NEG_INFINITY, "jit {jit}"); // −1 · (+∞)
        let b = Builder::new();
        b.set_jit(jit);
        let x = b.input(&[n]);
        let y = b.input(&[n]);
        let f = x.zip_with(&y, |a, c| a.sqrt() * c).sum();
        let g = b.build_scalar(&f).unwrap().gradient_a(&[&xs, &ys]).unwrap();
        assert_eq!(g.grads[0][0], f64::NEG_INFINITY, "jit {jit}");
    }
}

/// An index that fusion makes a constant out of bounds (`generate(|_| n + 3)` read through
/// `map`): `run` and `gradient_a` return `Error::OutOfBounds`, as for any other index (it was
/// a panic inside a worker; a hunter); where a guard drops the read, nothing is read.
#[test]
fn a_constant_index_out_of_bounds_is_an_error() {
    for n in [4usize, 4096] {
        for guarded in [false, true] {
            let b = Builder::new();
            let x = b.input(&[n]);
            let idx = b.generate(&[n], |_| lit((n + 3) as f64));
            let y = if guarded {
                idx.map(|j| j.lt(0.0).select(x.at(&[j]), 0.0))
            } else {
                idx.map(|j| x.at(&[j]))
            };
            let p = b.build_scalar(&y.sum()).unwrap();
            let xs = vec![1.0; n];
            if guarded {
                assert_eq!(p.run(&[&xs]).unwrap()[0].data()[0], 0.0, "n = {n}");
                assert!(p.gradient_a(&[&xs]).unwrap().grads[0]
                    .iter()
                    .all(|&g| g == 0.0));
            } else {
                let e = p.run(&[&xs]).unwrap_err();
                assert!(matches!(e, Error::OutOfBounds { .. }), "n = {n}: {e}");
                let e = p.gradient_a(&[&xs]).unwrap_err();
                assert!(matches!(e, Error::OutOfBounds { .. }), "n = {n}: {e}");
            }
        }
    }
}

/// An expression built inside `gradient_e`'s closure and used outside it is an error saying so
/// (it built, then `run` hit "internal error: entered unreachable code"; a hunter).
#[test]
fn a_value_kept_from_gradient_e_s_closure_is_an_error() {
    let b = Builder::new();
    let x = b.input(&[3]);
    let y = x.map(|v| {
        let mut val: Option<Exp> = None;
        let g = gradient_e(&[v], |u| {
            let f = u[0] * u[0];
            val = Some(f);
            f
        })[0];
        g + val.unwrap()
    });
    let e = b.build(&[&y]).unwrap_err();
    assert!(
        e.to_string()
            .contains("built inside a `gradient_e`/`jacobian_e` closure is used outside it"),
        "{e}"
    );
    // Kept in the closure's result instead, it is right: x² + 2x.
    let b = Builder::new();
    let x = b.input(&[3]);
    let y = x.map(|v| gradient_e(&[v], |u| u[0] * u[0])[0] + v * v);
    let out = b.build(&[&y]).unwrap().run(&[&[1.0, 2.0, 3.0]]).unwrap();
    assert_eq!(out[0].data(), [3.0, 8.0, 15.0]);
}
