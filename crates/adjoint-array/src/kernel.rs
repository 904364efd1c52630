//! Block-wise evaluation of expression DAGs.
//!
//! A [`Kernel`] is an expression DAG compiled for an iteration space: each node becomes one
//! operation over a *block* of elements (64–1024, chosen from the number of live buffers), with
//! its result in a small buffer (a slot, reused once the node is dead). Interpretation overhead
//! is one `match` per node per block; the loops inside are tight and vectorisable. A large
//! `f64` kernel runs the same operation list compiled to native code instead
//! ([`crate::jit`]): `Eval::run` calls it, and falls back to the interpreter for a block in
//! which it found an index out of bounds (to report it).
//!
//! Work is split into chunks whose boundaries depend only on the sizes; chunks run on rayon's
//! pool and their results (outputs, row partial sums, scatter windows) are combined in chunk
//! order, so every result is bit-identical for any number of threads.

#![allow(
    clippy::needless_range_loop,
    clippy::type_complexity,
    clippy::too_many_arguments
)]

use crate::error::{Error, Result};
use crate::expr::{adj_mul, eval_d1, eval_d2, eval_dd1, eval_dd2, infer, Arena, DOp, Id, Node, Ty};
use crate::f32ops::{add_t, bin32, r32, un32};
use crate::jit::Jit;
use adjoint_core::rules::{self, Op1, Op2};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Kernels are compiled unless `ADJOINT_ARRAY_JIT=0` is set (read once).
fn jit_default() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("ADJOINT_ARRAY_JIT").map_or(true, |v| v != "0"))
}

/// An operand: a slot buffer or a parameter (a caller-provided block slice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Src {
    S(u32),
    P(u32),
}

#[derive(Clone, Debug)]
pub(crate) enum Comp {
    Var(Src, usize, usize),
    Const(f64),
}

#[derive(Clone, Debug)]
pub(crate) enum KOp {
    Idx {
        axis: usize,
        dst: u32,
    },
    Un {
        op: Op1,
        a: Src,
        dst: u32,
        d: Option<u32>,
    },
    D1 {
        op: Op1,
        a: Src,
        dst: u32,
        second: bool,
    },
    Bin {
        op: Op2,
        a: Src,
        b: Src,
        dst: u32,
        d: Option<(u32, u32)>,
    },
    D2 {
        op: Op2,
        w: u8,
        a: Src,
        b: Src,
        dst: u32,
        second: bool,
    },
    AdjMul {
        g: Src,
        d: Src,
        dst: u32,
    },
    Disc {
        op: DOp,
        a: Src,
        b: Src,
        dst: u32,
    },
    Select {
        c: Src,
        a: Src,
        b: Src,
        dst: u32,
    },
    /// the `f32` version of an arithmetic node (`Un`, `D1`, `Bin`, `D2`, `AdjMul`, `Disc`,
    /// `Select`): operands rounded to `f32`, the value computed in `f32`
    F32(Box<KOp>),
    /// round to `f32` (`to32`) or copy (a widening cast)
    Cast {
        a: Src,
        dst: u32,
        to32: bool,
    },
    Offset {
        arr: usize,
        comps: Vec<Comp>,
        guard: Option<Src>,
        /// an element out of bounds is given offset 0 and not reported here: the read's guard
        /// was dropped to break a cycle through guards, and a later `Offset` with that guard
        /// reports the elements that need the read
        quiet: bool,
        dst: u32,
    },
    Gather {
        arr: usize,
        /// the slot of the shared `Offset` (absent: a constant index)
        off: Option<u32>,
        c: usize,
        guard: Option<Src>,
        dst: u32,
    },
    Scatter {
        target: usize,
        off: Option<u32>,
        c: usize,
        guard: Option<Src>,
        val: Src,
    },
}

impl KOp {
    pub(crate) fn dst(&self) -> u32 {
        match self {
            KOp::Un { dst, .. }
            | KOp::D1 { dst, .. }
            | KOp::Bin { dst, .. }
            | KOp::D2 { dst, .. }
            | KOp::AdjMul { dst, .. }
            | KOp::Disc { dst, .. }
            | KOp::Select { dst, .. }
            | KOp::Cast { dst, .. }
            | KOp::Idx { dst, .. }
            | KOp::Offset { dst, .. }
            | KOp::Gather { dst, .. } => *dst,
            KOp::F32(op) => op.dst(),
            KOp::Scatter { .. } => unreachable!("a scatter has no destination"),
        }
    }

    /// The value slots the operation writes (none for offsets, which have their own, and
    /// scatters).
    pub(crate) fn results(&self) -> Vec<u32> {
        match self {
            KOp::Un { dst, d, .. } => std::iter::once(*dst).chain(*d).collect(),
            KOp::Bin { dst, d, .. } => match d {
                Some((x, y)) => vec![*dst, *x, *y],
                None => vec![*dst],
            },
            KOp::Offset { .. } | KOp::Scatter { .. } => vec![],
            KOp::F32(op) => op.results(),
            op => vec![op.dst()],
        }
    }
}

/// A part of a scatter target that gets its own window per chunk: the target (an index into
/// [`Kernel::targets`]) and the scatters' forms (indices into its [`Kernel::target_forms`]) that
/// land in it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WindowPart {
    pub target: usize,
    pub forms: Vec<usize>,
}

/// A scatter's flat index `c + Σ strideₐ · iₐ` over index components `iₐ` of the space.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Affine {
    /// (negative for a neighbour before the first element: `x.at(&[i[0] - 1.0])`)
    pub c: i64,
    /// `(axis, stride)`
    pub terms: Vec<(usize, usize)>,
}

