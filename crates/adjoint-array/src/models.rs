//! Benchmark programs written with the combinators.
//!
//! [`Gmm`](crate::models::Gmm) — ADBench's Gaussian mixture model objective (seed 004 Appendix B.1), with the same
//! parameter layout as `adjoint-bench`'s `adbench::gmm` (`p = [α (K), μ (K×d), icf (K×d(d+1)/2)]`,
//! icf = d log-diagonal entries then the strictly lower triangle column by column).
//!
//! [`Lstm`](crate::models::Lstm) — ADBench's diagonal LSTM: the time loop is one
//! [`Builder::scan_n`](crate::Builder::scan_n) (each hidden unit a lane, every layer's `(h, cell)`
//! its state), the loss data-parallel over the stored states.
//!
//! [`Ba`](crate::models::Ba) — ADBench's bundle adjustment Jacobian blocks: [`jacobian_e`]
//! inside a `generate_n` over observations (seed 004's `gradientE` use).

use crate::{jacobian_e, lit, Acc, Backend, Builder, Error, Exp, Program, Result};

/// The reference implementation's π (a quirk of ADBench kept for comparable numbers).
#[allow(clippy::approx_constant)]
const PI: f64 = 3.14159265359;

/// From this dimension on, [`Gmm`] computes every `Q_k x_i` as one [`Acc::matmul`]; below
/// it, an unrolled kernel per (point, component) is faster (d = 2: 0.28 against 0.44 ms for
/// the gradient at n = 1000, K = 5; d = 10: 0.76 against 0.64 ms; BENCHMARKS.md).
pub const MATMUL_MIN_D: usize = 4;

