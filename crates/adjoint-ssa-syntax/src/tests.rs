use crate::interp::{self, ArgVal};
use crate::lower_str;
use adjoint_core::forward::Dual;

fn grad_check(src: &str, x: &[f64]) {
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", crate::adjoint::dump(&f, &p));
    let mut args = vec![ArgVal::Floats(x.to_vec())];
    let mut adj = vec![ArgVal::Floats(vec![0.0; x.len()])];
    let (r, _) = interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
    let ArgVal::Floats(g) = &adj[0] else { panic!() };
    let pr = interp::primal::<f64>(&f, &mut [ArgVal::Floats(x.to_vec())]).unwrap();
    assert_eq!(r.unwrap(), pr);
    for (i, gi) in g.iter().enumerate() {
        let xd: Vec<Dual<f64>> = x
            .iter()
            .enumerate()
            .map(|(j, &v)| Dual::new(v, if i == j { 1.0 } else { 0.0 }))
            .collect();
        let fd = interp::primal::<Dual<f64>>(&f, &mut [ArgVal::Floats(xd)]).unwrap();
        let e = fd.eps;
        assert!(
            (gi - e).abs() <= 1e-10 * (1.0 + e.abs()),
            "coordinate {i}: adjoint {} vs forward {}",
            g[i],
            e
        );
    }
}

/// Lower `src` (one `&[f64]` parameter), check its gradient at `x` against forward mode
/// ([`grad_check`]), and run the interpreter's adjoint: the plan and the branch tags it recorded.
fn checked_tags(src: &str, x: &[f64]) -> (crate::adjoint::Plan, usize) {
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    grad_check(src, x);
    let mut args = vec![ArgVal::Floats(x.to_vec())];
    let mut adj = vec![ArgVal::Floats(vec![0.0; x.len()])];
    let (_, st) = interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
    (p, st.tags)
}

/// Each source lowers without an error.
fn accepts(srcs: &[&str]) {
    for src in srcs {
        if let Err(e) = lower_str(src, "") {
            panic!("{src}: {e}");
        }
    }
}

/// Each source is refused with an error containing its message.
fn rejects(cases: &[(&str, &str)]) {
    for (src, msg) in cases {
        match lower_str(src, "") {
            Ok(_) => panic!("accepted: {src}"),
            Err(e) => assert!(e.to_string().contains(msg), "{src}: {e}"),
        }
    }
}

#[test]
fn pow_loop() {
    grad_check(
        "fn f(x: &[f64]) -> f64 { let mut r = 1.0; let mut n = 3; while n > 0 { r = r * x[0]; n -= 1; } r }",
        &[1.7],
    );
}

#[test]
fn branchy() {
    grad_check(
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { if x[i] > 0.0 { s += x[i].sin() * x[i]; } else { s -= 0.01 * x[i]; } } s }",
        &[1.7, -0.3, 2.0],
    );
}

/// Counted loops replay their counter (no tags, no pushed indices) when the trip is fully
/// determined; a `break` or an early `return` inside keeps the recording.
#[test]
fn counted_loops() {
    use crate::adjoint::TagMode;
    let x = [0.7, -0.4, 1.3, 0.2];
    let counted = [
        // triangular nest: the inner start is the outer counter
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { for j in i..x.len() { s += x[i] * x[j].sin(); } } s }",
        // empty ranges (start > end) and a non-zero start
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 3..1 { s *= x[i]; } for i in 2..x.len() { s = s * x[i] + x[i - 1]; } s }",
        // `continue` keeps the trip determined (the latch, a join, still records its edge)
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { if x[i] < 0.0 { continue; } s += x[i].exp(); } s }",
        // signed counter with a negative start
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; let mut k = 0; for i in -2..2i32 { s += x[k] * (i as f64); k += 1; } s * s }",
    ];
    for src in counted {
        let (p, tags) = checked_tags(src, &x);
        assert!(p.tag.contains(&TagMode::Counted), "{src}");
        if !src.contains("continue") {
            assert!(!p.tag.contains(&TagMode::Stack), "{src}");
            assert_eq!(tags, 0, "{src}");
        }
    }
    let recorded = [
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { if s > 1.0 { break; } s += x[i] * x[i]; } s }",
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += x[i].sin(); if s < -0.1 { return s * 3.0; } } s }",
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { for j in 0..x.len() { if j > i { break; } s += x[i] * x[j]; } } s }",
    ];
    for src in recorded {
        grad_check(src, &x);
        grad_check(src, &[-0.7, -0.4, 1.3, 0.2]);
    }
    // an innermost counted loop reserves its pushes on entry; an outer one does not
    let src =
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s = s.sin() * x[i]; } s }";
    let item: proc_macro2::TokenStream = src.parse().unwrap();
    let text = crate::expand(quote::quote!(), item, quote::quote!(::adjoint_ssa)).to_string();
    assert!(
        text.contains("push_reserved") && text.contains("reserve"),
        "{text}"
    );
    let src = "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for _ in 0..2 { for i in 0..x.len() { if s > 1.0 { break; } s = s.sin() * x[i]; } } s }";
    let item: proc_macro2::TokenStream = src.parse().unwrap();
    let text = crate::expand(quote::quote!(), item, quote::quote!(::adjoint_ssa)).to_string();
    assert!(!text.contains("push_reserved"), "{text}");
    // the nest with a `break` inside: the inner loop keeps its tags, the outer one is counted
    let (_, p) = lower_str(recorded[2], "").unwrap();
    assert!(p.tag.contains(&TagMode::Counted) && p.tag.contains(&TagMode::Stack));
}

// ---- random programs: the interpreter's adjoint equals forward mode ----

use crate::testgen;

