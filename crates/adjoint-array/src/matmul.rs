//! Matrix products for [`Acc::matmul`](crate::Acc::matmul): the primal `C = A B` and the two
//! products of its adjoint, `Ā = C̄ Bᵀ` and `B̄ = Aᵀ C̄`, all by one function over strided
//! operands (a transpose is a change of strides, never a copy).
//!
//! The products run on `matrixmultiply`'s blocked, register-tiled kernels (AVX2/FMA chosen at
//! run time), the reason for its one `unsafe` call: a scalar kernel per output element, what the
//! engine's fused kernels would make of `generate` + `sum`, runs the GMM's `[1000, 20] ×
//! [20, 500]` product several times slower (BENCHMARKS.md, twelfth session).
//!
//! Work splits into tiles of output rows whose size depends only on the matrix sizes, never on
//! the thread count, and each tile sums its products in `matrixmultiply`'s fixed order; a
//! product with too few rows to split and a long inner dimension splits that dimension into
//! slabs instead, also fixed by the sizes, whose partial products are added in slab order.
//! Results are bit-identical for any number of threads.

use crate::buffers::{overwritten, recycle};
use crate::f32ops::r32;
use crate::kernel::{for_chunks, PAR_MIN};

/// A row-major or transposed view of a matrix: `rows × cols` elements of `data`, element
/// `(i, j)` at `i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub data: &'a [f64],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// The row-major `rows × cols` matrix `data`.
    pub fn new(data: &'a [f64], rows: usize, cols: usize) -> Self {
        View {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose (the same data).
    pub fn t(self) -> Self {
        View {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// Element `(i, j)`.
    fn at(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.rs + j * self.cs]
    }

    /// Whether every element the view names is finite. A view of its whole data (as is or
    /// transposed) tests the data as one slice: an OR of exponent tests, which vectorises (the
    /// element-wise test with an early exit cost the array GMM's gradient 1–3 %).
    pub fn all_finite(&self) -> bool {
        let n = self.rows * self.cols;
        let whole = n == self.data.len()
            && ((self.rs == self.cols && self.cs == 1) || (self.rs == 1 && self.cs == self.rows));
        if whole {
            // (all exponent bits set: ∞ or NaN)
            const EXP: u64 = 0x7ff0_0000_0000_0000;
            return self
                .data
                .iter()
                .fold(0u64, |acc, v| acc | u64::from(v.to_bits() & EXP == EXP))
                == 0;
        }
        (0..self.rows).all(|i| (0..self.cols).all(|j| self.at(i, j).is_finite()))
    }

    /// Whether every element the view names lies inside `data`.
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }
}

/// Output rows per parallel tile: at most 16 tiles of at least 64 rows (every tile packs all
/// of B again: with 8-row tiles packing cost as much as the products on the GMM's
/// `[1000, 20] × [20, 500]`), a multiple of 8 (the kernels' row tile). A function of the
/// sizes only.
fn tile_rows(m: usize) -> usize {
    m.div_ceil(16).next_multiple_of(8).max(64)
}

/// `A B` as [`matmul`] computes it, but each term whose adjoint factor is exactly zero (of `a`
/// where `gate_a`, else of `b`) sends nothing, even against an infinite or NaN other factor:
/// the adjoint products of a matrix product where the other operand is not finite, which the
/// dense kernel would fill with `0 · ∞ = NaN` (the crate's rule: a zero adjoint sends nothing
/// back). A plain triple loop: it runs only where an operand holds ∞ or NaN.
pub(crate) fn gated_matmul(a: View, b: View, gate_a: bool, f32: bool) -> Vec<f64> {
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions differ");
    assert!(
        a.in_bounds() && b.in_bounds(),
        "matmul: a view outside its data"
    );
    let (m, p, n) = (a.rows, a.cols, b.cols);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for k in 0..n {
            let (mut s, mut s32) = (0.0f64, 0.0f32);
            for j in 0..p {
                let (x, y) = (a.at(i, j), b.at(j, k));
                if (if gate_a { x } else { y }) == 0.0 {
                    continue;
                }
                if f32 {
                    s32 += x as f32 * y as f32;
                } else {
                    s += x * y;
                }
            }
            out[i * n + k] = if f32 { f64::from(s32) } else { s };
        }
    }
    out
}