/// From this dimension on, [`Gmm::new`] writes `Q_k (μ_k − x_0)` and the squared norms
/// `‖Q_k (x_i − μ_k)‖²` as sums over arrays; below it (and from [`MATMUL_MIN_D`]) each is d
/// reads unrolled into one element, which the CPU backend runs faster (gradient at 1k K25 on 2
/// threads: d = 10 1.1 against 1.6 ms, d = 32 4.8 against 5.7; d = 64 19.8 against 18.4–19.0).
/// On the GPU the sums over arrays are faster at every d ([`Gmm::for_backend`]; BENCHMARKS.md,
/// twentieth session).
pub const NORMS_AS_ARRAYS_MIN_D: usize = 64;

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
/// *Accuracy.* From `d = 4` ([`MATMUL_MIN_D`]) `Q_k (x_i − μ_k)` is computed as
/// `Q_k (x_i − x_0) − Q_k (μ_k − x_0)` (one matrix product for every point and component), so
/// it carries a rounding error of about `ε · ‖Q_k‖ · S`, with `S` the spread of the points and
/// means around the first point, where the direct form's is `ε · ‖Q_k (x_i − μ_k)‖`. On data
/// whose clusters lie far apart compared with their widths the relative error grows with the
/// ratio: about 1e-8 in the objective for clusters 1e10 widths apart (ADBench's data: ~1e-15).
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
    ///
    /// ```
    /// use adjoint_array::models::Gmm;
    /// let (n, d, k) = (4, 2, 3);
    /// let gmm = Gmm::new(n, d, k, 1.0, 0.0).unwrap();
    /// let alphas = [0.2, -0.1, 0.4];
    /// let means = [0.0, 1.0, -1.0, 0.5, 0.3, -0.2];
    /// let icf = [0.1, -0.2, 0.3, 0.0, 0.2, -0.1, -0.3, 0.1, 0.2]; // k × d(d+1)/2
    /// let x = [0.1, 0.9, -0.8, 0.4, 0.5, 0.0, 1.2, -0.6];
    /// let (v, g) = gmm.gradient(&alphas, &means, &icf, &x).unwrap();
    /// assert_eq!(v, gmm.objective(&alphas, &means, &icf, &x).unwrap());
    /// // ∂/∂μ[1, 0] (the gradient is laid out [α, μ, icf]) against a central difference
    /// let f = |h: f64| {
    ///     let mut m = means;
    ///     m[2] += h;
    ///     gmm.objective(&alphas, &m, &icf, &x).unwrap()
    /// };
    /// let fd = (f(1e-6) - f(-1e-6)) / 2e-6;
    /// assert!((g[k + 2] - fd).abs() < 1e-7 * (1.0 + fd.abs()));
    /// ```
    pub fn new(n: usize, d: usize, k: usize, gamma: f64, m: f64) -> Result<Self> {
        Self::with_norms_as_arrays(n, d, k, gamma, m, d >= NORMS_AS_ARRAYS_MIN_D)
    }

    /// [`Gmm::new`] in the form that runs fastest on `backend`: on the GPU the squared norms
    /// are sums over arrays at every d from [`MATMUL_MIN_D`] (see [`NORMS_AS_ARRAYS_MIN_D`]).
    ///
    /// ```
    /// use adjoint_array::models::Gmm;
    /// use adjoint_array::Backend;
    /// let backend = Backend::cuda().unwrap_or_else(|_| Backend::cpu());
    /// let gmm = Gmm::for_backend(4, 5, 2, 1.0, 0.0, &backend).unwrap();
    /// let icf: Vec<f64> = (0..2 * 15).map(|i| 0.01 * i as f64).collect();
    /// let x: Vec<f64> = (0..4 * 5).map(|i| (i as f64).sin()).collect();
    /// let (v, g) = gmm.gradient_on(&backend, &[0.1, -0.2], &[0.3; 10], &icf, &x).unwrap();
    /// assert!(v.is_finite() && g.len() == 2 + 10 + 30);
    /// ```
    pub fn for_backend(
        n: usize,
        d: usize,
        k: usize,
        gamma: f64,
        m: f64,
        backend: &Backend,
    ) -> Result<Self> {
        let arrays = backend.is_cuda() || d >= NORMS_AS_ARRAYS_MIN_D;
        Self::with_norms_as_arrays(n, d, k, gamma, m, arrays)
    }

    /// [`Gmm::new`] with `Q_k (μ_k − x_0)` and the squared norms written as sums over arrays
    /// (`norms_as_arrays`; from [`MATMUL_MIN_D`] on) or unrolled into one element each, the
    /// choice [`Gmm::new`] and [`Gmm::for_backend`] make by backend and dimension. Either form
    /// runs on either backend, with the same objective and gradient up to rounding.
    ///
    /// ```
    /// use adjoint_array::models::Gmm;
    /// let (n, d, k) = (6, 5, 2);
    /// let unrolled = Gmm::with_norms_as_arrays(n, d, k, 1.0, 0.0, false).unwrap();
    /// let arrays = Gmm::with_norms_as_arrays(n, d, k, 1.0, 0.0, true).unwrap();
    /// let (alphas, means) = (vec![0.1, -0.2], vec![0.3; k * d]);
    /// let icf: Vec<f64> = (0..k * d * (d + 1) / 2).map(|i| 0.01 * i as f64).collect();
    /// let x: Vec<f64> = (0..n * d).map(|i| (i as f64).sin()).collect();
    /// let (v, g) = unrolled.gradient(&alphas, &means, &icf, &x).unwrap();
    /// let (w, h) = arrays.gradient(&alphas, &means, &icf, &x).unwrap();
    /// assert!((v - w).abs() <= 1e-12 * v.abs());
    /// assert!(g.iter().zip(&h).all(|(a, b)| (a - b).abs() <= 1e-12 * (1.0 + a.abs())));
    /// ```
    pub fn with_norms_as_arrays(
        n: usize,
        d: usize,
        k: usize,
        gamma: f64,
        m: f64,
        norms_as_arrays: bool,
    ) -> Result<Self> {
        if d == 0 || k == 0 {
            // (d = 0 was an index panic while building)
            return Err(Error::Invalid(format!(
                "Gmm: d = {d}, k = {k}: a mixture needs at least one dimension and one component"
            )));
        }
        let icf_sz = d * (d + 1) / 2;
        let b = Builder::new();
        let alphas = b.input(&[k]);
        let means = b.input(&[k, d]);
        let icf = b.input(&[k, icf_sz]);
        let x = b.constant_input(&[n, d]);
        let c = |v: usize| lit(v as f64);
        let qdiag = b.generate(&[k, d], |i| icf.at(&[i[0], i[1]]).exp());
        // Σ_j q_kj: unrolled for small d; a sum over an array for larger d, where d unrolled
        // reads would make kernels whose adjoints scatter d values each (the GPU's combining
        // kernels grow with that count).
        let sum_q_array = (d >= MATMUL_MIN_D).then(|| b.generate(&[k, d], |i| icf.at(i)).sum());
        let sum_q = |ik: Exp| -> Exp {
            match &sum_q_array {
                Some(s) => s.at(&[ik]),
                None => (1..d).fold(icf.at(&[ik, c(0)]), |s, j| s + icf.at(&[ik, c(j)])),
            }
        };
        let base = b.generate(&[k], |i| alphas.at(&[i[0]]) + sum_q(i[0]));
        // main[i, k] = α_k + Σq_k − ½‖Q_k (x_i − μ_k)‖²
        let main = if d < MATMUL_MIN_D {
            // the quadratic form unrolled into one kernel per (point, component) (d is known)
            b.generate(&[n, k], |i| {
                let (ix, ik) = (i[0], i[1]);
                let xc: Vec<Exp> = (0..d)
                    .map(|j| x.at(&[ix, c(j)]) - means.at(&[ik, c(j)]))
                    .collect();
                let mut qxc: Vec<Exp> = (0..d).map(|j| qdiag.at(&[ik, c(j)]) * xc[j]).collect();
                let mut li = d;
                for (col, &xi) in xc.iter().enumerate() {
                    for q in qxc.iter_mut().skip(col + 1) {
                        *q += icf.at(&[ik, c(li)]) * xi;
                        li += 1;
                    }
                }
                let sq = qxc[1..].iter().fold(qxc[0] * qxc[0], |s, &v| s + v * v);
                base.at(&[ik]) - sq * 0.5
            })
        } else {
            // Q_k (x_i − μ_k) = Q_k (x_i − c) − Q_k (μ_k − c), the first term for every (i, k)
            // as one matrix product. Relative to a centre c near the data, both products are of
            // the size of the data's spread, not of its distance from the origin (points and
            // means near 10⁶ lost six digits in the difference without it). c is the means'
            // average, with no gradient (the two terms' dependence on c cancels): the first
            // point, used before, made every other point's terms as large as that point's
            // distance from them, and one outlier first point 10⁶ away put 1.6e-8 relative
            // errors into the gradient (10⁹: 2e-5). The data's mean would cost a reduction over
            // all n·d points; the means' is K·d. Q_k as the [d (column), k, d (row)] array of
            // its entries (zero above the diagonal), so that Qt = [d, k·d] is every Q_kᵀ side by
            // side and X Qt every Q_k x_i at once.
            let mean_of_means = b
                .generate(&[d, k], |i| means.at(&[i[1], i[0]]) * (1.0 / k as f64))
                .sum()
                .stop_gradient();
            let centre = |j: Exp| mean_of_means.at(&[j]);
            let xc = b
                .generate(&[n, d], |i| x.at(i) - centre(i[1]))
                .materialize();
            let qt = b.generate(&[d, k, d], |i| {
                let (col, ik, row) = (i[0], i[1], i[2]);
                // icf's index of Q[row, col] below the diagonal (column by column)
                let li =
                    col * (lit(2.0 * d as f64 - 1.0) - col) * 0.5 + row - col + (d as f64 - 1.0);
                row.gt(col).select(
                    icf.at(&[ik, li]),
                    row.eq(col).select(icf.at(&[ik, col]).exp(), 0.0),
                )
            });
            let xq = xc.matmul(&qt.reshape(&[d, k * d])).reshape(&[n, k, d]);
            // Q_k (μ_k − c) and the squared norms: as sums over arrays, or d reads unrolled
            // into one element. Unrolled, the adjoint of an element scatters d values into
            // `xq`, and on the GPU every element of `xq`'s adjoint then tried each of those d
            // scatters (the largest kernel of 10k d10 K200); read where they are, each entry's
            // adjoint lands on its own element.
            if norms_as_arrays {
                let qmu = b
                    .generate(&[k, d, d], |i| {
                        let (ik, row, col) = (i[0], i[1], i[2]);
                        qt.at(&[col, ik, row]) * (means.at(&[ik, col]) - centre(col))
                    })
                    .sum();
                let sq = b
                    .generate(&[n, k, d], |i| {
                        let v = xq.at(i) - qmu.at(&[i[1], i[2]]);
                        v * v
                    })
                    .sum();
                b.generate(&[n, k], |i| base.at(&[i[1]]) - sq.at(i) * 0.5)
            } else {
                let mc = |ik: Exp, j: usize| means.at(&[ik, c(j)]) - centre(c(j));
                let qmu = b.generate(&[k, d], |i| {
                    (1..d).fold(qt.at(&[c(0), i[0], i[1]]) * mc(i[0], 0), |s, j| {
                        s + qt.at(&[c(j), i[0], i[1]]) * mc(i[0], j)
                    })
                });
                b.generate(&[n, k], |i| {
                    // (from −0.0: `−0 + t` is `t` exactly, so the first add folds away)
                    let sq = (0..d).fold(lit(-0.0), |s, r| {
                        let v = xq.at(&[i[0], i[1], c(r)]) - qmu.at(&[i[1], c(r)]);
                        s + v * v
                    });
                    base.at(&[i[1]]) - sq * 0.5
                })
            }
        };
        let data_term = logsumexp_rows(&b, &main).sum();
        let alse = logsumexp_rows(&b, &alphas);
        let df = d as f64;
        let constant = -(n as f64) * df * 0.5 * (2.0 * PI).ln();
        let nn = df + m + 1.0;
        let wishart_c = nn * df * (gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_distrib(0.5 * nn, d);
        // Wishart prior: Σ_k ½γ²‖Q_k‖²_F − m Σ_k Σ_j q_kj.
        let half_g2 = 0.5 * gamma * gamma;
        let prior = if d < MATMUL_MIN_D {
            b.generate(&[k], |i| {
                let ik = i[0];
                let frob = (0..icf_sz).fold(lit(-0.0), |s, j| {
                    let v = icf.at(&[ik, c(j)]);
                    if j < d {
                        let e = v.exp();
                        s + e * e
                    } else {
                        s + v * v
                    }
                });
                frob * half_g2 - sum_q(ik) * m
            })
            .sum()
        } else {
            // One term per entry of icf, read where it is: at d = 64 the unrolled form was
            // one kernel of 2080 reads per component (8256 at d = 128).
            b.generate(&[k, icf_sz], |i| {
                let v = icf.at(i);
                i[1].lt(c(d)).select(
                    {
                        let e = v.exp();
                        e * e * half_g2 - v * m
                    },
                    v * v * half_g2,
                )
            })
            .sum()
            .sum()
        };
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
        self.gradient_on(&Backend::cpu(), alphas, means, icf, x)
    }

    /// [`Gmm::gradient`] on `backend` (e.g. [`Backend::cuda`]).
    pub fn gradient_on(
        &self,
        backend: &Backend,
        alphas: &[f64],
        means: &[f64],
        icf: &[f64],
        x: &[f64],
    ) -> Result<(f64, Vec<f64>)> {
        let g = if backend.is_cuda() {
            self.program
                .gradient_on(backend, &[alphas, means, icf, x])?
        } else {
            self.program.gradient_a(&[alphas, means, icf, x])?
        };
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
    // materialised: the gradient reads the exponentials back instead of computing them again
    let e = b
        .generate(&shape, |i| (a.at(i) - mx.at(&i[..r - 1])).exp())
        .materialize()
        .sum();
    e.zip_with(&mx, |s, m| s.ln() + m)
}

/// ADBench's diagonal LSTM loss as an array program, built once for sizes `(l, c, b)`. The
/// LSTM is diagonal, so each of the `b` hidden units is a lane of its own through time: the
/// time loop is one [`Builder::scan_n`] over `c − 1` steps whose state is every layer's
/// `(h, cell)` (`2l` numbers per lane), and the loss is data-parallel over the stored states.
/// Inputs: `main [2l, 4b]`, `extra [3, b]` (differentiated), the initial `state [2l, b]` and the
/// bit sequence `seq [c, b]` (data). The model and parameter layout are `adjoint-bench`'s
/// `adbench::lstm`: per layer a row of gate weights (forget, input, output, change) and a row
/// of biases; `extra` = input weights, output weights, output biases.
///
/// ```
/// use adjoint_array::models::Lstm;
/// let (l, c, b) = (1, 3, 2);
/// let lstm = Lstm::new(l, c, b).unwrap();
/// let main: Vec<f64> = (0..8 * l * b).map(|i| 0.1 * i as f64).collect();
/// let extra = [0.5, 0.4, 0.3, 0.2, 0.1, 0.0];
/// let state = [0.2, 0.1, 0.3, 0.4];
/// let seq = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
/// let (v, g) = lstm.gradient(&main, &extra, &state, &seq).unwrap();
/// assert_eq!(v, lstm.objective(&main, &extra, &state, &seq).unwrap());
/// assert_eq!(g.len(), 8 * l * b + 3 * b);
/// ```
#[derive(Clone, Debug)]
pub struct Lstm {
    /// The program: one scalar output.
    pub program: Program,
    /// Layers.
    pub l: usize,
    /// Sequence length.
    pub c: usize,
    /// Hidden size (bits per character).
    pub b: usize,
}

impl Lstm {
    /// Build the program for `l` layers, `c` characters of `b` bits.
    ///
    /// ```
    /// use adjoint_array::models::Lstm;
    /// let (l, c, b) = (2, 4, 3);
    /// let lstm = Lstm::new(l, c, b).unwrap();
    /// let main: Vec<f64> = (0..2 * l * 4 * b).map(|i| (i as f64 * 0.7).sin()).collect();
    /// let extra: Vec<f64> = (0..3 * b).map(|i| 0.3 - 0.1 * i as f64).collect();
    /// let state: Vec<f64> = (0..2 * l * b).map(|i| 0.1 * i as f64).collect();
    /// let seq = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    /// let (v, g) = lstm.gradient(&main, &extra, &state, &seq).unwrap();
    /// assert_eq!(v, lstm.objective(&main, &extra, &state, &seq).unwrap());
    /// // one weight of the second layer (gradient layout [main, extra]): a central difference
    /// let j = 2 * 4 * b + 5;
    /// let f = |h: f64| {
    ///     let mut w = main.clone();
    ///     w[j] += h;
    ///     lstm.objective(&w, &extra, &state, &seq).unwrap()
    /// };
    /// let fd = (f(1e-6) - f(-1e-6)) / 2e-6;
    /// assert!((g[j] - fd).abs() < 1e-8 * (1.0 + fd.abs()));
    /// ```
    pub fn new(l: usize, c: usize, b: usize) -> Result<Self> {
        if l == 0 || b == 0 {
            // (l = 0 was an arithmetic overflow panic while building)
            return Err(Error::Invalid(format!(
                "Lstm: l = {l}, b = {b}: the network needs at least one layer and one bit"
            )));
        }
        let bld = Builder::new();
        let main = bld.input(&[2 * l, 4 * b]);
        let extra = bld.input(&[3, b]);
        let state = bld.constant_input(&[2 * l, b]);
        let seq = bld.constant_input(&[c, b]);
        let k = |v: usize| lit(v as f64);
        let sigmoid = |x: Exp| 1.0 / ((-x).exp() + 1.0);
        let steps = c.saturating_sub(1);
        // hs[t, j, 2·layer] = h, hs[t, j, 2·layer + 1] = cell of unit j after t characters
        let hs = bld.scan_n(
            &[b],
            steps,
            2 * l,
            |i| (0..2 * l).map(|r| state.at(&[k(r), i[0]])).collect(),
            |i, s| {
                let (t, j) = (i[0], i[1]);
                let mut x = extra.at(&[k(0), j]) * seq.at(&[t, j]);
                let mut next = Vec::with_capacity(2 * l);
                for layer in 0..l {
                    let (h, cell) = (s[2 * layer], s[2 * layer + 1]);
                    let w = |gate: usize| main.at(&[k(2 * layer), j + k(gate * b)]);
                    let bias = |gate: usize| main.at(&[k(2 * layer + 1), j + k(gate * b)]);
                    let forget = sigmoid(x * w(0) + bias(0));
                    let ingate = sigmoid(h * w(1) + bias(1));
                    let outgate = sigmoid(x * w(2) + bias(2));
                    let change = (h * w(3) + bias(3)).tanh();
                    let cell = cell * forget + ingate * change;
                    let h = outgate * cell.tanh();
                    next.extend([h, cell]);
                    x = h;
                }
                next
            },
        );
        // y[t, j]: the prediction for character t + 1 from the top layer after t + 1 steps
        let y = bld.generate(&[steps, b], |i| {
            hs.at(&[i[0] + 1.0, i[1], k(2 * l - 2)]) * extra.at(&[k(1), i[1]])
                + extra.at(&[k(2), i[1]])
        });
        let lse = y.map(|v| v.exp()).sum().map(|s| (s + 2.0).ln());
        let terms = bld.generate(&[steps, b], |i| {
            (y.at(i) - lse.at(&[i[0]])) * seq.at(&[i[0] + 1.0, i[1]])
        });
        let scale = -1.0 / (steps * b) as f64;
        let loss = if steps == 0 {
            bld.generate(&[], |_| lit(0.0))
        } else {
            terms.sum().sum().map(|v| v * scale)
        };
        Ok(Lstm {
            program: bld.build_scalar(&loss)?,
            l,
            c,
            b,
        })
    }

    /// The loss.
    pub fn objective(
        &self,
        main: &[f64],
        extra: &[f64],
        state: &[f64],
        seq: &[f64],
    ) -> Result<f64> {
        Ok(self.program.run(&[main, extra, state, seq])?[0].data()[0])
    }

    /// Loss and gradient, the gradient laid out as `[main, extra]`.
    pub fn gradient(
        &self,
        main: &[f64],
        extra: &[f64],
        state: &[f64],
        seq: &[f64],
    ) -> Result<(f64, Vec<f64>)> {
        let g = self.program.gradient_a(&[main, extra, state, seq])?;
        Ok((g.value, [&g.grads[0][..], &g.grads[1]].concat()))
    }
}

/// `w · (project(cam, x) − feat)`, ADBench's reprojection residuals, over expressions
/// (`v` = 11 camera parameters r, C, f, u0 v0, k1 k2; the point; the weight).
fn reproj_exp(v: &[Exp], feat: [Exp; 2]) -> Vec<Exp> {
    let (cam, x, w) = (&v[..11], &v[11..14], v[14]);
    let xo = [x[0] - cam[3], x[1] - cam[4], x[2] - cam[5]];
    let rot = [cam[0], cam[1], cam[2]];
    let cross = |a: &[Exp; 3], b: &[Exp; 3]| {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    };
    let sq = rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2];
    // Rodrigues; for θ² = 0 the reference uses x + r × x (only the branch taken is evaluated
    // and differentiated).
    let theta = sq.sqrt();
    let (s, co) = (theta.sin(), theta.cos());
    let inv = 1.0 / theta;
    let wv = [rot[0] * inv, rot[1] * inv, rot[2] * inv];
    let wx = cross(&wv, &xo);
    let tmp = (wv[0] * xo[0] + wv[1] * xo[1] + wv[2] * xo[2]) * (1.0 - co);
    let small = cross(&rot, &xo);
    let zero = sq.eq(0.0);
    let xcam: Vec<Exp> = (0..3)
        .map(|k| zero.select(xo[k] + small[k], xo[k] * co + wx[k] * s + wv[k] * tmp))
        .collect();
    let p = [xcam[0] / xcam[2], xcam[1] / xcam[2]];
    let rsq = p[0] * p[0] + p[1] * p[1];
    let l = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq;
    vec![
        w * (p[0] * l * cam[6] + cam[7] - feat[0]),
        w * (p[1] * l * cam[6] + cam[8] - feat[1]),
    ]
}

