//! Every rule of the table against Ridders finite differences: first partials against
//! differences of the value, second partials against differences of the first partials, at ≥ 20
//! points per primitive spread across its domain and close to its edges.

use adjoint_core::check::numeric_derivative;
use adjoint_core::rules::{binary, unary, Op1, Op2};

const RTOL1: f64 = 1e-6;
const RTOL2: f64 = 1e-4;

/// Relative error with a floor on the scale, so that a derivative crossing zero is judged
/// against the size of the function's derivatives nearby rather than against 0.
fn rel(a: f64, n: f64, scale: f64) -> f64 {
    (a - n).abs() / n.abs().max(scale)
}

/// Points for a unary op: log-spaced on half-lines, uniform and edge-hugging on intervals.
fn points(op: Op1) -> Vec<f64> {
    let (lo, hi) = op.domain();
    let cap = match op {
        Op1::Exp | Op1::Exp2 | Op1::ExpM1 => 20.0,
        Op1::Sinh | Op1::Cosh | Op1::Asinh => 15.0,
        Op1::Erf => 4.0,
        Op1::Tanh => 8.0,
        _ => 10.0,
    };
    let mut pts = Vec::new();
    if lo.is_finite() && hi.is_finite() {
        let w = hi - lo;
        for k in 1..20 {
            pts.push(lo + w * k as f64 / 20.0);
        }
        for e in [1e-3, 1e-4] {
            pts.push(lo + e * w);
            pts.push(hi - e * w);
        }
    } else if lo.is_finite() {
        // Half line (lo, ∞): log-spaced distances from the edge.
        let top = if matches!(op, Op1::Polygamma(_) | Op1::Lgamma) {
            60.0
        } else {
            1e3
        };
        for k in 0..24 {
            let t = k as f64 / 23.0;
            pts.push(lo + 1e-3 * (top / 1e-3f64).powf(t));
        }
        let symmetric = matches!(op, Op1::Recip | Op1::Cbrt | Op1::Abs | Op1::Powi(_));
        if symmetric {
            let neg: Vec<f64> = pts.iter().map(|p| -p).collect();
            pts.extend(neg);
        }
        if op == Op1::Lgamma || op == Op1::Polygamma(0) {
            pts.extend([-0.5, -1.3, -2.7, -3.5]);
        }
    } else {
        for k in 0..25 {
            pts.push(-cap + 2.0 * cap * k as f64 / 24.0 + 0.013);
        }
    }
    pts
}

/// The largest safe starting step at `x`: a tenth of the distance to the nearest edge or pole.
fn step(op: Op1, x: f64) -> f64 {
    let (lo, hi) = op.domain();
    let mut dist = (x - lo).abs().min((hi - x).abs());
    if matches!(op, Op1::Recip | Op1::Cbrt | Op1::Abs | Op1::Powi(_)) {
        dist = dist.min(x.abs());
    }
    if matches!(op, Op1::Lgamma | Op1::Polygamma(_)) && x < 0.0 {
        dist = dist.min(x - x.floor()).min(x.ceil() - x);
    }
    (0.1 * dist).min(0.05 * x.abs().max(1.0))
}

