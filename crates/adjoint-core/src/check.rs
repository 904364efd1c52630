//! Gradient checking against finite differences.
//!
//! [`numeric_derivative`] is Ridders' method: central differences at a shrinking sequence of steps
//! combined by Richardson extrapolation (a Neville tableau), returning the estimate with the
//! smallest error estimate. It usually reaches 1e-10 relative on smooth functions, far better
//! than a single central difference. [`numeric_gradient`] applies it per coordinate with a step
//! scaled to that coordinate, and [`check_gradient`] compares an engine's gradient with it and
//! reports the worst coordinate. Every engine's tests use this as their independent reference.
//!
//! Each coordinate tries several start steps and keeps the estimate with the smallest error
//! estimate relative to itself, so a start whose stencil sees a flat function (a narrow
//! Gaussian seen from its tails, every value underflowing to 0) does not win over one that
//! sees the slope. What it cannot see: a function that changes on a scale finer than the
//! smallest start (1e-4 · max(|x|, 1) by default: a Gaussian of width 1e-6, whose stencil
//! points all underflow to 0 from every start, gives the reference 0), and a kink closer to the
//! point than the steps (`x.max(0.0)` at 1e-9). There, give the steps yourself
//! ([`CheckOptions::steps`]). A reference that overflows passes only an equal gradient.
//!
//! Each difference divides by the step `x ± h` really takes (far from 0, `x + h` rounds), and
//! an estimate's error is never taken below the rounding of `f` itself, `ε|f|/h`: a start
//! whose differences are a few ulps of `f` (`x` at 1e10 with a step of 0.01) quantises, and its
//! tableau would otherwise claim an error of 0 for a wrong estimate.
//!
//! ```
//! use adjoint_core::check::check_gradient;
//!
//! let f = |x: &[f64]| x[0].sin() * x[1].exp();
//! let x = [0.3, -0.7];
//! let analytic = [0.3f64.cos() * (-0.7f64).exp(), 0.3f64.sin() * (-0.7f64).exp()];
//! let report = check_gradient(f, &x, &analytic);
//! assert!(report.passed(), "{report}");
//! ```

use core::fmt;

/// Options for the finite-difference reference.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOptions {
    /// Largest initial step, relative: coordinate `i` runs Ridders from `step · max(|xᵢ|, 1)` and
    /// from 1/10, 1/100 and 1/1000 of it (where |xᵢ| > 1, also from `step` and 1/10, 1/100 and
    /// 1/1000 of it), and keeps the estimate with the smallest error estimate relative to the
    /// estimate (so steep functions such as x¹⁰⁰⁰ need no tuning). Ignored where `steps` is
    /// given.
    pub step: f64,
    /// Per-coordinate absolute initial steps (e.g. near a domain edge), one per coordinate;
    /// overrides `step`.
    pub steps: Option<Vec<f64>>,
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance: coordinate `i` passes when `|a − n| ≤ atol + rtol·|n|`.
    pub atol: f64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            step: 1e-1,
            steps: None,
            rtol: 1e-6,
            atol: 1e-8,
        }
    }
}

/// Ridders' extrapolated central difference of `f` at `x` with initial step `h`.
/// Returns `(estimate, error_estimate)`.
///
/// ```
/// use adjoint_core::check::numeric_derivative;
/// let (d, err) = numeric_derivative(|x| x.exp(), 1.0, 0.1);
/// assert!((d - 1f64.exp()).abs() < 1e-11 && err < 1e-9);
/// ```
pub fn numeric_derivative(mut f: impl FnMut(f64) -> f64, x: f64, h: f64) -> (f64, f64) {
    const NTAB: usize = 10;
    const CON: f64 = 1.4;
    const CON2: f64 = CON * CON;
    const SAFE: f64 = 2.0;
    // The central difference over the step `x ± h` really takes (`x + h` is rounded: at
    // |x| = 1e10 a step of 0.01 is a few ulps of x, and dividing by the nominal 2h gave the
    // identity the derivative 1.00002), and the largest |f| seen, for the rounding noise below.
    let mut scale = 0.0f64;
    let mut central = |h: f64| {
        let (xp, xm) = (x + h, x - h);
        let (fp, fm) = (f(xp), f(xm));
        scale = scale.max(fp.abs()).max(fm.abs());
        (fp - fm) / (xp - xm)
    };
    // Shrink the first step until the difference is finite (near a domain edge).
    let mut h = h;
    let mut first = central(h);
    let mut tries = 0;
    while !first.is_finite() && tries < 30 {
        h /= 4.0;
        first = central(h);
        tries += 1;
    }
    let mut a = [[0.0f64; NTAB]; NTAB];
    a[0][0] = first;
    let mut err = f64::INFINITY;
    let mut ans = first;
    for i in 1..NTAB {
        h /= CON;
        a[0][i] = central(h);
        let mut fac = CON2;
        for j in 1..=i {
            a[j][i] = (a[j - 1][i] * fac - a[j - 1][i - 1]) / (fac - 1.0);
            fac *= CON2;
            let errt = (a[j][i] - a[j - 1][i])
                .abs()
                .max((a[j][i] - a[j - 1][i - 1]).abs());
            if errt <= err {
                err = errt;
                ans = a[j][i];
            }
        }
        if (a[i][i] - a[i - 1][i - 1]).abs() >= SAFE * err {
            break;
        }
    }
    // The tableau's error estimate cannot see rounding in `f` itself: where the differences
    // are a few ulps of |f|, they quantise, and equal entries gave an error of 0 for an
    // estimate 4 % off (`1e8·atan(x)` at 1e6 from a step of 1e-3). No difference over a step
    // `h` is better than `ε|f|/h`.
    let noise = f64::EPSILON * scale / h;
    (
        ans,
        if noise.is_finite() {
            err.max(noise)
        } else {
            err
        },
    )
}

