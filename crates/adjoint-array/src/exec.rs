//! Running a graph (the primal pass, demand-driven so that `acond` computes only the branch
//! taken) and its reverse pass (adjoints accumulated per node, last node first).

use crate::buffers::{overwritten, recycle, zeroed};
use crate::error::{Error, Result};
use crate::expr::Ty;
use crate::expr::{infer, storable, Arena, Id, Lambda, Node};
use crate::f32ops::{add_t, bin32, r32};
use crate::graph::DType;
use crate::graph::{ANode, Combine, Graph, NodeId};
use crate::kernel::{
    chunks, combine_windows, for_chunks, run_store, run_sum, sum_lanes, sum_lanes_as, Eval, Inputs,
    Kernel, ParamSrc, ScatterSpec, Types, Window,
};
use crate::matmul::{gated_matmul, matmul, View};
use adjoint_core::rules::{self, Op2};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) const AUX_DENSE: u32 = u32::MAX - 1;
pub(crate) const AUX_BC: u32 = u32::MAX - 2;

struct PermAux {
    /// flat target per source element, -1 when not kept
    targets: Vec<i64>,
    /// for max/min: the source index that won each target, -1 for the default
    winners: Option<Vec<i64>>,
}

struct LoopAux<'g> {
    iters: Vec<Exec<'g>>,
    state: Vec<Val<'g>>,
}

/// An array value: borrowed from the caller (inputs) or owned (shared by `Arc`).
#[derive(Clone, Debug)]
pub(crate) enum Val<'a> {
    B(&'a [f64]),
    O(Arc<Vec<f64>>),
}

impl Val<'_> {
    pub(crate) fn as_slice(&self) -> &[f64] {
        match self {
            Val::B(s) => s,
            Val::O(v) => v,
        }
    }
    pub(crate) fn into_vec(self) -> Vec<f64> {
        match self {
            Val::B(s) => s.to_vec(),
            Val::O(v) => Arc::try_unwrap(v).unwrap_or_else(|v| (*v).clone()),
        }
    }
}

/// The values of one run of a graph.
pub(crate) struct Exec<'g> {
    g: &'g Graph,
    inputs: Vec<Val<'g>>,
    vals: Vec<Option<Val<'g>>>,
    taken: Vec<bool>,
    record: bool,
    perm: HashMap<NodeId, PermAux>,
    loops: HashMap<NodeId, LoopAux<'g>>,
    /// the values a `scan_n` step stored for the reverse pass ([`scan_n_stored`]),
    /// `[steps, stored, lanes]`
    stores: HashMap<NodeId, Vec<f64>>,
    /// Caller buffers for output nodes ([`Program::run_into`](crate::Program::run_into)):
    /// an element-wise node writes into its buffer instead of a fresh allocation.
    out_bufs: HashMap<NodeId, Vec<f64>>,
}

/// Run `f`, a run of graph `g`, on a thread of rayon's pool and wait for it: the many parallel
/// loops of one run then start on a worker (and split across the pool from there) instead of
/// each being handed to the pool from outside while the caller's thread sleeps. Measured on the
/// GMM gradient at 1 thread (n = 1000): d2 K5 0.24 → 0.18 ms, d10 K5 0.54 → 0.38 ms, together
/// with [`crate::buffers`] (without it, pool threads paid page faults for every large array).
///
/// A small graph ([`small`]) runs on the calling thread: the round trip to the pool (the caller
/// asleep on a latch, two context switches) was most of a small run's time (Rosenbrock over 100
/// elements: 16 µs a gradient, 18 µs a run; 3 and 1.2 µs on the caller). Its loops mostly run
/// on one thread anyway; one heavy enough to split (`exp` over a few thousand elements, a small
/// matrix product) is handed to the pool from here, a round trip per such loop: at 15 000
/// elements an `exp`-and-`sin` map's gradient took 5–8 % longer that way than on the pool, at
/// 2000 elements 40 % less (scratch timings, 2 cores), hence the bound [`SMALL`].
pub(crate) fn on_pool<R: Send>(g: &Graph, f: impl FnOnce() -> R + Send) -> R {
    crate::buffers::start_run();
    if rayon::current_thread_index().is_some() || small(g) {
        return f();
    }
    let mut out = None;
    rayon::scope(|s| s.spawn(|_| out = Some(f())));
    out.expect("the pool ran the job")
}

/// Graphs whose arrays together hold fewer elements run on the calling thread ([`on_pool`]).
const SMALL: usize = 1 << 13;

/// Whether all of `g`'s arrays together hold fewer than [`SMALL`] elements.
fn small(g: &Graph) -> bool {
    g.nodes
        .iter()
        .try_fold(0usize, |total, n| {
            let total = total.saturating_add(n.shape.iter().product());
            (total < SMALL).then_some(total)
        })
        .is_some()
}

impl Drop for Exec<'_> {
    /// Large values no one else holds are kept for the next run ([`crate::buffers`]).
    fn drop(&mut self) {
        for v in self.vals.drain(..).flatten() {
            if let Val::O(a) = v {
                if let Ok(a) = Arc::try_unwrap(a) {
                    recycle(a);
                }
            }
        }
    }
}

impl Drop for Adj {
    fn drop(&mut self) {
        self.dense
            .drain(..)
            .chain(self.bc.drain(..))
            .flatten()
            .for_each(recycle);
    }
}

/// The element type of node `key`'s array.
pub(crate) fn node_ty(g: &Graph, key: u32) -> Ty {
    g.nodes
        .get(key as usize)
        .map_or(Ty::F64, |n| Ty::of(n.dtype))
}

/// A lambda's kernel computing its outputs over `space` (parameters of types `params`), then
/// the nodes `extra` as further roots.
fn value_kernel(g: &Graph, lam: &Lambda, extra: &[Id], space: &[usize], params: &[Ty]) -> Kernel {
    let roots: Vec<Id> = lam.outs.iter().chain(extra).copied().collect();
    Kernel::compile(
        lam.ar.clone(),
        &roots,
        &[],
        &lam.outs,
        &[],
        space,
        lam.nparams,
        &|k| g.shape_of(k),
        &Types {
            params,
            read: &|k| node_ty(g, k),
        },
    )
    .with_jit(g.jit)
}

/// Node `i`'s kernel number `key` from its cache, made by `make` on first use.
fn cached_kernel(g: &Graph, i: NodeId, key: u32, make: impl FnOnce() -> Kernel) -> Arc<Kernel> {
    g.adjoint[i as usize]
        .lock()
        .expect("kernel cache")
        .entry(key)
        .or_insert_with(|| Arc::new(make()))
        .clone()
}

pub(crate) fn primal_kernel<'a>(
    g: &'a Graph,
    i: NodeId,
    lam: &Lambda,
    args: &[NodeId],
    space: &[usize],
) -> &'a Kernel {
    g.primal[i as usize].get_or_init(|| {
        let params: Vec<Ty> = args.iter().map(|&a| node_ty(g, a)).collect();
        Arc::new(value_kernel(g, lam, &[], space, &params))
    })
}

impl<'g> Exec<'g> {
    pub(crate) fn new(g: &'g Graph, inputs: Vec<Val<'g>>, record: bool) -> Self {
        let n = g.nodes.len();
        Exec {
            g,
            inputs,
            vals: vec![None; n],
            taken: vec![false; n],
            record,
            perm: HashMap::new(),
            loops: HashMap::new(),
            stores: HashMap::new(),
            out_bufs: HashMap::new(),
        }
    }

    /// Hand the run a caller's buffer for output node `n` (reused when `n` is element-wise).
    pub(crate) fn give_buffer(&mut self, n: NodeId, buf: Vec<f64>) {
        self.out_bufs.insert(n, buf);
    }

    /// An output buffer of `len` elements for node `i`: the caller's (contents unspecified, every
    /// element is written by the kernel), else a fresh zeroed one.
    fn out_buffer(&mut self, i: NodeId, len: usize) -> Vec<f64> {
        match self.out_bufs.remove(&i) {
            Some(mut b) => {
                b.resize(len, 0.0);
                b
            }
            None => overwritten(len),
        }
    }

    pub(crate) fn run_outputs(&mut self) -> Result<()> {
        for &o in &self.g.outputs.clone() {
            self.force(o)?;
        }
        Ok(())
    }

    /// Take an output's value (without a copy when nothing else holds it: not another array,
    /// nor another place in the outputs — `build(&[&y, &y])` takes `y` twice).
    pub(crate) fn take_value(&mut self, n: NodeId) -> Vec<f64> {
        let v = self.vals[n as usize].take().expect("computed");
        let listed_again = self.g.outputs.iter().filter(|&&o| o == n).count() > 1;
        let out = match &v {
            Val::O(a) if Arc::strong_count(a) == 1 && !listed_again => v.into_vec(),
            _ => {
                let c = v.as_slice().to_vec();
                self.vals[n as usize] = Some(v);
                c
            }
        };
        out
    }

    pub(crate) fn value(&self, n: NodeId) -> &[f64] {
        self.vals[n as usize]
            .as_ref()
            .expect("value computed before use")
            .as_slice()
    }

    pub(crate) fn computed(&self, n: NodeId) -> bool {
        self.vals[n as usize].is_some()
    }

