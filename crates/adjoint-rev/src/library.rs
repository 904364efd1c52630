//! A small library of reversible functions (NiLang's stdlib): sums, dot products, norms, mean and
//! variance, log-sum-exp, relu, affine maps, complex log, and sparse CSR products. Every function
//! accumulates into its first argument (`out += …`), so calling it again with `uncall` removes the
//! result exactly.
//!
//! The sums accumulate term by term, as NiLang's do, so checked code refuses terms of very
//! different sizes: `i_sum` of `[1, 1e17]` takes `out` from 0 to `1e17` (the 1 is absorbed),
//! and undoing it leaves `−1` where 0 was (`i_mean`'s ancilla fails its deallocation check; a
//! checked gradient of `i_sum`, `i_dot` or `i_norm`, whose squares span twice the range, is an
//! [`InvertibilityError::Inputs`](crate::InvertibilityError::Inputs)). The crate docs say why
//! such a residue is refused; the unchecked routes compute these gradients exactly.
//!
//! ```
//! use adjoint_rev::library::i_norm;
//! let (mut out, mut sq, mut v) = (0.0, 0.0, vec![1.0, 2.0, 3.0]);
//! i_norm(&mut out, &mut sq, &mut v)?;
//! assert_eq!((out, sq), (14f64.sqrt(), 14.0));
//! # Ok::<(), adjoint_rev::InvertibilityError>(())
//! ```

use crate::ad::Differentiable;
use crate::{reversible, Arith, RevReal};
use core::ops::IndexMut;
use num_complex::Complex;