/// For random programs of `testgen` (straight-line code, branches, `match`, `for` over ranges
/// and `x.iter().enumerate()`, `while` and `loop` with break/continue, early returns, in-place
/// writes, indices affine in loop counters), ⟨adjoint⟩ equals forward mode to 1e-10
/// relative, for the gradient with respect to `x` and to the initial contents of `out`. The
/// interpreter also checks, at every ranged access (`Plan::ranged`), that the index the
/// generated code uses without a bounds check (`rb + cnt`, `rb` computed on entering the
/// reversed loop) equals the access's own index, and makes the generated entry check.
/// Directions whose forward sweep overflowed to ±∞ are skipped where the tangent is not
/// finite, or where the adjoint is NaN (`0 · ∞`, documented in the crate docs).
///
/// Where the program is ill-conditioned enough that reverse and forward accumulation round
/// apart (adjoints far larger than the result, cancelling: floating-point absorption, not a wrong
/// rule), the tape engine running the same program in reverse is the referee and must agree with
/// the adjoint to 1e-12: none among seeds 1–300, 2 programs of seeds 1–3000 and 14 of the
/// 29 015 finite ones of 1–30 000 (`ADJOINT_SSA_RANDOM_SEEDS`), each matched by the tape.
#[test]
fn random_programs_adjoint_equals_forward_mode() {
    let mut total_pushed = 0;
    let mut total_ranged = 0;
    let mut skipped = 0;
    let mut absorbed = 0;
    let seeds: Vec<u64> = match std::env::var("ADJOINT_SSA_RANDOM_SEEDS") {
        // `3840`, `1-30000` or a comma-separated list of either
        Ok(s) => s
            .split(',')
            .flat_map(|t| match t.trim().split_once('-') {
                Some((a, b)) => a.parse().unwrap()..=b.parse().unwrap(),
                None => {
                    let v = t.trim().parse().unwrap();
                    v..=v
                }
            })
            .collect(),
        Err(_) => (1..=300).collect(),
    };
    let n_seeds = seeds.len();
    for seed in seeds {
        let src = testgen::program(seed);
        let (f, p) = lower_str(&src, "").unwrap_or_else(|e| panic!("{e}\n{src}"));
        let x = [0.3, -0.6, 0.8];
        let out0 = [0.1, 0.2, -0.4];
        let cot = [0.7, -1.1, 0.4];
        let n = 2i128;
        let mut args = vec![
            ArgVal::Floats(x.to_vec()),
            ArgVal::Floats(out0.to_vec()),
            ArgVal::Scalar(interp::V::I(n)),
        ];
        let mut adj = vec![
            ArgVal::Floats(vec![0.0; 3]),
            ArgVal::Floats(cot.to_vec()),
            ArgVal::Scalar(interp::V::I(0)),
        ];
        let (r, st) = interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
        total_pushed += st.pushed;
        total_ranged += st.ranged;
        let mut pargs = vec![
            ArgVal::Floats(x.to_vec()),
            ArgVal::Floats(out0.to_vec()),
            ArgVal::Scalar(interp::V::I(n)),
        ];
        let pr = interp::primal::<f64>(&f, &mut pargs).unwrap();
        assert_eq!(r.unwrap().to_bits(), pr.to_bits(), "value\n{src}");
        let (ArgVal::Floats(o1), ArgVal::Floats(o2)) = (&args[1], &pargs[1]) else {
            panic!()
        };
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(o1), bits(o2), "outputs\n{src}");
        if !pr.is_finite() || o1.iter().any(|v| !v.is_finite()) {
            skipped += 1;
            continue;
        }
        let ArgVal::Floats(gx) = &adj[0] else {
            panic!()
        };
        let ArgVal::Floats(gout) = &adj[1] else {
            panic!()
        };
        for dir in 0..6 {
            let tan = |k: usize| if dir == k { 1.0 } else { 0.0 };
            let xd: Vec<Dual<f64>> = (0..3).map(|i| Dual::new(x[i], tan(i))).collect();
            let od: Vec<Dual<f64>> = (0..3).map(|i| Dual::new(out0[i], tan(3 + i))).collect();
            let mut dargs = vec![
                ArgVal::Floats(xd),
                ArgVal::Floats(od),
                ArgVal::Scalar(interp::V::I(n)),
            ];
            let rd = interp::primal::<Dual<f64>>(&f, &mut dargs).unwrap();
            let ArgVal::Floats(o) = &dargs[1] else {
                panic!()
            };
            let want = rd.eps + (0..3).map(|j| cot[j] * o[j].eps).sum::<f64>();
            let got = if dir < 3 { gx[dir] } else { gout[dir - 3] };
            if !want.is_finite() {
                skipped += 1; // the tangent overflowed (∞·0) where the adjoint is dead
                continue;
            }
            if got.is_nan() && st.nonfinite {
                // an overflowed intermediate the result does not depend on: the reverse sweep
                // multiplies its partial by a zero adjoint (`0 · ∞`), as documented
                skipped += 1;
                continue;
            }
            if (got - want).abs() <= 1e-10 * (1.0 + want.abs()) {
                continue;
            }
            // Reverse and forward accumulation round differently; where the program is so
            // ill-conditioned that this shows (adjoints far larger than the result, cancelling),
            // the tape engine, running the same program in reverse, must give what the adjoint
            // plan gives: another reverse-mode implementation as the referee.
            // (both NaN: a 0/0 partial such as `hypot(0, 0)`'s met by a zero adjoint, which
            // forward mode may multiply by a zero tangent first)
            let tape = tape_gradient(&f, &x, &out0, &cot, n)[dir];
            assert!(
                (got - tape).abs() <= 1e-12 * (1.0 + tape.abs()) || (got.is_nan() && tape.is_nan()),
                "seed {seed}: direction {dir}: adjoint {got} vs forward {want} and tape {tape}\n{src}\n{}",
                crate::adjoint::dump(&f, &p)
            );
            absorbed += 1;
        }
    }
    // a handful of directions in 10⁵ (see the doc)
    assert!(
        absorbed * 1000 < 6 * n_seeds,
        "{absorbed} directions differ from forward mode"
    );
    assert!(total_pushed > 0, "the programs exercise the stacks");
    assert!(total_ranged > 0, "the programs exercise ranged accesses");
    let directions = 6 * n_seeds;
    // 10 of 1800 directions for seeds 1–300, 133 of 24000 for 1–4000: well under 2 %
    assert!(
        skipped * 50 < directions,
        "{skipped} of {directions} directions overflowed"
    );
}

/// The tape engine's gradient of `f` (run by the interpreter on `Var`s) with respect to `x` and
/// the initial `out`, cotangent `cot` on the final `out`.
fn tape_gradient(f: &crate::ir::Func, x: &[f64], out0: &[f64], cot: &[f64], n: i128) -> Vec<f64> {
    use adjoint_tape::Var;
    let inputs: Vec<f64> = x.iter().chain(out0).copied().collect();
    adjoint_tape::grad(
        |v: &[Var]| {
            let mut a = vec![
                ArgVal::Floats(v[..3].to_vec()),
                ArgVal::Floats(v[3..].to_vec()),
                ArgVal::Scalar(interp::V::I(n)),
            ];
            let r = interp::primal::<Var>(f, &mut a).unwrap();
            let ArgVal::Floats(o) = &a[1] else { panic!() };
            (0..3).fold(r, |s, j| s + o[j] * cot[j])
        },
        &inputs,
    )
}

/// The dependency facts the reverse sweep relies on for cheap primitives agree with the rule
/// table: a partial that "does not depend" on an operand is unchanged when it changes.
#[test]
fn cheap_rule_dependencies_agree_with_the_table() {
    use crate::adjoint::{op1_cheap, op1_dep, op2_cheap, op2_deps};
    use adjoint_core::rules::{binary, unary, Op1, Op2};
    let pts = [(-1.5, 0.25), (0.75, 2.0), (3.0, -0.5)];
    for &op in Op2::ALL.iter().filter(|o| op2_cheap(**o)) {
        for k in 0..2 {
            let deps = op2_deps(op, k);
            for &(x, y) in &pts {
                let part = |x: f64, y: f64| {
                    let r = binary(op, x, y);
                    if k == 0 {
                        r.dx
                    } else {
                        r.dy
                    }
                };
                if !deps[0] {
                    assert_eq!(part(x, y), part(0.0, y), "{op:?} ∂{k} depends on x");
                }
                if !deps[1] {
                    assert_eq!(part(x, y), part(x, 0.0), "{op:?} ∂{k} depends on y");
                }
            }
        }
    }
    for &op in Op1::ALL.iter().filter(|o| op1_cheap(**o)) {
        if !op1_dep(op) {
            assert_eq!(unary(op, 0.7).d, unary(op, 0.0).d, "{op:?}");
        }
    }
}

/// Tuple, struct and array parameters lower to flat leaves (struct fields when first read, as
/// numbers or, when indexed, arrays); the interpreter's adjoint over the leaves agrees with
/// forward mode.
#[test]
fn aggregate_params_lower_to_flat_leaves() {
    use crate::ir::{Param, SigItem};
    let src = "fn f(p: (f64, [f64; 2]), q: &P, x: [f64; 2]) -> f64 {
        let (a, b) = p;
        let c = [a * q.w, b[1]];
        let (s, co) = x[0].sin_cos();
        let mut d = c;
        d[0] = 2.0;
        c[0] * s + c[1] * co + q.b[1] * p.1[0] + d[0] * x.len() as f64
    }";
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = f
        .params
        .iter()
        .map(|pa| match pa {
            Param::Scalar { name, .. } => format!("{name}"),
            Param::Slice { name, .. } => format!("{name}[]"),
        })
        .collect();
    assert_eq!(names, ["p__0", "p__1[]", "x[]", "q__w", "q__b[]"]);
    assert!(matches!(
        &f.sig[..],
        [SigItem::Agg(_), SigItem::Agg(_), SigItem::Leaf(2)]
    ));
    // coordinates: p.0, p.1[0], p.1[1], x[0], x[1], q.w, q.b[0], q.b[1]
    let v = [0.7, -0.3, 1.1, 0.4, 2.0, 1.5, -0.8, 0.6];
    fn args<T: Copy>(v: &[T]) -> Vec<ArgVal<T>> {
        vec![
            ArgVal::Scalar(interp::V::F(v[0])),
            ArgVal::Floats(v[1..3].to_vec()),
            ArgVal::Floats(v[3..5].to_vec()),
            ArgVal::Scalar(interp::V::F(v[5])),
            ArgVal::Floats(v[6..8].to_vec()),
        ]
    }
    let mut a = args(&v);
    let mut adj = args(&[0.0; 8]);
    let (r, _) = interp::adjoint(&f, &p, &mut a, &mut adj, 1.0);
    assert_eq!(r, interp::primal::<f64>(&f, &mut args(&v)));
    let mut g = vec![];
    for x in &adj {
        match x {
            ArgVal::Scalar(interp::V::F(x)) => g.push(*x),
            ArgVal::Floats(xs) => g.extend(xs),
            _ => panic!(),
        }
    }
    assert_eq!(g.len(), 8);
    for (i, gi) in g.iter().enumerate() {
        let vd: Vec<Dual<f64>> = (0..8)
            .map(|j| Dual::new(v[j], if i == j { 1.0 } else { 0.0 }))
            .collect();
        let e = interp::primal::<Dual<f64>>(&f, &mut args(&vd)).unwrap().eps;
        assert!(
            (gi - e).abs() <= 1e-10 * (1.0 + e.abs()),
            "{i}: {gi} vs {e}"
        );
    }
}

