//! An interpreter for the IR: the primal at any [`Real`] type (so `Dual<f64>` gives forward
//! mode), and the adjoint, executing exactly the [`Plan`] the code generator emits — the same
//! pushes, pops, recomputations, tags and reverse instructions. Tests compare the two.
//!
//! Calls to other `#[differentiable]` functions and user rules are not interpreted (they are
//! tested through the macro).

use crate::adjoint::{cheap_reads, Plan, RangeBase, TagMode};
use crate::ir::*;
use adjoint_core::rules::{self, Op1};
use adjoint_core::Real;
use std::collections::HashMap;

/// A runtime value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V<T> {
    /// float
    F(T),
    /// integer
    I(i128),
    /// bool
    B(bool),
}

impl<T: Real> V<T> {
    fn f(self) -> T {
        match self {
            V::F(x) => x,
            V::I(i) => T::cst(i as f64),
            _ => panic!("expected a float, found {self:?}"),
        }
    }
    fn i(self) -> i128 {
        match self {
            V::I(x) => x,
            _ => panic!("expected an integer"),
        }
    }
    fn b(self) -> bool {
        match self {
            V::B(x) => x,
            _ => panic!("expected a bool"),
        }
    }
}

/// An argument: scalars by value, slices as vectors (mutated in place).
#[derive(Clone, Debug, PartialEq)]
pub enum ArgVal<T> {
    /// `f64` / integer / bool
    Scalar(V<T>),
    /// `&[f64]` / `&mut [f64]`
    Floats(Vec<T>),
    /// `&[usize]`
    Ints(Vec<i128>),
}

enum Mem<T> {
    F(Vec<T>),
    I(Vec<i128>),
}

impl<T: Real> Mem<T> {
    fn len(&self) -> usize {
        match self {
            Mem::F(v) => v.len(),
            Mem::I(v) => v.len(),
        }
    }
    fn get(&self, i: usize) -> V<T> {
        match self {
            Mem::F(v) => V::F(v[i]),
            Mem::I(v) => V::I(v[i]),
        }
    }
    fn set(&mut self, i: usize, x: V<T>) {
        match self {
            Mem::F(v) => v[i] = x.f(),
            Mem::I(v) => v[i] = x.i(),
        }
    }
}

struct Machine<T> {
    vals: Vec<V<T>>,
    mem: Vec<Mem<T>>,
}

fn unary_op(op: Op1, n: Option<i128>) -> Op1 {
    match (op, n) {
        (Op1::Powi(_), Some(n)) => Op1::Powi(n as i32),
        (Op1::Polygamma(_), Some(n)) => Op1::Polygamma(n as u32),
        (op, _) => op,
    }
}

fn int_op(op: IntOp, a: i128, b: i128, ty: IntTy) -> i128 {
    let r = match op {
        IntOp::Add => a + b,
        IntOp::Sub => a - b,
        IntOp::Mul => a * b,
        IntOp::Div => a / b,
        IntOp::Rem => a % b,
        IntOp::BitAnd => a & b,
        IntOp::BitOr => a | b,
        IntOp::BitXor => a ^ b,
        IntOp::Shl => a << b,
        IntOp::Shr => a >> b,
        IntOp::Min => a.min(b),
        IntOp::Max => a.max(b),
    };
    ty.wrap(r)
}

fn cmp<X: PartialOrd>(op: CmpOp, a: X, b: X) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