/// `A B` as a row-major `a.rows × b.cols` matrix; `f32` computes in single precision
/// (operands rounded to `f32`, `f32` products and sums).
pub(crate) fn matmul(a: View, b: View, f32: bool) -> Vec<f64> {
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions differ");
    assert!(
        a.in_bounds() && b.in_bounds(),
        "matmul: a view outside its data"
    );
    let (m, n) = (a.rows, b.cols);
    if m < n && m < 2 * tile_rows(m) {
        // Few rows and more columns (the adjoint product Aᵀ C̄ of a tall A): row tiles of
        // Cᵀ = Bᵀ Aᵀ, so that the work still splits, then transposed.
        let ct = product(b.t(), a.t(), f32);
        let mut c = overwritten(m * n);
        for (j, row) in ct.chunks_exact(m.max(1)).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                c[i * n + j] = v;
            }
        }
        recycle(ct);
        return c;
    }
    product(a, b, f32)
}

/// Length of the inner-dimension slabs a product of `m` output rows and inner dimension `k`
/// is split into, or `None` to split it by rows only. A product with a small output and a
/// long inner dimension (the GMM adjoint's `Xᵀ C̄`, `[10, 10⁴] × [10⁴, 50]`) has one row tile:
/// all its work would run on one thread. Slabs of at least 512 are a function of the sizes
/// only (at most 16 of them), and their partial products are added in slab order, so results
/// stay bit-identical for any number of threads.
fn slab_len(m: usize, k: usize) -> Option<usize> {
    const MIN_SLAB: usize = 512;
    (m.div_ceil(tile_rows(m)) < 4 && k >= 2 * MIN_SLAB).then(|| k.div_ceil(16).max(MIN_SLAB))
}

/// `A B` in tiles of [`tile_rows`] rows, or by inner-dimension slabs (see [`slab_len`]).
fn product(a: View, b: View, f32: bool) -> Vec<f64> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return overwritten(m * n);
    }
    // (`f64` only: the `f32` product converts its operands whole, and its sums must round
    // like `f32`'s)
    if let Some(slab) = slab_len(m, k).filter(|_| !f32 && m * k * n >= PAR_MIN) {
        let slabs = k.div_ceil(slab);
        let mut parts = overwritten(slabs * m * n);
        for_chunks(&mut parts, m * n, m * k * n, |s, part| {
            let (p0, p1) = (s * slab, ((s + 1) * slab).min(k));
            let a_s = View {
                data: &a.data[p0 * a.cs..],
                cols: p1 - p0,
                ..a
            };
            let b_s = View {
                data: &b.data[p0 * b.rs..],
                rows: p1 - p0,
                ..b
            };
            tiled_into(a_s, b_s, part);
        });
        let mut c = overwritten(m * n);
        c.copy_from_slice(&parts[..m * n]);
        for part in parts.chunks_exact(m * n).skip(1) {
            c.iter_mut().zip(part).for_each(|(o, &v)| *o += v);
        }
        recycle(parts);
        return c;
    }
    tiled(a, b, f32)
}

/// `A B` in tiles of [`tile_rows`] rows.
fn tiled(a: View, b: View, f32: bool) -> Vec<f64> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    // dgemm with β = 0 writes every element
    let mut c = overwritten(m * n);
    if m == 0 || n == 0 {
        return c;
    }
    let rows = tile_rows(m);
    if f32 {
        let a32: Vec<f32> = a.data.iter().map(|&v| r32(v) as f32).collect();
        let b32: Vec<f32> = b.data.iter().map(|&v| r32(v) as f32).collect();
        let mut c32 = vec![0f32; m * n];
        for_chunks(&mut c32, rows * n, m * k * n, |t, ct| {
            let r0 = t * rows;
            let mr = ct.len() / n;
            // SAFETY: rows r0..r0 + mr of A (`mr ≤ m − r0`) and all of B lie inside `a32`
            // and `b32` (the views were checked in bounds and the copies have the same
            // lengths); `ct` is exactly `mr × n` row-major elements, written with strides
            // (n, 1), which do not alias; nothing else touches `ct` meanwhile.
            unsafe {
                matrixmultiply::sgemm(
                    mr,
                    k,
                    n,
                    1.0,
                    a32.as_ptr().add(r0 * a.rs),
                    a.rs as isize,
                    a.cs as isize,
                    b32.as_ptr(),
                    b.rs as isize,
                    b.cs as isize,
                    0.0,
                    ct.as_mut_ptr(),
                    n as isize,
                    1,
                )
            }
        });
        c.iter_mut().zip(&c32).for_each(|(o, &v)| *o = v as f64);
        return c;
    }
    tiled_into(a, b, &mut c);
    c
}

