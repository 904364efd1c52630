//! GMM and BA written in reversible style (as NiLang did for seed 001 Tables 1–2), and the
//! reversible engine's ADBench column: gradients by running the inverse on `GVar`s.
//!
//! Every intermediate is an ancilla that is uncomputed; the data (points, features) come in as
//! read-only slices and enter the arithmetic through ancillas initialised from them.

use super::io::GmmInput;
use super::{gmm, Engine};
use adjoint::rev::library::i_logsumexp;
use adjoint::rev::prelude::*;

reversible! {
    /// `out += Σ_{ix ∈ from..to} logsumexp_k(αₖ + Σqₖ − ½‖Qₖ(xᵢ − μₖ)‖²)`, parameters
    /// `p = [α, μ, icf]` as in ADBench.
    pub fn i_gmm_data<T: RevReal>(
        out: &mut T,
        p: &mut Vec<T>,
        x: &mut &[f64],
        d: &mut usize,
        k: &mut usize,
        from: &mut usize,
        to: &mut usize,
    ) {
        let icf_sz = d * (d + 1) / 2;
        let icf0 = k + k * d;
        @routine {
            let sumq = vec![T::zero(); k];
            let qdiag = vec![T::zero(); k * d];
            for ik in 0..k {
                for j in 0..d {
                    sumq[ik] += p[icf0 + ik * icf_sz + j];
                    qdiag[ik * d + j] += p[icf0 + ik * icf_sz + j].exp();
                }
            }
        }
        for ix in from..to {
            // A fresh `mt` per point: a reused one carried its gradient (the softmax weights of
            // the points already done) into every later point's compute and uncompute, whose
            // contributions cancel only up to rounding — of ‖Qxc‖² ≈ 1e16 for a component 1e8
            // away, which left O(1) errors in the gradient.
            let mt = vec![T::zero(); k];
            @routine {
                for ik in 0..k {
                    @routine {
                        // Fresh `xc` and `qxc` per component, for the same reason: reused,
                        // they carried their gradients' rounding residue (of values ~e^q, or
                        // ~1e6 away) from one component's uncomputation into the next (∂/∂μ
                        // −0.5 for 0 at a component of weight 0; a hunter).
                        let xc = vec![T::zero(); d];
                        let qxc = vec![T::zero(); d];
                        for j in 0..d {
                            let xv = T::from_f64(x[ix * d + j]);
                            xc[j] += xv - p[k + ik * d + j];
                            unlet xv = T::from_f64(x[ix * d + j]);
                        }
                        for j in 0..d {
                            qxc[j] += qdiag[ik * d + j] * xc[j];
                        }
                        // The strictly lower triangle, column by column.
                        for i in 0..d {
                            for j in i + 1..d {
                                qxc[j] += p[icf0 + ik * icf_sz + d + i * (2 * d - i - 1) / 2 + (j - i - 1)] * xc[i];
                            }
                        }
                        let sq = T::zero();
                        for j in 0..d {
                            sq += qxc[j].powi(2);
                        }
                        let half = T::zero();
                        half += sq * 0.5;
                        let a = T::zero();
                        a += p[ik] + sumq[ik];
                    }
                    // One instruction from 0, so that its inverse leaves exactly 0: two
                    // (`mt += α + Σq; mt -= ½sq`) left fl(fl(A − S) + S) − A, all of −A where
                    // S ≫ A, and NaN where S overflowed.
                    mt[ik] += a - half;
                    ~@routine;
                }
            }
            i_logsumexp(out, mt);
            ~@routine;
            unlet mt = vec![T::zero(); k];
        }
        ~@routine;
        unlet icf0 = k + k * d;
        unlet icf_sz = d * (d + 1) / 2;
    }

    /// `out += −n·logsumexp(α) + Σₖ [½γ²(‖exp(qₖ)‖² + ‖lₖ‖²) − m·Σqₖ] + cst`.
    pub fn i_gmm_rest<T: RevReal>(out: &mut T, p: &mut Vec<T>, d: &mut usize, k: &mut usize, c: &mut [f64; 4]) {
        // c = [n, γ, m, constant]
        let icf_sz = d * (d + 1) / 2;
        let icf0 = k + k * d;
        @routine {
            let negn = T::from_f64(-c[0]);
            let hg2 = T::from_f64(0.5 * c[1] * c[1]);
            let mm = T::from_f64(c[2]);
            let al = vec![T::zero(); k];
            for ik in 0..k {
                al[ik] += p[ik];
            }
            let lse = T::zero();
            i_logsumexp(lse, al);
            let frob = T::zero();
            let sumq = T::zero();
            for ik in 0..k {
                for j in 0..d {
                    let e = T::zero();
                    e += p[icf0 + ik * icf_sz + j].exp();
                    frob += e.powi(2);
                    e -= p[icf0 + ik * icf_sz + j].exp();
                    unlet e = T::zero();
                    sumq += p[icf0 + ik * icf_sz + j];
                }
                for j in d..icf_sz {
                    frob += p[icf0 + ik * icf_sz + j].powi(2);
                }
            }
        }
        out += lse * negn;
        out += frob * hg2;
        out -= sumq * mm;
        let cst = T::from_f64(c[3]);
        out += cst;
        unlet cst = T::from_f64(c[3]);
        ~@routine;
        unlet icf0 = k + k * d;
        unlet icf_sz = d * (d + 1) / 2;
    }

    /// `out += rotate(v[0..3]) · x` (`v` is an observation's 15 inputs) by Rodrigues' formula (`x + r × x` when θ = 0), as the
    /// reference.
    pub fn i_rodrigues<T: RevReal>(out: &mut [T; 3], v: &mut [T; 15], x: &mut [T; 3]) {
        @routine {
            let sqt = T::zero();
            sqt += v[0].powi(2);
            sqt += v[1].powi(2);
            sqt += v[2].powi(2);
        }
        if (sqt.value() != 0.0, ~) {
            @routine {
                let th = T::zero();
                th += sqt.sqrt();
                let s = T::zero();
                s += th.sin();
                let co = T::zero();
                co += th.cos();
                let w = [T::zero(); 3];
                for i in 0..3 {
                    w[i] += v[i] / th;
                }
                let omc = T::one();
                omc -= co;
                let dot = T::zero();
                for i in 0..3 {
                    dot += w[i] * x[i];
                }
                let tmp = T::zero();
                tmp += dot * omc;
                let wx = [T::zero(); 3];
                wx[0] += w[1] * x[2];
                wx[0] -= w[2] * x[1];
                wx[1] += w[2] * x[0];
                wx[1] -= w[0] * x[2];
                wx[2] += w[0] * x[1];
                wx[2] -= w[1] * x[0];
            }
            for i in 0..3 {
                out[i] += x[i] * co;
                out[i] += wx[i] * s;
                out[i] += w[i] * tmp;
            }
            ~@routine;
        } else {
            for i in 0..3 {
                out[i] += x[i];
            }
            out[0] += v[1] * x[2];
            out[0] -= v[2] * x[1];
            out[1] += v[2] * x[0];
            out[1] -= v[0] * x[2];
            out[2] += v[0] * x[1];
            out[2] -= v[1] * x[0];
        }
        ~@routine;
    }

    /// `e += w·(project(cam, X) − feat)` for one observation, `v = [cam (11), X (3), w]`.
    pub fn i_reproj<T: RevReal>(e: &mut [T; 2], v: &mut [T; 15], feat: &mut [f64; 2]) {
        @routine {
            let xo = [T::zero(); 3];
            for i in 0..3 {
                xo[i] += v[11 + i] - v[3 + i];
            }
            let xc = [T::zero(); 3];
            i_rodrigues(xc, v, xo);
            let pr = [T::zero(); 2];
            for i in 0..2 {
                pr[i] += xc[i] / xc[2];
            }
            let rsq = T::zero();
            rsq += pr[0].powi(2);
            rsq += pr[1].powi(2);
            let rsq2 = T::zero();
            rsq2 += rsq.powi(2);
            let l = T::one();
            l += v[9] * rsq;
            l += v[10] * rsq2;
            let pl = [T::zero(); 2];
            let proj = [T::zero(); 2];
            let dif = [T::zero(); 2];
            for i in 0..2 {
                pl[i] += pr[i] * l;
                proj[i] += pl[i] * v[6];
                proj[i] += v[7 + i];
                let f = T::from_f64(feat[i]);
                dif[i] += proj[i] - f;
                unlet f = T::from_f64(feat[i]);
            }
        }
        for i in 0..2 {
            e[i] += v[14] * dif[i];
        }
        ~@routine;
    }
}

