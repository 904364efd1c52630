//! `f64`'s spellings inside closures (`%`, `+=`, `&`, `signum`, `copysign`, `mul_add`, `fract`,
//! `digamma`, `iter().sum()`, index arithmetic with `usize`, …): each against `f64`'s own method on the same
//! data, interpreted and compiled, and their gradients against central differences.

mod common;
use adjoint_array::{lit, Acc, Builder, Exp};
use common::uniform;

/// Edge values, then enough ordinary ones (both signs) for the compiled kernels (≥ 2048).
fn data() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -2.5,
        7.75,
        -7.75,
        1e-300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    v.extend(uniform(4096, 7, -9.0, 9.0));
    v
}

/// Same value, NaN matching NaN (and -0.0 told from 0.0).
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `exp` over `data()` as an array program (with the compiler on and off) against `plain`.
fn check_map(name: &str, exp: impl Fn(Exp) -> Exp + Copy, plain: impl Fn(f64) -> f64) {
    let x = data();
    for jit in [false, true] {
        let b = Builder::new();
        b.set_jit(jit);
        let a = b.input(&[x.len()]);
        let y = a.map(exp);
        let out = b.build(&[&y]).unwrap().run(&[&x]).unwrap();
        for (i, (&got, &xi)) in out[0].data().iter().zip(&x).enumerate() {
            let want = plain(xi);
            assert!(
                same(got, want),
                "{name}({xi:e}) [{i}, jit {jit}]: {got:e}, f64 gives {want:e}"
            );
        }
    }
}

#[test]
fn unary_spellings_match_f64() {
    check_map("signum", |v| v.signum(), f64::signum);
    check_map("copysign(-2)", |v| v.copysign(-2.0), |x| x.copysign(-2.0));
    check_map("2.copysign", |v| lit(2.0).copysign(v), |x| 2f64.copysign(x));
    check_map(
        "is_sign_negative",
        |v| v.is_sign_negative(),
        |x| f64::from(u8::from(x.is_sign_negative())),
    );
    check_map(
        "is_sign_positive",
        |v| v.is_sign_positive(),
        |x| f64::from(u8::from(x.is_sign_positive())),
    );
    check_map(
        "is_nan",
        |v| v.is_nan(),
        |x| f64::from(u8::from(x.is_nan())),
    );
    check_map(
        "is_finite",
        |v| v.is_finite(),
        |x| f64::from(u8::from(x.is_finite())),
    );
    check_map(
        "is_infinite",
        |v| v.is_infinite(),
        |x| f64::from(u8::from(x.is_infinite())),
    );
    check_map("fract", |v| v.fract(), f64::fract);
    check_map("to_degrees", |v| v.to_degrees(), f64::to_degrees);
    check_map("to_radians", |v| v.to_radians(), f64::to_radians);
    check_map("% 2.5", |v| v % 2.5, |x| x % 2.5);
    check_map("7 %", |v| 7.0 % v, |x| 7.0 % x);
    check_map(
        "&",
        |v| v.gt(-1.0) & v.lt(2.0),
        |x| f64::from(u8::from(x > -1.0 && x < 2.0)),
    );
    check_map(
        "|",
        |v| v.lt(-1.0) | v.gt(2.0),
        |x| f64::from(u8::from(!x.is_nan() && !(-1.0..=2.0).contains(&x))),
    );
    check_map(
        "+= -= *= /= %=",
        |v| {
            let mut a = v;
            a += 1.5;
            a *= v;
            a -= lit(0.25);
            a /= 3.0;
            a %= 4.0;
            a
        },
        |x| {
            let mut a = x;
            a += 1.5;
            a *= x;
            a -= 0.25;
            a /= 3.0;
            a %= 4.0;
            a
        },
    );
}

#[test]
fn mul_add_and_digamma_match_f64_to_rounding() {
    let x: Vec<f64> = uniform(3000, 3, 0.1, 9.0);
    let b = Builder::new();
    let a = b.input(&[x.len()]);
    let m = a.map(|v| v.mul_add(v, -2.0));
    let d = a.map(|v| v.digamma());
    let t = a.map(|v| v.polygamma(1));
    let out = b.build(&[&m, &d, &t]).unwrap().run(&[&x]).unwrap();
    for (i, &xi) in x.iter().enumerate() {
        let m_want = xi.mul_add(xi, -2.0);
        assert!((out[0].data()[i] - m_want).abs() <= 1e-15 * m_want.abs().max(1.0));
        // ψ(x) by a central difference of ln Γ (an independent route), and ψ′ of ψ
        let h = 1e-5;
        let lg = |z: f64| adjoint_core::rules::unary(adjoint_core::rules::Op1::Lgamma, z).value;
        let psi = (lg(xi + h) - lg(xi - h)) / (2.0 * h);
        assert!(
            (out[1].data()[i] - psi).abs() < 1e-7 * (1.0 + psi.abs()),
            "ψ({xi})"
        );
        let dpsi = (adjoint_core::special::polygamma(0, xi + h)
            - adjoint_core::special::polygamma(0, xi - h))
            / (2.0 * h);
        assert!(
            (out[2].data()[i] - dpsi).abs() < 1e-6 * (1.0 + dpsi.abs()),
            "ψ′({xi})"
        );
    }
}

