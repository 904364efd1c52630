//! Seed 004's unit-test programs (Appendix A), plus scan, permute and awhile: each gradient is
//! compared with forward mode on a plain-Rust version of the same program, and with finite
//! differences of the array program itself.

use adjoint_array::{cond, lit, Acc, Builder, Combine, Exp, Program, Rep, Sl};
use adjoint_core::check::check_gradient;
use adjoint_core::forward::{self, Dual64};
use adjoint_core::prelude::*;

mod common;

fn data(n: usize, seed: u64) -> Vec<f64> {
    common::uniform(n, seed, -2.0, 2.0)
}

type Reference = Box<dyn Fn(&[Dual64]) -> Dual64>;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

/// Value and gradient against forward mode of `reference`, and against finite differences.
fn check1(p: &Program, x: &[f64], reference: impl Fn(&[Dual64]) -> Dual64, fd: bool) {
    let g = p.gradient_a(&[x]).expect("gradient");
    let v = p.run(&[x]).expect("run")[0].data()[0];
    assert_eq!(v, g.value, "run and gradient_a agree on the value");
    let xd: Vec<Dual64> = x.iter().map(|&v| Dual64::constant(v)).collect();
    let rv = reference(&xd).re;
    assert!(close(v, rv, 1e-12), "value {v} vs reference {rv}");
    let gf = forward::gradient(&reference, x);
    assert_eq!(g.grads[0].len(), gf.len(), "gradient length");
    for (i, (a, b)) in g.grads[0].iter().zip(&gf).enumerate() {
        assert!(
            close(*a, *b, 1e-9),
            "∂/∂x{i}: {a} vs forward {b}\n{:?}\n{:?}",
            g.grads[0],
            gf
        );
    }
    if fd {
        let f = |v: &[f64]| p.run(&[v]).expect("run")[0].data()[0];
        check_gradient(f, x, &g.grads[0]).assert_passed();
    }
}

fn build1(n: usize, f: impl FnOnce(&Builder, &Acc) -> Acc) -> Program {
    let b = Builder::new();
    let a = b.input(&[n]);
    let out = f(&b, &a);
    b.build_scalar(&out).expect("build")
}

fn sum_all(a: &Acc) -> Acc {
    let n: usize = a.shape().iter().product();
    a.reshape(&[n]).sum()
}

fn dsum<T: Real>(v: &[T]) -> T {
    v.iter().fold(T::cst(0.0), |a, &b| a + b)
}

#[test]
fn acond_0_and_0a() {
    for (x, flip) in [(data(7, 1), false), (data(7, 2), true)] {
        let p = build1(7, |b, a| {
            let m = a.map(|v| v * 2.0);
            let s = a.sum();
            let (t, e) = if flip { (&m, a) } else { (a, &m) };
            b.acond(|| s.the().gt(0.0), t, e).sum()
        });
        check1(
            &p,
            &x,
            |v| {
                let s = dsum(v);
                let m: Vec<Dual64> = v.iter().map(|&x| x * 2.0).collect();
                let pos = s.re > 0.0;
                if pos != flip {
                    dsum(v)
                } else {
                    dsum(&m)
                }
            },
            true,
        );
    }
}

#[test]
fn acond_1_shape_query() {
    let x = data(6, 3);
    let p = build1(6, |b, a| {
        let bb = a.map(|v| v * 2.0);
        let s = a.sum();
        let a1 = b.acond(|| s.the().gt(0.0), a, &bb);
        bb.map(|x| x * a1.dim(0)).sum()
    });
    check1(&p, &x, |v| dsum(v) * 2.0 * 6.0, true);
}

#[test]
fn acond_2a_and_2b_friendly() {
    for seed in [4, 5, 6] {
        let x = data(5, seed);
        for swap in [false, true] {
            let p = build1(5, |b, a| {
                let bb = a.map(|v| v * 2.0);
                let s = a.sum();
                let t = bb.map(|v| v + 1.0);
                let e = bb.map(|v| v * 2.0).map(|v| v - 1.0);
                let y = b.acond(|| s.the().le(2.0), &t, &e);
                if swap {
                    y.zip_with(&bb, |p, q| p * q).sum()
                } else {
                    bb.zip_with(&y, |p, q| p * q).sum()
                }
            });
            check1(
                &p,
                &x,
                |v| {
                    let s = dsum(v);
                    let bb: Vec<Dual64> = v.iter().map(|&x| x * 2.0).collect();
                    let y: Vec<Dual64> = if s.re <= 2.0 {
                        bb.iter().map(|&x| x + 1.0).collect()
                    } else {
                        bb.iter().map(|&x| x * 2.0 - 1.0).collect()
                    };
                    dsum(&bb.iter().zip(&y).map(|(&p, &q)| p * q).collect::<Vec<_>>())
                },
                true,
            );
        }
    }
}

#[test]
fn acond_3a_3b() {
    let x = data(4, 7);
    let p = build1(4, |b, a| {
        let g = b.generate(&[4], |_| lit(42.0));
        b.acond(|| lit(1.0), &g, a).sum()
    });
    check1(&p, &x, |_| Dual64::constant(168.0), false);
    let p = build1(4, |b, a| {
        let g = b.generate(&[], |_| lit(42.0));
        let s1 = a.map(|v| v * 2.0).sum();
        let s2 = a.map(|v| v + 3.0).sum();
        let z = s1.zip_with(&s2, |p, q| p + q);
        b.acond(|| lit(4.0).ge(0.0), &g, &z)
    });
    check1(&p, &x, |_| Dual64::constant(42.0), false);
}

#[test]
fn map_and_zip_with() {
    let x = data(9, 8);
    let p = build1(9, |_, a| a.map(|v| v * 3.0).sum());
    check1(&p, &x, |v| dsum(v) * 3.0, true);
    let b = Builder::new();
    let a = b.input(&[5]);
    let c = b.input(&[5]);
    let out = a.zip_with(&c, |x, y| x.sin() * (x + y).cos()).sum();
    let p = b.build_scalar(&out).unwrap();
    let (xa, xc) = (data(5, 9), data(5, 10));
    let g = p.gradient_a(&[&xa, &xc]).unwrap();
    let all: Vec<f64> = xa.iter().chain(&xc).copied().collect();
    let gf = forward::gradient(
        |v: &[Dual64]| {
            (0..5)
                .map(|i| v[i].sin() * (v[i] + v[5 + i]).cos())
                .fold(Dual64::constant(0.0), |a, b| a + b)
        },
        &all,
    );
    let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
    assert_eq!(got.len(), gf.len(), "gradient length");
    for (a, b) in got.iter().zip(&gf) {
        assert!(close(*a, *b, 1e-12));
    }
}