#[test]
fn aggregate_misuse_is_an_error_not_a_panic() {
    rejects(&[
        ("fn f(p: &P) -> f64 { p.b[0] + p.b }", "found a slice"),
        (
            "fn f(p: &P) -> f64 { let q = p; q.b[0] + p.b }",
            "both as a number and as an array",
        ),
        ("fn f(p: (f64, f64)) -> f64 { p.2 }", "no field `2`"),
        (
            "fn f(x: f64) -> (f64, f64) { (x, [x, x]) }",
            "declared return type",
        ),
        ("fn f(x: f64) -> [f64; 2] { x }", "declared return type"),
        ("fn f(p: &P) -> P { *p }", "struct literal"),
        (
            "fn f(p: &Vec<P>) -> f64 { 0.0 }",
            "unsupported parameter type",
        ),
        ("fn f(p: &P<T>) -> f64 { 0.0 }", "`&Name<f64>`"),
    ]);
}

/// Iterator reductions as users write them (`x.iter().sum()`, `.map(|v| …).sum()`, `.product()`,
/// `.fold(…)`, over slices, ranges, `zip`, `enumerate`, nested) lower to the loops they stand
/// for: each adjoint against forward mode, and a reduction that is the result is a fused loop.
#[test]
fn iterator_reductions_lower_to_loops() {
    let x = [0.7, -0.4, 1.3, 0.2, 0.9, -1.1];
    for src in [
        "fn f(x: &[f64]) -> f64 { x.iter().sum() }",
        "fn f(x: &[f64]) -> f64 { x.iter().copied().sum::<f64>() * x.iter().sum::<f64>() }",
        "fn f(x: &[f64]) -> f64 { x[..3].iter().zip(&x[3..]).map(|(a, b)| a * b).sum() }",
        "fn f(x: &[f64]) -> f64 { x.iter().enumerate().map(|(i, v)| v * i as f64).sum::<f64>().sin() }",
        "fn f(x: &[f64]) -> f64 { let n = x.len(); (0..n).step_by(2).map(|i| x[i] * x[n - 1 - i]).sum::<f64>() + (0..n).rev().map(|i| x[i] * i as f64).sum::<f64>() }",
        "fn f(x: &[f64]) -> f64 { (0..x.len()).map(|i| (0..i).map(|j| x[i] * x[j]).sum::<f64>()).sum() }",
        "fn f(x: &[f64]) -> f64 { x.iter().product::<f64>() + x.iter().map(|v: &f64| v.cos()).product::<f64>() }",
        "fn f(x: &[f64]) -> f64 { let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v)); m + x.iter().map(|v| (v - m).exp()).fold(0.0, |a, e| a + e).ln() }",
        "fn f(x: &[f64]) -> f64 { let n: usize = x.iter().map(|_| 1).sum(); let k = (0..n).sum::<usize>(); x[1] * (n + k) as f64 }",
        "fn f(x: &[f64]) -> f64 { if x.is_empty() { 0.0 } else { x[0] * x[1] } }",
        // `step_by` on slice iterators and after `rev`, `rev` after `step_by`
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for (i, v) in x.iter().enumerate().step_by(2) { s = s * 0.5 + v * i as f64; } for i in (0..x.len()).rev().step_by(2) { s = s * 0.9 + x[i]; } for i in (1..x.len()).step_by(3).rev() { s = s * 0.7 + x[i] * x[i]; } s }",
        // functions named instead of closures
        "fn f(x: &[f64]) -> f64 { x.iter().copied().map(f64::sin).sum::<f64>() * x.iter().copied().fold(f64::MIN, f64::max) }",
        // closures bound to names, called, and named in a reduction
        "fn f(x: &[f64]) -> f64 { let n = x.len(); let at = |i: usize| n - 1 - i; let sq = |v: f64| v * v; let t = |a: f64, b: f64| { let d = a - b; sq(d) + 1.0 }; t(x[at(0)], x[1]) + x.iter().copied().map(sq).sum::<f64>() }",
        // assertions are passive checks (here they hold)
        "fn f(x: &[f64]) -> f64 { assert!(x.len() > 1); assert_eq!(x.len() % 2, 0, \"even\"); debug_assert_ne!(x[0], 0.0); x[0] * x[1] }",
    ] {
        grad_check(src, &x);
    }
    let fused = |src: &str| {
        let (_, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
        p.fused.iter().flatten().count()
    };
    assert_eq!(
        fused("fn f(x: &[f64], y: &[f64]) -> f64 { x.iter().zip(y).map(|(a, b)| a * b).sum() }"),
        1
    );
    assert_eq!(
        fused("fn f(x: &[f64]) -> f64 { x.iter().fold(0.0, |s, v| s + v * v) / 2.0 }"),
        1
    );
}

/// Reductions the lowering cannot inline are errors that say what to write.
#[test]
fn unsupported_reductions_say_what_to_write() {
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { x.iter().filter(|v| **v > 0.0).sum() }",
            "supported on the iterators a `for` loop takes",
        ),
        (
            "fn f(x: &[f64]) -> f64 { x.iter().map(|v| { if *v < 0.0 { return 0.0; } *v }).sum() }",
            "`return` inside a closure",
        ),
        (
            "fn f(x: &[f64]) -> f64 { x.iter().copied().max().unwrap() }",
            "`.fold(f64::NEG_INFINITY, |m, v| m.max(v))`",
        ),
        (
            "fn f(x: &[f64]) -> f64 { x.iter().sum::<f32>() as f64 }",
            "`sum` of `f32` values",
        ),
        (
            "fn f(x: &[f64]) -> f64 { x.iter().fold(0.0, |a| a) }",
            "takes 2 parameter(s)",
        ),
        (
            "fn f(x: &[f64]) -> f64 { x.iter().map(1.0).sum() }",
            "expected a closure",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let g = move |v: f64| v * x[0]; g(x[1]) }",
            "`move` closures are not supported",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let g = |v: f64| { if v > 0.0 { return v; } 0.0 }; g(x[1]) }",
            "`return` inside a closure",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let mut s = 0.0; let mut g = |v: f64| s += v; g(x[0]); s }",
            "assigns `s`, a variable it captures",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let g = |v: f64| v; let h = g; h(x[0]) }",
            "not used as a value",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let g = |v: f64| v; g(x[0], x[1]) }",
            "takes 1 argument",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let it = x.iter(); 0.0 }",
            "reduce it with `.sum()`",
        ),
        (
            "fn f(x: &[f64]) -> f64 { const B: bool = true; x[0] }",
            "an `f64` or an integer",
        ),
        (
            "fn f(x: &[f64]) -> f64 { { const C: f64 = 1.0; } const C: f64 = 2.0; x[0] * C }",
            "a second `const C`",
        ),
        (
            "fn f(x: &[f64]) -> f64 { fn g() {} x[0] }",
            "other than `const`",
        ),
    ]);
}

