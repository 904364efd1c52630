//! The expression language: [`Exp`], the scalar values closures compute with, recorded once into
//! an expression DAG (an [`Arena`] of [`Node`]s, hash-consed), and its reverse-mode transform.
//!
//! Every expression value is an `f64` at run time; integers (indices, `round`) are `f64`s that
//! hold whole numbers and booleans are `0.0`/`1.0`. Discrete operations (comparisons, `floor`,
//! `idiv`, …) have derivative zero and stop the derivative flow.

use crate::error::{Error, Result};
use adjoint_core::rules::{self, Op1, Op2};
use std::cell::RefCell;
use std::collections::HashMap;

pub(crate) type Id = u32;

/// A discrete (derivative-free) scalar operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DOp {
    Floor,
    Ceil,
    Round,
    Trunc,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Not,
    /// floor division
    IDiv,
    /// `1.0` where the sign bit is set (`-0.0`, negative numbers, a NaN with its sign bit)
    SignBit,
}

impl DOp {
    #[inline(always)]
    pub(crate) fn eval<F: num_traits::Float>(self, a: F, b: F) -> F {
        let t = |c: bool| if c { F::one() } else { F::zero() };
        match self {
            DOp::Floor => a.floor(),
            DOp::Ceil => a.ceil(),
            DOp::Round => a.round(),
            DOp::Trunc => a.trunc(),
            DOp::Lt => t(a < b),
            DOp::Le => t(a <= b),
            DOp::Gt => t(a > b),
            DOp::Ge => t(a >= b),
            DOp::Eq => t(a == b),
            DOp::Ne => t(a != b),
            DOp::And => t(a != F::zero() && b != F::zero()),
            DOp::Or => t(a != F::zero() || b != F::zero()),
            DOp::Not => t(a == F::zero()),
            DOp::IDiv => (a / b).floor(),
            DOp::SignBit => t(a.is_sign_negative()),
        }
    }
}

/// One node of an expression DAG. Operands are ids of earlier nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    /// a constant (bits of the `f64`)
    Const(u64),
    /// the k-th parameter of the closure
    Param(u32),
    /// a placeholder variable of `gradient_e` (substituted away before anything runs)
    Var(u32),
    /// the index along an axis of the iteration space
    Idx(u32),
    Un(Op1, Id),
    Bin(Op2, Id, Id),
    /// `f'(a)` of a unary primitive, from the rule table
    D1(Op1, Id),
    /// `f''(a)`
    DD1(Op1, Id),
    /// first partial of a binary primitive: 0 = ∂x, 1 = ∂y
    D2(Op2, u8, Id, Id),
    /// second partial: 0 = ∂xx, 1 = ∂xy, 2 = ∂yy
    DD2(Op2, u8, Id, Id),
    /// `g · d` with `0 · anything = 0` (adjoint propagation: a zero adjoint never meets the NaN
    /// derivative of a branch not taken)
    AdjMul(Id, Id),
    /// a discrete operation (unary ones repeat their operand)
    Disc(DOp, Id, Id),
    /// `if c != 0 { a } else { b }`
    Select(Id, Id, Id),
    /// read an array (by key) at an index, one operand per axis
    Read(u32, Vec<Id>),
    /// convert to an element type: `Cast(true, a)` rounds to `f32`, `Cast(false, a)` widens to
    /// `f64` (exact; it only changes the type)
    Cast(bool, Id),
}

/// The element type of an expression node, inferred from its operands: parameters and reads
/// have their array's type; constants and indices are *weak* (as JAX's Python scalars): they
/// take the type of what they meet, rounded once when they meet `f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Weak,
    F32,
    F64,
}

impl Ty {
    pub(crate) fn of(d: crate::graph::DType) -> Ty {
        match d {
            crate::graph::DType::F32 => Ty::F32,
            crate::graph::DType::F64 => Ty::F64,
        }
    }
    /// `Weak ⊔ t = t`; `F32 ⊔ F64` is an error (returned as the pair).
    pub(crate) fn join(self, o: Ty) -> std::result::Result<Ty, (Ty, Ty)> {
        match (self, o) {
            (Ty::Weak, t) | (t, Ty::Weak) => Ok(t),
            (a, b) if a == b => Ok(a),
            (a, b) => Err((a, b)),
        }
    }
}

/// The type of every node of `ar` (parameters typed by `param`, reads by `read`). A mixed
/// operation is an error: the pair of types met.
pub(crate) fn infer(
    ar: &Arena,
    param: &dyn Fn(u32) -> Ty,
    read: &dyn Fn(u32) -> Ty,
) -> std::result::Result<Vec<Ty>, (Ty, Ty)> {
    let mut t: Vec<Ty> = Vec::with_capacity(ar.nodes.len());
    for n in &ar.nodes {
        let ty = match n {
            Node::Const(_) | Node::Var(_) | Node::Idx(_) => Ty::Weak,
            Node::Param(k) => param(*k),
            Node::Read(k, _) => read(*k),
            Node::Un(_, a) | Node::D1(_, a) | Node::DD1(_, a) => t[*a as usize],
            Node::Bin(_, a, b)
            | Node::D2(_, _, a, b)
            | Node::DD2(_, _, a, b)
            | Node::AdjMul(a, b)
            | Node::Select(_, a, b) => t[*a as usize].join(t[*b as usize])?,
            Node::Disc(op, a, b) => {
                let j = t[*a as usize].join(t[*b as usize])?;
                match op {
                    DOp::Floor | DOp::Ceil | DOp::Round | DOp::Trunc | DOp::IDiv => j,
                    _ => Ty::Weak,
                }
            }
            Node::Cast(true, _) => Ty::F32,
            Node::Cast(false, _) => Ty::F64,
        };
        t.push(ty);
    }
    Ok(t)
}

/// Whether an expression reachable from `roots` still holds a `gradient_e`/`jacobian_e`
/// placeholder: their results are copies with the placeholders substituted, so one left is an
/// expression built inside their closure and kept past it (a hunter: it reached the kernel
/// compiler's `unreachable!`).
fn holds_placeholder(ar: &Arena, roots: &[Exp]) -> bool {
    let mut seen = vec![false; ar.nodes.len()];
    let mut stack: Vec<Id> = roots.iter().map(|e| e.id).collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i as usize], true) {
            continue;
        }
        match &ar.nodes[i as usize] {
            Node::Var(_) => return true,
            n => stack.extend(n.operands()),
        }
    }
    false
}

impl Node {
    pub(crate) fn operands(&self) -> Vec<Id> {
        match self {
            Node::Const(_) | Node::Param(_) | Node::Var(_) | Node::Idx(_) => vec![],
            Node::Un(_, a) | Node::D1(_, a) | Node::DD1(_, a) => vec![*a],
            Node::Bin(_, a, b)
            | Node::D2(_, _, a, b)
            | Node::DD2(_, _, a, b)
            | Node::AdjMul(a, b)
            | Node::Disc(_, a, b) => vec![*a, *b],
            Node::Select(c, a, b) => vec![*c, *a, *b],
            Node::Read(_, ix) => ix.clone(),
            Node::Cast(_, a) => vec![*a],
        }
    }

    fn map_operands(&self, f: impl Fn(Id) -> Id) -> Node {
        match self {
            Node::Const(_) | Node::Param(_) | Node::Var(_) | Node::Idx(_) => self.clone(),
            Node::Un(o, a) => Node::Un(*o, f(*a)),
            Node::D1(o, a) => Node::D1(*o, f(*a)),
            Node::DD1(o, a) => Node::DD1(*o, f(*a)),
            Node::Bin(o, a, b) => Node::Bin(*o, f(*a), f(*b)),
            Node::D2(o, w, a, b) => Node::D2(*o, *w, f(*a), f(*b)),
            Node::DD2(o, w, a, b) => Node::DD2(*o, *w, f(*a), f(*b)),
            Node::AdjMul(a, b) => Node::AdjMul(f(*a), f(*b)),
            Node::Disc(o, a, b) => Node::Disc(*o, f(*a), f(*b)),
            Node::Select(c, a, b) => Node::Select(f(*c), f(*a), f(*b)),
            Node::Read(k, ix) => Node::Read(*k, ix.iter().map(|&i| f(i)).collect()),
            Node::Cast(t, a) => Node::Cast(*t, f(*a)),
        }
    }
}

/// Ops whose partials are constants (linear), read once from the rule table.
fn const_partial1(op: Op1) -> Option<f64> {
    matches!(op, Op1::Neg).then(|| rules::unary(op, 0.0).d)
}
fn const_partials2(op: Op2) -> Option<(f64, f64)> {
    matches!(op, Op2::Add | Op2::Sub).then(|| {
        let r = rules::binary(op, 0.0, 0.0);
        (r.dx, r.dy)
    })
}