#[test]
fn folds() {
    let x = data(6, 11);
    // fold (*) 1 a
    let p = build1(6, |_, a| a.fold(1.0, |x, y| x * y));
    check1(
        &p,
        &x,
        |v| v.iter().fold(Dual64::constant(1.0), |a, &b| a * b),
        true,
    );
    // fold max 3 a, with an input where the max is unique
    let xm: Vec<f64> = x.iter().enumerate().map(|(i, v)| v + i as f64).collect();
    let p = build1(6, |_, a| a.fold(3.0, |x, y| x.max(y)));
    check1(
        &p,
        &xm,
        |v| v.iter().fold(Dual64::constant(3.0), |a, &b| a.max(b)),
        true,
    );
    // fold with a conditional lambda (general kernel, not a recognised operator)
    let p = build1(6, |_, a| {
        a.fold(0.0, |x, y| {
            let abs = |v: Exp| cond(v.lt(0.0), -v, v);
            abs(x) + abs(y)
        })
    });
    check1(
        &p,
        &x,
        |v| {
            v.iter().fold(Dual64::constant(0.0), |a, &b| {
                let abs = |t: Dual64| if t.re < 0.0 { -t } else { t };
                abs(a) + abs(b)
            })
        },
        true,
    );
    // fold1 (*) and fold1 max
    let p = build1(6, |_, a| a.fold1(|x, y| x * y));
    check1(&p, &x, |v| v[1..].iter().fold(v[0], |a, &b| a * b), true);
    let p = build1(6, |_, a| a.fold1(|x, y| x.max(y)));
    check1(
        &p,
        &xm,
        |v| v[1..].iter().fold(v[0], |a, &b| a.max(b)),
        true,
    );
    // a general fold1 lambda: soft maximum-like associative op x + y + x*y
    let p = build1(6, |_, a| a.map(|v| v * 0.1).fold1(|x, y| x + y + x * y));
    check1(
        &p,
        &x,
        |v| {
            let w: Vec<Dual64> = v.iter().map(|&t| t * 0.1).collect();
            w[1..].iter().fold(w[0], |a, &b| a + b + a * b)
        },
        true,
    );
}

#[test]
fn fold_whose_function_indexes() {
    // fold (\acc y -> acc + w!0 * y) over rows: the function reads an array (beyond seed 004).
    let b = Builder::new();
    let a = b.input(&[3, 4]);
    let w = b.input(&[2]);
    let out = a
        .fold(0.0, |acc, y| {
            acc * w.at(&[lit(1.0)]) + w.at(&[lit(0.0)]) * y
        })
        .sum();
    let p = b.build_scalar(&out).unwrap();
    let (xa, xw) = (data(12, 12), vec![0.7, 0.9]);
    let g = p.gradient_a(&[&xa, &xw]).unwrap();
    let all: Vec<f64> = xa.iter().chain(&xw).copied().collect();
    let r = |v: &[Dual64]| {
        let (a, w) = v.split_at(12);
        (0..3)
            .map(|r| {
                (0..4).fold(Dual64::constant(0.0), |acc, j| {
                    acc * w[1] + w[0] * a[r * 4 + j]
                })
            })
            .fold(Dual64::constant(0.0), |x, y| x + y)
    };
    let gf = forward::gradient(r, &all);
    let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
    assert_eq!(got.len(), gf.len(), "gradient length");
    for (i, (a, b)) in got.iter().zip(&gf).enumerate() {
        assert!(close(*a, *b, 1e-12), "{i}: {a} vs {b}");
    }
}

#[test]
fn replicates() {
    let x = data(4, 13);
    let p = build1(4, |_, a| {
        a.map(|x| x * x + x)
            .replicate(&[Rep::All, Rep::New(5)])
            .map(|v| v * 2.0)
            .sum()
            .product()
    });
    check1(
        &p,
        &x,
        |v| {
            v.iter()
                .map(|&x| (x * x + x) * 2.0 * 5.0)
                .fold(Dual64::constant(1.0), |a, b| a * b)
        },
        true,
    );
    let p = build1(4, |_, a| {
        sum_all(
            &a.map(|x| x * x + x)
                .replicate(&[Rep::New(5), Rep::All])
                .map(|v| v / 20.0),
        )
    });
    check1(
        &p,
        &x,
        |v| dsum(&v.iter().map(|&x| (x * x + x) * 0.25).collect::<Vec<_>>()),
        true,
    );
    let p = build1(4, |_, a| {
        let r = a.replicate(&[Rep::All, Rep::New(2)]).map(|x| x * x + x);
        sum_all(
            &r.replicate(&[Rep::All, Rep::New(5), Rep::All, Rep::New(3)])
                .map(|v| v * 2.0),
        )
    });
    check1(
        &p,
        &x,
        |v| dsum(&v.iter().map(|&x| (x * x + x) * 60.0).collect::<Vec<_>>()),
        true,
    );
    let p = build1(4, |_, a| {
        let r = a.replicate(&[Rep::All, Rep::New(2)]).map(|x| x * x + x);
        sum_all(
            &r.replicate(&[Rep::New(5), Rep::All, Rep::New(3), Rep::All])
                .map(|v| v * 2.0),
        )
    });
    check1(
        &p,
        &x,
        |v| dsum(&v.iter().map(|&x| (x * x + x) * 60.0).collect::<Vec<_>>()),
        true,
    );
}

#[test]
fn slices() {
    let n = 6;
    let x = data(n, 14);
    let m = n / 4 + 3;
    let p = build1(n, |_, a| {
        a.replicate(&[Rep::New(m), Rep::New(m), Rep::All])
            .slice(&[Sl::At(2), Sl::At(1), Sl::All])
            .sum()
    });
    check1(&p, &x, |v| dsum(v), true);
    for (p1, p2) in [(3usize, 40usize), (0, 0), (61, 17)] {
        let p = build1(n, |_, a| {
            let nn = n as f64;
            let a1 = a.backpermute(&[n, n, n + 1], |i| vec![(i[0] + i[1] + i[2]).imod(nn)]);
            a1.slice(&[Sl::At(p1 % n), Sl::At(p2 % n), Sl::All]).sum()
        });
        check1(
            &p,
            &x,
            |v| {
                (0..=n)
                    .map(|k| v[(p1 % n + p2 % n + k) % n])
                    .fold(Dual64::constant(0.0), |a, b| a + b)
            },
            true,
        );
    }
}