/// A value defined outside a counted loop and read by its reverse code is recorded once per run
/// of the loop, at the loop's exit, not once per iteration: the triangular product of ADBench's
/// GMM pushes `d` values per row instead of `d²/2`. Nests, several invariant values, an
/// invariant used by two sibling loops, a loop run zero times, and a `while` (not counted:
/// still pushed per iteration) — each adjoint against forward mode.
#[test]
fn loop_invariant_values_are_recorded_once_per_loop_run() {
    let tri = "fn f(x: &[f64]) -> f64 {
        let d = x.len();
        let mut q = [0.0; 8];
        let mut s = 0.0;
        for rep in 0..3 {
            for j in 0..d { q[j] = x[j] * (rep as f64 + 1.0); }
            for i in 0..d {
                let xi = q[i].sin();
                let w = xi * xi;
                for r in i + 1..d { q[r] += x[r] * xi * w; }
                for r in 0..i { s += q[r] * w; }
            }
            for j in 0..d { s += q[j] * q[j]; }
        }
        s
    }";
    let (f, p) = lower_str(tri, "").unwrap_or_else(|e| panic!("{e}"));
    for x in [
        &[0.3, -0.6, 0.8, 0.2, -0.1][..],
        &[0.5][..],
        &[0.4, 0.9][..],
    ] {
        grad_check(tri, x);
    }
    // no block of a counted loop pushes a value defined outside that loop: `xi` and `w` are
    // pushed by the inner loops' exit blocks, once per row
    for c in p.counted.iter().flatten() {
        for b in (0..f.blocks.len()).filter(|&b| c.body[b]) {
            for &v in &p.pushes[b] {
                let db = p.def_block[v].unwrap();
                assert!(c.body[db], "%{v} pushed per iteration in block {b}");
            }
        }
    }
    let pushed_at_exits: Vec<_> = p
        .counted
        .iter()
        .flatten()
        .flat_map(|c| p.pushes[c.exit].iter().map(|&v| f.values[v].name.clone()))
        .collect();
    for name in ["xi", "w"] {
        assert!(
            pushed_at_exits.iter().any(|n| n.as_deref() == Some(name)),
            "{name} not pushed at a loop exit: {pushed_at_exits:?}\n{}",
            crate::adjoint::dump(&f, &p)
        );
    }
    // a `while` loop has no replayed counter: its invariants are still pushed per iteration
    grad_check(
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { let a = x[i].exp(); let mut k = 0; while k < 3 { s = s * 0.5 + a * s.cos(); k += 1; if s > 10.0 { break; } } } s }",
        &[0.3, -0.6, 0.8],
    );
}

/// A repeated load of the same element in a block is one value, and a load right after a store
/// of the element is the stored value; a store to another element (or a call) in between
/// forces a fresh load. Adjoints against forward mode either way.
#[test]
fn repeated_loads_are_shared_until_a_store() {
    let loads = |src: &str| {
        let (f, _) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
        f.blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter(|i| matches!(i, crate::ir::Inst::Load { .. }))
            .count()
    };
    let shared = "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for j in 0..x.len() { s += x[j] * x[j] + x[0] * x[j]; } s }";
    assert_eq!(loads(shared), 2, "x[j] once, x[0] once");
    grad_check(shared, &[0.3, -0.6, 0.8]);
    let stored = "fn f(x: &[f64]) -> f64 { let mut q = [0.0; 3]; let mut s = 0.0; for j in 0..x.len() { q[j] = x[j].sin(); s += q[j] * q[j]; q[j] = q[j] * x[j]; s += q[j] * q[j]; } s }";
    assert_eq!(loads(stored), 1, "x[j]; q[j] is the value just stored");
    grad_check(stored, &[0.3, -0.6, 0.8]);
    let other = "fn f(x: &[f64], k: usize) -> f64 { let mut q = [0.0; 3]; let mut s = 0.0; for j in 0..x.len() { q[j] = x[j].sin(); q[k] = 0.5 * x[j]; s += q[j] * q[j]; } s }";
    assert_eq!(
        loads(other),
        2,
        "x[j], and q[j] again after the store to q[k]"
    );
}

/// A load inside a loop from a slice the loop does not write, at an index fixed for the loop
/// (`xc[i]` in ADBench GMM's triangular product), is invariant too: pushed once per loop run at
/// the exit, including runs with no iteration (the pushed local is then never read).
#[test]
fn invariant_loads_inside_a_loop_are_recorded_at_its_exit() {
    let src = "fn f(x: &[f64], m: usize) -> f64 {
        let d = x.len();
        let mut xc = [0.0; 8];
        let mut qx = [0.0; 8];
        let mut s = 0.0;
        for rep in 0..2 {
            for j in 0..d { xc[j] = (x[j] * (rep as f64 + 0.5)).sin(); qx[j] = xc[j]; }
            let mut li = 0;
            for i in 0..d {
                for r in i + 1..d {
                    qx[r] += x[(li + rep) % d] * xc[i];
                    li += 1;
                }
                for _t in 0..m { s += xc[i] * xc[i] * qx[i]; }
            }
            for j in 0..d { s += qx[j] * qx[j]; }
        }
        s
    }";
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    use crate::ir::{Inst, Val};
    let loaded_xc = |v: Val| {
        p.def_inst[v].is_some_and(|(b, k)| {
            matches!(f.blocks[b].insts[k], Inst::Load { slice, .. } if f.slices[slice].name == "xc")
        })
    };
    for c in p.counted.iter().flatten().filter(|c| c.innermost) {
        for b in (0..f.blocks.len()).filter(|&b| c.body[b]) {
            assert!(
                !p.pushes[b].iter().any(|&v| loaded_xc(v)),
                "xc[i] pushed per iteration in block {b}\n{}",
                crate::adjoint::dump(&f, &p)
            );
        }
    }
    // `xc[i]`'s adjoint is added to `dxc[i]` once per run of the inner loops, in their last
    // reversed iteration, not read-modified-written in each
    assert!(
        (0..f.values.len()).any(|v| loaded_xc(v) && p.deferred[v].is_some()),
        "{}",
        crate::adjoint::dump(&f, &p)
    );
    // `li` steps by one beside the counter `r`: recomputed in the reverse sweep, not pushed per
    // iteration (its value on entry to the row is, once per row)
    let named_li = |v: &Val| f.values[*v].name.as_deref() == Some("li");
    for c in p.counted.iter().flatten().filter(|c| c.innermost) {
        for b in (0..f.blocks.len()).filter(|&b| c.body[b]) {
            assert!(
                !p.pushes[b].iter().any(named_li),
                "li pushed per iteration in block {b}\n{}",
                crate::adjoint::dump(&f, &p)
            );
        }
    }
    assert!(p
        .counted
        .iter()
        .flatten()
        .any(|c| c.inductions.iter().any(|x| named_li(&x.0))));
    for m in [0usize, 1, 3] {
        for x in [&[0.3, -0.6, 0.8, 0.2][..], &[0.7][..]] {
            let mut args = vec![
                ArgVal::Floats(x.to_vec()),
                ArgVal::Scalar(interp::V::I(m as i128)),
            ];
            let mut adj = vec![
                ArgVal::Floats(vec![0.0; x.len()]),
                ArgVal::Scalar(interp::V::I(0)),
            ];
            interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
            let ArgVal::Floats(g) = &adj[0] else { panic!() };
            for (i, gi) in g.iter().enumerate() {
                let xd: Vec<Dual<f64>> = (0..x.len())
                    .map(|j| Dual::new(x[j], if i == j { 1.0 } else { 0.0 }))
                    .collect();
                let mut dargs = [ArgVal::Floats(xd), ArgVal::Scalar(interp::V::I(m as i128))];
                let e = interp::primal::<Dual<f64>>(&f, &mut dargs).unwrap().eps;
                assert!(
                    (gi - e).abs() <= 1e-10 * (1.0 + e.abs()),
                    "m {m}, x{i}: {gi} vs {e}"
                );
            }
        }
    }
}