/// Value of a derivative node at constant operands (constant folding), from the rule table.
pub(crate) fn eval_d1(op: Op1, x: f64) -> f64 {
    rules::unary(op, x).d
}
pub(crate) fn eval_dd1(op: Op1, x: f64) -> f64 {
    rules::unary(op, x).dd
}
pub(crate) fn eval_d2(op: Op2, w: u8, x: f64, y: f64) -> f64 {
    let r = rules::binary(op, x, y);
    if w == 0 {
        r.dx
    } else {
        r.dy
    }
}
pub(crate) fn eval_dd2(op: Op2, w: u8, x: f64, y: f64) -> f64 {
    let r = rules::binary(op, x, y);
    match w {
        0 => r.dxx,
        1 => r.dxy,
        _ => r.dyy,
    }
}
#[inline(always)]
pub(crate) fn adj_mul(g: f64, d: f64) -> f64 {
    // `+0` where the adjoint is zero (even when `d` is not finite: a branch not taken), else
    // `g·d`; a mask rather than a branch, so that the loops over blocks vectorise.
    let keep = u64::from(g != 0.0).wrapping_neg();
    f64::from_bits((g * d).to_bits() & keep)
}

/// Unary primitives whose values a recurrence's primal pass may store for its reverse pass: a
/// libm call each, with a first partial that is cheap in the value or the argument
/// ([`Arena::with_stored`]).
pub(crate) fn storable(op: Op1) -> bool {
    matches!(
        op,
        Op1::Exp | Op1::Exp2 | Op1::Tanh | Op1::Tan | Op1::Ln | Op1::Ln1p | Op1::Atan
    )
}

/// A hash-consed expression DAG; nodes are in topological order (operands first).
#[derive(Clone, Debug, Default)]
pub(crate) struct Arena {
    pub nodes: Vec<Node>,
    map: HashMap<Node, Id>,
}

