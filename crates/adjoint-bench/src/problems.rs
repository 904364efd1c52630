//! The benchmark problems: each objective written once, generic over [`Real`], plus a
//! hand-written closed-form gradient that serves as the test reference and the "hand" column.
//!
//! Sizes (Zygote's paper, seed 002 Table 2, states none; these are ours):
//!
//! | problem | inputs | definition |
//! |---|---|---|
//! | rosenbrock | n = 2, 100, 10⁴ | Σᵢ 100(xᵢ₊₁ − xᵢ²)² + (1 − xᵢ)² |
//! | sincos | 1 | sin(cos x) |
//! | loop | 1 | xᵖ by p = 1000 repeated multiplications |
//! | logsumexp | n = 1000 | ln Σ exp xᵢ, max-shifted |
//! | logistic | 11 (d = 10 weights + bias), m = 100 samples | mean softplus(−y (w·x + b)) |
//! | mlp | 25 450 (784 → 32 tanh → 10) | softmax cross-entropy of one image |

use adjoint::Real;

/// A differentiable benchmark problem.
pub trait Objective: Send + Sync + 'static {
    /// The problem's family, e.g. `"rosenbrock"`.
    fn name(&self) -> &'static str;
    /// Its size in words, e.g. `"n=100"`.
    fn size(&self) -> String;
    /// The benchmark group (a printed table).
    fn group(&self) -> &'static str;
    /// The point at which it is evaluated and differentiated.
    fn input(&self) -> Vec<f64>;
    /// The objective, written once for every number type.
    fn eval<T: Real>(&self, x: &[T]) -> T;
    /// The hand-written gradient, if there is one.
    fn hand_gradient(&self, _x: &[f64], _g: &mut [f64]) -> bool {
        false
    }
}

/// Deterministic pseudo-random numbers in [−1, 1) (SplitMix64), so inputs need no files.
pub fn uniform(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The extended Rosenbrock function.
#[derive(Clone, Debug)]
pub struct Rosenbrock {
    /// Number of inputs.
    pub n: usize,
}

impl Objective for Rosenbrock {
    fn name(&self) -> &'static str {
        "rosenbrock"
    }
    fn size(&self) -> String {
        format!("n={}", self.n)
    }
    fn group(&self) -> &'static str {
        "rosenbrock"
    }
    fn input(&self) -> Vec<f64> {
        uniform(1, self.n).into_iter().map(|u| 0.5 + u).collect()
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        x.windows(2)
            .map(|w| {
                let t = w[1] - w[0] * w[0];
                let u = T::cst(1.0) - w[0];
                t * t * 100.0 + u * u
            })
            .sum()
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        g.fill(0.0);
        for i in 0..x.len().saturating_sub(1) {
            let t = x[i + 1] - x[i] * x[i];
            g[i] += -400.0 * x[i] * t - 2.0 * (1.0 - x[i]);
            g[i + 1] += 200.0 * t;
        }
        true
    }
}

impl Rosenbrock {
    /// The closed-form (tridiagonal) Hessian.
    pub fn hessian(&self, x: &[f64]) -> Vec<Vec<f64>> {
        let n = x.len();
        let mut h = vec![vec![0.0; n]; n];
        for i in 0..n.saturating_sub(1) {
            h[i][i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
            h[i + 1][i + 1] += 200.0;
            h[i][i + 1] = -400.0 * x[i];
            h[i + 1][i] = -400.0 * x[i];
        }
        h
    }
}

/// `sin(cos x)`: the scalar-overhead stress test.
#[derive(Clone, Debug)]
pub struct SinCos;

impl Objective for SinCos {
    fn name(&self) -> &'static str {
        "sincos"
    }
    fn size(&self) -> String {
        "n=1".into()
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        vec![0.7]
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        x[0].cos().sin()
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        g[0] = -x[0].cos().cos() * x[0].sin();
        true
    }
}

/// `xᵖ` by repeated multiplication: a loop with a long dependency chain.
#[derive(Clone, Debug)]
pub struct PowLoop {
    /// Number of multiplications.
    pub p: u32,
}