/// The affine forms of each target's scatter indices (see [`Kernel::target_forms`]): an
/// offset is affine when every varying component is an `Idx` value, or one plus or minus an
/// integer constant (`x.at(&[i[0] + 1.0])`, a stencil's neighbour: a gradient's scatter into a
/// large input was interpreted for want of it; a new user's Rosenbrock).
fn scatter_forms(ops: &[KOp], consts: &[(u32, f64)], ntargets: usize) -> Vec<Option<Vec<Affine>>> {
    let mut forms: Vec<Option<Vec<Affine>>> = vec![Some(Vec::new()); ntargets];
    let konst: HashMap<u32, f64> = consts.iter().copied().collect();
    // an integer constant of a slot (small enough to be exact and to add to offsets)
    let int = |s: &Src| match s {
        Src::S(s) => konst
            .get(s)
            .filter(|v| v.fract() == 0.0 && v.abs() < 1e9)
            .map(|&v| v as i64),
        Src::P(_) => None,
    };
    // slot → (axis, k): the slot holds `Idx(axis) + k`
    let mut axis_of: HashMap<u32, (usize, i64)> = HashMap::new();
    // offset → (terms, Σ k·stride)
    let mut off_terms: HashMap<u32, Option<(Vec<(usize, usize)>, i64)>> = HashMap::new();
    for op in ops {
        match op {
            KOp::Offset { comps, dst, .. } => {
                let mut shift = 0i64;
                let terms = comps
                    .iter()
                    .filter_map(|c| match c {
                        Comp::Var(Src::S(s), st, _) => Some(axis_of.get(s).map(|&(a, k)| {
                            shift += k * *st as i64;
                            (a, *st)
                        })),
                        Comp::Var(Src::P(_), ..) => Some(None),
                        Comp::Const(_) => None,
                    })
                    .collect::<Option<Vec<_>>>();
                off_terms.insert(*dst, terms.map(|t| (t, shift)));
            }
            KOp::Scatter { target, off, c, .. } => {
                let form = match off {
                    None => Some(Affine {
                        c: *c as i64,
                        terms: Vec::new(),
                    }),
                    Some(o) => off_terms
                        .get(o)
                        .cloned()
                        .flatten()
                        .map(|(terms, shift)| Affine {
                            c: *c as i64 + shift,
                            terms,
                        }),
                };
                let f = &mut forms[*target];
                match (form, f.as_mut()) {
                    (Some(form), Some(v)) => v.push(form),
                    _ => *f = None,
                }
            }
            op => {
                let shifted = match op {
                    KOp::Bin {
                        op: o @ (Op2::Add | Op2::Sub),
                        a,
                        b,
                        ..
                    } => {
                        let at = |s: &Src| match s {
                            Src::S(s) => axis_of.get(s).copied(),
                            Src::P(_) => None,
                        };
                        match (at(a), int(b), at(b), int(a)) {
                            (Some((ax, k)), Some(c), ..) => {
                                Some((ax, if *o == Op2::Add { k + c } else { k - c }))
                            }
                            (_, _, Some((ax, k)), Some(c)) if *o == Op2::Add => Some((ax, k + c)),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                for d in op.results() {
                    axis_of.remove(&d);
                }
                match op {
                    KOp::Idx { axis, dst } => {
                        axis_of.insert(*dst, (*axis, 0));
                    }
                    KOp::Bin { dst, .. } => {
                        if let Some(f) = shifted {
                            axis_of.insert(*dst, f);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    forms
}

/// Group ranges `lo..hi` that lie close together: sorted by start, a range joins the group
/// before it when it starts no further past the group's end than the group is wide (at least
/// 256). Returns the groups as indices into `ranges`, the group of the lowest start first.
fn group_ranges(ranges: &[(i64, i64)]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i]);
    let mut groups: Vec<(i64, i64, Vec<usize>)> = Vec::new();
    for i in order {
        let (lo, hi) = ranges[i];
        match groups.last_mut() {
            Some((glo, ghi, g)) if lo <= *ghi + (*ghi - *glo).max(256) => {
                *ghi = (*ghi).max(hi);
                g.push(i);
            }
            _ => groups.push((lo, hi, vec![i])),
        }
    }
    groups.into_iter().map(|(.., g)| g).collect()
}

/// Where a kernel parameter's data comes from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ParamSrc {
    /// the caller's k-th parameter
    Caller(u32),
    /// an array read at the identity index (same shape as the space): its data, contiguous
    Array(u32),
}

/// A compiled kernel.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    pub(crate) ops: Vec<KOp>,
    pub(crate) nslots: usize,
    pub(crate) consts: Vec<(u32, f64)>,
    pub(crate) space: Vec<usize>,
    pub(crate) strides: Vec<usize>,
    pub roots: Vec<Src>,
    pub params: Vec<ParamSrc>,
    /// keys of the arrays read (the caller passes their data in this order)
    pub arrays: Vec<u32>,
    pub(crate) array_shapes: Vec<Vec<usize>>,
    /// keys of the scatter targets (windows come back in this order)
    pub targets: Vec<u32>,
    /// lengths of the scatter targets' windows: the target's length, or 0 for a target reached
    /// only by `dense_targets`
    pub target_lens: Vec<usize>,
    /// scatters at the identity index, turned into extra roots: (target index, root index)
    pub dense_targets: Vec<(usize, usize)>,
    /// per scatter target: the index of each of its scatters as an affine form in the space's
    /// index components (`None`: some index is not), which bounds the part of the target a
    /// chunk touches ([`Kernel::window_range`])
    pub(crate) target_forms: Vec<Option<Vec<Affine>>>,
    /// the scatter windows of a chunk: window `t < targets.len()` is target `t`'s (its first
    /// part's, when split), further ones further parts of windowed targets
    /// ([`Kernel::split_windows`])
    pub(crate) windows: Vec<WindowPart>,
    /// per operation: the window its scatter adds into (0 for other operations)
    pub(crate) scatter_window: Vec<usize>,
    pub block: usize,
    /// for adjoint kernels: which parameter each leading root is the adjoint of
    pub param_roots: Vec<u32>,
    /// which roots are `f32` values (sums over them accumulate in `f32`)
    pub root_f32: Vec<bool>,
    /// which scatter targets are `f32` arrays (their windows accumulate in `f32`)
    pub target_f32: Vec<bool>,
    /// whether to compile the kernel to native code when it is eligible ([`crate::jit`])
    pub(crate) jit_on: bool,
    /// the compiled kernel, made on first use (`None`: interpreted)
    jit: OnceLock<Option<Arc<Jit>>>,
}

/// The most slot-buffer elements a thread keeps for its next evaluations (8 MiB). Programs of
/// many small kernels (an LSTM unrolled into one node per step ran thousands per gradient) would
/// otherwise spend more time allocating slot buffers than computing.
const SPARE_MAX_ELEMS: usize = 1 << 20;

/// Slot and offset buffers of finished evaluations on this thread, with their total capacity.
#[derive(Default)]
struct Spare {
    bufs: Vec<Vec<f64>>,
    offs: Vec<Vec<usize>>,
    elems: usize,
}

thread_local! {
    static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::default();
}

/// Element types of a kernel's parameters and read arrays.
pub(crate) struct Types<'a> {
    /// the caller's parameters (missing ones are `f64`)
    pub params: &'a [Ty],
    /// an array (or aux array) by key
    pub read: &'a dyn Fn(u32) -> Ty,
}

/// A scatter into the array with key `target` at the index of the read node `read`.
#[derive(Clone)]
pub(crate) struct ScatterSpec {
    pub target: u32,
    pub read: Id,
    pub val: Id,
}

pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Guards of the reads: the condition under which the primal DAG (roots `primal`) demands each
/// node, through `Select` branches and the gated operand of `AdjMul`. A link `(p, o)` makes node `o` an operand of node `p` here
/// (a stored value's parameter and the operand it was computed from, `p > o`). Returns guard
/// expression ids (absent = always).
fn guards(ar: &mut Arena, primal: &[Id], links: &[(Id, Id)]) -> HashMap<Id, Option<Id>> {
    // None = always; Some(e) = when e.
    let mut g: HashMap<Id, Option<Id>> = HashMap::new();
    for &r in primal {
        g.insert(r, None);
    }
    let top = primal.iter().copied().max().map_or(0, |m| m as usize + 1);
    let mut linked: HashMap<Id, Vec<Id>> = HashMap::new();
    for &(p, o) in links {
        linked.entry(p).or_default().push(o);
    }
    let and = |ar: &mut Arena, x: Option<Id>, y: Id| -> Option<Id> {
        match x {
            None => Some(y),
            Some(x) if x == y => Some(x),
            Some(x) => Some(ar.disc(DOp::And, x, y)),
        }
    };
    for i in (0..top).rev() {
        let i = i as Id;
        let Some(&gi) = g.get(&i) else { continue };
        let node = ar.nodes[i as usize].clone();
        let give = |ar: &mut Arena, g: &mut HashMap<Id, Option<Id>>, o: Id, v: Option<Id>| {
            let new = match (g.get(&o), v) {
                (None, v) => v,
                (Some(None), _) | (_, None) => None,
                (Some(Some(a)), Some(b)) if *a == b => Some(b),
                (Some(Some(a)), Some(b)) => Some(ar.disc(DOp::Or, *a, b)),
            };
            g.insert(o, new);
        };
        if let Node::Select(c, a, b) = node {
            give(ar, &mut g, c, gi);
            let ga = and(ar, gi, c);
            let nc = ar.disc(DOp::Not, c, c);
            let gb = and(ar, gi, nc);
            give(ar, &mut g, a, ga);
            give(ar, &mut g, b, gb);
        } else if let Node::AdjMul(gate, d) = node {
            // `gate · d` is 0 where the gate is, without `d`: a derivative in the primal
            // (`gradient_e`) reaches the reads of a branch not taken through the zero adjoint
            // its `Select` sends there (they were read, and reported out of bounds).
            give(ar, &mut g, gate, gi);
            let gd = and(ar, gi, gate);
            give(ar, &mut g, d, gd);
        } else {
            for o in node.operands() {
                give(ar, &mut g, o, gi);
            }
        }
        for &o in linked.get(&i).into_iter().flatten() {
            give(ar, &mut g, o, gi);
        }
    }
    g
}

impl Kernel {
    /// Compile the DAG `ar` for `space`: `roots` are read after each block, `scatters` add
    /// into windows of their targets. `primal` are the roots of the primal part (they decide
    /// which reads are guarded by `Select` conditions; `links` pairs a stored value's parameter
    /// with the operand it was computed from, so that the reads below it keep their guards).
    /// `shape_of` gives array shapes by key.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn compile(
        mut ar: Arena,
        roots: &[Id],
        scatters: &[ScatterSpec],
        primal: &[Id],
        links: &[(Id, Id)],
        space: &[usize],
        nparams: u32,
        shape_of: &dyn Fn(u32) -> Vec<usize>,
        types: &Types,
    ) -> Kernel {
        let infer_types = |ar: &Arena| -> Vec<Ty> {
            infer(
                ar,
                &|k| types.params.get(k as usize).copied().unwrap_or(Ty::F64),
                types.read,
            )
            .unwrap_or_else(|_| vec![Ty::F64; ar.nodes.len()])
        };
        // sin′ is the cos node (and so on) where that is the same number: see
        // `Arena::with_shared_partials`
        let (mut roots, mut scatters, mut primal, mut links) = (
            roots.to_vec(),
            scatters.to_vec(),
            primal.to_vec(),
            links.to_vec(),
        );
        let ty0 = infer_types(&ar);
        if let Some((new, map)) = ar.with_shared_partials(&|a| ty0[a as usize] != Ty::F32) {
            ar = new;
            for r in roots.iter_mut().chain(&mut primal) {
                *r = map[*r as usize];
            }
            for (p, o) in &mut links {
                (*p, *o) = (map[*p as usize], map[*o as usize]);
            }
            for s in &mut scatters {
                s.read = map[s.read as usize];
                s.val = map[s.val as usize];
            }
        }
        let (roots, scatters, primal) = (&roots[..], &scatters[..], &primal[..]);
        let guard = guards(&mut ar, primal, &links);
        // Element types (a mix, rejected when the program was built, is evaluated in f64).
        let ty: Vec<Ty> = infer_types(&ar);
        let is32 = |i: Id| ty[i as usize] == Ty::F32;
        // Identity reads become parameters; identity scatters become dense roots.
        let rank = space.len();
        let is_identity = |ar: &Arena, ix: &[Id], key: u32| -> bool {
            ix.len() == rank
                && ix
                    .iter()
                    .enumerate()
                    .all(|(a, &i)| ar.nodes[i as usize] == Node::Idx(a as u32))
                && shape_of(key) == space
        };
        let mut params: Vec<ParamSrc> = (0..nparams).map(ParamSrc::Caller).collect();
        let mut read_param: HashMap<Id, u32> = HashMap::new();
        let mut roots: Vec<Id> = roots.to_vec();
        let mut dense_targets = Vec::new();
        let mut targets: Vec<u32> = Vec::new();
        let mut sc: Vec<(usize, Id, Id)> = Vec::new(); // (target idx, read node, val)
        for s in scatters {
            let Node::Read(key, ix) = ar.nodes[s.read as usize].clone() else {
                unreachable!("scatter of a non-read")
            };
            let ti = match targets.iter().position(|&t| t == s.target) {
                Some(t) => t,
                None => {
                    targets.push(s.target);
                    targets.len() - 1
                }
            };
            if is_identity(&ar, &ix, key) {
                dense_targets.push((ti, roots.len()));
                roots.push(s.val);
            } else {
                sc.push((ti, s.read, s.val));
            }
        }
        // Needed nodes: the roots, the scatters, and the guards of needed reads (to a fixpoint).
        let mut need_roots: Vec<Id> = roots.clone();
        for &(_, r, v) in &sc {
            need_roots.push(r);
            need_roots.push(v);
        }
        let n = ar.nodes.len();
        let mut guard_of: Vec<Option<Id>> = vec![None; n];
        let mut reach = ar.reachable(&need_roots);
        loop {
            let mut extra = Vec::new();
            for i in 0..n {
                if reach[i] && matches!(ar.nodes[i], Node::Read(..)) {
                    if let Some(Some(gd)) = guard.get(&(i as Id)) {
                        if guard_of[i].is_none() {
                            guard_of[i] = Some(*gd);
                            extra.push(*gd);
                        }
                    }
                }
            }
            if extra.is_empty() {
                break;
            }
            let r2 = ar.reachable(&extra);
            for i in 0..n {
                reach[i] |= r2[i];
            }
        }
        // Which derivative nodes fuse into their primitive's loop.
        let mut un_d: HashMap<Id, Id> = HashMap::new(); // Un id -> D1 id
        let mut bin_d: HashMap<Id, (Option<Id>, Option<Id>)> = HashMap::new();
        let mut fused_into: Vec<Option<Id>> = vec![None; n];
        {
            let mut index_of: HashMap<&Node, Id> = HashMap::new();
            for (i, nd) in ar.nodes.iter().enumerate() {
                if reach[i] {
                    index_of.insert(nd, i as Id);
                }
            }
            for (i, nd) in ar.nodes.iter().enumerate() {
                if !reach[i] {
                    continue;
                }
                match nd {
                    Node::D1(op, a) => {
                        if let Some(&u) = index_of.get(&Node::Un(*op, *a)) {
                            un_d.insert(u, i as Id);
                            fused_into[i] = Some(u);
                        }
                    }
                    Node::D2(op, w, a, b) => {
                        if let Some(&u) = index_of.get(&Node::Bin(*op, *a, *b)) {
                            let e = bin_d.entry(u).or_insert((None, None));
                            if *w == 0 {
                                e.0 = Some(i as Id);
                            } else {
                                e.1 = Some(i as Id);
                            }
                            fused_into[i] = Some(u);
                        }
                    }
                    _ => {}
                }
            }
        }
        // Dependencies: operands, a read's guard, a fused derivative's primitive.
        let deps = |i: usize, guard_of: &[Option<Id>]| -> Vec<Id> {
            let mut d = ar.nodes[i].operands();
            if let Some(g) = guard_of[i] {
                d.push(g);
            }
            if let Some(u) = fused_into[i] {
                d.push(u);
            }
            d.sort_unstable();
            d.dedup();
            d
        };
        // Topological order (Kahn, smallest id first). A cycle through guards (two reads, each
        // demanded under a condition that reads the other) drops the guard of one read: it
        // then reads every element, those out of bounds quietly (offset 0), and its guard,
        // computed later, is checked against the bounds there (`dropped`).
        let mut dropped: Vec<Option<Id>> = vec![None; n];
        let mut indeg: Vec<usize> = vec![0; n];
        let mut users: Vec<Vec<Id>> = vec![Vec::new(); n];
        for i in 0..n {
            if reach[i] {
                for o in deps(i, &guard_of) {
                    indeg[i] += 1;
                    users[o as usize].push(i as Id);
                }
            }
        }
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<Id>> = (0..n)
            .filter(|&i| reach[i] && indeg[i] == 0)
            .map(|i| std::cmp::Reverse(i as Id))
            .collect();
        let mut order: Vec<Id> = Vec::new();
        let mut done = vec![false; n];
        let total_needed = reach.iter().filter(|&&r| r).count();
        while order.len() < total_needed {
            let Some(std::cmp::Reverse(i)) = heap.pop() else {
                // A cycle through guards: drop the guard of the first blocked read.
                let r = (0..n)
                    .find(|&i| {
                        reach[i] && !done[i] && guard_of[i].is_some() && {
                            let g = guard_of[i].expect("guard") as usize;
                            !done[g]
                        }
                    })
                    .expect("a blocked guarded read");
                let g = guard_of[r].take().expect("guard") as usize;
                dropped[r] = Some(g as Id);
                users[g].retain(|&u| u as usize != r);
                indeg[r] -= 1;
                if indeg[r] == 0 {
                    heap.push(std::cmp::Reverse(r as Id));
                }
                continue;
            };
            done[i as usize] = true;
            order.push(i);
            for &u in &users[i as usize] {
                indeg[u as usize] -= 1;
                if indeg[u as usize] == 0 {
                    heap.push(std::cmp::Reverse(u));
                }
            }
        }
        // The reads whose dropped guard each node is (checked right after it is computed).
        let mut checks_at: HashMap<Id, Vec<usize>> = HashMap::new();
        for (r, g) in dropped.iter().enumerate() {
            if let Some(g) = g {
                checks_at.entry(*g).or_default().push(r);
            }
        }
        let mut pos: Vec<u32> = vec![0; n];
        for (p, &i) in order.iter().enumerate() {
            pos[i as usize] = p as u32;
        }
        // Last use of each node, as a position in `order` (roots and scatter operands: end).
        let end = u32::MAX;
        let mut last: Vec<u32> = vec![0; n];
        for &i in &order {
            for o in deps(i as usize, &guard_of) {
                last[o as usize] = last[o as usize].max(pos[i as usize]);
            }
        }
        for &r in &roots {
            last[r as usize] = end;
        }
        for &(_, r, v) in &sc {
            last[v as usize] = end;
            if let Node::Read(_, ix) = &ar.nodes[r as usize] {
                for &i in ix {
                    last[i as usize] = end;
                }
            }
            if let Some(gd) = guard_of[r as usize] {
                last[gd as usize] = end;
            }
        }
        // A read whose guard was dropped: its index values live until that guard is computed,
        // where its bounds are checked.
        for (r, g) in dropped.iter().enumerate() {
            if let (Some(g), Node::Read(_, ix)) = (g, &ar.nodes[r]) {
                for &i in ix {
                    last[i as usize] = last[i as usize].max(pos[*g as usize]);
                }
            }
        }
        // Slot allocation.
        let mut loc: Vec<Option<Src>> = vec![None; n];
        let mut free: Vec<u32> = Vec::new();
        let mut nslots: u32 = 0;
        let mut consts: Vec<(u32, f64)> = Vec::new();
        let mut alloc = |free: &mut Vec<u32>| -> u32 {
            free.pop().unwrap_or_else(|| {
                nslots += 1;
                nslots - 1
            })
        };
        let mut ops: Vec<KOp> = Vec::new();
        let mut arrays: Vec<u32> = Vec::new();
        let mut array_shapes: Vec<Vec<usize>> = Vec::new();
        let arr_index = |key: u32, arrays: &mut Vec<u32>, shapes: &mut Vec<Vec<usize>>| match arrays
            .iter()
            .position(|&k| k == key)
        {
            Some(p) => p,
            None => {
                arrays.push(key);
                shapes.push(shape_of(key));
                arrays.len() - 1
            }
        };
        // pending frees: slots whose node died at position i
        let mut dies_at: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut offsets: HashMap<(usize, Vec<Id>, Option<Id>, bool), (Option<u32>, usize)> =
            HashMap::new();
        let mut offset_info = |ar: &Arena,
                               key: u32,
                               ix: &[Id],
                               gd: Option<Id>,
                               quiet: bool,
                               loc: &Vec<Option<Src>>,
                               ops: &mut Vec<KOp>,
                               free: &mut Vec<u32>,
                               alloc: &mut dyn FnMut(&mut Vec<u32>) -> u32,
                               arrays: &mut Vec<u32>,
                               shapes: &mut Vec<Vec<usize>>|
         -> (usize, Option<u32>, usize) {
            let ai = arr_index(key, arrays, shapes);
            let shape = shapes[ai].clone();
            let st = strides(&shape);
            let mut c = 0usize;
            let mut comps = Vec::new();
            let mut var_ids = Vec::new();
            // A constant component inside the axis is added at the gather. One out of bounds
            // (checked when recorded, but made later by folding or substitution) goes through
            // the run-time check like a variable one: an `Error::OutOfBounds` where the read is
            // live, nothing where a guard drops it (it was a panic here; a hunter).
            let in_range = |i: Id, a: usize| {
                ar.konst_of(i)
                    .filter(|&v| v >= 0.0 && (v as usize) < shape[a])
            };
            for (a, &i) in ix.iter().enumerate() {
                match in_range(i, a) {
                    Some(v) => {
                        c += v as usize * st[a];
                        comps.push(Comp::Const(v));
                    }
                    None => {
                        comps.push(Comp::Var(
                            loc[i as usize].expect("operand"),
                            st[a],
                            shape[a],
                        ));
                        var_ids.push(i);
                    }
                }
            }
            if var_ids.is_empty() {
                return (ai, None, c);
            }
            // Shared by reads that differ only in constant components.
            let keyv = (
                ai,
                ix.iter()
                    .enumerate()
                    .map(|(a, &i)| {
                        if in_range(i, a).is_some() {
                            u32::MAX
                        } else {
                            i
                        }
                    })
                    .collect::<Vec<Id>>(),
                gd,
                quiet,
            );
            if let Some(&(s, _)) = offsets.get(&keyv) {
                return (ai, s, c);
            }
            // One offset per (array, variable components, guard); constants are added at the
            // gather. Offsets are not freed early (they may be shared); they live to the end.
            let dst = alloc(free);
            ops.push(KOp::Offset {
                arr: ai,
                comps,
                guard: gd.map(|g| loc[g as usize].expect("guard")),
                quiet,
                dst,
            });
            let s = Some(dst);
            offsets.insert(keyv, (s, c));
            (ai, s, c)
        };
        for &id in &order {
            let i = id as usize;
            if fused_into[i].is_some() {
                // computed with its primitive; free what died here
                for o in deps(i, &guard_of) {
                    if last[o as usize] == pos[i] {
                        if let Some(Src::S(s)) = loc[o as usize] {
                            free.push(s);
                        }
                    }
                }
                continue;
            }
            let node = ar.nodes[i].clone();
            let src: Src = match &node {
                Node::Const(b) => {
                    let s = alloc(&mut Vec::new()); // a fresh slot: never shared
                    consts.push((s, f64::from_bits(*b)));
                    last[i] = end; // constants are filled once per chunk: never freed
                    Src::S(s)
                }
                Node::Param(k) => Src::P(*k),
                // (substituted by `gradient_e`/`jacobian_e`; one left is an expression built
                // inside their closure and used outside it, which `build` does not catch)
                Node::Var(_) => panic!(
                    "adjoint::array: an expression built inside a `gradient_e`/`jacobian_e` \
                     closure is used outside it (a value kept from the closure): compute it \
                     again outside, from the closure's inputs"
                ),
                Node::Idx(a) => {
                    let dst = alloc(&mut free);
                    ops.push(KOp::Idx {
                        axis: *a as usize,
                        dst,
                    });
                    Src::S(dst)
                }
                Node::Un(op, a) => {
                    let dst = alloc(&mut free);
                    let d = un_d.get(&id).map(|&did| {
                        let s = alloc(&mut free);
                        loc[did as usize] = Some(Src::S(s));
                        s
                    });
                    ops.push(wrap32(
                        is32(id),
                        KOp::Un {
                            op: *op,
                            a: lo(&loc, *a),
                            dst,
                            d,
                        },
                    ));
                    Src::S(dst)
                }
                Node::D1(op, a) | Node::DD1(op, a) => {
                    let dst = alloc(&mut free);
                    ops.push(wrap32(
                        is32(id),
                        KOp::D1 {
                            op: *op,
                            a: lo(&loc, *a),
                            dst,
                            second: matches!(node, Node::DD1(..)),
                        },
                    ));
                    Src::S(dst)
                }
                Node::Bin(op, a, b) => {
                    let dst = alloc(&mut free);
                    let d = bin_d.get(&id).map(|&(dx, dy)| {
                        let sx = alloc(&mut free);
                        let sy = alloc(&mut free);
                        if let Some(dx) = dx {
                            loc[dx as usize] = Some(Src::S(sx));
                        } else {
                            dies_at.entry(id).or_default().push(sx);
                        }
                        if let Some(dy) = dy {
                            loc[dy as usize] = Some(Src::S(sy));
                        } else {
                            dies_at.entry(id).or_default().push(sy);
                        }
                        (sx, sy)
                    });
                    ops.push(wrap32(
                        is32(id),
                        KOp::Bin {
                            op: *op,
                            a: lo(&loc, *a),
                            b: lo(&loc, *b),
                            dst,
                            d,
                        },
                    ));
                    Src::S(dst)
                }
                Node::D2(op, w, a, b) | Node::DD2(op, w, a, b) => {
                    let dst = alloc(&mut free);
                    ops.push(wrap32(
                        is32(id),
                        KOp::D2 {
                            op: *op,
                            w: *w,
                            a: lo(&loc, *a),
                            b: lo(&loc, *b),
                            dst,
                            second: matches!(node, Node::DD2(..)),
                        },
                    ));
                    Src::S(dst)
                }
                Node::AdjMul(g, d) => {
                    let dst = alloc(&mut free);
                    ops.push(wrap32(
                        is32(id),
                        KOp::AdjMul {
                            g: lo(&loc, *g),
                            d: lo(&loc, *d),
                            dst,
                        },
                    ));
                    Src::S(dst)
                }
                Node::Disc(op, a, b) => {
                    let dst = alloc(&mut free);
                    // compared (or floored) in f32 when an operand is f32
                    let j = ty[*a as usize].join(ty[*b as usize]) == Ok(Ty::F32);
                    ops.push(wrap32(
                        j,
                        KOp::Disc {
                            op: *op,
                            a: lo(&loc, *a),
                            b: lo(&loc, *b),
                            dst,
                        },
                    ));
                    Src::S(dst)
                }
                Node::Select(c, a, b) => {
                    let dst = alloc(&mut free);
                    ops.push(wrap32(
                        is32(id),
                        KOp::Select {
                            c: lo(&loc, *c),
                            a: lo(&loc, *a),
                            b: lo(&loc, *b),
                            dst,
                        },
                    ));
                    Src::S(dst)
                }
                Node::Cast(to32, a) => {
                    let dst = alloc(&mut free);
                    ops.push(KOp::Cast {
                        a: lo(&loc, *a),
                        dst,
                        to32: *to32,
                    });
                    Src::S(dst)
                }
                Node::Read(key, ix) => {
                    if is_identity(&ar, ix, *key) {
                        let p = *read_param.entry(id).or_insert_with(|| {
                            params.push(ParamSrc::Array(*key));
                            params.len() as u32 - 1
                        });
                        Src::P(p)
                    } else {
                        let gd = guard_of[i];
                        let (ai, off, c) = offset_info(
                            &ar,
                            *key,
                            ix,
                            gd,
                            dropped[i].is_some(),
                            &loc,
                            &mut ops,
                            &mut free,
                            &mut alloc,
                            &mut arrays,
                            &mut array_shapes,
                        );
                        let dst = alloc(&mut free);
                        ops.push(KOp::Gather {
                            arr: ai,
                            off,
                            c,
                            guard: gd.map(|g| lo(&loc, g)),
                            dst,
                        });
                        Src::S(dst)
                    }
                }
            };
            loc[i] = Some(src);
            // The bounds of each read whose dropped guard this is, for the elements that need
            // the read (an `Offset` with the guard, which reports them).
            for &r in checks_at.get(&id).into_iter().flatten() {
                if let Node::Read(key, ix) = &ar.nodes[r] {
                    offset_info(
                        &ar,
                        *key,
                        ix,
                        Some(id),
                        false,
                        &loc,
                        &mut ops,
                        &mut free,
                        &mut alloc,
                        &mut arrays,
                        &mut array_shapes,
                    );
                }
            }
            // Free the slots of operands whose last use is this node.
            for o in deps(i, &guard_of) {
                if last[o as usize] == pos[i] {
                    if let Some(Src::S(s)) = loc[o as usize] {
                        free.push(s);
                    }
                }
            }
            if let Some(v) = dies_at.remove(&id) {
                free.extend(v);
            }
            // A node nobody uses (e.g. a fused derivative's unused twin) frees at once.
            if last[i] == 0 && !roots.contains(&id) && users[i].is_empty() {
                if let Src::S(s) = src {
                    if !matches!(node, Node::Const(_)) {
                        free.push(s);
                    }
                }
            }
        }
        // Scatters.
        for &(ti, r, v) in &sc {
            let Node::Read(key, ix) = ar.nodes[r as usize].clone() else {
                unreachable!()
            };
            let gd = guard_of[r as usize];
            let (ai, off, c) = offset_info(
                &ar,
                key,
                &ix,
                gd,
                dropped[r as usize].is_some(),
                &loc,
                &mut ops,
                &mut free,
                &mut alloc,
                &mut arrays,
                &mut array_shapes,
            );
            ops.push(KOp::Scatter {
                target: ti,
                off,
                c,
                guard: gd.map(|g| loc[g as usize].expect("guard")),
                val: loc[v as usize].expect("val"),
            });
            let _ = ai;
        }
        let nslots = nslots as usize;
        // Slots hold one block of the space each; a small space (an LSTM step's 14 elements)
        // gets blocks of its own size, so that evaluators do not allocate and clear 1024-long
        // buffers per call.
        let total: usize = space.iter().product();
        let block = (32_768 / nslots.max(1))
            .clamp(64, 1024)
            .next_power_of_two()
            .min(1024)
            .min(total.max(1).next_power_of_two());
        let target_forms = scatter_forms(&ops, &consts, targets.len());
        let mut k = Kernel {
            ops,
            nslots,
            consts,
            space: space.to_vec(),
            strides: strides(space),
            roots: roots
                .iter()
                .map(|&r| loc[r as usize].expect("root"))
                .collect(),
            params,
            arrays,
            array_shapes,
            // A target reached only through identity reads (its adjoint a dense root) gets no
            // window.
            target_lens: targets
                .iter()
                .enumerate()
                .map(|(ti, &t)| {
                    if sc.iter().any(|&(x, ..)| x == ti) {
                        shape_of(t).iter().product()
                    } else {
                        0
                    }
                })
                .collect(),
            target_f32: targets
                .iter()
                .map(|&t| (types.read)(t) == Ty::F32)
                .collect(),
            root_f32: roots.iter().map(|&r| is32(r)).collect(),
            targets,
            dense_targets,
            target_forms,
            windows: Vec::new(),
            scatter_window: Vec::new(),
            block,
            param_roots: Vec::new(),
            jit_on: jit_default(),
            jit: OnceLock::new(),
        };
        k.split_windows();
        k
    }

    /// Give each far-apart group of a windowed target's scatters its own window.
    ///
    /// One window per target spans every place a chunk scatters to: the dot product written
    /// over one vector (`x.at(&[i[0]]) * x.at(&[i[0] + n])`) made each chunk's window cover
    /// both halves, nearly the whole adjoint, to clear and add back per chunk. The scatters'
    /// ranges over the first chunk, sorted, are grouped while the next one starts no further
    /// past the group's end than the group is wide (at least 256 elements): neighbours
    /// (stencils, rows of a matrix) share a window, far blocks of a packed vector get one
    /// each. Which window a scatter uses is fixed here; each chunk's window ranges are
    /// computed from the forms in it ([`Kernel::window_range`]).
    fn split_windows(&mut self) {
        let nt = self.targets.len();
        let nforms = |t: usize| self.target_forms[t].as_ref().map_or(0, Vec::len);
        self.windows = (0..nt)
            .map(|t| WindowPart {
                target: t,
                forms: (0..nforms(t)).collect(),
            })
            .collect();
        // per target, per form: its window
        let mut window_of: Vec<Vec<usize>> = (0..nt).map(|t| vec![t; nforms(t)]).collect();
        if let Some(&(start, end)) = self.chunks().first() {
            for (t, window_of) in window_of.iter_mut().enumerate() {
                let Some(forms) = self.target_forms[t].as_ref().filter(|_| self.windowed(t)) else {
                    continue;
                };
                let ranges: Vec<(i64, i64)> = forms
                    .iter()
                    .map(|f| self.forms_range(std::iter::once(f), start, end))
                    .collect();
                for (gi, g) in group_ranges(&ranges).into_iter().enumerate() {
                    let w = if gi == 0 {
                        t
                    } else {
                        self.windows.push(WindowPart {
                            target: t,
                            forms: Vec::new(),
                        });
                        self.windows.len() - 1
                    };
                    for &i in &g {
                        window_of[i] = w;
                    }
                    self.windows[w].forms = g;
                }
            }
        }
        // Scatters in operation order are the forms in order (`scatter_forms`).
        let mut next = vec![0usize; nt];
        self.scatter_window = self
            .ops
            .iter()
            .map(|op| match op {
                KOp::Scatter { target, .. } => {
                    let i = next[*target];
                    next[*target] += 1;
                    window_of[*target].get(i).copied().unwrap_or(*target)
                }
                _ => 0,
            })
            .collect();
    }

    /// Whether compiled code gives target `t` a window over only the part a chunk touches
    /// (a large target whose scatter indices are affine), not over all of it.
    pub(crate) fn windowed(&self, t: usize) -> bool {
        self.target_lens[t] > crate::jit::MAX_WINDOW && self.target_forms[t].is_some()
    }

    /// The part `lo..hi` of its target that window `w`'s scatters from elements `start..end` of
    /// the space land in (all of the target unless [`Kernel::windowed`]).
    pub(crate) fn window_range(&self, w: usize, start: usize, end: usize) -> (usize, usize) {
        let part = &self.windows[w];
        let t = part.target;
        let n = self.target_lens[t];
        let Some(forms) = self.target_forms[t].as_ref().filter(|_| self.windowed(t)) else {
            return (0, n);
        };
        if start >= end {
            return (0, 0);
        }
        let (lo, hi) = self.forms_range(part.forms.iter().map(|&i| &forms[i]), start, end);
        // (a neighbour's range can start before the target or end past it: those scatters
        // are dead, guarded off)
        let lo = lo.clamp(0, n as i64) as usize;
        let hi = (hi.max(0) as usize).clamp(lo, n);
        if lo == hi && n > 0 {
            // Every scatter of the chunk lies outside the target (dead, guarded off: a padded
            // copy's tail). The compiled code clamps dead scatters into the window and adds 0
            // there, so the window needs an element (an empty one failed the JIT's check: a
            // hunter's padded gradient panicked from 8193 elements).
            let lo = lo.min(n - 1);
            return (lo, lo + 1);
        }
        (lo, hi)
    }

    /// The flat indices `lo..hi` (not clamped to a target) that `forms` take over elements
    /// `start..end` (non-empty) of the space.
    fn forms_range<'f>(
        &self,
        forms: impl Iterator<Item = &'f Affine>,
        start: usize,
        end: usize,
    ) -> (i64, i64) {
        // Each axis's range over the elements: fixed outside the first axis on which the
        // first and last element differ, that axis between their values, every inner axis
        // anything.
        let (first, last) = (self.unravel(start), self.unravel(end - 1));
        let split = (0..self.space.len()).find(|&a| first[a] != last[a]);
        let range = |a: usize| match split {
            Some(s) if a > s => (0, self.space[a] - 1),
            Some(s) if a == s => (first[a], last[a]),
            _ => (first[a], first[a]),
        };
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for f in forms {
            let (mut a, mut b) = (f.c, f.c);
            for &(axis, st) in &f.terms {
                let (x, y) = range(axis);
                a += (x * st) as i64;
                b += (y * st) as i64;
            }
            lo = lo.min(a);
            hi = hi.max(b + 1);
        }
        (lo, hi)
    }

    /// The index components of flat element `flat` of the space.
    fn unravel(&self, flat: usize) -> Vec<usize> {
        self.strides
            .iter()
            .zip(&self.space)
            .map(|(&st, &d)| (flat / st.max(1)) % d.max(1))
            .collect()
    }

    /// Compile to native code when eligible (`on`), or always interpret.
    pub(crate) fn with_jit(mut self, on: bool) -> Self {
        self.jit_on = on && jit_default();
        self
    }

    /// The compiled kernel, compiling it on first use.
    fn compiled(&self) -> Option<Arc<Jit>> {
        if !self.jit_on || !crate::jit::eligible(self) {
            return None;
        }
        self.jit
            .get_or_init(|| crate::jit::compile(self).map(Arc::new))
            .clone()
    }

    /// The kernel's fixed chunks: fewer when it scatters (each chunk has its own windows).
    pub(crate) fn chunks(&self) -> Vec<(usize, usize)> {
        let max = if self.targets.is_empty() { 64 } else { 16 };
        chunks_n(self.space_total(), self.block, max)
    }

    pub(crate) fn space_total(&self) -> usize {
        self.space.iter().product()
    }

    pub(crate) fn nscatter(&self) -> usize {
        self.targets.len()
    }
}

fn wrap32(f32: bool, op: KOp) -> KOp {
    if f32 {
        KOp::F32(Box::new(op))
    } else {
        op
    }
}

fn lo(loc: &[Option<Src>], o: Id) -> Src {
    loc[o as usize].expect("operand computed")
}

/// A per-chunk dense accumulator over the touched index range of a scatter target.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    pub lo: usize,
    pub data: Vec<f64>,
}

impl Window {
    /// Make `lo..hi` addressable; growth is geometric (never past `cap`, the target's length),
    /// so a window that keeps widening costs amortised linear time.
    fn ensure(&mut self, lo: usize, hi: usize, cap: usize) {
        if self.data.is_empty() {
            self.lo = lo;
            self.data = vec![0.0; hi - lo];
            return;
        }
        let cur_hi = self.lo + self.data.len();
        if lo >= self.lo && hi <= cur_hi {
            return;
        }
        let len = self.data.len();
        let nlo = if lo < self.lo {
            lo.min(self.lo.saturating_sub(len))
        } else {
            self.lo
        };
        let nhi = if hi > cur_hi {
            hi.max((cur_hi + len).min(cap))
        } else {
            cur_hi
        };
        let mut d = vec![0.0; nhi - nlo];
        d[self.lo - nlo..self.lo - nlo + self.data.len()].copy_from_slice(&self.data);
        self.lo = nlo;
        self.data = d;
    }
    /// Add the part of the window over `target[at..at + target.len()]` into it.
    fn add_into(&self, target: &mut [f64], at: usize, f32: bool) {
        let lo = self.lo.max(at);
        let hi = (self.lo + self.data.len()).min(at + target.len());
        if lo >= hi {
            return;
        }
        let t = &mut target[lo - at..hi - at];
        let w = &self.data[lo - self.lo..hi - self.lo];
        if f32 {
            for (t, &v) in t.iter_mut().zip(w) {
                *t = add_t(true, *t, v);
            }
        } else {
            for (t, v) in t.iter_mut().zip(w) {
                *t += v;
            }
        }
    }
}

/// The evaluation state of one task (one chunk): slot buffers and scatter windows.
pub(crate) struct Eval<'k> {
    k: &'k Kernel,
    bufs: Vec<Vec<f64>>,
    /// flat element offsets of the `Offset` ops' slots (integers: converted from the index
    /// components once, not at every gather and scatter that shares them)
    offs: Vec<Vec<usize>>,
    /// the smallest and largest offset of each `Offset` slot in the last block, over the
    /// elements whose guard holds (a block whose reads all hit one element has `lo == hi`)
    range: Vec<(usize, usize)>,
    pub windows: Vec<Window>,
    /// the compiled kernel (its windows are dense over their targets)
    jit: Option<Arc<Jit>>,
    /// where the compiled kernel stores roots that are parameters (never read)
    scratch: Vec<f64>,
    /// pointer tables for the compiled kernel, reused between blocks
    args: crate::jit::Args,
}