    fn kernel_inputs<'a>(
        &'a self,
        k: &Kernel,
        caller: &[&'a [f64]],
        aux: &dyn Fn(u32) -> Option<&'a [f64]>,
    ) -> Inputs<'a> {
        let get = |key: u32| -> &'a [f64] { aux(key).unwrap_or_else(|| self.value(key)) };
        Inputs {
            params: k
                .params
                .iter()
                .map(|p| match p {
                    ParamSrc::Caller(j) => caller[*j as usize],
                    ParamSrc::Array(key) => get(*key),
                })
                .collect(),
            arrays: k.arrays.iter().map(|&key| get(key)).collect(),
        }
    }

    fn force_reads(&mut self, lam: &Lambda) -> Result<()> {
        for &r in lam.reads() {
            self.force(r)?;
        }
        Ok(())
    }

    /// Compute node `i` (and, first, what it needs).
    pub(crate) fn force(&mut self, i: NodeId) -> Result<()> {
        if self.computed(i) {
            return Ok(());
        }
        // first what it needs, in node order: see `Graph::needed_in_order`
        for n in self.g.needed_in_order(i, |d| self.computed(d)) {
            self.force_node(n)?;
        }
        Ok(())
    }

    fn force_node(&mut self, i: NodeId) -> Result<()> {
        if self.computed(i) {
            return Ok(());
        }

        let g = self.g;
        let info = &g.nodes[i as usize];
        let total: usize = info.shape.iter().product();
        let v: Vec<f64> = match &info.kind {
            ANode::Input { index, .. } => {
                self.vals[i as usize] = Some(self.inputs[*index].clone());
                return Ok(());
            }
            ANode::Use(d) => {
                self.vals[i as usize] = Some(Val::O(d.clone()));
                return Ok(());
            }
            ANode::Reshape { src } | ANode::StopGrad { src } => {
                self.force(*src)?;
                self.vals[i as usize] = self.vals[*src as usize].clone();
                return Ok(());
            }
            ANode::Gen { lam, args, space } => {
                for &a in args {
                    self.force(a)?;
                }
                self.force_reads(lam)?;
                let k = primal_kernel(g, i, lam, args, space);
                let buf = if self.out_bufs.is_empty() {
                    overwritten(total)
                } else {
                    self.out_buffer(i, total)
                };
                let caller: Vec<&[f64]> = args.iter().map(|&a| self.value(a)).collect();
                let inp = self.kernel_inputs(k, &caller, &|_| None);
                let groups = vec![(0..lam.outs.len()).collect::<Vec<_>>()];
                let mut outs = vec![buf];
                run_store(k, &inp, &groups, &mut outs)?;
                outs.pop().expect("one output")
            }
            ANode::SumGen { lam, args, space } => {
                for &a in args {
                    self.force(a)?;
                }
                self.force_reads(lam)?;
                let k = primal_kernel(g, i, lam, args, space);
                let caller: Vec<&[f64]> = args.iter().map(|&a| self.value(a)).collect();
                let inp = self.kernel_inputs(k, &caller, &|_| None);
                run_sum(k, &inp, *space.last().expect("rank ≥ 1"))?.0
            }
            ANode::Sum { src } => {
                self.force(*src)?;
                let sshape = &g.nodes[*src as usize].shape;
                let inner = *sshape.last().expect("rank ≥ 1");
                let data = self.value(*src);
                sum_rows(data, inner, total, info.dtype == DType::F32)
            }
            ANode::Fold { f, init, src } => {
                self.force(*src)?;
                self.force_reads(f)?;
                let inner = *g.nodes[*src as usize].shape.last().expect("rank ≥ 1");
                let rows = total;
                let init_v = match init {
                    Some(l) => Some(self.eval_init(i, l, &info.shape)?),
                    None => None,
                };
                let data = self.value(*src);
                let f32 = info.dtype == DType::F32;
                match f.as_binop() {
                    Some(op) => fold_native(op, data, rows, inner, init_v.as_deref(), f32),
                    None => {
                        let (x0, xs, inn) = match &init_v {
                            Some(v) => (v.clone(), data.to_vec(), inner),
                            None => split_first_col(data, rows, inner),
                        };
                        let k = self.step_kernel(i, f);
                        self.scan_general(k, &xs, rows, inn, &x0, false, None)?
                    }
                }
            }
            ANode::Scan {
                f,
                init,
                src,
                right,
            } => {
                self.force(*src)?;
                self.force_reads(f)?;
                let inner = *g.nodes[*src as usize].shape.last().expect("rank ≥ 1");
                let rows = total / (inner + 1);
                let init_v = self.eval_init(i, init, &info.shape[..info.shape.len() - 1])?;
                let data = self.value(*src);
                let mut out = vec![0.0; total];
                match f.as_binop() {
                    Some(op) => {
                        let f32 = info.dtype == DType::F32;
                        scan_native(op, data, rows, inner, &init_v, *right, &mut out, f32)
                    }
                    None => {
                        let k = self.step_kernel(i, f);
                        self.scan_general(k, data, rows, inner, &init_v, *right, Some(&mut out))?;
                    }
                }
                out
            }
            ANode::ScanN {
                init,
                step,
                lanes,
                steps,
            } => {
                self.force_reads(init)?;
                self.force_reads(step)?;
                let init_v = self.eval_init(i, init, lanes)?;
                // A gradient's primal pass keeps the step's transcendental values.
                let stored = if self.record {
                    scan_n_stored(g, step)
                } else {
                    vec![]
                };
                let k = self.scan_n_kernel(i, step, lanes, *steps, &stored);
                let (states, kept) = self.scan_n(&k, step.outs.len(), &init_v, *steps)?;
                if !stored.is_empty() {
                    self.stores.insert(i, kept);
                }
                states
            }
            ANode::Permute {
                comb,
                default,
                idx,
                src,
            } => {
                self.force(*default)?;
                self.force(*src)?;
                self.force_reads(idx)?;
                let sspace = g.nodes[*src as usize].shape.clone();
                let k = primal_kernel(g, i, idx, &[], &sspace);
                let inp = self.kernel_inputs(k, &[], &|_| None);
                let w = idx.outs.len();
                let ns: usize = sspace.iter().product();
                let mut outs = vec![vec![0.0; ns * w]];
                run_store(k, &inp, &[(0..w).collect()], &mut outs)?;
                let tix = &outs[0];
                let tshape = &info.shape;
                let st = crate::kernel::strides(tshape);
                let mut targets = vec![-1i64; ns];
                for (s, t) in targets.iter_mut().enumerate() {
                    let row = &tix[s * w..(s + 1) * w];
                    if row[0] == 0.0 {
                        continue;
                    }
                    let mut flat = 0usize;
                    for (a, &x) in row[1..].iter().enumerate() {
                        if !(x >= 0.0 && x < tshape[a] as f64) {
                            return Err(Error::OutOfBounds {
                                index: row[1..].to_vec(),
                                shape: tshape.clone(),
                                context: "permute",
                            });
                        }
                        flat += x as usize * st[a];
                    }
                    *t = flat as i64;
                }
                let mut out = self.value(*default).to_vec();
                let x = self.value(*src);
                let winners = match comb {
                    Combine::Add if info.dtype == DType::F32 => {
                        for (s, &t) in targets.iter().enumerate() {
                            if t >= 0 {
                                let o = &mut out[t as usize];
                                *o = add_t(true, *o, x[s]);
                            }
                        }
                        None
                    }
                    Combine::Add => {
                        for (s, &t) in targets.iter().enumerate() {
                            if t >= 0 {
                                out[t as usize] += x[s];
                            }
                        }
                        None
                    }
                    Combine::Max | Combine::Min => {
                        let mut win = vec![-1i64; out.len()];
                        for (s, &t) in targets.iter().enumerate() {
                            if t >= 0 {
                                let cur = out[t as usize];
                                // As `f64::max`/`f64::min` folded in source order: a NaN
                                // never wins against a number, and a number replaces a NaN.
                                let better = if *comb == Combine::Max {
                                    x[s] > cur
                                } else {
                                    x[s] < cur
                                } || (cur.is_nan() && !x[s].is_nan());
                                if better {
                                    out[t as usize] = x[s];
                                    win[t as usize] = s as i64;
                                }
                            }
                        }
                        Some(win)
                    }
                };
                if self.record {
                    self.perm.insert(i, PermAux { targets, winners });
                }
                out
            }
            ANode::Acond { cond, t, e } => {
                let b = if self.acond_taken(i, cond)? { *t } else { *e };
                self.force(b)?;
                self.vals[i as usize] = self.vals[b as usize].clone();
                return Ok(());
            }
            ANode::Awhile { lp, init, inv } => {
                for &a in init.iter().chain(inv) {
                    self.force(a)?;
                }
                let mut state: Vec<Val<'g>> = init
                    .iter()
                    .map(|&a| self.vals[a as usize].clone().expect("forced"))
                    .collect();
                let invv: Vec<Val<'g>> = inv
                    .iter()
                    .map(|&a| self.vals[a as usize].clone().expect("forced"))
                    .collect();
                let lp: &'g crate::graph::Loop = lp;
                let mut iters = Vec::new();
                loop {
                    let ins: Vec<Val<'g>> = state.iter().chain(&invv).cloned().collect();
                    let mut c = Exec::new(&lp.cond, ins.clone(), false);
                    c.run_outputs()?;
                    if c.value(lp.cond.outputs[0])[0] == 0.0 {
                        break;
                    }
                    let mut b = Exec::new(&lp.body, ins, self.record);
                    b.run_outputs()?;
                    state = lp
                        .body
                        .outputs
                        .iter()
                        .map(|&o| b.vals[o as usize].clone().expect("output"))
                        .collect();
                    if self.record {
                        iters.push(b);
                    }
                }
                self.loops.insert(i, LoopAux { iters, state });
                self.vals[i as usize] = Some(Val::O(Arc::new(Vec::new())));
                return Ok(());
            }
            ANode::Proj { src, k } => {
                self.force(*src)?;
                let s = self.loops[src].state[*k].clone();
                self.vals[i as usize] = Some(s);
                return Ok(());
            }
            ANode::MatMul { a, b } => {
                self.force(*a)?;
                self.force(*b)?;
                let (va, vb) = matmul_views(g, *a, self.value(*a), *b, self.value(*b));
                matmul(va, vb, info.dtype == DType::F32)
            }
        };
        self.vals[i as usize] = Some(Val::O(Arc::new(v)));
        Ok(())
    }

    /// Whether `acond` node `i` takes its `then` branch: its condition evaluated (and, first,
    /// the arrays the condition reads), kept for the reverse pass.
    pub(crate) fn acond_taken(&mut self, i: NodeId, cond: &Lambda) -> Result<bool> {
        self.force_reads(cond)?;
        let k = primal_kernel(self.g, i, cond, &[], &[]);
        let inp = self.kernel_inputs(k, &[], &|_| None);
        let mut outs = vec![vec![0.0; 1]];
        run_store(k, &inp, &[vec![0]], &mut outs)?;
        let take = outs[0][0] != 0.0;
        self.taken[i as usize] = take;
        Ok(take)
    }

    /// Give node `n` a value computed elsewhere (another backend's), so that computing a node
    /// that reads it reads this.
    #[cfg(feature = "cuda")]
    pub(crate) fn import(&mut self, n: NodeId, v: Vec<f64>) {
        self.vals[n as usize] = Some(Val::O(Arc::new(v)));
    }

    /// Evaluate a 0-parameter lambda over the outer space (fold/scan initial values).
    /// The values of an initial-value lambda over the space `outer` (its outputs interleaved).
    fn eval_init(&mut self, i: NodeId, l: &Lambda, outer: &[usize]) -> Result<Vec<f64>> {
        self.force_reads(l)?;
        let k = cached_kernel(self.g, i, 100, || value_kernel(self.g, l, &[], outer, &[]));
        let inp = self.kernel_inputs(&k, &[], &|_| None);
        let n: usize = outer.iter().product();
        let w = l.outs.len();
        let mut outs = vec![vec![0.0; n * w]];
        run_store(&k, &inp, &[(0..w).collect()], &mut outs)?;
        Ok(outs.pop().expect("one"))
    }

    /// The kernel of a fold/scan step `f(p0, p1)` over a 1-D space (both parameters of the
    /// node's element type).
    fn step_kernel(&self, i: NodeId, f: &Lambda) -> Arc<Kernel> {
        let t = node_ty(self.g, i);
        cached_kernel(self.g, i, 101, || {
            value_kernel(self.g, f, &[], &[1], &[t, t])
        })
    }

    /// The kernel of a `scan_n` step over the space `[steps] ++ lanes`, the state as its
    /// parameters; its roots are the next state, then the `stored` nodes' values.
    fn scan_n_kernel(
        &self,
        i: NodeId,
        step: &Lambda,
        lanes: &[usize],
        steps: usize,
        stored: &[Id],
    ) -> Arc<Kernel> {
        let key = if stored.is_empty() { 102 } else { 103 };
        cached_kernel(self.g, i, key, || {
            let space: Vec<usize> = std::iter::once(steps)
                .chain(lanes.iter().copied())
                .collect();
            let params = vec![Ty::F64; step.nparams as usize];
            value_kernel(self.g, step, stored, &space, &params)
        })
    }

    /// Run a `scan_n` recurrence with an `n`-number state: `init` holds each lane's starting
    /// state (`[lanes, n]`); returns the states, `[steps + 1, lanes, n]`, and the values of the
    /// kernel's further roots (stored nodes, [`scan_n_stored`]) at every step,
    /// `[steps, stored, lanes]`. Lanes go in fixed groups (at most 64, see [`lane_groups`]), the
    /// groups in parallel; a group takes each step in pieces of at most one kernel block,
    /// piece `[s, s + len)` of step `t` being elements `t·L + s..` of the space.
    fn scan_n(
        &self,
        k: &Kernel,
        n: usize,
        init: &[f64],
        steps: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let ns = k.roots.len() - n;
        let nl = init.len() / n;
        // Parameters: the state (columns of the group's lanes) and arrays read at the identity
        // index (whole-space data, cut per piece).
        let inp = self.kernel_inputs(k, &vec![&[][..]; n], &|_| None);
        let groups = lane_groups(nl, 64);
        // Each group's states, `[steps + 1, len, n]`, and stored values, `[steps, ns, len]`,
        // placed into the results afterwards.
        let parts: Vec<Result<(Vec<f64>, Vec<f64>)>> = groups
            .par_iter()
            .map(|&(r0, r1)| {
                let len = r1 - r0;
                let mut ev = Eval::new(k);
                let mut part = vec![0.0; (steps + 1) * len * n];
                let mut kept = vec![0.0; steps * ns * len];
                part[..len * n].copy_from_slice(&init[r0 * n..r1 * n]);
                // the state, one column of the group's lanes per component
                let mut cols: Vec<Vec<f64>> = (0..n)
                    .map(|c| (0..len).map(|r| init[(r0 + r) * n + c]).collect())
                    .collect();
                let mut next = cols.clone();
                for t in 0..steps {
                    let row = &mut part[(t + 1) * len * n..(t + 2) * len * n];
                    for (s, m) in pieces(len, k.block) {
                        let start = t * nl + r0 + s;
                        let params = step_params(k, &inp.params, &cols, s, start, m);
                        ev.run(start, m, &params, &inp.arrays)?;
                        for (c, (nx, &root)) in next.iter_mut().zip(&k.roots).enumerate() {
                            nx[s..s + m].copy_from_slice(ev.get(root, &params, m));
                            for (r, &v) in nx[s..s + m].iter().enumerate() {
                                row[(s + r) * n + c] = v;
                            }
                        }
                        for (j, &root) in k.roots[n..].iter().enumerate() {
                            let at = (t * ns + j) * len + s;
                            kept[at..at + m].copy_from_slice(ev.get(root, &params, m));
                        }
                    }
                    std::mem::swap(&mut cols, &mut next);
                }
                Ok((part, kept))
            })
            .collect();
        if groups.len() == 1 {
            // one group: its parts are the results
            return parts.into_iter().next().expect("one group");
        }
        let mut out = vec![0.0; (steps + 1) * nl * n];
        let mut stored = vec![0.0; steps * ns * nl];
        for (part, &(r0, r1)) in parts.into_iter().zip(&groups) {
            let ((part, kept), len) = (part?, r1 - r0);
            for t in 0..=steps {
                out[(t * nl + r0) * n..(t * nl + r1) * n]
                    .copy_from_slice(&part[t * len * n..(t + 1) * len * n]);
            }
            for tj in 0..steps * ns {
                stored[tj * nl + r0..tj * nl + r1].copy_from_slice(&kept[tj * len..(tj + 1) * len]);
            }
        }
        Ok((out, stored))
    }

    /// Column-by-column scan (or fold, `out = None`) with a general step function, vectorised
    /// across rows: `rows` rows of `inner` elements of `src`. Returns the final accumulators.
    #[allow(clippy::too_many_arguments)]
    fn scan_general(
        &self,
        k: Arc<Kernel>,
        src: &[f64],
        rows: usize,
        inner: usize,
        init: &[f64],
        right: bool,
        out: Option<&mut Vec<f64>>,
    ) -> Result<Vec<f64>> {
        let inp = self.kernel_inputs(&k, &[&[], &[]], &|_| None);
        let arrays = inp.arrays;
        let rb = k.block;
        let w = inner + 1;
        let groups: Vec<(usize, usize)> = (0..rows)
            .step_by(rb.max(1))
            .map(|r| (r, (r + rb).min(rows)))
            .collect();
        let mut outs: Vec<Option<&mut [f64]>> = match out {
            Some(o) => o.chunks_mut(rb * w).map(Some).collect(),
            None => groups.iter().map(|_| None).collect(),
        };
        let res: Vec<Result<Vec<f64>>> = groups
            .par_iter()
            .zip(outs.par_iter_mut())
            .map(|(&(r0, r1), o)| {
                let n = r1 - r0;
                let mut ev = Eval::new(&k);
                let mut acc = init[r0..r1].to_vec();
                let mut col = vec![0.0; n];
                if let Some(o) = o.as_deref_mut() {
                    let at = if right { inner } else { 0 };
                    for r in 0..n {
                        o[r * w + at] = acc[r];
                    }
                }
                for step in 0..inner {
                    let j = if right { inner - 1 - step } else { step };
                    for r in 0..n {
                        col[r] = src[(r0 + r) * inner + j];
                    }
                    let params: [&[f64]; 2] = if right { [&col, &acc] } else { [&acc, &col] };
                    ev.run(0, n, &params, &arrays)?;
                    let v = ev.get(k.roots[0], &params, n).to_vec();
                    acc.copy_from_slice(&v);
                    if let Some(o) = o.as_deref_mut() {
                        let at = if right { j } else { j + 1 };
                        for r in 0..n {
                            o[r * w + at] = acc[r];
                        }
                    }
                }
                Ok(acc)
            })
            .collect();
        let mut fin = Vec::with_capacity(rows);
        for r in res {
            fin.extend(r?);
        }
        Ok(fin)
    }
}