/// The gradient of `Σ f(x, y)` at `(x, y)` by the engine, against central differences.
fn check_grad2(name: &str, f: impl Fn(Exp, Exp) -> Exp + Copy, plain: impl Fn(f64, f64) -> f64) {
    let n = 12;
    let x = uniform(n, 11, 0.3, 6.0);
    let y = uniform(n, 12, 0.7, 2.0);
    let b = Builder::new();
    let (ax, ay): (Acc, Acc) = (b.input(&[n]), b.input(&[n]));
    let p = b.build_scalar(&ax.zip_with(&ay, f).sum()).unwrap();
    let g = p.gradient_a(&[&x, &y]).unwrap();
    for i in 0..n {
        let h = 1e-6;
        let dx = (plain(x[i] + h, y[i]) - plain(x[i] - h, y[i])) / (2.0 * h);
        let dy = (plain(x[i], y[i] + h) - plain(x[i], y[i] - h)) / (2.0 * h);
        let ok = |a: f64, b: f64| (a - b).abs() < 1e-6 * (1.0 + b.abs());
        assert!(
            ok(g.grads[0][i], dx),
            "{name} ∂x at {}: {} vs {dx}",
            x[i],
            g.grads[0][i]
        );
        assert!(
            ok(g.grads[1][i], dy),
            "{name} ∂y at {}: {} vs {dy}",
            y[i],
            g.grads[1][i]
        );
    }
}

#[test]
fn gradients_of_the_spellings_match_central_differences() {
    check_grad2("%", |a, c| a % c, |a, c| a % c);
    check_grad2(
        "copysign",
        |a, c| (a - 3.0).copysign(c - 1.2),
        |a, c| (a - 3.0).copysign(c - 1.2),
    );
    check_grad2(
        "mul_add",
        |a, c| a.mul_add(c, a * c),
        |a, c| a.mul_add(c, a * c),
    );
    check_grad2("fract", |a, c| (a * c).fract(), |a, c| (a * c).fract());
    check_grad2(
        "signum",
        |a, c| (a - 3.0).signum() * c,
        |a, c| (a - 3.0).signum() * c,
    );
    check_grad2(
        "degrees",
        |a, c| a.to_degrees() * c.to_radians(),
        |a, c| a.to_degrees() * c.to_radians(),
    );
    check_grad2(
        "digamma",
        |a, c| (a * c).digamma(),
        |a, c| adjoint_core::special::polygamma(0, a * c),
    );
    check_grad2(
        "+= in a loop",
        |a, c| {
            let mut s = lit(0.0);
            for k in 1..4 {
                s += a.powi(k) / c;
            }
            s
        },
        |a, c| (1..4).map(|k| a.powi(k) / c).sum(),
    );
}

#[test]
fn iterator_sum_and_product_of_expressions() {
    // a 3-tap moving sum and product written with `iter().sum()` / `product()`
    let x = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = Builder::new();
    let a = b.input(&[5]);
    let s = b.generate(&[3], |i| {
        let taps: Vec<Exp> = (0..3).map(|k| a.at(&[i[0] + k])).collect();
        taps.iter().sum::<Exp>() + taps.into_iter().product::<Exp>()
    });
    let none = b.generate(&[1], |_| {
        let empty: Vec<Exp> = Vec::new();
        empty.iter().sum::<Exp>() + empty.iter().product::<Exp>()
    });
    let zero = b.generate(&[1], |_| Vec::<Exp>::new().into_iter().sum::<Exp>());
    let p = b.build(&[&s, &none, &zero]).unwrap();
    let out = p.run(&[&x]).unwrap();
    let want: Vec<f64> = (0..3)
        .map(|i| x[i..i + 3].iter().sum::<f64>() + x[i..i + 3].iter().product::<f64>())
        .collect();
    assert_eq!(out[0].data(), want);
    assert_eq!(out[1].data(), [1.0]);
    // the empty sum is f64's: -0.0
    let empty: f64 = std::iter::empty::<f64>().sum();
    assert_eq!(out[2].data()[0].to_bits(), empty.to_bits());
    // and the gradient of their total against central differences
    let total = |x: &[f64]| -> f64 {
        (0..3)
            .map(|i| x[i..i + 3].iter().sum::<f64>() + x[i..i + 3].iter().product::<f64>())
            .sum()
    };
    let p = b.build_scalar(&s.sum()).unwrap();
    let g = p.gradient_a(&[&x]).unwrap();
    for k in 0..5 {
        let (mut up, mut dn) = (x, x);
        up[k] += 1e-6;
        dn[k] -= 1e-6;
        let fd = (total(&up) - total(&dn)) / 2e-6;
        assert!(
            (g.grads[0][k] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
            "[{k}]"
        );
    }
}

#[test]
fn index_arithmetic_with_usize() {
    // a 2-wide window, a stride and a wrap-around, written with Rust's index type
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = Builder::new();
    let a = b.input(&[6]);
    let k = 1usize;
    let w = b.generate(&[3], |i| a.at(&[2 * i[0]]) + a.at(&[i[0] * 2 + k]));
    let r = b.generate(&[6], |i| a.at(&[(i[0] + 4) % 6]) - a.at(&[5 - i[0]]));
    let out = b.build(&[&w, &r]).unwrap().run(&[&x]).unwrap();
    assert_eq!(out[0].data(), [3.0, 7.0, 11.0]);
    let want: Vec<f64> = (0..6).map(|i| x[(i + 4) % 6] - x[5 - i]).collect();
    assert_eq!(out[1].data(), want);
}

#[test]
fn negating_an_array() {
    let b = Builder::new();
    let a = b.input(&[3]);
    let n = -&a;
    let m = -(a.clone() * 2.0);
    let out = b
        .build(&[&n, &m])
        .unwrap()
        .run(&[&[1.0, -2.0, 0.0]])
        .unwrap();
    assert_eq!(out[0].data(), [-1.0, 2.0, -0.0]);
    assert_eq!(out[1].data(), [-2.0, 4.0, -0.0]);
}