/// ADBench's bundle adjustment: every observation's 2 × 15 Jacobian block of the reprojection
/// residuals with respect to (camera, point, weight), computed by [`jacobian_e`] inside a
/// `generate_n` over the `p` observations. Inputs: `cams [n, 11]`, `x [m, 3]`, `w [p]`,
/// `feats [p, 2]` and `obs [p, 2]` (camera and point index of each observation, as numbers);
/// output `[p, 30]` (row 0 of the block, then row 1).
///
/// ```
/// use adjoint_array::models::Ba;
/// let ba = Ba::new(1, 1, 1).unwrap();
/// let cam = [0.1, -0.2, 0.3, 0.0, 0.1, -5.0, 400.0, 5.0, -8.0, 0.08, 0.002];
/// let blocks = ba.blocks(&cam, &[1.0, 2.0, 3.0], &[0.5], &[270.0, 830.0], &[0.0, 0.0]).unwrap();
/// assert_eq!(blocks.len(), 30);
/// ```
#[derive(Clone, Debug)]
pub struct Ba {
    /// The program: one `[p, 30]` output.
    pub program: Program,
    /// Cameras, points, observations.
    pub sizes: (usize, usize, usize),
}

impl Ba {
    /// Build the program for `n` cameras, `m` points and `p` observations.
    ///
    /// ```
    /// use adjoint_array::models::Ba;
    /// let ba = Ba::new(1, 1, 1).unwrap();
    /// // no rotation or distortion: residual₀ = w·(f·(X₀ − C₀)/(X₂ − C₂) + u₀ − feat₀)
    /// let cam = [0.0, 0.0, 0.0, 0.5, -0.5, -4.0, 300.0, 2.0, -1.0, 0.0, 0.0];
    /// let (x, w, feat) = ([1.0, 2.0, 3.0], 0.5, [70.0, 200.0]);
    /// let jac = ba.blocks(&cam, &x, &[w], &feat, &[0.0, 0.0]).unwrap();
    /// let (xo, z, f) = (x[0] - cam[3], x[2] - cam[5], cam[6]);
    /// let r0 = &jac[..15]; // ∂residual₀/∂(r, C, f, u₀ v₀, k₁ k₂, X, w)
    /// assert!((r0[6] - w * xo / z).abs() < 1e-15);
    /// assert_eq!(r0[7], w);
    /// assert!((r0[11] - w * f / z).abs() < 1e-12);
    /// assert!((r0[14] - (f * xo / z + cam[7] - feat[0])).abs() < 1e-12);
    /// // a small rotation r₁ moves the camera-frame point by r × (X − C)
    /// assert!((r0[1] - w * f * (1.0 + xo * xo / (z * z))).abs() < 1e-12);
    /// ```
    pub fn new(n: usize, m: usize, p: usize) -> Result<Self> {
        let b = Builder::new();
        let cams = b.constant_input(&[n, 11]);
        let x = b.constant_input(&[m, 3]);
        let w = b.constant_input(&[p]);
        let feats = b.constant_input(&[p, 2]);
        let obs = b.constant_input(&[p, 2]);
        let k = |v: usize| lit(v as f64);
        let blocks = b.generate_n(&[p], 30, |i| {
            let (o, c, pt) = (i[0], obs.at(&[i[0], k(0)]), obs.at(&[i[0], k(1)]));
            let ins: Vec<Exp> = (0..11)
                .map(|j| cams.at(&[c, k(j)]))
                .chain((0..3).map(|j| x.at(&[pt, k(j)])))
                .chain([w.at(&[o])])
                .collect();
            let feat = [feats.at(&[o, k(0)]), feats.at(&[o, k(1)])];
            jacobian_e(&ins, |v| reproj_exp(v, feat))
                .into_iter()
                .flatten()
                .collect()
        });
        Ok(Ba {
            program: b.build(&[&blocks])?,
            sizes: (n, m, p),
        })
    }