impl<T: Real> Machine<T> {
    fn new(f: &Func, args: &[ArgVal<T>]) -> Self {
        let mut vals = vec![V::B(false); f.values.len()];
        let mut mem: Vec<Mem<T>> = vec![];
        for s in &f.slices {
            let n = match &s.kind {
                SliceKind::Local { len_value, .. } => {
                    len_value.expect("the interpreter needs literal array lengths")
                }
                _ => 0,
            };
            mem.push(if s.elem == Ty::F64 {
                Mem::F(vec![T::zero(); n])
            } else {
                Mem::I(vec![0; n])
            });
        }
        assert_eq!(args.len(), f.params.len(), "argument count");
        for (p, a) in f.params.iter().zip(args) {
            match (p, a) {
                (Param::Scalar { val, .. }, ArgVal::Scalar(x)) => vals[*val] = *x,
                (Param::Slice { slice, .. }, ArgVal::Floats(v)) => mem[*slice] = Mem::F(v.clone()),
                (Param::Slice { slice, .. }, ArgVal::Ints(v)) => mem[*slice] = Mem::I(v.clone()),
                _ => panic!("argument kind does not match parameter"),
            }
        }
        Machine { vals, mem }
    }

    fn get(&self, shadow: &HashMap<Val, V<T>>, v: Val) -> V<T> {
        shadow.get(&v).copied().unwrap_or(self.vals[v])
    }

    /// Evaluate one instruction, reading operands through `shadow` and writing results with
    /// `put`. `record` makes expensive primitives compute their partials.
    fn exec(
        &mut self,
        f: &Func,
        inst: &Inst,
        shadow: &HashMap<Val, V<T>>,
        out: &mut Vec<(Val, V<T>)>,
    ) {
        let g = |v: Val| self.get(shadow, v);
        match inst {
            Inst::Const { dst, c } => out.push((
                *dst,
                match c.value {
                    ConstVal::F(x) => V::F(T::cst(x)),
                    ConstVal::I(i) => V::I(i),
                    ConstVal::B(b) => V::B(b),
                },
            )),
            Inst::Un {
                dst,
                op,
                a,
                n,
                partial,
            } => {
                let op = unary_op(*op, n.map(|n| g(n).i()));
                let r = rules::unary(op, g(*a).f());
                out.push((*dst, V::F(r.value)));
                if let Some(p) = partial {
                    out.push((*p, V::F(r.d)));
                }
            }
            Inst::Bin {
                dst,
                op,
                a,
                b,
                partials,
            } => {
                let r = rules::binary(*op, g(*a).f(), g(*b).f());
                out.push((*dst, V::F(r.value)));
                if let Some(p) = partials[0] {
                    out.push((p, V::F(r.dx)));
                }
                if let Some(p) = partials[1] {
                    out.push((p, V::F(r.dy)));
                }
            }
            Inst::Pass { dst, op, a } => {
                let x = g(*a).f().value();
                let y = match op {
                    PassOp::Floor => x.floor(),
                    PassOp::Ceil => x.ceil(),
                    PassOp::Round => x.round(),
                    PassOp::Trunc => x.trunc(),
                    PassOp::Signum => x.signum(),
                };
                out.push((*dst, V::F(T::cst(y))));
            }
            Inst::Int { dst, op, a, b } => {
                let r = match f.values[*dst].ty {
                    Ty::Bool => {
                        let (x, y) = (g(*a).b(), g(*b).b());
                        V::B(match op {
                            IntOp::BitAnd => x & y,
                            IntOp::BitOr => x | y,
                            IntOp::BitXor => x ^ y,
                            _ => unreachable!(),
                        })
                    }
                    Ty::Int(t) => V::I(int_op(*op, g(*a).i(), g(*b).i(), t.unwrap())),
                    Ty::F64 => unreachable!(),
                };
                out.push((*dst, r));
            }
            Inst::Cmp { dst, op, a, b } => {
                let r = match (g(*a), g(*b)) {
                    (V::F(x), V::F(y)) => cmp(*op, x.value(), y.value()),
                    (V::I(x), V::I(y)) => cmp(*op, x, y),
                    (V::B(x), V::B(y)) => cmp(*op, x, y),
                    _ => panic!("comparison of different kinds"),
                };
                out.push((*dst, V::B(r)));
            }
            Inst::Not { dst, a } => out.push((*dst, V::B(!g(*a).b()))),
            Inst::Cast { dst, a, checked } => {
                let x = g(*a);
                if let (Some(check), Ty::Int(Some(t)), V::I(i)) = (checked, f.values[*dst].ty, &x) {
                    let fits = |v: i128| t.wrap(v) == v;
                    let ok = fits(*i) && !(check.end_inclusive && fits(*i) && !fits(*i + 1));
                    assert!(ok, "{}", check.message(t.name()));
                }
                let r = match (f.values[*dst].ty, x) {
                    (Ty::F64, V::I(i)) => V::F(T::cst(i as f64)),
                    (Ty::Int(Some(t)), V::I(i)) => V::I(t.wrap(i)),
                    (Ty::Int(Some(t)), V::F(y)) => {
                        let v = y.value();
                        V::I(match t {
                            IntTy::Usize | IntTy::U64 => v as u64 as i128,
                            IntTy::U32 => v as u32 as i128,
                            IntTy::I32 => v as i32 as i128,
                            _ => v as i64 as i128,
                        })
                    }
                    (t, x) => panic!("unsupported cast {x:?} to {t:?}"),
                };
                out.push((*dst, r));
            }
            Inst::Len { dst, slice } => out.push((*dst, V::I(self.mem[*slice].len() as i128))),
            Inst::Load {
                dst, slice, idx, ..
            } => {
                let i = g(*idx).i() as usize;
                out.push((*dst, self.mem[*slice].get(i)));
            }
            Inst::Store {
                slice, idx, val, ..
            } => {
                let (i, x) = (g(*idx).i() as usize, g(*val));
                self.mem[*slice].set(i, x);
            }
            Inst::Fill { slice, val } => {
                let x = g(*val);
                for i in 0..self.mem[*slice].len() {
                    self.mem[*slice].set(i, x);
                }
            }
            Inst::Assert {
                cond, msg, debug, ..
            } => {
                if !*debug || cfg!(debug_assertions) {
                    assert!(g(*cond).b(), "{msg}");
                }
            }
            Inst::Check { a, b, what, .. } => {
                let (a, b) = (g(*a).i(), g(*b).i());
                assert!(a < b, "{what} out of bounds: {a} is not below {b}");
            }
            Inst::Call { .. } | Inst::Rule { .. } => {
                panic!("the interpreter does not run calls or user rules")
            }
        }
    }