/// The gradient of `f` at `x` by Ridders' method, one coordinate at a time.
///
/// ```
/// use adjoint_core::check::numeric_gradient;
/// let g = numeric_gradient(|x| x[0] * x[0] + 3.0 * x[1], &[2.0, 5.0]);
/// assert!((g[0] - 4.0).abs() < 1e-9 && (g[1] - 3.0).abs() < 1e-9);
/// ```
pub fn numeric_gradient(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    numeric_gradient_with(f, x, &CheckOptions::default())
}

/// [`numeric_gradient`] with explicit options (steps).
///
/// ```
/// use adjoint_core::check::{numeric_gradient_with, CheckOptions};
/// // ln near its edge at 0: start with a step well inside the domain.
/// let opts = CheckOptions { steps: Some(vec![1e-5]), ..CheckOptions::default() };
/// let g = numeric_gradient_with(|x| x[0].ln(), &[1e-4], &opts);
/// assert!((g[0] - 1e4).abs() < 1e-4);
/// ```
pub fn numeric_gradient_with(
    f: impl Fn(&[f64]) -> f64,
    x: &[f64],
    opts: &CheckOptions,
) -> Vec<f64> {
    if let Some(s) = &opts.steps {
        assert_eq!(
            s.len(),
            x.len(),
            "CheckOptions::steps has {} steps but the point has {} coordinates (one step per \
             coordinate)",
            s.len(),
            x.len()
        );
    }
    let mut xs = x.to_vec();
    (0..x.len())
        .map(|i| {
            // (step, scaled): the starts scaled by |x|, and, where |x| > 1, unscaled ones too
            // (far from 0 a function need not vary on the scale of |x|: sin at 1e8 varies on
            // the scale 1), which only a sure estimate is taken from (below)
            let hs: Vec<(f64, bool)> = match &opts.steps {
                Some(s) => vec![(s[i], true)],
                None => {
                    let h = opts.step * x[i].abs().max(1.0);
                    let mut hs: Vec<(f64, bool)> = [h, h / 10.0, h / 100.0, h / 1000.0]
                        .map(|h| (h, true))
                        .to_vec();
                    if x[i].abs() > 1.0 {
                        let h = opts.step;
                        hs.extend([h, h / 10.0, h / 100.0, h / 1000.0].map(|h| (h, false)));
                    }
                    hs
                }
            };
            let xi = x[i];
            // Each start's estimate and error estimate; a start whose steps vanish next to x
            // (x ± h == x: |x| beyond ~1e12 for the unscaled starts) sees nothing.
            let estimates: Vec<(f64, f64, bool)> = hs
                .into_iter()
                .filter(|&(h, _)| xi + h != xi && xi - h != xi)
                .map(|(h, scaled)| {
                    let (d, err) = numeric_derivative(
                        |t| {
                            xs[i] = t;
                            let v = f(&xs);
                            xs[i] = xi;
                            v
                        },
                        xi,
                        h,
                    );
                    (d, err, scaled)
                })
                .collect();
            // The estimate with the smallest error estimate (Ridders' own choice) — unless
            // another start is sure of itself (error under 1e-6 of its estimate) and the two
            // disagree beyond their errors: then that one. A start whose stencil sees a flat
            // function (a narrow Gaussian seen from its tails, every value underflowed, or sin
            // at 1e8 from steps that span many periods) returns an estimate and an error that
            // are both tiny, which won over the right one. Where the derivative is 0, every
            // estimate is rounding noise, none is sure of itself, and the smallest error stands.
            let least = estimates
                .iter()
                .filter(|(d, _, scaled)| *scaled && !d.is_nan())
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let sure = estimates
                .iter()
                .filter(|(d, err, _)| *err < 1e-6 * d.abs())
                .min_by(|a, b| (a.1 / a.0.abs()).total_cmp(&(b.1 / b.0.abs())));
            let best = match (least, sure) {
                (Some(a), Some(b)) if (a.0 - b.0).abs() > a.1 + b.1 => Some(b),
                (a, b) => a.or(b),
            };
            best.map_or(f64::NAN, |&(d, _, _)| d)
        })
        .collect()
}

