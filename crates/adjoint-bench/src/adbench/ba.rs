//! ADBench's bundle adjustment objective, written once over [`Scalar`], and its sparse Jacobian.

use super::io::BaInput;
use super::{c, Engine, Scalar};
use rayon::prelude::*;

fn cross<T: Scalar>(a: &[T; 3], b: &[T; 3]) -> [T; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Rotate `x` by the angle-axis vector `rot` (Rodrigues); for θ² = 0 the reference uses
/// `x + rot × x`. (θ² compared by value, as ADBench's `sqtheta != 0`: `is_zero` is false for
/// an active zero.)
pub fn rodrigues_rotate_point<T: Scalar>(rot: &[T; 3], x: &[T; 3]) -> [T; 3] {
    let sqtheta = rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2];
    if sqtheta != T::zero() {
        let theta = sqtheta.sqrt();
        let (s, co) = (theta.sin(), theta.cos());
        let inv = theta.recip();
        let w = [rot[0] * inv, rot[1] * inv, rot[2] * inv];
        let wx = cross(&w, x);
        let tmp = (w[0] * x[0] + w[1] * x[1] + w[2] * x[2]) * (c::<T>(1.0) - co);
        [
            x[0] * co + wx[0] * s + w[0] * tmp,
            x[1] * co + wx[1] * s + w[1] * tmp,
            x[2] * co + wx[2] * s + w[2] * tmp,
        ]
    } else {
        let rx = cross(rot, x);
        [x[0] + rx[0], x[1] + rx[1], x[2] + rx[2]]
    }
}

/// Project point `x` through camera `cam` (r, C, f, u0 v0, k1 k2).
pub fn project<T: Scalar>(cam: &[T], x: &[T]) -> [T; 2] {
    let xo = [x[0] - cam[3], x[1] - cam[4], x[2] - cam[5]];
    let xcam = rodrigues_rotate_point(&[cam[0], cam[1], cam[2]], &xo);
    let p = [xcam[0] / xcam[2], xcam[1] / xcam[2]];
    let rsq = p[0] * p[0] + p[1] * p[1];
    let l = c::<T>(1.0) + cam[9] * rsq + cam[10] * rsq * rsq;
    [p[0] * l * cam[6] + cam[7], p[1] * l * cam[6] + cam[8]]
}

/// The two reprojection residuals of one observation: `w · (project(cam, x) − feat)`.
pub fn reproj_error<T: Scalar>(cam: &[T], x: &[T], w: T, feat: &[f64]) -> [T; 2] {
    let pr = project(cam, x);
    [w * (pr[0] - feat[0]), w * (pr[1] - feat[1])]
}

/// All residuals: 2p reprojection errors, then p weight errors `1 − w²`.
pub fn ba_objective(b: &BaInput, out: &mut Vec<f64>) {
    out.clear();
    for (i, o) in b.obs.iter().enumerate() {
        let e = reproj_error(
            &b.cams[11 * o[0]..11 * o[0] + 11],
            &b.x[3 * o[1]..3 * o[1] + 3],
            b.w[i],
            &b.feats[2 * i..2 * i + 2],
        );
        out.extend(e);
    }
    out.extend(b.w.iter().map(|w| 1.0 - w * w));
}

/// A sparse matrix in compressed sparse row form. Offsets and columns are 32-bit, as in
/// ADBench's `BASparseMat` (`std::vector<int>`): with `usize` they were half the bytes a BA
/// Jacobian call writes (now a third).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csr {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row start offsets (`rows + 1`).
    pub row_ptr: Vec<u32>,
    /// Column of each nonzero.
    pub col_idx: Vec<u32>,
    /// Value of each nonzero.
    pub vals: Vec<f64>,
}

/// The BA Jacobian (3p × (11n + 3m + p), CSR) with `engine`: each observation's 2 × 15 block
/// comes from one 15-input recording, blocks are computed in parallel with rayon, and the matrix
/// is assembled inside the call.
pub fn ba_jacobian<E: Engine>(engine: &E, b: &BaInput) -> Csr {
    let mut j = Csr::default();
    ba_jacobian_into(engine, b, &mut j);
    j
}

/// [`ba_jacobian`] into `out`, whose arrays are reused (as ADBench's C++ harness clears and
/// refills its `BASparseMat`, and as the objective reuses its residual vector): every index and
/// value is written again, only the allocation is kept.
pub fn ba_jacobian_into<E: Engine>(engine: &E, b: &BaInput, out: &mut Csr) {
    csr_from_rows(b, out, |i, input, rows| {
        block_input(b, i, input);
        engine.ba_rows(input, &b.feats[2 * i..2 * i + 2], rows)
    })
}