    fn apply(&mut self, out: &mut Vec<(Val, V<T>)>) {
        for (v, x) in out.drain(..) {
            self.vals[v] = x;
        }
    }

    /// Run block `b`'s instructions; returns the taken edge `(target, slot)` or `None` at return.
    fn run_block(&mut self, f: &Func, b: BlockId) -> Option<(BlockId, usize)> {
        let empty = HashMap::new();
        let mut out = vec![];
        for inst in &f.blocks[b].insts {
            self.exec(f, inst, &empty, &mut out);
            self.apply(&mut out);
        }
        let (t, slot) = match &f.blocks[b].term {
            Term::Jump(t) => (t, 0),
            Term::Branch(c, t, e) => {
                if self.vals[*c].b() {
                    (t, 0)
                } else {
                    (e, 1)
                }
            }
            Term::Return(_) => return None,
            Term::Unreachable => panic!("reached an unreachable block"),
        };
        let args: Vec<V<T>> = t.args.iter().map(|a| self.vals[*a]).collect();
        for (p, x) in f.blocks[t.block].params.iter().zip(args) {
            self.vals[*p] = x;
        }
        Some((t.block, slot))
    }

    fn outputs(self, f: &Func, args: &mut [ArgVal<T>]) {
        let mut mem: Vec<Option<Mem<T>>> = self.mem.into_iter().map(Some).collect();
        for (p, a) in f.params.iter().zip(args.iter_mut()) {
            if let Param::Slice { slice, .. } = p {
                match mem[*slice].take().unwrap() {
                    Mem::F(v) => *a = ArgVal::Floats(v),
                    Mem::I(v) => *a = ArgVal::Ints(v),
                }
            }
        }
    }
}