#[test]
fn reshapes() {
    let n = 8;
    let x = data(n, 15);
    let p = build1(n, |_, a| a.reshape(&[2, n / 2]).sum().product());
    check1(&p, &x, |v| dsum(&v[..4]) * dsum(&v[4..]), true);
    let p = build1(n, |_, a| {
        a.reshape(&[2, n / 2]).reshape(&[n, 1]).product().sum()
    });
    check1(&p, &x, |v| dsum(v), true);
}

#[test]
fn backpermutes() {
    let n = 5;
    let x = data(n, 16);
    for m in [5usize, 7] {
        let p = build1(n, |_, a| {
            sum_all(&a.backpermute(&[m, 2 * m], |i| vec![(i[0] + i[1]).imod(n as f64)]))
        });
        check1(
            &p,
            &x,
            |v| {
                let mut s = Dual64::constant(0.0);
                for i in 0..m {
                    for j in 0..2 * m {
                        s += v[(i + j) % n];
                    }
                }
                s
            },
            true,
        );
        let p = build1(n, |_, a| {
            let bb = a.backpermute(&[m, 2 * m], |i| vec![(i[0] + i[1]).imod(n as f64)]);
            let c = bb.sum();
            let d = c.backpermute(&[2, 3, m], |i| vec![(i[1] * i[2]).min((m - 1) as f64)]);
            sum_all(&d.map(|v| v / 2.0).slice(&[Sl::All, Sl::All, Sl::At(2)]))
        });
        check1(
            &p,
            &x,
            |v| {
                let c: Vec<Dual64> = (0..m)
                    .map(|i| (0..2 * m).fold(Dual64::constant(0.0), |s, j| s + v[(i + j) % n]))
                    .collect();
                let mut s = Dual64::constant(0.0);
                for _ in 0..2 {
                    for i in 0..3 {
                        s += c[(i * 2).min(m - 1)] / 2.0;
                    }
                }
                s
            },
            true,
        );
    }
}

#[test]
fn indexing_in_generate_map_and_acond() {
    let n = 7;
    let x = data(n, 17);
    let nf = n as f64;
    let gens: Vec<(Program, Reference)> = vec![
        (
            build1(n, |b, a| {
                b.generate(&[n / 2], |i| a.at(&[i[0] * 2.0])).sum()
            }),
            Box::new(move |v| (0..n / 2).fold(Dual64::constant(0.0), |s, i| s + v[2 * i])),
        ),
        (
            build1(n, |b, a| {
                b.generate(&[2 * n], |i| {
                    a.at(&[i[0].idiv(2.0)]) + a.at(&[i[0].imod(2.0).min(nf - 1.0)])
                })
                .sum()
            }),
            Box::new(move |v| {
                (0..2 * n).fold(Dual64::constant(0.0), |s, i| {
                    s + v[i / 2] + v[(i % 2).min(n - 1)]
                })
            }),
        ),
        (
            build1(n, |b, a| {
                b.generate(&[2 * n], |i| {
                    cond(i[0].lt(5.0), a.at(&[i[0].idiv(2.0)]), 42.0)
                })
                .sum()
            }),
            Box::new(move |v| {
                (0..2 * n).fold(Dual64::constant(0.0), |s, i| {
                    s + if i < 5 {
                        v[i / 2]
                    } else {
                        Dual64::constant(42.0)
                    }
                })
            }),
        ),
        (
            // the branch not taken would index out of bounds
            build1(n, |b, a| {
                b.generate(&[2 * n], |i| {
                    cond(i[0].lt(nf), a.at(&[i[0]]), a.at(&[i[0] - nf]))
                })
                .sum()
            }),
            Box::new(move |v| dsum(v) * 2.0),
        ),
        (
            build1(n, |_, a| {
                let a2 = a.clone();
                a.map(|x| x + a2.at(&[lit(2.0)])).sum()
            }),
            Box::new(move |v| dsum(v) + v[2] * nf),
        ),
        (
            // aindex_map_2_friendly: a data-dependent index
            build1(n, |_, a| {
                let a2 = a.clone();
                a.map(|x| x + a2.at(&[x.round().abs().imod(nf)])).sum()
            }),
            Box::new(move |v| {
                v.iter().fold(Dual64::constant(0.0), |s, &x| {
                    s + x + v[(x.re.round().abs() as usize) % n]
                })
            }),
        ),
        (
            // aindex_only
            build1(n, |b, a| b.generate(&[5], |i| a.at(&[i[0].imod(nf)])).sum()),
            Box::new(move |v| (0..5).fold(Dual64::constant(0.0), |s, i| s + v[i % n])),
        ),
    ];
    for (p, r) in gens {
        check1(&p, &x, r, false);
    }
    // aindex_acond: index chosen from the data, guarded by an acond
    let p = build1(n, |b, a| {
        let s = a.sum();
        let idx = b.generate(&[], |_| s.the().round());
        let t = b.generate(&[1], |_| a.at(&[idx.the()]));
        let e = b.generate(&[1], |_| lit(0.0));
        b.acond(|| idx.the().ge(0.0).and(idx.the().lt(nf)), &t, &e)
            .sum()
    });
    let xs = [0.3, 0.9, 1.2, -0.5, 0.2, 0.1, 0.4];
    check1(
        &p,
        &xs,
        |v| {
            let s = dsum(v).re.round();
            if (0.0..nf).contains(&s) {
                v[s as usize]
            } else {
                Dual64::constant(0.0)
            }
        },
        false,
    );
}

#[test]
fn ignored_argument_and_nonfloat_lambdas() {
    let x = data(4, 18);
    let p = build1(4, |b, _| b.generate(&[], |_| lit(42.0)));
    let g = p.gradient_a(&[&x]).unwrap();
    assert_eq!(g.value, 42.0);
    assert_eq!(g.grads[0], vec![0.0; 4]);
    let p = build1(4, |_, a| a.map(|_| lit(42.0)).sum());
    check1(&p, &x, |_| Dual64::constant(168.0), false);
    // nonfloat_lam: b = map (\x -> (round x, sin x)); sum (map (\(i, x) -> i * x) b)
    let xs = [0.3, 1.2, -1.7, 2.2];
    let p = build1(4, |b, a| {
        let pairs = b.generate_n(&[4], 2, |i| {
            let x = a.at(&[i[0]]);
            vec![x.round(), x.sin()]
        });
        b.generate(&[4], |i| {
            pairs.at(&[i[0], lit(0.0)]) * pairs.at(&[i[0], lit(1.0)])
        })
        .sum()
    });
    check1(
        &p,
        &xs,
        |v| {
            v.iter()
                .fold(Dual64::constant(0.0), |s, &x| s + x.sin() * x.re.round())
        },
        true,
    );
}

