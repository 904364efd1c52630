//! ADBench's Gaussian mixture model objective, written once over [`Scalar`], and its gradient.

use super::io::GmmInput;
use super::{c, Engine, Scalar};
use rayon::prelude::*;

/// The reference implementation's π (a quirk we keep for comparable numbers).
#[allow(clippy::approx_constant)]
pub const PI: f64 = 3.14159265359;

/// log Γ_d(a), the log multivariate gamma function.
pub fn log_gamma_distrib(a: f64, d: usize) -> f64 {
    let df = d as f64;
    0.25 * df * (df - 1.0) * PI.ln()
        + (1..=d)
            .map(|j| libm::lgamma(a + 0.5 * (1.0 - j as f64)))
            .sum::<f64>()
}

/// `ln Σ exp xᵢ`, shifted by the maximum (a plain `f64` constant: the shift cancels in value
/// and derivative). The same function over `Real` is [`crate::problems::logsumexp`]; this one is
/// over [`Scalar`] so that peer crates' numbers run it.
pub fn logsumexp<T: Scalar>(x: &[T]) -> T {
    let m = x
        .iter()
        .map(|v| v.to_f64().expect("a real number"))
        .fold(f64::NEG_INFINITY, f64::max);
    x.iter()
        .map(|&v| (v - m).exp())
        .fold(T::zero(), |a, b| a + b)
        .ln()
        + m
}

/// Σ over points `from..to` of logsumexp_k(αₖ + Σqₖ − ½‖Qₖ(x − μₖ)‖²).
pub fn gmm_data_term<T: Scalar>(g: &GmmInput, p: &[T], from: usize, to: usize) -> T {
    let (d, k) = (g.d, g.k);
    let icf_sz = g.icf_size();
    let (alphas, rest) = p.split_at(k);
    let (means, icf) = rest.split_at(k * d);
    let sum_qs: Vec<T> = (0..k)
        .map(|ik| {
            icf[ik * icf_sz..ik * icf_sz + d]
                .iter()
                .fold(c::<T>(0.0), |a, &b| a + b)
        })
        .collect();
    let qdiags: Vec<T> = (0..k)
        .flat_map(|ik| icf[ik * icf_sz..ik * icf_sz + d].iter().map(|q| q.exp()))
        .collect();
    let mut main_term = vec![c::<T>(0.0); k];
    let mut xc = vec![c::<T>(0.0); d];
    let mut qxc = vec![c::<T>(0.0); d];
    let mut total = c::<T>(0.0);
    for ix in from..to {
        let x = &g.x[ix * d..(ix + 1) * d];
        for ik in 0..k {
            for j in 0..d {
                xc[j] = c::<T>(x[j]) - means[ik * d + j];
            }
            // Q·xc: diagonal exp(q) then the strictly lower triangle, column by column.
            for j in 0..d {
                qxc[j] = qdiags[ik * d + j] * xc[j];
            }
            let ltri = &icf[ik * icf_sz + d..(ik + 1) * icf_sz];
            let mut li = 0;
            for (i, &xi) in xc.iter().enumerate() {
                for q in &mut qxc[i + 1..] {
                    *q = *q + ltri[li] * xi;
                    li += 1;
                }
            }
            let sq = qxc.iter().fold(c::<T>(0.0), |a, &v| a + v * v);
            main_term[ik] = alphas[ik] + sum_qs[ik] - sq * 0.5;
        }
        total = total + logsumexp(&main_term);
    }
    total
}

