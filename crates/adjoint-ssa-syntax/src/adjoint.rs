//! The adjoint of an SSA function (seed 002 §3): analyses and the plan both the code generator
//! and the interpreter execute.
//!
//! * **Activity.** A value is *varied* when it depends on an active input, *useful* when it
//!   influences the result or a store into an active slice; only values that are both
//!   (`active`) get an adjoint and reverse code (dead-adjoint elimination).
//! * **Reversed CFG.** Every primal block `B` has an adjoint block `B̄`. `B̄` runs `B`'s
//!   instructions' adjoints in reverse, then sends the adjoints of `B`'s parameters to the
//!   arguments of the edge it was entered by and continues at that predecessor's adjoint block.
//!   A block with several incoming edges records which edge was taken (a *tag*): in a local when
//!   the block is not in a cycle (it runs at most once), on the tag stack otherwise — except
//!   the header of a counted loop ([`Counted`]), whose counter the reverse sweep replays, and a
//!   block whose edges' adjoints all do the same ([`TagMode::Any`]).
//! * **To-be-recorded.** `B̄` reads primal values (operands of cheap rules, recorded partials of
//!   expensive ones, indices). A value defined in the same cycle (strongly connected component)
//!   as `B` may be redefined before `B̄` runs, so `B` pushes it and `B̄` pops it; anything else
//!   is still in its local. Cheap passive values (integer arithmetic, casts, lengths, loads
//!   from a slice nothing writes after the load — an immutable one, or a local array whose
//!   filling loop is done) are recomputed in `B̄` from their operands instead of being pushed,
//!   and so are float `+ - *` and negations when recomputing them and their operands needs no
//!   push (at most `MAX_RECOMPUTE` = 6 flops: Rosenbrock's `x[i + 1] − x[i]²` pushes nothing).
//!   A value invariant in a counted loop around `B` is recorded at the loop's exit instead,
//!   once per run of the loop (`invariant_exit`); induction variables of a counted loop are
//!   recomputed from its replayed counter ([`Counted::inductions`]).
//! * **Fused accumulation loops** ([`Fused`]): a top-level innermost counted loop that only accumulates
//!   into values whose adjoints at its exit are known on entering it runs each iteration's
//!   adjoint in the forward sweep, right after the iteration, and zero reversed iterations (the
//!   code generator does this; the interpreter runs the loop reversed, with the same result).
//! * **Partials.** Expensive primitives (`sin`, `exp`, `/`, `powf`, …) compute their rule in the
//!   forward sweep and record the partials; cheap ones (`+`, `-`, `*`, `neg`, `abs`, `min`,
//!   `max`) call the rule again in the reverse sweep from their operands.

use crate::ir::*;
use adjoint_core::rules::{Op1, Op2};

/// How an adjoint block learns which incoming edge its primal block was entered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagMode {
    /// At most one incoming edge.
    None,
    /// The block runs at most once: a local variable.
    Local,
    /// The block is in a cycle: the tag stack.
    Stack,
    /// The header of a counted loop (see [`Counted`]): the reverse sweep replays the counter.
    Counted,
    /// Several incoming edges whose adjoints do the same (`any_edge`: a branch whose arms
    /// have no reverse work and pass no adjoint, such as a passive `if` or a `debug_assert!`):
    /// nothing is recorded and the reverse sweep takes the first edge.
    Any,
}

/// A counted loop `k = start; while k < end { …; k += 1 }` whose only exit is the header's
/// `false` edge (no `break`, no `return` inside): the number of iterations is known, so the
/// forward sweep records neither the header's tag nor `k`; the reverse sweep counts `k` down
/// from `max(start, end)` to `start`.
#[derive(Clone, Debug)]
pub struct Counted {
    /// The counter (a parameter of the header).
    pub k: Val,
    /// Its initial value (the entry edge's argument).
    pub start: Val,
    /// The bound (defined outside the loop).
    pub end: Val,
    /// Index in `preds[header]` of the entry edge.
    pub entry: usize,
    /// Index in `preds[header]` of the back edge.
    pub latch: usize,
    /// The exit block (the header's `false` successor).
    pub exit: BlockId,
    /// Membership of each block in the loop.
    pub body: Vec<bool>,
    /// No cycle inside the loop but through its header: every block of the loop runs at most
    /// once per iteration, so the forward sweep can reserve its pushes on entry.
    pub innermost: bool,
    /// Other integer parameters of the header that step by a constant each iteration
    /// (`li += 1` beside the counter): `(parameter, its entry value, step)`. The reverse sweep
    /// recomputes them from the replayed counter, `entry + (k − start) · step`.
    pub inductions: Vec<(Val, Val, i128)>,
}

impl Counted {
    /// The entry value and step of `v` if it is one of the loop's induction variables.
    pub fn induction(&self, v: Val) -> Option<(Val, i128)> {
        self.inductions
            .iter()
            .find(|x| x.0 == v)
            .map(|&(_, e, s)| (e, s))
    }
}

impl Plan {
    /// `(header, entry value, step)` when `v` is an induction variable of a counted loop.
    pub fn induction(&self, v: Val) -> Option<(BlockId, Val, i128)> {
        let h = self.def_block[v]?;
        let (entry, step) = self.counted[h].as_ref()?.induction(v)?;
        Some((h, entry, step))
    }

    /// The innermost counted loop containing block `b`, if any.
    pub fn reserved_loop(&self, b: BlockId) -> Option<BlockId> {
        self.counted
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.innermost && c.body[b]))
    }
}

/// Analyses and recording decisions for one function.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Depends on an active input (its generated type is `T`, else `f64`).
    pub varied: Vec<bool>,
    /// Influences the result or an active output slice.
    pub useful: Vec<bool>,
    /// Slices whose elements are `T` and have adjoints.
    pub slice_active: Vec<bool>,
    /// Incoming edges per block `(predecessor, slot)`.
    pub preds: Vec<Vec<(BlockId, usize)>>,
    /// Strongly connected component of each block.
    pub scc: Vec<usize>,
    /// Block is in a cycle.
    pub cyclic: Vec<bool>,
    /// Tag handling per block.
    pub tag: Vec<TagMode>,
    /// Values each block pushes at its end (popped at the start of its adjoint block, in reverse).
    pub pushes: Vec<Vec<Val>>,
    /// Values each adjoint block recomputes (after the pops and replays, in this order).
    pub remat: Vec<Vec<Val>>,
    /// Counters each adjoint block binds from the replayed counter of a loop header
    /// `(value, header)` (after the pops).
    pub replay: Vec<Vec<(Val, BlockId)>>,
    /// Counted loops by header.
    pub counted: Vec<Option<Counted>>,
    /// Defining instruction of each value.
    pub def_inst: Vec<Option<(BlockId, usize)>>,
    /// Defining block of each value.
    pub def_block: Vec<Option<BlockId>>,
    /// The return block.
    pub ret_block: BlockId,
    /// `written_from[b][s]`: slice `s` may be written (a store, a fill, or any call) in `b` or
    /// a block reachable from it. When it cannot, a load from `s` in `b` reads in the reverse
    /// sweep what it read forward (the reverse sweep writes no primal slice), so it is
    /// recomputed rather than pushed.
    pub written_from: Vec<Vec<bool>>,
    /// `deferred[v] = Some(h)` for an active load `v = s[i]` in a block that runs on every
    /// iteration of the innermost counted loop headed by `h`, with `i` invariant in it and `s`
    /// not written in it (`xc[i]` in GMM's triangular product): its adjoint accumulates in
    /// `ā_v` over the reversed iterations and is added to `ds[i]` once, in the last of them,
    /// instead of a read-modify-write of `ds[i]` per iteration (a chain through memory).
    pub deferred: Vec<Option<BlockId>>,
    /// `ranged[b][k] = Some((h, r))` for a load or store `k` of block `b`, a block that runs
    /// on every iteration of the innermost counted loop headed by `h` (counter of type
    /// `usize`), whose index is `r`'s start plus the counter (see [`RangeBase`]). The forward
    /// sweep indexed that slice at every index of the range, so the reverse sweep checks the
    /// range once when it enters the reversed loop and then indexes without a check per
    /// iteration, which lets LLVM vectorise loops such as `d_m[i * n + j] += ā · v[j]`.
    pub ranged: Vec<Vec<Option<(BlockId, RangeBase)>>>,
    /// `fused[h]` for a counted loop whose adjoint runs inside its forward iterations (see
    /// [`Fused`]).
    pub fused: Vec<Option<Fused>>,
}