#[test]
fn logsumexps() {
    let x = data(6, 19);
    let lse = |b: &Builder, a: &Acc| {
        let mx = a.maximum();
        let shifted = b.generate(a.shape(), |i| a.at(&[i[0]]) - mx.the());
        let s = shifted.map(|v| v.exp()).sum();
        s.zip_with(&mx, |s, m| s.ln() + m)
    };
    let p = build1(6, lse);
    let r = |v: &[Dual64]| {
        let m = v.iter().fold(v[0], |a, &b| a.max(b));
        v.iter()
            .fold(Dual64::constant(0.0), |s, &x| s + (x - m).exp())
            .ln()
            + m
    };
    check1(&p, &x, r, true);
    // logsumexp2: without adding the maximum back
    let p = build1(6, |b, a| {
        let mx = a.maximum();
        let shifted = b.generate(a.shape(), |i| a.at(&[i[0]]) - mx.the());
        shifted.map(|v| v.exp()).sum().map(|s| s.ln())
    });
    let r2 = |v: &[Dual64]| {
        let m = v.iter().fold(v[0], |a, &b| a.max(b));
        v.iter()
            .fold(Dual64::constant(0.0), |s, &x| s + (x - m).exp())
            .ln()
    };
    check1(&p, &x, r2, false);
    // logsumexp3: maxx + maxx
    let p = build1(6, |_, a| {
        let m = a.maximum();
        m.zip_with(&m, |p, q| p + q)
    });
    check1(
        &p,
        &x,
        |v| v.iter().fold(v[0], |a, &b| a.max(b)) * 2.0,
        false,
    );
}

#[test]
fn conditional_expressions() {
    let x = data(8, 20);
    let progs: Vec<(Program, Reference)> = vec![
        (
            build1(8, |_, a| a.map(|x| cond(x.gt(0.0), x, x * 2.0)).sum()),
            Box::new(|v| {
                v.iter().fold(Dual64::constant(0.0), |s, &x| {
                    s + if x.re > 0.0 { x } else { x * 2.0 }
                })
            }),
        ),
        (
            build1(8, |_, a| {
                a.map(|x| 2.0 * cond(x.gt(0.0), (x * x).sin(), x * x * x.exp()))
                    .sum()
            }),
            Box::new(|v| {
                v.iter().fold(Dual64::constant(0.0), |s, &x| {
                    s + (if x.re > 0.0 {
                        (x * x).sin()
                    } else {
                        x * x * x.exp()
                    }) * 2.0
                })
            }),
        ),
        (
            build1(8, |_, a| {
                a.map(|x| {
                    let u = x * 2.0;
                    let v = cond(x.le(2.0), u + 1.0, u * 2.0 - 1.0);
                    u * v
                })
                .sum()
            }),
            Box::new(|v| {
                v.iter().fold(Dual64::constant(0.0), |s, &x| {
                    let u = x * 2.0;
                    let w = if x.re <= 2.0 { u + 1.0 } else { u * 2.0 - 1.0 };
                    s + u * w
                })
            }),
        ),
        (
            // cond_4, with ln of a negative number in the branch not taken
            build1(8, |_, a| {
                a.map(|x| {
                    let u = cond(
                        x.ge(1.0),
                        x.ln() + 1.0,
                        cond((x - 2.0).lt(-3.0), (x + 1.0).exp() - 2.0, x),
                    );
                    let y = 2.0 * u.exp();
                    u * cond(u.lt(-1.0), u + y, y)
                })
                .sum()
            }),
            Box::new(|v| {
                v.iter().fold(Dual64::constant(0.0), |s, &x| {
                    let u = if x.re >= 1.0 {
                        x.ln() + 1.0
                    } else if x.re - 2.0 < -3.0 {
                        (x + 1.0).exp() - 2.0
                    } else {
                        x
                    };
                    let y = u.exp() * 2.0;
                    s + u * if u.re < -1.0 { u + y } else { y }
                })
            }),
        ),
    ];
    for (p, r) in progs {
        check1(&p, &x, r, false);
    }
}

#[test]
fn scans() {
    let b = Builder::new();
    let a = b.input(&[2, 5]);
    let s1 = a.scanl(1.0, |x, y| x * y); // native operator path
    let s2 = a.scanr(0.5, |x, y| (x * y).sin() + y); // general lambda
    let out = sum_all(&s1.zip_with(&s2, |p, q| p * q));
    let p = b.build_scalar(&out).unwrap();
    let x = data(10, 21);
    check1(
        &p,
        &x,
        |v| {
            let mut s = Dual64::constant(0.0);
            for r in 0..2 {
                let row = &v[r * 5..r * 5 + 5];
                let mut l = vec![Dual64::constant(1.0)];
                for &y in row {
                    let last = *l.last().unwrap();
                    l.push(last * y);
                }
                let mut rr = [Dual64::constant(0.5); 6];
                for j in (0..5).rev() {
                    rr[j] = (row[j] * rr[j + 1]).sin() + rr[j + 1];
                }
                for j in 0..6 {
                    s += l[j] * rr[j];
                }
            }
            s
        },
        true,
    );
}

/// The `scan_n` test program: 6 lanes (shape `[3, 2]`) of a 3-number state over 5 steps, reading
/// a per-lane weight and a per-(step, lane) input by computed index; component 2 is passed
/// through unchanged, and every state of the path feeds the output. Input: `w` (6), then `x`
/// (5 × 6, step-major).
fn scan_n_program() -> Program {
    let b = Builder::new();
    let v = b.input(&[36]);
    let path = b.scan_n(
        &[3, 2],
        5,
        3,
        |i| {
            let w = v.at(&[i[0] * 2.0 + i[1]]);
            vec![w, lit(0.5), w * w]
        },
        |i, s| {
            let lane = i[1] * 2.0 + i[2];
            let (w, x) = (v.at(&[lane]), v.at(&[i[0] * 6.0 + lane + 6.0]));
            vec![(s[0] * w + x).tanh(), s[1] * s[0] + x.sin(), s[2]]
        },
    );
    assert_eq!(path.shape(), &[6, 3, 2, 3]);
    b.build_scalar(&sum_all(&path.map(|e| e * e))).unwrap()
}

fn scan_n_reference<T: Real>(v: &[T]) -> T {
    let mut total = T::from(0.0);
    for lane in 0..6 {
        let w = v[lane];
        let mut s = [w, T::from(0.5), w * w];
        for t in 0..=5 {
            total = total + s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
            if t < 5 {
                let x = v[6 + t * 6 + lane];
                s = [(s[0] * w + x).tanh(), s[1] * s[0] + x.sin(), s[2]];
            }
        }
    }
    total
}