/// The outcome of comparing a gradient with the finite-difference reference.
#[derive(Clone, Debug, PartialEq)]
pub struct GradientReport {
    /// The gradient under test.
    pub analytic: Vec<f64>,
    /// The finite-difference reference.
    pub numeric: Vec<f64>,
    /// The coordinate with the largest error relative to its tolerance.
    pub worst: usize,
    /// `|analytic − numeric|` at the worst coordinate.
    pub abs_error: f64,
    /// `|analytic − numeric| / |numeric|` at the worst coordinate.
    pub rel_error: f64,
    /// Relative tolerance used.
    pub rtol: f64,
    /// Absolute tolerance used.
    pub atol: f64,
}

impl GradientReport {
    /// Whether every coordinate satisfies `|a − n| ≤ atol + rtol·|n|` (NaN fails). A
    /// non-finite reference (the differences overflowed) passes only an equal gradient:
    /// `inf ≤ atol + rtol·inf` would pass any.
    pub fn passed(&self) -> bool {
        self.analytic
            .iter()
            .zip(&self.numeric)
            .all(|(&a, &n)| coordinate_ok(a, n, self.atol, self.rtol))
    }

    /// Panic with the report if the check failed.
    ///
    /// ```
    /// use adjoint_core::check::check_gradient;
    /// check_gradient(|x| x[0] * x[0], &[3.0], &[6.0]).assert_passed();
    /// ```
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{self}");
    }
}

impl fmt::Display for GradientReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "passed" } else { "FAILED" };
        write!(
            f,
            "gradient check {verdict}: worst coordinate {} of {}: analytic {:e}, numeric {:e}, \
             abs error {:.3e}, rel error {:.3e} (tolerance atol {:e} + rtol {:e}·|numeric|)",
            self.worst,
            self.analytic.len(),
            self.analytic.get(self.worst).copied().unwrap_or(f64::NAN),
            self.numeric.get(self.worst).copied().unwrap_or(f64::NAN),
            self.abs_error,
            self.rel_error,
            self.atol,
            self.rtol
        )
    }
}

/// Compare `gradient` with the finite-difference gradient of `f` at `x` (default options).
///
/// ```
/// use adjoint_core::check::check_gradient;
/// let f = |x: &[f64]| x[0].sin() * x[1];
/// let x = [0.7, 2.0];
/// let right = [0.7f64.cos() * 2.0, 0.7f64.sin()];
/// assert!(check_gradient(f, &x, &right).passed());
/// assert!(!check_gradient(f, &x, &[right[0], 0.0]).passed());
/// ```
///
/// # Panics
/// If `gradient` and `x` differ in length.
pub fn check_gradient(f: impl Fn(&[f64]) -> f64, x: &[f64], gradient: &[f64]) -> GradientReport {
    check_gradient_with(f, x, gradient, &CheckOptions::default())
}

