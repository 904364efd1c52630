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
/// `x + rot × x`.
pub fn rodrigues_rotate_point<T: Scalar>(rot: &[T; 3], x: &[T; 3]) -> [T; 3] {
    let sqtheta = rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2];
    if !sqtheta.is_zero() {
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

/// A sparse matrix in compressed sparse row form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csr {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row start offsets (`rows + 1`).
    pub row_ptr: Vec<usize>,
    /// Column of each nonzero.
    pub col_idx: Vec<usize>,
    /// Value of each nonzero.
    pub vals: Vec<f64>,
}

/// The BA Jacobian (3p × (11n + 3m + p), CSR) with `engine`: each observation's 2 × 15 block
/// comes from one 15-input recording, blocks are computed in parallel with rayon, and the matrix
/// is assembled inside the call.
pub fn ba_jacobian<E: Engine>(engine: &E, b: &BaInput) -> Csr {
    ba_jacobian_with(|input, feat| engine.ba_block(input, feat), b)
}

/// [`ba_jacobian`] with any block function (parallel over observations, CSR assembly).
pub fn ba_jacobian_with<B>(block: B, b: &BaInput) -> Csr
where
    B: Fn(&[f64; 15], &[f64]) -> [[f64; 15]; 2] + Sync,
{
    let blocks: Vec<[[f64; 15]; 2]> = (0..b.p)
        .into_par_iter()
        .map(|i| {
            let o = b.obs[i];
            let mut input = [0.0; 15];
            input[..11].copy_from_slice(&b.cams[11 * o[0]..11 * o[0] + 11]);
            input[11..14].copy_from_slice(&b.x[3 * o[1]..3 * o[1] + 3]);
            input[14] = b.w[i];
            block(&input, &b.feats[2 * i..2 * i + 2])
        })
        .collect();
    assemble(b, &blocks)
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
    ba_jacobian_with(ba_block_forward, b)
}

/// The BA Jacobian on adjoint's tape engine.
pub fn ba_jacobian_tape(b: &BaInput) -> Csr {
    ba_jacobian(&super::Tape, b)
}

/// Lay out the blocks: reprojection rows first (15 nonzeros each), then weight rows (1 each).
pub fn assemble(b: &BaInput, blocks: &[[[f64; 15]; 2]]) -> Csr {
    let nnz = 30 * b.p + b.p;
    let mut m = Csr {
        rows: 3 * b.p,
        cols: b.n_cols(),
        row_ptr: Vec::with_capacity(3 * b.p + 1),
        col_idx: Vec::with_capacity(nnz),
        vals: Vec::with_capacity(nnz),
    };
    m.row_ptr.push(0);
    for (i, blk) in blocks.iter().enumerate() {
        let [c, pt] = b.obs[i];
        let cols: Vec<usize> = (11 * c..11 * c + 11)
            .chain(11 * b.n + 3 * pt..11 * b.n + 3 * pt + 3)
            .chain([11 * b.n + 3 * b.m + i])
            .collect();
        for row in blk {
            m.col_idx.extend(&cols);
            m.vals.extend(row);
            m.row_ptr.push(m.col_idx.len());
        }
    }
    for i in 0..b.p {
        m.col_idx.push(11 * b.n + 3 * b.m + i);
        m.vals.push(-2.0 * b.w[i]);
        m.row_ptr.push(m.col_idx.len());
    }
    m
}