#[test]
fn scan_n_recurrences() {
    let p = scan_n_program();
    check1(&p, &data(36, 41), scan_n_reference, true);
    // one lane (rank-0 lanes), and no steps at all (the result is `init`)
    for steps in [4, 0] {
        let b = Builder::new();
        let v = b.input(&[2]);
        let path = b.scan_n(
            &[],
            steps,
            2,
            |_| vec![v.at(&[lit(0.0)]), v.at(&[lit(1.0)]) * 2.0],
            |i, s| vec![s[0] * s[1] + i[0], (s[0] - s[1]).cos()],
        );
        assert_eq!(path.shape(), &[steps + 1, 2]);
        let p = b.build_scalar(&sum_all(&path.map(|e| e * e))).unwrap();
        check1(
            &p,
            &[0.3, -0.7],
            |v| {
                let mut s = [v[0], v[1] * 2.0];
                let mut total = s[0] * s[0] + s[1] * s[1];
                for t in 0..steps {
                    s = [s[0] * s[1] + t as f64, (s[0] - s[1]).cos()];
                    total += s[0] * s[0] + s[1] * s[1];
                }
                total
            },
            true,
        );
    }
}

/// The step of `scan_n_stores_transcendentals`, written once for `Exp` and for forward mode
/// (`c` makes a constant): nine values of storable primitives (more than the 4 per state
/// component stored).
macro_rules! storing_step {
    ($w:expr, $x:expr, $s:expr, $c:expr) => {{
        let (w, x, s, c) = ($w, $x, $s, $c);
        let a = (w * s[0] + x).tanh();
        let b = (-(s[1] * s[1])).exp();
        let l = (c(1.0) + s[0] * s[0]).ln();
        let d = (s[1] * s[1]).ln_1p();
        let e = (s[0] - x).atan();
        let f = (c(0.3) * a).tan();
        let h = (c(0.5) * b).exp2();
        [
            a + c(0.1) * b * l + c(0.2) * f,
            c(0.5) * d + c(0.3) * e * h + (c(0.2) * s[1]).tanh() + (c(0.1) * x).exp(),
        ]
    }};
}

#[test]
fn scan_n_stores_transcendentals() {
    // 2000 lanes: 32 lane groups in the primal pass and 16 in the reverse pass, so the stored
    // values cross from one grouping to the other
    let (lanes, steps) = (2000, 6);
    let program = |store: bool, jit: bool| {
        let b = Builder::new();
        b.set_scan_store(store);
        b.set_jit(jit);
        let w = b.input(&[lanes]);
        let x = b.input(&[steps, lanes]);
        let path = b.scan_n(
            &[lanes],
            steps,
            2,
            |i| vec![w.at(i), lit(0.5)],
            |i, s| {
                let (w, x) = (w.at(&[i[1]]), x.at(i));
                storing_step!(w, x, [s[0], s[1]], lit).to_vec()
            },
        );
        b.build_scalar(&sum_all(&path.map(|e| e * e))).unwrap()
    };
    let (wv, xv) = (data(lanes, 5), data(steps * lanes, 6));
    let grad = |p: &Program| p.gradient_a(&[&wv, &xv]).unwrap();
    let stored = program(true, true);
    let g = grad(&stored);
    // right: forward mode on some lanes (each lane is independent)
    let reference = |v: &[Dual64]| {
        // v = [w, x_0 .. x_{steps − 1}] of one lane
        let mut s = [v[0], Dual64::constant(0.5)];
        let mut total = s[0] * s[0] + s[1] * s[1];
        for t in 0..steps {
            s = storing_step!(v[0], v[1 + t], s, Dual64::constant);
            total += s[0] * s[0] + s[1] * s[1];
        }
        total
    };
    let check = [0, 63, 64, 1000, 1999];
    lanes_against_forward(&g.grads, &wv, &xv, steps, &check, reference, 1e-10);
    // the same bits as recomputing, compiled and interpreted, and for any thread count
    for (store, jit) in [(false, true), (true, false), (false, false)] {
        let other = grad(&program(store, jit));
        assert_eq!(
            g.value.to_bits(),
            other.value.to_bits(),
            "store {store}, jit {jit}"
        );
        for (a, b) in g.grads.iter().zip(&other.grads) {
            assert_eq!(common::bits(a), common::bits(b), "store {store}, jit {jit}");
        }
    }
    let g2 = common::in_pool(2, || grad(&stored));
    for (a, b) in g.grads.iter().zip(&g2.grads) {
        assert_eq!(common::bits(a), common::bits(b));
    }
}

#[test]
fn scan_n_is_bit_identical_for_any_thread_count() {
    // lanes spanning many kernel blocks: several lane groups run in parallel, each in several
    // block-sized pieces per step
    let (lanes, steps) = (70_000, 3);
    let b = Builder::new();
    let w = b.input(&[lanes]);
    let x = b.input(&[steps, lanes]);
    let path = b.scan_n(
        &[lanes],
        steps,
        2,
        |i| vec![w.at(i), lit(1.0)],
        |i, s| {
            let xt = x.at(i);
            vec![(s[0] * s[1]).sin() + xt, s[1] * w.at(&[i[1]]) + xt * xt]
        },
    );
    let p = b.build_scalar(&sum_all(&path.map(|e| e.tanh()))).unwrap();
    let (wv, xv) = (data(lanes, 1), data(steps * lanes, 2));
    let run = |t| common::in_pool(t, || p.gradient_a(&[&wv, &xv]).unwrap());
    let (g1, g2) = (run(1), run(2));
    assert_eq!(g1.value.to_bits(), g2.value.to_bits());
    for (a, b) in g1.grads.iter().zip(&g2.grads) {
        assert_eq!(common::bits(a), common::bits(b));
    }
    // and right: forward mode on some lanes' inputs (each lane is independent)
    let reference = |v: &[Dual64]| {
        // v = [w, x_0 .. x_{steps − 1}] of one lane
        let mut s = [v[0], Dual64::constant(1.0)];
        let mut total = s[0].tanh() + s[1].tanh();
        for t in 0..steps {
            let xt = v[1 + t];
            s = [(s[0] * s[1]).sin() + xt, s[1] * v[0] + xt * xt];
            total += s[0].tanh() + s[1].tanh();
        }
        total
    };
    let check = [7, 1025, 40_000, lanes - 1];
    lanes_against_forward(&g1.grads, &wv, &xv, steps, &check, reference, 1e-12);
}