/// [`check_gradient`] with explicit tolerances and steps.
///
/// ```
/// use adjoint_core::check::{check_gradient_with, CheckOptions};
/// let opts = CheckOptions { rtol: 1e-3, ..CheckOptions::default() };
/// let r = check_gradient_with(|x| x[0].powi(3), &[2.0], &[12.001], &opts);
/// assert!(r.passed());
/// ```
///
/// # Panics
/// If `gradient` and `x` differ in length.
pub fn check_gradient_with(
    f: impl Fn(&[f64]) -> f64,
    x: &[f64],
    gradient: &[f64],
    opts: &CheckOptions,
) -> GradientReport {
    assert_eq!(
        x.len(),
        gradient.len(),
        "check_gradient: point has {} coordinates but the gradient has {}",
        x.len(),
        gradient.len()
    );
    let numeric = numeric_gradient_with(f, x, opts);
    let mut worst = 0;
    let mut worst_ratio = -1.0;
    for (i, (&a, &n)) in gradient.iter().zip(&numeric).enumerate() {
        // A failing coordinate ranks above every passing one; an exact match is 0 (its ratio
        // can be `0/0` with `atol = 0`, or `∞ − ∞` where an infinite reference is matched,
        // which ranked it as the worst).
        let ratio = if !coordinate_ok(a, n, opts.atol, opts.rtol) {
            f64::INFINITY
        } else if a == n {
            0.0
        } else {
            (a - n).abs() / (opts.atol + opts.rtol * n.abs())
        };
        if ratio > worst_ratio {
            worst_ratio = ratio;
            worst = i;
        }
    }
    let (a, n) = (
        gradient.get(worst).copied().unwrap_or(0.0),
        numeric.get(worst).copied().unwrap_or(0.0),
    );
    GradientReport {
        analytic: gradient.to_vec(),
        numeric,
        worst,
        abs_error: (a - n).abs(),
        rel_error: if n == 0.0 {
            (a - n).abs()
        } else {
            (a - n).abs() / n.abs()
        },
        rtol: opts.rtol,
        atol: opts.atol,
    }
}