impl Objective for PowLoop {
    fn name(&self) -> &'static str {
        "loop"
    }
    fn size(&self) -> String {
        format!("p={}", self.p)
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        vec![1.0005]
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        let mut r = T::cst(1.0);
        for _ in 0..self.p {
            r *= x[0];
        }
        r
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        g[0] = f64::from(self.p) * x[0].powi(self.p as i32 - 1);
        true
    }
}

/// Numerically stable log-sum-exp.
#[derive(Clone, Debug)]
pub struct LogSumExp {
    /// Number of inputs.
    pub n: usize,
}

/// `ln Σ exp xᵢ`, shifted by the maximum (shared by [`LogSumExp`] and [`Mlp`]). The shift
/// cancels in value and derivative, so it is a plain `f64` constant. ADBench's GMM, which peer
/// crates' scalars run too, has the same function over `num_traits::Float`
/// ([`crate::adbench::gmm::logsumexp`]).
pub fn logsumexp<T: Real>(x: &[T]) -> T {
    let m = x
        .iter()
        .map(|v| v.value())
        .fold(f64::NEG_INFINITY, f64::max);
    x.iter()
        .map(|&v| (v - m).exp())
        .fold(T::zero(), |a, b| a + b)
        .ln()
        + m
}

fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

impl Objective for LogSumExp {
    fn name(&self) -> &'static str {
        "logsumexp"
    }
    fn size(&self) -> String {
        format!("n={}", self.n)
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        uniform(2, self.n).into_iter().map(|u| 3.0 * u).collect()
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        logsumexp(x)
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        g.copy_from_slice(&softmax(x));
        true
    }
}

/// Logistic regression loss over a fixed data set; the inputs are `[w₀ … w_{d−1}, b]`.
#[derive(Clone, Debug)]
pub struct Logistic {
    /// Features per sample.
    pub d: usize,
    /// Number of samples.
    pub m: usize,
    /// Row-major `m × d` features.
    pub xs: Vec<f64>,
    /// Labels in {−1, +1}.
    pub ys: Vec<f64>,
}

impl Logistic {
    /// A synthetic data set of `m` samples with `d` features.
    pub fn new(d: usize, m: usize) -> Self {
        let xs = uniform(3, m * d);
        let ys = uniform(4, m)
            .into_iter()
            .map(|u| if u >= 0.0 { 1.0 } else { -1.0 })
            .collect();
        Logistic { d, m, xs, ys }
    }
}

fn softplus<T: Real>(t: T) -> T {
    // ln(1 + eᵗ) = max(t, 0) + ln(1 + e^{−|t|})
    t.max(T::cst(0.0)) + (-t.abs()).exp().ln_1p()
}

impl Objective for Logistic {
    fn name(&self) -> &'static str {
        "logistic"
    }
    fn size(&self) -> String {
        format!("d={} m={}", self.d, self.m)
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        uniform(5, self.d + 1)
    }
    fn eval<T: Real>(&self, p: &[T]) -> T {
        let (w, b) = (&p[..self.d], p[self.d]);
        let mut total = T::cst(0.0);
        for (row, &y) in self.xs.chunks_exact(self.d).zip(&self.ys) {
            let mut z = b;
            for (&wj, &xj) in w.iter().zip(row) {
                z += wj * xj;
            }
            total += softplus(z * -y);
        }
        total / self.m as f64
    }
    fn hand_gradient(&self, p: &[f64], g: &mut [f64]) -> bool {
        g.fill(0.0);
        for (row, &y) in self.xs.chunks_exact(self.d).zip(&self.ys) {
            let z = p[self.d] + row.iter().zip(p).map(|(a, b)| a * b).sum::<f64>();
            // d softplus(−y z)/dz = −y σ(−y z)
            let dz = -y / (1.0 + (y * z).exp()) / self.m as f64;
            for j in 0..self.d {
                g[j] += dz * row[j];
            }
            g[self.d] += dz;
        }
        true
    }
}