    /// The `p × 30` Jacobian blocks, row-major.
    pub fn blocks(
        &self,
        cams: &[f64],
        x: &[f64],
        w: &[f64],
        feats: &[f64],
        obs: &[f64],
    ) -> Result<Vec<f64>> {
        let mut out = Vec::new();
        self.blocks_into(cams, x, w, feats, obs, &mut out)?;
        Ok(out)
    }

    /// [`blocks`](Ba::blocks) into the caller's buffer (resized as needed), so that a
    /// Jacobian rebuilt many times reuses its memory
    /// ([`Program::run_into`](crate::Program::run_into)).
    ///
    /// ```
    /// use adjoint_array::models::Ba;
    /// let ba = Ba::new(1, 1, 1).unwrap();
    /// let cam = [0.1, -0.2, 0.3, 0.0, 0.1, -5.0, 400.0, 5.0, -8.0, 0.08, 0.002];
    /// let (x, w, feats, obs) = ([1.0, 2.0, 3.0], [0.5], [270.0, 830.0], [0.0, 0.0]);
    /// let mut jac = Vec::new();
    /// for _ in 0..3 {
    ///     // the same buffer every iteration
    ///     ba.blocks_into(&cam, &x, &w, &feats, &obs, &mut jac).unwrap();
    /// }
    /// assert_eq!(jac, ba.blocks(&cam, &x, &w, &feats, &obs).unwrap());
    /// ```
    pub fn blocks_into(
        &self,
        cams: &[f64],
        x: &[f64],
        w: &[f64],
        feats: &[f64],
        obs: &[f64],
        out: &mut Vec<f64>,
    ) -> Result<()> {
        self.blocks_on(&Backend::cpu(), cams, x, w, feats, obs, out)
    }

    /// [`Ba::blocks_into`] on `backend` (e.g. [`Backend::cuda`]); either reuses `out`'s
    /// memory.
    #[allow(clippy::too_many_arguments)]
    pub fn blocks_on(
        &self,
        backend: &Backend,
        cams: &[f64],
        x: &[f64],
        w: &[f64],
        feats: &[f64],
        obs: &[f64],
        out: &mut Vec<f64>,
    ) -> Result<()> {
        let mut outs = vec![std::mem::take(out)];
        let r = self
            .program
            .run_on_into(backend, &[cams, x, w, feats, obs], &mut outs);
        *out = outs.pop().expect("one output");
        r
    }
}