#[test]
fn unary_first_and_second_derivatives_match_finite_differences() {
    let mut failures = Vec::new();
    let mut count = 0;
    for &op in Op1::ALL {
        let pts = points(op);
        assert!(pts.len() >= 20, "{op:?}: only {} points", pts.len());
        for &x in &pts {
            let r = unary(op, x);
            assert!(r.value.is_finite(), "{op:?} not finite at {x}");
            let h = step(op, x);
            let (n1, _) = numeric_derivative(|t| unary(op, t).value, x, h);
            let (n2, _) = numeric_derivative(|t| unary(op, t).d, x, h);
            let scale1 = 1e-8 * r.value.abs().max(1.0);
            let scale2 = 1e-6 * r.d.abs().max(1.0);
            let e1 = rel(r.d, n1, scale1);
            let e2 = rel(r.dd, n2, scale2);
            count += 1;
            if !ok(e1, RTOL1) || !ok(e2, RTOL2) {
                failures.push(format!(
                    "{op:?} at x={x:e}: d={:e} fd={n1:e} (rel {e1:.1e}); dd={:e} fd={n2:e} (rel {e2:.1e})",
                    r.d, r.dd
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{count} points, failures:\n{}",
        failures.join("\n")
    );
}

fn binary_points(op: Op2) -> Vec<(f64, f64)> {
    let xs: Vec<f64> = match op {
        Op2::Powf => vec![1e-3, 0.01, 0.3, 0.9, 1.0, 1.7, 3.0, 12.0],
        _ => vec![-7.5, -2.0, -0.6, -1e-3, 2e-3, 0.4, 1.1, 5.3],
    };
    let ys: Vec<f64> = match op {
        Op2::Powf => vec![-2.5, -1.0, 0.5, 1.5, 3.2],
        _ => vec![-3.3, -0.7, 0.01, 0.9, 4.1],
    };
    let mut pts = Vec::new();
    for &x in &xs {
        for &y in &ys {
            pts.push((x, y));
        }
    }
    pts
}

#[test]
fn binary_partials_match_finite_differences() {
    let mut failures = Vec::new();
    for &op in Op2::ALL {
        let pts = binary_points(op);
        assert!(pts.len() >= 20);
        for &(x, y) in &pts {
            let r = binary(op, x, y);
            let mut h = 0.05 * x.abs().min(y.abs()).max(1e-3);
            if op == Op2::Powf {
                h = h.min(0.1 * x);
            }
            if matches!(op, Op2::Min | Op2::Max) {
                h = h.min(0.1 * (x - y).abs());
            }
            if op == Op2::Rem {
                // Within the piece: `r` moves by h in x and by −q·h in y, and jumps at 0
                // and at ±y.
                let room = r.value.abs().min(y.abs() - r.value.abs());
                if room < 1e-3 * y.abs() {
                    continue; // at a jump (x a multiple of y, to rounding)
                }
                h = h.min(0.1 * room / (1.0 + r.dy.abs()));
            }
            let fx = |t: f64| binary(op, t, y);
            let fy = |t: f64| binary(op, x, t);
            let checks = [
                ("dx", r.dx, numeric_derivative(|t| fx(t).value, x, h).0, 1),
                ("dy", r.dy, numeric_derivative(|t| fy(t).value, y, h).0, 1),
                ("dxx", r.dxx, numeric_derivative(|t| fx(t).dx, x, h).0, 2),
                ("dxy", r.dxy, numeric_derivative(|t| fy(t).dx, y, h).0, 2),
                ("dyx", r.dxy, numeric_derivative(|t| fx(t).dy, x, h).0, 2),
                ("dyy", r.dyy, numeric_derivative(|t| fy(t).dy, y, h).0, 2),
            ];
            let first_scale = r.dx.abs().max(r.dy.abs()).max(1.0);
            for (name, a, n, order) in checks {
                let (tol, scale) = if order == 1 {
                    (RTOL1, 1e-8 * r.value.abs().max(1.0))
                } else {
                    (RTOL2, 1e-6 * first_scale)
                };
                let e = rel(a, n, scale);
                if !ok(e, tol) {
                    failures.push(format!(
                        "{op:?} {name} at ({x}, {y}): rule {a:e} fd {n:e} rel {e:.1e}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
}

#[test]
fn non_differentiable_points_follow_the_documented_choices() {
    assert_eq!(unary(Op1::Abs, 0.0).d, 0.0);
    assert_eq!(unary(Op1::Abs, -2.0).d, -1.0);
    let m = binary(Op2::Max, 1.5, 1.5);
    assert_eq!((m.dx, m.dy), (0.5, 0.5));
    let m = binary(Op2::Min, 1.5, 1.5);
    assert_eq!((m.dx, m.dy), (0.5, 0.5));
    let m = binary(Op2::Max, f64::NAN, 2.0);
    assert_eq!((m.value, m.dx, m.dy), (2.0, 0.0, 1.0));
    assert_eq!(unary(Op1::Sqrt, 0.0).d, f64::INFINITY);
    assert_eq!(unary(Op1::Cbrt, 0.0).d, f64::INFINITY);
    let h = binary(Op2::Hypot, 0.0, 0.0);
    assert_eq!((h.value, h.dx, h.dy), (0.0, 0.0, 0.0));
    let a = binary(Op2::Atan2, 0.0, 0.0);
    assert_eq!((a.dx, a.dy), (0.0, 0.0));
    let p = binary(Op2::Powf, 0.0, 2.0);
    assert_eq!((p.value, p.dx, p.dy, p.dyy), (0.0, 0.0, 0.0, 0.0));
    // x^y at x = 0, y = 0, 1, 2, 3 as powi gives it (a reviewer helper found 0·∞ NaNs at
    // y = 0 and y = 1: a Hessian of x.powf(1.0) at 0 was NaN)
    for (y, d, dd) in [
        (0.0, 0.0, 0.0),
        (1.0, 1.0, 0.0),
        (2.0, 0.0, 2.0),
        (3.0, 0.0, 0.0),
    ] {
        let p = binary(Op2::Powf, 0.0, y);
        let q = unary(Op1::Powi(y as i32), 0.0);
        assert_eq!((p.value, p.dx, p.dxx), (q.value, d, dd), "0^{y}");
        assert_eq!((q.d, q.dd), (d, dd), "powi 0^{y}");
        assert_eq!((p.dy, p.dxy, p.dyy), (0.0, 0.0, 0.0), "0^{y}");
    }
    let q = unary(Op1::Powi(1), 0.0);
    assert_eq!((q.d, q.dd), (1.0, 0.0));
    let q = unary(Op1::Powi(0), 0.0);
    assert_eq!((q.value, q.d), (1.0, 0.0));
    assert!(unary(Op1::Ln, -1.0).d.is_finite()); // 1/x is finite; the value is NaN
    assert!(unary(Op1::Ln, -1.0).value.is_nan());
}

/// The module docs: outside the domain the value is NaN and the partial is the derivative's
/// formula there: finite for the logarithms and `atanh`, NaN where the formula is undefined too.
#[test]
fn outside_the_domain_the_value_is_nan_and_the_partial_the_formula() {
    let ln2 = std::f64::consts::LN_2;
    let ln10 = std::f64::consts::LN_10;
    for (op, x, d) in [
        (Op1::Ln, -2.0, -0.5),
        (Op1::Log2, -2.0, -0.5 / ln2),
        (Op1::Log10, -2.0, -0.5 / ln10),
        (Op1::Ln1p, -3.0, -0.5),
        (Op1::Atanh, 2.0, -1.0 / 3.0),
    ] {
        let r = unary(op, x);
        assert!(r.value.is_nan(), "{op:?}({x}) = {}", r.value);
        assert!(
            (r.d - d).abs() <= 1e-15 * d.abs(),
            "{op:?}'({x}) = {}, not {d}",
            r.d
        );
    }
    for (op, x) in [
        (Op1::Asin, 2.0),
        (Op1::Acos, -2.0),
        (Op1::Sqrt, -1.0),
        (Op1::Acosh, 0.5),
        (Op1::Acosh, -2.0),
    ] {
        let r = unary(op, x);
        assert!(r.value.is_nan() && r.d.is_nan(), "{op:?}({x}): {r:?}");
    }
}

/// `e ≤ tol`, with NaN failing.
fn ok(e: f64, tol: f64) -> bool {
    e <= tol
}

/// The table's values are the plain program's values, bit for bit: an engine's primal must be
/// the `f64` program's result (a quotient computed as `x · (1/y)` differed in the last bit).
#[test]
fn values_equal_the_plain_f64_operations_bit_for_bit() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 20.0 - 10.0
    };
    type Plain = fn(f64, f64) -> f64;
    let plain: [(Op2, Plain); 8] = [
        (Op2::Add, |x, y| x + y),
        (Op2::Sub, |x, y| x - y),
        (Op2::Mul, |x, y| x * y),
        (Op2::Div, |x, y| x / y),
        (Op2::Atan2, f64::atan2),
        (Op2::Hypot, f64::hypot),
        (Op2::Max, f64::max),
        (Op2::Min, f64::min),
    ];
    for _ in 0..10_000 {
        let (x, y) = (next(), next());
        for (op, f) in plain {
            let v = binary(op, x, y).value;
            assert_eq!(
                v.to_bits(),
                f(x, y).to_bits(),
                "{op:?}({x}, {y}): {v} vs {}",
                f(x, y)
            );
        }
    }
    let q = adjoint_core::forward::Dual::variable(0.1) / 0.3;
    assert_eq!(q.re.to_bits(), (0.1f64 / 0.3).to_bits());
}

#[test]
fn eval_is_the_rules_value_bit_for_bit() {
    // `Op1::eval` computes `sin` and `cos` alone (not with `sin_cos`): the same numbers as the
    // rule, and as libm's own functions
    for k in -2000..2000 {
        let x = k as f64 * 0.0137 + 1e-3;
        for op in [Op1::Sin, Op1::Cos, Op1::Exp, Op1::Tanh, Op1::Ln] {
            let (e, r) = (op.eval(x), unary(op, x).value);
            assert!(
                e.to_bits() == r.to_bits() || (e.is_nan() && r.is_nan()),
                "{op:?}({x})"
            );
        }
        assert_eq!(Op1::Sin.eval(x).to_bits(), x.sin().to_bits());
        assert_eq!(Op1::Cos.eval(x).to_bits(), x.cos().to_bits());
    }
}

#[test]
fn extreme_magnitudes_and_signed_zero() {
    // Found by a reviewer helper (closed forms as the reference).
    // powi: the value is f64::powi's bit for bit, and n < 0 does not overflow early.
    for n in [-7, -3, -2, -1, 2, 3, 4, 5, 7, 12] {
        for i in 0..200 {
            let x = 0.01 + i as f64 * 0.0373;
            let r = unary(Op1::Powi(n), x);
            assert_eq!(r.value.to_bits(), x.powi(n).to_bits(), "{x}^{n}");
            let nf = f64::from(n);
            assert!(
                (r.d - nf * x.powi(n - 1)).abs() <= 1e-14 * r.d.abs(),
                "{x}^{n}: d"
            );
        }
    }
    assert_eq!(unary(Op1::Powi(-1), 1e200).value, 1e-200);
    assert_eq!(unary(Op1::Powi(-1), 1e-160).value, 1e160);
    let r = unary(Op1::Powi(-3), 0.0);
    assert_eq!(
        (r.value, r.d, r.dd),
        (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY)
    );
    let r = unary(Op1::Powi(i32::MIN), 1.0);
    assert_eq!((r.value, r.d), (1.0, f64::from(i32::MIN)));
    // sqrt at −0: the +0 limits
    let (p, m) = (unary(Op1::Sqrt, 0.0), unary(Op1::Sqrt, -0.0));
    assert_eq!((m.d, m.dd), (p.d, p.dd));
    assert_eq!(m.d, f64::INFINITY);
    // hypot and atan2 far from 1: finite where the closed form is, no NaN
    let s = std::f64::consts::FRAC_1_SQRT_2;
    for t in [1e-300, 1e-200, 1e-100, 1e100, 1e200, 1e300] {
        let h = binary(Op2::Hypot, t, t);
        assert!(
            (h.dx - s).abs() < 1e-15 && (h.dy - s).abs() < 1e-15,
            "hypot({t}, {t})"
        );
        let want = 0.5 / (std::f64::consts::SQRT_2 * t); // y²/h³ at x = y = t
        for (got, w) in [(h.dxx, want), (h.dxy, -want), (h.dyy, want)] {
            assert!(
                (got - w).abs() <= 1e-14 * w.abs() || (w.is_infinite() && got == w),
                "hypot({t}, {t}): {got} vs {w}"
            );
        }
        let a = binary(Op2::Atan2, t, t);
        let d = 0.5 / t; // y / r² at x = y = t
        assert!(
            (a.dx - d).abs() <= 1e-14 * d && (a.dy + d).abs() <= 1e-14 * d,
            "atan2({t})"
        );
        assert_eq!(a.dxy, 0.0, "atan2({t}, {t}): (x² − y²)/r⁴");
        assert!(!a.dxx.is_nan() && !a.dyy.is_nan(), "atan2({t}, {t})");
    }
    let h = binary(Op2::Hypot, 5e-324, 0.0);
    assert_eq!((h.dx, h.dy), (1.0, 0.0));
    // An infinite argument (a hunter: ∞/∞ made NaN partials): atan2's partials are multiples
    // of 1/r², 0 there; hypot's first partials are the unit vector's limit (±1 for the
    // infinite argument, 0 for a finite one), its second ones 0. Finite arguments whose hypot
    // overflows: the unit vector of the scaled arguments.
    let inf = f64::INFINITY;
    for (x, y) in [
        (1.0, inf),
        (inf, 1.0),
        (-3.0, -inf),
        (-inf, 0.0),
        (inf, inf),
    ] {
        let a = binary(Op2::Atan2, x, y);
        assert_eq!(a.value, x.atan2(y));
        assert_eq!(
            [a.dx, a.dy, a.dxx, a.dxy, a.dyy],
            [0.0; 5],
            "atan2({x}, {y})"
        );
    }
    for (x, y, ux, uy) in [
        (inf, 1.0, 1.0, 0.0),
        (-inf, 2.0, -1.0, 0.0),
        (3.0, -inf, 0.0, -1.0),
        (1.5e308, -1.5e308, s, -s),
    ] {
        let h = binary(Op2::Hypot, x, y);
        assert_eq!(h.value, inf);
        assert!(
            (h.dx - ux).abs() < 1e-15 && (h.dy - uy).abs() < 1e-15,
            "hypot({x}, {y}): {} {}",
            h.dx,
            h.dy
        );
        assert_eq!([h.dxx, h.dxy, h.dyy], [0.0; 3], "hypot({x}, {y})");
    }
    // and through forward mode: d/dx of atan2(x, ∞) + x is 1
    let g = adjoint_core::forward::gradient(|v| v[0].atan2(v[1]) + v[0], &[1.0, inf]);
    assert_eq!(g, vec![1.0, 0.0]);
    // asinh and acosh far out: d = 1/|x| (it was 0 beyond 1.3e154, where x² overflows)
    for x in [1e155, 1e200, 1e300] {
        for (op, at) in [(Op1::Asinh, x), (Op1::Asinh, -x), (Op1::Acosh, x)] {
            let d = unary(op, at).d;
            assert!((d - 1.0 / x).abs() <= 1e-15 / x, "{op:?}({at}): {d}");
        }
    }
    // log10 far out: 1/(x ln 10) (it was 0 beyond 7.8e307, where x · ln 10 overflows)
    for x in [1e307, 8e307, f64::MAX] {
        let d = unary(Op1::Log10, x).d;
        let want = 1.0 / x / std::f64::consts::LN_10;
        assert!(
            d > 0.0 && (d - want).abs() <= 1e-15 * want,
            "log10'({x}) = {d}"
        );
    }
}

#[test]
fn powf_of_a_negative_base_with_a_constant_exponent() {
    // x.powf(2.0) at −2, as a user writes it: forward mode gave NaN (the y-partial, ln of a
    // negative number, times the constant's zero tangent); powi is the reference.
    use adjoint_core::forward::{derivative, hessian};
    let d = derivative(|x| x.powf(2.0), -2.0);
    assert_eq!(d, derivative(|x| x.powi(2), -2.0));
    assert_eq!(d, -4.0);
    let h = hessian(|x| x[0].powf(3.0), &[-2.0]);
    assert_eq!(h, vec![vec![-12.0]]);
    let r = binary(Op2::Powf, -2.0, 3.0);
    assert_eq!(
        (r.value, r.dx, r.dy, r.dxx, r.dxy, r.dyy),
        (-8.0, 12.0, 0.0, -12.0, 0.0, 0.0)
    );
}

#[test]
fn powf_mixed_second_derivative_is_the_tables_in_either_order() {
    // Where x ≤ 0 the table gives x^y no derivative in y (dxy = 0). A second-order engine
    // differentiates the first partial, so `dx` must not move with y there either: nested
    // duals seeded x-outer/y-inner and y-outer/x-inner gave 4 and 0 at (−2, 3), 1 and 0 at
    // (0, 1). The reference is the rule table's `dxy`; x > 0 keeps the analytic
    // x^(y−1)(1 + y ln x).
    use adjoint_core::forward::{hessian, Dual};
    let d = |re: f64, eps: f64| Dual { re, eps };
    let mixed = |x: f64, y: f64| {
        let xo = Dual {
            re: d(x, 0.0),
            eps: d(1.0, 0.0),
        };
        let yi = Dual {
            re: d(y, 1.0),
            eps: d(0.0, 0.0),
        };
        let xi = Dual {
            re: d(x, 1.0),
            eps: d(0.0, 0.0),
        };
        let yo = Dual {
            re: d(y, 0.0),
            eps: d(1.0, 0.0),
        };
        (xo.powf(yi).eps.eps, xi.powf(yo).eps.eps)
    };
    for (x, y) in [
        (-2.0, 3.0),
        (-1.5, 2.0),
        (0.0, 1.0),
        (0.0, 2.0),
        (0.0, 3.5),
        (2.0, 3.0),
        (0.7, 1.3),
        // x^y underflows (to 0, or to a subnormal) where x^(y−1) does not: ∂/∂y written as
        // `x^y · ln x` lost the term x^y · (1/x) = x^(y−1) in the y-outer order (0.1 % off)
        (1e-200, 2.0),
        (1e-170, 2.0),
        (1e-100, 4.0),
    ] {
        let r = binary(Op2::Powf, x, y);
        let (a, b) = mixed(x, y);
        // relative (a bound of 1e-15 · max(|a|, 1) passed the 0.1 % error at 1e-198)
        assert!(
            (a - b).abs() <= 1e-15 * a.abs().max(f64::MIN_POSITIVE),
            "({x}, {y}): orders differ: {a} {b}"
        );
        assert!(
            (a - r.dxy).abs() <= 1e-14 * r.dxy.abs().max(f64::MIN_POSITIVE),
            "({x}, {y}): {a} vs {}",
            r.dxy
        );
        if x > 0.0 {
            let want = x.powf(y - 1.0) * (1.0 + y * x.ln());
            assert!(
                (a - want).abs() <= 1e-14 * want.abs(),
                "({x}, {y}): {a} vs {want}"
            );
            let h = hessian(|v| v[0].powf(v[1]), &[x, y]);
            assert!(
                (h[0][1] - want).abs() <= 1e-14 * want.abs(),
                "({x}, {y}): Hessian's ∂²/∂x∂y {} vs {want}",
                h[0][1]
            );
        } else {
            assert_eq!(a, 0.0, "({x}, {y})");
        }
    }
}

#[test]
fn remainder_on_duals_is_fmod() {
    // `%` keeps f64's value (IEEE fmod) and takes the integer it removed as the derivative.
    use adjoint_core::forward::gradient;
    for (x, y, q) in [
        (1.0, 0.1, 9.0),
        (-1.0, 0.1, -9.0),
        (5.5, -2.0, -2.0),
        (-0.0, 1.0, 0.0),
    ] {
        let v = adjoint_core::forward::Dual { re: x, eps: 0.0 }
            % adjoint_core::forward::Dual { re: y, eps: 0.0 };
        assert_eq!(v.re.to_bits(), (x % y).to_bits(), "{x} % {y}");
        let g = gradient(|v| v[0] % v[1], &[x, y]);
        assert_eq!(g, vec![1.0, if q == 0.0 { 0.0 } else { -q }], "{x} % {y}");
    }
}

#[test]
fn mul_add_on_duals_rounds_once() {
    // The value is f64's fused `mul_add` (one rounding) and the derivative (a, x, 1), also
    // where the unfused form rounds to another value: x·x − fl(x·x) is the product's rounding
    // error (2⁻⁶⁰ here), which the unfused form makes 0.
    use adjoint_core::forward::{gradient, hessian, Dual};
    let x = 1.0 + 2f64.powi(-30);
    let y = x * x;
    for (p, a, b) in [
        (x, x, -y),
        (-1.7, 0.2, 1.0),
        (3.0, 0.5, 0.25),
        (0.1, 0.2, -0.02),
    ] {
        let d =
            Dual { re: p, eps: 1.0 }.mul_add(Dual { re: a, eps: 0.0 }, Dual { re: b, eps: 0.0 });
        assert_eq!(d.re.to_bits(), p.mul_add(a, b).to_bits(), "{p}·{a} + {b}");
        let g = gradient(|v| v[0].mul_add(v[1], v[2]), &[p, a, b]);
        assert_eq!(g, vec![a, p, 1.0], "{p}·{a} + {b}");
        let h = hessian(|v| v[0].mul_add(v[1], v[2]), &[p, a, b]);
        assert_eq!(
            h,
            vec![vec![0.0, 1.0, 0.0], vec![1.0, 0.0, 0.0], vec![0.0; 3]]
        );
    }
    assert_eq!(x.mul_add(x, -y), 2f64.powi(-60));
}

#[test]
fn mul_add_on_duals_where_the_unfused_product_overflows() {
    // x·a overflows but x·a + b does not: the fused value is finite, and the unfused
    // derivative (a, x, 1) is what the result carries (`w − e` would be ∞ − ∞ = NaN).
    use adjoint_core::forward::gradient;
    let (x, a, b): (f64, f64, f64) = (1.5e154, 1.5e154, -1e308);
    let v = x.mul_add(a, b);
    assert!(v.is_finite());
    let d = adjoint_core::forward::Dual { re: x, eps: 1.0 }.mul_add(
        adjoint_core::forward::Dual { re: a, eps: 0.0 },
        adjoint_core::forward::Dual { re: b, eps: 0.0 },
    );
    assert_eq!(d.re.to_bits(), v.to_bits());
    assert_eq!(
        gradient(|v| v[0].mul_add(v[1], v[2]), &[x, a, b]),
        vec![a, x, 1.0]
    );
}

/// asin′, acos′ and atanh′ near ±1: `1 − x²` there is `(1 − x)(1 + x)`. At x = 1 − 2⁻²⁷ its exact
/// value is 2⁻²⁶ − 2⁻⁵⁴ (representable); `1 − x·x` rounded `x²` and was off by 2⁻⁵⁴, a relative
/// error of 3.7e-9 in the derivative.
#[test]
fn inverse_trig_derivatives_near_one_are_accurate() {
    let delta = 2f64.powi(-27);
    let one_minus_x2 = 2f64.powi(-26) - 2f64.powi(-54); // exact: 1 − (1 − δ)²
    for x in [1.0 - delta, delta - 1.0] {
        let cases = [
            (Op1::Asin, 1.0 / one_minus_x2.sqrt()),
            (Op1::Acos, -1.0 / one_minus_x2.sqrt()),
            (Op1::Atanh, 1.0 / one_minus_x2),
        ];
        for (op, want) in cases {
            let got = unary(op, x).d;
            let err = ((got - want) / want).abs();
            assert!(
                err < 4.0 * f64::EPSILON,
                "{op:?}′({x}) = {got}, want {want} (relative error {err:e})"
            );
        }
    }
}

/// `partial_unbounded` says which primitives have an infinite first partial where their value
/// is finite (a singularity, not an overflow: no tiny or huge arguments here): checked against
/// the table itself at every domain edge and a spread of points, both ways.
#[test]
fn partial_unbounded_matches_the_table() {
    let mut probes = vec![0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 7.5];
    for &op in Op1::ALL {
        let (lo, hi) = op.domain();
        probes.extend([lo, hi].into_iter().filter(|v| v.is_finite()));
    }
    for &op in Op1::ALL {
        let seen = probes.iter().any(|&x| {
            let r = unary(op, x);
            r.value.is_finite() && r.d.is_infinite()
        });
        assert_eq!(seen, op.partial_unbounded(), "{op:?}");
    }
    for &op in Op2::ALL {
        let seen = probes.iter().any(|&x| {
            probes.iter().any(|&y| {
                let r = binary(op, x, y);
                r.value.is_finite() && (r.dx.is_infinite() || r.dy.is_infinite())
            })
        });
        assert_eq!(seen, op.partial_unbounded(), "{op:?}");
    }
}

/// Second partials whose formula is `∞ · 0` where the true value is 0 (a hunter; the array
/// engine reads the table's second partials): `atan`, `asinh`, `acosh`, `erf` at ±∞, and `powf`'s
/// `∂²/∂x²` where `y (y − 1)` overflows and `x^(y−2)` underflows.
#[test]
fn second_partials_that_are_zero_where_the_formula_is_inf_times_zero() {
    let inf = f64::INFINITY;
    for (op, x) in [
        (Op1::Atan, inf),
        (Op1::Atan, -inf),
        (Op1::Asinh, inf),
        (Op1::Asinh, -inf),
        (Op1::Acosh, inf),
        (Op1::Erf, inf),
        (Op1::Erf, -inf),
    ] {
        let r = unary(op, x);
        assert!(
            r.value.is_finite() || op == Op1::Asinh || op == Op1::Acosh,
            "{op:?}"
        );
        assert_eq!((r.d, r.dd), (0.0, 0.0), "{op:?}({x})");
    }
    // (outside the domain the partials stay NaN: acosh at −∞)
    let r = unary(Op1::Acosh, -inf);
    assert!(r.d.is_nan() && r.dd.is_nan(), "{:?}", (r.d, r.dd));
    for (x, y) in [
        (0.9, 1e200),
        (0.5, 1e160),
        (0.0, 1e300),
        (2.0, -1e300),
        (3.0, -1e300),
    ] {
        let r = binary(Op2::Powf, x, y);
        assert_eq!(r.value, 0.0, "powf({x}, {y})");
        assert_eq!(r.dxx, 0.0, "powf({x}, {y})");
    }
    // and where the product is finite, the formula: 0.5^(1e3 − 2) · 1e3 · 999
    let r = binary(Op2::Powf, 0.5, 1e3);
    assert_eq!(r.dxx, 1e3 * 999.0 * 0.5f64.powf(998.0));
}
