//! Special functions the standard library lacks: the polygamma family.
//!
//! `lgamma` and `erf` come from [`libm`]; their derivatives need ψ⁽ⁿ⁾, which lives here so that
//! the rule table can differentiate `lgamma` to any order (`Dual<Dual<f64>>`, Hessians).

/// Bernoulli numbers B₂, B₄, …, B₁₈ for the asymptotic series.
const BERNOULLI: [f64; 9] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
];

fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

/// The polygamma function ψ⁽ⁿ⁾(x): the (n+1)-th derivative of `ln Γ(x)`.
///
/// `polygamma(0, x)` is the digamma function ψ(x), `polygamma(1, x)` the trigamma function.
/// Accurate to about 1e-14 relative (checked against mpmath up to `n = 200` and `x = 1e31`:
/// `n!` and `xⁿ⁺¹` are never formed alone, so a result in range is computed in range).
/// Arguments below `16 + 2n` are shifted up with the
/// recurrence ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) − (−1)ⁿ n! / xⁿ⁺¹; negative ones are first reflected,
/// ψ⁽ⁿ⁾(x) = (−1)ⁿ ψ⁽ⁿ⁾(1 − x) − π dⁿ/dxⁿ cot(πx), with the cotangent of `x` reduced to
/// [−½, ½] exactly, so a very negative `x` costs no more than a positive one (for
/// `n ≤ 32`; higher orders, whose values overflow beyond a few units from the poles anyway, take
/// |x| steps of the recurrence, whose terms cancel: no accuracy is promised for `n > 32` at
/// negative `x`, ψ⁽⁴⁰⁾(−2.5) is far off). At the poles (0, −1, −2, …) the result is NaN for even
/// `n` and +∞ for odd `n`.
///
/// ```
/// use adjoint_core::special::polygamma;
/// // ψ(1) = −γ (Euler–Mascheroni); ψ'(1) = π²/6.
/// assert!((polygamma(0, 1.0) + 0.5772156649015329).abs() < 1e-14);
/// assert!((polygamma(1, 1.0) - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-14);
/// ```
pub fn polygamma(n: u32, x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 && x == x.floor() {
        return if n % 2 == 1 { f64::INFINITY } else { f64::NAN };
    }
    if x == f64::INFINITY {
        return if n == 0 { f64::INFINITY } else { 0.0 };
    }
    if x < 0.0 && n <= MAX_REFLECTED {
        // Reflection: ψ⁽ⁿ⁾(x) = (−1)ⁿ ψ⁽ⁿ⁾(1 − x) − πⁿ⁺¹ Pₙ(cot πx), where Pₙ(cot y) is the n-th
        // derivative of cot y (P₀(c) = c, Pₖ₊₁(c) = −(1 + c²) Pₖ′(c)). 1 − x > 1: no second
        // reflection. cot(πx) has period 1, so it is taken at x − round(x) ∈ [−½, ½] (exact),
        // not at πx, whose rounding grows with |x|. Beyond |t| = ¼ as tan(π(½ − |t|)) with
        // t's sign (½ − |t| is exact there): at a half-integer that is tan(0) = 0, where
        // 1/tan(π/2) is 6e-17 and πⁿ⁺¹Pₙ′ made ψ⁽¹⁰⁾(−10.5) wrong by 47 %.
        let pi = std::f64::consts::PI;
        let t = x - x.round();
        let c = if t.abs() <= 0.25 {
            (pi * t).tan().recip()
        } else {
            (pi * (0.5 - t.abs())).tan().copysign(t)
        };
        let sign_n = if n % 2 == 0 { 1.0 } else { -1.0 };
        return sign_n * polygamma(n, 1.0 - x) - pi.powi(n as i32 + 1) * cot_derivative(n, c);
    }
    let sign_n = if n % 2 == 0 { 1.0 } else { -1.0 }; // (−1)ⁿ
    let shift = 16.0 + 2.0 * f64::from(n);
    if x < 0.0 {
        // (n > MAX_REFLECTED: the recurrence from a negative x, no accuracy promised)
        let nfact = factorial(n);
        let mut x = x;
        let mut acc = 0.0;
        while x < shift {
            acc -= sign_n * nfact / x.powi(n as i32 + 1);
            x += 1.0;
        }
        return acc + asymptotic(n, x);
    }
    // The recurrence's terms n!/xₖⁿ⁺¹ as one scale, n!/x₀ⁿ⁺¹ (the largest term, a product of
    // factors k/x₀ that overflows or underflows only where the result does), times
    // (x₀/xₖ)ⁿ⁺¹ ≤ 1: n! alone overflows from n = 171 and xⁿ⁺¹ from 1.8e308, where the terms
    // are in range (ψ⁽¹⁷⁰⁾(60.5) was NaN, ψ⁽⁴⁰⁾(1e8) 0 for −2e-274; a hunter).
    let x0 = x;
    let mut x = x;
    let mut sum = 0.0;
    while x < shift {
        sum += (x0 / x).powi(n as i32 + 1);
        x += 1.0;
    }
    let terms = if sum == 0.0 {
        0.0
    } else {
        -sign_n * scaled_factorial(n, x0) / x0 * sum
    };
    terms + asymptotic(n, x)
}