/// A counted loop that only accumulates (`s += f(i)`) and whose accumulators' adjoints at its
/// exit are known before it starts (the result is `s`, `s / m`, `w * s + …`): every iteration
/// sees the same adjoint of its accumulators, so the iterations' adjoints are independent of
/// each other and of the reverse sweep. The forward sweep runs each iteration's adjoint right
/// after the iteration (one pass over the data, as a hand-written gradient does; its blocks
/// push and pop nothing: their locals hold the iteration's values), and the reverse sweep runs
/// the loop for zero iterations (its header only passes the accumulators' adjoints to their
/// initial values).
///
/// Conditions: the loop is in no other cycle and holds none; its header has no active
/// instruction; its body writes no slice and calls nothing, and the slices it reads are not
/// written after it; each
/// active parameter `c` of the header is an accumulator: the back edge passes `c ± e` (or
/// `e + c`), which nothing else reads, and nothing else in the loop reads `c` actively; and
/// the adjoint of `c` at the exit is a sum over paths of `+ − ×` by values computed before the
/// loop, `/` by such a value and negation, in the blocks run unconditionally after the exit,
/// ending at the returned value ([`ExitAdj`]).
#[derive(Clone, Debug)]
pub struct Fused {
    /// Active accumulators: `(header parameter, back-edge argument)`.
    pub carried: Vec<(Val, Val)>,
    /// The adjoint of each accumulator at the exit, per accumulator.
    pub exit_adj: Vec<ExitAdj>,
    /// The header's `true` successor (the body's entry, entered only from the header).
    pub first: BlockId,
    /// The source of the back edge (ends in a jump to the header).
    pub latch: BlockId,
}

/// The adjoint of a value as `dret ·` a sum over paths of products of partials: each path
/// lists the uses `(block, instruction, operand slot)` from the value to the returned one
/// (phi copies along jumps contribute 1 and are left out).
#[derive(Clone, Debug, Default)]
pub struct ExitAdj {
    /// The paths.
    pub paths: Vec<Vec<(BlockId, usize, usize)>>,
    /// Values defined after the exit that the partials read: constants, lengths, casts and
    /// integer `+ − ×` of values defined before the loop, computed on entering it (in order).
    pub pre: Vec<Val>,
}

impl Plan {
    /// Has an adjoint.
    pub fn active(&self, f: &Func, v: Val) -> bool {
        self.varied[v] && self.useful[v] && f.values[v].ty == Ty::F64
    }

    /// Whether the instruction has reverse code.
    pub fn inst_active(&self, f: &Func, i: &Inst) -> bool {
        match i {
            Inst::Store { slice, .. } | Inst::Fill { slice, .. } => self.slice_active[*slice],
            Inst::Un { dst, .. }
            | Inst::Bin { dst, .. }
            | Inst::Load { dst, .. }
            | Inst::Rule { dst, .. } => self.active(f, *dst),
            Inst::Call { dsts, .. } => dsts.iter().any(|d| self.active(f, *d)),
            _ => false,
        }
    }
}

/// Primitives whose partials are cheap to recompute from the operands in the reverse sweep.
pub fn op1_cheap(op: Op1) -> bool {
    matches!(op, Op1::Neg | Op1::Abs)
}

/// Whether `unary(op, x).d` depends on `x` (tested against the table).
pub fn op1_dep(op: Op1) -> bool {
    !matches!(op, Op1::Neg)
}

/// Binary primitives whose partials are cheap to recompute.
pub fn op2_cheap(op: Op2) -> bool {
    matches!(op, Op2::Add | Op2::Sub | Op2::Mul | Op2::Min | Op2::Max)
}

/// Which operands `(x, y)` the partial with respect to operand `k` of a cheap binary primitive
/// depends on (tested against the table).
pub fn op2_deps(op: Op2, k: usize) -> [bool; 2] {
    match op {
        Op2::Add | Op2::Sub => [false, false],
        Op2::Mul => {
            if k == 0 {
                [false, true]
            } else {
                [true, false]
            }
        }
        _ => [true, true],
    }
}

/// The operands a cheap instruction's reverse code reads (for its active operands).
pub fn cheap_reads(f: &Func, p: &Plan, inst: &Inst) -> Vec<Val> {
    match inst {
        Inst::Un {
            op,
            a,
            partial: None,
            n,
            ..
        } => {
            let mut v = vec![];
            if op1_dep(*op) {
                v.push(*a);
                v.extend(*n);
            }
            v
        }
        Inst::Bin {
            op,
            a,
            b,
            partials: [None, None],
            ..
        } => {
            let mut need = [false, false];
            for (k, x) in [*a, *b].into_iter().enumerate() {
                if p.active(f, x) {
                    let d = op2_deps(*op, k);
                    need[0] |= d[0];
                    need[1] |= d[1];
                }
            }
            let mut v = vec![];
            if need[0] {
                v.push(*a);
            }
            if need[1] {
                v.push(*b);
            }
            v
        }
        _ => vec![],
    }
}

/// The primal values an active instruction's reverse code reads.
pub fn reads(f: &Func, p: &Plan, inst: &Inst) -> Vec<Val> {
    match inst {
        Inst::Un {
            partial: Some(d), ..
        } => vec![*d],
        Inst::Un { .. } => cheap_reads(f, p, inst),
        Inst::Bin { partials, .. } if partials.iter().any(|x| x.is_some()) => {
            partials.iter().flatten().copied().collect()
        }
        Inst::Bin { .. } => cheap_reads(f, p, inst),
        Inst::Load { idx, .. } | Inst::Store { idx, .. } => vec![*idx],
        Inst::Fill { .. } => vec![],
        Inst::Call { .. } => inst.uses(),
        Inst::Rule { partials, .. } => partials.iter().flatten().copied().collect(),
        _ => vec![],
    }
}