/// Run the primal at type `T`; slices are updated in place. Returns the result of an `f64`
/// function.
pub fn primal<T: Real>(f: &Func, args: &mut [ArgVal<T>]) -> Option<T> {
    let mut m = Machine::new(f, args);
    let mut b = 0;
    let mut steps = 0u64;
    while let Some((next, _)) = m.run_block(f, b) {
        b = next;
        steps += 1;
        assert!(steps < 50_000_000, "the interpreter ran too long");
    }
    let r = match &f.blocks[b].term {
        Term::Return(Some(v)) => Some(m.vals[*v].f()),
        _ => None,
    };
    m.outputs(f, args);
    r
}

/// Statistics of one adjoint run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Values pushed (all stacks).
    pub pushed: usize,
    /// Tags pushed.
    pub tags: usize,
    /// Blocks executed in the forward sweep.
    pub blocks: usize,
    /// Some value of the forward sweep was ±∞ or NaN (a reverse sweep may then meet `0 · ∞`).
    pub nonfinite: bool,
    /// Ranged accesses the reverse sweep made (`rb + cnt`, checked against their index).
    pub ranged: usize,
}

/// A range base fixed over loop `c`, computed as the generated code does on entering the
/// reversed loop (see [`crate::adjoint::entry_computable`]).
fn entry_value(
    f: &Func,
    p: &Plan,
    c: &crate::adjoint::Counted,
    m: &Machine<f64>,
    shadow: &HashMap<Val, V<f64>>,
    v: Val,
) -> i128 {
    if !p.def_block[v].is_some_and(|db| c.body[db]) {
        return m.get(shadow, v).i();
    }
    let (ib, k) = p.def_inst[v].expect("checked by entry_computable");
    match &f.blocks[ib].insts[k] {
        Inst::Const { .. } => m.get(shadow, v).i(),
        Inst::Int { op, a, b, .. } => {
            let (a, b) = (
                entry_value(f, p, c, m, shadow, *a),
                entry_value(f, p, c, m, shadow, *b),
            );
            match op {
                IntOp::Add => a + b,
                IntOp::Sub => a - b,
                IntOp::Mul => a * b,
                _ => unreachable!("checked by entry_computable"),
            }
        }
        _ => unreachable!("checked by entry_computable"),
    }
}