/// `A B` (`f64`) into `c` (`a.rows × b.cols`, row-major), in tiles of [`tile_rows`] rows.
fn tiled_into(a: View, b: View, c: &mut [f64]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(
        a.in_bounds() && b.in_bounds() && a.cols == b.rows && c.len() == m * n,
        "matmul: views and output of matching sizes"
    );
    if m == 0 || n == 0 {
        return;
    }
    let rows = tile_rows(m);
    for_chunks(c, rows * n, m * k * n, |t, ct| {
        let r0 = t * rows;
        let mr = ct.len() / n;
        // SAFETY: every element dgemm reads is `a.data[(r0 + i) * rs + p * cs]` (i < mr,
        // p < k) or `b.data[p * rs + j * cs]` (p < k, j < n), inside the slices by the
        // `in_bounds` assert above (a slab's views are sub-views of checked ones, and checked
        // again); `ct` is `mr × n` elements of this tile alone, written with non-aliasing
        // strides (n, 1).
        unsafe {
            matrixmultiply::dgemm(
                mr,
                k,
                n,
                1.0,
                a.data.as_ptr().add(r0 * a.rs),
                a.rs as isize,
                a.cs as isize,
                b.data.as_ptr(),
                b.rs as isize,
                b.cs as isize,
                0.0,
                ct.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook triple loop (its sums in the same order as no particular kernel).
    fn naive(a: View, b: View) -> Vec<f64> {
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] = (0..a.cols)
                    .map(|p| a.data[i * a.rs + p * a.cs] * b.data[p * b.rs + j * b.cs])
                    .sum();
            }
        }
        c
    }

    fn data(len: usize, seed: f64) -> Vec<f64> {
        (0..len).map(|i| (i as f64 * seed).sin()).collect()
    }

    #[test]
    fn products_and_transposed_products_match_the_triple_loop() {
        // Sizes around the tile edges (8-row tiles, partial tiles, one row, empty), and a long
        // inner dimension (split into slabs: 3000 = 5 × 512 + 440).
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 2),
            (17, 9, 33),
            (200, 20, 70),
            (0, 3, 4),
            (4, 3000, 6),
        ] {
            if k >= 1024 {
                assert_eq!(slab_len(m, k), Some(512));
            }
            let a = data(m * k, 0.37);
            let b = data(k * n, 0.11);
            let want = naive(View::new(&a, m, k), View::new(&b, k, n));
            let got = matmul(View::new(&a, m, k), View::new(&b, k, n), false);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                    "{m}x{k}x{n}: {g} vs {w}"
                );
            }
            // Aᵀ stored as (k × m): the same product through transposed strides.
            let at: Vec<f64> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
            let got_t = matmul(View::new(&at, k, m).t(), View::new(&b, k, n), false);
            assert_eq!(got_t.len(), want.len());
            for (g, w) in got_t.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()));
            }
        }
    }

    #[test]
    fn f32_products_round_like_f32() {
        let (m, k, n) = (9, 7, 5);
        let a = data(m * k, 0.3);
        let b = data(k * n, 0.7);
        let got = matmul(View::new(&a, m, k), View::new(&b, k, n), true);
        let a32: Vec<f64> = a.iter().map(|&v| v as f32 as f64).collect();
        let b32: Vec<f64> = b.iter().map(|&v| v as f32 as f64).collect();
        let want = naive(View::new(&a32, m, k), View::new(&b32, k, n));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(*g as f32 as f64, *g, "an f32 value");
            assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()));
        }
    }

    #[test]
    #[should_panic(expected = "outside its data")]
    fn a_view_past_its_data_is_refused() {
        let a = vec![1.0; 5];
        let b = vec![1.0; 4];
        matmul(View::new(&a, 3, 2), View::new(&b, 2, 2), false);
    }
}