macro_rules! un_arms {
    ($op:expr, $x:expr, $y:expr, |$r:ident, $o:ident| $body:expr, [$($v:ident),*]) => {
        match $op {
            $(Op1::$v => {
                for ($o, &a) in $y.iter_mut().zip($x) {
                    let $r = rules::unary(Op1::$v, a);
                    $body
                }
            })*
            Op1::Powi(2) => {
                for ($o, &a) in $y.iter_mut().zip($x) {
                    let $r = rules::unary(Op1::Powi(2), a);
                    $body
                }
            }
            op => {
                for ($o, &a) in $y.iter_mut().zip($x) {
                    let $r = rules::unary(op, a);
                    $body
                }
            }
        }
    };
}

macro_rules! un_loop {
    ($op:expr, $x:expr, $y:expr, |$r:ident, $o:ident| $body:expr) => {
        un_arms!(
            $op,
            $x,
            $y,
            |$r, $o| $body,
            [
                Neg, Recip, Sqrt, Exp, Ln, Sin, Cos, Tanh, Abs, Log2, Log10, Ln1p, ExpM1, Tan,
                Atan, Sinh, Cosh, Erf
            ]
        )
    };
}

macro_rules! bin_arms {
    ($op:expr, $x:expr, $y:expr, $out:expr, |$r:ident, $o:ident| $body:expr, [$($v:ident),*]) => {
        match $op {
            $(Op2::$v => {
                for (($o, &a), &b) in $out.iter_mut().zip($x).zip($y) {
                    let $r = rules::binary(Op2::$v, a, b);
                    $body
                }
            })*
        }
    };
}