/// The gradient of a `scan_n` program over independent lanes with inputs `w [lanes]` and
/// `x [steps, lanes]` (`grads` in that order), checked lane by lane against forward mode of
/// `reference` (one lane's function of `[w, x_0 .. x_{steps − 1}]`).
fn lanes_against_forward(
    grads: &[Vec<f64>],
    wv: &[f64],
    xv: &[f64],
    steps: usize,
    check: &[usize],
    reference: impl Fn(&[Dual64]) -> Dual64,
    tol: f64,
) {
    let lanes = wv.len();
    let of_lane = |w: &[f64], x: &[f64], lane: usize| -> Vec<f64> {
        std::iter::once(w[lane])
            .chain((0..steps).map(|t| x[t * lanes + lane]))
            .collect()
    };
    for &lane in check {
        let gf = forward::gradient(&reference, &of_lane(wv, xv, lane));
        let got = of_lane(&grads[0], &grads[1], lane);
        for (a, b) in got.iter().zip(&gf) {
            assert!(close(*a, *b, tol), "lane {lane}: {got:?} vs forward {gf:?}");
        }
    }
}

#[test]
fn scan_n_out_of_bounds_reads_are_errors() {
    use adjoint_array::Error;
    // a step reading one past the end at its last step; small (interpreted) and large
    // (compiled) kernels, in the primal pass and in the gradient
    for lanes in [3, 1000] {
        let b = Builder::new();
        let x = b.input(&[lanes + 2]);
        let path = b.scan_n(
            &[lanes],
            3,
            1,
            |i| vec![x.at(i)],
            |i, s| vec![s[0] * 0.5 + x.at(&[i[1] + i[0] + 1.0])],
        );
        let p = b.build_scalar(&sum_all(&path)).unwrap();
        let xv = data(lanes + 2, 3);
        for r in [p.run(&[&xv]).map(|_| ()), p.gradient_a(&[&xv]).map(|_| ())] {
            match r {
                Err(Error::OutOfBounds { index, shape, .. }) => {
                    assert_eq!(shape, vec![lanes + 2]);
                    assert_eq!(index, vec![(lanes + 2) as f64]);
                }
                other => panic!("lanes = {lanes}: {other:?}"),
            }
        }
    }
}

#[test]
fn scan_n_misuse_is_a_clear_error() {
    let b = Builder::new();
    let x = b.input(&[2]);
    let _ = b.scan_n(&[2], 3, 2, |i| vec![x.at(i)], |_, s| vec![s[0], s[1]]);
    let e = b.build(&[&x]).unwrap_err().to_string();
    assert!(
        e.contains("scan_n: the init closure returned 1 values, expected n = 2"),
        "{e}"
    );
    let b = Builder::new();
    let x = b.input(&[2]);
    let _ = b.scan_n(&[2], 3, 1, |i| vec![x.at(i)], |_, s| vec![s[0], s[0]]);
    let e = b.build(&[&x]).unwrap_err().to_string();
    assert!(
        e.contains("scan_n: the step closure returned 2 values, expected n = 1"),
        "{e}"
    );
    // the state is f64: an f32 value in it is a type error naming the combinator
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let _ = b.scan_n(&[2], 3, 1, |i| vec![x.at(i)], |_, s| vec![s[0]]);
    let e = b.build(&[&x]).unwrap_err().to_string();
    assert!(e.contains("scan_n"), "{e}");
}

#[test]
fn permutes() {
    // scatter-add into bins, then a nonlinear read-out
    let b = Builder::new();
    let a = b.input(&[8]);
    let d = b.input(&[3]);
    let hist = a.permute(Combine::Add, &d, |i| (i[0].ne(5.0), vec![i[0].imod(3.0)]));
    let out = hist.map(|v| v * v).sum();
    let p = b.build_scalar(&out).unwrap();
    let (xa, xd) = (data(8, 22), data(3, 23));
    let g = p.gradient_a(&[&xa, &xd]).unwrap();
    let all: Vec<f64> = xa.iter().chain(&xd).copied().collect();
    let r = |v: &[Dual64]| {
        let mut h: Vec<Dual64> = v[8..].to_vec();
        for i in 0..8 {
            if i != 5 {
                h[i % 3] += v[i];
            }
        }
        h.iter().fold(Dual64::constant(0.0), |s, &x| s + x * x)
    };
    let gf = forward::gradient(r, &all);
    let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
    assert_eq!(got.len(), gf.len(), "gradient length");
    for (a, b) in got.iter().zip(&gf) {
        assert!(close(*a, *b, 1e-12), "{got:?} vs {gf:?}");
    }
    // max-combining permute: gradient to the winners
    let b = Builder::new();
    let a = b.input(&[8]);
    let d = b.input(&[3]);
    let hist = a.permute(Combine::Max, &d, |i| (lit(1.0), vec![i[0].imod(3.0)]));
    let out = hist.map(|v| v * v * v).sum();
    let p = b.build_scalar(&out).unwrap();
    let g = p.gradient_a(&[&xa, &xd]).unwrap();
    let r = |v: &[Dual64]| {
        let mut h: Vec<Dual64> = v[8..].to_vec();
        for i in 0..8 {
            if v[i].re > h[i % 3].re {
                h[i % 3] = v[i];
            }
        }
        h.iter().fold(Dual64::constant(0.0), |s, &x| s + x * x * x)
    };
    let gf = forward::gradient(r, &all);
    let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
    assert_eq!(got.len(), gf.len(), "gradient length");
    for (a, b) in got.iter().zip(&gf) {
        assert!(close(*a, *b, 1e-12), "{got:?} vs {gf:?}");
    }
}

#[test]
fn awhile_loops() {
    // Newton-like iteration: x ← x − 0.1·(x³ − c) until a fixed count kept in the state.
    let b = Builder::new();
    let x = b.input(&[3]);
    let c = b.input(&[3]);
    let cnt = b.generate(&[], |_| lit(0.0));
    let out = b.awhile(
        &[&x, &cnt],
        &[&c],
        |s, _| s[1].map(|k| k.lt(6.0)),
        |s, inv| {
            let nx = s[0].zip_with(&inv[0], |x, c| x - 0.1 * (x * x * x - c));
            vec![nx, s[1].map(|k| k + 1.0)]
        },
    );
    let obj = out[0].map(|v| v.sin()).sum();
    let p = b.build_scalar(&obj).unwrap();
    let (xv, cv) = (vec![0.5, 1.0, 1.5], vec![1.0, 2.0, 0.5]);
    let g = p.gradient_a(&[&xv, &cv]).unwrap();
    let all: Vec<f64> = xv.iter().chain(&cv).copied().collect();
    let r = |v: &[Dual64]| {
        let mut x: Vec<Dual64> = v[..3].to_vec();
        for _ in 0..6 {
            for (xi, &ci) in x.iter_mut().zip(&v[3..]) {
                *xi = *xi - (*xi * *xi * *xi - ci) * 0.1;
            }
        }
        x.iter().fold(Dual64::constant(0.0), |s, &t| s + t.sin())
    };
    let gf = forward::gradient(r, &all);
    let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
    assert_eq!(got.len(), gf.len(), "gradient length");
    for (a, b) in got.iter().zip(&gf) {
        assert!(close(*a, *b, 1e-12), "{got:?} vs {gf:?}");
    }
    // A data-dependent trip count: double until the sum exceeds 10.
    let p = build1(2, |b, x| {
        let o = b.awhile(
            &[x],
            &[],
            |s, _| s[0].sum().map(|t| t.lt(10.0)),
            |s, _| vec![s[0].map(|v| v * 2.0)],
        );
        o[0].map(|v| v * v).sum()
    });
    check1(
        &p,
        &[1.0, 0.5],
        |v| {
            let mut x = v.to_vec();
            while dsum(&x).re < 10.0 {
                x = x.iter().map(|&t| t * 2.0).collect();
            }
            x.iter().fold(Dual64::constant(0.0), |s, &t| s + t * t)
        },
        false,
    );
}

