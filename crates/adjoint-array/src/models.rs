//! Benchmark programs written with the combinators.
//!
//! [`Gmm`](crate::models::Gmm) — ADBench's Gaussian mixture model objective (seed 004 Appendix B.1), with the same
//! parameter layout as `adjoint-bench`'s `adbench::gmm` (`p = [α (K), μ (K×d), icf (K×d(d+1)/2)]`,
//! icf = d log-diagonal entries then the strictly lower triangle column by column).

use crate::{lit, Acc, Builder, Exp, Program, Result};

/// The reference implementation's π (a quirk of ADBench kept for comparable numbers).
#[allow(clippy::approx_constant)]
const PI: f64 = 3.14159265359;

/// ln Γ_d(a), the log multivariate gamma function.
fn log_gamma_distrib(a: f64, d: usize) -> f64 {
    let df = d as f64;
    0.25 * df * (df - 1.0) * PI.ln()
        + (1..=d)
            .map(|j| {
                adjoint_core::rules::unary(
                    adjoint_core::rules::Op1::Lgamma,
                    a + 0.5 * (1.0 - j as f64),
                )
                .value
            })
            .sum::<f64>()
}

/// The GMM objective as an array program, built once for sizes `(n, d, k)`; inputs are
/// `alphas [k]`, `means [k, d]`, `icf [k, d(d+1)/2]` (differentiated) and the points
/// `x [n, d]` (data).
///
/// ```
/// use adjoint_array::models::Gmm;
/// let (n, d, k) = (3, 2, 2);
/// let gmm = Gmm::new(n, d, k, 1.0, 0.0).unwrap();
/// let alphas = [0.1, -0.2];
/// let means = [0.0, 0.5, 1.0, -1.0];
/// let icf = [0.1, 0.2, 0.3, -0.1, 0.0, 0.4];
/// let x = [0.3, 0.1, -0.5, 0.8, 1.1, 0.0];
/// let (v, g) = gmm.gradient(&alphas, &means, &icf, &x).unwrap();
/// assert_eq!(v, gmm.objective(&alphas, &means, &icf, &x).unwrap());
/// assert_eq!(g.len(), k + k * d + k * d * (d + 1) / 2);
/// ```
#[derive(Clone, Debug)]
pub struct Gmm {
    /// The program: one scalar output.
    pub program: Program,
    /// Points.
    pub n: usize,
    /// Dimension.
    pub d: usize,
    /// Components.
    pub k: usize,
}

impl Gmm {
    /// Build the program for `n` points in dimension `d` with `k` components and Wishart
    /// prior `(gamma, m)`.
    pub fn new(n: usize, d: usize, k: usize, gamma: f64, m: f64) -> Result<Self> {
        let icf_sz = d * (d + 1) / 2;
        let b = Builder::new();
        let alphas = b.input(&[k]);
        let means = b.input(&[k, d]);
        let icf = b.input(&[k, icf_sz]);
        let x = b.constant_input(&[n, d]);
        let c = |v: usize| lit(v as f64);
        let qdiag = b.generate(&[k, d], |i| icf.at(&[i[0], i[1]]).exp());
        let sum_q =
            |ik: Exp| -> Exp { (1..d).fold(icf.at(&[ik, c(0)]), |s, j| s + icf.at(&[ik, c(j)])) };
        let base = b.generate(&[k], |i| alphas.at(&[i[0]]) + sum_q(i[0]));
        // main[i, k] = α_k + Σq_k − ½‖Q_k (x_i − μ_k)‖², the inner loops unrolled (d is known).
        let main = b.generate(&[n, k], |i| {
            let (ix, ik) = (i[0], i[1]);
            let xc: Vec<Exp> = (0..d)
                .map(|j| x.at(&[ix, c(j)]) - means.at(&[ik, c(j)]))
                .collect();
            let mut qxc: Vec<Exp> = (0..d).map(|j| qdiag.at(&[ik, c(j)]) * xc[j]).collect();
            let mut li = d;
            for (col, &xi) in xc.iter().enumerate() {
                for q in qxc.iter_mut().skip(col + 1) {
                    *q = *q + icf.at(&[ik, c(li)]) * xi;
                    li += 1;
                }
            }
            let sq = qxc[1..].iter().fold(qxc[0] * qxc[0], |s, &v| s + v * v);
            base.at(&[ik]) - sq * 0.5
        });
        let data_term = logsumexp_rows(&b, &main).sum();
        let alse = logsumexp_rows(&b, &alphas);
        let df = d as f64;
        let constant = -(n as f64) * df * 0.5 * (2.0 * PI).ln();
        let nn = df + m + 1.0;
        let wishart_c = nn * df * (gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_distrib(0.5 * nn, d);
        let prior = b
            .generate(&[k], |i| {
                let ik = i[0];
                let frob = (0..icf_sz).fold(lit(0.0), |s, j| {
                    let v = icf.at(&[ik, c(j)]);
                    if j < d {
                        let e = v.exp();
                        s + e * e
                    } else {
                        s + v * v
                    }
                });
                frob * (0.5 * gamma * gamma) - sum_q(ik) * m
            })
            .sum();
        let rest = constant - k as f64 * wishart_c;
        let total = b.generate(&[], |_| {
            data_term.the() + (alse.the() * -(n as f64) + prior.the() + rest)
        });
        Ok(Gmm {
            program: b.build_scalar(&total)?,
            n,
            d,
            k,
        })
    }

    /// The objective.
    pub fn objective(&self, alphas: &[f64], means: &[f64], icf: &[f64], x: &[f64]) -> Result<f64> {
        Ok(self.program.run(&[alphas, means, icf, x])?[0].data()[0])
    }

    /// Objective and gradient, the gradient laid out as `[α, μ, icf]`.
    pub fn gradient(
        &self,
        alphas: &[f64],
        means: &[f64],
        icf: &[f64],
        x: &[f64],
    ) -> Result<(f64, Vec<f64>)> {
        let g = self.program.gradient_a(&[alphas, means, icf, x])?;
        let mut out = Vec::with_capacity(alphas.len() + means.len() + icf.len());
        for gi in &g.grads[..3] {
            out.extend_from_slice(gi);
        }
        Ok((g.value, out))
    }
}

/// Row-wise logsumexp over the innermost axis: `ln Σ exp(v − max) + max`, the maximum held
/// constant for the gradient (as ADBench's reference does).
pub fn logsumexp_rows(b: &Builder, a: &Acc) -> Acc {
    let mx = a.maximum().stop_gradient();
    let shape = a.shape().to_vec();
    let r = shape.len();
    let e = b
        .generate(&shape, |i| (a.at(i) - mx.at(&i[..r - 1])).exp())
        .sum();
    e.zip_with(&mx, |s, m| s.ln() + m)
}
