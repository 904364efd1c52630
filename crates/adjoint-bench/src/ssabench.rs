//! The SSA transform's column (`adjoint::ssa`, seed 002): the benchmark functions written as
//! plain `f64` Rust with `#[differentiable]`, whose compiled adjoints run in the same tables as
//! every other engine. Each function computes what the matching [`Objective`](crate::problems)
//! or ADBench term computes; the harness's agreement column checks it on every run.

// The functions are written with index loops, as the SSA transform's users write numeric code
// (the transform's subset has no `copy_from_slice`).
#![allow(clippy::needless_range_loop, clippy::manual_memcpy)]

use crate::harness::{Column, Problem};
use crate::problems::{Logistic, Mlp};
use crate::sec13::NET;
use adjoint::ssa::{differentiable, Cotangents};

/// Rosenbrock (as [`crate::problems::Rosenbrock`]).
#[differentiable]
pub fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = 1.0 - x[i];
        s += t * t * 100.0 + u * u;
    }
    s
}

/// `sin(cos x)`.
#[differentiable]
pub fn sincos(x: f64) -> f64 {
    x.cos().sin()
}

/// `xᵖ` by repeated multiplication.
#[differentiable]
pub fn pow_loop(x: f64, p: usize) -> f64 {
    let mut r = 1.0;
    for _ in 0..p {
        r *= x;
    }
    r
}

/// Max-shifted log-sum-exp.
#[differentiable]
pub fn logsumexp(x: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &v in x.iter() {
        m = m.max(v);
    }
    let mut s = 0.0;
    for &v in x.iter() {
        s += (v - m).exp();
    }
    s.ln() + m
}

/// Table 2 logistic regression.
#[differentiable(wrt(p))]
pub fn logistic(p: &[f64], xs: &[f64], ys: &[f64], d: usize) -> f64 {
    let m = ys.len();
    let b = p[d];
    let mut total = 0.0;
    for i in 0..m {
        let mut z = b;
        for j in 0..d {
            z += p[j] * xs[i * d + j];
        }
        let t = z * -ys[i];
        total += t.max(0.0) + (-t.abs()).exp().ln_1p();
    }
    total / m as f64
}

/// Hidden width and classes of Table 2's MLP (784-32-10).
const HIDDEN: usize = 32;
const CLASSES: usize = 10;

/// Table 2 MLP (784-32-10, tanh, softmax cross-entropy).
#[differentiable(wrt(p))]
pub fn mlp(p: &[f64], image: &[f64], label: usize) -> f64 {
    let n_in = image.len();
    let mut h = [0.0; HIDDEN];
    for k in 0..HIDDEN {
        let mut a = p[HIDDEN * n_in + k];
        let row = &p[k * n_in..(k + 1) * n_in];
        for (&w, &x) in row.iter().zip(image.iter()) {
            a += w * x;
        }
        h[k] = a.tanh();
    }
    let w2 = HIDDEN * n_in + HIDDEN;
    let b2 = w2 + CLASSES * HIDDEN;
    let mut z = [0.0; CLASSES];
    let mut zmax = f64::NEG_INFINITY;
    for c in 0..CLASSES {
        let mut a = p[b2 + c];
        for k in 0..HIDDEN {
            a += p[w2 + c * HIDDEN + k] * h[k];
        }
        z[c] = a;
        zmax = zmax.max(a);
    }
    let mut s = 0.0;
    for c in 0..CLASSES {
        s += (z[c] - zmax).exp();
    }
    s.ln() + zmax - z[label]
}

/// `a · b` (seed 003).
#[differentiable]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = a[0] * b[0];
    for i in 1..a.len() {
        s += a[i] * b[i];
    }
    s
}

/// `Σᵢ (M v)ᵢ` (seed 003).
#[differentiable]
pub fn matvec_sum(m: &[f64], v: &[f64]) -> f64 {
    let n = v.len();
    let mut total = 0.0;
    for i in 0..n {
        let mut acc = m[i * n] * v[0];
        for j in 1..n {
            acc += m[i * n + j] * v[j];
        }
        total += acc;
    }
    total
}

/// Widths of seed 003's network (50-100-50).
const N1: usize = 100;
const N2: usize = 50;