/// The reversible engine as an ADBench column.
pub struct Reversible;

impl Engine for Reversible {
    fn name(&self) -> &'static str {
        "reversible"
    }

    fn gmm_data_grad(&self, g: &GmmInput, p: &[f64], from: usize, to: usize) -> (f64, Vec<f64>) {
        let (mut out, mut pv, mut x) = (0.0f64, p.to_vec(), &g.x[..]);
        let (mut d, mut k, mut f, mut t) = (g.d, g.k, from, to);
        i_gmm_data::call_unchecked(&mut out, &mut pv, &mut x, &mut d, &mut k, &mut f, &mut t)
            .expect("unchecked code reports no errors");
        let mut go = GVar::new(out, 1.0);
        let mut gp: Vec<GVar<f64>> = pv.iter().map(|&v| GVar::new(v, 0.0)).collect();
        i_gmm_data::uncall_unchecked(&mut go, &mut gp, &mut x, &mut d, &mut k, &mut f, &mut t)
            .expect("unchecked code reports no errors");
        (out, gp.iter().map(|v| v.g).collect())
    }

    fn gmm_rest_grad(&self, g: &GmmInput, p: &[f64]) -> (f64, Vec<f64>) {
        let df = g.d as f64;
        let constant = -(g.n as f64) * df * 0.5 * (2.0 * gmm::PI).ln();
        let nn = df + g.m + 1.0;
        let wishart_c =
            nn * df * (g.gamma.ln() - 0.5 * 2f64.ln()) - gmm::log_gamma_distrib(0.5 * nn, g.d);
        let mut c = [g.n as f64, g.gamma, g.m, constant - g.k as f64 * wishart_c];
        let (mut out, mut pv, mut d, mut k) = (0.0f64, p.to_vec(), g.d, g.k);
        i_gmm_rest::call_unchecked(&mut out, &mut pv, &mut d, &mut k, &mut c).expect("unchecked");
        let mut go = GVar::new(out, 1.0);
        let mut gp: Vec<GVar<f64>> = pv.iter().map(|&v| GVar::new(v, 0.0)).collect();
        i_gmm_rest::uncall_unchecked(&mut go, &mut gp, &mut d, &mut k, &mut c).expect("unchecked");
        (out, gp.iter().map(|v| v.g).collect())
    }

    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
        super::ba_block_from_rows(self, input, feat)
    }
    fn ba_rows(&self, input: &[f64; 15], feat: &[f64], rows: &mut [f64; 30]) {
        // One forward call, then one inverse on GVars whose gradients have a lane per
        // residual (both Jacobian rows in one run); all on the stack.
        let mut f = [feat[0], feat[1]];
        let (mut e, mut v) = ([0.0f64; 2], *input);
        i_reproj::call_unchecked(&mut e, &mut v, &mut f).expect("unchecked");
        let mut ge = [
            GVar::new(e[0], Cotangents::unit(0)),
            GVar::new(e[1], Cotangents::unit(1)),
        ];
        let mut gv = v.map(|x| GVar::new(x, Cotangents::<f64, 2>::zero()));
        i_reproj::uncall_unchecked(&mut ge, &mut gv, &mut f).expect("unchecked");
        // Lane r of every input's gradient is row r.
        for (i, v) in gv.iter().enumerate() {
            rows[i] = v.g[0];
            rows[15 + i] = v.g[1];
        }
    }
}