/// Analyse `f`, add recorded-partial values to its instructions, and decide what to record.
/// Fails (with a spanned error) for calls the generated code cannot express.
pub fn prepare(f: &mut Func) -> syn::Result<Plan> {
    if !f.blocks.iter().any(|b| matches!(b.term, Term::Return(_))) {
        return Err(syn::Error::new(
            f.name.span(),
            "this function never returns (every path loops forever or panics): there is no \
             value to differentiate; give it a path that returns",
        ));
    }
    let (mut varied, mut slice_active) = varied(f);
    let mut useful = useful(f, &varied, &slice_active);
    let _ = &mut slice_active;
    // check calls: an integer argument of open type is a literal (passive slices and structs
    // are lifted to `T` where they are passed)
    for blk in &f.blocks {
        for i in &blk.insts {
            if let Inst::Call { func, args, .. } = i {
                for a in args {
                    let Arg::Val(v) = a else { continue };
                    if f.values[*v].ty == Ty::Int(None) && f.int_const_expr(*v).is_none() {
                        return Err(syn::Error::new_spanned(
                            func,
                            "an integer passed here has no type this function fixes (in the \
                             function as written it takes the parameter's type, which the macro \
                             does not see): give it one (`let k: u64 = …;`, `3u64`)",
                        ));
                    }
                }
            }
        }
    }
    // recorded partials for expensive active primitives
    let active = |f: &Func, varied: &[bool], useful: &[bool], v: Val| {
        varied[v] && useful[v] && f.values[v].ty == Ty::F64
    };
    let mut new_vals = vec![];
    for b in 0..f.blocks.len() {
        for k in 0..f.blocks[b].insts.len() {
            let mut inst = f.blocks[b].insts[k].clone();
            match &mut inst {
                Inst::Un {
                    dst, op, partial, ..
                } if active(f, &varied, &useful, *dst) && !op1_cheap(*op) => {
                    if *op == Op1::Exp {
                        // exp' = exp: the result is the partial (one value to keep, not two)
                        *partial = Some(*dst);
                    } else {
                        let v = f.new_val(Ty::F64, Some("∂".into()));
                        new_vals.push(v);
                        *partial = Some(v);
                    }
                }
                Inst::Bin {
                    dst,
                    op,
                    a,
                    b: bb,
                    partials,
                } if active(f, &varied, &useful, *dst) && !op2_cheap(*op) => {
                    for (slot, x) in [*a, *bb].into_iter().enumerate() {
                        if active(f, &varied, &useful, x) {
                            let v = f.new_val(Ty::F64, Some("∂".into()));
                            new_vals.push(v);
                            partials[slot] = Some(v);
                        }
                    }
                }
                Inst::Rule {
                    dst,
                    args,
                    partials,
                    ..
                } if active(f, &varied, &useful, *dst) => {
                    for (slot, x) in args.iter().enumerate() {
                        if active(f, &varied, &useful, *x) {
                            let v = f.new_val(Ty::F64, Some("∂".into()));
                            new_vals.push(v);
                            partials[slot] = Some(v);
                        }
                    }
                }
                _ => {}
            }
            f.blocks[b].insts[k] = inst;
        }
    }
    varied.resize(f.values.len(), false);
    useful.resize(f.values.len(), false);
    for v in new_vals {
        varied[v] = true; // computed in `T`; no adjoint of its own (not useful)
    }

    let preds = f.preds();
    let (scc, cyclic) = sccs(f);
    let def_block = f.def_blocks();
    let mut def_inst = vec![None; f.values.len()];
    for (b, blk) in f.blocks.iter().enumerate() {
        for (k, i) in blk.insts.iter().enumerate() {
            if let Some(d) = i.dst() {
                def_inst[d] = Some((b, k));
            }
            for d in i.extra_defs() {
                def_inst[d] = Some((b, k));
            }
        }
    }
    let ret_block = f
        .blocks
        .iter()
        .position(|b| matches!(b.term, Term::Return(_)))
        .expect("a function has a return block");
    let counted: Vec<Option<Counted>> = (0..f.blocks.len())
        .map(|h| counted_loop(f, &preds, &cyclic, &def_inst, &def_block, h))
        .collect();
    let tag = (0..f.blocks.len())
        .map(|b| {
            if counted[b].is_some() {
                TagMode::Counted
            } else if preds[b].len() <= 1 {
                TagMode::None
            } else if cyclic[b] {
                TagMode::Stack
            } else {
                TagMode::Local
            }
        })
        .collect();
    let mut plan = Plan {
        varied,
        useful,
        slice_active,
        preds,
        scc,
        cyclic,
        tag,
        pushes: vec![vec![]; f.blocks.len()],
        remat: vec![vec![]; f.blocks.len()],
        replay: vec![vec![]; f.blocks.len()],
        counted,
        def_inst,
        def_block,
        ret_block,
        written_from: written_from(f),
        deferred: vec![],
        ranged: vec![],
        fused: vec![],
    };
    plan.ranged = ranged_accesses(f, &plan);
    let mut recs: Vec<Rec> = (0..f.blocks.len()).map(|_| Rec::default()).collect();
    for b in 0..f.blocks.len() {
        if !plan.cyclic[b] {
            continue;
        }
        let mut need = vec![];
        for i in &f.blocks[b].insts {
            if plan.inst_active(f, i) {
                need.extend(reads(f, &plan, i));
            }
        }
        // the exit edge of a counted loop starts its counter from `start` and `end`, and
        // checks the ranges of its ranged accesses from their bases
        for (h, c) in plan.counted.iter().enumerate() {
            let Some(c) = c else { continue };
            if c.exit == b {
                need.extend([c.start, c.end]);
                need.extend(plan.range_leaves(f, h));
            }
        }
        for v in need {
            record(f, &plan, b, v, &mut recs, 0);
        }
    }
    for (b, r) in recs.into_iter().enumerate() {
        plan.pushes[b] = r.pushes;
        plan.remat[b] = r.remat;
        plan.replay[b] = r.replay;
    }
    plan.deferred = deferred_loads(f, &plan);
    plan.fused = (0..f.blocks.len())
        .map(|h| fused_loop(f, &plan, h))
        .collect();
    for m in 0..f.blocks.len() {
        if any_edge(f, &plan, m) {
            plan.tag[m] = TagMode::Any;
        }
    }
    Ok(plan)
}

/// Whether the reverse sweep may leave `m` by any incoming edge, so the forward sweep need not
/// record which one it took: `m` passes no adjoint to its edges' arguments (its parameters are
/// inactive), and every edge leads back to one block `d` (its branch) either directly or
/// through a block with no reverse work (no active instruction, nothing popped, recomputed or
/// replayed, no counted loop's counter, no parameter with an adjoint) entered only from `d`.
/// Loops whose adjoint runs in the forward sweep ([`Fused`]) keep their tags.
fn any_edge(f: &Func, p: &Plan, m: BlockId) -> bool {
    if !matches!(p.tag[m], TagMode::Local | TagMode::Stack)
        || f.blocks[m].params.iter().any(|&v| p.active(f, v))
        || p.fused
            .iter()
            .enumerate()
            .any(|(h, fu)| fu.is_some() && p.scc[h] == p.scc[m])
    {
        return false;
    }
    let quiet = |b: BlockId| {
        p.counted[b].is_none()
            && !p.counted.iter().flatten().any(|c| c.exit == b)
            && f.blocks[b].params.iter().all(|&v| !p.active(f, v))
            && f.blocks[b].insts.iter().all(|i| !p.inst_active(f, i))
            && p.pushes[b].is_empty()
            && p.remat[b].is_empty()
            && p.replay[b].is_empty()
            && p.ranged[b].iter().all(Option::is_none)
    };
    // the block an edge's reverse reaches: the predecessor itself, or, through a quiet block
    // entered only from `d`, `d`
    let reaches = |pb: BlockId, d: BlockId| {
        pb == d || (pb != m && p.preds[pb].len() == 1 && p.preds[pb][0].0 == d && quiet(pb))
    };
    let (first, _) = p.preds[m][0];
    let mut candidates = vec![first];
    if p.preds[first].len() == 1 {
        candidates.push(p.preds[first][0].0);
    }
    candidates.into_iter().any(|d| {
        d != m && p.counted[d].is_none() && p.preds[m].iter().all(|&(pb, _)| reaches(pb, d))
    })
}

/// The most paths of an accumulator's exit adjoint (see [`ExitAdj`]).
const MAX_EXIT_PATHS: usize = 8;

/// The counted loop headed by `h` as a [`Fused`] loop, if it is one.
fn fused_loop(f: &Func, p: &Plan, h: BlockId) -> Option<Fused> {
    let c = p.counted[h].as_ref()?;
    let n = f.blocks.len();
    // innermost only: with an inner loop in the body (logistic regression's dot product,
    // matvec's rows), each iteration's adjoint reverses the inner loop right after running it,
    // which measured slower than the two sweeps (logistic 1.37 → 1.44× its primal, matvec
    // 1.61 → 1.7)
    if !f.returns_f64 || f.ret_agg.is_some() || !c.innermost {
        return None;
    }
    // in no other cycle: its strongly connected component is the loop itself
    let size = (0..n).filter(|&b| p.scc[b] == p.scc[h]).count();
    if size != c.body.iter().filter(|&&x| x).count() {
        return None;
    }
    if !p.pushes[h].is_empty() || f.blocks[h].insts.iter().any(|i| p.inst_active(f, i)) {
        return None;
    }
    let Term::Branch(_, t, _) = &f.blocks[h].term else {
        return None;
    };
    let first = t.block;
    if p.preds[first] != [(h, 0)] {
        return None;
    }
    let (latch, lslot) = p.preds[h][c.latch];
    let Term::Jump(back) = &f.blocks[latch].term else {
        return None;
    };
    debug_assert_eq!(lslot, 0);
    let body: Vec<BlockId> = (0..n).filter(|&b| c.body[b] && b != h).collect();
    for &b in &body {
        for i in &f.blocks[b].insts {
            match i {
                Inst::Store { .. } | Inst::Fill { .. } | Inst::Call { .. } => return None,
                Inst::Load { slice, .. }
                    if f.slices[*slice].mutable() && p.written_from[c.exit][*slice] =>
                {
                    return None
                }
                _ => {}
            }
        }
    }
    // uses of each value inside the body (instructions and edge arguments)
    let uses_in_body = |v: Val| -> usize {
        body.iter()
            .chain(std::iter::once(&h))
            .map(|&b| {
                let blk = &f.blocks[b];
                let mut k = blk.insts.iter().filter(|i| i.uses().contains(&v)).count();
                for tg in blk.term.targets() {
                    k += tg.args.iter().filter(|&&a| a == v).count();
                }
                if matches!(blk.term, Term::Branch(cv, _, _) if cv == v) {
                    k += 1;
                }
                k
            })
            .sum()
    };
    // blocks run unconditionally after the exit (jumps into blocks in no cycle)
    let mut chain = vec![c.exit];
    let mut x = c.exit;
    while let Term::Jump(tg) = &f.blocks[x].term {
        if p.cyclic[tg.block] || chain.contains(&tg.block) {
            break;
        }
        chain.push(tg.block);
        x = tg.block;
    }
    let mut carried = vec![];
    let mut exit_adj = vec![];
    for (pi, &cv) in f.blocks[h].params.iter().enumerate() {
        if !p.active(f, cv) {
            continue;
        }
        let nv = back.args[pi];
        if nv == cv || !p.active(f, nv) || back.args.iter().filter(|&&a| a == nv).count() != 1 {
            return None;
        }
        let (db, dk) = p.def_inst[nv]?;
        if !c.body[db] {
            return None;
        }
        match &f.blocks[db].insts[dk] {
            Inst::Bin {
                op: Op2::Add, a, b, ..
            } if (*a == cv) != (*b == cv) => {}
            Inst::Bin {
                op: Op2::Sub, a, b, ..
            } if *a == cv && *b != cv => {}
            _ => return None,
        }
        // `c` is read once (by `c ± e`), `c ± e` once (by the back edge)
        if uses_in_body(cv) != 1 || uses_in_body(nv) != 1 {
            return None;
        }
        let mut adj = ExitAdj::default();
        exit_paths(f, p, c, &chain, cv, &mut vec![], &mut adj, 0)?;
        carried.push((cv, nv));
        exit_adj.push(adj);
    }
    if carried.is_empty() {
        return None;
    }
    // the body's adjoint is emitted as structured code: its reversed CFG must be reducible
    let region = fused_region(p, h, first, latch);
    if !crate::structure::reducible(&region) {
        return None;
    }
    Some(Fused {
        carried,
        exit_adj,
        first,
        latch,
    })
}