impl Arena {
    /// The value of a constant node, or of a cast of one (`lit(c).cast_f32()`: a typed
    /// constant, its value already rounded).
    pub(crate) fn konst_of(&self, id: Id) -> Option<f64> {
        match self.nodes[id as usize] {
            Node::Const(b) => Some(f64::from_bits(b)),
            Node::Cast(_, a) => match self.nodes[a as usize] {
                Node::Const(b) => Some(f64::from_bits(b)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The type of a typed constant (a cast of a constant): `Some(true)` for `f32`.
    fn konst_type(&self, id: Id) -> Option<bool> {
        match self.nodes[id as usize] {
            Node::Cast(to32, a) if matches!(self.nodes[a as usize], Node::Const(_)) => Some(to32),
            _ => None,
        }
    }

    pub(crate) fn konst(&mut self, v: f64) -> Id {
        self.intern(Node::Const(v.to_bits()))
    }

    fn intern(&mut self, n: Node) -> Id {
        if let Some(&id) = self.map.get(&n) {
            return id;
        }
        let id = self.nodes.len() as Id;
        self.nodes.push(n.clone());
        self.map.insert(n, id);
        id
    }

    /// Add a node, folding constants and trivial identities. A fold of typed constants (casts
    /// of constants) is a typed constant of their type; typed constants of both types are not
    /// folded (type inference reports the mix).
    pub(crate) fn push(&mut self, n: Node) -> Id {
        let types: Vec<bool> = n
            .operands()
            .iter()
            .filter_map(|&o| self.konst_type(o))
            .collect();
        let Some(&t) = types.first() else {
            return self.fold(n);
        };
        if types.iter().any(|&u| u != t) {
            return self.intern(n);
        }
        let id = self.fold(n);
        match self.nodes[id as usize] {
            Node::Const(b) => {
                let v = f64::from_bits(b);
                let k = self.konst(if t { v as f32 as f64 } else { v });
                self.intern(Node::Cast(t, k))
            }
            _ => id,
        }
    }

    fn fold(&mut self, n: Node) -> Id {
        let c = |s: &Self, i: Id| s.konst_of(i);
        match &n {
            Node::Un(op, a) => {
                if let Some(x) = c(self, *a) {
                    return self.konst(op.eval(x));
                }
            }
            Node::Bin(op, a, b) => match (c(self, *a), c(self, *b)) {
                (Some(x), Some(y)) => return self.konst(op.eval(x, y)),
                // `x + (−0)`, `x − (+0)` and `(−0) + x` are `x` for every `x`; `x + (+0)` is not
                // (−0 + +0 = +0), so the sign of the zero decides.
                (_, Some(y))
                    if y == 0.0
                        && ((*op == Op2::Add && y.is_sign_negative())
                            || (*op == Op2::Sub && y.is_sign_positive())) =>
                {
                    return *a
                }
                (Some(x), _) if x == 0.0 && x.is_sign_negative() && *op == Op2::Add => return *b,
                (_, Some(y)) if y == 1.0 && matches!(op, Op2::Mul | Op2::Div) => return *a,
                (Some(x), _) if x == 1.0 && *op == Op2::Mul => return *b,
                _ => {}
            },
            Node::D1(op, a) => {
                if let Some(x) = c(self, *a) {
                    return self.konst(eval_d1(*op, x));
                }
            }
            Node::DD1(op, a) => {
                if let Some(x) = c(self, *a) {
                    return self.konst(eval_dd1(*op, x));
                }
            }
            Node::D2(op, w, a, b) => {
                if let (Some(x), Some(y)) = (c(self, *a), c(self, *b)) {
                    return self.konst(eval_d2(*op, *w, x, y));
                }
            }
            Node::DD2(op, w, a, b) => {
                if let (Some(x), Some(y)) = (c(self, *a), c(self, *b)) {
                    return self.konst(eval_dd2(*op, *w, x, y));
                }
            }
            Node::AdjMul(g, d) => match (c(self, *g), c(self, *d)) {
                (Some(x), Some(y)) => return self.konst(adj_mul(x, y)),
                (Some(0.0), _) => return *g,
                (_, Some(0.0)) => return *d,
                (Some(1.0), _) => return *d,
                (_, Some(1.0)) => return *g,
                _ => {}
            },
            Node::Disc(op, a, b) => {
                if let (Some(x), Some(y)) = (c(self, *a), c(self, *b)) {
                    return self.konst(op.eval(x, y));
                }
            }
            Node::Cast(to32, a) => {
                // A cast of a constant stays a cast (of the rounded constant): a bare constant
                // takes its type from where it is used, and `lit(0.5).cast_f32()` must be `f32`.
                if let Some(x) = c(self, *a) {
                    let r = if *to32 { x as f32 as f64 } else { x };
                    let k = self.konst(r);
                    return self.intern(Node::Cast(*to32, k));
                }
            }
            Node::Select(s, a, b) => {
                if let Some(x) = c(self, *s) {
                    return if x != 0.0 { *a } else { *b };
                }
                if a == b {
                    return *a;
                }
            }
            _ => {}
        }
        self.intern(n)
    }

    pub(crate) fn bin(&mut self, op: Op2, a: Id, b: Id) -> Id {
        self.push(Node::Bin(op, a, b))
    }
    fn add(&mut self, a: Id, b: Id) -> Id {
        self.bin(Op2::Add, a, b)
    }
    fn scale(&mut self, g: Id, k: f64) -> Id {
        if k == 1.0 {
            g
        } else if k == -1.0 {
            self.push(Node::Un(Op1::Neg, g))
        } else {
            let kc = self.konst(k);
            self.push(Node::AdjMul(g, kc))
        }
    }
    pub(crate) fn disc(&mut self, op: DOp, a: Id, b: Id) -> Id {
        self.push(Node::Disc(op, a, b))
    }

    /// This arena with the first partials of `sin`, `cos`, `sinh` and `cosh` at `f64` arguments
    /// (`is_f64`) made the other function's node: `sin′(a)` is the node `cos(a)`, `cos′(a)` is
    /// `−sin(a)`, `sinh′ ↔ cosh`. The rule table's partial is the same number (`sin_cos` is
    /// `(sin, cos)`), and a kernel that evaluates both functions at one argument, as a rotation
    /// does, then calls each once instead of four times. (`f32` partials stay the rule table's
    /// `f64` values rounded.) Returns the new arena and each old node's new id, or `None` when
    /// there is nothing to rewrite.
    pub(crate) fn with_shared_partials(
        &self,
        is_f64: &dyn Fn(Id) -> bool,
    ) -> Option<(Arena, Vec<Id>)> {
        let hit = |n: &Node| matches!(n, Node::D1(Op1::Sin | Op1::Cos | Op1::Sinh | Op1::Cosh, a) if is_f64(*a));
        if !self.nodes.iter().any(hit) {
            return None;
        }
        let mut new = Arena::default();
        let mut map: Vec<Id> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let m = n.map_operands(|o| map[o as usize]);
            let id = match m {
                Node::D1(op, a) if hit(n) => match op {
                    Op1::Sin => new.push(Node::Un(Op1::Cos, a)),
                    Op1::Cos => {
                        let s = new.push(Node::Un(Op1::Sin, a));
                        new.push(Node::Un(Op1::Neg, s))
                    }
                    Op1::Sinh => new.push(Node::Un(Op1::Cosh, a)),
                    _ => new.push(Node::Un(Op1::Sinh, a)),
                },
                m => new.push(m),
            };
            map.push(id);
        }
        Some((new, map))
    }

    /// This arena with the values of the unary nodes `stored` read from parameters `first`,
    /// `first + 1`, … instead of computed (a recurrence's reverse pass reading what its primal
    /// pass stored), and their first partials (`D1` nodes of the same primitive and argument)
    /// computed from those values or the argument with the rule table's own operations, so the
    /// bits are those of the recomputing kernel. Every `stored` node must be a `Un` of a
    /// [`storable`] primitive. Returns the new arena and each old node's new id.
    pub(crate) fn with_stored(&self, stored: &[Id], first: u32) -> (Arena, Vec<Id>) {
        let by_arg: HashMap<(Op1, Id), u32> = stored
            .iter()
            .enumerate()
            .map(|(j, &s)| match self.nodes[s as usize] {
                Node::Un(op, a) if storable(op) => ((op, a), first + j as u32),
                ref n => unreachable!("stored node {n:?} is not a storable unary node"),
            })
            .collect();
        let mut new = Arena::default();
        let mut map: Vec<Id> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let id = match *n {
                Node::Un(op, a) if by_arg.contains_key(&(op, a)) => {
                    new.push(Node::Param(by_arg[&(op, a)]))
                }
                Node::D1(op, a) if by_arg.contains_key(&(op, a)) => {
                    let v = new.push(Node::Param(by_arg[&(op, a)]));
                    let x = map[a as usize];
                    let one = new.konst(1.0);
                    match op {
                        // eˣ: v, v
                        Op1::Exp => v,
                        Op1::Exp2 => {
                            let k = new.konst(std::f64::consts::LN_2);
                            new.bin(Op2::Mul, v, k)
                        }
                        Op1::Tanh => {
                            let vv = new.bin(Op2::Mul, v, v);
                            new.bin(Op2::Sub, one, vv)
                        }
                        Op1::Tan => {
                            let vv = new.bin(Op2::Mul, v, v);
                            new.bin(Op2::Add, vv, one)
                        }
                        Op1::Ln => new.bin(Op2::Div, one, x),
                        Op1::Ln1p => {
                            let x1 = new.bin(Op2::Add, x, one);
                            new.bin(Op2::Div, one, x1)
                        }
                        // (atan's derivative does not read its value: the rule table's own,
                        // which takes `(1/x)²` beyond 2²⁷; `1/(x² + 1)` here was 0 beyond
                        // ~1.3e154 and off in the last bit from 2²⁷, where the stored and
                        // recomputed gradients must be bit-identical; a hunter)
                        Op1::Atan => new.push(Node::D1(Op1::Atan, x)),
                        _ => unreachable!("storable primitives are matched above"),
                    }
                }
                _ => new.push(n.map_operands(|o| map[o as usize])),
            };
            map.push(id);
        }
        (new, map)
    }

    /// Copy the nodes reachable from `roots` into a fresh arena, replacing nodes by `subst`
    /// (old id → node of the new arena). Returns the new arena's ids of `roots`.
    pub(crate) fn copy_into(
        &self,
        dst: &mut Arena,
        roots: &[Id],
        subst: &mut HashMap<Id, Id>,
        param_map: &dyn Fn(u32) -> Option<Id>,
    ) -> Vec<Id> {
        let reach = self.reachable(roots);
        for (i, n) in self.nodes.iter().enumerate() {
            let i = i as Id;
            if !reach[i as usize] || subst.contains_key(&i) {
                continue;
            }
            let new = match n {
                Node::Param(k) => match param_map(*k) {
                    Some(id) => id,
                    None => dst.push(n.clone()),
                },
                _ => {
                    let m = n.map_operands(|o| subst[&o]);
                    dst.push(m)
                }
            };
            subst.insert(i, new);
        }
        roots.iter().map(|r| subst[r]).collect()
    }

    pub(crate) fn reachable(&self, roots: &[Id]) -> Vec<bool> {
        let mut r = vec![false; self.nodes.len()];
        for &x in roots {
            r[x as usize] = true;
        }
        for i in (0..self.nodes.len()).rev() {
            if r[i] {
                for o in self.nodes[i].operands() {
                    r[o as usize] = true;
                }
            }
        }
        r
    }

    /// Reverse-mode transform: propagate the adjoints `seeds` (node, adjoint expression)
    /// backwards through the nodes below `limit`; returns each node's adjoint expression.
    /// Propagation stops at parameters, reads, variables and discrete nodes (their adjoints
    /// are returned for the caller to use).
    pub(crate) fn reverse(&mut self, seeds: &[(Id, Id)]) -> Result<HashMap<Id, Id>> {
        let limit = self.nodes.len();
        let mut adj: HashMap<Id, Id> = HashMap::new();
        let acc = |ar: &mut Arena, adj: &mut HashMap<Id, Id>, n: Id, g: Id| {
            if ar.konst_of(g) == Some(0.0) {
                return;
            }
            let v = match adj.get(&n) {
                Some(&e) => ar.add(e, g),
                None => g,
            };
            adj.insert(n, v);
        };
        for &(n, g) in seeds {
            acc(self, &mut adj, n, g);
        }
        for i in (0..limit).rev() {
            let i = i as Id;
            let Some(&g) = adj.get(&i) else { continue };
            let node = self.nodes[i as usize].clone();
            match node {
                Node::Const(_)
                | Node::Param(_)
                | Node::Var(_)
                | Node::Idx(_)
                | Node::Disc(..)
                | Node::Read(..) => {}
                Node::Un(op, a) => {
                    let c = match const_partial1(op) {
                        Some(k) => self.scale(g, k),
                        None => {
                            let d = self.push(Node::D1(op, a));
                            self.push(Node::AdjMul(g, d))
                        }
                    };
                    acc(self, &mut adj, a, c);
                }
                Node::Bin(op, a, b) => {
                    let (ca, cb) = match const_partials2(op) {
                        Some((kx, ky)) => (self.scale(g, kx), self.scale(g, ky)),
                        None => {
                            let dx = self.push(Node::D2(op, 0, a, b));
                            let dy = self.push(Node::D2(op, 1, a, b));
                            (
                                self.push(Node::AdjMul(g, dx)),
                                self.push(Node::AdjMul(g, dy)),
                            )
                        }
                    };
                    acc(self, &mut adj, a, ca);
                    acc(self, &mut adj, b, cb);
                }
                Node::D1(op, a) => {
                    let d = self.push(Node::DD1(op, a));
                    let c = self.push(Node::AdjMul(g, d));
                    acc(self, &mut adj, a, c);
                }
                Node::D2(op, w, a, b) => {
                    let da = self.push(Node::DD2(op, if w == 0 { 0 } else { 1 }, a, b));
                    let db = self.push(Node::DD2(op, if w == 0 { 1 } else { 2 }, a, b));
                    let ca = self.push(Node::AdjMul(g, da));
                    let cb = self.push(Node::AdjMul(g, db));
                    acc(self, &mut adj, a, ca);
                    acc(self, &mut adj, b, cb);
                }
                Node::DD1(..) | Node::DD2(..) => {
                    return Err(Error::Invalid(
                        "derivatives beyond the second order are not supported (the rule table \
                         has first and second partials)"
                            .into(),
                    ))
                }
                Node::AdjMul(x, y) => {
                    // `x · y` is 0 wherever the gate `x` is, whatever `y` (the NaN derivative
                    // of a branch not taken): so is its derivative in `y`, `g · x`, gated by
                    // both (by `g` alone it was NaN from a NaN `g` where `x` is 0: a second
                    // derivative through a `cond` was NaN where the branch taken is `p · p`; by
                    // `x` alone, NaN from an infinite `x` where `g` is 0).
                    let ca = self.push(Node::AdjMul(g, y));
                    let zero = self.konst(0.0);
                    let gx = self.push(Node::AdjMul(g, x));
                    let cb = self.push(Node::Select(x, gx, zero));
                    acc(self, &mut adj, x, ca);
                    acc(self, &mut adj, y, cb);
                }
                // The adjoint of a cast is the reverse cast.
                Node::Cast(to32, a) => {
                    let c = self.push(Node::Cast(!to32, g));
                    acc(self, &mut adj, a, c);
                }
                Node::Select(c, a, b) => {
                    let z = self.konst(0.0);
                    let ga = self.push(Node::Select(c, g, z));
                    let gb = self.push(Node::Select(c, z, g));
                    acc(self, &mut adj, a, ga);
                    acc(self, &mut adj, b, gb);
                }
            }
        }
        Ok(adj)
    }
}

/// An expression function captured from a closure: its DAG, outputs and parameter count.
#[derive(Clone, Debug)]
pub(crate) struct Lambda {
    pub ar: Arena,
    pub outs: Vec<Id>,
    pub nparams: u32,
    /// [`Lambda::reads`], computed on first use (a lambda is not changed after it is built).
    pub reads: std::sync::OnceLock<Vec<u32>>,
}

impl Lambda {
    /// A lambda over `ar` with outputs `outs`.
    pub(crate) fn new(ar: Arena, outs: Vec<Id>, nparams: u32) -> Self {
        Lambda {
            ar,
            outs,
            nparams,
            reads: std::sync::OnceLock::new(),
        }
    }

    /// Array keys read by the lambda (sorted, each once).
    pub(crate) fn reads(&self) -> &[u32] {
        self.reads.get_or_init(|| self.compute_reads())
    }

    fn compute_reads(&self) -> Vec<u32> {
        let reach = self.ar.reachable(&self.outs);
        let mut v: Vec<u32> = self
            .ar
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| reach[*i])
            .filter_map(|(_, n)| match n {
                Node::Read(k, _) => Some(*k),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Number of arithmetic nodes (the recompute heuristic's cost).
    pub(crate) fn cost(&self) -> usize {
        let reach = self.ar.reachable(&self.outs);
        self.ar
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| {
                reach[*i] && !matches!(n, Node::Const(_) | Node::Param(_) | Node::Idx(_))
            })
            .count()
    }

    /// `Some((op, swapped))` when the lambda is exactly `op(p0, p1)` (or `op(p1, p0)`).
    pub(crate) fn as_binop(&self) -> Option<Op2> {
        if self.outs.len() != 1 || self.nparams != 2 {
            return None;
        }
        match &self.ar.nodes[self.outs[0] as usize] {
            Node::Bin(op, a, b) => {
                let p = |i: Id| match self.ar.nodes[i as usize] {
                    Node::Param(k) => Some(k),
                    _ => None,
                };
                let ok = match (p(*a), p(*b)) {
                    (Some(0), Some(1)) => true,
                    (Some(1), Some(0)) => matches!(op, Op2::Add | Op2::Mul | Op2::Max | Op2::Min),
                    _ => false,
                };
                (ok && matches!(op, Op2::Add | Op2::Mul | Op2::Max | Op2::Min)).then_some(*op)
            }
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recording: a thread-local stack of arenas, one per closure being captured.

struct Frame {
    ar: Arena,
    gen: u32,
    owner: u64,
    /// rank of the iteration space (Idx nodes allowed below it)
    error: Option<Error>,
    read_shapes: HashMap<u32, Vec<usize>>,
}

thread_local! {
    static STACK: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    static GEN: RefCell<u32> = const { RefCell::new(0) };
}

/// A scalar expression inside an array combinator's closure (Accelerate's `Exp`).
///
/// `Exp` is `Copy`; arithmetic (`+ - * /`, unary `-`, with `Exp` or `f64` on either side) and
/// methods named like `f64`'s (`sin`, `exp`, `ln`, `powi`, `max`, …) record nodes of the
/// closure's expression DAG. The closure runs once, when the program is built; the DAG is what
/// runs, block-wise over the array. An `Exp` is only valid inside the closure that created it.
///
/// ```
/// use adjoint_array::{Builder, Exp};
/// let b = Builder::new();
/// let x = b.input(&[3]);
/// let y = x.map(|v: Exp| (v * 2.0 + 1.0).sin().max(0.0));
/// let p = b.build(&[&y]).unwrap();
/// let out = p.run(&[&[0.0, 1.0, 2.0]]).unwrap();
/// assert_eq!(out[0].data()[0], 1f64.sin());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Exp {
    pub(crate) id: Id,
    gen: u32,
}

fn with_top<R>(f: impl FnOnce(&mut Frame) -> R) -> R {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        let top = s.last_mut().expect(
            "an Exp was used outside the closure of an array combinator (Exp values only live \
             while their closure is being captured)",
        );
        f(top)
    })
}

pub(crate) fn record_error(e: Error) {
    with_top(|f| {
        if f.error.is_none() {
            f.error = Some(e)
        }
    })
}

/// Push a node whose operands are `Exp`s (checked to belong to the current closure).
fn node_of(ops: &[Exp], make: impl FnOnce(&[Id]) -> Node) -> Exp {
    with_top(|f| {
        if ops.iter().any(|e| e.gen != f.gen) {
            if f.error.is_none() {
                f.error = Some(Error::Invalid(
                    "an Exp from another closure was used (each combinator's closure has its own \
                     expressions; read arrays with `Acc::at` instead)"
                        .into(),
                ));
            }
            let id = f.ar.konst(f64::NAN);
            return Exp { id, gen: f.gen };
        }
        let ids: Vec<Id> = ops.iter().map(|e| e.id).collect();
        let id = f.ar.push(make(&ids));
        Exp { id, gen: f.gen }
    })
}

/// A constant expression (usable inside combinator closures).
///
/// ```
/// use adjoint_array::{lit, Builder};
/// let b = Builder::new();
/// let x = b.input(&[2]);
/// // a number where an expression is needed: here as the receiver of a method
/// let y = x.map(|v| lit(2.0).powf(v)); // 2ˣ
/// let g = b.build_scalar(&y.sum()).unwrap().gradient_a(&[&[1.0, 3.0]]).unwrap();
/// assert!((g.value - (2.0 + 8.0)).abs() < 1e-14);
/// // ∂/∂x 2ˣ = 2ˣ ln 2
/// assert!((g.grads[0][0] - 2.0 * 2f64.ln()).abs() < 1e-15);
/// assert!((g.grads[0][1] - 8.0 * 2f64.ln()).abs() < 1e-14);
/// ```
pub fn lit(v: f64) -> Exp {
    with_top(|f| Exp {
        id: f.ar.konst(v),
        gen: f.gen,
    })
}

impl From<f64> for Exp {
    fn from(v: f64) -> Exp {
        lit(v)
    }
}
impl From<usize> for Exp {
    fn from(v: usize) -> Exp {
        lit(v as f64)
    }
}
impl From<i32> for Exp {
    fn from(v: i32) -> Exp {
        lit(f64::from(v))
    }
}

pub(crate) fn idx_exp(axis: u32) -> Exp {
    with_top(|f| Exp {
        id: f.ar.push(Node::Idx(axis)),
        gen: f.gen,
    })
}

pub(crate) fn read_exp(owner: u64, key: u32, shape: &[usize], ix: &[Exp]) -> Exp {
    let ok = with_top(|f| {
        if f.owner != owner {
            if f.error.is_none() {
                f.error = Some(Error::Invalid(
                    "an array of another program, or of the scope outside an `awhile` body, was \
                     indexed: inside a body, pass an outer array to the loop as an invariant, and \
                     build new arrays from the state and invariants (`s[0].map`, `zip_with`, \
                     `fold`, …), not with the outer `Builder` (`generate`, `acond`, `use_array` \
                     make arrays of the outer scope)"
                        .into(),
                ));
            }
            return false;
        }
        if ix.len() != shape.len() {
            if f.error.is_none() {
                f.error = Some(Error::Invalid(format!(
                    "indexing an array of shape {shape:?} needs {} indices, got {}",
                    shape.len(),
                    ix.len()
                )));
            }
            return false;
        }
        f.read_shapes.insert(key, shape.to_vec());
        true
    });
    if !ok {
        return lit(f64::NAN);
    }
    // Constant indices are checked now.
    let r = node_of(ix, |ids| Node::Read(key, ids.to_vec()));
    with_top(|f| {
        let consts: Vec<Option<f64>> = ix.iter().map(|e| f.ar.konst_of(e.id)).collect();
        for (k, c) in consts.iter().enumerate() {
            if let Some(v) = c {
                if !(*v >= 0.0 && (*v as usize) < shape[k]) && f.error.is_none() {
                    f.error = Some(Error::OutOfBounds {
                        index: consts.iter().map(|c| c.unwrap_or(f64::NAN)).collect(),
                        shape: shape.to_vec(),
                        context: "indexing (constant index)",
                    });
                }
            }
        }
    });
    r
}

/// Capture a closure with `nparams` parameters (and `rank` index variables handed out by the
/// caller through `idx_exp`) into a [`Lambda`].
pub(crate) fn capture(
    owner: u64,
    nparams: u32,
    f: impl FnOnce(&[Exp]) -> Vec<Exp>,
) -> Result<Lambda> {
    let gen = GEN.with(|g| {
        let mut g = g.borrow_mut();
        *g = g.wrapping_add(1);
        *g
    });
    STACK.with(|s| {
        s.borrow_mut().push(Frame {
            ar: Arena::default(),
            gen,
            owner,
            error: None,
            read_shapes: HashMap::new(),
        })
    });
    let params: Vec<Exp> = (0..nparams)
        .map(|k| {
            with_top(|f| Exp {
                id: f.ar.push(Node::Param(k)),
                gen,
            })
        })
        .collect();
    // Pop the frame even if the user's closure panics.
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            STACK.with(|s| {
                s.borrow_mut().pop();
            });
        }
    }
    let outs = {
        let guard = Pop;
        let outs = f(&params);
        let frame = STACK.with(|s| {
            let mut s = s.borrow_mut();
            let top = s.last_mut().expect("frame");
            (std::mem::take(&mut top.ar), top.error.take())
        });
        drop(guard);
        (outs, frame)
    };
    let (outs, (ar, err)) = outs;
    if let Some(e) = err {
        return Err(e);
    }
    if outs.iter().any(|e| e.gen != gen) {
        return Err(Error::Invalid(
            "a closure returned an Exp that belongs to another closure".into(),
        ));
    }
    if holds_placeholder(&ar, &outs) {
        return Err(Error::Invalid(
            "an expression built inside a `gradient_e`/`jacobian_e` closure is used outside it \
             (a value kept from the closure): compute it again outside, from the closure's inputs"
                .into(),
        ));
    }
    Ok(Lambda::new(
        ar,
        outs.iter().map(|e| e.id).collect(),
        nparams,
    ))
}

// ---------------------------------------------------------------------------------------------
// Operators and methods.

macro_rules! binop {
    ($tr:ident, $m:ident, $op:expr) => {
        impl std::ops::$tr<Exp> for Exp {
            type Output = Exp;
            fn $m(self, r: Exp) -> Exp {
                node_of(&[self, r], |i| Node::Bin($op, i[0], i[1]))
            }
        }
        impl std::ops::$tr<f64> for Exp {
            type Output = Exp;
            fn $m(self, r: f64) -> Exp {
                let r = lit(r);
                node_of(&[self, r], |i| Node::Bin($op, i[0], i[1]))
            }
        }
        impl std::ops::$tr<Exp> for f64 {
            type Output = Exp;
            fn $m(self, r: Exp) -> Exp {
                let l = lit(self);
                node_of(&[l, r], |i| Node::Bin($op, i[0], i[1]))
            }
        }
    };
}
binop!(Add, add, Op2::Add);
binop!(Sub, sub, Op2::Sub);
binop!(Mul, mul, Op2::Mul);
binop!(Div, div, Op2::Div);
binop!(Rem, rem, Op2::Rem);

// Index arithmetic with Rust's index type: `i[0] + k`, `2 * i[0]`, `i[0] % n` (exact on whole
// numbers below 2⁵³). No `/`: `usize` division rounds down, an `Exp` quotient would not; that
// is `idiv`. (One integer type only, so that an integer literal still infers.)
macro_rules! binop_usize {
    ($($tr:ident $m:ident $op:tt),*) => {$(
        impl std::ops::$tr<usize> for Exp {
            type Output = Exp;
            fn $m(self, r: usize) -> Exp {
                self $op r as f64
            }
        }
        impl std::ops::$tr<Exp> for usize {
            type Output = Exp;
            fn $m(self, r: Exp) -> Exp {
                self as f64 $op r
            }
        }
    )*};
}
binop_usize!(Add add +, Sub sub -, Mul mul *, Rem rem %);

// `acc += v`, as on `f64` (an `Exp` is a handle: the new value is a new node).
macro_rules! assign_op {
    ($($tr:ident $m:ident $op:tt),*) => {$(
        impl<T: Into<Exp>> std::ops::$tr<T> for Exp {
            fn $m(&mut self, r: T) {
                *self = *self $op r.into();
            }
        }
    )*};
}
assign_op!(AddAssign add_assign +, SubAssign sub_assign -, MulAssign mul_assign *,
    DivAssign div_assign /, RemAssign rem_assign %);

/// Logical and of two booleans (`0.0` is false), as `&` on `bool`: `v.gt(0.0) & v.lt(1.0)`
/// (Rust does not let `&&` be defined for a type).
impl std::ops::BitAnd for Exp {
    type Output = Exp;
    fn bitand(self, r: Exp) -> Exp {
        self.and(r)
    }
}

/// Logical or of two booleans, as `|` on `bool`.
impl std::ops::BitOr for Exp {
    type Output = Exp;
    fn bitor(self, r: Exp) -> Exp {
        self.or(r)
    }
}

/// `v.iter().sum()` of expressions (`-0.0` for none, as `f64`'s).
impl std::iter::Sum for Exp {
    fn sum<I: Iterator<Item = Exp>>(it: I) -> Exp {
        let mut it = it;
        match it.next() {
            Some(first) => it.fold(first, |a, b| a + b),
            None => lit(-0.0),
        }
    }
}
impl<'a> std::iter::Sum<&'a Exp> for Exp {
    fn sum<I: Iterator<Item = &'a Exp>>(it: I) -> Exp {
        it.copied().sum()
    }
}

/// `v.iter().product()` of expressions (`1` for none).
impl std::iter::Product for Exp {
    fn product<I: Iterator<Item = Exp>>(it: I) -> Exp {
        let mut it = it;
        match it.next() {
            Some(first) => it.fold(first, |a, b| a * b),
            None => lit(1.0),
        }
    }
}
impl<'a> std::iter::Product<&'a Exp> for Exp {
    fn product<I: Iterator<Item = &'a Exp>>(it: I) -> Exp {
        it.copied().product()
    }
}