/// A two-layer perceptron (tanh hidden layer) with softmax cross-entropy on one input image;
/// the inputs are the parameters `[W₁ (h×i), b₁ (h), W₂ (o×h), b₂ (o)]`.
#[derive(Clone, Debug)]
pub struct Mlp {
    /// Input width (784 for MNIST).
    pub inputs: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Classes.
    pub outputs: usize,
    /// The image.
    pub image: Vec<f64>,
    /// The label.
    pub label: usize,
}

impl Mlp {
    /// A network of the given widths with a synthetic image.
    pub fn new(inputs: usize, hidden: usize, outputs: usize) -> Self {
        let image = uniform(6, inputs)
            .into_iter()
            .map(|u| 0.5 + 0.5 * u)
            .collect();
        Mlp {
            inputs,
            hidden,
            outputs,
            image,
            label: 3 % outputs,
        }
    }

    /// Number of parameters.
    pub fn n_params(&self) -> usize {
        self.hidden * self.inputs + self.hidden + self.outputs * self.hidden + self.outputs
    }

    fn split<'a, T>(&self, p: &'a [T]) -> (&'a [T], &'a [T], &'a [T], &'a [T]) {
        let (w1, rest) = p.split_at(self.hidden * self.inputs);
        let (b1, rest) = rest.split_at(self.hidden);
        let (w2, b2) = rest.split_at(self.outputs * self.hidden);
        (w1, b1, w2, b2)
    }
}

impl Objective for Mlp {
    fn name(&self) -> &'static str {
        "mlp"
    }
    fn size(&self) -> String {
        format!("{}-{}-{}", self.inputs, self.hidden, self.outputs)
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        let scale = 1.0 / (self.inputs as f64).sqrt();
        uniform(7, self.n_params())
            .into_iter()
            .map(|u| u * scale)
            .collect()
    }
    fn eval<T: Real>(&self, p: &[T]) -> T {
        let (w1, b1, w2, b2) = self.split(p);
        let h: Vec<T> = w1
            .chunks_exact(self.inputs)
            .zip(b1)
            .map(|(row, &b)| {
                let mut a = b;
                for (&w, &x) in row.iter().zip(&self.image) {
                    a += w * x;
                }
                a.tanh()
            })
            .collect();
        let z: Vec<T> = w2
            .chunks_exact(self.hidden)
            .zip(b2)
            .map(|(row, &b)| {
                let mut a = b;
                for (&w, &hv) in row.iter().zip(&h) {
                    a += w * hv;
                }
                a
            })
            .collect();
        logsumexp(&z) - z[self.label]
    }
    fn hand_gradient(&self, p: &[f64], g: &mut [f64]) -> bool {
        let (w1, b1, w2, b2) = self.split(p);
        let h: Vec<f64> = w1
            .chunks_exact(self.inputs)
            .zip(b1)
            .map(|(row, b)| {
                (b + row.iter().zip(&self.image).map(|(w, x)| w * x).sum::<f64>()).tanh()
            })
            .collect();
        let z: Vec<f64> = w2
            .chunks_exact(self.hidden)
            .zip(b2)
            .map(|(row, b)| b + row.iter().zip(&h).map(|(w, x)| w * x).sum::<f64>())
            .collect();
        let mut dz = softmax(&z);
        dz[self.label] -= 1.0;
        let (gw1, rest) = g.split_at_mut(self.hidden * self.inputs);
        let (gb1, rest) = rest.split_at_mut(self.hidden);
        let (gw2, gb2) = rest.split_at_mut(self.outputs * self.hidden);
        let mut dh = vec![0.0; self.hidden];
        for k in 0..self.outputs {
            gb2[k] = dz[k];
            for j in 0..self.hidden {
                gw2[k * self.hidden + j] = dz[k] * h[j];
                dh[j] += dz[k] * w2[k * self.hidden + j];
            }
        }
        for j in 0..self.hidden {
            let da = dh[j] * (1.0 - h[j] * h[j]);
            gb1[j] = da;
            for i in 0..self.inputs {
                gw1[j * self.inputs + i] = da * self.image[i];
            }
        }
        true
    }
}