/// `n! / xⁿ` as a product of the factors `k / x` (no intermediate overflows or underflows where
/// the result is in range: the factors fall below 1 before they rise above it).
fn scaled_factorial(n: u32, x: f64) -> f64 {
    (1..=n).map(|k| f64::from(k) / x).product()
}

/// The highest order [`polygamma`] reflects (the degree of [`cot_derivative`]'s polynomial is
/// `n + 1`, held in a fixed array).
const MAX_REFLECTED: u32 = 32;

/// The n-th derivative of `cot y` as a function of `c = cot y`: the polynomial Pₙ(c) with
/// P₀(c) = c and Pₖ₊₁(c) = −(1 + c²) Pₖ′(c) (as `cot′ = −(1 + cot²)`), for `n ≤ MAX_REFLECTED`.
fn cot_derivative(n: u32, c: f64) -> f64 {
    const LEN: usize = MAX_REFLECTED as usize + 2;
    let mut p = [0.0; LEN];
    p[1] = 1.0;
    for k in 0..n as usize {
        // Pₖ has degree k + 1; Pₖ₊₁ = −(P′ + c² P′), degree k + 2.
        let mut q = [0.0; LEN];
        for j in 0..=k {
            let d = (j + 1) as f64 * p[j + 1];
            q[j] -= d;
            q[j + 2] -= d;
        }
        p = q;
    }
    p[..n as usize + 2]
        .iter()
        .rev()
        .fold(0.0, |acc, &a| acc * c + a)
}

