//! Slice-level primitives shared by every engine: [`dot`], [`sum`], [`matvec`], [`logsumexp`],
//! [`axpy`].
//!
//! Generic user code calls them as functions over `Real` slices, and each number type runs them
//! its own way: `f64` a vectorisable loop, `Dual` its tangent loop, and the tape engine's `Var`
//! records **one** tape entry per result with a vector adjoint (no per-element entries), which
//! is what makes array-shaped code cheap to differentiate. The scalar definitions below (the
//! default methods of [`Real`]) are the specification; every implementation computes the same
//! values up to the order of floating-point additions.
//!
//! On the tape the cheapest operands are whole slices of values recorded one after the other:
//! the function's inputs, or a vector built by one loop (`xs.iter().map(|x| x.sin()).collect()`).
//! Such a slice is checked and copied in one pass, and a `matvec` over them (or over constants,
//! e.g. data times weights) is one record for the whole product. Other slices (every other
//! element, values interleaved with other results) are still one entry per result, taken
//! operand by operand.
//!
//! ```
//! use adjoint_core::{forward, vector, Real};
//!
//! // A dense layer and a softmax cross-entropy, written once for every number type.
//! fn loss<T: Real>(p: &[T]) -> T {
//!     let (w, x) = p.split_at(6);           // w: 2 × 3, x: 3
//!     let mut z = vec![T::cst(0.0); 2];
//!     vector::matvec(w, x, &mut z);
//!     vector::logsumexp(&z) - z[0]
//! }
//! let p = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 1.0, 2.0, 3.0];
//! let g = forward::gradient(|p| loss(p), &p);
//! adjoint_core::check::check_gradient(|p| loss(p), &p, &g).assert_passed();
//! ```

use crate::Real;

/// `Σᵢ aᵢ bᵢ`.
///
/// # Panics
/// If the lengths differ.
///
/// ```
/// assert_eq!(adjoint_core::vector::dot(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
/// ```
#[inline]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    assert_eq!(
        a.len(),
        b.len(),
        "vector::dot: lengths {} and {} differ",
        a.len(),
        b.len()
    );
    T::slice_dot(a, b)
}

/// `Σᵢ aᵢ` (0 for an empty slice).
///
/// ```
/// assert_eq!(adjoint_core::vector::sum(&[1.0, 2.0, 3.5]), 6.5);
/// ```
#[inline]
pub fn sum<T: Real>(a: &[T]) -> T {
    T::slice_sum(a)
}

/// `out = M x` for a row-major `M` of `out.len()` rows and `x.len()` columns.
///
/// # Panics
/// If `m.len() != out.len() * x.len()`.
///
/// ```
/// let mut y = [0.0; 2];
/// adjoint_core::vector::matvec(&[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0], &mut y);
/// assert_eq!(y, [3.0, 7.0]);
/// ```
#[inline]
pub fn matvec<T: Real>(m: &[T], x: &[T], out: &mut [T]) {
    assert_eq!(
        m.len(),
        out.len() * x.len(),
        "vector::matvec: a {}-element matrix is not {} × {}",
        m.len(),
        out.len(),
        x.len()
    );
    T::slice_matvec(m, x, out)
}

/// `ln Σᵢ exp(aᵢ)`, computed stably (shifted by the maximum); −∞ for an empty slice. Where
/// entries are +∞ the value is +∞ and the derivative the limit of softmax: 1/k on each of the
/// k infinite entries, 0 elsewhere.
///
/// ```
/// let v = adjoint_core::vector::logsumexp(&[1000.0, 1000.0]);
/// assert!((v - (1000.0 + 2f64.ln())).abs() < 1e-12);
/// ```
#[inline]
pub fn logsumexp<T: Real>(a: &[T]) -> T {
    T::slice_logsumexp(a)
}

/// `y += α x`.
///
/// # Panics
/// If the lengths differ.
///
/// ```
/// let mut y = [1.0, 1.0];
/// adjoint_core::vector::axpy(2.0, &[1.0, 2.0], &mut y);
/// assert_eq!(y, [3.0, 5.0]);
/// ```
#[inline]
pub fn axpy<T: Real>(alpha: T, x: &[T], y: &mut [T]) {
    assert_eq!(
        x.len(),
        y.len(),
        "vector::axpy: lengths {} and {} differ",
        x.len(),
        y.len()
    );
    T::slice_axpy(alpha, x, y)
}

/// The scalar definitions, used by every number type that does not provide its own.
#[doc(hidden)]
pub mod scalar {
    use crate::Real;