/// Seed 003's network (dense relu, dense relu, softmax), summed; `p = [W1, b1, W2, b2, x]`.
#[differentiable]
pub fn network(p: &[f64]) -> f64 {
    let n0 = p.len() - (N1 * N2 + N1 + N2 * N1 + N2);
    let (w1, b1) = (0, N1 * n0);
    let (w2, b2) = (b1 + N1, b1 + N1 + N2 * N1);
    let x = b2 + N2;
    let mut h1 = [0.0; N1];
    for i in 0..N1 {
        let mut a = p[b1 + i];
        for j in 0..n0 {
            a += p[w1 + i * n0 + j] * p[x + j];
        }
        h1[i] = if a > 0.0 { a } else { a * 0.0 };
    }
    let mut h2 = [0.0; N2];
    let mut m = f64::NEG_INFINITY;
    for i in 0..N2 {
        let mut a = p[b2 + i];
        for j in 0..N1 {
            a += p[w2 + i * N1 + j] * h1[j];
        }
        h2[i] = if a > 0.0 { a } else { a * 0.0 };
        m = m.max(h2[i]);
    }
    let mut s = 0.0;
    for i in 0..N2 {
        s += (h2[i] - m).exp();
    }
    let mut total = 0.0;
    for i in 0..N2 {
        total += (h2[i] - m).exp() / s;
    }
    total
}

/// Largest d and K of the ADBench GMM data term below (its scratch arrays are fixed-size: the
/// SSA transform takes local arrays of constant length).
pub const GMM_MAX_D: usize = 128;
/// See [`GMM_MAX_D`].
pub const GMM_MAX_K: usize = 256;

/// `Qdiags = exp(icf diagonal)` and `sum_qs` (the diagonal's sums) of each component, as
/// ADBench's `preprocess_qs`: computed once per call, not once per point. Its pullback carries
/// [`gmm_data()`]'s cotangents of `qdiag` and `sum_qs` back to the parameters.
#[differentiable(wrt(p))]
pub fn gmm_qs(p: &[f64], d: usize, k: usize, qdiag: &mut [f64], sum_qs: &mut [f64]) {
    let icf_sz = d * (d + 1) / 2;
    let icf = k + k * d;
    for ik in 0..k {
        let mut s = 0.0;
        for j in 0..d {
            let q = p[icf + ik * icf_sz + j];
            qdiag[ik * d + j] = q.exp();
            s += q;
        }
        sum_qs[ik] = s;
    }
}

/// ADBench GMM's data term over the points in `x` (`n × d`), parameters `[α, μ, icf]`, with
/// the diagonal factors from [`gmm_qs()`].
#[differentiable(wrt(p, qdiag, sum_qs))]
pub fn gmm_data(p: &[f64], qdiag: &[f64], sum_qs: &[f64], x: &[f64], d: usize, k: usize) -> f64 {
    let n = x.len() / d;
    let icf_sz = d * (d + 1) / 2;
    let means = k;
    let icf = k + k * d;
    let mut main_term = [0.0; GMM_MAX_K];
    let mut xc = [0.0; GMM_MAX_D];
    let mut qxc = [0.0; GMM_MAX_D];
    let mut total = 0.0;
    for ix in 0..n {
        for ik in 0..k {
            for j in 0..d {
                xc[j] = x[ix * d + j] - p[means + ik * d + j];
                qxc[j] = qdiag[ik * d + j] * xc[j];
            }
            // As ADBench's C++ writes it: the transform recomputes `li` from the loop counter,
            // records `xc[i]` once per row (it is invariant in the inner loop) and adds its
            // adjoint to `dxc[i]` once per row (in the row's last reversed iteration).
            let mut li = 0;
            for i in 0..d {
                for r in i + 1..d {
                    qxc[r] += p[icf + ik * icf_sz + d + li] * xc[i];
                    li += 1;
                }
            }
            let mut sq = 0.0;
            for j in 0..d {
                sq += qxc[j] * qxc[j];
            }
            main_term[ik] = p[ik] + sum_qs[ik] - sq * 0.5;
        }
        let mut mx = f64::NEG_INFINITY;
        for ik in 0..k {
            mx = mx.max(main_term[ik]);
        }
        let mut se = 0.0;
        for ik in 0..k {
            se += (main_term[ik] - mx).exp();
        }
        total += se.ln() + mx;
    }
    total
}

/// The BA reprojection residual pair of the 15 inputs (camera, point, weight); its 2×15
/// Jacobian comes from one `pullback_vec` with two cotangents (one forward, one reverse sweep).
#[differentiable(wrt(inp))]
pub fn ba_project(inp: &[f64], feat: &[f64]) -> (f64, f64) {
    let (r0, r1, r2) = (inp[0], inp[1], inp[2]);
    let (x0, x1, x2) = (inp[11] - inp[3], inp[12] - inp[4], inp[13] - inp[5]);
    let sqtheta = r0 * r0 + r1 * r1 + r2 * r2;
    // θ² = 0: the reference's x + rot × x; otherwise Rodrigues' formula.
    let mut y0 = x0 + (r1 * x2 - r2 * x1);
    let mut y1 = x1 + (r2 * x0 - r0 * x2);
    let mut y2 = x2 + (r0 * x1 - r1 * x0);
    if sqtheta != 0.0 {
        let theta = sqtheta.sqrt();
        let (s, co) = (theta.sin(), theta.cos());
        let inv = 1.0 / theta;
        let (w0, w1, w2) = (r0 * inv, r1 * inv, r2 * inv);
        let (c0, c1, c2) = (w1 * x2 - w2 * x1, w2 * x0 - w0 * x2, w0 * x1 - w1 * x0);
        let tmp = (w0 * x0 + w1 * x1 + w2 * x2) * (1.0 - co);
        y0 = x0 * co + c0 * s + w0 * tmp;
        y1 = x1 * co + c1 * s + w1 * tmp;
        y2 = x2 * co + c2 * s + w2 * tmp;
    }
    let (p0, p1) = (y0 / y2, y1 / y2);
    let rsq = p0 * p0 + p1 * p1;
    let l = 1.0 + inp[9] * rsq + inp[10] * rsq * rsq;
    (
        inp[14] * (p0 * l * inp[6] + inp[7] - feat[0]),
        inp[14] * (p1 * l * inp[6] + inp[8] - feat[1]),
    )
}

