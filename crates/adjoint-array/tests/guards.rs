//! Reads guarded by `cond`, and outputs listed twice: programs a reviewer helper's hunt found
//! failing (a panic, or a false `OutOfBounds` for a read no element needs). Every value and
//! gradient is checked against plain Rust.

use adjoint_array::{cond, lit, Builder, Input, Program};

fn uniform(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn an_output_listed_twice_is_returned_twice() {
    // `run` moved the first copy out and then found nothing for the second (a panic).
    for n in [3, 5000] {
        let b = Builder::new();
        let x = b.input(&[n]);
        let y = x.map(|v| v * 2.0);
        let s = y.sum();
        let p: Program = b.build(&[&y, &s, &y, &s]).unwrap();
        let xs = uniform(n, 1);
        let want: Vec<f64> = xs.iter().map(|v| v * 2.0).collect();
        let total: f64 = want.iter().sum();
        let out = p.run(&[&xs]).unwrap();
        assert_eq!((out[0].data(), out[2].data()), (&want[..], &want[..]));
        // (the engine adds in blocks: another order than the sequential sum)
        let close = |a: f64| (a - total).abs() < 1e-12 * total.abs();
        assert!(close(out[1].data()[0]) && out[3].data()[0] == out[1].data()[0]);
        let typed = p.run_typed(&[Input::from(&xs[..])]).unwrap();
        assert_eq!(typed.len(), 4);
        let mut bufs = vec![Vec::new(); 4];
        p.run_into(&[&xs], &mut bufs).unwrap();
        assert_eq!((&bufs[0], &bufs[2]), (&want, &want));
        assert!(close(bufs[1][0]) && bufs[3][0] == bufs[1][0]);
        // Cotangents of both copies add: d/dx (y·1 + s·1 + y·1 + s·1) = 2 + 2 + 2 + 2 per element.
        let ones = vec![1.0; n];
        let (_, g) = p.vjp(&[&xs], &[&ones, &[1.0], &ones, &[1.0]]).unwrap();
        assert_eq!(g[0], vec![8.0; n]);
    }
}

#[test]
fn a_guarded_read_under_a_stored_value_keeps_its_guard_in_the_gradient() {
    // y = exp(i > 0 ? x[i - 1] : 0.5) is kept for the gradient (exp's derivative is itself);
    // the kept value cut the gradient kernel's path to the `cond`, so the read x[i - 1] lost
    // its guard and element 0's x[-1] was an `OutOfBounds` error.
    for n in [4, 3000] {
        for jit in [false, true] {
            let b = Builder::new();
            b.set_jit(jit);
            let x = b.input(&[n]);
            let xr = x.clone();
            let y = b
                .generate(&[n], move |i| {
                    cond(i[0].gt(0.0), xr.at(&[i[0] - 1.0]), lit(0.5)).exp()
                })
                .materialize();
            let p = b.build_scalar(&y.zip_with(&y, |p, q| p * q).sum()).unwrap();
            let xs = uniform(n, 2);
            let g = p.gradient_a(&[&xs]).unwrap();
            // Σ_{i≥1} exp(2 x[i−1]) + exp(1): ∂/∂x[k] = 2 exp(2 x[k]) for k < n − 1, else 0.
            let value: f64 = 1f64.exp() + xs[..n - 1].iter().map(|v| (2.0 * v).exp()).sum::<f64>();
            assert!((g.value - value).abs() < 1e-12 * value, "n={n}");
            for (k, xk) in xs.iter().enumerate() {
                let want = if k + 1 < n {
                    2.0 * (2.0 * xk).exp()
                } else {
                    0.0
                };
                assert!(
                    (g.grads[0][k] - want).abs() < 1e-12 * (1.0 + want),
                    "n={n} jit={jit} k={k}: {} vs {want}",
                    g.grads[0][k]
                );
            }
        }
    }
}

#[test]
fn a_guarded_read_in_a_stored_scan_step_keeps_its_guard_in_the_gradient() {
    // h[t][i] = tanh(i > 0 ? h[t−1][i]·w[i − 1] : h[t−1][i]·0.5), the tanh values kept per step
    // (`i[1]` is the lane).
    let b = Builder::new();
    let w = b.input(&[4]);
    let wr = w.clone();
    let hs = b.scan_n(
        &[4],
        3,
        1,
        |_| vec![lit(0.2)],
        move |i, s| {
            let prev = i[1] - 1.0;
            vec![cond(i[1].gt(0.0), s[0] * wr.at(&[prev]), s[0] * 0.5).tanh()]
        },
    );
    let p = b.build_scalar(&hs.sum().sum().sum()).unwrap();
    let wv = [0.3, 0.5, -0.2, 0.9];
    let plain = |w: &[f64]| -> f64 {
        let mut total = 0.0;
        for i in 0..4 {
            let mut h: f64 = 0.2;
            total += h; // the scan's element [0, i, 0] is the initial state
            for _ in 0..3 {
                h = if i > 0 { h * w[i - 1] } else { h * 0.5 }.tanh();
                total += h;
            }
        }
        total
    };
    let g = p.gradient_a(&[&wv]).unwrap();
    assert!((g.value - plain(&wv)).abs() < 1e-14);
    for k in 0..4 {
        let e = 1e-6;
        let (mut up, mut down) = (wv, wv);
        up[k] += e;
        down[k] -= e;
        let fd = (plain(&up) - plain(&down)) / (2.0 * e);
        assert!(
            (g.grads[0][k] - fd).abs() < 1e-8,
            "w[{k}]: {} vs {fd}",
            g.grads[0][k]
        );
    }
}

#[test]
fn dim_beyond_the_rank_is_an_error_naming_the_shape() {
    // (it was the constant 0)
    let b = Builder::new();
    let x = b.input(&[3, 4]);
    let xr = x.clone();
    let y = b.generate(&[3], move |i| xr.at(&[i[0], lit(0.0)]) * xr.dim(2));
    let e = b.build_scalar(&y.sum()).unwrap_err().to_string();
    assert!(e.contains("dim(2) of an array of shape [3, 4]"), "{e}");
    let b = Builder::new();
    let x = b.input(&[3, 4]);
    let xr = x.clone();
    let y = b.generate(&[3], move |i| xr.at(&[i[0], lit(0.0)]) * xr.dim(1));
    let p = b.build_scalar(&y.sum()).unwrap();
    let xs = uniform(12, 3);
    let want = 4.0 * (xs[0] + xs[4] + xs[8]);
    assert!((p.run(&[&xs]).unwrap()[0].data()[0] - want).abs() < 1e-14);
}

/// A shape whose element count overflows `usize` (or passes 2⁵³, the last exact `f64` index)
/// is a build error naming it: the count wrapped to 0, and the program built and ran to an
/// array with no data, panicked in a reduction, or aborted allocating its input (a hunter).
#[test]
fn a_shape_with_too_many_elements_is_a_build_error() {
    let b = Builder::new();
    let g = b.generate(&[1 << 32, 1 << 32], |i| i[0] + i[1]);
    let e = b.build(&[&g]).unwrap_err().to_string();
    assert!(
        e.contains("shape [4294967296, 4294967296]: its element count overflows usize"),
        "{e}"
    );
    let b = Builder::new();
    let g = b
        .generate(&[1 << 33, 1 << 31], |i| i[0] * 0.0 + 1.0)
        .sum()
        .sum();
    assert!(b.build_scalar(&g).is_err());
    let b = Builder::new();
    let x = b.input(&[1 << 32, 1 << 32]);
    assert!(b.build_scalar(&x.sum().sum()).is_err());
    let b = Builder::new();
    let x = b.input(&[1 << 27, 1 << 27]);
    let e = b.build_scalar(&x.sum().sum()).unwrap_err().to_string();
    assert!(e.contains("more than the 2^53"), "{e}");
    // At the limit's scale, a shape that fits still builds (nothing is allocated until a run),
    // and so does an empty one whose other axes overflow.
    let b = Builder::new();
    let x = b.input(&[1 << 26, 1 << 27]);
    assert!(b.build_scalar(&x.sum().sum()).is_ok());
    let b = Builder::new();
    let g = b.generate(&[1 << 32, 1 << 32, 0], |i| i[0] + i[1]);
    assert!(b.build(&[&g]).is_ok());
    // `use_array` and `reshape` to such shapes: the error, not an overflow panic (checked
    // builds) or an abort allocating a placeholder (the reviewer of the fix).
    let b = Builder::new();
    let u = b.use_array(&[1 << 32, 1 << 32], vec![]);
    assert!(b.build(&[&u]).is_err());
    let b = Builder::new();
    let r = b.input(&[4]).reshape(&[1 << 32, 1 << 32]);
    assert!(b.build(&[&r]).is_err());
    let b = Builder::new();
    let u = b.use_array(&[1 << 26, 1 << 27], vec![1.0]);
    let e = b.build(&[&u]).unwrap_err().to_string();
    assert!(e.contains("use_array"), "{e}");
}

#[test]
fn reads_whose_guards_read_each_other_are_not_false_errors() {
    // x[i+1] is needed where i < n−1 (t2's condition) and x[i−1] where i > 0 (t1's): each
    // read's guard reads the other, a cycle. One guard was dropped to break it, and that read
    // then failed at the element no branch needed (a false `OutOfBounds`).
    for n in [6usize, 3000] {
        for jit in [false, true] {
            let b = Builder::new();
            b.set_jit(jit);
            let x = b.input(&[n]);
            let xr = x.clone();
            let last = n as f64 - 1.0;
            let z = b.generate(&[n], move |i| {
                let (c1, c2) = (i[0].gt(0.0), i[0].lt(last));
                let (up, down) = (i[0] + 1.0, i[0] - 1.0);
                let t1 = cond(
                    c1,
                    cond(xr.at(&[down]).gt(0.0).and(c2), xr.at(&[up]), lit(0.0)),
                    lit(0.0),
                );
                let t2 = cond(
                    c2,
                    cond(xr.at(&[up]).gt(0.0).and(c1), xr.at(&[down]), lit(0.0)),
                    lit(0.0),
                );
                t1 + t2 * 2.0
            });
            let plain = |x: &[f64]| -> Vec<f64> {
                (0..n)
                    .map(|i| {
                        let inner = i > 0 && i + 1 < n;
                        let t1 = if inner && x[i - 1] > 0.0 {
                            x[i + 1]
                        } else {
                            0.0
                        };
                        let t2 = if inner && x[i + 1] > 0.0 {
                            x[i - 1]
                        } else {
                            0.0
                        };
                        t1 + t2 * 2.0
                    })
                    .collect()
            };
            let xs = uniform(n, 5);
            let p = b.build(&[&z]).unwrap();
            assert_eq!(
                p.run(&[&xs]).unwrap()[0].data(),
                &plain(&xs)[..],
                "n={n} jit={jit}"
            );
            // The gradient of Σ z²: ∂/∂x[k] by central differences (the function is piecewise
            // quadratic away from x = 0).
            let q = b.build_scalar(&z.map(|v| v * v).sum()).unwrap();
            let g = q.gradient_a(&[&xs]).unwrap();
            let total = |x: &[f64]| plain(x).iter().map(|v| v * v).sum::<f64>();
            for k in [0, 1, n / 2, n - 2, n - 1] {
                let (mut up, mut down) = (xs.clone(), xs.clone());
                up[k] += 1e-6;
                down[k] -= 1e-6;
                let fd = (total(&up) - total(&down)) / 2e-6;
                assert!(
                    (g.grads[0][k] - fd).abs() < 1e-6,
                    "n={n} jit={jit} k={k}: {} vs {fd}",
                    g.grads[0][k]
                );
            }
        }
    }
    // A read its program does need out of bounds is still an error.
    let b = Builder::new();
    let x = b.input(&[4]);
    let xr = x.clone();
    let z = b.generate(&[4], move |i| {
        let (c1, c2) = (i[0].ge(0.0), i[0].lt(4.0)); // always true: x[-1] at i = 0 is needed
        let (up, down) = (i[0] + 1.0, i[0] - 1.0);
        let t1 = cond(
            c1,
            cond(xr.at(&[down]).gt(9.0).and(c2), xr.at(&[up]), lit(0.0)),
            lit(0.0),
        );
        let t2 = cond(
            c2,
            cond(xr.at(&[up]).gt(9.0).and(c1), xr.at(&[down]), lit(0.0)),
            lit(0.0),
        );
        t1 + t2
    });
    let p = b.build(&[&z]).unwrap();
    let e = p.run(&[&[1.0, 2.0, 3.0, 4.0]]).unwrap_err().to_string();
    assert!(
        e.contains("out of bounds") || e.contains("OutOfBounds"),
        "{e}"
    );
}

#[test]
fn a_second_derivative_through_cond_ignores_the_branch_not_taken() {
    use adjoint_array::gradient_e;
    // f(p) = p√p for p > 0, else p²; at p = −0.5: f′ = 2p = −1, f″ = 2. The derivative of the
    // branch not taken is NaN there (√ of a negative); gated adjoints must not let it through.
    // f″ was NaN.
    type Branches = fn(adjoint_array::Exp) -> adjoint_array::Exp;
    let cases: [(Branches, f64); 3] = [
        (|p| cond(p.gt(0.0), p.sqrt() * p, p * p), -0.5),
        (|p| cond(p.gt(0.0), p.sqrt().exp(), p * p), -0.5),
        (|p| cond(p.ge(-1.0), p * p, (-p - 1.0).sqrt() * p), 0.25),
    ];
    for (f, at) in cases {
        let b = Builder::new();
        let x = b.input(&[1]);
        let d = x.map(|v| gradient_e(&[v], |p| f(p[0]))[0]);
        let p = b.build_scalar(&d.sum()).unwrap();
        let g = p.gradient_a(&[&[at]]).unwrap();
        assert_eq!((g.value, g.grads[0][0]), (2.0 * at, 2.0), "at {at}");
    }
}

#[test]
fn a_read_guarded_by_cond_inside_gradient_e_keeps_its_guard() {
    use adjoint_array::gradient_e;
    // d/dp of (i < 2 ? p · x[i + 1] : p²): x[i + 1] is out of bounds at i = 2, in the branch
    // not taken. It was an `OutOfBounds` error.
    // (n = 4096: the compiled kernel too)
    for n in [3, 4096] {
        let b = Builder::new();
        let x = b.input(&[n]);
        let d = b.generate(&[n], |i| {
            gradient_e(&[x.at(&[i[0]])], |p| {
                cond(
                    i[0].lt(n as f64 - 1.0),
                    p[0] * x.at(&[i[0] + 1.0]),
                    p[0] * p[0],
                )
            })[0]
        });
        let p = b.build(&[&d]).unwrap();
        let xs = uniform(n, 3);
        let out = p.run(&[&xs]).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| if i + 1 < n { xs[i + 1] } else { 2.0 * xs[i] })
            .collect();
        assert_eq!(out[0].data(), &want[..], "n = {n}");
    }
}