#[test]
fn permute_max_min_treat_nan_as_f64_max_min() {
    // `Combine::Max`/`Min` fold like `f64::max`/`f64::min` in source order: a NaN source never
    // wins, and a NaN default is replaced by the first number.
    let nan = f64::NAN;
    let src = vec![nan, 2.0, 5.0, nan, -1.0, 3.0];
    let def = vec![nan, 0.5, nan];
    for comb in [Combine::Max, Combine::Min] {
        let b = Builder::new();
        let a = b.input(&[6]);
        let d = b.input(&[3]);
        let out = a.permute(comb, &d, |i| (lit(1.0), vec![i[0].imod(3.0)]));
        let p = b.build(&[&out]).unwrap();
        let got = p.run(&[&src, &def]).unwrap();
        let mut want = def.clone();
        for (i, &x) in src.iter().enumerate() {
            let t = &mut want[i % 3];
            *t = if comb == Combine::Max {
                t.max(x)
            } else {
                t.min(x)
            };
        }
        let got = got[0].data();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{comb:?}: {got:?} vs {want:?}"
            );
        }
    }
}

#[test]
fn run_into_reuses_output_buffers_and_equals_run() {
    let b = Builder::new();
    let x = b.input(&[1000]);
    let y = x.map(|v| v * 1.5 + 0.25).map(|v| v.max(0.1));
    let s = y.sum();
    let p = b.build(&[&y, &s]).unwrap();
    let xs = data(1000, 5);
    let want = p.run(&[&xs]).unwrap();
    let mut bufs = vec![Vec::new(), Vec::new()];
    p.run_into(&[&xs], &mut bufs).unwrap();
    let ptr = bufs[0].as_ptr();
    for _ in 0..3 {
        p.run_into(&[&xs], &mut bufs).unwrap();
        assert_eq!(
            bufs[0].as_ptr(),
            ptr,
            "the element-wise output's buffer is reused"
        );
    }
    assert_eq!(bufs[0], want[0].data());
    assert_eq!(bufs[1], want[1].data());
    // independent reference for the values
    for (o, v) in bufs[0].iter().zip(&xs) {
        assert_eq!(*o, (v * 1.5 + 0.25).max(0.1));
    }
    let err = p.run_into(&[&xs], &mut bufs[..1]).unwrap_err().to_string();
    assert!(
        err.contains("2 outputs") && err.contains("1 buffers"),
        "{err}"
    );
}

#[test]
fn a_branch_not_taken_contributes_no_nan_to_the_gradient() {
    // d/dx sqrt(x) is NaN for x < 0 and ln(x)'s is finite but ln(x) is NaN: the select routes a
    // zero adjoint there, which must stay zero (0 · NaN would poison the gradient).
    let b = Builder::new();
    let x = b.input(&[4]);
    let y = x.map(|v| cond(v.gt(0.0), v.sqrt() + v.ln(), v * 2.0)).sum();
    let p = b.build_scalar(&y).unwrap();
    let xs = [-1.0, 4.0, -0.5, 0.25];
    let g = p.gradient_a(&[&xs]).unwrap();
    let want: Vec<f64> = xs
        .iter()
        .map(|&v: &f64| {
            if v > 0.0 {
                0.5 / v.sqrt() + 1.0 / v
            } else {
                2.0
            }
        })
        .collect();
    assert_eq!(g.grads[0], want);
}

/// Rows longer than a kernel block (1024 elements), so that whole blocks read one element
/// (a broadcast gather; its adjoint is summed over the block, then added once) beside reads
/// that vary along the row (a gather and a scatter-add per element), a constant index, and a
/// read under a branch (a guarded gather and scatter).
#[test]
fn reads_constant_over_a_block_and_reads_that_vary() {
    let (n, rows, cols) = (16, 3, 2100);
    let x = data(n, 29);
    let p = build1(n, |b, a| {
        let g = b.generate(&[rows, cols], |i| {
            let (r, c) = (i[0], i[1]);
            let branch = cond(c.lt(1500.0), a.at(&[r + 13.0]), a.at(&[lit(15.0)]));
            a.at(&[r * 3.0 + 1.0]).sin() * a.at(&[c.imod(9.0) + 4.0])
                + a.at(&[lit(5.0)]) * a.at(&[r + c.imod(2.0)])
                + branch * branch
        });
        sum_all(&g)
    });
    let reference = move |v: &[Dual64]| {
        let mut s = Dual64::constant(0.0);
        for r in 0..rows {
            for c in 0..cols {
                let branch = if c < 1500 { v[r + 13] } else { v[15] };
                s = s + v[3 * r + 1].sin() * v[c % 9 + 4] + v[5] * v[r + c % 2] + branch * branch;
            }
        }
        s
    };
    check1(&p, &x, reference, true);
}