/// The reversed CFG of fused loop `h`'s body (without the header): from the latch to `first`
/// (whose only predecessor is the header).
pub fn fused_region(p: &Plan, h: BlockId, first: BlockId, latch: BlockId) -> crate::structure::Cfg {
    let c = p.counted[h].as_ref().expect("a counted loop");
    crate::structure::Cfg {
        entry: latch,
        succ: (0..p.preds.len())
            .map(|b| {
                if !c.body[b] || b == h || b == first {
                    vec![]
                } else {
                    p.preds[b].iter().map(|&(q, _)| q).collect()
                }
            })
            .collect(),
    }
}

/// Whether `w` can be known on entering loop `c`: it is defined before the loop (not in it,
/// not after its exit), or after the exit by a constant, a length, a cast or integer `+ − ×`
/// of such values (added to `pre`, operands first).
fn available(
    f: &Func,
    p: &Plan,
    c: &Counted,
    chain: &[BlockId],
    w: Val,
    pre: &mut Vec<Val>,
    depth: usize,
) -> bool {
    let Some(db) = p.def_block[w] else {
        return true;
    };
    if c.body[db] {
        return false;
    }
    if !chain.contains(&db) || pre.contains(&w) {
        return true;
    }
    let Some((ib, k)) = p.def_inst[w] else {
        return false; // a block parameter
    };
    let ok = depth < 8
        && match &f.blocks[ib].insts[k] {
            Inst::Const { .. } | Inst::Len { .. } => true,
            Inst::Cast { a, .. } => available(f, p, c, chain, *a, pre, depth + 1),
            Inst::Int {
                op: IntOp::Add | IntOp::Sub | IntOp::Mul,
                a,
                b,
                ..
            } => {
                available(f, p, c, chain, *a, pre, depth + 1)
                    && available(f, p, c, chain, *b, pre, depth + 1)
            }
            _ => false,
        };
    if ok && !pre.contains(&w) {
        pre.push(w);
    }
    ok
}

/// Add to `out` the paths from `v` (a value of loop `c`'s exit or one computed from it in
/// `chain`) to the returned value; `None` when its adjoint is not a [`ExitAdj`].
#[allow(clippy::too_many_arguments)]
fn exit_paths(
    f: &Func,
    p: &Plan,
    c: &Counted,
    chain: &[BlockId],
    v: Val,
    path: &mut Vec<(BlockId, usize, usize)>,
    out: &mut ExitAdj,
    depth: usize,
) -> Option<()> {
    if depth > 8 || out.paths.len() > MAX_EXIT_PATHS {
        return None;
    }
    for (b, blk) in f.blocks.iter().enumerate() {
        if c.body[b] {
            continue; // the accumulation itself (checked by the caller)
        }
        for (k, i) in blk.insts.iter().enumerate() {
            if !i.uses().contains(&v) {
                continue;
            }
            match i {
                Inst::Cmp { .. } | Inst::Pass { .. } | Inst::Cast { .. } => continue,
                _ if i.dst().is_some() && !p.inst_active(f, i) => continue,
                _ if !chain.contains(&b) => return None,
                Inst::Un {
                    op: Op1::Neg, dst, ..
                } => {
                    path.push((b, k, 0));
                    exit_paths(f, p, c, chain, *dst, path, out, depth + 1)?;
                    path.pop();
                }
                Inst::Bin {
                    op, a, b: y, dst, ..
                } => {
                    for (slot, (x, other)) in [(*a, *y), (*y, *a)].into_iter().enumerate() {
                        if x != v {
                            continue;
                        }
                        let ok = match op {
                            Op2::Add | Op2::Sub => true,
                            Op2::Mul => {
                                other != v && available(f, p, c, chain, other, &mut out.pre, 0)
                            }
                            Op2::Div => {
                                slot == 0
                                    && other != v
                                    && available(f, p, c, chain, other, &mut out.pre, 0)
                            }
                            _ => false,
                        };
                        if !ok {
                            return None;
                        }
                        path.push((b, k, slot));
                        exit_paths(f, p, c, chain, *dst, path, out, depth + 1)?;
                        path.pop();
                    }
                }
                _ => return None,
            }
        }
        match &blk.term {
            Term::Return(Some(r)) if *r == v => {
                if !chain.contains(&b) {
                    return None;
                }
                out.paths.push(path.clone());
            }
            Term::Return(_) | Term::Unreachable => {}
            t => {
                for tg in t.targets() {
                    for (k, &a) in tg.args.iter().enumerate() {
                        if a != v {
                            continue;
                        }
                        let pv = f.blocks[tg.block].params[k];
                        if !p.active(f, pv) {
                            continue;
                        }
                        if !chain.contains(&b) || !chain.contains(&tg.block) {
                            return None;
                        }
                        exit_paths(f, p, c, chain, pv, path, out, depth + 1)?;
                    }
                }
            }
        }
    }
    Some(())
}

/// The index of a ranged access (see [`Plan::ranged`]) in iteration `counter` of its loop:
/// `base + counter` (`ind` `None`), or `base + ind` with `ind` an induction variable stepping
/// by one beside the counter (`li += 1`), which is `base + entry − start + counter`
/// (`entry` the induction's value on entering the loop, `start` the counter's). A missing
/// `base` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RangeBase {
    /// Fixed over the loop ([`entry_computable`]).
    pub base: Option<Val>,
    /// An induction parameter of the loop header with step 1.
    pub ind: Option<Val>,
}

impl RangeBase {
    /// `0 + counter`: the counter itself.
    pub fn is_counter(&self) -> bool {
        self.base.is_none() && self.ind.is_none()
    }
}

impl Plan {
    /// The distinct range bases of loop `h`'s ranged accesses other than the counter itself
    /// (see [`Plan::ranged`]); the reverse sweep keeps each in a local `rb{h}_{position}`.
    pub fn range_bases(&self, h: BlockId) -> Vec<RangeBase> {
        let mut out = vec![];
        for (hh, r) in self.ranged.iter().flatten().flatten() {
            if *hh == h && !r.is_counter() && !out.contains(r) {
                out.push(*r);
            }
        }
        out
    }