    #[inline]
    pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
        let mut acc = T::cst(0.0);
        for (&x, &y) in a.iter().zip(b) {
            acc += x * y;
        }
        acc
    }

    #[inline]
    pub fn sum<T: Real>(a: &[T]) -> T {
        let mut acc = T::cst(0.0);
        for &x in a {
            acc += x;
        }
        acc
    }

    #[inline]
    pub fn matvec<T: Real>(m: &[T], x: &[T], out: &mut [T]) {
        if x.is_empty() {
            out.iter_mut().for_each(|o| *o = T::cst(0.0));
            return;
        }
        for (o, row) in out.iter_mut().zip(m.chunks_exact(x.len())) {
            *o = T::slice_dot(row, x);
        }
    }

    #[inline]
    pub fn logsumexp<T: Real>(a: &[T]) -> T {
        let m = a
            .iter()
            .map(|v| v.value())
            .fold(f64::NEG_INFINITY, f64::max);
        if m == f64::INFINITY && a.iter().all(|v| !v.value().is_nan()) {
            // k entries at +∞: the value is +∞, and the gradient the limit of softmax, 1/k on
            // each of them (the plain formula's `ln′(∞) · exp′(∞)` is `0 · ∞`).
            let inf: Vec<T> = a.iter().copied().filter(|v| v.value() == m).collect();
            return sum(&inf) / inf.len() as f64;
        }
        if !m.is_finite() {
            // Empty, all −∞, or containing NaN: the plain formula gives the right limit.
            return sum(&a.iter().map(|&v| v.exp()).collect::<Vec<T>>()).ln();
        }
        let mut acc = T::cst(0.0);
        for &v in a {
            acc += (v - m).exp();
        }
        acc.ln() + m
    }

    #[inline]
    pub fn axpy<T: Real>(alpha: T, x: &[T], y: &mut [T]) {
        for (yi, &xi) in y.iter_mut().zip(x) {
            *yi += alpha * xi;
        }
    }
}

/// `f64` kernels: several independent accumulators, so the loops vectorise. The `*_by` forms
/// read the values through an accessor so that engines (the tape's `Var`) compute the primal
/// with exactly the same rounding as the plain `f64` program.
#[doc(hidden)]
pub mod fast {
    /// `Σ f(aᵢ) g(bᵢ)` with eight accumulators.
    #[inline(always)]
    pub fn dot_by<A, B>(a: &[A], b: &[B], f: impl Fn(&A) -> f64, g: impl Fn(&B) -> f64) -> f64 {
        let mut acc = [0.0f64; 8];
        let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            for k in 0..8 {
                acc[k] += f(&x[k]) * g(&y[k]);
            }
        }
        let mut tail = 0.0;
        for (x, y) in ra.iter().zip(rb) {
            tail += f(x) * g(y);
        }
        ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
    }

    /// `Σ f(aᵢ)` with eight accumulators.
    #[inline(always)]
    pub fn sum_by<A>(a: &[A], f: impl Fn(&A) -> f64) -> f64 {
        let mut acc = [0.0f64; 8];
        let c = a.chunks_exact(8);
        let mut tail = 0.0;
        for x in c.remainder() {
            tail += f(x);
        }
        for x in c {
            for k in 0..8 {
                acc[k] += f(&x[k]);
            }
        }
        ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
    }

    /// `ln Σ exp(f(aᵢ))`, shifted by the maximum.
    #[inline(always)]
    pub fn logsumexp_by<A>(a: &[A], f: impl Fn(&A) -> f64) -> f64 {
        let m = a.iter().map(&f).fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            return sum_by(a, |x| f(x).exp()).ln();
        }
        sum_by(a, |x| (f(x) - m).exp()).ln() + m
    }

    #[inline]
    pub fn dot(a: &[f64], b: &[f64]) -> f64 {
        dot_by(a, b, |x| *x, |y| *y)
    }

    #[inline]
    pub fn sum(a: &[f64]) -> f64 {
        sum_by(a, |x| *x)
    }

    #[inline]
    pub fn matvec(m: &[f64], x: &[f64], out: &mut [f64]) {
        if x.is_empty() {
            out.iter_mut().for_each(|o| *o = 0.0);
            return;
        }
        for (o, row) in out.iter_mut().zip(m.chunks_exact(x.len())) {
            *o = dot(row, x);
        }
    }

    #[inline]
    pub fn logsumexp(a: &[f64]) -> f64 {
        logsumexp_by(a, |x| *x)
    }

    #[inline]
    pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
        for (yi, xi) in y.iter_mut().zip(x) {
            *yi += alpha * xi;
        }
    }
}