/// Cheap float arithmetic whose operands cost no push (`t = x[i + 1] − x[i]²`) is recomputed
/// in the reverse sweep, and so is a load from an array that nothing writes after it (`h[j]`
/// once the loop filling `h` is done); a load from an array written later is still pushed.
#[test]
fn cheap_values_and_loads_of_settled_arrays_are_recomputed() {
    use crate::ir::{Inst, Val};
    let ros = "fn f(x: &[f64]) -> f64 {
        let mut s = 0.0;
        for i in 0..x.len() - 1 {
            let t = x[i + 1] - x[i] * x[i];
            let u = 1.0 - x[i];
            s += t * t * 100.0 + u * u;
        }
        s
    }";
    let (_, p) = lower_str(ros, "").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.pushes.iter().all(|b| b.is_empty()),
        "Rosenbrock pushes nothing"
    );
    grad_check(ros, &[0.3, -0.6, 0.8, 1.2]);

    let settled = "fn f(x: &[f64]) -> f64 {
        let n = x.len();
        let mut h = [0.0; 8];
        for i in 0..n { h[i] = (x[i] * 0.7).tanh(); }
        let mut s = 0.0;
        for i in 0..n { for j in 0..n { s += x[j] * h[j] * h[i]; } }
        s
    }";
    let (f, p) = lower_str(settled, "").unwrap_or_else(|e| panic!("{e}"));
    let loads_h = |f: &crate::ir::Func, p: &crate::adjoint::Plan, v: Val| {
        p.def_inst[v].is_some_and(|(b, k)| {
            matches!(f.blocks[b].insts[k], Inst::Load { slice, .. } if f.slices[slice].name == "h")
        })
    };
    // `h[j]` is recomputed in the inner loop's reverse iterations (`h[i]`, invariant there, is
    // pushed once per row at the inner loop's exit)
    for c in p.counted.iter().flatten().filter(|c| c.innermost) {
        for b in (0..f.blocks.len()).filter(|&b| c.body[b]) {
            assert!(
                !p.pushes[b].iter().any(|&v| loads_h(&f, &p, v)),
                "h is not written after the first loop: h[j] is recomputed, not pushed in \
                 block {b}\n{}",
                crate::adjoint::dump(&f, &p)
            );
        }
    }
    assert!(p.remat.iter().flatten().any(|&v| loads_h(&f, &p, v)));
    grad_check(settled, &[0.3, -0.6, 0.8]);

    let unsettled = "fn f(x: &[f64]) -> f64 {
        let n = x.len();
        let mut h = [0.0; 8];
        for i in 0..n { h[i] = x[i]; }
        let mut s = 0.0;
        for _r in 0..2 { for i in 0..n { let old = h[i]; h[i] = old * old; s += old.sin() * h[i]; } }
        s
    }";
    let (f, p) = lower_str(unsettled, "").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.pushes.iter().flatten().any(|&v| loads_h(&f, &p, v)),
        "h[i] is overwritten after it is read: the value read is pushed\n{}",
        crate::adjoint::dump(&f, &p)
    );
    grad_check(unsettled, &[0.3, -0.6, 0.8]);
}

/// `exp`'s partial is its result: a loop keeps one value per `exp` for the reverse sweep, not
/// the result and a recorded partial.
#[test]
fn exp_records_its_result_as_its_partial() {
    let src = "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { s = s * (x[i] * s).exp(); } s }";
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    let pushed: usize = p.pushes.iter().map(|b| b.len()).sum();
    assert_eq!(
        pushed,
        2,
        "s and exp(x[i]·s), no separate partial\n{}",
        crate::adjoint::dump(&f, &p)
    );
    grad_check(src, &[0.3, -0.6, 0.8]);
}

/// `Plan::ranged`: in `m[i * n + j] * v[j]` (every iteration of the inner loop) both loads are
/// indexed by `base + counter`, with `i * n` as base; a load under a branch inside the loop and
/// one at `j - 1` (not `base + counter`) are not.
#[test]
fn ranged_accesses_of_a_matrix_row() {
    let src = "fn f(m: &[f64], v: &[f64]) -> f64 {
        let n = v.len();
        let mut s = 0.0;
        for i in 0..n {
            let mut acc = 0.0;
            for j in 1..n {
                acc += m[i * n + j] * v[j] + v[j - 1];
                if acc > 0.0 {
                    acc += v[j];
                }
            }
            s += acc;
        }
        s
    }";
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    use crate::ir::{Inst, IntOp};
    let mut seen = vec![];
    for (b, block) in f.blocks.iter().enumerate() {
        for (k, i) in block.insts.iter().enumerate() {
            let Inst::Load { slice, idx, .. } = *i else {
                continue;
            };
            let name = f.slices[slice].name.to_string();
            let shape = match p.def_inst[idx].map(|(ib, ik)| &f.blocks[ib].insts[ik]) {
                Some(Inst::Int { op: IntOp::Sub, .. }) => "minus",
                Some(Inst::Int { op: IntOp::Add, .. }) => "plus",
                _ => "counter",
            };
            seen.push((name, shape, p.ranged[b][k].is_some()));
        }
    }
    let dump = crate::adjoint::dump(&f, &p);
    assert!(
        seen.contains(&("m".into(), "plus", true)),
        "{seen:?}\n{dump}"
    );
    assert!(
        seen.contains(&("v".into(), "counter", true)),
        "{seen:?}\n{dump}"
    );
    assert!(
        seen.contains(&("v".into(), "minus", false)),
        "{seen:?}\n{dump}"
    );
    // the conditional `v[j]`: in the loop, not on every iteration
    assert_eq!(
        seen.iter()
            .filter(|s| s.0 == "v" && s.1 == "counter")
            .count(),
        2,
        "{seen:?}\n{dump}"
    );
    assert_eq!(
        seen.iter()
            .filter(|s| s.0 == "v" && s.1 == "counter" && s.2)
            .count(),
        1,
        "{seen:?}\n{dump}"
    );
    assert!(dump.contains("unchecked in both sweeps"), "{dump}");
}

/// Which loops fuse (see [`crate::adjoint::Fused`]): the shapes of the codegen tests in
/// `adjoint-ssa/tests/fused.rs`, and those that must not.
#[test]
fn fused_loops_are_detected() {
    let fused = |src: &str| -> usize {
        let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
        let d = crate::adjoint::dump(&f, &p);
        let n = p.fused.iter().flatten().count();
        assert_eq!(d.matches(" fused: ").count(), n, "{d}");
        n
    };
    let yes = [
        // a stencil returning the sum
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() - 1 { let t = x[i + 1] - x[i] * x[i]; s += t * t; } s }",
        // over a slice's iterator, as users write it
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for &v in x.iter() { s += v * v; } s / x.len() as f64 }",
        // a division by a cast computed after the exit
        "fn f(x: &[f64]) -> f64 { let m = x.len() / 2; let mut t = 0.0; for i in 0..m { t += (x[2 * i] * x[2 * i + 1]).exp(); } t / m as f64 }",
        // two accumulators combined linearly with values from before the loop
        "fn f(x: &[f64]) -> f64 { let w = x[0].sin(); let mut s = 0.0; let mut q = 1.0; for i in 0..x.len() { s -= x[i]; q = x[i] * x[i] + q; } 2.0 * s + s * w - q / w + -q }",
        // an in-place output written before the loop and read in it
        "fn f(x: &[f64], out: &mut [f64]) -> f64 { out[0] = out[0] * x[0]; out[1] = x[1]; let mut s = 0.0; for i in 0..x.len() { s += out[0] * x[i] + out[1]; } s }",
        // a join in the body; the loop inside an `if`
        "fn f(x: &[f64]) -> f64 { let mut s = x[1]; if x[0] > 0.0 { for i in 0..x.len() { let t = if x[i] > 0.5 { x[i].sin() } else { x[i] }; s += t; } } s * 3.0 }",
    ];
    for src in yes {
        assert_eq!(fused(src), 1, "{src}");
    }
    let no = [
        // the accumulator's adjoint depends on its value
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += x[i] * x[i]; } s.ln() }",
        // a product, not a sum
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { s *= x[i]; } s }",
        // the accumulator read inside the body
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += x[i] * s; } s }",
        // a loop inside (measured slower fused: see `fused_loop`)
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { let mut t = 0.0; for j in 0..i { t += x[j]; } s += t * t; } s }",
        // inside another loop (which is no accumulation)
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { let mut t = 0.0; for j in 0..i { t += x[j]; } s *= t; } s }",
        // a store in the body
        "fn f(x: &[f64]) -> f64 { let mut h = [0.0; 2]; let mut s = 0.0; for i in 0..2 { h[i] = x[i]; s += x[i]; } s + h[0] }",
        // the array read is written after the loop
        "fn f(x: &[f64]) -> f64 { let mut h = [1.0; 2]; h[1] = x[1]; let mut s = 0.0; for i in 0..2 { s += h[i] * x[i]; } h[0] = s; h[0] + h[1] }",
        // the exit value's use depends on a branch after the loop
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += x[i]; } if x[0] > 0.0 { s * 2.0 } else { s } }",
        // an in-place output written after the loop (slices are tracked as a whole)
        "fn f(x: &[f64], out: &mut [f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += out[0] * x[i]; } out[1] = x[1]; s }",
        // multiplied by a value computed after the loop
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { s += x[i]; } let w = x[0].sin(); s * w }",
    ];
    for src in no {
        assert_eq!(fused(src), 0, "{src}");
    }
}