/// Observation `i`'s 15 differentiated inputs: its camera, its point, its weight, written
/// into `input`. (Returned by value, the array was built on the stack and then moved with
/// 16-byte copies that straddled the stores that had just built it; the failed store
/// forwarding cost 14 % of the SSA Jacobian.)
#[inline(always)]
fn block_input(b: &BaInput, i: usize, input: &mut [f64; 15]) {
    let o = b.obs[i];
    input[..11].copy_from_slice(&b.cams[11 * o[0]..11 * o[0] + 11]);
    input[11..14].copy_from_slice(&b.x[3 * o[1]..3 * o[1] + 3]);
    input[14] = b.w[i];
}

/// [`ba_jacobian_into`] with any block function: each observation's block is computed and
/// written into its place of the CSR arrays in parallel (the layout is fixed by `p`, so there is
/// no serial assembly step).
pub fn ba_jacobian_with<B>(block: B, b: &BaInput, out: &mut Csr)
where
    B: Fn(&[f64; 15], &[f64]) -> [[f64; 15]; 2] + Sync,
{
    csr_from_rows(b, out, |i, input, rows| {
        block_input(b, i, input);
        let blk = block(input, &b.feats[2 * i..2 * i + 2]);
        rows[..15].copy_from_slice(&blk[0]);
        rows[15..].copy_from_slice(&blk[1]);
    })
}

/// The CSR matrix whose observation `i` has the two rows `fill(i, scratch, rows)` writes
/// (`scratch` is space for the block's inputs, reused from one observation to the next): reprojection
/// rows first (15 nonzeros each: camera, point, weight columns), then the weight rows (1 each).
/// Rows are filled in parallel, each observation's 30 values and columns in place.
/// `out`'s arrays are resized (a no-op when reused for the same input) and every entry written.
fn csr_from_rows(
    b: &BaInput,
    out: &mut Csr,
    fill: impl Fn(usize, &mut [f64; 15], &mut [f64; 30]) + Sync,
) {
    let p = b.p;
    out.rows = 3 * p;
    out.cols = b.n_cols();
    assert!(
        31 * p <= u32::MAX as usize && out.cols <= u32::MAX as usize,
        "BA input too large for 32-bit CSR indices: {} nonzeros, {} columns",
        31 * p,
        out.cols
    );
    // Lossless from here on: every column is below `cols` and every offset at most `31 p`.
    let ix = |v: usize| v as u32;
    out.col_idx.resize(31 * p, 0);
    out.vals.resize(31 * p, 0.0);
    out.row_ptr.resize(3 * p + 1, 0);
    let (c_obs, c_w) = out.col_idx.split_at_mut(30 * p);
    let (v_obs, v_w) = out.vals.split_at_mut(30 * p);
    let (ptr_obs, ptr_rest) = out.row_ptr.split_at_mut(2 * p);
    let (ptr_w, ptr_end) = ptr_rest.split_at_mut(p);
    ptr_end[0] = ix(31 * p);
    let wcol = 11 * b.n + 3 * b.m;
    // Observations go to rayon in runs of `RUN` (a plain loop inside each task), each task
    // writing its observations' two rows, weight rows and row offsets: one parallel pass (the
    // weight rows and the offsets were two more, each a fork and join of every thread).
    const RUN: usize = 64;
    c_obs
        .par_chunks_mut(30 * RUN)
        .zip(v_obs.par_chunks_mut(30 * RUN))
        .zip(c_w.par_chunks_mut(RUN).zip(v_w.par_chunks_mut(RUN)))
        .zip(
            ptr_obs
                .par_chunks_mut(2 * RUN)
                .zip(ptr_w.par_chunks_mut(RUN)),
        )
        .enumerate()
        .for_each(|(t, (((cols, vals), (c_w, v_w)), (ptr_obs, ptr_w)))| {
            let rows = cols.chunks_exact_mut(30).zip(vals.chunks_exact_mut(30));
            let mut scratch = [0.0; 15];
            for (i, (cols, vs)) in (t * RUN..).zip(rows) {
                fill(
                    i,
                    &mut scratch,
                    vs.try_into().expect("30 values per observation"),
                );
                // Both rows have the same 15 columns: camera, point, weight. (Written, never
                // read back: copying the first row's freshly stored columns into the second
                // stalled on store forwarding.)
                let [c, pt] = b.obs[i];
                let (c0, p0, w0) = (ix(11 * c), ix(11 * b.n + 3 * pt), ix(wcol + i));
                for row in cols.chunks_exact_mut(15) {
                    for (k, col) in row[..11].iter_mut().enumerate() {
                        *col = c0 + k as u32;
                    }
                    for (k, col) in row[11..14].iter_mut().enumerate() {
                        *col = p0 + k as u32;
                    }
                    row[14] = w0;
                }
            }
            // The weight rows `1 − wᵢ²` (one nonzero, −2wᵢ) and the row offsets: 15 per
            // reprojection row, then one per weight row after the `30 p` of those.
            for (i, (c, v)) in (t * RUN..).zip(c_w.iter_mut().zip(v_w.iter_mut())) {
                *c = ix(wcol + i);
                *v = -2.0 * b.w[i];
            }
            for (r, start) in (2 * t * RUN..).zip(ptr_obs.iter_mut()) {
                *start = ix(15 * r);
            }
            for (i, start) in (t * RUN..).zip(ptr_w.iter_mut()) {
                *start = ix(30 * p + i);
            }
        });
}