/// Logical not of a boolean (`0.0` is false): `!c`.
impl std::ops::Not for Exp {
    type Output = Exp;
    fn not(self) -> Exp {
        self.disc1(DOp::Not)
    }
}

impl std::ops::Neg for Exp {
    type Output = Exp;
    fn neg(self) -> Exp {
        self.un(Op1::Neg)
    }
}

/// Unary methods, each documented with an example that checks its value at `$at` against the
/// shared rule table and its derivative against central differences of the program itself.
macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr, $at:literal;)*) => {
        $(
            $(#[$doc])*
            #[doc = concat!(
                "\n\n```\n",
                "use adjoint_array::Builder;\n",
                "use adjoint_core::check::check_gradient;\n",
                "use adjoint_core::rules::{unary, Op1};\n",
                "let b = Builder::new();\n",
                "let x = b.input(&[1]);\n",
                "let p = b.build_scalar(&x.map(|v| v.", stringify!($name), "()).sum()).unwrap();\n",
                "let g = p.gradient_a(&[&[", stringify!($at), "]]).unwrap();\n",
                "// the value of the rule table every engine shares\n",
                "let r = unary(", stringify!($op), ", ", stringify!($at), "f64);\n",
                "assert!((g.value - r.value).abs() <= 1e-14 * r.value.abs());\n",
                "// the derivative against central differences of the program's values\n",
                "let f = |v: &[f64]| p.run(&[v]).unwrap()[0].data()[0];\n",
                "check_gradient(f, &[", stringify!($at), "], &g.grads[0]).assert_passed();\n",
                "```"
            )]
            pub fn $name(self) -> Exp { self.un($op) }
        )*
    };
}