/// Largest hidden size `b` of [`lstm_loss()`] (local arrays have constant lengths).
pub const LSTM_MAX_B: usize = 32;
/// Largest layer count `l` of [`lstm_loss()`].
pub const LSTM_MAX_L: usize = 4;
/// Length of [`lstm_loss()`]'s state array (`2 · LSTM_MAX_L · LSTM_MAX_B`).
pub const LSTM_MAX_STATE: usize = 2 * LSTM_MAX_L * LSTM_MAX_B;

/// ADBench's LSTM loss (as [`crate::adbench::lstm::lstm_objective`]): `main` (`8lb`) and
/// `extra` (`3b`) differentiated, the initial `state` (`2lb`) and the bit sequence `seq` (`c·b`)
/// data.
#[differentiable(wrt(main, extra))]
pub fn lstm_loss(
    main: &[f64],
    extra: &[f64],
    state0: &[f64],
    seq: &[f64],
    l: usize,
    b: usize,
) -> f64 {
    let c = seq.len() / b;
    let mut state = [0.0; LSTM_MAX_STATE];
    for i in 0..2 * l * b {
        state[i] = state0[i];
    }
    let mut x = [0.0; LSTM_MAX_B];
    let mut y = [0.0; LSTM_MAX_B];
    let mut total = 0.0;
    for t in 0..c - 1 {
        for j in 0..b {
            x[j] = extra[j] * seq[t * b + j];
        }
        for layer in 0..l {
            let (wo, bo) = (8 * layer * b, 8 * layer * b + 4 * b);
            let (ho, co) = (2 * layer * b, 2 * layer * b + b);
            for j in 0..b {
                let xin = x[j];
                let h = state[ho + j];
                let forget = 1.0 / ((-(xin * main[wo + j] + main[bo + j])).exp() + 1.0);
                let ingate = 1.0 / ((-(h * main[wo + b + j] + main[bo + b + j])).exp() + 1.0);
                let outgate =
                    1.0 / ((-(xin * main[wo + 2 * b + j] + main[bo + 2 * b + j])).exp() + 1.0);
                let change = (h * main[wo + 3 * b + j] + main[bo + 3 * b + j]).tanh();
                let cell = state[co + j] * forget + ingate * change;
                state[co + j] = cell;
                let hn = outgate * cell.tanh();
                state[ho + j] = hn;
                x[j] = hn;
            }
        }
        let mut se = 0.0;
        for j in 0..b {
            y[j] = x[j] * extra[b + j] + extra[2 * b + j];
            se += y[j].exp();
        }
        let lse = (se + 2.0).ln();
        for j in 0..b {
            total += (y[j] - lse) * seq[(t + 1) * b + j];
        }
    }
    total * (-1.0 / ((c - 1) * b) as f64)
}

/// The SSA transform's LSTM column.
pub struct SsaLstm;

impl crate::adbench::lstm::LstmColumn for SsaLstm {
    fn name(&self) -> &'static str {
        "ssa"
    }
    fn lstm(&self, g: &crate::adbench::io::LstmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        assert!(
            g.b <= LSTM_MAX_B && g.l <= LSTM_MAX_L,
            "ssa LSTM: l = {} or b = {} above the compiled limits",
            g.l,
            g.b
        );
        let (main, extra) = p.split_at(8 * g.l * g.b);
        let (gm, ge) = grad.split_at_mut(8 * g.l * g.b);
        gm.fill(0.0);
        ge.fill(0.0);
        lstm_loss::grad(main, extra, &g.state, &g.seq, g.l, g.b, gm, ge)
    }
}