/// Indexable storage for the library's vector arguments: `Vec<T>` and arrays `[T; N]` (so
/// ancilla vectors can live on the stack).
///
/// ```
/// use adjoint_rev::library::{i_sum, Elements};
/// let (mut out, mut x) = (0.0, [1.0, 2.0, 3.0]);
/// i_sum(&mut out, &mut x)?;
/// assert_eq!((out, Elements::len(&x)), (6.0, 3));
/// # Ok::<(), adjoint_rev::InvertibilityError>(())
/// ```
pub trait Elements<T>: IndexMut<usize, Output = T> {
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Elements<T> for Vec<T> {
    #[inline(always)]
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

impl<T, const N: usize> Elements<T> for [T; N] {
    #[inline(always)]
    fn len(&self) -> usize {
        N
    }
}

/// The index of the largest element (the first, on ties): a pure function of data a reversible
/// function does not change, so it can initialise an ancilla (`let k = argmax(&x);`).
///
/// ```
/// assert_eq!(adjoint_rev::library::argmax(&[1.0, 3.0, 2.0]), 1);
/// ```
pub fn argmax<T: PartialOrd>(x: &[T]) -> usize {
    let mut k = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[k] {
            k = i;
        }
    }
    k
}

/// `i_norm`'s test: whether the largest `|xᵢ|` (a nonzero finite one) squares outside
/// [2⁻⁹⁶⁰, 2⁹⁶⁰], where `Σ xᵢ²` in f64 loses the norm.
fn squares_leave_range<T: RevReal, V: Elements<T> + ?Sized>(x: &V) -> bool {
    let m = largest_magnitude(x);
    m > 0.0 && m.is_finite() && !(2f64.powi(-480)..=2f64.powi(480)).contains(&m)
}

fn largest_magnitude<T: RevReal, V: Elements<T> + ?Sized>(x: &V) -> f64 {
    (0..x.len()).map(|i| x[i].value().abs()).fold(0.0, f64::max)
}

/// `1/s` for `i_norm`'s scaled sum: `s` the power of two at or above `max(maxᵢ |xᵢ|, √sq)`, so
/// every scaled term is at most 1 and the largest at least ¼ (except below 2⁻¹⁰²², where the
/// scale stops at 2¹⁰²²: still exact, and far from underflow).
fn norm_rescale<T: RevReal, V: Elements<T> + ?Sized>(x: &V, sq: f64) -> f64 {
    let m = largest_magnitude(x).max(sq.abs().sqrt());
    // m is normal or subnormal and finite here; 2^-e with 2^(e-1) < m ≤ 2^e.
    let e = m.log2().ceil() as i32;
    2f64.powi(-e.clamp(-1022, 1023))
}

reversible! {
    /// `out += Σᵢ x[i]`.
    pub fn i_sum<T: Arith, V: Elements<T>>(out: &mut T, x: &mut V) {
        for i in 0..x.len() {
            out += x[i];
        }
    }

    /// `out += x · y`.
    pub fn i_dot<T: Arith, V: Elements<T>, W: Elements<T>>(out: &mut T, x: &mut V, y: &mut W) {
        @safe assert_eq!(x.len(), y.len(), "i_dot: x has length {} but y has length {}", x.len(), y.len());
        for i in 0..x.len() {
            out += x[i] * y[i];
        }
    }

    /// `out += ‖x‖² = Σᵢ x[i]·conj(x[i])` (seed 000's `inorm2`: each element is copied into an
    /// ancilla and conjugated there, which also covers complex elements; for real ones it is
    /// `out += x[i] * x[i]`).
    pub fn i_norm2<T: Arith, V: Elements<T>>(out: &mut T, x: &mut V) {
        for i in 0..x.len() {
            let a = T::zero();
            a += x[i];
            CONJ(a);
            out += a * x[i];
            CONJ(a);
            a -= x[i];
            unlet a = T::zero();
        }
    }

    /// The Euclidean norm: `sq += ‖x‖²`, then `out += √sq`.
    ///
    /// Where the largest `|xᵢ|` is below 2⁻⁴⁸⁰ (≈ 3e-145) or above 2⁴⁸⁰, squares near or past
    /// the ends of f64's range could lose the norm (`‖[3e-170, 4e-170]‖²` is 0): there `out`'s
    /// increment is computed from `x` and `sq` scaled by a power of two (exact),
    /// `√(sq·r² + Σ(xᵢ·r)²) / r`, and `sq` still takes `‖x‖²` as f64 gives it (0, subnormal or
    /// ∞ where the squares leave the range).
    pub fn i_norm<T: RevReal, V: Elements<T>>(out: &mut T, sq: &mut T, x: &mut V) {
        if (squares_leave_range(&x), ~) {
            @routine {
                let r = T::from_f64(norm_rescale(&x, sq.value()));
                let t = T::zero();
                let a = T::zero();
                a += sq * r;
                t += a * r;
                a -= sq * r;
                for i in 0..x.len() {
                    a += x[i] * r;
                    t += a.powi(2);
                    a -= x[i] * r;
                }
                unlet a = T::zero();
                let u = T::zero();
                u += t.sqrt();
            }
            out += u / r;
            ~@routine;
            i_norm2(sq, x);
        } else {
            i_norm2(sq, x);
            out += sq.sqrt();
        }
    }

    /// `out += mean(x)`.
    pub fn i_mean<T: Arith, V: Elements<T>>(out: &mut T, x: &mut V) {
        @routine {
            let n = T::from_f64(x.len() as f64);
            let s = T::zero();
            i_sum(s, x);
        }
        out += s / n;
        ~@routine;
    }

    /// `out += var(x)`, the sample variance `Σ(xᵢ − x̄)² / (n − 1)`.
    pub fn i_var<T: RevReal, V: Elements<T>>(out: &mut T, x: &mut V) {
        @routine {
            let n1 = T::from_f64(x.len() as f64 - 1.0);
            let m = T::zero();
            i_mean(m, x);
            let ss = T::zero();
            for i in 0..x.len() {
                let d = T::zero();
                d += x[i] - m;
                ss += d.powi(2);
                d -= x[i] - m;
                unlet d = T::zero();
            }
        }
        out += ss / n1;
        ~@routine;
    }

    /// `out += max(x, 0)`.
    pub fn i_relu<T: RevReal>(out: &mut T, x: &mut T) {
        if (x.value() > 0.0, ~) {
            out += x;
        }
    }

    /// `out += log Σᵢ exp(x[i])`, shifted by the largest element for stability. Elements more
    /// than 746 below the largest (`−∞` among them: masked entries) are skipped: their `exp` is
    /// exactly 0 in `f64`, and so are their partials, and checked code would refuse `x[i] − m`
    /// where it is `−∞`.
    pub fn i_logsumexp<T: RevReal>(out: &mut T, x: &mut Vec<T>) {
        @safe assert!(!x.is_empty(), "i_logsumexp: x is empty (log Σ over no element is −∞)");
        @routine {
            let k = argmax(&x);
            let m = T::zero();
            m += x[k];
            let s = T::zero();
            for i in 0..x.len() {
                if (x[i].value() - m.value() >= -746.0 || (x[i].value() - m.value()).is_nan(), ~) {
                    let d = T::zero();
                    d += x[i] - m;
                    s += d.exp();
                    d -= x[i] - m;
                    unlet d = T::zero();
                }
            }
        }
        out += m;
        out += s.ln();
        ~@routine;
    }

    /// `y += W x + b`, with `W` row-major (`y.len()` × `x.len()`), seed 001 Listing 5.
    pub fn i_affine<T: Arith>(y: &mut Vec<T>, w: &mut Vec<T>, b: &mut Vec<T>, x: &mut Vec<T>) {
        @safe assert!(
            w.len() == y.len() * x.len() && b.len() == y.len(),
            "i_affine: W has {} elements, b {}, for y of length {} and x of length {}",
            w.len(), b.len(), y.len(), x.len()
        );
        @invcheckoff for i in 0..y.len() {
            for j in 0..x.len() {
                y[i] += w[i * x.len() + j] * x[j];
            }
            y[i] += b[i];
        }
    }

    /// `y += log x` for complex `x`: `y.re += ln|x|`, `y.im += arg x` (seed 001 Listings 3 and 6).
    /// `|x|` is one `hypot` instruction where the listings square, add and take the root: the
    /// square underflowed below |x| ≈ 1e-154 and overflowed above 1e154, long before `ln|x|`
    /// does (at (3e-160, 4e-160) the value was 1.5e-8 off and the gradient infinite, in checked
    /// code without an error; a hunter).
    pub fn i_complex_log<T: RevReal>(y: &mut Complex<T>, x: &mut Complex<T>) {
        @routine {
            let n = T::zero();
            n += x.re.hypot(x.im);
        }
        y.re += n.ln();
        y.im += x.im.atan2(x.re);
        ~@routine;
    }
}

/// A sparse matrix in compressed sparse row form.
///
/// ```
/// use adjoint_rev::library::Csr;
/// let a = Csr::from_triplets(2, 3, &[(0, 1, 2.0), (1, 0, 3.0), (1, 2, 4.0)]);
/// assert_eq!((a.row_ptr.clone(), a.col.clone(), a.val.clone()), (vec![0, 1, 3], vec![1, 0, 2], vec![2.0, 3.0, 4.0]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Where each row's entries start in `col`/`val` (length `rows + 1`).
    pub row_ptr: Vec<usize>,
    /// The column of each entry, increasing within a row.
    pub col: Vec<usize>,
    /// The value of each entry.
    pub val: Vec<T>,
}

