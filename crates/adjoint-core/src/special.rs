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
/// Accurate to about 1e-14 relative for moderate `n`. Arguments below 16 are shifted up with the
/// recurrence ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) − (−1)ⁿ n! / xⁿ⁺¹, so a very negative `x` costs |x| steps (the
/// digamma uses the reflection formula instead). At the poles (0, −1, −2, …) the result is NaN
/// for even `n` and +∞ for odd `n`.
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
    if n == 0 && x < 0.0 {
        // Reflection: ψ(x) = ψ(1 − x) − π / tan(πx).
        let pi = std::f64::consts::PI;
        return polygamma(0, 1.0 - x) - pi / (pi * x).tan();
    }
    let nfact = factorial(n);
    let sign_n = if n % 2 == 0 { 1.0 } else { -1.0 }; // (−1)ⁿ
    let shift = 16.0 + 2.0 * f64::from(n);
    let mut x = x;
    let mut acc = 0.0;
    while x < shift {
        acc -= sign_n * nfact / x.powi(n as i32 + 1);
        x += 1.0;
    }
    acc + asymptotic(n, x)
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
    let xn = x.powi(n as i32);
    // (n−1)!/xⁿ + n!/(2xⁿ⁺¹) + Σ B₂ₖ (2k+n−1)!/((2k)! x²ᵏ⁺ⁿ)
    let mut sum = factorial(n - 1) / xn + factorial(n) / (2.0 * xn * x);
    // ratio (2k+n−1)!/(2k)! built incrementally.
    let mut ratio = factorial(n - 1) * (nf) * (nf + 1.0) / 2.0; // k = 1: (n+1)!/2!
    let mut pow = inv2 / xn;
    for (k, b) in BERNOULLI.iter().enumerate() {
        let k = k as f64 + 1.0;
        sum += b * ratio * pow;
        // advance k → k+1: multiply by (2k+n)(2k+n+1) / ((2k+1)(2k+2))
        ratio *= (2.0 * k + nf) * (2.0 * k + nf + 1.0) / ((2.0 * k + 1.0) * (2.0 * k + 2.0));
        pow *= inv2;
    }
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