/// Run the forward sweep with recording and the reverse sweep. `args` are the primal
/// arguments (slices updated in place as the primal would); `adj` holds one entry per parameter:
/// for active scalars `Scalar(F(seed))` accumulating the adjoint, for active slices
/// `Floats(seed)` (output cotangents for `&mut`, zeros for inputs) accumulating the adjoint;
/// other entries are ignored. `dret` seeds the result. Returns the result and statistics.
pub fn adjoint(
    f: &Func,
    p: &Plan,
    args: &mut [ArgVal<f64>],
    adj: &mut [ArgVal<f64>],
    dret: f64,
) -> (Option<f64>, Stats) {
    let mut st = Stats::default();
    let mut m = Machine::new(f, args);
    let mut vstack: Vec<V<f64>> = vec![];
    let mut tstack: Vec<usize> = vec![];
    let mut tlocal: HashMap<BlockId, usize> = HashMap::new();
    // forward
    let mut b = 0;
    loop {
        st.blocks += 1;
        assert!(st.blocks < 50_000_000, "the interpreter ran too long");
        // instructions, then pushes, then the terminator
        let empty = HashMap::new();
        let mut out = vec![];
        for inst in &f.blocks[b].insts {
            m.exec(f, inst, &empty, &mut out);
            st.nonfinite |= out
                .iter()
                .any(|(_, x)| matches!(x, V::F(x) if !x.is_finite()));
            m.apply(&mut out);
        }
        for v in &p.pushes[b] {
            vstack.push(m.vals[*v]);
            st.pushed += 1;
        }
        let (t, slot) = match &f.blocks[b].term {
            Term::Jump(t) => (t, 0),
            Term::Branch(c, t, e) => {
                if m.vals[*c].b() {
                    (t, 0)
                } else {
                    (e, 1)
                }
            }
            Term::Return(_) => break,
            Term::Unreachable => panic!("reached an unreachable block"),
        };
        let edge = p.preds[t.block]
            .iter()
            .position(|&e| e == (b, slot))
            .unwrap();
        match p.tag[t.block] {
            TagMode::None | TagMode::Counted | TagMode::Any => {}
            TagMode::Local => {
                tlocal.insert(t.block, edge);
            }
            TagMode::Stack => {
                tstack.push(edge);
                st.tags += 1;
            }
        }
        let vals: Vec<V<f64>> = t.args.iter().map(|a| m.vals[*a]).collect();
        for (pp, x) in f.blocks[t.block].params.iter().zip(vals) {
            m.vals[*pp] = x;
        }
        b = t.block;
    }
    let result = match &f.blocks[b].term {
        Term::Return(Some(v)) => Some(m.vals[*v].f()),
        _ => None,
    };
    // reverse
    let mut a = vec![0.0f64; f.values.len()];
    let mut dmem: Vec<Vec<f64>> = f
        .slices
        .iter()
        .enumerate()
        .map(|(s, _)| vec![0.0; m.mem[s].len()])
        .collect();
    for (pa, ad) in f.params.iter().zip(adj.iter()) {
        match (pa, ad) {
            (Param::Slice { slice, .. }, ArgVal::Floats(v)) if p.slice_active[*slice] => {
                dmem[*slice] = v.clone();
            }
            (Param::Scalar { val, .. }, ArgVal::Scalar(V::F(x))) if p.active(f, *val) => {
                a[*val] = *x;
            }
            _ => {}
        }
    }
    if let Term::Return(Some(r)) = f.blocks[b].term {
        if p.active(f, r) {
            a[r] += dret;
        }
    }
    let mut counters: HashMap<BlockId, (i128, i128)> = HashMap::new();
    // range starts of ranged accesses per loop, as the generated code computes them on entry
    let mut starts: HashMap<(BlockId, RangeBase), i128> = HashMap::new();
    // the index a ranged access uses in the reverse sweep (`rb + cnt`), checked against the
    // index the access computes: the invariant the generated unchecked accesses rely on
    let ranged_index = |blk: BlockId,
                        ib: BlockId,
                        k: usize,
                        idx: i128,
                        counters: &HashMap<BlockId, (i128, i128)>,
                        starts: &HashMap<(BlockId, RangeBase), i128>,
                        st: &mut Stats|
     -> i128 {
        let Some((h, r)) = p.ranged[ib][k] else {
            return idx;
        };
        if !p.counted[h].as_ref().is_some_and(|c| c.body[blk]) {
            return idx;
        }
        let rb = if r.is_counter() { 0 } else { starts[&(h, r)] };
        let at = rb + counters[&h].1;
        assert_eq!(
            at, idx,
            "ranged access {k} of block {ib}: rb + cnt ≠ its index"
        );
        st.ranged += 1;
        at
    };
    let mut blk = p.ret_block;
    // Restored values (popped, replayed, recomputed) stay restored for the adjoint blocks that
    // follow, as the generated code assigns them to the function's locals: a value recorded at
    // a counted loop's exit serves all of the loop's reversed iterations.
    let mut shadow: HashMap<Val, V<f64>> = HashMap::new();
    loop {
        for v in p.pushes[blk].iter().rev() {
            shadow.insert(*v, vstack.pop().expect("value stack underflow"));
        }
        for (v, h) in &p.replay[blk] {
            shadow.insert(*v, V::I(counters[h].1));
        }
        for v in &p.remat[blk] {
            if let Some((h, entry, step)) = p.induction(*v) {
                let start = p.counted[h].as_ref().expect("counted").start;
                let (e, s0) = (m.get(&shadow, entry).i(), m.get(&shadow, start).i());
                shadow.insert(*v, V::I(e + (counters[&h].1 - s0) * step));
                continue;
            }
            let (ib, k) = p.def_inst[*v].unwrap();
            let mut out = vec![];
            m.exec(f, &f.blocks[ib].insts[k], &shadow, &mut out);
            if let Inst::Load { idx, .. } = f.blocks[ib].insts[k] {
                let i = m.get(&shadow, idx).i();
                ranged_index(blk, ib, k, i, &counters, &starts, &mut st);
            }
            for (d, x) in out {
                shadow.insert(d, x);
            }
        }
        let g = |m: &Machine<f64>, shadow: &HashMap<Val, V<f64>>, v: Val| m.get(shadow, v);
        for (k, inst) in f.blocks[blk].insts.iter().enumerate().rev() {
            if !p.inst_active(f, inst) {
                continue;
            }
            match inst {
                Inst::Un {
                    dst,
                    op,
                    a: x,
                    n,
                    partial,
                } => {
                    let d = match partial {
                        Some(pd) => g(&m, &shadow, *pd).f(),
                        None => {
                            // cheap: read only what the code generator reads
                            let reads = cheap_reads(f, p, inst);
                            let xv = if reads.contains(x) {
                                g(&m, &shadow, *x).f()
                            } else {
                                0.0
                            };
                            let nv = n.map(|n| g(&m, &shadow, n).i());
                            rules::unary(unary_op(*op, nv), xv).d
                        }
                    };
                    // as the generated code: a zero adjoint sends nothing through a partial
                    // that can be infinite (`Op1::partial_unbounded`)
                    let unbounded = op.partial_unbounded();
                    a[*x] += sent(a[*dst], d, unbounded);
                    a[*dst] = 0.0;
                }
                Inst::Bin {
                    dst,
                    op,
                    a: x,
                    b: y,
                    partials,
                } => {
                    let ds = if partials.iter().any(|q| q.is_some()) {
                        [
                            partials[0].map(|q| g(&m, &shadow, q).f()).unwrap_or(0.0),
                            partials[1].map(|q| g(&m, &shadow, q).f()).unwrap_or(0.0),
                        ]
                    } else {
                        let reads = cheap_reads(f, p, inst);
                        let xv = if reads.contains(x) {
                            g(&m, &shadow, *x).f()
                        } else {
                            0.0
                        };
                        let yv = if reads.contains(y) {
                            g(&m, &shadow, *y).f()
                        } else {
                            0.0
                        };
                        let r = rules::binary(*op, xv, yv);
                        [r.dx, r.dy]
                    };
                    let ad = a[*dst];
                    a[*dst] = 0.0;
                    let unbounded = op.partial_unbounded();
                    if p.active(f, *x) {
                        a[*x] += sent(ad, ds[0], unbounded);
                    }
                    if p.active(f, *y) {
                        a[*y] += sent(ad, ds[1], unbounded);
                    }
                }
                Inst::Load {
                    dst, slice, idx, ..
                } => {
                    if let Some(h) = p.deferred[*dst] {
                        let (lo, cnt) = counters[&h];
                        if cnt != lo {
                            continue; // accumulating until the last reversed iteration
                        }
                    }
                    let i = g(&m, &shadow, *idx).i();
                    let i = ranged_index(blk, blk, k, i, &counters, &starts, &mut st) as usize;
                    dmem[*slice][i] += a[*dst];
                    a[*dst] = 0.0;
                }
                Inst::Store {
                    slice, idx, val, ..
                } => {
                    let i = g(&m, &shadow, *idx).i();
                    let i = ranged_index(blk, blk, k, i, &counters, &starts, &mut st) as usize;
                    if p.active(f, *val) {
                        a[*val] += dmem[*slice][i];
                    }
                    dmem[*slice][i] = 0.0;
                }
                Inst::Fill { slice, val } => {
                    if p.active(f, *val) {
                        a[*val] += dmem[*slice].iter().sum::<f64>();
                    }
                    dmem[*slice].iter_mut().for_each(|x| *x = 0.0);
                }
                Inst::Call { .. } | Inst::Rule { .. } => {
                    panic!("the interpreter does not run calls or user rules")
                }
                _ => {}
            }
        }
        if blk == 0 {
            break;
        }
        let edge = match p.tag[blk] {
            TagMode::None | TagMode::Any => 0,
            TagMode::Local => tlocal[&blk],
            TagMode::Stack => tstack.pop().expect("tag stack underflow"),
            TagMode::Counted => {
                let c = p.counted[blk].as_ref().expect("counted loop");
                let e = counters.get_mut(&blk).expect("counter started");
                if e.1 != e.0 {
                    e.1 -= 1;
                    c.latch
                } else {
                    c.entry
                }
            }
        };
        let (pb, slot) = p.preds[blk][edge];
        if let Some(c) = &p.counted[pb] {
            if c.exit == blk && slot == 1 {
                let s = g(&m, &shadow, c.start).i();
                let e = g(&m, &shadow, c.end).i();
                counters.insert(pb, (s, s.max(e)));
                // the range starts and the entry check (`check_range`) of the generated code
                for r in p.range_bases(pb) {
                    let mut rb = r.base.map_or(0, |b| entry_value(f, p, c, &m, &shadow, b));
                    if let Some((entry, _)) = r.ind.and_then(|i| c.induction(i)) {
                        rb += g(&m, &shadow, entry).i() - s;
                    }
                    starts.insert((pb, r), rb);
                }
                for (ib, insts) in p.ranged.iter().enumerate() {
                    for (k, r) in insts.iter().enumerate() {
                        let (Some((h, r)), Inst::Load { slice, .. } | Inst::Store { slice, .. }) =
                            (r, &f.blocks[ib].insts[k])
                        else {
                            continue;
                        };
                        if *h != pb || s == s.max(e) {
                            continue;
                        }
                        let rb = if r.is_counter() { 0 } else { starts[&(pb, *r)] };
                        let len = m.mem[*slice].len() as i128;
                        assert!(
                            rb + s >= 0 && rb + s.max(e) <= len,
                            "range check of loop {pb}: [{rb} + {s}, {rb} + {}) of a slice of \
                             length {len}",
                            s.max(e)
                        );
                    }
                }
            }
        }
        let t = f.blocks[pb].term.targets()[slot];
        let params = &f.blocks[blk].params;
        let tmp: Vec<f64> = params
            .iter()
            .map(|q| if p.active(f, *q) { a[*q] } else { 0.0 })
            .collect();
        for q in params {
            if p.active(f, *q) {
                a[*q] = 0.0;
            }
        }
        for (k, arg) in t.args.iter().enumerate() {
            if p.active(f, params[k]) && p.active(f, *arg) {
                a[*arg] += tmp[k];
            }
        }
        blk = pb;
    }
    assert!(vstack.is_empty() && tstack.is_empty(), "stacks not empty");
    // outputs
    for (pa, ad) in f.params.iter().zip(adj.iter_mut()) {
        match pa {
            Param::Slice { slice, .. } if p.slice_active[*slice] => {
                *ad = ArgVal::Floats(dmem[*slice].clone());
            }
            Param::Scalar { val, .. } if p.active(f, *val) => {
                *ad = ArgVal::Scalar(V::F(a[*val]));
            }
            _ => {}
        }
    }
    m.outputs(f, args);
    (result, st)
}

/// What adjoint `g` sends through partial `d` (`Cotangent::scale_by` where `unbounded`).
fn sent(g: f64, d: f64, unbounded: bool) -> f64 {
    if unbounded && g == 0.0 {
        g
    } else {
        d * g
    }
}