/// One BA block by vector forward mode: a single evaluation on `DualVec<15>`.
pub fn ba_block_forward(input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
    let j = adjoint::forward::jacobian(
        |v| reproj_error(&v[..11], &v[11..14], v[14], feat).to_vec(),
        input,
    );
    [j[0], j[1]]
}

/// The BA Jacobian by vector forward mode (15 tangents per observation).
pub fn ba_jacobian_forward(b: &BaInput) -> Csr {
    let mut j = Csr::default();
    ba_jacobian_with(ba_block_forward, b, &mut j);
    j
}

/// The BA Jacobian on adjoint's tape engine.
pub fn ba_jacobian_tape(b: &BaInput) -> Csr {
    ba_jacobian(&super::Tape, b)
}

/// Lay out precomputed blocks (one per observation) as the CSR matrix.
pub fn assemble(b: &BaInput, blocks: &[[[f64; 15]; 2]], out: &mut Csr) {
    assert_eq!(blocks.len(), b.p, "one block per observation");
    csr_from_rows(b, out, |i, _, rows| {
        rows[..15].copy_from_slice(&blocks[i][0]);
        rows[15..].copy_from_slice(&blocks[i][1]);
    })
}

/// [`assemble`] around blocks already in place: `out.vals` starts with every observation's 30
/// numbers (its two rows), as an array program writes its `[p, 30]` output straight into the
/// CSR's values (`run_into`); the weight rows and all indices are filled in.
pub fn assemble_in_place(b: &BaInput, out: &mut Csr) {
    assert!(
        out.vals.len() >= 30 * b.p,
        "30 numbers per observation in place"
    );
    csr_from_rows(b, out, |_, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adbench::io;

    /// The CSR layout written out serially, row by row, as ADBench's reference builds it.
    fn serial(b: &BaInput, blocks: &[[[f64; 15]; 2]]) -> Csr {
        let mut m = Csr {
            rows: 3 * b.p,
            cols: b.n_cols(),
            row_ptr: vec![0],
            ..Csr::default()
        };
        for (i, blk) in blocks.iter().enumerate() {
            let [c, pt] = b.obs[i];
            for row in blk {
                for k in 0..11 {
                    m.col_idx.push((11 * c + k) as u32);
                }
                for k in 0..3 {
                    m.col_idx.push((11 * b.n + 3 * pt + k) as u32);
                }
                m.col_idx.push((11 * b.n + 3 * b.m + i) as u32);
                m.vals.extend(row);
                m.row_ptr.push(m.col_idx.len() as u32);
            }
        }
        for i in 0..b.p {
            m.col_idx.push((11 * b.n + 3 * b.m + i) as u32);
            m.vals.push(-2.0 * b.w[i]);
            m.row_ptr.push(m.col_idx.len() as u32);
        }
        m
    }

    #[test]
    fn parallel_assembly_equals_the_serial_layout() {
        let b = io::parse_ba(&io::write_ba(4, 7, 23), "generated").unwrap();
        let blocks: Vec<[[f64; 15]; 2]> = (0..b.p)
            .map(|i| {
                let mut blk = [[0.0; 15]; 2];
                for (r, row) in blk.iter_mut().enumerate() {
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = (i * 100 + r * 20 + k) as f64;
                    }
                }
                blk
            })
            .collect();
        let mut j = Csr::default();
        assemble(&b, &blocks, &mut j);
        assert_eq!(j, serial(&b, &blocks));
        // reused for the same input (as the timing loop does), it is rebuilt identically
        assemble(&b, &blocks, &mut j);
        assert_eq!(j, serial(&b, &blocks));
        let j = ba_jacobian_forward(&b);
        assert_eq!(j.row_ptr, serial(&b, &blocks).row_ptr);
    }
}