#[test]
fn two_bases_of_one_adjoint_are_opaque_to_llvm() {
    // a reversed inner loop updating `d_p` at `i·n + j` and at `x + j`: its bases go through
    // `black_box` (else LLVM's hoisted overlap check fails under the reversed outer loop)
    let expand = |src: &str| {
        let item: proc_macro2::TokenStream = src.parse().unwrap();
        crate::expand(quote::quote!(), item, quote::quote!(::adjoint_ssa)).to_string()
    };
    let two = "fn f(p: &[f64], n: usize, x: usize) -> f64 { let mut s = 0.0; for i in 0..4 { let mut a = 0.0; for j in 0..n { a += p[i * n + j] * p[x + j]; } s += a.sin(); } s }";
    let text = expand(two);
    assert_eq!(text.matches("black_box").count(), 2, "{text}");
    // one base per adjoint slice (a matrix row times another slice): no barrier
    let one = "fn f(m: &[f64], v: &[f64], n: usize) -> f64 { let mut s = 0.0; for i in 0..4 { let mut a = 0.0; for j in 0..n { a += m[i * n + j] * v[j]; } s += a.sin(); } s }";
    let text = expand(one);
    assert!(!text.contains("black_box"), "{text}");
}

/// `adjoint-ssa`'s `tests/random_programs/programs.rs` is what the generator writes now.
/// Regenerate it with `cargo run -p adjoint-ssa-syntax --example random_programs >
/// crates/adjoint-ssa/tests/random_programs/programs.rs` (rustfmt leaves it as written).
#[test]
fn compiled_random_programs_are_up_to_date() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../adjoint-ssa/tests/random_programs/programs.rs"
    );
    let Ok(committed) = std::fs::read_to_string(path) else {
        return; // this crate outside the workspace
    };
    assert!(
        committed == testgen::random_programs_test(),
        "{path} is out of date: regenerate it (see this test's doc)"
    );
}

/// `let (c, s) = polar(r, t);` lowers to one call defining a value per `f64` of the result, in
/// the order the result's type lists them; an array becomes a local array; a result nothing
/// reads has no adjoint, and the call is active while one of its results is.
#[test]
fn calls_with_tuple_results_lower_to_one_call() {
    use crate::ir::{Inst, Ret};
    let src = "fn f(r: f64, t: f64, a: &[f64]) -> f64 {
        let (x, _) = polar(r, t);
        let ((p, q), v, n): ((f64, f64), [f64; 2], f64) = g(a, t);
        x * p + v[1] * n
    }";
    let (f, p) = lower_str(src, "").unwrap();
    let calls: Vec<(&Vec<usize>, &Ret)> = f
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter_map(|i| match i {
            Inst::Call { dsts, ret, .. } => Some((dsts, ret)),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(*calls[0].1, Ret::Tuple(vec![Ret::Scalar, Ret::Scalar]));
    assert_eq!(
        *calls[1].1,
        Ret::Tuple(vec![
            Ret::Tuple(vec![Ret::Scalar, Ret::Scalar]),
            Ret::Array(2),
            Ret::Scalar
        ])
    );
    assert_eq!(calls[1].0.len(), 5);
    // polar's `y` and g's `q` and `v[0]` are read by nothing: no adjoint
    let active: Vec<bool> = calls[0].0.iter().map(|&d| p.active(&f, d)).collect();
    assert_eq!(active, [true, false]);
    let active: Vec<bool> = calls[1].0.iter().map(|&d| p.active(&f, d)).collect();
    assert_eq!(active, [true, false, true, true, true]);
    let text = f.to_string();
    assert!(text.contains("call polar("), "{text}");
    assert!(text.contains(") = call g("), "{text}");
    // a local array passed on: its elements, loaded before the call
    let (f, _) = lower_str("fn f(a: f64) -> f64 { let w = [a, 2.0 * a]; g(&w) }", "").unwrap();
    let elems = f
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .find_map(|i| match i {
            Inst::Call { args, .. } => match &args[..] {
                [crate::ir::Arg::Elems { vals }] => Some(vals.len()),
                _ => None,
            },
            _ => None,
        });
    assert_eq!(elems, Some(2));
    // a struct parameter passed on, active or not
    let src = "fn f(p: &P, x: f64) -> f64 { g(p, x) * p.w }";
    assert!(lower_str(src, "").is_ok());
    assert!(lower_str(src, "wrt(x)").is_ok());
}

#[test]
fn call_results_of_unknown_shape_say_what_to_write() {
    rejects(&[
        (
            "fn f(r: f64, t: f64) -> f64 { let p = polar(r, t); p.0 * p.1 }",
            "destructure the call",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let u = unit(a); u[0] }",
            "write its type",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let u: [f64; N] = unit(a); u[0] }",
            "as a literal",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let u: (f64, usize) = g(a); u.0 }",
            "`f64`, `[f64; N]` with a literal `N`, or a tuple",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let () = g(a); 0.0 }",
            "bind plain names",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let w = [a[0]; N]; g(&w) }",
            "needs a literal length",
        ),
        (
            "fn f(x: f64) -> f64 { let mut s = 0.0; for k in 0..3 { s += g(x, k); } s }",
            "an integer passed here has no type",
        ),
        (
            "fn f(p: &P, x: f64) -> f64 { g(p, p) * x }",
            "passing a struct twice",
        ),
        (
            "fn f(p: &P, x: f64) -> f64 { g(p, &p.b) * x + p.b[0] }",
            "with one of its array fields",
        ),
        (
            "fn f(a: &[f64]) -> f64 { let w = [a[0], a[1]]; g(&w[1..]) }",
            "part of a local array",
        ),
    ]);
}

/// Spellings users reach for first get a message saying what to write instead.
#[test]
fn unsupported_spellings_say_what_to_write() {
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for (i, v) in (1..).zip(x.iter()) { s += v * i as f64; } s }",
            "give the range an end (`(1..n + 1).zip(x.iter())`)",
        ),
        ("fn f(x: f64, _: f64) -> f64 { x }", "name an unused one `_x`"),
    ]);
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { let mut m = [[0.0; 2]; 2]; m[0][0] = x[0]; m[0][0] }",
            "arrays of arrays are not supported",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let a = [x[0], x[1]]; let b = [a, [x[2], 1.0]]; b[0][0] }",
            "arrays of arrays are not supported",
        ),
        (
            "fn f(mut a: [f64; 3], u: f64) -> f64 { a[0] = a[0] * u; a[0] }",
            "`let mut a = a0;`",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let v = 'b: { if x[0] > 0.0 { break 'b x[0]; } x[1] }; v }",
            "or a `loop` that breaks with the value",
        ),
    ]);
    accepts(&[
        "fn f(x: &[f64]) -> f64 { let v = 'l: loop { if x[0] > 0.0 { break 'l x[0]; } break 'l x[1]; }; v }",
        "fn f(a0: [f64; 3], u: f64) -> f64 { let mut a = a0; a[0] = a[0] * u; a[0] }",
    ]);
    let twice: syn::ItemFn =
        syn::parse_str("#[adjoint::ssa::differentiable] fn f(x: f64) -> f64 { x }").unwrap();
    let e = crate::try_expand(quote::quote!(), &twice, &quote::quote!(rt)).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    accepts(&[
        "fn f(x: &[f64]) -> f64 { let n = x.len(); let mut s = 0.0; for (i, v) in (1..n + 1).zip(x.iter()) { s += v * i as f64; } s }",
        "fn f(x: f64, _y: f64) -> f64 { x }",
        "fn f(x: f64) -> f64 { x * N as f64 + (2 * N + 1) as f64 }",
    ]);
}