macro_rules! bin_loop {
    ($op:expr, $x:expr, $y:expr, $out:expr, |$r:ident, $o:ident| $body:expr) => {
        bin_arms!(
            $op,
            $x,
            $y,
            $out,
            |$r, $o| $body,
            [Add, Sub, Mul, Div, Powf, Atan2, Min, Max, Hypot, Rem]
        )
    };
}

macro_rules! disc_arms {
    ($op:expr, $x:expr, $y:expr, $out:expr, [$($v:ident),*]) => {
        match $op {
            $(DOp::$v => {
                for ((o, &a), &b) in $out.iter_mut().zip($x).zip($y) {
                    *o = DOp::$v.eval(a, b);
                }
            })*
        }
    };
}

macro_rules! disc_loop {
    ($op:expr, $x:expr, $y:expr, $out:expr) => {
        disc_arms!(
            $op,
            $x,
            $y,
            $out,
            [Floor, Ceil, Round, Trunc, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Not, IDiv, SignBit]
        )
    };
}

impl Drop for Eval<'_> {
    /// The buffers go back to this thread's spares for the next evaluation.
    fn drop(&mut self) {
        let (bufs, offs) = (
            std::mem::take(&mut self.bufs),
            std::mem::take(&mut self.offs),
        );
        SPARE.with_borrow_mut(|sp| {
            for b in bufs.into_iter().filter(|b| b.capacity() > 0) {
                if sp.elems + b.capacity() <= SPARE_MAX_ELEMS {
                    sp.elems += b.capacity();
                    sp.bufs.push(b);
                }
            }
            for o in offs.into_iter().filter(|o| o.capacity() > 0) {
                if sp.elems + o.capacity() <= SPARE_MAX_ELEMS {
                    sp.elems += o.capacity();
                    sp.offs.push(o);
                }
            }
        });
    }
}