/// Interpreter slot buffers are reused from one kernel evaluation to the next on a thread
/// (holding another kernel's or an earlier run's values): a program run again on new inputs
/// gives what a fresh program gives, and the gradient still equals forward mode, run after run.
#[test]
fn small_kernels_reuse_their_buffers_between_runs() {
    let n = 6;
    let program = |b: &Builder, a: &Acc| {
        let g = b.generate_n(&[4], 2, |i| {
            let j = i[0];
            let u = a.at(&[lit(0.0)]) * 2.5 + (a.at(&[j + 1.0]) * 0.5).exp();
            vec![u * a.at(&[lit(5.0)]) - 0.75, (u - 1.25).tanh()]
        });
        let t = b.generate(&[], |_| {
            (0..4).fold(lit(0.5), |s, j| {
                s + g.at(&[lit(j as f64), lit(0.0)]) * g.at(&[lit(j as f64), lit(1.0)])
            })
        });
        t.map(|v| v * 3.0)
    };
    let reference = |v: &[Dual64]| {
        let mut s = Dual64::constant(0.5);
        for j in 0..4 {
            let u = v[0] * 2.5 + (v[j + 1] * 0.5).exp();
            s += (u * v[5] - 0.75) * (u - 1.25).tanh();
        }
        s * 3.0
    };
    let p = build1(n, program);
    for seed in 0..4 {
        let x = data(n, 40 + seed);
        check1(&p, &x, reference, false);
        let fresh = build1(n, program).run(&[&x]).expect("run")[0].data()[0];
        let again = p.run(&[&x]).expect("run")[0].data()[0];
        assert_eq!(
            again.to_bits(),
            fresh.to_bits(),
            "run {seed}: reused vs fresh buffers"
        );
    }
}

/// `maximum`/`minimum` at ties: the fold's derivative step by step (½ to each side of a `max`
/// at a tie, as the rule table says), `[⅛, ⅛, ¼, ½]` for `[5, 5, 5, 5]` — forward mode on the
/// same left fold gives the same.
#[test]
fn maximum_and_minimum_at_ties_split_the_adjoint_as_the_fold_does() {
    let x = [5.0, 5.0, 5.0, 5.0];
    let p = build1(4, |_, a| a.maximum());
    let g = p.gradient_a(&[&x]).expect("gradient");
    assert_eq!(g.grads[0], [0.125, 0.125, 0.25, 0.5]);
    let gf = forward::gradient(|v: &[Dual64]| v.iter().fold(v[0], |a, &b| a.max(b)), &x);
    assert_eq!(g.grads[0], gf);
    let p = build1(4, |_, a| a.minimum());
    let g = p.gradient_a(&[&x]).expect("gradient");
    let gf = forward::gradient(|v: &[Dual64]| v.iter().fold(v[0], |a, &b| a.min(b)), &x);
    assert_eq!(g.grads[0], gf);
}

#[test]
#[should_panic(expected = "Array::new: shape [2, 2] holds 4 elements, but the data has 1")]
fn an_array_whose_data_does_not_fit_its_shape_names_both() {
    adjoint_array::Array::new(vec![2, 2], vec![1.0]);
}

/// The spellings users write first inside `map` and on arrays: `clamp`, `sin_cos`, `log(base)`,
/// and arrays with numbers (`1.0 - &x * 2.0`), against forward mode on the same function.
#[test]
fn clamp_sin_cos_log_and_array_scalar_operators() {
    let x = data(9, 23);
    let p = build1(9, |_, a| {
        let m = a.map(|v| {
            let (s, c) = v.sin_cos();
            v.clamp(-1.0, 1.0) * s + c + (v * v + 1.0).log(2.0)
        });
        ((1.0 - a * 2.0) / 4.0 + &m * 3.0).sum()
    });
    let r = |v: &[Dual64]| {
        v.iter().fold(Dual64::constant(0.0), |acc, &x| {
            let (s, c) = x.sin_cos();
            let m = x.clamp(-1.0, 1.0) * s + c + (x * x + 1.0).log(2.0);
            acc + (1.0 - x * 2.0) / 4.0 + m * 3.0
        })
    };
    check1(&p, &x, r, true);
    // `clamp` keeps NaN, as `f64::clamp`
    let out = build1(2, |_, a| a.map(|v| v.clamp(-1.0, 1.0)).sum());
    let v = out.run(&[&[f64::NAN, 0.5]]).expect("run")[0].data()[0];
    assert!(v.is_nan());
}

/// `atan` of large arguments in a storing `scan_n`: the stored path rebuilt the derivative as
/// `1/(x² + 1)`, 0 beyond ~1.3e154 and a bit off the rule table's `(1/x)²` from 2²⁷, so the
/// stored and recomputed gradients differed (a hunter). Closed form: d/dw atan(10¹⁵⁵ w) · 10³⁰⁰
/// = 10⁴⁵⁵ / (1 + 10³¹⁰ w²).
#[test]
fn scan_n_stored_atan_at_large_arguments() {
    let program = |store: bool, jit: bool| {
        let b = Builder::new();
        b.set_scan_store(store);
        b.set_jit(jit);
        let w = b.input(&[4]);
        let hs = b.scan_n(
            &[4],
            1,
            1,
            |_| vec![lit(0.0)],
            |i, s| vec![(w.at(&[i[1]]) * 1e155 + s[0]).atan()],
        );
        b.build_scalar(&hs.sum().sum().map(|v| v * 1e300).sum())
            .unwrap()
    };
    // x = 3e155, 1e75, 1e155, 2e95: beyond 1.3e154 and between 2²⁷ and there
    let w = [3.0, 1e-80, 1.0, 2e-60];
    let g = |store, jit| program(store, jit).gradient_a(&[&w]).unwrap().grads[0].clone();
    let want: Vec<f64> = w
        .iter()
        .map(|&w: &f64| {
            let x = w * 1e155;
            (1e300 / x) * (1e155 / x)
        })
        .collect();
    let stored = g(true, true);
    assert!(
        (stored[0] - 1.111_111_111_111_111e144).abs() <= 1e-12 * 1.12e144,
        "{stored:?}"
    );
    for (a, b) in stored.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{stored:?} vs {want:?}");
    }
    for (store, jit) in [(false, true), (true, false), (false, false)] {
        let other = g(store, jit);
        assert_eq!(
            stored.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            other.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "store {store}, jit {jit}"
        );
    }
}

/// `clamp` with crossed constant bounds is a build error, as `f64::clamp` panics (a hunter: it
/// built a non-monotone clamp, `clamp(1, -1)` of [-5, 0, 5] giving [1, 1, -1]); so is a NaN
/// bound; equal bounds are fine.
#[test]
fn clamp_with_crossed_constant_bounds_is_a_build_error() {
    for (lo, hi) in [(1.0, -1.0), (f64::NAN, 1.0)] {
        let b = Builder::new();
        let x = b.input(&[3]);
        let y = x.map(|v| v.clamp(lo, hi));
        let e = b.build(&[&y]).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("clamp: the lower bound"), "{e}");
    }
    let b = Builder::new();
    let x = b.input(&[3]);
    let y = x.map(|v| v.clamp(0.5, 0.5));
    let out = b.build(&[&y]).unwrap().run(&[&[-5.0, 0.0, 5.0]]).unwrap();
    assert_eq!(out[0].data(), [0.5, 0.5, 0.5]);
}