fn split_first_col(data: &[f64], rows: usize, inner: usize) -> (Vec<f64>, Vec<f64>, usize) {
    let x0: Vec<f64> = (0..rows).map(|r| data[r * inner]).collect();
    let mut xs = Vec::with_capacity(rows * (inner - 1));
    for r in 0..rows {
        xs.extend_from_slice(&data[r * inner + 1..(r + 1) * inner]);
    }
    (x0, xs, inner - 1)
}

/// Row sums of a materialised array, rows in parallel with fixed groups.
fn sum_rows(data: &[f64], inner: usize, rows: usize, f32: bool) -> Vec<f64> {
    let lanes = if f32 { sum_lanes_as::<f32> } else { sum_lanes };
    if inner == 0 {
        return vec![0.0; rows];
    }
    if rows == 1 {
        // One long row: fixed chunks, partials added in chunk order.
        let ch = chunks(inner, 1024);
        let mut parts = vec![0.0; ch.len()];
        for_chunks(&mut parts, 1, inner, |c, p| {
            p[0] = lanes(&data[ch[c].0..ch[c].1]);
        });
        return vec![parts.iter().fold(0.0, |a, &b| add_t(f32, a, b))];
    }
    let mut out = vec![0.0; rows];
    let per = rows.div_ceil(64).max(1);
    for_chunks(&mut out, per, data.len(), |c, o| {
        for (r, v) in o.iter_mut().enumerate() {
            let row = c * per + r;
            *v = lanes(&data[row * inner..(row + 1) * inner]);
        }
    });
    out
}