    /// The values the reverse sweep reads to compute loop `h`'s range bases on entering it.
    fn range_leaves(&self, f: &Func, h: BlockId) -> Vec<Val> {
        let Some(c) = &self.counted[h] else {
            return vec![];
        };
        let mut out = vec![];
        for r in self.range_bases(h) {
            if let Some(b) = r.base {
                entry_computable(f, self, c, b, &mut out, 0);
            }
            if let Some(i) = r.ind {
                out.extend(c.induction(i).map(|(entry, _)| entry));
            }
        }
        out
    }
}

/// The blocks of counted loop `h` that run on every iteration: from the body's entry along
/// unconditional jumps.
fn every_iteration(f: &Func, h: BlockId, c: &Counted) -> Vec<BlockId> {
    let mut out = vec![];
    let Term::Branch(_, t, _) = &f.blocks[h].term else {
        return out;
    };
    let mut b = t.block;
    while b != h && c.body[b] && out.len() < f.blocks.len() {
        out.push(b);
        match &f.blocks[b].term {
            Term::Jump(t) => b = t.block,
            _ => break,
        }
    }
    out
}

/// Whether `v` is fixed over loop `c` and can be computed when the reverse sweep enters the
/// reversed loop: defined outside the loop (added to `leaves`, which the exit block's adjoint
/// makes available), a constant, or `+ - *` of such values (`i * n` written in the body).
pub fn entry_computable(
    f: &Func,
    p: &Plan,
    c: &Counted,
    v: Val,
    leaves: &mut Vec<Val>,
    depth: usize,
) -> bool {
    let inside = p.def_block[v].is_some_and(|db| c.body[db]);
    if !inside {
        leaves.push(v);
        return true;
    }
    let Some((ib, k)) = p.def_inst[v] else {
        return false; // a parameter of a block of the loop
    };
    match f.blocks[ib].insts[k] {
        Inst::Const { .. } => true,
        Inst::Int {
            op: IntOp::Add | IntOp::Sub | IntOp::Mul,
            a,
            b,
            ..
        } if depth < 8 => {
            entry_computable(f, p, c, a, leaves, depth + 1)
                && entry_computable(f, p, c, b, leaves, depth + 1)
        }
        _ => false,
    }
}

/// [`Plan::ranged`].
fn ranged_accesses(f: &Func, p: &Plan) -> Vec<Vec<Option<(BlockId, RangeBase)>>> {
    let mut out: Vec<Vec<_>> = f.blocks.iter().map(|b| vec![None; b.insts.len()]).collect();
    let usize_ty = Ty::Int(Some(IntTy::Usize));
    for (h, c) in p.counted.iter().enumerate() {
        let Some(c) = c.as_ref().filter(|c| c.innermost) else {
            continue;
        };
        if f.values[c.k].ty != usize_ty {
            continue;
        }
        // fixed over the loop and computable when the reverse sweep enters it
        let fixed = |v: Val| entry_computable(f, p, c, v, &mut vec![], 0);
        // the counter, or an induction stepping by one beside it
        let counter = |v: Val| -> Option<Option<Val>> {
            if v == c.k {
                Some(None)
            } else {
                let unit = c.induction(v).is_some_and(|(_, step)| step == 1);
                (unit && f.values[v].ty == usize_ty).then_some(Some(v))
            }
        };
        let base_of = |idx: Val| -> Option<RangeBase> {
            if let Some(ind) = counter(idx) {
                return Some(RangeBase { base: None, ind });
            }
            let (ib, k) = p.def_inst[idx]?;
            match f.blocks[ib].insts[k] {
                Inst::Int {
                    op: IntOp::Add,
                    a,
                    b,
                    ..
                } if f.values[idx].ty == usize_ty => {
                    let (base, ind) = match (counter(a), counter(b)) {
                        (Some(ind), _) => (b, ind),
                        (_, Some(ind)) => (a, ind),
                        _ => return None,
                    };
                    (f.values[base].ty == usize_ty && fixed(base)).then_some(RangeBase {
                        base: Some(base),
                        ind,
                    })
                }
                _ => None,
            }
        };
        for b in every_iteration(f, h, c) {
            for (k, i) in f.blocks[b].insts.iter().enumerate() {
                if let Inst::Load { idx, .. } | Inst::Store { idx, .. } = i {
                    out[b][k] = base_of(*idx).map(|r| (h, r));
                }
            }
        }
    }
    out
}

/// [`Plan::deferred`].
fn deferred_loads(f: &Func, p: &Plan) -> Vec<Option<BlockId>> {
    let mut out = vec![None; f.values.len()];
    for (h, c) in p.counted.iter().enumerate() {
        let Some(c) = c.as_ref().filter(|c| c.innermost) else {
            continue;
        };
        for b in every_iteration(f, h, c) {
            for i in &f.blocks[b].insts {
                if let Inst::Load {
                    dst, slice, idx, ..
                } = *i
                {
                    if p.active(f, dst) && !writes(f, c, slice) && invariant_in(f, p, c, idx, 0) {
                        out[dst] = Some(h);
                    }
                }
            }
        }
    }
    out
}

/// Recording decisions of one block.
#[derive(Default)]
struct Rec {
    pushes: Vec<Val>,
    remat: Vec<Val>,
    replay: Vec<(Val, BlockId)>,
}

/// The counted loop headed by `h`, if it is one.
fn counted_loop(
    f: &Func,
    preds: &[Vec<(BlockId, usize)>],
    cyclic: &[bool],
    def_inst: &[Option<(BlockId, usize)>],
    def_block: &[Option<BlockId>],
    h: BlockId,
) -> Option<Counted> {
    if !cyclic[h] || preds[h].len() != 2 {
        return None;
    }
    let Term::Branch(c, t, e) = &f.blocks[h].term else {
        return None;
    };
    let (cb, ck) = def_inst[*c]?;
    if cb != h {
        return None;
    }
    let Inst::Cmp {
        op: CmpOp::Lt,
        a: k,
        b: end,
        ..
    } = f.blocks[h].insts[ck]
    else {
        return None;
    };
    let kp = f.blocks[h].params.iter().position(|&x| x == k)?;
    if !matches!(f.values[k].ty, Ty::Int(_)) {
        return None;
    }
    // the natural loop of each incoming edge: blocks reaching it without passing `h`
    let n = f.blocks.len();
    let lp = |from: BlockId| -> Vec<bool> {
        let mut m = vec![false; n];
        m[h] = true;
        let mut work = vec![from];
        while let Some(x) = work.pop() {
            if m[x] {
                continue;
            }
            m[x] = true;
            work.extend(preds[x].iter().map(|&(q, _)| q));
        }
        m
    };
    let l0 = lp(preds[h][0].0);
    let l1 = lp(preds[h][1].0);
    let (entry, latch, body) = match (l0[0] && h != 0, l1[0] && h != 0) {
        (true, false) => (0, 1, l1),
        (false, true) => (1, 0, l0),
        _ => return None,
    };
    if h == 0 || !body[t.block] || body[e.block] {
        return None;
    }
    // single entry, single exit (the header's `false` edge)
    for x in (0..n).filter(|&x| body[x]) {
        if x != h && preds[x].iter().any(|&(q, _)| !body[q]) {
            return None;
        }
        for (slot, tg) in f.blocks[x].term.targets().iter().enumerate() {
            let exit = x == h && slot == 1;
            if !body[tg.block] && !exit {
                return None;
            }
        }
        if matches!(f.blocks[x].term, Term::Return(_) | Term::Unreachable) {
            return None;
        }
    }
    if def_block[end].is_some_and(|d| body[d]) {
        return None;
    }
    let (eb, es) = preds[h][entry];
    let start = f.blocks[eb].term.targets()[es].args[kp];
    let (lb, ls) = preds[h][latch];
    let k1 = f.blocks[lb].term.targets()[ls].args[kp];
    let (ib, ik) = def_inst[k1]?;
    let Inst::Int {
        op: IntOp::Add,
        a,
        b: one,
        ..
    } = f.blocks[ib].insts[ik]
    else {
        return None;
    };
    if a != k {
        return None;
    }
    let (ob, ok) = def_inst[one]?;
    match &f.blocks[ob].insts[ok] {
        Inst::Const { c, .. } if c.value == ConstVal::I(1) => {}
        _ => return None,
    }
    if start == k || def_block[start].is_some_and(|d| body[d]) {
        return None;
    }
    // innermost: the loop's blocks other than the header form a DAG (Kahn's algorithm)
    let mut indeg = vec![0usize; n];
    for x in (0..n).filter(|&x| body[x] && x != h) {
        for tg in f.blocks[x].term.targets() {
            if body[tg.block] && tg.block != h {
                indeg[tg.block] += 1;
            }
        }
    }
    let mut ready: Vec<BlockId> = (0..n)
        .filter(|&x| body[x] && x != h && indeg[x] == 0)
        .collect();
    let mut seen = 0;
    while let Some(x) = ready.pop() {
        seen += 1;
        for tg in f.blocks[x].term.targets() {
            if body[tg.block] && tg.block != h {
                indeg[tg.block] -= 1;
                if indeg[tg.block] == 0 {
                    ready.push(tg.block);
                }
            }
        }
    }
    let innermost = seen == body.iter().filter(|&&x| x).count() - 1;
    // induction variables: `p` enters with a value defined outside, the latch passes `p ± c`
    let mut inductions = vec![];
    for (pi, &pv) in f.blocks[h].params.iter().enumerate() {
        if pi == kp || !matches!(f.values[pv].ty, Ty::Int(_)) {
            continue;
        }
        let ea = f.blocks[eb].term.targets()[es].args[pi];
        let la = f.blocks[lb].term.targets()[ls].args[pi];
        if ea == pv || def_block[ea].is_some_and(|d| body[d]) {
            continue;
        }
        let Some((db, di)) = def_inst[la] else {
            continue;
        };
        let Inst::Int { op, a, b: c, .. } = f.blocks[db].insts[di] else {
            continue;
        };
        if a != pv || !matches!(op, IntOp::Add | IntOp::Sub) {
            continue;
        }
        let Some((cb, ci)) = def_inst[c] else {
            continue;
        };
        if let Inst::Const {
            c: Const {
                value: ConstVal::I(step),
                ..
            },
            ..
        } = &f.blocks[cb].insts[ci]
        {
            let step = if op == IntOp::Sub { -*step } else { *step };
            inductions.push((pv, ea, step));
        }
    }
    Some(Counted {
        k,
        start,
        end,
        entry,
        latch,
        exit: e.block,
        body,
        innermost,
        inductions,
    })
}