/// The SSA column of a registered problem, when the SSA transform has that function.
pub fn column(p: &Problem) -> Option<Column> {
    let size = p.size.as_str();
    let run: crate::harness::GradFn = match (p.name, size) {
        ("rosenbrock", _) => Box::new(|x, g| _ = rosenbrock::grad(x, g)),
        ("sincos", _) => Box::new(|x, g| _ = sincos::grad(x[0], &mut g[0])),
        ("loop", "p=1000") => Box::new(|x, g| _ = pow_loop::grad(x[0], 1000, &mut g[0])),
        ("logsumexp", _) => Box::new(|x, g| _ = logsumexp::grad(x, g)),
        ("logistic", "d=10 m=100") => {
            let l = Logistic::new(10, 100);
            Box::new(move |x, g| _ = logistic::grad(x, &l.xs, &l.ys, l.d, g))
        }
        ("mlp", "784-32-10") => {
            let m = Mlp::new(784, HIDDEN, CLASSES);
            Box::new(move |x, g| _ = mlp::grad(x, &m.image, m.label, g))
        }
        ("dot", _) => Box::new(|x, g| {
            let (a, b) = x.split_at(x.len() / 2);
            let (ga, gb) = g.split_at_mut(x.len() / 2);
            _ = dot::grad(a, b, ga, gb)
        }),
        ("matvec", "1000x1000") => Box::new(|x, g| {
            let (m, v) = x.split_at(1000 * 1000);
            let (gm, gv) = g.split_at_mut(1000 * 1000);
            _ = matvec_sum::grad(m, v, gm, gv)
        }),
        ("network", _) if NET == (50, N1, N2) => Box::new(|x, g| _ = network::grad(x, g)),
        _ => return None,
    };
    Some(Column {
        engine: "ssa",
        run,
        skip: None,
    })
}

/// The SSA transform as an ADBench engine: GMM data term and BA blocks by compiled adjoints;
/// the GMM's remaining terms (a few hundred operations) on the tape.
pub struct Ssa;

impl crate::adbench::Engine for Ssa {
    fn name(&self) -> &'static str {
        "ssa"
    }
    fn gmm_data_grad(
        &self,
        g: &crate::adbench::io::GmmInput,
        p: &[f64],
        from: usize,
        to: usize,
    ) -> (f64, Vec<f64>) {
        assert!(
            g.d <= GMM_MAX_D && g.k <= GMM_MAX_K,
            "ssa GMM: d = {} or K = {} above the compiled limits",
            g.d,
            g.k
        );
        let (d, k) = (g.d, g.k);
        // forward: the diagonal factors once, then the data term's value and gradient with
        // respect to `p`, `qdiag` and `sum_qs`; backward: `gmm_qs`'s pullback adds the
        // cotangents of `qdiag` and `sum_qs` into `p`'s gradient (the chain rule, generated)
        let (mut qdiag, mut sum_qs) = (vec![0.0; k * d], vec![0.0; k]);
        gmm_qs(p, d, k, &mut qdiag, &mut sum_qs);
        let mut grad = vec![0.0; p.len()];
        let (mut dqdiag, mut dsum_qs) = (vec![0.0; k * d], vec![0.0; k]);
        let x = &g.x[from * d..to * d];
        let v = gmm_data::grad(
            p,
            &qdiag,
            &sum_qs,
            x,
            d,
            k,
            &mut grad,
            &mut dqdiag,
            &mut dsum_qs,
        );
        adjoint::ssa::with_workspace(|ws| {
            ws.clear();
            gmm_qs::pullback(
                ws,
                p,
                d,
                k,
                &mut qdiag,
                &mut sum_qs,
                &mut grad,
                &mut dqdiag,
                &mut dsum_qs,
            )
        });
        (v, grad)
    }
    fn gmm_rest_grad(&self, g: &crate::adbench::io::GmmInput, p: &[f64]) -> (f64, Vec<f64>) {
        crate::adbench::Tape.gmm_rest_grad(g, p)
    }
    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
        crate::adbench::ba_block_from_rows(self, input, feat)
    }
    fn ba_rows(&self, input: &[f64; 15], feat: &[f64], rows: &mut [f64; 30]) {
        let mut d = [Cotangents([0.0; 2]); 15];
        let seed = (Cotangents::unit(0), Cotangents::unit(1));
        // `ba_project` has no loop, so its sweeps keep nothing: an empty workspace (no
        // allocation, and no cursors in the generated code) costs nothing, where the thread's
        // (`with_workspace`) cost 3 % of the Jacobian (one thread-local access per observation).
        let mut ws = adjoint::ssa::Workspace::new();
        ba_project::pullback_vec(&mut ws, input, feat, &mut d, seed);
        debug_assert_eq!(ws.capacity_bytes(), 0, "ba_project keeps something now");
        // Lane r of every input's cotangent is row r.
        for (i, c) in d.iter().enumerate() {
            rows[i] = c[0];
            rows[15 + i] = c[1];
        }
    }
}