/// Folds with a recognised operator (`+` in four interleaved lanes, `*`, `max`, `min` in
/// order), rows in parallel; `f32` rows are computed in `f32`.
fn fold_native(
    op: Op2,
    data: &[f64],
    rows: usize,
    inner: usize,
    init: Option<&[f64]>,
    f32: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; rows];
    let per = rows.div_ceil(64).max(1);
    for_chunks(&mut out, per, data.len(), |c, o| {
        for (r, v) in o.iter_mut().enumerate() {
            let row = c * per + r;
            let x = &data[row * inner..(row + 1) * inner];
            let (mut acc, rest) = match init {
                Some(i) => (i[row], x),
                None => (x[0], &x[1..]),
            };
            if f32 {
                *v = fold_row_f32(op, acc, rest);
                continue;
            }
            match op {
                Op2::Add => acc += sum_lanes(rest),
                Op2::Mul => rest.iter().for_each(|&y| acc *= y),
                Op2::Max => rest
                    .iter()
                    .for_each(|&y| acc = rules::binary(Op2::Max, acc, y).value),
                Op2::Min => rest
                    .iter()
                    .for_each(|&y| acc = rules::binary(Op2::Min, acc, y).value),
                _ => unreachable!("native folds: add, mul, max, min"),
            }
            *v = acc;
        }
    });
    out
}

/// One `f32` row of [`fold_native`]: the same order, every operation in `f32`.
fn fold_row_f32(op: Op2, acc: f64, rest: &[f64]) -> f64 {
    if op == Op2::Add {
        return add_t(true, acc, sum_lanes_as::<f32>(rest));
    }
    let mut a = acc as f32;
    for &y in rest {
        a = bin32(op, a, y as f32);
    }
    f64::from(a)
}

/// Scans with a recognised operator, rows in parallel (in `f32` for `f32` arrays).
#[allow(clippy::too_many_arguments)]
fn scan_native(
    op: Op2,
    data: &[f64],
    rows: usize,
    inner: usize,
    init: &[f64],
    right: bool,
    out: &mut [f64],
    f32: bool,
) {
    let w = inner + 1;
    let work = out.len();
    for_chunks(out, w, work, |r, o| {
        let x = &data[r * inner..(r + 1) * inner];
        if f32 {
            let f = |a: f64, b: f64| f64::from(bin32(op, a as f32, b as f32));
            scan_row(x, init[r], right, o, f);
        } else {
            let f = |a: f64, b: f64| rules::binary(op, a, b).value;
            scan_row(x, init[r], right, o, f);
        }
    });
    let _ = rows;
}