impl<T: Copy> Csr<T> {
    /// Build from `(row, col, value)` triplets (any order, no duplicates).
    ///
    /// # Panics
    /// If an entry is outside the matrix, or two triplets name the same entry (the library's
    /// routines would read one of them each: `i_spmv` their sum, `i_sparse_dot` the last).
    ///
    /// ```should_panic
    /// use adjoint_rev::library::Csr;
    /// // panics: "entry (0, 0) is given twice"
    /// let _ = Csr::from_triplets(1, 1, &[(0, 0, 5.0), (0, 0, 7.0)]);
    /// ```
    pub fn from_triplets(rows: usize, cols: usize, t: &[(usize, usize, T)]) -> Self {
        let mut t = t.to_vec();
        t.sort_by_key(|&(r, c, _)| (r, c));
        if let Some(w) = t.windows(2).find(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1)) {
            panic!(
                "Csr::from_triplets: entry ({}, {}) is given twice (add the values first)",
                w[0].0, w[0].1
            );
        }
        let mut row_ptr = vec![0; rows + 1];
        for &(r, c, _) in &t {
            assert!(
                r < rows && c < cols,
                "entry ({r}, {c}) is outside a {rows}×{cols} matrix"
            );
            row_ptr[r + 1] += 1;
        }
        for i in 0..rows {
            row_ptr[i + 1] += row_ptr[i];
        }
        Csr {
            rows,
            cols,
            row_ptr,
            col: t.iter().map(|e| e.1).collect(),
            val: t.iter().map(|e| e.2).collect(),
        }
    }

    /// Where entry `(i, j)` is stored, or `usize::MAX` if it is zero (binary search in row `i`).
    pub fn find(&self, i: usize, j: usize) -> usize {
        let (a, b) = (self.row_ptr[i], self.row_ptr[i + 1]);
        match self.col[a..b].binary_search(&j) {
            Ok(k) => a + k,
            Err(_) => usize::MAX,
        }
    }
}