impl<'k> Eval<'k> {
    /// An evaluator for any elements of the space.
    pub(crate) fn new(k: &'k Kernel) -> Self {
        Self::for_elements(k, 0, k.space_total())
    }

    /// An evaluator for elements `start..end` of the space (compiled code gets scatter
    /// windows over only what they touch: [`Kernel::window_range`]).
    pub(crate) fn for_elements(k: &'k Kernel, start: usize, end: usize) -> Self {
        let jit = k.compiled();
        let (bufs, offs) = match jit {
            // buffers from this thread's spares, sized by `interpreter_buffers`
            None => SPARE.with_borrow_mut(|sp| {
                let mut take = || match sp.bufs.pop() {
                    Some(b) => {
                        sp.elems -= b.capacity();
                        b
                    }
                    None => Vec::new(),
                };
                let bufs: Vec<Vec<f64>> = (0..k.nslots).map(|_| take()).collect();
                // only `Offset` slots have offsets
                let mut offs: Vec<Vec<usize>> = vec![Vec::new(); k.nslots];
                for op in &k.ops {
                    if let KOp::Offset { dst, .. } = op {
                        if let Some(o) = sp.offs.pop() {
                            sp.elems -= o.capacity();
                            offs[*dst as usize] = o;
                        }
                    }
                }
                (bufs, offs)
            }),
            Some(_) => (vec![Vec::new(); k.nslots], vec![Vec::new(); k.nslots]),
        };
        let mut ev = Eval {
            k,
            bufs,
            offs,
            range: vec![(0, 0); k.nslots],
            windows: Vec::new(),
            scratch: Vec::new(),
            args: Default::default(),
            jit,
        };
        match ev.jit {
            Some(_) => {
                // Compiled code keeps its intermediates in registers: only the slots of roots
                // (read back by `get`) need buffers; the interpreter's are made if a block
                // must be re-run to report an error.
                for r in &k.roots {
                    if let Src::S(s) = r {
                        ev.bufs[*s as usize] = vec![0.0; k.block];
                    }
                }
                ev.scratch = vec![0.0; k.block];
                ev.windows = (0..k.windows.len())
                    .map(|w| {
                        let (lo, hi) = k.window_range(w, start, end);
                        Window {
                            lo,
                            data: crate::buffers::zeroed(hi - lo),
                        }
                    })
                    .collect();
            }
            None => {
                ev.interpreter_buffers();
                ev.windows = vec![Window::default(); k.windows.len()];
            }
        }
        ev
    }

    /// Slot and offset buffers for the interpreter (kept from an earlier run or made),
    /// constants filled in.
    fn interpreter_buffers(&mut self) {
        let k = self.k;
        for b in self.bufs.iter_mut() {
            b.resize(k.block, 0.0);
        }
        for &(s, v) in &k.consts {
            self.bufs[s as usize].fill(v);
        }
        for op in &k.ops {
            if let KOp::Offset { dst, .. } = op {
                self.offs[*dst as usize].resize(k.block, 0);
            }
        }
    }