/// Decide how `v` reaches adjoint block `b`: nothing (its local is still valid), recomputed,
/// replayed from a counted loop's counter, or pushed. A value defined outside a counted loop
/// around `b` is constant while the loop runs: it is recorded once, at the loop's exit block
/// (whose adjoint runs just before the loop's reversed iterations), not once per iteration.
fn record(f: &Func, p: &Plan, b: BlockId, v: Val, recs: &mut [Rec], depth: usize) {
    let r = &recs[b];
    if r.pushes.contains(&v) || r.remat.contains(&v) || r.replay.iter().any(|x| x.0 == v) {
        return;
    }
    let Some(db) = p.def_block[v] else {
        return;
    };
    if p.scc[db] != p.scc[b] {
        return; // not redefined while b's cycle runs: the local is valid
    }
    if let Some(c) = &p.counted[db] {
        if c.k == v && c.body[b] {
            recs[b].replay.push((v, db));
            return;
        }
        if let (Some((entry, _)), true) = (c.induction(v), c.body[b]) {
            // recomputed from the replayed counter (after its operands, like a rematerialised
            // value)
            record(f, p, b, entry, recs, depth + 1);
            record(f, p, b, c.start, recs, depth + 1);
            recs[b].remat.push(v);
            return;
        }
    }
    if let Some(mut exit) = invariant_exit(f, p, b, v) {
        if p.cyclic[db] && p.scc[db] == p.scc[exit] && is_in_loop_of(p, db, exit) {
            // computed inside the loop: pushed as it is at the exit (never recomputed there: a
            // loop that ran no iteration left no valid operands), hoisted past any enclosing
            // loop in which it is invariant too
            while let Some(outer) = invariant_exit(f, p, exit, v) {
                exit = outer;
            }
            if !recs[exit].pushes.contains(&v) {
                recs[exit].pushes.push(v);
            }
        } else {
            record(f, p, exit, v, recs, depth);
        }
        return;
    }
    if let Some((ib, k)) = p.def_inst[v] {
        let inst = &f.blocks[ib].insts[k];
        let cheap = match inst {
            Inst::Const { .. } => return,
            Inst::Int { .. }
            | Inst::Cmp { .. }
            | Inst::Not { .. }
            | Inst::Cast { .. }
            | Inst::Len { .. }
            | Inst::Pass { .. } => true,
            Inst::Load { slice, .. } => !plan_written(f, p, ib, *slice),
            // float `+ - *` and negation: recomputed when their operands cost no push (a few
            // flops in the reverse sweep are cheaper than a store and a load per iteration)
            Inst::Bin {
                op: Op2::Add | Op2::Sub | Op2::Mul,
                ..
            }
            | Inst::Un { op: Op1::Neg, .. } => {
                recompute_cost(f, p, b, v, &recs[b], 0).is_some_and(|c| c <= MAX_RECOMPUTE)
            }
            _ => false,
        };
        if cheap && depth < 8 && inst.dst() == Some(v) {
            for u in inst.uses() {
                record(f, p, b, u, recs, depth + 1);
            }
            recs[b].remat.push(v);
            return;
        }
    }
    recs[b].pushes.push(v);
}

/// The most float operations the reverse sweep recomputes for one value instead of popping it.
const MAX_RECOMPUTE: usize = 6;

/// The float operations `b̄` would run to recompute `v` when no push is needed for it or its
/// operands (`None` when one is): constants, values whose locals are still valid, replayed
/// counters, induction variables, values recorded at a loop's exit, loads from settled slices
/// and integer arithmetic cost nothing; `+ - *` and negation cost one plus their operands'.
/// Mirrors [`record`]'s decisions without making any.
fn recompute_cost(f: &Func, p: &Plan, b: BlockId, v: Val, r: &Rec, depth: usize) -> Option<usize> {
    if depth > 8 {
        return None;
    }
    if r.pushes.contains(&v) || r.remat.contains(&v) || r.replay.iter().any(|x| x.0 == v) {
        return Some(0); // already restored for another reader
    }
    let Some(db) = p.def_block[v] else {
        return Some(0);
    };
    if p.scc[db] != p.scc[b] {
        return Some(0);
    }
    if let Some(c) = &p.counted[db] {
        if c.k == v && c.body[b] {
            return Some(0);
        }
        if let (Some((entry, _)), true) = (c.induction(v), c.body[b]) {
            let e = recompute_cost(f, p, b, entry, r, depth + 1)?;
            return Some(e + recompute_cost(f, p, b, c.start, r, depth + 1)?);
        }
    }
    if invariant_exit(f, p, b, v).is_some() {
        return Some(0); // once per run of the loop
    }
    let (ib, k) = p.def_inst[v]?;
    let inst = &f.blocks[ib].insts[k];
    if inst.dst() != Some(v) {
        return None;
    }
    let own = match inst {
        Inst::Const { .. } => return Some(0),
        Inst::Int { .. } | Inst::Cmp { .. } | Inst::Not { .. } | Inst::Cast { .. } => 0,
        Inst::Len { .. } | Inst::Pass { .. } => 0,
        Inst::Load { slice, .. } if !plan_written(f, p, ib, *slice) => 0,
        Inst::Bin {
            op: Op2::Add | Op2::Sub | Op2::Mul,
            ..
        }
        | Inst::Un { op: Op1::Neg, .. } => 1,
        _ => return None,
    };
    let mut cost = own;
    for u in inst.uses() {
        cost += recompute_cost(f, p, b, u, r, depth + 1)?;
    }
    Some(cost)
}

/// The exit block of the outermost counted loop around `b` in which `v` is invariant, when that
/// exit is entered only from the loop's header. `v` is invariant when it is defined outside the
/// loop, or loaded inside it from a slice the loop does not write at an invariant index (or
/// computed by integer arithmetic from invariant operands). A definition outside the loop
/// dominates its header (every path to `b` enters the loop there) and so the exit; a value
/// computed inside keeps the value of the last iteration. Either way the local holds, at the
/// exit, the value every iteration saw, and the exit's adjoint block, which runs right before
/// the loop's reversed iterations, can restore it for all of them (after a loop that ran no
/// iteration the restored value is never read).
fn invariant_exit(f: &Func, p: &Plan, b: BlockId, v: Val) -> Option<BlockId> {
    p.counted
        .iter()
        .flatten()
        .filter(|c| c.body[b] && p.preds[c.exit].len() == 1 && invariant_in(f, p, c, v, 0))
        .max_by_key(|c| c.body.iter().filter(|&&x| x).count())
        .map(|c| c.exit)
}