#[inline(always)]
fn scan_row(x: &[f64], init: f64, right: bool, o: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    let inner = x.len();
    if right {
        o[inner] = init;
        for j in (0..inner).rev() {
            o[j] = f(x[j], o[j + 1]);
        }
    } else {
        o[0] = init;
        for j in 0..inner {
            o[j + 1] = f(o[j], x[j]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reverse pass.

struct Adj {
    dense: Vec<Option<Vec<f64>>>,
    bc: Vec<Option<Vec<f64>>>,
    /// which nodes are `f32` arrays (their adjoints are `f32`, accumulated in `f32`)
    f32: Vec<bool>,
}

fn add_to(slot: &mut Option<Vec<f64>>, mut v: Vec<f64>, f32: bool) {
    match slot {
        None => {
            if f32 {
                v.iter_mut().for_each(|x| *x = crate::f32ops::r32(*x));
            }
            *slot = Some(v)
        }
        Some(d) => {
            assert_eq!(
                d.len(),
                v.len(),
                "adjoint contributions of different lengths"
            );
            if f32 {
                for (a, &b) in d.iter_mut().zip(&v) {
                    *a = add_t(true, *a, b);
                }
            } else {
                for (a, b) in d.iter_mut().zip(&v) {
                    *a += b;
                }
            }
            recycle(v);
        }
    }
}

impl Adj {
    fn add(&mut self, n: NodeId, v: Vec<f64>) {
        add_to(&mut self.dense[n as usize], v, self.f32[n as usize])
    }
    fn add_bc(&mut self, n: NodeId, v: Vec<f64>) {
        add_to(&mut self.bc[n as usize], v, self.f32[n as usize])
    }
    /// The node's adjoint as one dense array (broadcast contributions expanded).
    fn take(&mut self, n: NodeId, size: usize) -> Option<Vec<f64>> {
        let d = self.dense[n as usize].take();
        match self.bc[n as usize].take() {
            None => d,
            Some(b) => {
                let mut d = d.unwrap_or_else(|| zeroed(size));
                assert_eq!(
                    size % b.len().max(1),
                    0,
                    "broadcast adjoint does not divide the size"
                );
                let inner = size / b.len().max(1);
                let f32 = self.f32[n as usize];
                for (r, &v) in b.iter().enumerate() {
                    for x in &mut d[r * inner..(r + 1) * inner] {
                        *x = add_t(f32, *x, v);
                    }
                }
                Some(d)
            }
        }
    }
    fn dense_mut(&mut self, n: NodeId, size: usize) -> &mut Vec<f64> {
        self.dense[n as usize].get_or_insert_with(|| zeroed(size))
    }
}

fn param_node(ar: &Arena, k: u32) -> Option<Id> {
    ar.nodes
        .iter()
        .position(|n| *n == Node::Param(k))
        .map(|p| p as Id)
}

/// An adjoint kernel of `lam`: roots = adjoints of the wanted parameters (listed in
/// `Kernel::param_roots`), scatters for the active reads (when `scatter`). `seeds(ar, r)` gives
/// the seed expression of output `r`. The values of the nodes `stored` (storable unary nodes of
/// `lam`, usually none) are read from the last `stored.len()` of its `nparams_total` parameters
/// instead of computed ([`Arena::with_stored`]).
#[allow(clippy::too_many_arguments)]
fn adjoint_kernel(
    g: &Graph,
    lam: &Lambda,
    stored: &[Id],
    space: &[usize],
    nparams_total: u32,
    seeds: &dyn Fn(&mut Arena, usize) -> Id,
    want_param: &dyn Fn(u32) -> bool,
    scatter: bool,
    shape_of: &dyn Fn(u32) -> Vec<usize>,
    types: &Types,
) -> Result<Kernel> {
    let mut ar = lam.ar.clone();
    let base = ar.nodes.len();
    let seed_pairs: Vec<(Id, Id)> = (0..lam.outs.len())
        .map(|r| {
            let s = seeds(&mut ar, r);
            (lam.outs[r], s)
        })
        .collect();
    let adj = ar.reverse(&seed_pairs)?;
    let mut roots = Vec::new();
    let mut param_roots = Vec::new();
    for k in 0..lam.nparams {
        if !want_param(k) {
            continue;
        }
        if let Some(p) = param_node(&lam.ar, k) {
            if let Some(&a) = adj.get(&p) {
                roots.push(a);
                param_roots.push(k);
            }
        }
    }
    let mut scatters = Vec::new();
    for (id, n) in lam.ar.nodes.iter().enumerate().take(base) {
        if let Node::Read(key, _) = n {
            if scatter && (*key as usize) < g.nodes.len() && g.active[*key as usize] {
                if let Some(&a) = adj.get(&(id as Id)) {
                    scatters.push(ScatterSpec {
                        target: *key,
                        read: id as Id,
                        val: a,
                    });
                }
            }
        }
    }
    let mut primal = lam.outs.clone();
    // A stored value becomes a parameter, which cuts the primal's path to the reads below it;
    // each link (parameter, its former operand) lets the guards still see through it.
    let mut links = Vec::new();
    if !stored.is_empty() {
        let first = nparams_total - stored.len() as u32;
        let (new, map) = ar.with_stored(stored, first);
        for &s in stored {
            if let Node::Un(_, a) = ar.nodes[s as usize] {
                links.push((map[s as usize], map[a as usize]));
            }
        }
        ar = new;
        for r in roots.iter_mut().chain(&mut primal) {
            *r = map[*r as usize];
        }
        for s in &mut scatters {
            s.read = map[s.read as usize];
            s.val = map[s.val as usize];
        }
    }
    let mut k = Kernel::compile(
        ar,
        &roots,
        &scatters,
        &primal,
        &links,
        space,
        nparams_total,
        shape_of,
        types,
    );
    k.param_roots = param_roots;
    Ok(k.with_jit(g.jit))
}

/// The values a `Gen` node's adjoint kernel reads from the node's own array instead of
/// computing them again: its one result when that is a storable primitive's value
/// (`exp(…)`) of an `f64` array, else none.
pub(crate) fn gen_own(g: &Graph, i: NodeId, f32: bool) -> Vec<Id> {
    let ANode::Gen { lam, .. } = &g.nodes[i as usize].kind else {
        return vec![];
    };
    match lam.ar.nodes[lam.outs[0] as usize] {
        Node::Un(op, _) if lam.outs.len() == 1 && storable(op) && !f32 => vec![lam.outs[0]],
        _ => vec![],
    }
}

/// The adjoint kernel of `Gen` node `i` seeded by a dense adjoint (`has_d`), a broadcast one
/// (`has_b`, one value per row of the last axis) or both. Its parameters: the node's
/// arguments, then the dense seed when the node has one result, then the node's own values
/// ([`gen_own`]); with several results the dense seed is read as the array `AUX_DENSE`
/// (interleaved, `[space.., results]`), a broadcast seed as `AUX_BC`. Both backends run it.
pub(crate) fn gen_adjoint(g: &Graph, i: NodeId, has_d: bool, has_b: bool) -> Result<Arc<Kernel>> {
    let info = &g.nodes[i as usize];
    let ANode::Gen { lam, args, space } = &info.kind else {
        unreachable!("gen_adjoint of a Gen node")
    };
    let nouts = lam.outs.len();
    let mode = u32::from(has_d) | (u32::from(has_b) << 1);
    let np = lam.nparams;
    let own = gen_own(g, i, info.dtype == DType::F32);
    let node_shape = info.shape.clone();
    let bc_shape: Vec<usize> = node_shape[..node_shape.len().saturating_sub(1)].to_vec();
    cached_adjoint(g, i, mode, || {
        let mut ptys: Vec<Ty> = args.iter().map(|&a| node_ty(g, a)).collect();
        if has_d && nouts == 1 {
            ptys.push(node_ty(g, i)); // the seed
        }
        ptys.extend(own.iter().map(|_| node_ty(g, i)));
        let sp = space.clone();
        let ns = node_shape.clone();
        let bs = bc_shape.clone();
        adjoint_kernel(
            g,
            lam,
            &own,
            space,
            np + u32::from(has_d && nouts == 1) + own.len() as u32,
            &|ar, r| {
                let mut s: Option<Id> = None;
                if has_d {
                    let d = if nouts == 1 {
                        ar.push(Node::Param(np))
                    } else {
                        let mut ix: Vec<Id> = (0..sp.len())
                            .map(|a| ar.push(Node::Idx(a as u32)))
                            .collect();
                        ix.push(ar.konst(r as f64));
                        ar.push(Node::Read(AUX_DENSE, ix))
                    };
                    s = Some(d);
                }
                if has_b {
                    let ix: Vec<Id> = (0..bs.len())
                        .map(|a| ar.push(Node::Idx(a as u32)))
                        .collect();
                    let b = ar.push(Node::Read(AUX_BC, ix));
                    s = Some(match s {
                        Some(d) => ar.bin(Op2::Add, d, b),
                        None => b,
                    });
                }
                s.expect("a seed")
            },
            &|k| g.active[args[k as usize] as usize],
            true,
            &|key| match key {
                AUX_DENSE => ns.clone(),
                AUX_BC => bs.clone(),
                k => g.shape_of(k),
            },
            &Types {
                params: &ptys,
                read: &|key| match key {
                    AUX_DENSE | AUX_BC => node_ty(g, i),
                    k => node_ty(g, k),
                },
            },
        )
    })
}

/// The adjoint kernel of `SumGen` node `i`: its parameters are the node's arguments, its seed
/// the array `AUX_BC` (the adjoint of the sums, one per row).
pub(crate) fn sumgen_adjoint(g: &Graph, i: NodeId) -> Result<Arc<Kernel>> {
    let info = &g.nodes[i as usize];
    let ANode::SumGen { lam, args, space } = &info.kind else {
        unreachable!("sumgen_adjoint of a SumGen node")
    };
    let rows_shape = info.shape.clone();
    cached_adjoint(g, i, 2, || {
        let ptys: Vec<Ty> = args.iter().map(|&a| node_ty(g, a)).collect();
        let rs = rows_shape.clone();
        adjoint_kernel(
            g,
            lam,
            &[],
            space,
            lam.nparams,
            &|ar, _| {
                let ix: Vec<Id> = (0..rs.len())
                    .map(|a| ar.push(Node::Idx(a as u32)))
                    .collect();
                ar.push(Node::Read(AUX_BC, ix))
            },
            &|k| g.active[args[k as usize] as usize],
            true,
            &|key| match key {
                AUX_BC => rs.clone(),
                k => g.shape_of(k),
            },
            &Types {
                params: &ptys,
                read: &|key| match key {
                    AUX_BC => node_ty(g, i),
                    k => node_ty(g, k),
                },
            },
        )
    })
}

/// Run an adjoint kernel and route its results: parameter adjoints to `param_dst`, identity
/// scatters and windows to the read arrays' adjoints.
fn apply_adjoint<'a>(
    ex: &'a Exec,
    adj: &mut Adj,
    k: &Kernel,
    caller: &[&'a [f64]],
    aux: &dyn Fn(u32) -> Option<&'a [f64]>,
    param_dst: &dyn Fn(u32) -> Option<NodeId>,
) -> Result<()> {
    let total = k.space_total();
    let inp = ex.kernel_inputs(k, caller, aux);
    let groups: Vec<Vec<usize>> = (0..k.roots.len()).map(|r| vec![r]).collect();
    let mut outs: Vec<Vec<f64>> = (0..k.roots.len()).map(|_| overwritten(total)).collect();
    let wins = run_store(k, &inp, &groups, &mut outs)?;
    for (r, &p) in k.param_roots.iter().enumerate() {
        if let Some(dst) = param_dst(p) {
            adj.add(dst, std::mem::take(&mut outs[r]));
        }
    }
    for &(ti, r) in &k.dense_targets {
        adj.add(k.targets[ti], std::mem::take(&mut outs[r]));
    }
    outs.into_iter().for_each(recycle);
    add_windows(ex, adj, k, wins);
    Ok(())
}

/// The adjoints of `awhile` results ([`ANode::Proj`]) gathered for their loop's reverse pass.
pub(crate) type LoopSeeds = HashMap<NodeId, Vec<Option<Vec<f64>>>>;

fn new_adj(g: &Graph) -> Adj {
    let n = g.nodes.len();
    Adj {
        dense: vec![None; n],
        bc: vec![None; n],
        f32: g.nodes.iter().map(|x| x.dtype == DType::F32).collect(),
    }
}

/// Backward pass: `seeds` are adjoints of output nodes; returns one adjoint per graph input.
pub(crate) fn backward(ex: &Exec, seeds: Vec<(NodeId, Vec<f64>)>) -> Result<Vec<Option<Vec<f64>>>> {
    let g = ex.g;
    let mut adj = new_adj(g);
    let mut loop_seeds = LoopSeeds::new();
    for (o, s) in seeds {
        adj.add(o, s);
    }
    let mut result: Vec<Option<Vec<f64>>> = vec![None; g.inputs.len()];
    for i in (0..g.nodes.len() as NodeId).rev() {
        backward_node(ex, &mut adj, &mut loop_seeds, &mut result, i)?;
    }
    Ok(result)
}

/// What one node's adjoint sends to the nodes it reads, for a backend that runs this node on
/// the host and the rest elsewhere (the CUDA backend: `scan`, `permute`, `awhile`, …): `gv` is
/// the node's adjoint (`None` for an `awhile`, whose adjoints come from its results through
/// `loop_seeds`). Returns each contribution as (node, values, broadcast: one value per row of
/// the node's last axis). `ex` holds the values the node's reverse pass reads.
#[cfg(feature = "cuda")]
pub(crate) fn node_adjoint(
    ex: &Exec,
    i: NodeId,
    gv: Option<Vec<f64>>,
    loop_seeds: &mut LoopSeeds,
) -> Result<Vec<(NodeId, Vec<f64>, bool)>> {
    let g = ex.g;
    let mut adj = new_adj(g);
    if let Some(gv) = gv {
        adj.add(i, gv);
    }
    let mut result: Vec<Option<Vec<f64>>> = vec![None; g.inputs.len()];
    backward_node(ex, &mut adj, loop_seeds, &mut result, i)?;
    let mut out = Vec::new();
    for (n, d) in adj.dense.iter_mut().enumerate() {
        if let Some(d) = d.take() {
            out.push((n as NodeId, d, false));
        }
    }
    for (n, b) in adj.bc.iter_mut().enumerate() {
        if let Some(b) = b.take() {
            out.push((n as NodeId, b, true));
        }
    }
    Ok(out)
}

/// Node `i`'s part of the backward pass: its adjoint (in `adj`) sent to what it reads.
fn backward_node(
    ex: &Exec,
    adj: &mut Adj,
    loop_seeds: &mut LoopSeeds,
    result: &mut [Option<Vec<f64>>],
    i: NodeId,
) -> Result<()> {
    let g = ex.g;
    if !ex.computed(i) || !g.active[i as usize] {
        return Ok(());
    }
    let info = &g.nodes[i as usize];
    let size: usize = info.shape.iter().product();
    if let ANode::Awhile { lp, init, inv } = &info.kind {
        let Some(mut st) = loop_seeds.remove(&i) else {
            return Ok(());
        };
        let aux = &ex.loops[&i];
        let mut inv_adj: Vec<Option<Vec<f64>>> = vec![None; inv.len()];
        for it in aux.iters.iter().rev() {
            let seeds: Vec<(NodeId, Vec<f64>)> = lp
                .body
                .outputs
                .iter()
                .zip(st.iter())
                .filter_map(|(&o, s)| s.clone().map(|s| (o, s)))
                .collect();
            if seeds.is_empty() {
                break;
            }
            let r = backward(it, seeds)?;
            let mut r = r.into_iter();
            st = (0..lp.nstate).map(|_| r.next().expect("state")).collect();
            for ((acc, v), &a) in inv_adj.iter_mut().zip(r).zip(inv) {
                if let Some(v) = v {
                    add_to(acc, v, adj.f32[a as usize]);
                }
            }
        }
        for (&a, s) in init.iter().zip(st) {
            if let Some(s) = s {
                adj.add(a, s);
            }
        }
        for (&a, s) in inv.iter().zip(inv_adj) {
            if let Some(s) = s {
                adj.add(a, s);
            }
        }
        return Ok(());
    }
    // Gen and SumGen take their seeds without expanding broadcasts.
    match &info.kind {
        ANode::Gen { lam, args, .. } => {
            let dense = adj.dense[i as usize].take();
            let bc = adj.bc[i as usize].take();
            if dense.is_none() && bc.is_none() {
                return Ok(());
            }
            let nouts = lam.outs.len();
            let own = gen_own(g, i, adj.f32[i as usize]);
            let ak = gen_adjoint(g, i, dense.is_some(), bc.is_some())?;
            let mut caller: Vec<&[f64]> = args.iter().map(|&a| ex.value(a)).collect();
            if let (Some(d), 1) = (&dense, nouts) {
                caller.push(d);
            }
            if !own.is_empty() {
                caller.push(ex.value(i));
            }
            let aux = |key: u32| -> Option<&[f64]> {
                match key {
                    AUX_DENSE => dense.as_deref(),
                    AUX_BC => bc.as_deref(),
                    _ => None,
                }
            };
            apply_adjoint(ex, adj, &ak, &caller, &aux, &|k| Some(args[k as usize]))?;
            return Ok(());
        }
        ANode::SumGen { args, .. } => {
            let Some(gv) = adj.take(i, size) else {
                return Ok(());
            };
            let ak = sumgen_adjoint(g, i)?;
            let caller: Vec<&[f64]> = args.iter().map(|&a| ex.value(a)).collect();
            let aux = |key: u32| -> Option<&[f64]> { (key == AUX_BC).then_some(&gv[..]) };
            apply_adjoint(ex, adj, &ak, &caller, &aux, &|k| Some(args[k as usize]))?;
            return Ok(());
        }
        _ => {}
    }
    let Some(gv) = adj.take(i, size) else {
        return Ok(());
    };
    match &info.kind {
        ANode::Input { index, .. } => result[*index] = Some(gv),
        ANode::Use(_) | ANode::StopGrad { .. } => {}
        ANode::Gen { .. } | ANode::SumGen { .. } | ANode::Awhile { .. } => unreachable!(),
        ANode::Reshape { src } => adj.add(*src, gv),
        ANode::ScanN {
            init,
            step,
            lanes,
            steps,
        } => {
            let a0 = scan_n_backward(ex, adj, i, step, lanes, *steps, &gv)?;
            let seeds: Vec<&[f64]> = a0.iter().map(|c| &c[..]).collect();
            init_backward(ex, adj, i, init, lanes, &seeds)?;
        }
        ANode::Acond { t, e, .. } => {
            let b = if ex.taken[i as usize] { *t } else { *e };
            adj.add(b, gv);
        }
        ANode::Proj { src, k } => {
            let nstate = match &g.nodes[*src as usize].kind {
                ANode::Awhile { init, .. } => init.len(),
                _ => unreachable!(),
            };
            let e = loop_seeds.entry(*src).or_insert_with(|| vec![None; nstate]);
            add_to(&mut e[*k], gv, adj.f32[i as usize]);
        }
        ANode::Sum { src } => {
            if g.active[*src as usize] {
                adj.add_bc(*src, gv);
            }
        }
        ANode::MatMul { a, b } => {
            // C = A B: Ā = C̄ Bᵀ, B̄ = Aᵀ C̄.
            let (va, vb) = matmul_views(g, *a, ex.value(*a), *b, ex.value(*b));
            let vc = View::new(&gv, va.rows, vb.cols);
            let f32 = info.dtype == DType::F32;
            // (a zero adjoint sends nothing back, even against an operand's ∞ or NaN: the dense
            // products made `0 · ∞ = NaN` there, where `generate` + `sum` gives the finite
            // gradient; a hunter. The gated product runs only where an operand is not finite.)
            if g.active[*a as usize] {
                adj.add(
                    *a,
                    if vb.all_finite() {
                        matmul(vc, vb.t(), f32)
                    } else {
                        gated_matmul(vc, vb.t(), true, f32)
                    },
                );
            }
            if g.active[*b as usize] {
                adj.add(
                    *b,
                    if va.all_finite() {
                        matmul(va.t(), vc, f32)
                    } else {
                        gated_matmul(va.t(), vc, false, f32)
                    },
                );
            }
            recycle(gv);
        }
        ANode::Fold { f, init, src } => {
            if f.as_binop() == Some(Op2::Add) && f.reads().is_empty() {
                if g.active[*src as usize] {
                    adj.add_bc(*src, gv);
                }
                return Ok(());
            }
            let sshape = &g.nodes[*src as usize].shape;
            let inner = *sshape.last().expect("rank ≥ 1");
            let rows = size;
            let data = ex.value(*src);
            // Fold = the last column of a left scan: recompute the scan, seed its last
            // column, and run the scan's adjoint.
            let (x0, xs, inn) = match init {
                Some(_) => {
                    let mut e2 = Exec::new(g, ex.inputs.clone(), false);
                    e2.vals = ex.vals.clone();
                    let l = init.as_ref().expect("init");
                    (e2.eval_init(i, l, &info.shape)?, data.to_vec(), inner)
                }
                None => split_first_col(data, rows, inner),
            };
            let mut out = vec![0.0; rows * (inn + 1)];
            match f.as_binop() {
                Some(op) => {
                    let f32 = info.dtype == DType::F32;
                    scan_native(op, &xs, rows, inn, &x0, false, &mut out, f32)
                }
                None => {
                    let k = ex.step_kernel(i, f);
                    ex.scan_general(k, &xs, rows, inn, &x0, false, Some(&mut out))?;
                }
            }
            let mut adj_out = vec![0.0; rows * (inn + 1)];
            for r in 0..rows {
                adj_out[r * (inn + 1) + inn] = gv[r];
            }
            let (adj_x, adj_init) =
                scan_backward(ex, adj, i, f, &xs, &out, rows, inn, &adj_out, false)?;
            if g.active[*src as usize] {
                match init {
                    Some(l) => {
                        adj.add(*src, adj_x);
                        init_backward(ex, adj, i, l, &info.shape, &[&adj_init])?;
                    }
                    None => {
                        let f32 = adj.f32[*src as usize];
                        let d = adj.dense_mut(*src, rows * inner);
                        for r in 0..rows {
                            let d0 = &mut d[r * inner];
                            *d0 = add_t(f32, *d0, adj_init[r]);
                            for j in 0..inn {
                                let dj = &mut d[r * inner + 1 + j];
                                *dj = add_t(f32, *dj, adj_x[r * inn + j]);
                            }
                        }
                    }
                }
            }
        }
        ANode::Scan {
            f,
            init,
            src,
            right,
        } => {
            let inner = *g.nodes[*src as usize].shape.last().expect("rank ≥ 1");
            let rows = size / (inner + 1);
            let out = ex.value(i);
            let data = ex.value(*src);
            let (adj_x, adj_init) =
                scan_backward(ex, adj, i, f, data, out, rows, inner, &gv, *right)?;
            if g.active[*src as usize] {
                adj.add(*src, adj_x);
            }
            init_backward(
                ex,
                adj,
                i,
                init,
                &info.shape[..info.shape.len() - 1],
                &[&adj_init],
            )?;
        }
        ANode::Permute {
            comb, default, src, ..
        } => {
            let aux = &ex.perm[&i];
            let ns = aux.targets.len();
            match comb {
                Combine::Add => {
                    if g.active[*src as usize] {
                        let a: Vec<f64> = aux
                            .targets
                            .iter()
                            .map(|&t| if t >= 0 { gv[t as usize] } else { 0.0 })
                            .collect();
                        adj.add(*src, a);
                    }
                    if g.active[*default as usize] {
                        adj.add(*default, gv);
                    }
                }
                Combine::Max | Combine::Min => {
                    let win = aux.winners.as_ref().expect("winners");
                    let mut a_src = vec![0.0; ns];
                    let mut a_def = vec![0.0; size];
                    for (t, &w) in win.iter().enumerate() {
                        if w >= 0 {
                            a_src[w as usize] += gv[t];
                        } else {
                            a_def[t] += gv[t];
                        }
                    }
                    if g.active[*src as usize] {
                        adj.add(*src, a_src);
                    }
                    if g.active[*default as usize] {
                        adj.add(*default, a_def);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The operands of a `matmul` node as row-major matrix views.
fn matmul_views<'a>(
    g: &Graph,
    a: NodeId,
    da: &'a [f64],
    b: NodeId,
    db: &'a [f64],
) -> (View<'a>, View<'a>) {
    let (sa, sb) = (&g.nodes[a as usize].shape, &g.nodes[b as usize].shape);
    (View::new(da, sa[0], sa[1]), View::new(db, sb[0], sb[1]))
}

fn cached_adjoint(
    g: &Graph,
    i: NodeId,
    mode: u32,
    make: impl FnOnce() -> Result<Kernel>,
) -> Result<Arc<Kernel>> {
    let mut cache = g.adjoint[i as usize].lock().expect("kernel cache");
    if let Some(k) = cache.get(&(1000 + mode)) {
        return Ok(k.clone());
    }
    let k = Arc::new(make()?);
    cache.insert(1000 + mode, k.clone());
    Ok(k)
}

/// The adjoint of a fold/scan initial-value lambda (its reads get scatter contributions).
fn init_backward(
    ex: &Exec,
    adj: &mut Adj,
    i: NodeId,
    l: &Lambda,
    outer: &[usize],
    seeds: &[&[f64]],
) -> Result<()> {
    if l.reads().iter().all(|&r| !ex.g.active[r as usize]) {
        return Ok(());
    }
    let g = ex.g;
    let ak = cached_adjoint(g, i, 10, || {
        adjoint_kernel(
            g,
            l,
            &[],
            outer,
            l.outs.len() as u32,
            &|ar, r| ar.push(Node::Param(r as u32)),
            &|_| false,
            true,
            &|k| g.shape_of(k),
            &Types {
                params: &[],
                read: &|k| node_ty(g, k),
            },
        )
    })?;
    apply_adjoint(ex, adj, &ak, seeds, &|_| None, &|_| None)
}

/// Adjoint of a scan with step `f` (sequential semantics): returns the adjoints of the source
/// elements and of the initial values; reads in `f` get scatter contributions.
#[allow(clippy::too_many_arguments)]
fn scan_backward(
    ex: &Exec,
    adj: &mut Adj,
    i: NodeId,
    f: &Lambda,
    src: &[f64],
    out: &[f64],
    rows: usize,
    inner: usize,
    adj_out: &[f64],
    right: bool,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let g = ex.g;
    let w = inner + 1;
    let n = rows * inner;
    let (p_acc, p_x) = if right { (1u32, 0u32) } else { (0, 1) };
    // An f32 scan's adjoint is computed in f32: its step's parameters and seed are f32.
    let t = node_ty(g, i);
    let f32 = t == Ty::F32;
    // Accumulator value fed to each application.
    let mut u = vec![0.0; n];
    for r in 0..rows {
        for j in 0..inner {
            u[r * inner + j] = if right {
                out[r * w + j + 1]
            } else {
                out[r * w + j]
            };
        }
    }
    let (pa, pb): (&[f64], &[f64]) = if right { (src, &u) } else { (&u, src) };
    // ∂f/∂acc at every application, in one kernel.
    let kd = cached_adjoint(g, i, 20, || {
        adjoint_kernel(
            g,
            f,
            &[],
            &[n],
            2,
            &|ar, _| ar.konst(1.0),
            &|k| k == p_acc,
            false,
            &|k| g.shape_of(k),
            &Types {
                params: &[t, t],
                read: &|k| node_ty(g, k),
            },
        )
    })?;
    let dacc = if kd.param_roots.is_empty() {
        vec![0.0; n]
    } else {
        let inp = ex.kernel_inputs(&kd, &[pa, pb], &|_| None);
        let mut outs = vec![vec![0.0; n]];
        run_store(&kd, &inp, &[vec![0]], &mut outs)?;
        let mut d = outs.pop().expect("one");
        if f32 {
            // A guard: f32 partials are f32 values. Partials that fold to (weak) constants are
            // ±1 today (`+`, `−`, negation), which this leaves unchanged.
            d.iter_mut().for_each(|v| *v = r32(*v));
        }
        d
    };
    // The linear recurrence of the accumulator's adjoint, rows in parallel.
    let mut a = vec![0.0; rows * w];
    for_chunks(&mut a, w, 2 * rows * w, |r, ar| {
        let ao = &adj_out[r * w..(r + 1) * w];
        let d = &dacc[r * inner..(r + 1) * inner];
        if f32 {
            // in f32: the product of two f32 values is exact in f64, rounding it is f32's
            let step = |a: f64, g: f64, d: f64| add_t(true, a, r32(crate::expr::adj_mul(g, d)));
            if right {
                ar[0] = r32(ao[0]);
                for j in 0..inner {
                    ar[j + 1] = step(ao[j + 1], ar[j], d[j]);
                }
            } else {
                ar[inner] = r32(ao[inner]);
                for j in (0..inner).rev() {
                    ar[j] = step(ao[j], ar[j + 1], d[j]);
                }
            }
        } else if right {
            ar[0] = ao[0];
            for j in 0..inner {
                ar[j + 1] = ao[j + 1] + crate::expr::adj_mul(ar[j], d[j]);
            }
        } else {
            ar[inner] = ao[inner];
            for j in (0..inner).rev() {
                ar[j] = ao[j] + crate::expr::adj_mul(ar[j + 1], d[j]);
            }
        }
    });
    let adj_init: Vec<f64> = (0..rows)
        .map(|r| a[r * w + if right { inner } else { 0 }])
        .collect();
    // Seeds of the applications, then the full adjoint (source element and reads).
    let mut s = vec![0.0; n];
    for r in 0..rows {
        for j in 0..inner {
            s[r * inner + j] = if right {
                a[r * w + j]
            } else {
                a[r * w + j + 1]
            };
        }
    }
    let kf = cached_adjoint(g, i, 21, || {
        adjoint_kernel(
            g,
            f,
            &[],
            &[n],
            3,
            &|ar, _| ar.push(Node::Param(2)),
            &|k| k == p_x,
            true,
            &|k| g.shape_of(k),
            &Types {
                params: &[t, t, t],
                read: &|k| node_ty(g, k),
            },
        )
    })?;
    let mut adj_x = vec![0.0; n];
    let inp = ex.kernel_inputs(&kf, &[pa, pb, &s], &|_| None);
    let groups: Vec<Vec<usize>> = (0..kf.roots.len()).map(|r| vec![r]).collect();
    let mut outs: Vec<Vec<f64>> = (0..kf.roots.len()).map(|_| vec![0.0; n]).collect();
    let wins = run_store(&kf, &inp, &groups, &mut outs)?;
    if !kf.param_roots.is_empty() {
        adj_x = std::mem::take(&mut outs[0]);
    }
    for &(ti, r) in &kf.dense_targets {
        adj.add(kf.targets[ti], std::mem::take(&mut outs[r]));
    }
    add_windows(ex, adj, &kf, wins);
    Ok((adj_x, adj_init))
}

/// The fewest lanes a `scan_n` group takes: a call of the step kernel per step and group costs
/// about as much as stepping a few dozen lanes, so smaller groups would cost more than they
/// gain in parallelism.
const MIN_GROUP_LANES: usize = 64;

/// Fixed groups of `nl` lanes for a `scan_n` pass: at most `max_groups` of them, of at least
/// [`MIN_GROUP_LANES`] lanes; they depend only on the sizes, never on the thread count. (A
/// group steps its lanes in block-sized pieces, so groups need not be whole blocks.)
fn lane_groups(nl: usize, max_groups: usize) -> Vec<(usize, usize)> {
    if nl == 0 {
        return vec![(0, 0)];
    }
    let len = nl.div_ceil(max_groups).max(MIN_GROUP_LANES);
    (0..nl)
        .step_by(len)
        .map(|r| (r, (r + len).min(nl)))
        .collect()
}

/// The pieces `(offset, length)` of a group of `len` lanes, each at most one kernel block.
fn pieces(len: usize, block: usize) -> impl Iterator<Item = (usize, usize)> {
    let b = block.max(1);
    (0..len).step_by(b).map(move |s| (s, b.min(len - s)))
}

/// The parameters of one piece of a `scan_n` step (elements `start..start + len` of the
/// kernel's space): caller parameter `c` is `cols[c][s..s + len]` (the group's column of lanes,
/// from the piece's offset `s`), an array read at the identity index is cut from its
/// whole-space data in `whole`.
fn step_params<'a>(
    k: &Kernel,
    whole: &[&'a [f64]],
    cols: &'a [Vec<f64>],
    s: usize,
    start: usize,
    len: usize,
) -> Vec<&'a [f64]> {
    k.params
        .iter()
        .zip(whole)
        .map(|(p, w)| match p {
            ParamSrc::Caller(c) => &cols[*c as usize][s..s + len],
            ParamSrc::Array(_) => &w[start..start + len],
        })
        .collect()
}

/// The nodes of a `scan_n` step whose values its gradient's primal pass stores
/// ([`Builder::set_scan_store`](crate::Builder::set_scan_store)): the reachable `f64` unary
/// nodes of a [`storable`] primitive, at most 4 per state component (the first ones).
fn scan_n_stored(g: &Graph, step: &Lambda) -> Vec<Id> {
    if !g.scan_store {
        return vec![];
    }
    let Ok(ty) = infer(&step.ar, &|_| Ty::F64, &|k| node_ty(g, k)) else {
        return vec![];
    };
    let reach = step.ar.reachable(&step.outs);
    (0..step.ar.nodes.len())
        .filter(|&i| {
            reach[i]
                && ty[i] != Ty::F32
                && matches!(step.ar.nodes[i], Node::Un(op, a)
                    if storable(op) && step.ar.konst_of(a).is_none())
        })
        .map(|i| i as Id)
        .take(4 * step.outs.len())
        .collect()
}

/// Adjoint of a `scan_n` recurrence `s_{t+1} = step(t, i, s_t)` with output adjoint `gv`
/// (`[steps + 1, lanes, n]`): from `a_steps = gv_steps`, step by step backwards, one run of the
/// step's adjoint kernel seeded with `a_{t+1}` gives `a_t = gv_t + (∂s_{t+1}/∂s_t)ᵀ a_{t+1}` and
/// the contributions to the arrays the step reads (in the evaluator's windows, summed in a
/// fixed order: steps backwards within a lane group, then groups in order). Lanes go in fixed
/// groups, the groups in parallel, as in the primal pass, but at most 16 of them: each has its
/// own windows. When the primal pass stored the step's transcendental values
/// ([`scan_n_stored`]), the adjoint kernel reads them as parameters `2n..` instead of
/// evaluating them.
///
/// Returns `a_0`, one column of lanes per state component (the seed of `init`).
fn scan_n_backward(
    ex: &Exec,
    adj: &mut Adj,
    i: NodeId,
    step: &Lambda,
    lanes: &[usize],
    steps: usize,
    gv: &[f64],
) -> Result<Vec<Vec<f64>>> {
    let g = ex.g;
    let n = step.outs.len();
    let nl: usize = lanes.iter().product();
    let space: Vec<usize> = std::iter::once(steps)
        .chain(lanes.iter().copied())
        .collect();
    let out = ex.value(i);
    let (stored, kept) = match ex.stores.get(&i) {
        Some(kept) => (scan_n_stored(g, step), &kept[..]),
        None => (vec![], &[][..]),
    };
    let ns = stored.len();
    let f64s = vec![Ty::F64; 2 * n + ns];
    let k = cached_adjoint(g, i, if ns == 0 { 30 } else { 31 }, || {
        adjoint_kernel(
            g,
            step,
            &stored,
            &space,
            (2 * n + ns) as u32,
            &|ar, r| ar.push(Node::Param((n + r) as u32)),
            &|p| (p as usize) < n,
            true,
            &|k| g.shape_of(k),
            &Types {
                params: &f64s,
                read: &|k| node_ty(g, k),
            },
        )
    })?;
    let inp = ex.kernel_inputs(&k, &vec![&[][..]; 2 * n + ns], &|_| None);
    struct Group {
        a0: Vec<Vec<f64>>,
        windows: Vec<Window>,
        /// identity scatters: per dense target, `steps × len` values (step-major)
        dense: Vec<Vec<f64>>,
    }
    let groups = lane_groups(nl, 16);
    let res: Vec<Result<Group>> = groups
        .par_iter()
        .map(|&(r0, r1)| {
            let len = r1 - r0;
            let mut ev = Eval::new(&k);
            // columns: the state s_t (0..n), the seed a_{t+1} (n..2n), the stored values
            let mut cols: Vec<Vec<f64>> = vec![vec![0.0; len]; 2 * n + ns];
            for c in 0..n {
                for r in 0..len {
                    cols[n + c][r] = gv[(steps * nl + r0 + r) * n + c];
                }
            }
            let mut dense = vec![vec![0.0; steps * len]; k.dense_targets.len()];
            let mut next = vec![vec![0.0; len]; n];
            for t in (0..steps).rev() {
                for c in 0..n {
                    for r in 0..len {
                        cols[c][r] = out[(t * nl + r0 + r) * n + c];
                    }
                }
                for j in 0..ns {
                    let at = (t * ns + j) * nl + r0;
                    cols[2 * n + j].copy_from_slice(&kept[at..at + len]);
                }
                // a_t = gv_t + the state parameters' adjoints
                for (c, col) in next.iter_mut().enumerate() {
                    for (r, a) in col.iter_mut().enumerate() {
                        *a = gv[(t * nl + r0 + r) * n + c];
                    }
                }
                for (s, m) in pieces(len, k.block) {
                    let start = t * nl + r0 + s;
                    let params = step_params(&k, &inp.params, &cols, s, start, m);
                    ev.run(start, m, &params, &inp.arrays)?;
                    for (d, &(_, r)) in dense.iter_mut().zip(&k.dense_targets) {
                        d[t * len + s..t * len + s + m]
                            .copy_from_slice(ev.get(k.roots[r], &params, m));
                    }
                    for (ri, &p) in k.param_roots.iter().enumerate() {
                        let d = ev.get(k.roots[ri], &params, m);
                        for (a, &v) in next[p as usize][s..s + m].iter_mut().zip(d) {
                            *a += v;
                        }
                    }
                }
                for (c, col) in next.iter_mut().enumerate() {
                    std::mem::swap(&mut cols[n + c], col);
                }
            }
            cols.truncate(2 * n);
            Ok(Group {
                a0: cols.split_off(n),
                windows: std::mem::take(&mut ev.windows),
                dense,
            })
        })
        .collect();
    let mut a0 = vec![Vec::with_capacity(nl); n];
    let mut wins = Vec::with_capacity(groups.len());
    let mut dense = vec![vec![0.0; steps * nl]; k.dense_targets.len()];
    for (r, &(r0, r1)) in res.into_iter().zip(&groups) {
        let gr = r?;
        for (a, col) in a0.iter_mut().zip(gr.a0) {
            a.extend(col);
        }
        wins.push(gr.windows);
        let len = r1 - r0;
        for (d, part) in dense.iter_mut().zip(gr.dense) {
            for t in 0..steps {
                d[t * nl + r0..t * nl + r1].copy_from_slice(&part[t * len..(t + 1) * len]);
            }
        }
    }
    for (&(ti, _), d) in k.dense_targets.iter().zip(dense) {
        adj.add(k.targets[ti], d);
    }
    add_windows(ex, adj, &k, wins);
    Ok(a0)
}

fn add_windows(ex: &Exec, adj: &mut Adj, k: &Kernel, wins: Vec<Vec<Window>>) {
    if k.nscatter() == 0 {
        return;
    }
    let mut bufs: Vec<Vec<f64>> = k
        .targets
        .iter()
        .map(|&t| {
            let n: usize = ex.g.nodes[t as usize].shape.iter().product();
            adj.dense[t as usize].take().unwrap_or_else(|| zeroed(n))
        })
        .collect();
    {
        let mut refs: Vec<&mut [f64]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        combine_windows(&wins, &mut refs, &k.target_f32, &k.windows);
    }
    wins.into_iter().flatten().for_each(|w| recycle(w.data));
    for (&t, b) in k.targets.iter().zip(bufs) {
        adj.dense[t as usize] = Some(b);
    }
}