/// The asymptotic series of ψ⁽ⁿ⁾ for large `x`.
fn asymptotic(n: u32, x: f64) -> f64 {
    let inv2 = 1.0 / (x * x);
    if n == 0 {
        let mut sum = 0.0;
        let mut pow = inv2;
        for (k, b) in BERNOULLI.iter().enumerate() {
            let two_k = 2.0 * (k as f64 + 1.0);
            sum += b / two_k * pow;
            pow *= inv2;
        }
        return x.ln() - 0.5 / x - sum;
    }
    let nf = f64::from(n);
    // (n−1)!/xⁿ · [1 + n/(2x) + Σ B₂ₖ (2k+n−1)!/((2k)! (n−1)! x²ᵏ)]: the scale (n−1)!/xⁿ as
    // one product of factors k/x (see `scaled_factorial`), the bracket near 1.
    let mut sum = 1.0 + nf / (2.0 * x);
    // ratio (2k+n−1)!/((2k)! (n−1)!) built incrementally.
    let mut ratio = nf * (nf + 1.0) / 2.0; // k = 1
    let mut pow = inv2;
    for (k, b) in BERNOULLI.iter().enumerate() {
        let k = k as f64 + 1.0;
        sum += b * ratio * pow;
        // advance k → k+1: multiply by (2k+n)(2k+n+1) / ((2k+1)(2k+2))
        ratio *= (2.0 * k + nf) * (2.0 * k + nf + 1.0) / ((2.0 * k + 1.0) * (2.0 * k + 2.0));
        pow *= inv2;
    }
    let sum = scaled_factorial(n - 1, x) / x * sum;
    if n % 2 == 1 {
        sum
    } else {
        -sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::excessive_precision)] // mpmath's 17 digits, as it printed them
    fn high_orders_and_huge_arguments_stay_in_range() {
        // n! overflows from n = 171 and xⁿ⁺¹ beyond 1.8e308 where ψ⁽ⁿ⁾ is in range: these were
        // NaN (n ≥ 160), 0, or 1.5e-7 off (a hunter). References: mpmath at 40 digits.
        for (n, x, want) in [
            (170, 60.5, -161.38008454002649),
            (169, 60.5, 57.493963795539503),
            (150, 100.0, -7.3581753925282812e-40),
            (40, 1e8, -2.0397886160774138e-274),
            (20, 1e16, -1.2164510040883212e-303),
            (10, 1e31, -3.6288e-305),
            (200, 250.25, -1.2110530011209903e-107),
        ] {
            let got = polygamma(n, x);
            assert!(
                (got - want).abs() <= 1e-13 * want.abs(),
                "ψ⁽{n}⁾({x}) = {got:e}, mpmath {want:e}"
            );
        }
    }

    #[test]
    fn known_values() {
        let pi = std::f64::consts::PI;
        let gamma = 0.577_215_664_901_532_9;
        assert!((polygamma(0, 1.0) + gamma).abs() < 1e-14);
        assert!((polygamma(0, 0.5) + gamma + 2.0 * 2f64.ln()).abs() < 1e-14);
        assert!((polygamma(1, 0.5) - pi * pi / 2.0).abs() < 1e-13);
        // ψ''(1) = −2 ζ(3)
        assert!((polygamma(2, 1.0) + 2.0 * 1.202_056_903_159_594_3).abs() < 1e-13);
        // ψ'''(1) = 6 ζ(4) = π⁴/15
        assert!((polygamma(3, 1.0) - pi.powi(4) / 15.0).abs() < 1e-12);
        // reflection branch: ψ(−0.5) = ψ(1.5) + π/tan(−π/2)·(−1) = 2 − γ − 2 ln 2 + ... = 0.03649...
        assert!((polygamma(0, -0.5) - 0.036_489_973_978_576_52).abs() < 1e-13);
    }

    #[test]
    fn derivatives_of_cot() {
        // P₁ = −(1 + c²), P₂ = 2c(1 + c²), P₃ = −2(1 + c²)(1 + 3c²)
        for c in [-2.0, -0.3, 0.0, 0.7, 5.0] {
            let s = 1.0 + c * c;
            assert_eq!(cot_derivative(0, c), c);
            assert!((cot_derivative(1, c) + s).abs() < 1e-14 * s);
            assert!((cot_derivative(2, c) - 2.0 * c * s).abs() < 1e-13 * s * s);
            let p3 = -2.0 * s * (1.0 + 3.0 * c * c);
            assert!((cot_derivative(3, c) - p3).abs() < 1e-13 * p3.abs());
        }
    }

    #[test]
    fn negative_arguments_reflect_instead_of_stepping() {
        // Against the recurrence summed explicitly from a positive argument:
        // ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x + m) − (−1)ⁿ n! Σ_{j<m} 1/(x + j)ⁿ⁺¹.
        for n in 0..5 {
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            for &x in &[-0.3f64, -2.5, -7.75, -40.1, -300.6] {
                let m = (1.0 - x).ceil() as usize;
                let mut want = polygamma(n, x + m as f64);
                for j in (0..m).rev() {
                    want -= sign * factorial(n) / (x + j as f64).powi(n as i32 + 1);
                }
                let got = polygamma(n, x);
                assert!(
                    (got - want).abs() <= 1e-11 * want.abs().max(1.0),
                    "n={n} x={x}: {got} vs {want}"
                );
            }
        }
        // Far from the origin (this took ~10¹⁵ steps of the recurrence): at half-integers
        // cot(πx) = 0, so ψ(x) = ψ(1 − x), ψ′(x) = π² − ψ′(1 − x) and ψ″(x) = ψ″(1 − x) ≈ −1e-30.
        let x = -1e15 + 0.5;
        let pi = std::f64::consts::PI;
        assert!((polygamma(0, x) - polygamma(0, 1.0 - x)).abs() < 1e-13 * 35.0);
        assert!((polygamma(1, x) - (pi * pi - polygamma(1, 1.0 - x))).abs() < 1e-14 * pi * pi);
        assert!(polygamma(2, x).abs() < 1e-14);
    }

    #[test]
    fn half_integers_of_even_order_against_mpmath() {
        // cot(πx) is 0 at half-integers; rounded to 6e-17 it was multiplied by πⁿ⁺¹Pₙ′(0)
        // (a hunter: ψ⁽¹⁰⁾(−10.5) was 47 % off). References: mpmath's `polygamma` at 40
        // digits; the last cases are away from half-integers (the other branch).
        for (n, x, want) in [
            (6, -10.5, -6.677_381_400_689_733e-5),
            (8, -10.5, -2.294_398_408_215_362_6e-5),
            (10, -10.5, -1.347_971_318_043_691_2e-5),
            (10, -2.5, -4.026_693_041_232_995),
            (12, -2.5, -42.172_657_384_457_86),
            (4, -0.5, -3.474_249_826_667_225),
            (2, -3.5, -0.061_556_821_321_027_695),
            (1, -2.5, 9.539_246_644_989_124),
            (3, -7.25, 1_558.541_195_203_404_5),
            (10, -3.000_000_001, 3.628_796_697_270_798_5e105),
        ] {
            let got = polygamma(n, x);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs(),
                "ψ⁽{n}⁾({x}) = {got:e}, want {want:e}"
            );
        }
    }

    #[test]
    fn recurrence_holds() {
        for n in 0..5 {
            for &x in &[0.3, 1.7, 4.2, 25.0, -2.5] {
                let lhs = polygamma(n, x + 1.0) - polygamma(n, x);
                let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
                let rhs = sign * factorial(n) / x.powi(n as i32 + 1);
                assert!(
                    (lhs - rhs).abs() <= 1e-11 * rhs.abs().max(1.0),
                    "n={n} x={x}"
                );
            }
        }
    }
}