/// Whether `db` lies inside the counted loop whose exit block is `exit`.
fn is_in_loop_of(p: &Plan, db: BlockId, exit: BlockId) -> bool {
    p.counted
        .iter()
        .flatten()
        .any(|c| c.exit == exit && c.body[db])
}

/// Whether `v` has one value during all iterations of loop `c` (see [`invariant_exit`]).
fn invariant_in(f: &Func, p: &Plan, c: &Counted, v: Val, depth: usize) -> bool {
    let Some(db) = p.def_block[v] else {
        return true;
    };
    if !c.body[db] {
        return true;
    }
    if depth >= 8 {
        return false;
    }
    let Some((ib, k)) = p.def_inst[v] else {
        return false; // a block parameter of the loop
    };
    match &f.blocks[ib].insts[k] {
        Inst::Load { slice, idx, .. } => {
            !writes(f, c, *slice) && invariant_in(f, p, c, *idx, depth + 1)
        }
        Inst::Int { a, b, .. } => {
            invariant_in(f, p, c, *a, depth + 1) && invariant_in(f, p, c, *b, depth + 1)
        }
        Inst::Cast { a, .. } => invariant_in(f, p, c, *a, depth + 1),
        Inst::Const { .. } => true,
        _ => false,
    }
}

/// Whether slice `s` may change after a load from it in block `b` (see [`Plan::written_from`]).
fn plan_written(f: &Func, p: &Plan, b: BlockId, s: SliceId) -> bool {
    f.slices[s].mutable() && p.written_from[b][s]
}