impl<X: Differentiable + Copy> Differentiable for Csr<X> {
    type Map<S: Copy> = Csr<X::Map<S>>;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Self::Map<S> {
        Csr {
            rows: self.rows,
            cols: self.cols,
            row_ptr: self.row_ptr.clone(),
            col: self.col.clone(),
            val: self.val.wrap(f),
        }
    }
    fn unwrap<S: Copy>(&self, m: &Self::Map<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
        Csr {
            val: self.val.unwrap(&m.val, f),
            ..self.clone()
        }
    }
    fn visit_mut<S: Copy>(m: &mut Self::Map<S>, f: &mut impl FnMut(&mut S)) {
        Vec::<X>::visit_mut(&mut m.val, f);
    }
}

reversible! {
    /// `out += Σᵢⱼ A[i,j]·B[i,j]` for sparse `A`, `B` of the same shape: each entry of `A` finds
    /// its partner in `B` by binary search, into an ancilla index that is uncomputed by searching
    /// again.
    pub fn i_sparse_dot<T: Arith>(out: &mut T, a: &mut Csr<T>, b: &mut Csr<T>) {
        @safe assert_eq!((a.rows, a.cols), (b.rows, b.cols), "i_sparse_dot: A is {}×{} but B is {}×{}", a.rows, a.cols, b.rows, b.cols);
        @invcheckoff for i in 0..a.rows {
            for p in a.row_ptr[i]..a.row_ptr[i + 1] {
                let q = b.find(i, a.col[p]);
                if (q != usize::MAX, ~) {
                    out += a.val[p] * b.val[q];
                }
                unlet q = b.find(i, a.col[p]);
            }
        }
    }

    /// `y += A x` for sparse `A` (NiLang's sparse `mul!`; any number type, complex included).
    pub fn i_spmv<T: Arith>(y: &mut Vec<T>, a: &mut Csr<T>, x: &mut Vec<T>) {
        @safe assert!(y.len() == a.rows && x.len() == a.cols, "i_spmv: A is {}×{} but x has length {} and y {}", a.rows, a.cols, x.len(), y.len());
        @invcheckoff for i in 0..a.rows {
            for p in a.row_ptr[i]..a.row_ptr[i + 1] {
                y[i] += a.val[p] * x[a.col[p]];
            }
        }
    }
}