#[test]
fn a_dropped_element_of_a_permute_performs_no_reads() {
    use adjoint_array::Combine;
    // Element 3 is dropped (keep false): its target `bucket[3]` is out of bounds and must not
    // be read. It was an `OutOfBounds` error.
    let b = Builder::new();
    let x = b.input(&[4]);
    let bucket = b.constant_input(&[3]);
    let zeros = b.use_array(&[2], vec![0.0, 0.0]);
    let h = x.permute(Combine::Add, &zeros, |i| {
        (i[0].lt(3.0), vec![bucket.at(&[i[0]])])
    });
    let total = h.map(|v| v * v).sum();
    let p = b.build(&[&h, &total]).unwrap();
    let inputs: [&[f64]; 2] = [&[1.0, 2.0, 3.0, 4.0], &[0.0, 1.0, 1.0]];
    let out = p.run(&inputs).unwrap();
    assert_eq!(out[0].data(), &[1.0, 5.0]);
    // the gradient of Σ h² (h = [x0, x1 + x2]): [2x0, 2(x1 + x2), 2(x1 + x2), 0]
    let ps = b.build_scalar(&total).unwrap();
    let g = ps.gradient_a(&inputs).unwrap();
    assert_eq!(g.grads[0], vec![2.0, 10.0, 10.0, 0.0]);
}