/// [`gmm_data_term`] written with the shared slice primitives (`adjoint::vector`): `‖Q·xc‖²` as
/// one `dot` and one `logsumexp` over the components per point. On the tape each is one entry per result instead of one per scalar
/// operation. The same value up to the order of additions.
pub fn gmm_data_term_vector<T: adjoint::Real>(g: &GmmInput, p: &[T], from: usize, to: usize) -> T {
    use adjoint::vector;
    let (d, k) = (g.d, g.k);
    let icf_sz = g.icf_size();
    let (alphas, rest) = p.split_at(k);
    let (means, icf) = rest.split_at(k * d);
    let sum_qs: Vec<T> = (0..k)
        .map(|ik| vector::sum(&icf[ik * icf_sz..ik * icf_sz + d]))
        .collect();
    let qdiags: Vec<T> = (0..k)
        .flat_map(|ik| icf[ik * icf_sz..ik * icf_sz + d].iter().map(|q| q.exp()))
        .collect();
    let mut main_term = vec![T::cst(0.0); k];
    let mut xc = vec![T::cst(0.0); d];
    let mut qxc = vec![T::cst(0.0); d];
    let mut total = T::cst(0.0);
    for ix in from..to {
        let x = &g.x[ix * d..(ix + 1) * d];
        for ik in 0..k {
            for j in 0..d {
                xc[j] = T::cst(x[j]) - means[ik * d + j];
                qxc[j] = qdiags[ik * d + j] * xc[j];
            }
            // The strictly lower triangle, column by column: qxc[i+1..] += xcᵢ · L[.., i]
            // (scalar operations: `axpy` has one result per element, so it saves nothing).
            let ltri = &icf[ik * icf_sz + d..(ik + 1) * icf_sz];
            let mut li = 0;
            for (i, &xi) in xc.iter().enumerate() {
                for q in &mut qxc[i + 1..] {
                    *q += ltri[li] * xi;
                    li += 1;
                }
            }
            main_term[ik] = alphas[ik] + sum_qs[ik] - vector::dot(&qxc, &qxc) * 0.5;
        }
        total += vector::logsumexp(&main_term);
    }
    total
}

