//! The seed-003 and Table 2 problems written with the shared slice primitives
//! (`adjoint::vector::{dot, sum, matvec, logsumexp}`), beside their scalar versions: on the tape
//! each primitive is one entry with a vectorised adjoint instead of one entry per element.

use crate::problems::{uniform, Logistic, Mlp, Objective};
use crate::sec13::{network_input, NET};
use adjoint::{vector, Real};

/// `a · b` with the input laid out as `[a, b]`.
#[derive(Clone, Debug)]
pub struct DotV {
    /// Length of each vector.
    pub n: usize,
}

impl Objective for DotV {
    fn name(&self) -> &'static str {
        "dot (vector)"
    }
    fn size(&self) -> String {
        format!("n={}", self.n)
    }
    fn group(&self) -> &'static str {
        "sec13"
    }
    fn input(&self) -> Vec<f64> {
        uniform(11, 2 * self.n)
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        let (a, b) = x.split_at(self.n);
        vector::dot(a, b)
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        let (a, b) = x.split_at(self.n);
        g[..self.n].copy_from_slice(b);
        g[self.n..].copy_from_slice(a);
        true
    }
}

/// `Σᵢ (M v)ᵢ` with the input laid out as `[M (row-major n × n), v]`.
#[derive(Clone, Debug)]
pub struct MatvecV {
    /// Matrix size.
    pub n: usize,
}

impl Objective for MatvecV {
    fn name(&self) -> &'static str {
        "matvec (vector)"
    }
    fn size(&self) -> String {
        format!("{0}x{0}", self.n)
    }
    fn group(&self) -> &'static str {
        "sec13"
    }
    fn input(&self) -> Vec<f64> {
        uniform(12, self.n * self.n + self.n)
    }
    fn eval<T: Real>(&self, x: &[T]) -> T {
        let (m, v) = x.split_at(self.n * self.n);
        let mut out = vec![T::cst(0.0); self.n];
        vector::matvec(m, v, &mut out);
        vector::sum(&out)
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        let n = self.n;
        let (m, v) = x.split_at(n * n);
        let (gm, gv) = g.split_at_mut(n * n);
        gv.fill(0.0);
        for (i, row) in m.chunks_exact(n).enumerate() {
            gm[i * n..(i + 1) * n].copy_from_slice(v);
            for (s, mij) in gv.iter_mut().zip(row) {
                *s += mij;
            }
        }
        true
    }
}

/// Seed 003's network (dense relu, dense relu, softmax; sum of the outputs) with `matvec`.
#[derive(Clone, Debug)]
pub struct NetworkV;

fn dense_relu<T: Real>(w: &[T], b: &[T], x: &[T]) -> Vec<T> {
    let mut a = vec![T::cst(0.0); b.len()];
    vector::matvec(w, x, &mut a);
    a.iter()
        .zip(b)
        .map(|(&a, &b)| {
            let z = a + b;
            if z > 0.0 {
                z
            } else {
                z * 0.0
            }
        })
        .collect()
}

impl Objective for NetworkV {
    fn name(&self) -> &'static str {
        "network (vector)"
    }
    fn size(&self) -> String {
        let (n0, n1, n2) = NET;
        format!("{n0}-{n1}-{n2}")
    }
    fn group(&self) -> &'static str {
        "sec13"
    }
    fn input(&self) -> Vec<f64> {
        network_input()
    }
    fn eval<T: Real>(&self, p: &[T]) -> T {
        let (n0, n1, n2) = NET;
        let (w1, rest) = p.split_at(n1 * n0);
        let (b1, rest) = rest.split_at(n1);
        let (w2, rest) = rest.split_at(n2 * n1);
        let (b2, x) = rest.split_at(n2);
        let h1 = dense_relu(w1, b1, x);
        let h2 = dense_relu(w2, b2, &h1);
        // softmax(h2) summed, as seed 003 writes it (its sum is 1 up to rounding)
        let lse = vector::logsumexp(&h2);
        let e: Vec<T> = h2.iter().map(|&z| (z - lse).exp()).collect();
        vector::sum(&e)
    }
}

/// Table 2's log-sum-exp as one primitive.
#[derive(Clone, Debug)]
pub struct LogSumExpV {
    /// Number of inputs.
    pub n: usize,
}

impl Objective for LogSumExpV {
    fn name(&self) -> &'static str {
        "logsumexp (vector)"
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
        vector::logsumexp(x)
    }
    fn hand_gradient(&self, x: &[f64], g: &mut [f64]) -> bool {
        let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
        for (gi, v) in g.iter_mut().zip(x) {
            *gi = (v - m).exp() / s;
        }
        true
    }
}

/// Table 2's logistic regression with the scores as one `matvec` over the (constant) data.
#[derive(Clone, Debug)]
pub struct LogisticV(pub Logistic);

impl Objective for LogisticV {
    fn name(&self) -> &'static str {
        "logistic (vector)"
    }
    fn size(&self) -> String {
        self.0.size()
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        self.0.input()
    }
    fn eval<T: Real>(&self, p: &[T]) -> T {
        let l = &self.0;
        let (w, b) = (&p[..l.d], p[l.d]);
        // The data are constants: no tape entries, no gradient.
        let xs: Vec<T> = l.xs.iter().map(|&v| T::cst(v)).collect();
        let mut z = vec![T::cst(0.0); l.m];
        vector::matvec(&xs, w, &mut z);
        let mut total = T::cst(0.0);
        for (&zi, &y) in z.iter().zip(&l.ys) {
            let t = (zi + b) * -y;
            total += t.max(T::cst(0.0)) + (-t.abs()).exp().ln_1p();
        }
        total / l.m as f64
    }
    fn hand_gradient(&self, p: &[f64], g: &mut [f64]) -> bool {
        self.0.hand_gradient(p, g)
    }
}

/// Table 2's MLP with `matvec` layers and a `logsumexp` loss.
#[derive(Clone, Debug)]
pub struct MlpV(pub Mlp);

impl Objective for MlpV {
    fn name(&self) -> &'static str {
        "mlp (vector)"
    }
    fn size(&self) -> String {
        self.0.size()
    }
    fn group(&self) -> &'static str {
        "table2"
    }
    fn input(&self) -> Vec<f64> {
        self.0.input()
    }
    fn eval<T: Real>(&self, p: &[T]) -> T {
        let m = &self.0;
        let (w1, rest) = p.split_at(m.hidden * m.inputs);
        let (b1, rest) = rest.split_at(m.hidden);
        let (w2, b2) = rest.split_at(m.outputs * m.hidden);
        let image: Vec<T> = m.image.iter().map(|&v| T::cst(v)).collect();
        let mut a = vec![T::cst(0.0); m.hidden];
        vector::matvec(w1, &image, &mut a);
        let h: Vec<T> = a.iter().zip(b1).map(|(&a, &b)| (a + b).tanh()).collect();
        let mut z = vec![T::cst(0.0); m.outputs];
        vector::matvec(w2, &h, &mut z);
        let z: Vec<T> = z.iter().zip(b2).map(|(&z, &b)| z + b).collect();
        vector::logsumexp(&z) - z[m.label]
    }
    fn hand_gradient(&self, p: &[f64], g: &mut [f64]) -> bool {
        self.0.hand_gradient(p, g)
    }
}