/// Comparisons and logic, each documented with an example against the same operation on
/// `f64` (`$plain`, a closure of two `f64`).
macro_rules! disc_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr, $plain:expr;)*) => {
        $(
            $(#[$doc])*
            #[doc = concat!(
                "\n\n```\n",
                "use adjoint_array::Builder;\n",
                "let b = Builder::new();\n",
                "let (x, y) = (b.input(&[4]), b.input(&[4]));\n",
                "let z = x.zip_with(&y, |a, c| a.", stringify!($name), "(c));\n",
                "let (xs, ys) = ([0.0, 1.0, 2.0, 7.0], [1.0, 1.0, -3.0, 2.0]);\n",
                "let out = b.build(&[&z]).unwrap().run(&[&xs, &ys]).unwrap();\n",
                "let plain = ", stringify!($plain), ";\n",
                "for i in 0..4 {\n",
                "    assert_eq!(out[0].data()[i], plain(xs[i], ys[i]));\n",
                "}\n",
                "```"
            )]
            pub fn $name(self, other: impl Into<Exp>) -> Exp {
                let o = other.into();
                node_of(&[self, o], |i| Node::Disc($op, i[0], i[1]))
            }
        )*
    };
}

impl Exp {
    /// Apply a unary primitive of the rule table (what `x.sin()` and the other methods call).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// use adjoint_core::rules::Op1;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build_scalar(&x.map(|v| v.un(Op1::Powi(3))).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0, -1.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (7.0, &[12.0, 3.0][..]));
    /// ```
    pub fn un(self, op: Op1) -> Exp {
        node_of(&[self], |i| Node::Un(op, i[0]))
    }
    /// Apply a binary primitive of the rule table (what `x.powf(y)` and the other methods
    /// call).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// use adjoint_core::rules::Op2;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| v.bin(Op2::Mul, v + 1.0)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[3.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0][0]), (12.0, 7.0)); // x(x + 1), 2x + 1
    /// ```
    pub fn bin(self, op: Op2, other: impl Into<Exp>) -> Exp {
        let o = other.into();
        node_of(&[self, o], |i| Node::Bin(op, i[0], i[1]))
    }
    fn disc1(self, op: DOp) -> Exp {
        node_of(&[self], |i| Node::Disc(op, i[0], i[0]))
    }
    unary_methods! {
        /// `sin`
        sin => Op1::Sin, 0.5;
        /// `cos`
        cos => Op1::Cos, 0.5;
        /// `tan`
        tan => Op1::Tan, 0.5;
        /// `exp`
        exp => Op1::Exp, 0.5;
        /// `exp2`
        exp2 => Op1::Exp2, 0.5;
        /// `exp_m1`
        exp_m1 => Op1::ExpM1, 0.5;
        /// natural logarithm
        ln => Op1::Ln, 0.5;
        /// `ln_1p`
        ln_1p => Op1::Ln1p, 0.5;
        /// `log2`
        log2 => Op1::Log2, 0.5;
        /// `log10`
        log10 => Op1::Log10, 0.5;
        /// `sqrt`
        sqrt => Op1::Sqrt, 0.5;
        /// `cbrt`
        cbrt => Op1::Cbrt, 0.5;
        /// `1/x`
        recip => Op1::Recip, 0.5;
        /// `asin`
        asin => Op1::Asin, 0.5;
        /// `acos`
        acos => Op1::Acos, 0.5;
        /// `atan`
        atan => Op1::Atan, 0.5;
        /// `sinh`
        sinh => Op1::Sinh, 0.5;
        /// `cosh`
        cosh => Op1::Cosh, 0.5;
        /// `tanh`
        tanh => Op1::Tanh, 0.5;
        /// `asinh`
        asinh => Op1::Asinh, 0.5;
        /// `acosh`
        acosh => Op1::Acosh, 1.5;
        /// `atanh`
        atanh => Op1::Atanh, 0.5;
        /// `abs`
        abs => Op1::Abs, -0.5;
        /// the error function
        erf => Op1::Erf, 0.5;
        /// `ln Γ`
        lgamma => Op1::Lgamma, 0.5;
        /// `ψ = (ln Γ)′`
        digamma => Op1::Polygamma(0), 0.5;
    }
    /// `ψ⁽ⁿ⁾`, the n-th derivative of the digamma function (`polygamma(0)` is `digamma`).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| v.polygamma(1)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[1.0]]).unwrap();
    /// // ψ′(1) = π²/6, ψ″(1) = −2ζ(3)
    /// assert!((g.value - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-14);
    /// assert!((g.grads[0][0] + 2.0 * 1.2020569031595942).abs() < 1e-13);
    /// ```
    pub fn polygamma(self, n: u32) -> Exp {
        self.un(Op1::Polygamma(n))
    }
    /// `self · a + b`, as `f64::mul_add` but rounded twice (a multiplication, then an
    /// addition; derivatives are the same).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build_scalar(&x.map(|v| v.mul_add(v, 1.0)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0, -3.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (15.0, &[4.0, -6.0][..]));
    /// ```
    pub fn mul_add(self, a: impl Into<Exp>, b: impl Into<Exp>) -> Exp {
        self * a.into() + b.into()
    }
    /// `1.0` for `+0.0` and positive numbers, `-1.0` for `-0.0` and negative ones, NaN for NaN,
    /// as `f64::signum` (derivative 0).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let y = x.map(|v| v.signum());
    /// let out = b.build(&[&y]).unwrap().run(&[&[-2.0, -0.0, 0.0, 3.0, f64::NAN]]).unwrap();
    /// assert_eq!(out[0].data()[..4], [-1.0, -1.0, 1.0, 1.0]);
    /// assert!(out[0].data()[4].is_nan());
    /// ```
    pub fn signum(self) -> Exp {
        self.is_nan()
            .select(self, self.is_sign_negative().select(-1.0, 1.0))
    }
    /// `|self|` with the sign of `sign`, as `f64::copysign` (derivative `±1` in `self`, 0 in
    /// `sign`): `self` or `−self`, as `Real::copysign` in the other engines (built from `abs`,
    /// its derivative at `self = ±0` was `abs`'s 0; a hunter).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let p = b.build_scalar(&x.map(|v| v.copysign(-2.0)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[0.0, 3.0, -1.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (-4.0, &[-1.0, -1.0, 1.0][..]));
    /// ```
    pub fn copysign(self, sign: impl Into<Exp>) -> Exp {
        let (s, x) = (sign.into().is_sign_negative(), self.is_sign_negative());
        s.select(x.select(self, -self), x.select(-self, self))
    }
    /// Whether the sign bit is set (`-0.0`, negative numbers), as `f64::is_sign_negative`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let xs = [-0.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    /// let p = b.build(&[&x.map(|v| v.is_sign_negative())]).unwrap();
    /// let out = p.run(&[&xs]).unwrap();
    /// let want: Vec<f64> = xs.iter().map(|v| f64::from(u8::from(v.is_sign_negative()))).collect();
    /// assert_eq!(out[0].data(), want);
    /// ```
    pub fn is_sign_negative(self) -> Exp {
        self.disc1(DOp::SignBit)
    }
    /// Whether the sign bit is clear, as `f64::is_sign_positive`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let xs = [-0.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    /// let p = b.build(&[&x.map(|v| v.is_sign_positive())]).unwrap();
    /// let out = p.run(&[&xs]).unwrap();
    /// let want: Vec<f64> = xs.iter().map(|v| f64::from(u8::from(v.is_sign_positive()))).collect();
    /// assert_eq!(out[0].data(), want);
    /// ```
    pub fn is_sign_positive(self) -> Exp {
        !self.is_sign_negative()
    }
    /// Whether `self` is NaN, as `f64::is_nan`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let xs = [-0.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    /// let p = b.build(&[&x.map(|v| v.is_nan())]).unwrap();
    /// let out = p.run(&[&xs]).unwrap();
    /// let want: Vec<f64> = xs.iter().map(|v| f64::from(u8::from(v.is_nan()))).collect();
    /// assert_eq!(out[0].data(), want);
    /// ```
    pub fn is_nan(self) -> Exp {
        self.ne(self)
    }
    /// Whether `self` is neither infinite nor NaN, as `f64::is_finite`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let xs = [-0.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    /// let p = b.build(&[&x.map(|v| v.is_finite())]).unwrap();
    /// let out = p.run(&[&xs]).unwrap();
    /// let want: Vec<f64> = xs.iter().map(|v| f64::from(u8::from(v.is_finite()))).collect();
    /// assert_eq!(out[0].data(), want);
    /// ```
    pub fn is_finite(self) -> Exp {
        self.abs().lt(f64::INFINITY)
    }
    /// Whether `self` is `±∞`, as `f64::is_infinite`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[5]);
    /// let xs = [-0.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    /// let p = b.build(&[&x.map(|v| v.is_infinite())]).unwrap();
    /// let out = p.run(&[&xs]).unwrap();
    /// let want: Vec<f64> = xs.iter().map(|v| f64::from(u8::from(v.is_infinite()))).collect();
    /// assert_eq!(out[0].data(), want);
    /// ```
    pub fn is_infinite(self) -> Exp {
        self.abs().eq(f64::INFINITY)
    }
    /// `self − trunc(self)`, as `f64::fract` (derivative 1).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build_scalar(&x.map(|v| v.fract()).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.25, -1.5]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (0.25 - 0.5, &[1.0, 1.0][..]));
    /// ```
    pub fn fract(self) -> Exp {
        self - self.trunc()
    }
    /// Radians to degrees, as `f64::to_degrees`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| v.to_degrees()).sum()).unwrap();
    /// let g = p.gradient_a(&[&[std::f64::consts::FRAC_PI_2]]).unwrap();
    /// assert!((g.value - 90.0).abs() < 1e-12);
    /// assert!((g.grads[0][0] - 180.0 / std::f64::consts::PI).abs() < 1e-12);
    /// ```
    pub fn to_degrees(self) -> Exp {
        self * (180.0f64 / std::f64::consts::PI)
    }
    /// Degrees to radians, as `f64::to_radians`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| v.to_radians()).sum()).unwrap();
    /// let g = p.gradient_a(&[&[180.0]]).unwrap();
    /// assert!((g.value - std::f64::consts::PI).abs() < 1e-15);
    /// assert!((g.grads[0][0] - std::f64::consts::PI / 180.0).abs() < 1e-17);
    /// ```
    pub fn to_radians(self) -> Exp {
        self * (std::f64::consts::PI / 180.0)
    }
    /// `xⁿ`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build_scalar(&x.map(|v| v.powi(-2)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0, -0.5]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (4.25, &[-0.25, 16.0][..]));
    /// ```
    pub fn powi(self, n: i32) -> Exp {
        self.un(Op1::Powi(n))
    }
    /// `xʸ`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[1]), b.input(&[1]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.powf(c)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0], &[3.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0][0]), (8.0, 12.0)); // y·x^(y−1)
    /// assert!((g.grads[1][0] - 8.0 * 2f64.ln()).abs() < 1e-14); // xʸ ln x
    /// ```
    pub fn powf(self, y: impl Into<Exp>) -> Exp {
        self.bin(Op2::Powf, y)
    }
    /// `max`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[1]), b.input(&[1]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.max(c)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0], &[-1.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0][0], g.grads[1][0]), (2.0, 1.0, 0.0));
    /// ```
    pub fn max(self, y: impl Into<Exp>) -> Exp {
        self.bin(Op2::Max, y)
    }
    /// `min`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[1]), b.input(&[1]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.min(c)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[2.0], &[-1.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0][0], g.grads[1][0]), (-1.0, 0.0, 1.0));
    /// ```
    pub fn min(self, y: impl Into<Exp>) -> Exp {
        self.bin(Op2::Min, y)
    }
    /// `atan2(self, y)`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[1]), b.input(&[1]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.atan2(c)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[1.0], &[1.0]]).unwrap();
    /// assert!((g.value - std::f64::consts::FRAC_PI_4).abs() < 1e-15);
    /// // ∂/∂a = c/(a² + c²), ∂/∂c = −a/(a² + c²)
    /// assert!((g.grads[0][0] - 0.5).abs() < 1e-15 && (g.grads[1][0] + 0.5).abs() < 1e-15);
    /// ```
    pub fn atan2(self, y: impl Into<Exp>) -> Exp {
        self.bin(Op2::Atan2, y)
    }
    /// `hypot`
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[1]), b.input(&[1]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.hypot(c)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[3.0], &[4.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0][0], g.grads[1][0]), (5.0, 0.6, 0.8));
    /// ```
    pub fn hypot(self, y: impl Into<Exp>) -> Exp {
        self.bin(Op2::Hypot, y)
    }
    /// `self` restricted to `[lo, hi]`, as `f64::clamp` (NaN stays NaN; derivative 1 inside
    /// and at the bounds, 0 outside in `self`, 1 in the bound taken). Constant bounds with
    /// `lo > hi` (or a NaN) are a build error, as `f64::clamp` panics there; bounds computed
    /// when the program runs are not checked: with `lo > hi`, values below `lo` give `lo` and
    /// all others `hi`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let y = x.map(|v| v.clamp(-1.0, 1.0));
    /// let out = b.build(&[&y]).unwrap().run(&[&[-2.0, 0.5, 3.0]]).unwrap();
    /// assert_eq!(out[0].data(), [-1.0, 0.5, 1.0]);
    /// ```
    pub fn clamp(self, lo: impl Into<Exp>, hi: impl Into<Exp>) -> Exp {
        let (lo, hi) = (lo.into(), hi.into());
        // (crossed constant bounds built a non-monotone clamp, `clamp(1, -1)` of [-5, 0, 5]
        // giving [1, 1, -1], where `f64::clamp` panics; a hunter)
        let bounds = with_top(|f| (f.ar.konst_of(lo.id), f.ar.konst_of(hi.id)));
        if let (Some(l), Some(h)) = bounds {
            if l > h || l.is_nan() || h.is_nan() {
                record_error(Error::Invalid(format!(
                    "clamp: the lower bound {l} is not ≤ the upper bound {h}, or one is NaN (as \
                     f64::clamp)"
                )));
            }
        }
        self.lt(lo).select(lo, self.gt(hi).select(hi, self))
    }
    /// `(sin x, cos x)`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| { let (s, c) = v.sin_cos(); s * c }).sum()).unwrap();
    /// let g = p.gradient_a(&[&[0.3]]).unwrap();
    /// assert!((g.grads[0][0] - (2.0 * 0.3f64).cos()).abs() < 1e-15); // (sin x cos x)′ = cos 2x
    /// ```
    pub fn sin_cos(self) -> (Exp, Exp) {
        (self.sin(), self.cos())
    }
    /// `log_base x`, as `f64::log`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1]);
    /// let p = b.build_scalar(&x.map(|v| v.log(3.0)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[9.0]]).unwrap();
    /// assert!((g.value - 2.0).abs() < 1e-15);
    /// assert!((g.grads[0][0] - 1.0 / (9.0 * 3f64.ln())).abs() < 1e-16);
    /// ```
    pub fn log(self, base: impl Into<Exp>) -> Exp {
        self.ln() / base.into().ln()
    }
    /// Convert to `f32` (rounded to nearest): inside a closure, to combine an `f64` value with
    /// `f32` ones, or to make a `generate` produce an `f32` array. The adjoint is widened back.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let g = b.generate(&[3], |i| (i[0] * 0.1).cast_f32());
    /// assert_eq!(g.dtype(), DType::F32);
    /// let out = b.build(&[&g]).unwrap().run(&[]).unwrap();
    /// assert_eq!(out[0].data()[1], f64::from(0.1f32));
    /// ```
    pub fn cast_f32(self) -> Exp {
        node_of(&[self], |i| Node::Cast(true, i[0]))
    }
    /// Convert to `f64` (exact for an `f32` value); the adjoint is rounded to `f32`.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[2]);
    /// let y = b.input(&[2]);
    /// let z = x.zip_with(&y, |a, c| a.cast_f64() * c);
    /// assert_eq!(z.dtype(), DType::F64);
    /// ```
    pub fn cast_f64(self) -> Exp {
        node_of(&[self], |i| Node::Cast(false, i[0]))
    }
    /// `floor` (derivative 0)
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let xs = [-1.5, -0.5, 0.5, 2.7];
    /// let p = b.build_scalar(&x.map(|v| v.floor() * v).sum()).unwrap();
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// // a step function: derivative 0, so only the factor `v` is differentiated
    /// let want: Vec<f64> = xs.iter().map(|v| v.floor()).collect();
    /// assert_eq!(g.grads[0], want);
    /// ```
    pub fn floor(self) -> Exp {
        self.disc1(DOp::Floor)
    }
    /// `ceil` (derivative 0)
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let xs = [-1.5, -0.5, 0.5, 2.7];
    /// let p = b.build_scalar(&x.map(|v| v.ceil() * v).sum()).unwrap();
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// // a step function: derivative 0, so only the factor `v` is differentiated
    /// let want: Vec<f64> = xs.iter().map(|v| v.ceil()).collect();
    /// assert_eq!(g.grads[0], want);
    /// ```
    pub fn ceil(self) -> Exp {
        self.disc1(DOp::Ceil)
    }
    /// `round` (half away from zero, as `f64::round`; derivative 0)
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let xs = [-1.5, -0.5, 0.5, 2.7];
    /// let p = b.build_scalar(&x.map(|v| v.round() * v).sum()).unwrap();
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// // a step function: derivative 0, so only the factor `v` is differentiated
    /// let want: Vec<f64> = xs.iter().map(|v| v.round()).collect();
    /// assert_eq!(g.grads[0], want);
    /// ```
    pub fn round(self) -> Exp {
        self.disc1(DOp::Round)
    }
    /// `trunc` (derivative 0)
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let xs = [-1.5, -0.5, 0.5, 2.7];
    /// let p = b.build_scalar(&x.map(|v| v.trunc() * v).sum()).unwrap();
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// // a step function: derivative 0, so only the factor `v` is differentiated
    /// let want: Vec<f64> = xs.iter().map(|v| v.trunc()).collect();
    /// assert_eq!(g.grads[0], want);
    /// ```
    pub fn trunc(self) -> Exp {
        self.disc1(DOp::Trunc)
    }
    disc_methods! {
        /// `self < other` as `1.0`/`0.0`
        lt => DOp::Lt, |a: f64, c: f64| f64::from(u8::from(a < c));
        /// `self <= other`
        le => DOp::Le, |a: f64, c: f64| f64::from(u8::from(a <= c));
        /// `self > other`
        gt => DOp::Gt, |a: f64, c: f64| f64::from(u8::from(a > c));
        /// `self >= other`
        ge => DOp::Ge, |a: f64, c: f64| f64::from(u8::from(a >= c));
        /// `self == other`
        eq => DOp::Eq, |a: f64, c: f64| f64::from(u8::from(a == c));
        /// `self != other`
        ne => DOp::Ne, |a: f64, c: f64| f64::from(u8::from(a != c));
        /// logical and (`0.0` is false)
        and => DOp::And, |a: f64, c: f64| f64::from(u8::from(a != 0.0 && c != 0.0));
        /// logical or (`0.0` is false)
        or => DOp::Or, |a: f64, c: f64| f64::from(u8::from(a != 0.0 || c != 0.0));
        /// floor division of whole numbers (`⌊self / other⌋`)
        idiv => DOp::IDiv, |a: f64, c: f64| (a / c).floor();
    }
    /// Floor modulus (Haskell's `mod`: the sign of `other`), computed by that formula,
    /// `self − other·⌊self / other⌋`, with its derivatives: 1 in `self` (a wrapped angle keeps
    /// its gradient), `−⌊self / other⌋` in `other`. (It had derivative 0, as a discrete
    /// operation; a hunter.) The quotient `self / other` is rounded before the floor, so where
    /// it rounds up to a whole number the result differs from the exact remainder
    /// ([`Exp::rem_euclid`]): `1.0.imod(0.1)` is 0 with derivative −10 in `other`, where
    /// `1f64.rem_euclid(0.1)` is 0.0999… and its quotient 9. `%` is Rust's remainder, with the
    /// sign of `self`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// use std::f64::consts::PI;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build_scalar(&x.map(|v| v.imod(2.0 * PI).sin()).sum()).unwrap();
    /// let g = p.gradient_a(&[&[7.0, -2.0]]).unwrap();
    /// assert_eq!(g.grads[0], [7f64.rem_euclid(2.0 * PI).cos(), (-2f64).rem_euclid(2.0 * PI).cos()]);
    /// ```
    pub fn imod(self, other: impl Into<Exp>) -> Exp {
        let o = other.into();
        self - o * self.idiv(o)
    }
    /// The Euclidean remainder, as `f64::rem_euclid` computes it (`self % other`, plus
    /// `|other|` where that is negative: in `[0, |other|)`), with derivatives 1 in `self` and
    /// minus the integer quotient in `other`. (For a positive `other` it agrees with
    /// [`Exp::imod`] except where `imod`'s rounded quotient `self / other` lands on a whole
    /// number the exact one does not reach.)
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[4]), b.input(&[4]));
    /// let p = b.build_scalar(&x.zip_with(&y, |a, c| a.rem_euclid(c)).sum()).unwrap();
    /// let (xs, ys) = ([7.5, -7.5, 7.5, -7.5], [2.0, 2.0, -2.0, -2.0]);
    /// let g = p.gradient_a(&[&xs, &ys]).unwrap();
    /// let want: f64 = xs.iter().zip(&ys).map(|(a, c)| a.rem_euclid(*c)).sum();
    /// assert_eq!(g.value, want);
    /// assert_eq!(g.grads[0], [1.0; 4]);
    /// // minus the quotients: 7.5 = 3·2 + 1.5, −7.5 = −4·2 + 0.5, 7.5 = −3·(−2) + 1.5, …
    /// assert_eq!(g.grads[1], [-3.0, 4.0, 3.0, -4.0]);
    /// ```
    pub fn rem_euclid(self, other: impl Into<Exp>) -> Exp {
        let o = other.into();
        let r = self % o;
        r.lt(0.0).select(r + o.abs(), r)
    }
    /// `if self { a } else { b }` (Accelerate's `cond`). Only the branch taken contributes to
    /// derivatives, and array reads in the other branch are not performed (no out-of-bounds
    /// errors from them).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// // |x|·x written with a branch: the gradient is 2|x|
    /// let p = b.build_scalar(&x.map(|v| v.lt(0.0).select(-v * v, v * v)).sum()).unwrap();
    /// let g = p.gradient_a(&[&[-2.0, 0.5, 3.0]]).unwrap();
    /// assert_eq!((g.value, g.grads[0].as_slice()), (-4.0 + 0.25 + 9.0, &[4.0, 1.0, 6.0][..]));
    /// ```
    pub fn select(self, a: impl Into<Exp>, b: impl Into<Exp>) -> Exp {
        let (a, b) = (a.into(), b.into());
        node_of(&[self, a, b], |i| Node::Select(i[0], i[1], i[2]))
    }
}