/// `f64::from(k)` converts the integers Rust converts losslessly (at most 32 bits, and
/// integers whose type nothing fixes) and refuses wider ones with what to write instead.
#[test]
fn f64_from_of_integers() {
    accepts(&[
        "fn f(x: f64) -> f64 { let mut s = x; for k in 0u8..3 { s += x * f64::from(k); } s }",
        "fn f(x: f64) -> f64 { let k: i32 = -4; x * f64::from(k) }",
        "fn f(x: f64) -> f64 { x * f64::from(3) + f64::from(x) }",
    ]);
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { x[0] * f64::from(x.len()) }",
            "cast with `as f64`",
        ),
        (
            "fn f(x: f64) -> f64 { let k: i64 = 2; x * f64::from(k) }",
            "cast with `as f64`",
        ),
    ]);
}

/// A destructuring assignment whose right side is not a tuple of as many parts is an error
/// at the right side, not a panic.
#[test]
fn destructuring_assignment_misuse_is_an_error() {
    rejects(&[
        (
            "fn f(x: f64) -> f64 { let (mut a, mut b) = (x, x); (a, b) = x; a + b }",
            "must be a tuple",
        ),
        (
            "fn f(x: f64) -> f64 { let (mut a, mut b) = (x, x); (a, b) = (x, x, x); a + b }",
            "does not have the 2 parts",
        ),
        (
            "fn f(x: f64) -> f64 { let (mut a, mut b) = (x, x); let v = [x, x]; (a, b) = (x, v); a + b }",
            "not arrays or structs",
        ),
    ]);
}

/// A variable declared without a value or a type is an `f64`: an integer assigned to it asks
/// for the type; arrays are declared with a value.
#[test]
fn declarations_without_a_value() {
    accepts(&[
        "fn f(x: f64) -> f64 { let y; if x > 0.0 { y = x; } else { y = -x; } y }",
        "fn f(x: &[f64]) -> f64 { let k: usize; k = 1; x[k] }",
    ]);
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { let k; k = 1; x[k] }",
            "give `k` its type where it is declared",
        ),
        (
            "fn f(x: f64) -> f64 { let a: [f64; 2]; x }",
            "declare arrays with a value",
        ),
        (
            "fn f(x: f64) -> f64 { let (a, b); x }",
            "one variable at a time",
        ),
    ]);
}

/// `break value` leaves a `loop` with a number: an `f64`, or an integer where the type is
/// written; an integer value of a loop whose type nothing gives is an error (it does not
/// silently become an `f64`).
#[test]
fn loop_values() {
    accepts(&[
        "fn f(x: f64) -> f64 { let r = loop { break x * 2.0; }; r }",
        "fn f(x: &[f64]) -> f64 { let k: usize = loop { break 1; }; x[k] }",
    ]);
    rejects(&[
        (
            "fn f(x: f64) -> f64 { let k = loop { break 3; }; x * (k / 2) as f64 }",
            "where its type is written",
        ),
        (
            "fn f(x: f64) -> f64 { let r = loop { break [x, x]; }; r[0] }",
            "",
        ),
    ]);
}

/// A reference pointed at another array, a whole-array assignment to an array a reference
/// also names, and binding such an array by name (a copy or a move of the reference?) are
/// errors, not copies into the wrong array.
#[test]
fn references_to_local_arrays_are_not_reassigned() {
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { let a = [x[0], x[1]]; let b = [x[2], x[3]]; let mut r = &a; \
             if x[4] < 0.0 { r = &b; } a[0] + r[0] }",
            "pointing a reference at another array",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let mut a = [x[0], x[1]]; let r = &a; a = [x[2], x[3]]; \
             a[0] + r[0] }",
            "has another name",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let mut a = [x[0], x[1]]; let r = &mut a; let t = r; \
             t[0] = x[2]; a[0] * x[3] }",
            "two names",
        ),
    ]);
}

#[test]
fn debug_assert_conditions_that_can_panic_or_write_are_behind_cfg() {
    // Rust evaluates a `debug_assert!`'s condition only with debug assertions on: one that can
    // panic (an index) or write is lowered as `if cfg!(debug_assertions) { assert!(…) }`; one
    // that can do neither is evaluated as it stands (its panic is behind `cfg!`), no branch.
    let branches = |src: &str| {
        let (f, _) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
        let cfg = f.blocks.iter().flat_map(|b| &b.insts).any(|i| {
            matches!(i, crate::ir::Inst::Const { c, .. } if c.tokens.to_string().contains("debug_assertions"))
        });
        let n = f
            .blocks
            .iter()
            .filter(|b| matches!(b.term, crate::ir::Term::Branch(..)))
            .count();
        (cfg, n)
    };
    let indexed = "fn f(x: &[f64], i: usize) -> f64 { debug_assert!(x[i] > 0.0); x[0] }";
    assert_eq!(branches(indexed), (true, 1));
    let written = "fn f(x: f64) -> f64 { let mut s = x; debug_assert!({ s *= 2.0; s > 0.0 }); s }";
    assert_eq!(branches(written), (true, 1));
    let pure = "fn f(x: f64) -> f64 { debug_assert!(x.abs() + 1.0 > 0.0); x }";
    assert_eq!(branches(pure), (false, 0));
    let plain = "fn f(x: &[f64], i: usize) -> f64 { assert!(x[i] > 0.0); x[0] }";
    assert_eq!(branches(plain), (false, 0));
}

#[test]
fn a_function_that_never_returns_is_an_error_not_a_panic() {
    for src in [
        "fn spin(x: f64) -> f64 { loop {} }",
        "fn spin(x: f64) -> f64 { let mut s = x; loop { s *= 2.0; } }",
        "fn spin(x: f64, k: i64) -> f64 { match k { _ => loop {} } }",
    ] {
        let r = std::panic::catch_unwind(|| lower_str(src, "").map(|_| ()));
        let e = r.expect("no panic").expect_err("an error");
        assert!(e.to_string().contains("never returns"), "{src}: {e}");
    }
}

#[test]
fn messages_say_what_to_write_for_fields_and_constants() {
    // (a hunter: the hint for a constant suggested `let c: f64 = K;` for an integer `K`, and a
    // copied array field was "not indexable" without a word on why)
    // (`K as f64`, once refused with that hint, is now a constant of the cast's type)
    rejects(&[
        (
            "fn f(x: &[f64]) -> f64 { let k = K; x[0] * k }",
            "`let k: usize = K;` for an integer",
        ),
        (
            "fn f(p: &P, t: f64) -> f64 { let b = p.b; b[0] * t }",
            "read through a reference, `let b = &p.b;`",
        ),
        (
            "fn f(t: (f64, f64, f64)) -> f64 { let (a, ..) = t; a * t.2 }",
            "`..` in a tuple pattern is not supported",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let (s, p) = x.iter().fold((0.0, 1.0), |(s, p), v| (s + v * p, p * v)); s * p }",
            "a `fold` with a tuple accumulator is not supported",
        ),
    ]);
}