    /// Values of `s` for the last block.
    pub(crate) fn get<'a>(&'a self, s: Src, params: &[&'a [f64]], len: usize) -> &'a [f64] {
        match s {
            Src::S(i) => &self.bufs[i as usize][..len],
            Src::P(p) => &params[p as usize][..len],
        }
    }

    /// Evaluate elements `start..start + len` (flat indices of the space; `len ≤ block`);
    /// `params` are this block's slices of the parameters, `arrays` the read arrays' data.
    pub(crate) fn run(
        &mut self,
        start: usize,
        len: usize,
        params: &[&[f64]],
        arrays: &[&[f64]],
    ) -> Result<()> {
        debug_assert!(len <= self.k.block);
        if self.jit.is_some() {
            let scratch = self.scratch.as_mut_ptr();
            let mut roots = std::mem::take(&mut self.args.roots);
            roots.clear();
            for r in &self.k.roots {
                roots.push(match r {
                    Src::S(s) => (self.bufs[*s as usize].as_mut_ptr(), 1),
                    Src::P(_) => (scratch, 1),
                });
            }
            self.args.roots = roots;
            return self.run_compiled(start, len, params, arrays);
        }
        self.interpret(start, len, params, arrays)
    }

    /// Whether this evaluator runs compiled code (then [`Eval::run_into`] can store roots
    /// straight into the caller's outputs).
    pub(crate) fn compiled(&self) -> bool {
        self.jit.is_some()
    }

    /// Evaluate a block with the compiled kernel, storing the roots straight into the
    /// caller's outputs: output `o` holds the block's elements interleaved, root `groups[o][j]`
    /// of element `e` at `outs[o][e·w + j]` (`w = groups[o].len()`, `outs[o].len() = len·w`).
    /// Roots in no group are stored nowhere the caller reads. Only for a compiled evaluator,
    /// and no root in two groups.
    pub(crate) fn run_into(
        &mut self,
        start: usize,
        len: usize,
        params: &[&[f64]],
        arrays: &[&[f64]],
        groups: &[Vec<usize>],
        outs: &mut [&mut [f64]],
    ) -> Result<()> {
        let scratch = self.scratch.as_mut_ptr();
        let roots = &mut self.args.roots;
        roots.clear();
        roots.resize(self.k.roots.len(), (scratch, 1));
        for (g, out) in groups.iter().zip(outs.iter_mut()) {
            let w = g.len();
            assert_eq!(out.len(), len * w, "an output block of the wrong length");
            let base = out.as_mut_ptr();
            for (j, &r) in g.iter().enumerate() {
                // element e of root r goes to out[e·w + j] (< len·w): within `out`
                roots[r] = (base.wrapping_add(j), w);
            }
        }
        self.run_compiled(start, len, params, arrays)
    }

    fn run_compiled(
        &mut self,
        start: usize,
        len: usize,
        params: &[&[f64]],
        arrays: &[&[f64]],
    ) -> Result<()> {
        let k = self.k;
        let jit = self.jit.clone().expect("a compiled kernel");
        assert!(
            len <= k.block && self.scratch.len() >= len,
            "a block too long"
        );
        // SAFETY: every root destination in `self.args.roots` is writable for the block: a
        // slot buffer or the scratch buffer (`block ≥ len` elements, stride 1), or an output
        // block of `len·w` elements written at `j + e·w` (`j < w`), as `run`/`run_into` just
        // built them; the windows are owned by this evaluator and not borrowed elsewhere.
        if unsafe {
            jit.run(
                k,
                start,
                len,
                params,
                arrays,
                &mut self.windows,
                &mut self.args,
            )
        } {
            return Ok(());
        }
        // An index out of bounds: the interpreter finds it and reports it.
        self.interpreter_buffers();
        self.interpret(start, len, params, arrays)?;
        panic!("adjoint::array: the compiled kernel reported an index out of bounds that the interpreter did not find");
    }

    fn interpret(
        &mut self,
        start: usize,
        len: usize,
        params: &[&[f64]],
        arrays: &[&[f64]],
    ) -> Result<()> {
        let k = self.k;
        for op in &k.ops {
            match op {
                KOp::Idx { axis, dst } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let (st, dim) = (k.strides[*axis], k.space[*axis]);
                    let mut q = start / st;
                    let mut r = start % st;
                    let mut v = (q % dim) as f64;
                    for o in out[..len].iter_mut() {
                        *o = v;
                        r += 1;
                        if r == st {
                            r = 0;
                            q += 1;
                            v = (q % dim) as f64;
                        }
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::Un { op, a, dst, d } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    match d {
                        None => {
                            let x = self.get(*a, params, len);
                            un_loop!(*op, x, out[..len], |r, o| *o = r.value);
                        }
                        Some(ds) => {
                            let mut dv = std::mem::take(&mut self.bufs[*ds as usize]);
                            let x = self.get(*a, params, len);
                            for ((o, dd), &a) in out[..len].iter_mut().zip(&mut dv[..len]).zip(x) {
                                let r = rules::unary(*op, a);
                                *o = r.value;
                                *dd = r.d;
                            }
                            self.bufs[*ds as usize] = dv;
                        }
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::D1 { op, a, dst, second } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let x = self.get(*a, params, len);
                    if *second {
                        for (o, &a) in out[..len].iter_mut().zip(x) {
                            *o = eval_dd1(*op, a);
                        }
                    } else {
                        un_loop!(*op, x, out[..len], |r, o| *o = r.d);
                        let _ = eval_d1;
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::Bin { op, a, b, dst, d } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    match d {
                        None => {
                            let x = self.get(*a, params, len);
                            let y = self.get(*b, params, len);
                            bin_loop!(*op, x, y, out[..len], |r, o| *o = r.value);
                        }
                        Some((sx, sy)) => {
                            let mut dx = std::mem::take(&mut self.bufs[*sx as usize]);
                            let mut dy = std::mem::take(&mut self.bufs[*sy as usize]);
                            let x = self.get(*a, params, len);
                            let y = self.get(*b, params, len);
                            let (dx_, dy_) = (&mut dx[..len], &mut dy[..len]);
                            macro_rules! arms2 {
                                ($($v:ident),*) => {
                                    match *op {
                                        $(Op2::$v => {
                                            for i in 0..len {
                                                let r = rules::binary(Op2::$v, x[i], y[i]);
                                                out[i] = r.value;
                                                dx_[i] = r.dx;
                                                dy_[i] = r.dy;
                                            }
                                        })*
                                    }
                                };
                            }
                            arms2!(Add, Sub, Mul, Div, Powf, Atan2, Min, Max, Hypot, Rem);
                            self.bufs[*sx as usize] = dx;
                            self.bufs[*sy as usize] = dy;
                        }
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::D2 {
                    op,
                    w,
                    a,
                    b,
                    dst,
                    second,
                } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let x = self.get(*a, params, len);
                    let y = self.get(*b, params, len);
                    if *second {
                        for ((o, &a), &b) in out[..len].iter_mut().zip(x).zip(y) {
                            *o = eval_dd2(*op, *w, a, b);
                        }
                    } else if *w == 0 {
                        bin_loop!(*op, x, y, out[..len], |r, o| *o = r.dx);
                    } else {
                        bin_loop!(*op, x, y, out[..len], |r, o| *o = r.dy);
                        let _ = eval_d2;
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::AdjMul { g, d, dst } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let x = self.get(*g, params, len);
                    let y = self.get(*d, params, len);
                    for ((o, &a), &b) in out[..len].iter_mut().zip(x).zip(y) {
                        *o = adj_mul(a, b);
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::Disc { op, a, b, dst } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let x = self.get(*a, params, len);
                    let y = self.get(*b, params, len);
                    disc_loop!(*op, x, y, out[..len]);
                    self.bufs[*dst as usize] = out;
                }
                KOp::Select { c, a, b, dst } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let cv = self.get(*c, params, len);
                    let x = self.get(*a, params, len);
                    let y = self.get(*b, params, len);
                    for (((o, &c), &a), &b) in out[..len].iter_mut().zip(cv).zip(x).zip(y) {
                        *o = if c != 0.0 { a } else { b };
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::Offset {
                    arr,
                    comps,
                    guard,
                    quiet,
                    dst,
                } => {
                    let mut out = std::mem::take(&mut self.offs[*dst as usize]);
                    let out_ = &mut out[..len];
                    out_.fill(0);
                    let mut bad = false;
                    for c in comps {
                        if let Comp::Var(s, st, dim) = c {
                            let v = self.get(*s, params, len);
                            let dimf = *dim as f64;
                            for (o, &x) in out_.iter_mut().zip(v) {
                                bad |= !(x >= 0.0 && x < dimf);
                                // an index out of bounds wraps here and is reported below
                                *o = o.wrapping_add((x as usize).wrapping_mul(*st));
                            }
                        }
                    }
                    if *quiet && bad {
                        // element 0 instead; a later offset with the read's guard reports
                        for (e, o) in out_.iter_mut().enumerate() {
                            if !self.in_bounds(comps, params, e) {
                                *o = 0;
                            }
                        }
                        bad = false;
                    }
                    let mut range = (usize::MAX, 0);
                    match guard {
                        Some(g) => {
                            let gv = self.get(*g, params, len);
                            let mut bad_live = false;
                            for (e, (o, &gg)) in out_.iter_mut().zip(gv).enumerate() {
                                if gg == 0.0 {
                                    *o = 0;
                                } else {
                                    bad_live |= bad && !self.in_bounds(comps, params, e);
                                    range = (range.0.min(*o), range.1.max(*o));
                                }
                            }
                            bad = bad_live;
                        }
                        None if !bad => {
                            for &o in out_.iter() {
                                range = (range.0.min(o), range.1.max(o));
                            }
                        }
                        None => {}
                    }
                    self.range[*dst as usize] = range;
                    self.offs[*dst as usize] = out;
                    if bad {
                        let gv = guard.map(|g| self.get(g, params, len));
                        let e = (0..len)
                            .find(|&e| {
                                gv.is_none_or(|g| g[e] != 0.0) && !self.in_bounds(comps, params, e)
                            })
                            .expect("a bad element");
                        let index = comps
                            .iter()
                            .map(|c| match c {
                                Comp::Var(s, _, _) => self.get(*s, params, len)[e],
                                Comp::Const(v) => *v,
                            })
                            .collect();
                        return Err(Error::OutOfBounds {
                            index,
                            shape: k.array_shapes[*arr].clone(),
                            context: "indexing (`at`, or a `backpermute`)",
                        });
                    }
                }
                KOp::Gather {
                    arr,
                    off,
                    c,
                    guard,
                    dst,
                } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let data = &arrays[*arr][*c..];
                    match (off, guard) {
                        (None, None) => out[..len].fill(data[0]),
                        (Some(o), None) => {
                            let (lo, hi) = self.range[*o as usize];
                            if lo == hi {
                                // every element of the block reads one element: a broadcast
                                out[..len].fill(data[lo]);
                            } else {
                                let ov = &self.offs[*o as usize][..len];
                                for (d, &o) in out[..len].iter_mut().zip(ov) {
                                    *d = data[o];
                                }
                            }
                        }
                        (o, Some(g)) => {
                            let gv = self.get(*g, params, len);
                            let ov = o.map(|o| &self.offs[o as usize][..len]);
                            for e in 0..len {
                                out[e] = if gv[e] != 0.0 {
                                    data[ov.map_or(0, |o| o[e])]
                                } else {
                                    0.0
                                };
                            }
                        }
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::F32(op) => self.run32(op, len, params),
                KOp::Cast { a, dst, to32 } => {
                    let mut out = std::mem::take(&mut self.bufs[*dst as usize]);
                    let x = self.get(*a, params, len);
                    if *to32 {
                        for (o, &a) in out[..len].iter_mut().zip(x) {
                            *o = r32(a);
                        }
                    } else {
                        out[..len].copy_from_slice(x);
                    }
                    self.bufs[*dst as usize] = out;
                }
                KOp::Scatter {
                    target,
                    off,
                    c,
                    guard,
                    val,
                } => {
                    let mut wins = std::mem::take(&mut self.windows);
                    let w = &mut wins[*target];
                    let cap = k.target_lens[*target];
                    let v = self.get(*val, params, len);
                    let ov = off.map(|o| &self.offs[o as usize][..len]);
                    let range = off.map_or((0, 0), |o| self.range[o as usize]);
                    if guard.is_none() && !k.target_f32[*target] && range.0 == range.1 {
                        // One element receives the whole block: sum first (a fixed order),
                        // then add once.
                        let s = sum_lanes(v);
                        if s != 0.0 {
                            let i = range.0 + *c;
                            w.ensure(i, i + 1, cap);
                            w.data[i - w.lo] += s;
                        }
                    } else if guard.is_none() && !k.target_f32[*target] {
                        let ov = ov.expect("a varying offset");
                        w.ensure(range.0 + *c, range.1 + *c + 1, cap);
                        let win = &mut w.data[range.0 + *c - w.lo..];
                        for (&o, &x) in ov.iter().zip(v) {
                            win[o - range.0] += x;
                        }
                    } else {
                        let gv = guard.map(|g| self.get(g, params, len));
                        let live = |e: usize| gv.is_none_or(|g| g[e] != 0.0) && v[e] != 0.0;
                        let at = |e: usize| ov.map_or(0, |o| o[e]) + *c;
                        let mut lo = usize::MAX;
                        let mut hi = 0;
                        for e in 0..len {
                            if live(e) {
                                let i = at(e);
                                lo = lo.min(i);
                                hi = hi.max(i + 1);
                            }
                        }
                        if lo < hi {
                            w.ensure(lo, hi, cap);
                            let base = w.lo;
                            let f32 = k.target_f32[*target];
                            for e in 0..len {
                                if live(e) {
                                    let t = &mut w.data[at(e) - base];
                                    *t = add_t(f32, *t, v[e]);
                                }
                            }
                        }
                    }
                    self.windows = wins;
                }
            }
        }
        Ok(())
    }

    /// An arithmetic node of an `f32` value: operands rounded to `f32` (a no-op for `f32`
    /// values; weak constants and indices round here), the value computed in `f32`, the
    /// partials in `f64` at the `f32` point and rounded.
    fn run32(&mut self, op: &KOp, len: usize, params: &[&[f64]]) {
        let dst = op.dst() as usize;
        let mut out = std::mem::take(&mut self.bufs[dst]);
        let f = |x: f64| x as f32;
        match op {
            KOp::Un { op, a, d, .. } => {
                let mut dv = d.map(|ds| std::mem::take(&mut self.bufs[ds as usize]));
                let x = self.get(*a, params, len);
                for (e, (o, &a)) in out[..len].iter_mut().zip(x).enumerate() {
                    *o = f64::from(un32(*op, f(a)));
                    if let Some(dv) = dv.as_mut() {
                        dv[e] = r32(eval_d1(*op, r32(a)));
                    }
                }
                if let (Some(ds), Some(dv)) = (d, dv) {
                    self.bufs[*ds as usize] = dv;
                }
            }
            KOp::D1 { op, a, second, .. } => {
                let x = self.get(*a, params, len);
                for (o, &a) in out[..len].iter_mut().zip(x) {
                    let a = r32(a);
                    *o = r32(if *second {
                        eval_dd1(*op, a)
                    } else {
                        eval_d1(*op, a)
                    });
                }
            }
            KOp::Bin { op, a, b, d, .. } => {
                let mut dv = d.map(|(sx, sy)| {
                    (
                        std::mem::take(&mut self.bufs[sx as usize]),
                        std::mem::take(&mut self.bufs[sy as usize]),
                    )
                });
                let x = self.get(*a, params, len);
                let y = self.get(*b, params, len);
                for e in 0..len {
                    out[e] = f64::from(bin32(*op, f(x[e]), f(y[e])));
                    if let Some((dx, dy)) = dv.as_mut() {
                        let r = rules::binary(*op, r32(x[e]), r32(y[e]));
                        dx[e] = r32(r.dx);
                        dy[e] = r32(r.dy);
                    }
                }
                if let (Some((sx, sy)), Some((dx, dy))) = (d, dv) {
                    self.bufs[*sx as usize] = dx;
                    self.bufs[*sy as usize] = dy;
                }
            }
            KOp::D2 {
                op,
                w,
                a,
                b,
                second,
                ..
            } => {
                let x = self.get(*a, params, len);
                let y = self.get(*b, params, len);
                for e in 0..len {
                    let (p, q) = (r32(x[e]), r32(y[e]));
                    out[e] = r32(if *second {
                        eval_dd2(*op, *w, p, q)
                    } else {
                        eval_d2(*op, *w, p, q)
                    });
                }
            }
            KOp::AdjMul { g, d, .. } => {
                // the product of two f32 values is exact in f64: rounding it is f32's product
                let x = self.get(*g, params, len);
                let y = self.get(*d, params, len);
                for ((o, &a), &b) in out[..len].iter_mut().zip(x).zip(y) {
                    *o = r32(adj_mul(r32(a), r32(b)));
                }
            }
            KOp::Disc { op, a, b, .. } => {
                let x = self.get(*a, params, len);
                let y = self.get(*b, params, len);
                for ((o, &a), &b) in out[..len].iter_mut().zip(x).zip(y) {
                    *o = f64::from(op.eval(f(a), f(b)));
                }
            }
            KOp::Select { c, a, b, .. } => {
                let cv = self.get(*c, params, len);
                let x = self.get(*a, params, len);
                let y = self.get(*b, params, len);
                for (((o, &c), &a), &b) in out[..len].iter_mut().zip(cv).zip(x).zip(y) {
                    *o = r32(if c != 0.0 { a } else { b });
                }
            }
            _ => unreachable!("only arithmetic nodes have f32 versions"),
        }
        self.bufs[dst] = out;
    }

    fn in_bounds(&self, comps: &[Comp], params: &[&[f64]], e: usize) -> bool {
        comps.iter().all(|c| match c {
            Comp::Var(s, _, dim) => {
                let x = match s {
                    Src::S(i) => self.bufs[*i as usize][e],
                    Src::P(p) => params[*p as usize][e],
                };
                x >= 0.0 && x < *dim as f64
            }
            Comp::Const(..) => true,
        })
    }
}

/// Fixed chunks of `0..total`: boundaries depend only on `total` and `block`.
pub(crate) fn chunks(total: usize, block: usize) -> Vec<(usize, usize)> {
    chunks_n(total, block, 64)
}

/// Fixed chunks, at most about `max_chunks` of them.
pub(crate) fn chunks_n(total: usize, block: usize, max_chunks: usize) -> Vec<(usize, usize)> {
    let target = total.div_ceil(max_chunks).max(2048);
    let len = target.div_ceil(block).max(1) * block;
    (0..total)
        .step_by(len.max(1))
        .map(|lo| (lo, (lo + len).min(total)))
        .collect()
}

/// Data of a kernel's parameters and arrays for one run.
pub(crate) struct Inputs<'a> {
    /// whole-space data of each kernel parameter (`Kernel::params` order)
    pub params: Vec<&'a [f64]>,
    /// each read array's data (`Kernel::arrays` order)
    pub arrays: Vec<&'a [f64]>,
}

/// Combine per-chunk windows into the targets, in chunk order.
///
/// `parts[w]` says which target window `w` of a chunk belongs to ([`Kernel::windows`]). Each
/// target element receives its windows' terms in chunk order (within a chunk, in window
/// order); large targets are split into blocks added in parallel (the order per element is
/// the same).
pub(crate) fn combine_windows(
    per_chunk: &[Vec<Window>],
    targets: &mut [&mut [f64]],
    f32: &[bool],
    parts: &[WindowPart],
) {
    const BLOCK: usize = 1 << 14;
    for (ti, (t, &f)) in targets.iter_mut().zip(f32).enumerate() {
        let mine: Vec<usize> = (0..parts.len())
            .filter(|&w| parts[w].target == ti)
            .collect();
        let work: usize = per_chunk
            .iter()
            .flat_map(|ws| mine.iter().map(move |&w| ws[w].data.len()))
            .sum();
        for_chunks(t, BLOCK, 2 * work, |b, tb| {
            for ws in per_chunk {
                for &w in &mine {
                    ws[w].add_into(tb, b * BLOCK, f);
                }
            }
        });
    }
}

/// Evaluate over the whole space, writing root groups: `groups[j]` lists root indices written
/// interleaved into `outs[j]` (length `total · groups[j].len()`). Returns per-chunk windows.
pub(crate) fn run_store(
    k: &Kernel,
    inp: &Inputs,
    groups: &[Vec<usize>],
    outs: &mut [Vec<f64>],
) -> Result<Vec<Vec<Window>>> {
    let ch = k.chunks();
    // Compiled kernels store straight into the outputs when no root feeds two outputs.
    let mut seen = vec![false; k.roots.len()];
    let direct = groups
        .iter()
        .flatten()
        .all(|&r| !std::mem::replace(&mut seen[r], true));
    // Split every output into per-chunk pieces.
    let mut pieces: Vec<Vec<&mut [f64]>> = (0..ch.len()).map(|_| Vec::new()).collect();
    for (g, out) in groups.iter().zip(outs.iter_mut()) {
        let w = g.len();
        let mut rest: &mut [f64] = &mut out[..];
        for (ci, &(lo, hi)) in ch.iter().enumerate() {
            let (a, b) = rest.split_at_mut((hi - lo) * w);
            pieces[ci].push(a);
            rest = b;
        }
    }
    let chunk = |(&(lo, hi), mut outs): (&(usize, usize), Vec<&mut [f64]>)| {
        over_blocks(k, inp, lo, hi, |ev, s, len, pbuf| {
            if ev.compiled() && direct {
                // compiled code stores the roots straight into the outputs
                let mut blocks: Vec<&mut [f64]> = groups
                    .iter()
                    .zip(outs.iter_mut())
                    .map(|(g, out)| &mut out[(s - lo) * g.len()..(s - lo + len) * g.len()])
                    .collect();
                return ev.run_into(s, len, pbuf, &inp.arrays, groups, &mut blocks);
            }
            ev.run(s, len, pbuf, &inp.arrays)?;
            for (g, out) in groups.iter().zip(outs.iter_mut()) {
                let w = g.len();
                let base = (s - lo) * w;
                for (j, &r) in g.iter().enumerate() {
                    let v = ev.get(k.roots[r], pbuf, len);
                    if w == 1 {
                        out[base..base + len].copy_from_slice(v);
                    } else {
                        for (e, &x) in v.iter().enumerate() {
                            out[base + e * w + j] = x;
                        }
                    }
                }
            }
            Ok(())
        })
    };
    let items: Vec<_> = ch.iter().zip(pieces).collect();
    over_chunks(k, items, chunk).into_iter().collect()
}

/// Evaluate chunk `[lo, hi)` of a kernel block by block with one evaluator: `f(ev, start, len,
/// params)` runs after each block's parameter slices are cut (it runs the evaluator and reads
/// the roots). Returns the chunk's scatter windows.
fn over_blocks<'k>(
    k: &'k Kernel,
    inp: &Inputs<'_>,
    lo: usize,
    hi: usize,
    mut f: impl FnMut(&mut Eval<'k>, usize, usize, &[&[f64]]) -> Result<()>,
) -> Result<Vec<Window>> {
    let mut ev = Eval::for_elements(k, lo, hi);
    let mut pbuf: Vec<&[f64]> = Vec::with_capacity(inp.params.len());
    let mut s = lo;
    while s < hi {
        let len = (hi - s).min(k.block);
        pbuf.clear();
        pbuf.extend(inp.params.iter().map(|p| &p[s..s + len]));
        f(&mut ev, s, len, &pbuf)?;
        s += len;
    }
    Ok(std::mem::take(&mut ev.windows))
}

/// Work below this many elements runs on the calling thread: handing it to the pool (waking a
/// worker, the caller sleeping on the result) costs more than it saves.
pub(crate) const PAR_MIN: usize = 1 << 15;

/// A kernel whose elements × operations are below this runs its chunks on the calling thread.
/// Measured (GMM gradient at 2 threads on the 2-core machine, against 1 thread): with every
/// kernel of two or more chunks split across the pool, 1k d2 K5 took 191 µs against 114 µs
/// and 1k d10 K5 464 against 330 µs (each of a few dozen kernels of 1000–5000 elements paid
/// for waking a worker); with this limit, 113 and 302 µs, and 10k d10 K5 went from 1.0× to
/// 1.6× its 1-thread time. 2¹⁹ and 2²⁰ kept small inputs as fast but split fewer of the
/// 10k ones.
const PAR_MIN_WORK: usize = 1 << 18;

/// `f(i, chunk)` over the `per`-element chunks of `out`: across the pool when `work` (elements
/// read and written) is at least [`PAR_MIN`], else on this thread. The chunks are the same
/// either way, so results never depend on which. Measured: the GMM gradient's row folds, sums
/// and scans over `[1000, 25]` arrays had been split across the pool one 16-row chunk each.
pub(crate) fn for_chunks<T: Send>(
    out: &mut [T],
    per: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let per = per.max(1);
    if work < PAR_MIN {
        out.chunks_mut(per).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        out.par_chunks_mut(per)
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    }
}

/// What one library call (`exp`, `ln`, `sin`, `powf`, …) counts for in a kernel's
/// [`work`](Kernel::work), against 1 for an operation the compiled loop does inline. Measured
/// on GMM 10k d2 K5's gradient: the materialised `exp(main − max)` took 9.8 ns per element
/// and the data term's `ln` per point ~9 ns, against ~0.3–0.4 ns per inline operation. Counted
/// as one operation, that `ln` kernel (10⁴ points) ran on one thread; with this weight it runs
/// on the pool: the 2-thread gradient's median went from 780 to 700–710 µs (1-thread 1.18 ms),
/// 1k d2 K25's from 447 to 368 µs, and no input got slower (1k d2 K5, d10 K5; A/B binaries).
const CALL_COST: usize = 32;

/// What one operation counts for in a kernel's [`work`](Kernel::work): [`CALL_COST`] for a
/// library call, 1 for an inline operation (the JIT's `neg`, `sqrt`, `abs`, `recip`, binary
/// arithmetic, reads, selects).
fn op_cost(op: &KOp) -> usize {
    let call = match op {
        KOp::Un { op, .. } | KOp::D1 { op, .. } => {
            !matches!(op, Op1::Neg | Op1::Sqrt | Op1::Abs | Op1::Recip)
        }
        KOp::Bin { op, .. } | KOp::D2 { op, .. } => {
            matches!(op, Op2::Powf | Op2::Atan2 | Op2::Hypot | Op2::Rem)
        }
        KOp::F32(inner) => return op_cost(inner),
        _ => false,
    };
    if call {
        CALL_COST
    } else {
        1
    }
}

/// What writing one element of a root (an array the kernel materialises) counts for in its
/// [`work`](Kernel::work), on top of the operations that compute it: the store and, for a
/// fresh array, its first touch of each page. Measured on GMM 10k d2 K5's gradient, whose
/// materialised adjoint of `exp` (5·10⁴ elements, four operations and one root: work 2.5·10⁵,
/// just under [`PAR_MIN_WORK`]) ran on one thread: with this weight it runs on the pool, and
/// the 2-thread gradient went from 629–642 to 570–579 µs (speed-up 1.63–1.72 → 1.82–1.87; A/B
/// binaries). It is the only kernel of the ADBench GMM grids (1k and 10k) whose side of the
/// threshold this changes. Counting gathers too (2 or 4 each) also pooled a 48-operation
/// kernel of 5·10³ elements in 1k d2 K5, whose 2-thread time went from 109 to 113 µs.
const ROOT_COST: usize = 2;

impl Kernel {
    /// Elements × the cost of one element (its operations, [`op_cost`], and the roots it
    /// writes, [`ROOT_COST`]): an estimate of the kernel's time in units of one inline
    /// operation.
    fn work(&self) -> usize {
        work_of(self.space_total(), &self.ops, self.roots.len())
    }
}

/// [`Kernel::work`] of `elements` elements, each running `ops` and writing `roots` roots.
fn work_of(elements: usize, ops: &[KOp], roots: usize) -> usize {
    let per: usize = ops.iter().map(op_cost).sum::<usize>() + ROOT_COST * roots;
    elements.saturating_mul(per + 1)
}

/// `f` over a kernel's chunks, results in chunk order: across the pool, or on this thread when
/// there is one chunk or the kernel's [`work`](Kernel::work) (elements × operations) is below
/// [`PAR_MIN_WORK`] (a small kernel, where a pool round trip costs more than the work). The
/// chunks are the same either way, so results never depend on which.
fn over_chunks<I: Send, R: Send>(
    k: &Kernel,
    items: Vec<I>,
    f: impl Fn(I) -> R + Sync + Send,
) -> Vec<R> {
    if items.len() == 1 || k.work() < PAR_MIN_WORK {
        items.into_iter().map(f).collect()
    } else {
        items.into_par_iter().map(f).collect()
    }
}

/// Sum root 0 over rows of length `inner` (the innermost axis of the space). Returns the row
/// sums and per-chunk windows.
pub(crate) fn run_sum(
    k: &Kernel,
    inp: &Inputs,
    inner: usize,
) -> Result<(Vec<f64>, Vec<Vec<Window>>)> {
    let total: usize = k.space.iter().product();
    let rows = total.checked_div(inner).unwrap_or(total);
    if inner == 0 {
        return Ok((vec![0.0; rows_of(&k.space)], vec![]));
    }
    let ch = k.chunks();
    let f32 = k.root_f32[0];
    let parts: Vec<Result<(usize, Vec<f64>, Vec<Window>)>> = over_chunks(k, ch, |(lo, hi)| {
        let r0 = lo / inner;
        let mut part = vec![0.0; (hi - 1) / inner - r0 + 1];
        let windows = over_blocks(k, inp, lo, hi, |ev, s, len, pbuf| {
            ev.run(s, len, pbuf, &inp.arrays)?;
            let v = ev.get(k.roots[0], pbuf, len);
            let mut e = 0;
            while e < len {
                let row = (s + e) / inner;
                let row_end = ((row + 1) * inner - s).min(len);
                let p = &mut part[row - r0];
                if f32 {
                    *p = add_t(true, *p, sum_lanes_as::<f32>(&v[e..row_end]));
                } else {
                    *p += sum_lanes(&v[e..row_end]);
                }
                e = row_end;
            }
            Ok(())
        })?;
        Ok((r0, part, windows))
    });
    let mut out = vec![0.0; rows];
    let mut wins = Vec::with_capacity(parts.len());
    for p in parts {
        let (r0, part, w) = p?;
        for (o, &v) in out[r0..r0 + part.len()].iter_mut().zip(&part) {
            *o = add_t(f32, *o, v);
        }
        wins.push(w);
    }
    Ok((out, wins))
}

fn rows_of(space: &[usize]) -> usize {
    space[..space.len().saturating_sub(1)].iter().product()
}

/// A sum with four interleaved accumulators (fixed order: depends only on the length).
#[inline]
pub(crate) fn sum_lanes(v: &[f64]) -> f64 {
    sum_lanes_as::<f64>(v)
}

/// [`sum_lanes`] computed in the element type `F` (`f32` arrays live widened in `f64` slots, and
/// their sums round to `f32` after every addition, as a plain `f32` loop in this order would).
#[inline]
pub(crate) fn sum_lanes_as<F>(v: &[f64]) -> f64
where
    F: num_traits::Float + Into<f64> + 'static,
    f64: num_traits::AsPrimitive<F>,
{
    use num_traits::AsPrimitive;
    let mut a = [F::zero(); 4];
    let mut it = v.chunks_exact(4);
    for c in &mut it {
        a[0] = a[0] + c[0].as_();
        a[1] = a[1] + c[1].as_();
        a[2] = a[2] + c[2].as_();
        a[3] = a[3] + c[3].as_();
    }
    let mut s = (a[0] + a[1]) + (a[2] + a[3]);
    for &x in it.remainder() {
        s = s + x.as_();
    }
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forms of a scatter at `Idx(0) op k` (`k` a constant slot, `k_left`: `k op Idx`),
    /// through one `Offset` of stride `st`, plus the constant `c`.
    fn form_of(op: Op2, k: f64, k_left: bool, st: usize, c: usize) -> Option<Vec<Affine>> {
        let (idx, konst) = (Src::S(0), Src::S(1));
        let (a, b) = if k_left { (konst, idx) } else { (idx, konst) };
        let ops = [
            KOp::Idx { axis: 0, dst: 0 },
            KOp::Bin {
                op,
                a,
                b,
                dst: 2,
                d: None,
            },
            KOp::Offset {
                arr: 0,
                comps: vec![Comp::Var(Src::S(2), st, 100)],
                guard: None,
                quiet: false,
                dst: 3,
            },
            KOp::Scatter {
                target: 0,
                off: Some(3),
                c,
                guard: None,
                val: Src::P(0),
            },
        ];
        scatter_forms(&ops, &[(1, k)], 1).remove(0)
    }

    /// A stencil's neighbour (`Idx ± integer`) is affine, its constant folded into `c` (the
    /// gradient's scatter into a large input is then windowed and compiled), also where the
    /// constant is negative (the neighbour before the first element, guarded off: it made the
    /// whole target not affine, and a full-grid stencil's gradient was interpreted); `k − Idx`
    /// and a fractional `k` are not.
    #[test]
    fn an_index_plus_an_integer_constant_is_an_affine_scatter_index() {
        let affine = |c, st| {
            Some(vec![Affine {
                c,
                terms: vec![(0, st)],
            }])
        };
        assert_eq!(form_of(Op2::Add, 1.0, false, 1, 0), affine(1, 1));
        assert_eq!(form_of(Op2::Add, 2.0, true, 3, 5), affine(11, 3));
        assert_eq!(form_of(Op2::Sub, 1.0, false, 2, 4), affine(2, 2));
        assert_eq!(form_of(Op2::Sub, 1.0, false, 1, 0), affine(-1, 1)); // −1 at i = 0
        assert_eq!(form_of(Op2::Sub, 3.0, true, 1, 0), None); // 3 − i
        assert_eq!(form_of(Op2::Add, 0.5, false, 1, 0), None);
        assert_eq!(form_of(Op2::Mul, 2.0, false, 1, 0), None);
    }

    /// A chunk's scatters into far-apart blocks of one target (the two halves of a packed
    /// dot product) get a window each; neighbours (a stencil's, overlapping or a little apart)
    /// share one.
    #[test]
    fn far_apart_scatter_ranges_get_windows_of_their_own() {
        // the dot product over one vector of 2·10⁵, first of 16 chunks: i and i + n
        let n: i64 = 100_000;
        assert_eq!(
            group_ranges(&[(n, n + 6250), (0, 6250)]),
            [vec![1], vec![0]]
        );
        // a stencil's i − 1, i, i + 1, and a block 300 past a 6250-wide group
        assert_eq!(
            group_ranges(&[(1, 6251), (0, 6250), (2, 6252), (6552, 6600)]),
            [vec![1, 0, 2, 3]]
        );
        // a group at least 256 wide: single elements 200 apart share one
        assert_eq!(
            group_ranges(&[(400, 401), (0, 1), (200, 201)]),
            [vec![1, 2, 0]]
        );
        assert_eq!(group_ranges(&[(0, 1), (300, 301)]), [vec![0], vec![1]]);
        assert!(group_ranges(&[]).is_empty());
    }

    #[test]
    fn library_calls_weigh_more_than_inline_operations() {
        let (x, y) = (Src::S(0), Src::P(0));
        let un = |op| KOp::Un {
            op,
            a: x,
            dst: 1,
            d: None,
        };
        let bin = |op| KOp::Bin {
            op,
            a: x,
            b: y,
            dst: 1,
            d: None,
        };
        for op in [Op1::Exp, Op1::Ln, Op1::Sin, Op1::Tanh, Op1::Lgamma] {
            assert_eq!(op_cost(&un(op)), CALL_COST, "{op:?}");
            assert_eq!(
                op_cost(&KOp::F32(Box::new(un(op)))),
                CALL_COST,
                "f32 {op:?}"
            );
        }
        for op in [Op1::Neg, Op1::Sqrt, Op1::Abs, Op1::Recip] {
            assert_eq!(op_cost(&un(op)), 1, "{op:?}");
        }
        for op in [Op2::Add, Op2::Mul, Op2::Div, Op2::Max] {
            assert_eq!(op_cost(&bin(op)), 1, "{op:?}");
        }
        for op in [Op2::Powf, Op2::Atan2, Op2::Hypot] {
            assert_eq!(op_cost(&bin(op)), CALL_COST, "{op:?}");
        }
        assert_eq!(op_cost(&KOp::Idx { axis: 0, dst: 1 }), 1);
    }

    /// The two kernels `ROOT_COST` was measured on: GMM 10k d2 K5's adjoint of `exp` (5·10⁴
    /// elements, four inline operations, one root) goes to the pool because of its root, while
    /// a 48-operation kernel of 1k d2 K5 (5·10³ elements, no root) stays on one thread.
    #[test]
    fn roots_count_in_a_kernels_work() {
        let add = KOp::Bin {
            op: Op2::Add,
            a: Src::S(0),
            b: Src::P(0),
            dst: 1,
            d: None,
        };
        let four = vec![add.clone(); 4];
        assert_eq!(work_of(50_000, &four, 1), 50_000 * (4 + ROOT_COST + 1));
        assert!(work_of(50_000, &four, 0) < PAR_MIN_WORK);
        assert!(work_of(50_000, &four, 1) >= PAR_MIN_WORK);
        assert!(work_of(5_000, &vec![add; 48], 0) < PAR_MIN_WORK);
    }
}