#[test]
fn errors_name_the_operation_the_user_wrote() {
    use adjoint_array::Error;
    // `&x + &y` of two shapes was a mismatch "in zip_with"
    let b = Builder::new();
    let (x, y) = (b.input(&[2]), b.input(&[3]));
    let z = &x + &y;
    let e = b.build(&[&z]).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { combinator: "`+`", left, right }
            if left == &[2] && right == &[3]),
        "{e}"
    );
    // `maximum` of an empty row was "fold1 over an empty axis"
    let b = Builder::new();
    let x = b.input(&[2, 0]);
    let m = x.maximum();
    let e = b.build(&[&m]).unwrap_err().to_string();
    assert!(
        e.contains("maximum over an empty axis") && e.contains("[2, 0]"),
        "{e}"
    );
    // a hunter: `backpermute` with too few indices said "indexing an array …", its run-time
    // range error said "in indexing", and `slice` showed an open axis as a NaN index
    let b = Builder::new();
    let x = b.input(&[2, 3]);
    let bp = x.backpermute(&[4], |i| vec![i[0]]);
    let e = b.build(&[&bp]).unwrap_err().to_string();
    assert!(e.contains("backpermute: the index function gives an index of length 1 for a source of shape [2, 3], which needs 2"), "{e}");
    let b = Builder::new();
    let x = b.input(&[5]);
    let y = x.backpermute(&[5], |i| vec![i[0] - 0.5]);
    let e = b
        .build(&[&y])
        .unwrap()
        .run(&[&[1.0; 5]])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "index [-0.5] out of bounds for shape [5] in indexing (`at`, or a `backpermute`)"
    );
    let b = Builder::new();
    let x = b.input(&[2, 3]);
    let s = x.slice(&[adjoint_array::Sl::All, adjoint_array::Sl::At(3)]);
    let e = b.build(&[&s]).unwrap_err().to_string();
    assert_eq!(e, "index [_, 3] out of bounds for shape [2, 3] in slice");
}