/// Everything but the data term: constant, −n·logsumexp(α) and the Wishart prior.
pub fn gmm_rest<T: Scalar>(g: &GmmInput, p: &[T]) -> T {
    let (d, k) = (g.d, g.k);
    let icf_sz = g.icf_size();
    let (alphas, rest) = p.split_at(k);
    let icf = &rest[k * d..];
    let df = d as f64;
    let constant = -(g.n as f64) * df * 0.5 * (2.0 * PI).ln();
    let nn = df + g.m + 1.0;
    let wishart_c = nn * df * (g.gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_distrib(0.5 * nn, d);
    let mut prior = c::<T>(0.0);
    for ik in 0..k {
        let block = &icf[ik * icf_sz..(ik + 1) * icf_sz];
        let sum_q = block[..d].iter().fold(c::<T>(0.0), |a, &b| a + b);
        let frob: T = block[..d]
            .iter()
            .map(|q| {
                let e = q.exp();
                e * e
            })
            .chain(block[d..].iter().map(|&l| l * l))
            .fold(c::<T>(0.0), |a, b| a + b);
        prior = prior + frob * (0.5 * g.gamma * g.gamma) - sum_q * g.m;
    }
    logsumexp(alphas) * -(g.n as f64) + prior + (constant - k as f64 * wishart_c)
}

/// The GMM objective at parameters `p = [α, μ, icf]`.
pub fn gmm_objective<T: Scalar>(g: &GmmInput, p: &[T]) -> T {
    gmm_data_term(g, p, 0, g.n) + gmm_rest(g, p)
}

/// Points per chunk of the parallel gradient, fixed by the sizes only, so the result does not
/// depend on the number of threads. Four bounds:
/// - parallelism: at most about [`GMM_CHUNKS`] chunks' worth of points per chunk, enough chunks
///   for 16 threads to balance (a chunk per thread would leave the last thread's chunk as a
///   tail);
/// - cache, for an engine that records a tape (`tape`): at most ~[`CHUNK_CACHE_ENTRIES`] tape
///   entries per chunk, so that a chunk's tape and adjoints stay in the caches of the core that
///   records and sweeps it (at 10k d10 K25 the parallelism bound alone made 157-point chunks of
///   18 MB of tape, and the tape's gradient ran 1.63-1.73× faster on two threads than on one on
///   the 2-core machine; with 69-point chunks, 1.95×). An engine without a tape (the SSA
///   transform) pays a fixed cost per chunk instead, and smaller chunks only slow it;
/// - merge cost: each chunk returns a full parameter gradient that is added in chunk order, so a
///   chunk does at least 8× as much work (points × per-point work) as it has parameters (this
///   one wins over the first two);
/// - memory: at most ~4·10⁶ tape entries per chunk (one chunk is live per thread; this one
///   wins over all).
pub fn chunk_points(g: &GmmInput, tape: bool) -> usize {
    let per_point = g.k * (g.d * g.d + 4 * g.d + 4);
    let params = g.k * (1 + g.d + g.d * (g.d + 1) / 2);
    let for_threads = g.n.div_ceil(GMM_CHUNKS);
    let for_cache = if tape {
        CHUNK_CACHE_ENTRIES / per_point.max(1)
    } else {
        usize::MAX
    };
    let for_merge = (8 * params).div_ceil(per_point.max(1));
    let for_memory = 4_000_000 / per_point.max(1);
    for_threads
        .min(for_cache)
        .max(for_merge)
        .min(for_memory)
        .clamp(1, g.n.max(1))
}

/// Target number of point chunks of the parallel GMM gradient (more where chunks that size
/// would not fit the caches).
pub const GMM_CHUNKS: usize = 64;

/// The most bytes of chunk gradients held at once before they are added (at least
/// [`GMM_CHUNKS`] chunks' worth): at 10k d10 K200, 1250 chunks of 13 200 parameters would
/// otherwise hold 132 MB.
const MERGE_BYTES: usize = 32 << 20;

/// The most tape entries a chunk of the parallel GMM gradient aims at (~8 MB of entries and
/// adjoints).
pub const CHUNK_CACHE_ENTRIES: usize = 250_000;

/// The GMM gradient with `engine`: the data term is a sum over points, so chunks of points are
/// recorded and swept independently on rayon's threads (each with its own tape, bounded
/// memory), as many at a time as `MERGE_BYTES` of their gradients allows, and their
/// gradients are added in chunk order
/// (deterministic for any thread count); the remaining terms are one more recording. Returns
/// the objective value too.
pub fn gmm_gradient<E: Engine>(engine: &E, g: &GmmInput, p: &[f64], grad: &mut [f64]) -> f64 {
    let group = (MERGE_BYTES / (8 * p.len().max(1))).max(GMM_CHUNKS);
    gmm_gradient_in_groups(engine, g, p, grad, group)
}

/// [`gmm_gradient`] holding the gradients of `group` chunks at once: the same sums in the same
/// order, so the same bits, whatever `group` is (a test checks it).
pub fn gmm_gradient_in_groups<E: Engine>(
    engine: &E,
    g: &GmmInput,
    p: &[f64],
    grad: &mut [f64],
    group: usize,
) -> f64 {
    let chunk = chunk_points(g, E::TAPE);
    let starts: Vec<usize> = (0..g.n).step_by(chunk).collect();
    let (mut value, rest) = engine.gmm_rest_grad(g, p);
    grad.copy_from_slice(&rest);
    for group in starts.chunks(group.max(1)) {
        let parts: Vec<(f64, Vec<f64>)> = group
            .par_iter()
            .map(|&s| engine.gmm_data_grad(g, p, s, (s + chunk).min(g.n)))
            .collect();
        for (v, gpart) in parts {
            value += v;
            for (a, b) in grad.iter_mut().zip(gpart) {
                *a += b;
            }
        }
    }
    value
}

/// The GMM gradient on adjoint's tape engine.
pub fn gmm_gradient_tape(g: &GmmInput, p: &[f64], grad: &mut [f64]) -> f64 {
    gmm_gradient(&super::Tape, g, p, grad)
}