/// `if c { a } else { b }`: see [`Exp::select`].
///
/// ```
/// use adjoint_array::{cond, Builder};
/// let b = Builder::new();
/// let x = b.input(&[4]);
/// let leaky = x.map(|v| cond(v.gt(0.0), v, v * 0.1));
/// // x shifted left, 0 at the end: x[4] in the branch not taken is never read
/// let next = b.generate(&[4], |i| cond(i[0].lt(3.0), x.at(&[i[0] + 1.0]), 0.0));
/// let p = b.build(&[&leaky, &next]).unwrap();
/// let xs = [-2.0, -0.5, 0.5, 3.0];
/// let out = p.run(&[&xs]).unwrap();
/// let want: Vec<f64> = xs.iter().map(|&v| if v > 0.0 { v } else { v * 0.1 }).collect();
/// assert_eq!(out[0].data(), want);
/// assert_eq!(out[1].data(), [xs[1], xs[2], xs[3], 0.0]);
/// let g = b.build_scalar(&leaky.sum()).unwrap().gradient_a(&[&xs]).unwrap();
/// assert_eq!(g.grads[0], [0.1, 0.1, 1.0, 1.0]);
/// ```
pub fn cond(c: Exp, a: impl Into<Exp>, b: impl Into<Exp>) -> Exp {
    c.select(a, b)
}