/// One coordinate's test: `|a − n| ≤ atol + rtol·|n|` for a finite reference `n`, equality
/// for a non-finite one.
fn coordinate_ok(a: f64, n: f64, atol: f64, rtol: f64) -> bool {
    a == n || (n.is_finite() && (a - n).abs() <= atol + rtol * n.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_infinite_reference_passes_only_an_equal_gradient() {
        // exp at 709.5: the differences overflow (a reviewer helper's hunt: any finite
        // gradient passed, 0 included).
        let r = check_gradient(|x| x[0].exp(), &[709.5], &[0.0]);
        assert!(r.numeric[0].is_infinite() && !r.passed(), "{r}");
        assert!(!check_gradient(|x| x[0].exp(), &[709.5], &[709.5f64.exp()]).passed());
        assert!(check_gradient(|x| x[0].exp(), &[709.5], &[f64::INFINITY]).passed());
    }

    #[test]
    fn detects_a_wrong_gradient_and_names_the_coordinate() {
        let f = |x: &[f64]| x[0] * x[1] + x[2].sin();
        let x = [1.0, 2.0, 0.5];
        let good = [2.0, 1.0, 0.5f64.cos()];
        assert!(check_gradient(f, &x, &good).passed());
        let bad = [2.0, 1.0, 0.5f64.cos() * 1.001];
        let r = check_gradient(f, &x, &bad);
        assert!(!r.passed());
        assert_eq!(r.worst, 2);
        assert!(r.to_string().contains("worst coordinate 2"), "{r}");
    }

    #[test]
    fn the_worst_coordinate_is_a_failing_one() {
        // An exact match ranked as the worst: its ratio was 0/0 with `atol = 0` (a hunter's
        // report named coordinate 0 of `[0, 2]` against the reference `[0, 1]`) ...
        let opts = CheckOptions {
            atol: 0.0,
            ..CheckOptions::default()
        };
        let r = check_gradient_with(|x| x[0] * x[0] + x[1], &[0.0, 1.0], &[0.0, 2.0], &opts);
        assert!(!r.passed());
        assert_eq!(r.worst, 1, "{r}");
        // ... and ∞ − ∞ where an infinite reference is matched by an infinite gradient.
        let r = check_gradient(
            |x| x[0].exp() + x[1] * x[1],
            &[709.5, 1.0],
            &[f64::INFINITY, 4.0],
        );
        assert!(!r.passed());
        assert_eq!(r.worst, 1, "{r}");
    }

    #[test]
    fn a_start_that_sees_a_flat_function_is_not_taken() {
        // A Gaussian of width 3e-3 seen at x = 1 + w/2: from the largest start every stencil
        // point underflows, an estimate of −3e-236 with an error estimate of 1e-235, which the
        // smallest *absolute* error estimate took over the 1e-4 start's −259.6.
        for w in [3e-3, 1e-3, 3e-4, 1e-4] {
            let f = move |x: &[f64]| (-((x[0] - 1.0) / w).powi(2)).exp();
            let x0 = 1.0 + w / 2.0;
            let exact = -(1.0 / w) * (-0.25f64).exp();
            let g = numeric_gradient(f, &[x0]);
            assert!(
                (g[0] - exact).abs() < 1e-6 * exact.abs(),
                "w = {w}: {} vs {exact}",
                g[0]
            );
            assert!(!check_gradient(f, &[x0], &[0.0]).passed(), "w = {w}");
            assert!(check_gradient(f, &[x0], &[exact]).passed(), "w = {w}");
        }
    }

    #[test]
    fn far_from_zero_a_function_may_vary_on_the_scale_one() {
        // sin at 1e8: the starts scaled by |x| (1e7 down to 1e4) span many periods; the
        // unscaled starts see it.
        // (At 1e8 the spacing of the doubles, 1.5e-8, limits any difference quotient to ~1e-6
        // relative: the check there asks 1e-5.)
        for (x, rtol) in [(1e5, 1e-6), (1e6, 1e-6), (1e8, 1e-5)] {
            let opts = CheckOptions {
                rtol,
                ..CheckOptions::default()
            };
            let exact = f64::cos(x);
            let r = check_gradient_with(|x| x[0].sin(), &[x], &[0.0], &opts);
            assert!(!r.passed(), "x = {x}: {r}");
            let r = check_gradient_with(|x| x[0].sin(), &[x], &[exact], &opts);
            assert!(r.passed(), "x = {x}: {r}");
        }
    }

    #[test]
    fn large_arguments_take_the_steps_they_really_take() {
        // At |x| = 1e10 the unscaled starts' steps are a few ulps of x: dividing by the nominal
        // 2h gave the identity 1.0000229, and that start's error estimate (0: its differences
        // quantise) won over the right one. Right gradients pass, slightly wrong ones fail (a
        // hunter). Closed forms.
        type F = fn(&[f64]) -> f64;
        let cases: [(F, &[f64], &[f64]); 6] = [
            (|x| x[0], &[1e10], &[1.0]),
            (|x| x[0], &[1e11], &[1.0]),
            (|x| x[0] * x[1], &[1e10, 3.0], &[3.0, 1e10]),
            (|x| 2.0 * x[0] - 3.0, &[1e10], &[2.0]),
            (|x| x[0] * x[0], &[1e12], &[2e12]),
            (|x| x[0].atan() * 1e8, &[1e6], &[1e8 / (1.0 + 1e12)]),
        ];
        for (f, x, g) in cases {
            let r = check_gradient(f, x, g);
            assert!(r.passed(), "x = {x:?}: {r}");
            // (beyond `atol` = 1e-8 too: the last derivative is 1e-4)
            let wrong: Vec<f64> = g.iter().map(|v| v + (2e-5 * v).max(1e-7)).collect();
            assert!(
                !check_gradient(f, x, &wrong).passed(),
                "x = {x:?}: a wrong gradient passed"
            );
        }
        let (d, err) = numeric_derivative(|t| t, 1e10, 1e-2);
        assert!((d - 1.0).abs() < 1e-12 && err > 0.0, "{d} ± {err}");
    }

    #[test]
    fn a_zero_derivative_at_a_stationary_point_passes() {
        // x³ − 3c²x at x = c: every start's estimate is rounding noise. Choosing by relative
        // error took a noisy 1.6e-7 (c = 100) and failed the correct 0 (a reviewer helper).
        for c in [25.0, 79.0, 100.0, 251.0, -500.0] {
            let f = move |x: &[f64]| x[0].powi(3) - 3.0 * c * c * x[0] + x[1];
            let r = check_gradient(f, &[c, 0.5], &[0.0, 1.0]);
            assert!(r.passed(), "c = {c}: {r}");
        }
    }

    #[test]
    #[should_panic(expected = "CheckOptions::steps has 1 steps but the point has 2 coordinates")]
    fn steps_of_the_wrong_length_are_named() {
        let opts = CheckOptions {
            steps: Some(vec![1e-3]),
            ..CheckOptions::default()
        };
        check_gradient_with(|x| x[0] + x[1], &[1.0, 2.0], &[1.0, 1.0], &opts);
    }

    #[test]
    fn nan_gradient_fails() {
        let r = check_gradient(|x| x[0], &[1.0], &[f64::NAN]);
        assert!(!r.passed());
    }

    #[test]
    fn ridders_is_accurate_on_hard_functions() {
        let (d, _) = numeric_derivative(|x| (x * x).sin() / x, 1.3, 0.1);
        let exact = 2.0 * (1.69f64).cos() - (1.69f64).sin() / 1.69;
        assert!((d - exact).abs() < 1e-10, "{d} vs {exact}");
    }
}