/// A branch whose arms have no reverse work and pass no adjoint (a passive `if`, a check)
/// records no tag (`TagMode::Any`): the reverse sweep takes the first edge. An arm with active
/// work, or a join whose parameter carries an adjoint, still records its edge.
#[test]
fn passive_branches_record_no_tag() {
    use crate::adjoint::TagMode;
    let x = [0.7, -0.4, 1.3, 0.2, 0.9];
    let any = [
        // a diamond: both arms passive (`k` is an integer)
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; let mut k = 0usize; for i in 0..x.len() { if x[i] > 0.5 { k += 1; } else { k += 2; } s = s * x[i] + 1.0; } s + k as f64 }",
        // a triangle: an `if` without `else`
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; let mut k = 0usize; for i in 0..x.len() { if x[i] > 0.5 { k += 1; } s = s * x[i].sin() + k as f64; } s }",
        // a check that may panic, then the loop's work
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { debug_assert!(x[i] < 10.0, \"too large\"); s = s * x[i] + 1.0; } s }",
    ];
    for src in any {
        let (p, tags) = checked_tags(src, &x);
        assert!(p.tag.contains(&TagMode::Any), "{src}");
        assert_eq!(tags, 0, "{src}");
    }
    let recorded = [
        // an arm with active work
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { if x[i] > 0.5 { s = s * 2.0; } s = s * x[i] + 1.0; } s }",
        // a join whose parameter has an adjoint (`t` is one of two values)
        "fn f(x: &[f64]) -> f64 { let mut s = 1.0; for i in 0..x.len() { let t = if x[i] > 0.5 { x[i] } else { 0.5 }; s = s * t + 1.0; } s }",
    ];
    for src in recorded {
        let (_, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.tag.contains(&TagMode::Any), "{src}");
        assert!(p.tag.contains(&TagMode::Stack), "{src}");
        grad_check(src, &x);
    }
}

/// A function whose sweeps keep nothing (no loop that records, no calls: a branch's choice is a
/// local) takes no stack cursors, and its `grad` no thread-local workspace; one whose loop
/// records takes both (a reviewer: the runtime test could not tell).
#[test]
fn functions_that_keep_nothing_take_no_workspace() {
    let expand = |src: &str| {
        let item: syn::ItemFn = syn::parse_str(src).expect("a function");
        crate::try_expand(quote::quote!(), &item, &quote::quote!(::adjoint_ssa))
            .expect("expands")
            .to_string()
    };
    let nothing = expand(
        "fn f(r: f64, x: f64) -> f64 { let mut p = x * r; if r != 0.0 { p = x * r.cos(); } p }",
    );
    assert!(!nothing.contains("cursor"), "{nothing}");
    assert!(!nothing.contains("with_workspace"), "{nothing}");
    assert!(nothing.contains("Workspace :: new ()"), "{nothing}");
    let records =
        expand("fn f(x: f64, p: usize) -> f64 { let mut r = 1.0; for _ in 0..p { r *= x; } r }");
    assert!(records.contains("cursor"), "{records}");
    assert!(records.contains("with_workspace"), "{records}");
}

#[test]
fn refusals_say_what_to_write_instead() {
    // (a hunter: these said only what was wrong, or contradicted themselves)
    rejects(&[
        (
            "fn f<'a>(x: &'a [f64]) -> f64 { x[0] }",
            "lifetime parameters are not supported: leave them out",
        ),
        (
            "fn f(x: f64, k: i64) -> f64 { x * (k as i128) as f64 }",
            "integer types of up to 64 bits",
        ),
        (
            "fn f(x: f64, n: usize) -> f64 { x * n.pow(2) as f64 }",
            "`n * n` for `n.pow(2)`",
        ),
        (
            "fn f(x: f64, out: &mut [f64; 2]) { *out = [x, x]; }",
            "`out[0] = a; out[1] = b;`",
        ),
        (
            "fn f(x: &[f64]) -> f64 { let mut o = [0.0; 2]; g(x, &mut o); o[0] }",
            "a local array passed as `&mut`",
        ),
    ]);
}

/// The attribute's options: a second `wrt(…)` replaced the first without a word, a name listed
/// twice and a second rule for one function were accepted (a hunter); each is an error now.
#[test]
fn repeated_options_are_errors() {
    let src = "fn f(x: f64, y: f64) -> f64 { x * y }";
    for (attr, msg) in [
        ("wrt(x), wrt(y)", "`wrt` is given twice"),
        ("wrt(x, x)", "`x` is listed twice in `wrt`"),
        ("wrt()", "`wrt()` names no parameter"),
        ("wrt(x, 2)", "expected identifier"),
        ("rule(g = a), rule(g = b)", "a second rule for `g`"),
    ] {
        match lower_str(src, attr) {
            Ok(_) => panic!("accepted: {attr}"),
            Err(e) => assert!(e.to_string().contains(msg), "{attr}: {e}"),
        }
    }
    assert!(lower_str(src, "wrt(x, y)").is_ok());
}

/// Raw identifiers as parameters and fields: generated names (`d_r#type`, `p__r#type`) made
/// `Ident::new` panic inside the macro (a hunter); they are built without the `r#` now.
#[test]
fn raw_identifiers_lower_and_generate() {
    let src = "fn f(x: f64, r#type: f64, p: &P) -> f64 { x * r#type + p.r#loop }";
    let item: syn::ItemFn = syn::parse_str(src).unwrap();
    let out = crate::try_expand(
        proc_macro2::TokenStream::new(),
        &item,
        &quote::quote!(::adjoint::ssa),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = out.to_string();
    assert!(
        text.contains("d_type") && text.contains("p__loop"),
        "{text}"
    );
}

/// A call through a module path is refused with the `use` that makes it a plain name (a
/// hunter: the message said only "a plain name").
#[test]
fn module_path_calls_say_which_use_to_write() {
    rejects(&[
        (
            "fn f(x: f64) -> f64 { inner::g(x) }",
            "(`use inner::g;`) and call it as `g(…)`",
        ),
        (
            "fn f(x: f64) -> f64 { crate::a::b::g(x) * x }",
            "`use crate::a::b::g;`",
        ),
    ]);
}

/// A single name with generic arguments gets no `use` suggestion (there is nothing to import).
#[test]
fn turbofish_calls_are_refused_without_a_use_suggestion() {
    match lower_str("fn f(x: f64) -> f64 { g::<f64>(x) }", "") {
        Ok(_) => panic!("accepted"),
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("a plain name") && !m.contains("`use"), "{m}");
        }
    }
}

/// Every integer type's `MIN` and `MAX` (a hunter: `u8::MAX` was "unsupported constant", and
/// `i8::MIN` entered the IR as 0, so the interpreter ran `i8::MIN..-125` zero times); the
/// interpreted value against the same loops in Rust, the gradient against forward mode.
#[test]
fn integer_type_constants() {
    let src = "fn f(x: &[f64]) -> f64 {
        let mut s = 0.0;
        for k in 250u8..=u8::MAX { s += x[(k - 250) as usize] * (k as f64); }
        for k in i8::MIN..-125 { s += x[(k as i32 + 128) as usize] * (k as f64); }
        for k in (i16::MAX - 1)..=i16::MAX { s += x[(k - 32766) as usize] * 0.5; }
        if u16::MAX == 65535 && i16::MIN == -32768 && u32::MIN == 0 { s += x[0]; }
        if core::primitive::u8::MAX == 255 && std::primitive::i8::MIN == -128 {
            s += x[1] * std::primitive::f64::EPSILON;
        }
        s
    }";
    let x = [0.5, -1.0, 2.0, 0.25, 3.0, 1.5];
    let mut want = 0.0;
    for k in 250u8..=u8::MAX {
        want += x[(k - 250) as usize] * (k as f64);
    }
    for k in i8::MIN..-125 {
        want += x[(k as i32 + 128) as usize] * (k as f64);
    }
    for k in (i16::MAX - 1)..=i16::MAX {
        want += x[(k - 32766) as usize] * 0.5;
    }
    want += x[0];
    want += x[1] * f64::EPSILON;
    let (f, _) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    let got = interp::primal::<f64>(&f, &mut [ArgVal::Floats(x.to_vec())]).unwrap();
    assert_eq!(got, want);
    grad_check(src, &x);
    rejects(&[(
        "fn f(x: &[f64]) -> f64 { x[0] * (u8::BITS as f64) }",
        "unsupported constant `u8::BITS`: of the integer types' constants `MIN` and `MAX`",
    )]);
}