/// Expression-level gradient (the seed's `gradientE`): the partial derivatives of `f` at `xs`,
/// as expressions. Usable inside any combinator's closure, e.g. to produce Jacobian blocks in a
/// `generate_n` over observations.
///
/// ```
/// use adjoint_array::{gradient_e, Builder};
/// let b = Builder::new();
/// let x = b.input(&[2]);
/// let d = x.map(|v| gradient_e(&[v], |p| p[0].sin() * p[0])[0]);
/// let out = b.build(&[&d]).unwrap().run(&[&[0.5, 1.0]]).unwrap();
/// assert!((out[0].data()[0] - (0.5f64.cos() * 0.5 + 0.5f64.sin())).abs() < 1e-15);
/// ```
pub fn gradient_e(xs: &[Exp], f: impl FnOnce(&[Exp]) -> Exp) -> Vec<Exp> {
    let rows = jacobian_e(xs, |v| vec![f(v)]);
    rows.into_iter().next().unwrap_or_default()
}

/// Expression-level Jacobian: `result[r][i] = ∂f_r/∂xs[i]` (one reverse sweep per output).
///
/// ```
/// use adjoint_array::{jacobian_e, lit, Builder};
/// let b = Builder::new();
/// let x = b.input(&[2, 2]); // two points (u, v)
/// // per point, the Jacobian of (u·v, sin u) w.r.t. (u, v), row by row: [v, u, cos u, 0]
/// let jac = b.generate_n(&[2], 4, |i| {
///     let (u, v) = (x.at(&[i[0], lit(0.0)]), x.at(&[i[0], lit(1.0)]));
///     jacobian_e(&[u, v], |p| vec![p[0] * p[1], p[0].sin()]).concat()
/// });
/// let xs = [0.5, 2.0, 1.0, -3.0];
/// let out = b.build(&[&jac]).unwrap().run(&[&xs]).unwrap();
/// for (uv, blk) in xs.chunks(2).zip(out[0].data().chunks(4)) {
///     let (u, v) = (uv[0], uv[1]);
///     assert_eq!(&blk[..2], [v, u]);
///     assert!((blk[2] - u.cos()).abs() < 1e-15 && blk[3] == 0.0);
/// }
/// ```
pub fn jacobian_e(xs: &[Exp], f: impl FnOnce(&[Exp]) -> Vec<Exp>) -> Vec<Vec<Exp>> {
    let gen = with_top(|fr| fr.gen);
    if xs.iter().any(|e| e.gen != gen) {
        record_error(Error::Invalid(
            "gradient_e was given an Exp of another closure".into(),
        ));
        return vec![];
    }
    // Fresh placeholder variables, so that the derivative is w.r.t. the arguments as
    // independent variables, then substituted by the actual arguments.
    let base = with_top(|fr| fr.ar.nodes.len() as u32);
    let vars: Vec<Exp> = (0..xs.len())
        .map(|k| {
            with_top(|fr| Exp {
                id: fr.ar.push(Node::Var(base + k as u32)),
                gen,
            })
        })
        .collect();
    let ys = f(&vars);
    if ys.iter().any(|e| e.gen != gen) {
        record_error(Error::Invalid(
            "gradient_e's function returned an Exp of another closure".into(),
        ));
        return vec![];
    }
    with_top(|fr| {
        let mut out = Vec::new();
        for y in &ys {
            let one = fr.ar.konst(1.0);
            let adj = match fr.ar.reverse(&[(y.id, one)]) {
                Ok(a) => a,
                Err(e) => {
                    fr.error.get_or_insert(e);
                    return vec![];
                }
            };
            let zero = fr.ar.konst(0.0);
            let row: Vec<Id> = vars
                .iter()
                .map(|v| adj.get(&v.id).copied().unwrap_or(zero))
                .collect();
            out.push(row);
        }
        // Substitute the variables by the arguments (copy the reachable DAG once).
        let roots: Vec<Id> = out.iter().flatten().copied().collect();
        let mut subst: HashMap<Id, Id> = vars.iter().zip(xs).map(|(v, x)| (v.id, x.id)).collect();
        let src = fr.ar.clone();
        let new = src.copy_into(&mut fr.ar, &roots, &mut subst, &|_| None);
        let mut it = new.into_iter();
        out.iter()
            .map(|r| {
                r.iter()
                    .map(|_| Exp {
                        id: it.next().expect("root"),
                        gen,
                    })
                    .collect()
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_partials_match_the_rule_table() {
        for &x in &[-2.5, 0.0, 1.0, 3.7] {
            for &y in &[-1.0, 0.5, 2.0] {
                for op in [Op2::Add, Op2::Sub] {
                    let r = rules::binary(op, x, y);
                    assert_eq!(const_partials2(op), Some((r.dx, r.dy)));
                }
            }
            assert_eq!(const_partial1(Op1::Neg), Some(rules::unary(Op1::Neg, x).d));
        }
    }
}