/// [`Plan::written_from`]: the writes of each block, propagated backwards over the CFG.
fn written_from(f: &Func) -> Vec<Vec<bool>> {
    let ns = f.slices.len();
    let mut w: Vec<Vec<bool>> = f
        .blocks
        .iter()
        .map(|blk| {
            let mut m = vec![false; ns];
            for i in &blk.insts {
                match i {
                    Inst::Store { slice, .. } | Inst::Fill { slice, .. } => m[*slice] = true,
                    Inst::Call { .. } => m.fill(true),
                    _ => {}
                }
            }
            m
        })
        .collect();
    loop {
        let mut changed = false;
        for b in (0..f.blocks.len()).rev() {
            for t in f.blocks[b].term.targets() {
                let succ = w[t.block].clone();
                for (mine, theirs) in w[b].iter_mut().zip(succ) {
                    if theirs && !*mine {
                        *mine = true;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return w;
        }
    }
}

/// Whether loop `c` may write slice `s` (a store, a fill, or any call).
fn writes(f: &Func, c: &Counted, s: SliceId) -> bool {
    (0..f.blocks.len()).filter(|&b| c.body[b]).any(|b| {
        f.blocks[b].insts.iter().any(|i| match i {
            Inst::Store { slice, .. } | Inst::Fill { slice, .. } => *slice == s,
            Inst::Call { .. } => true,
            _ => false,
        })
    })
}

/// Forward activity: which values depend on active inputs; which slices hold such values.
fn varied(f: &Func) -> (Vec<bool>, Vec<bool>) {
    let mut v = vec![false; f.values.len()];
    let mut s: Vec<bool> = f.slices.iter().map(|s| s.declared_active).collect();
    for p in &f.params {
        if let Param::Scalar {
            val, active: true, ..
        } = p
        {
            v[*val] = true;
        }
    }
    loop {
        let mut changed = false;
        let mut set = |x: &mut bool| {
            if !*x {
                *x = true;
                changed = true;
            }
        };
        for blk in &f.blocks {
            for i in &blk.insts {
                match i {
                    Inst::Un { dst, a, .. } if v[*a] => set(&mut v[*dst]),
                    Inst::Bin { dst, a, b, .. } if v[*a] || v[*b] => set(&mut v[*dst]),
                    Inst::Load { dst, slice, .. } if s[*slice] => set(&mut v[*dst]),
                    Inst::Store { slice, val, .. } | Inst::Fill { slice, val } if v[*val] => {
                        set(&mut s[*slice])
                    }
                    Inst::Call { dsts, args, .. } => {
                        let any = args.iter().any(|a| match a {
                            Arg::Val(x) => v[*x],
                            Arg::Slice(sa) => s[sa.slice],
                            Arg::Elems { vals, .. } => vals.iter().any(|x| v[*x]),
                            Arg::Struct(k, _) => matches!(&f.sig[*k], SigItem::Agg(a) if a.active),
                        });
                        if any {
                            for d in dsts {
                                set(&mut v[*d]);
                            }
                        }
                    }
                    Inst::Rule { dst, args, .. } if args.iter().any(|a| v[*a]) => set(&mut v[*dst]),
                    _ => {}
                }
            }
            for t in blk.term.targets() {
                for (k, a) in t.args.iter().enumerate() {
                    if v[*a] {
                        let p = f.blocks[t.block].params[k];
                        set(&mut v[p]);
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    (v, s)
}

/// Backward activity: which values influence the result or an active output.
fn useful(f: &Func, varied: &[bool], slices: &[bool]) -> Vec<bool> {
    let mut u = vec![false; f.values.len()];
    loop {
        let mut changed = false;
        let mut set = |x: &mut bool| {
            if !*x {
                *x = true;
                changed = true;
            }
        };
        for blk in f.blocks.iter().rev() {
            if let Term::Return(Some(r)) = blk.term {
                set(&mut u[r]);
            }
            for t in blk.term.targets() {
                for (k, a) in t.args.iter().enumerate() {
                    if u[f.blocks[t.block].params[k]] {
                        set(&mut u[*a]);
                    }
                }
            }
            for i in blk.insts.iter().rev() {
                match i {
                    Inst::Store { slice, val, .. } | Inst::Fill { slice, val }
                        if slices[*slice] =>
                    {
                        set(&mut u[*val])
                    }
                    Inst::Un { dst, a, .. } if u[*dst] => set(&mut u[*a]),
                    Inst::Bin { dst, a, b, .. } if u[*dst] => {
                        set(&mut u[*a]);
                        set(&mut u[*b]);
                    }
                    Inst::Rule { dst, args, .. } if u[*dst] => {
                        for a in args {
                            set(&mut u[*a]);
                        }
                    }
                    Inst::Call { dsts, args, .. } if dsts.iter().any(|d| u[*d]) => {
                        for a in args {
                            match a {
                                Arg::Val(x) => set(&mut u[*x]),
                                Arg::Elems { vals, .. } => {
                                    vals.iter().for_each(|x| set(&mut u[*x]))
                                }
                                Arg::Slice(_) | Arg::Struct(..) => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        if !changed {
            break;
        }
    }
    let _ = varied;
    u
}

/// Tarjan's strongly connected components of the CFG; `cyclic[b]` when `b` lies on a cycle.
pub fn sccs(f: &Func) -> (Vec<usize>, Vec<bool>) {
    let n = f.blocks.len();
    let succ: Vec<Vec<BlockId>> = f
        .blocks
        .iter()
        .map(|b| b.term.targets().iter().map(|t| t.block).collect())
        .collect();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on = vec![false; n];
    let mut stack = vec![];
    let mut comp = vec![usize::MAX; n];
    let mut next = 0;
    let mut ncomp = 0;
    // iterative Tarjan
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut call: Vec<(BlockId, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on[root] = true;
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            if *i < succ[v].len() {
                let w = succ[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    call.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p] = low[p].min(low[v]);
                }
                if low[v] == index[v] {
                    loop {
                        let w = stack.pop().unwrap();
                        on[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    let mut size = vec![0; ncomp];
    for &c in &comp {
        size[c] += 1;
    }
    let cyclic = (0..n)
        .map(|b| size[comp[b]] > 1 || succ[b].contains(&b))
        .collect();
    (comp, cyclic)
}

/// The adjoint program as readable text (for `ADJOINT_SSA_DUMP`).
pub fn dump(f: &Func, p: &Plan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "=== SSA of {} ===", f.name);
    let _ = write!(s, "{f}");
    let act: Vec<String> = (0..f.values.len())
        .filter(|&v| p.active(f, v))
        .map(|v| f.vname(v))
        .collect();
    let _ = writeln!(
        s,
        "=== activity ===\nactive (have adjoints): {}",
        act.join(" ")
    );
    let sl: Vec<String> = (0..f.slices.len())
        .filter(|&x| p.slice_active[x])
        .map(|x| format!("s{x}:{}", f.slices[x].name))
        .collect();
    let _ = writeln!(s, "active slices: {}", sl.join(" "));
    let mut ranged = vec![];
    for (b, insts) in p.ranged.iter().enumerate() {
        for (k, r) in insts.iter().enumerate() {
            if let (
                Some((h, base)),
                Inst::Load { slice, idx, .. } | Inst::Store { slice, idx, .. },
            ) = (r, &f.blocks[b].insts[k])
            {
                let mut start = base.base.map_or("0".into(), |v| f.vname(v));
                if let Some(i) = base.ind {
                    start = format!("{start} + {} − start", f.vname(i));
                }
                ranged.push(format!(
                    "{}[{}] = [{start} + counter of #{h}]",
                    f.slices[*slice].name,
                    f.vname(*idx)
                ));
            }
        }
    }
    if !ranged.is_empty() {
        let _ = writeln!(
            s,
            "=== unchecked in both sweeps (range checked on entering the loop) ==="
        );
        let _ = writeln!(s, "{}", ranged.join(", "));
    }
    let _ = writeln!(s, "=== forward sweep records ===");
    for b in 0..f.blocks.len() {
        let pushes: Vec<String> = p.pushes[b].iter().map(|v| f.vname(*v)).collect();
        let _ = writeln!(
            s,
            "block #{b}{}: push [{}]{}",
            if p.cyclic[b] { " (in a cycle)" } else { "" },
            pushes.join(", "),
            match p.tag[b] {
                TagMode::None => String::new(),
                TagMode::Local => "; entry edge in a local".into(),
                TagMode::Stack => "; entry edge on the tag stack".into(),
                TagMode::Counted => "; counted loop header (counter replayed)".into(),
                TagMode::Any =>
                    "; any entry edge (none recorded: their adjoints do the same)".into(),
            }
        );
    }
    for (h, fz) in p.fused.iter().enumerate() {
        let Some(fz) = fz else { continue };
        let acc: Vec<String> = fz
            .carried
            .iter()
            .zip(&fz.exit_adj)
            .map(|((c, n), adj)| {
                let paths: Vec<String> = adj
                    .paths
                    .iter()
                    .map(|path| {
                        let mut t = "dret".to_string();
                        for &(b, k, slot) in path.iter().rev() {
                            let i = &f.blocks[b].insts[k];
                            let d = if matches!(i, Inst::Bin { .. }) {
                                ["x", "y"][slot]
                            } else {
                                "x"
                            };
                            t = format!("{t} · ∂{}/∂{d}", f.vname(i.dst().expect("a value")));
                        }
                        t
                    })
                    .collect();
                let e = if paths.is_empty() {
                    "0".to_string()
                } else {
                    paths.join(" + ")
                };
                format!("{} ← {} (adjoint {e})", f.vname(*c), f.vname(*n))
            })
            .collect();
        let _ = writeln!(
            s,
            "loop #{h} fused: its iterations' adjoints run in the forward sweep, after each \
             iteration (accumulators {}); the reverse sweep runs it for zero iterations",
            acc.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "=== adjoint (reverse sweep starts at #{}) ===",
        p.ret_block
    );
    for b in (0..f.blocks.len()).rev() {
        let _ = writeln!(s, "adjoint block #{b}:");
        for v in p.pushes[b].iter().rev() {
            let _ = writeln!(s, "  pop {}", f.vname(*v));
        }
        for (v, h) in &p.replay[b] {
            let _ = writeln!(s, "  {} = counter of #{h}", f.vname(*v));
        }
        for v in &p.remat[b] {
            if let Some((h, entry, step)) = p.induction(*v) {
                let start = p.counted[h].as_ref().expect("counted").start;
                let _ = writeln!(
                    s,
                    "  {} = {} + (counter of #{h} − {}) · {step}",
                    f.vname(*v),
                    f.vname(entry),
                    f.vname(start)
                );
                continue;
            }
            let (ib, k) = p.def_inst[*v].unwrap();
            let _ = writeln!(s, "  recompute {}", f.inst_text(&f.blocks[ib].insts[k]));
        }
        for i in f.blocks[b].insts.iter().rev() {
            if !p.inst_active(f, i) {
                continue;
            }
            let a = |v: Val| format!("ā{}", f.vname(v));
            let line = match i {
                Inst::Un {
                    dst,
                    a: x,
                    partial,
                    op,
                    ..
                } => format!(
                    "{} += {} · {}",
                    a(*x),
                    match partial {
                        Some(d) => f.vname(*d),
                        None => format!("{op:?}'"),
                    },
                    a(*dst)
                ),
                Inst::Bin {
                    dst,
                    a: x,
                    b: y,
                    partials,
                    op,
                } => {
                    let mut parts = vec![];
                    for (k, o) in [*x, *y].into_iter().enumerate() {
                        if p.active(f, o) {
                            parts.push(format!(
                                "{} += {} · {}",
                                a(o),
                                match partials[k] {
                                    Some(d) => f.vname(d),
                                    None => format!("∂{op:?}/∂{}", ["x", "y"][k]),
                                },
                                a(*dst)
                            ));
                        }
                    }
                    parts.join("; ")
                }
                Inst::Load {
                    dst, slice, idx, ..
                } => format!(
                    "{}d{}[{}] += {}",
                    match p.deferred[*dst] {
                        Some(h) => format!("in the last reversed iteration of #{h}: "),
                        None => String::new(),
                    },
                    f.slices[*slice].name,
                    f.vname(*idx),
                    a(*dst)
                ),
                Inst::Store {
                    slice, idx, val, ..
                } => format!(
                    "{}d{n}[{i}] = 0",
                    if p.active(f, *val) {
                        format!(
                            "{} += d{}[{}]; ",
                            a(*val),
                            f.slices[*slice].name,
                            f.vname(*idx)
                        )
                    } else {
                        String::new()
                    },
                    n = f.slices[*slice].name,
                    i = f.vname(*idx)
                ),
                Inst::Fill { slice, val } => format!(
                    "{}d{} = 0",
                    if p.active(f, *val) {
                        format!("{} += Σ d{}; ", a(*val), f.slices[*slice].name)
                    } else {
                        String::new()
                    },
                    f.slices[*slice].name
                ),
                Inst::Call { dsts, func, .. } => {
                    let g: Vec<String> = dsts
                        .iter()
                        .map(|d| if p.active(f, *d) { a(*d) } else { "0".into() })
                        .collect();
                    format!("pullback of {} with {}", quote::quote!(#func), g.join(", "))
                }
                Inst::Rule { dst, args, .. } => format!(
                    "{} += recorded partials · {}",
                    args.iter()
                        .filter(|x| p.active(f, **x))
                        .map(|x| a(*x))
                        .collect::<Vec<_>>()
                        .join(", "),
                    a(*dst)
                ),
                _ => String::new(),
            };
            let _ = writeln!(s, "  {line}");
        }
        if b == 0 {
            let _ = writeln!(s, "  done");
            continue;
        }
        let edges = &p.preds[b];
        let how = match p.tag[b] {
            TagMode::None => "",
            TagMode::Local => "by the local tag: ",
            TagMode::Stack => "by the popped tag: ",
            TagMode::Counted => "by the replayed counter: ",
            TagMode::Any => "by the first edge (any would do): ",
        };
        let alts: Vec<String> = edges
            .iter()
            .map(|&(pb, slot)| {
                let t = f.blocks[pb].term.targets()[slot];
                let sends: Vec<String> = f.blocks[b]
                    .params
                    .iter()
                    .zip(&t.args)
                    .filter(|(pp, aa)| p.active(f, **pp) && p.active(f, **aa))
                    .map(|(pp, aa)| format!("ā{} += ā{}", f.vname(*aa), f.vname(*pp)))
                    .collect();
                format!("[{}] goto #̄{pb}", sends.join("; "))
            })
            .collect();
        let _ = writeln!(s, "  {how}{}", alts.join(" | "));
    }
    s
}
