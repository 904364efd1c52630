//! The SSA intermediate representation: basic blocks with block arguments (phi nodes).
//!
//! A [`Func`] is a list of [`Block`]s; block 0 is the entry, whose parameters are the function's
//! scalar parameters. Every [`Inst`] defines at most one value ([`Val`], an index into
//! [`Func::values`]); a block ends in a [`Term`] that jumps to other blocks passing arguments for
//! their parameters. Slices (`&[f64]` / `&mut [f64]` parameters and local fixed-size arrays) are
//! memory: [`Inst::Load`] reads an element into a value, [`Inst::Store`] writes one.

use adjoint_core::rules::{Op1, Op2};
use proc_macro2::{Span, TokenStream};
use std::fmt::{self, Write};

/// An SSA value: an index into [`Func::values`].
pub type Val = usize;
/// A basic block: an index into [`Func::blocks`].
pub type BlockId = usize;
/// A slice: an index into [`Func::slices`].
pub type SliceId = usize;

/// Integer types (all passive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum IntTy {
    Usize,
    Isize,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
}

impl IntTy {
    /// Parse a Rust integer type name.
    pub fn from_name(s: &str) -> Option<IntTy> {
        Some(match s {
            "usize" => IntTy::Usize,
            "isize" => IntTy::Isize,
            "u8" => IntTy::U8,
            "u16" => IntTy::U16,
            "u32" => IntTy::U32,
            "u64" => IntTy::U64,
            "i8" => IntTy::I8,
            "i16" => IntTy::I16,
            "i32" => IntTy::I32,
            "i64" => IntTy::I64,
            _ => return None,
        })
    }
    /// The Rust name.
    pub fn name(self) -> &'static str {
        match self {
            IntTy::Usize => "usize",
            IntTy::Isize => "isize",
            IntTy::U8 => "u8",
            IntTy::U16 => "u16",
            IntTy::U32 => "u32",
            IntTy::U64 => "u64",
            IntTy::I8 => "i8",
            IntTy::I16 => "i16",
            IntTy::I32 => "i32",
            IntTy::I64 => "i64",
        }
    }
    /// Wrap an interpreter value to this type's range (as Rust's `as` does).
    pub fn wrap(self, v: i128) -> i128 {
        match self {
            IntTy::Usize | IntTy::U64 => v as u64 as i128,
            IntTy::Isize | IntTy::I64 => v as i64 as i128,
            IntTy::U8 => v as u8 as i128,
            IntTy::U16 => v as u16 as i128,
            IntTy::U32 => v as u32 as i128,
            IntTy::I8 => v as i8 as i128,
            IntTy::I16 => v as i16 as i128,
            IntTy::I32 => v as i32 as i128,
        }
    }
}

/// The type of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `f64`: active when it depends on an active input and influences an output.
    F64,
    /// An integer (always passive); `None` until inference decides.
    Int(Option<IntTy>),
    /// `bool` (passive).
    Bool,
}

impl Ty {
    /// Same kind (ignoring which integer type).
    pub fn same_kind(self, o: Ty) -> bool {
        matches!(
            (self, o),
            (Ty::F64, Ty::F64) | (Ty::Bool, Ty::Bool) | (Ty::Int(_), Ty::Int(_))
        )
    }
}

/// What we know about a value.
#[derive(Clone, Debug)]
pub struct ValInfo {
    /// Its type.
    pub ty: Ty,
    /// The user variable it came from, for dumps.
    pub name: Option<String>,
}

/// A constant.
#[derive(Clone, Debug)]
pub struct Const {
    /// The tokens as the user wrote them (`2.0`, `f64::consts::PI`).
    pub tokens: TokenStream,
    /// Its value, for the interpreter.
    pub value: ConstVal,
}

/// The function of an [`Inst::Rule`]: `rule(args) -> (value, [partials; N])`, generic over the
/// number type.
#[derive(Clone, Debug)]
pub enum RuleFn {
    /// A user rule, by its path as written in the attribute.
    User(syn::Path),
    /// A rule of the runtime (`<runtime>::__private::builtin::NAME`), for methods with no
    /// primitive of their own in the rule table (`mul_add`, one rounding).
    Builtin(&'static str),
}

impl RuleFn {
    /// The function's path in generated code; `rt` is the runtime crate's.
    pub fn path(&self, rt: &TokenStream) -> TokenStream {
        match self {
            RuleFn::User(p) => quote::quote!(#p),
            RuleFn::Builtin(name) => {
                let id = syn::Ident::new(name, proc_macro2::Span::call_site());
                quote::quote!(#rt::__private::builtin::#id)
            }
        }
    }
}

/// A constant's value.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum ConstVal {
    F(f64),
    I(i128),
    B(bool),
}

/// What a checked [`Inst::Cast`] checks: the value fits the result's type and, for the end of
/// an inclusive range (`end_inclusive`), is below that type's `MAX` (the loop counts to the end
/// plus one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundCheck {
    /// The end of an inclusive range.
    pub end_inclusive: bool,
}

impl BoundCheck {
    /// The panic message, for a result of type `t`.
    pub fn message(self, t: &str) -> String {
        let end = if self.end_inclusive {
            format!(" or is the end of an inclusive range at `{t}::MAX`")
        } else {
            String::new()
        };
        format!(
            "#[differentiable] counts a range whose bounds' type is decided after the loop in \
             `{t}`, and a bound does not fit{end}: declare the bound's type where it is first \
             bound (`let mut hi: u64 = 0;`)"
        )
    }
}

/// Integer (and boolean) operations; all passive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Min,
    Max,
}

/// Comparisons, on any type (floats compare primal values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// Piecewise-constant float functions: derivative 0, result passive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PassOp {
    Floor,
    Ceil,
    Round,
    Trunc,
    Signum,
}

/// A slice argument of a call: a whole slice or a range of it.
#[derive(Clone, Debug)]
pub struct SliceArg {
    /// The slice.
    pub slice: SliceId,
    /// `lo..hi` (either end may be absent: `lo..`, `..hi`).
    pub lo: Option<Val>,
    /// End of the range.
    pub hi: Option<Val>,
}

/// An argument of a call to another differentiable function.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A scalar value.
    Val(Val),
    /// A slice or sub-slice.
    Slice(SliceArg),
    /// The elements of a local array, loaded just before the call and passed as a fresh array
    /// (`norm(&v)` with `let v: [f64; 3] = …`): the reverse sweep needs the values the call
    /// saw, which the array may no longer hold, and the loads' values are recorded as any
    /// value is.
    Elems {
        /// the loaded elements
        vals: Vec<Val>,
    },
    /// A `#[derive(Differentiable)]` struct parameter of the caller (`Func::sig[k]`), passed on
    /// as written: `p`, `&p` or `*p`; the callee's pullback adds into the caller's adjoint of it.
    Struct(usize, StructArg),
}

/// The shape of a call's result as the caller binds it (`let (c, s) = polar(r, t);`): how the
/// call's [`Inst::Call::dsts`] are read from, and its cotangent is built for, the callee's
/// return value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ret {
    /// One `f64`: the next value of `dsts`.
    Scalar,
    /// `[f64; n]`: the next `n` values.
    Array(usize),
    /// A tuple of these (never empty).
    Tuple(Vec<Ret>),
    /// Dropped (`f(x);`, `let _ = f(x);`): no values, whatever the callee returns.
    Ignored,
}

impl Ret {
    /// How many `f64` values the result holds.
    pub fn count(&self) -> usize {
        match self {
            Ret::Scalar => 1,
            Ret::Array(n) => *n,
            Ret::Tuple(m) => m.iter().map(Ret::count).sum(),
            Ret::Ignored => 0,
        }
    }
}

/// How a struct parameter is written as a call's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructArg {
    /// `p` (a reference or, for a parameter taken by value, a copy: `Clone::clone(&p)`)
    Plain,
    /// `&p`
    Ref,
    /// `*p`
    Deref,
}

/// An instruction.
#[derive(Clone, Debug)]
pub enum Inst {
    /// `dst = constant`
    Const {
        /// result
        dst: Val,
        /// the constant
        c: Const,
    },
    /// `dst = op(a)` for a float primitive of the rule table. `n` is the runtime order of
    /// `powi`/`polygamma` when it is not a literal. `partial` is filled in by the adjoint pass
    /// when the forward sweep records `∂dst/∂a`.
    Un {
        /// result
        dst: Val,
        /// primitive
        op: Op1,
        /// operand
        a: Val,
        /// runtime integer order (`powi(n)` with non-literal `n`)
        n: Option<Val>,
        /// recorded partial (set by the adjoint pass)
        partial: Option<Val>,
    },
    /// `dst = op(a, b)` for a float primitive of the rule table.
    Bin {
        /// result
        dst: Val,
        /// primitive
        op: Op2,
        /// left operand
        a: Val,
        /// right operand
        b: Val,
        /// recorded partials (set by the adjoint pass)
        partials: [Option<Val>; 2],
    },
    /// `dst = op(a)`, piecewise constant: passive result.
    Pass {
        /// result
        dst: Val,
        /// function
        op: PassOp,
        /// operand
        a: Val,
    },
    /// Integer or boolean arithmetic (passive).
    Int {
        /// result
        dst: Val,
        /// operation
        op: IntOp,
        /// left
        a: Val,
        /// right
        b: Val,
    },
    /// A comparison (passive boolean result).
    Cmp {
        /// result
        dst: Val,
        /// comparison
        op: CmpOp,
        /// left
        a: Val,
        /// right
        b: Val,
    },
    /// `!a` on a bool (an integer's `-a` is `0 - a`).
    Not {
        /// result
        dst: Val,
        /// operand
        a: Val,
    },
    /// `dst = a as <type of dst>` (between integers, integer → float, float → integer).
    Cast {
        /// result
        dst: Val,
        /// operand
        a: Val,
        /// A conversion that panics where the value does not fit: a range bound whose type is
        /// decided after the range (counted in `i64` unless that decision reaches the counter)
        checked: Option<BoundCheck>,
    },
    /// `dst = s.len()`
    Len {
        /// result
        dst: Val,
        /// slice
        slice: SliceId,
    },
    /// `dst = s[idx]`
    Load {
        /// result
        dst: Val,
        /// slice
        slice: SliceId,
        /// index (usize)
        idx: Val,
        /// where an index out of bounds is reported: the user's `x[i]`
        span: Span,
    },
    /// `s[idx] = val`
    Store {
        /// slice
        slice: SliceId,
        /// index (usize)
        idx: Val,
        /// stored value
        val: Val,
        /// where an index out of bounds is reported: the user's `x[i] = …`
        span: Span,
    },
    /// Every element of `s` becomes `val` (re-initialising a local array).
    Fill {
        /// slice
        slice: SliceId,
        /// value
        val: Val,
    },
    /// `dsts = func(args)`: a call to another `#[differentiable]` function (its pullback runs in
    /// the reverse sweep). Every result depends on every argument.
    Call {
        /// the results (f64), `ret.count()` of them, depth first
        dsts: Vec<Val>,
        /// how the results are read from the callee's return value
        ret: Ret,
        /// the callee's path as written
        func: syn::Path,
        /// arguments
        args: Vec<Arg>,
    },
    /// Panics unless `a < b`: indexing a sub-slice (`w[i]` with `w = &x[lo..hi]`, a window or
    /// a chunk) at or past its length, or making a sub-slice whose bounds are out of order or
    /// past the end — where the function as written panics, and the parent slice's own bounds
    /// check would not catch it.
    Check {
        /// what must be below `b`
        a: Val,
        /// the bound
        b: Val,
        /// `"index"` (`a` an index, `b` a length) or `"range"` (the bounds of a sub-slice)
        what: &'static str,
        /// where a failure is reported: the user's `w[i]` or `&x[a..b]`
        span: Span,
    },
    /// Panics with `msg` unless `cond` holds (`assert!`, `assert_eq!`, …; `debug`: only where
    /// debug assertions are on, as `debug_assert!`).
    Assert {
        /// the condition
        cond: Val,
        /// the panic message
        msg: String,
        /// `debug_assert!` and friends
        debug: bool,
        /// where the panic is reported: the user's `assert!` (or the call that checks)
        span: Span,
    },
    /// `dst = func(args)` for an opaque function with a user-supplied rule `rule(args) ->
    /// (value, [partials; N])`.
    Rule {
        /// result (f64)
        dst: Val,
        /// the rule function
        rule: RuleFn,
        /// scalar float arguments
        args: Vec<Val>,
        /// recorded partials (set by the adjoint pass)
        partials: Vec<Option<Val>>,
    },
}

impl Inst {
    /// The value defined, if any.
    pub fn dst(&self) -> Option<Val> {
        match self {
            Inst::Const { dst, .. }
            | Inst::Un { dst, .. }
            | Inst::Bin { dst, .. }
            | Inst::Pass { dst, .. }
            | Inst::Int { dst, .. }
            | Inst::Cmp { dst, .. }
            | Inst::Not { dst, .. }
            | Inst::Cast { dst, .. }
            | Inst::Len { dst, .. }
            | Inst::Load { dst, .. }
            | Inst::Rule { dst, .. } => Some(*dst),
            Inst::Call { dsts, .. } => dsts.first().copied(),
            Inst::Store { .. } | Inst::Fill { .. } | Inst::Check { .. } | Inst::Assert { .. } => {
                None
            }
        }
    }

    /// Values defined besides `dst` (recorded partials, a call's further results).
    pub fn extra_defs(&self) -> Vec<Val> {
        match self {
            Inst::Call { dsts, .. } => dsts.iter().skip(1).copied().collect(),
            Inst::Un {
                partial: Some(p), ..
            } => vec![*p],
            Inst::Bin { partials, .. } => partials.iter().flatten().copied().collect(),
            Inst::Rule { partials, .. } => partials.iter().flatten().copied().collect(),
            _ => vec![],
        }
    }

    /// Every value operand.
    pub fn uses(&self) -> Vec<Val> {
        match self {
            Inst::Const { .. } | Inst::Len { .. } => vec![],
            Inst::Un { a, n, .. } => std::iter::once(*a).chain(*n).collect(),
            Inst::Bin { a, b, .. } | Inst::Int { a, b, .. } | Inst::Cmp { a, b, .. } => {
                vec![*a, *b]
            }
            Inst::Pass { a, .. } | Inst::Not { a, .. } | Inst::Cast { a, .. } => vec![*a],
            Inst::Load { idx, .. } => vec![*idx],
            Inst::Store { idx, val, .. } => vec![*idx, *val],
            Inst::Fill { val, .. } => vec![*val],
            Inst::Check { a, b, .. } => vec![*a, *b],
            Inst::Assert { cond, .. } => vec![*cond],
            Inst::Call { args, .. } => {
                let mut v = vec![];
                for a in args {
                    match a {
                        Arg::Val(x) => v.push(*x),
                        Arg::Slice(s) => v.extend(s.lo.iter().chain(s.hi.iter())),
                        Arg::Elems { vals, .. } => v.extend(vals),
                        Arg::Struct(..) => {}
                    }
                }
                v
            }
            Inst::Rule { args, .. } => args.clone(),
        }
    }
}

/// A jump target with arguments for the target block's parameters.
#[derive(Clone, Debug)]
pub struct Target {
    /// The block.
    pub block: BlockId,
    /// One argument per parameter.
    pub args: Vec<Val>,
}

/// A block terminator.
#[derive(Clone, Debug)]
pub enum Term {
    /// `goto t(args)`
    Jump(Target),
    /// `if c goto t else goto e`
    Branch(Val, Target, Target),
    /// Return (the value for an `f64` function).
    Return(Option<Val>),
    /// Cannot be reached (a `match` whose arms Rust proved exhaustive).
    Unreachable,
}

impl Term {
    /// The outgoing edges, in slot order.
    pub fn targets(&self) -> Vec<&Target> {
        match self {
            Term::Jump(t) => vec![t],
            Term::Branch(_, t, e) => vec![t, e],
            Term::Return(_) | Term::Unreachable => vec![],
        }
    }
    /// Mutable outgoing edges.
    pub fn targets_mut(&mut self) -> Vec<&mut Target> {
        match self {
            Term::Jump(t) => vec![t],
            Term::Branch(_, t, e) => vec![t, e],
            Term::Return(_) | Term::Unreachable => vec![],
        }
    }
}

/// A basic block.
#[derive(Clone, Debug)]
pub struct Block {
    /// Block parameters (phi nodes).
    pub params: Vec<Val>,
    /// Instructions.
    pub insts: Vec<Inst>,
    /// Terminator.
    pub term: Term,
}

/// Where a slice lives.
#[derive(Clone, Debug)]
pub enum SliceKind {
    /// A `&[_]` (`mutable: false`) or `&mut [_]` parameter.
    Param {
        /// `&mut`
        mutable: bool,
    },
    /// A local fixed-size array `let mut a = [v; N];` (`len` as written).
    Local {
        /// the length expression
        len: TokenStream,
        /// its value when it is a literal (for the interpreter)
        len_value: Option<usize>,
    },
}

/// A slice or array of values.
#[derive(Clone, Debug)]
pub struct SliceInfo {
    /// Its name in the source.
    pub name: String,
    /// Element type (`F64` or an integer).
    pub elem: Ty,
    /// Parameter or local array.
    pub kind: SliceKind,
    /// Declared active (`&[f64]` in `wrt`, every `&mut [f64]`); local arrays are decided by the
    /// activity analysis.
    pub declared_active: bool,
    /// A parameter of fixed-size array type (`[f64; N]`, `&[f64; N]`, `&mut [f64; N]`): its
    /// length as written and whether it is passed by reference. `None` for slices.
    pub array: Option<ArrayTy>,
}

/// The type of a fixed-size array parameter.
#[derive(Clone, Debug)]
pub struct ArrayTy {
    /// The length as written (a literal or a `const`).
    pub len: TokenStream,
    /// `&[f64; N]` / `&mut [f64; N]` rather than `[f64; N]`.
    pub by_ref: bool,
}

impl SliceInfo {
    /// Whether the slice can change during the call.
    pub fn mutable(&self) -> bool {
        !matches!(self.kind, SliceKind::Param { mutable: false })
    }
}

/// A function parameter.
#[derive(Clone, Debug)]
pub enum Param {
    /// A scalar: its value (a parameter of block 0).
    Scalar {
        /// name
        name: syn::Ident,
        /// value
        val: Val,
        /// differentiated with respect to
        active: bool,
    },
    /// A slice.
    Slice {
        /// name
        name: syn::Ident,
        /// slice
        slice: SliceId,
    },
}

/// One step of the access path from an aggregate to one of its leaves: `.0` or `.w`.
pub type Member = syn::Member;

/// A leaf of an aggregate parameter: the access path and the flat parameter it became.
#[derive(Clone, Debug)]
pub struct AggLeaf {
    /// `.0.1`, `.w`, …
    pub path: Vec<Member>,
    /// Index into [`Func::params`].
    pub param: usize,
    /// Where it is read (or declared), for errors in the generated code.
    pub span: Span,
}

/// A tuple or struct parameter as the user wrote it. Its `f64` and array leaves are ordinary
/// (flat) entries of [`Func::params`]; the generated code binds them from the aggregate.
#[derive(Clone, Debug)]
pub struct AggParam {
    /// The parameter's name.
    pub name: syn::Ident,
    /// Its type as written (`(f64, [f64; 3])`, `&Params`, `Params`).
    pub ty: syn::Type,
    /// Differentiated with respect to (in `wrt`).
    pub active: bool,
    /// A `#[derive(Differentiable)]` struct (its leaves are the fields the body reads), else a
    /// tuple (every leaf is known from the type).
    pub is_struct: bool,
    /// The leaves read.
    pub leaves: Vec<AggLeaf>,
}

/// A parameter of the signature: one flat parameter or an aggregate of several.
///
/// ```
/// use adjoint_ssa_syntax::ir::{Param, SigItem};
/// let (f, _) = adjoint_ssa_syntax::lower_str(
///     "fn f(p: (f64, [f64; 2]), q: &Params, n: usize) -> f64 { p.0 * q.w + p.1[1] }",
///     "",
/// )
/// .unwrap();
/// // p's leaves p.0 and p.1, n, then q.w (struct fields become leaves when read)
/// assert_eq!(f.params.len(), 4);
/// assert!(matches!(&f.params[1], Param::Slice { .. }));
/// let SigItem::Agg(q) = &f.sig[1] else { panic!() };
/// assert!(q.is_struct && q.leaves.len() == 1);
/// assert!(matches!(f.sig[2], SigItem::Leaf(2)));
/// ```
#[derive(Clone, Debug)]
pub enum SigItem {
    /// `Func::params[k]` as is.
    Leaf(usize),
    /// A tuple or struct.
    Agg(Box<AggParam>),
}

/// A leaf of an aggregate result: the access path and the hidden one-element (scalar) or
/// array-length local array that the function stores it in.
#[derive(Clone, Debug)]
pub struct RetLeaf {
    /// `.0`, `.w`, or empty for an array result.
    pub path: Vec<Member>,
    /// The hidden local array.
    pub slice: SliceId,
    /// A scalar (stored at index 0) rather than an array.
    pub scalar: bool,
}

/// A tuple, array or struct result: every `return` stores its leaves into hidden local arrays,
/// whose adjoints the pullback seeds from the result's cotangent.
#[derive(Clone, Debug)]
pub struct RetAgg {
    /// The return type as written.
    pub ty: syn::Type,
    /// A `#[derive(Differentiable)]` struct (leaves fixed by the first `return`).
    pub is_struct: bool,
    /// Its leaves.
    pub leaves: Vec<RetLeaf>,
}

/// A function in SSA form.
#[derive(Clone, Debug)]
pub struct Func {
    /// Its name.
    pub name: syn::Ident,
    /// Flat parameters (scalars and slices); aggregates contribute their leaves.
    pub params: Vec<Param>,
    /// The signature as written, in order.
    pub sig: Vec<SigItem>,
    /// Returns `f64` (else `()` or an aggregate).
    pub returns_f64: bool,
    /// A tuple, array or struct result.
    pub ret_agg: Option<RetAgg>,
    /// Values.
    pub values: Vec<ValInfo>,
    /// Slices.
    pub slices: Vec<SliceInfo>,
    /// Blocks; 0 is the entry.
    pub blocks: Vec<Block>,
    /// Span of the function name (for errors in generated code).
    pub span: Span,
    /// `const` items declared in the body (`const EPS: f64 = 1e-8;`): emitted in the generated
    /// module, where the generated code names them.
    pub consts: Vec<syn::ItemConst>,
    /// Integer values that are one variable of the source (`let mut k = 3; …; k = m;`, and a
    /// typed `let` that only copies a value): Rust gives a variable one type, so
    /// [`infer_ints`](crate::passes::infer_ints) gives them one.
    pub int_links: Vec<(Val, Val)>,
}

impl Func {
    /// Allocate a value.
    pub fn new_val(&mut self, ty: Ty, name: Option<String>) -> Val {
        self.values.push(ValInfo { ty, name });
        self.values.len() - 1
    }

    /// Incoming edges of every block: `(predecessor, slot)`.
    pub fn preds(&self) -> Vec<Vec<(BlockId, usize)>> {
        let mut p = vec![vec![]; self.blocks.len()];
        for (b, blk) in self.blocks.iter().enumerate() {
            for (slot, t) in blk.term.targets().into_iter().enumerate() {
                p[t.block].push((b, slot));
            }
        }
        p
    }

    /// `v` written out as Rust when it is an integer literal or arithmetic of literals (`3`,
    /// `-3`, `1 + 2`): how an integer of open type is passed to another function, so that it
    /// takes the parameter's type as in the function as written.
    pub fn int_const_expr(&self, v: Val) -> Option<TokenStream> {
        fn go(f: &Func, v: Val, depth: usize) -> Option<TokenStream> {
            if depth > 16 {
                return None;
            }
            f.blocks
                .iter()
                .flat_map(|b| &b.insts)
                .find_map(|i| match i {
                    Inst::Const { dst, c } if *dst == v => Some(c.tokens.clone()),
                    Inst::Int { dst, op, a, b } if *dst == v => {
                        let (a, b) = (go(f, *a, depth + 1)?, go(f, *b, depth + 1)?);
                        let op = match op {
                            IntOp::Add => quote::quote!(+),
                            IntOp::Sub => quote::quote!(-),
                            IntOp::Mul => quote::quote!(*),
                            IntOp::Div => quote::quote!(/),
                            IntOp::Rem => quote::quote!(%),
                            _ => return None,
                        };
                        Some(quote::quote!((#a #op #b)))
                    }
                    _ => None,
                })
        }
        go(self, v, 0)
    }

    /// The block defining each value (parameters belong to their block).
    pub fn def_blocks(&self) -> Vec<Option<BlockId>> {
        let mut d = vec![None; self.values.len()];
        for (b, blk) in self.blocks.iter().enumerate() {
            for &p in &blk.params {
                d[p] = Some(b);
            }
            for i in &blk.insts {
                if let Some(v) = i.dst() {
                    d[v] = Some(b);
                }
                for v in i.extra_defs() {
                    d[v] = Some(b);
                }
            }
        }
        d
    }

    /// The value's display name: `%12` or `%12:x`.
    pub fn vname(&self, v: Val) -> String {
        match &self.values[v].name {
            Some(n) => format!("%{v}:{n}"),
            None => format!("%{v}"),
        }
    }
}

impl fmt::Display for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        write!(s, "fn {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            match p {
                Param::Scalar { name, val, active } => write!(
                    s,
                    "{name}: {} = {}{}",
                    ty_name(self.values[*val].ty),
                    self.vname(*val),
                    if *active { " (active)" } else { "" }
                )?,
                Param::Slice { name, slice } => {
                    let si = &self.slices[*slice];
                    write!(
                        s,
                        "{name}: &{}[{}] = s{slice}{}",
                        if si.mutable() { "mut " } else { "" },
                        ty_name(si.elem),
                        if si.declared_active { " (active)" } else { "" }
                    )?
                }
            }
        }
        writeln!(s, ") -> {}", if self.returns_f64 { "f64" } else { "()" })?;
        for (i, sl) in self.slices.iter().enumerate() {
            if let SliceKind::Local { len, .. } = &sl.kind {
                writeln!(
                    s,
                    "  local s{i} = {}: [{}; {}]",
                    sl.name,
                    ty_name(sl.elem),
                    len
                )?;
            }
        }
        for (b, blk) in self.blocks.iter().enumerate() {
            write!(s, "block #{b}(")?;
            for (k, p) in blk.params.iter().enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                write!(s, "{}: {}", self.vname(*p), ty_name(self.values[*p].ty))?;
            }
            writeln!(s, "):")?;
            for inst in &blk.insts {
                writeln!(s, "  {}", self.inst_text(inst))?;
            }
            writeln!(s, "  {}", self.term_text(&blk.term))?;
        }
        f.write_str(&s)
    }
}

/// A type's name for dumps.
pub fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::F64 => "f64",
        Ty::Bool => "bool",
        Ty::Int(Some(i)) => i.name(),
        Ty::Int(None) => "int",
    }
}

impl Func {
    /// One instruction as text.
    pub fn inst_text(&self, inst: &Inst) -> String {
        let n = |v: Val| self.vname(v);
        let sl = |s: SliceId| format!("s{s}:{}", self.slices[s].name);
        match inst {
            Inst::Const { dst, c } => format!("{} = const {}", n(*dst), c.tokens),
            Inst::Un {
                dst,
                op,
                a,
                n: ord,
                partial,
            } => format!(
                "{}{} = {:?}{}({})",
                n(*dst),
                partial.map(|p| format!(", ∂{}", n(p))).unwrap_or_default(),
                op,
                ord.map(|o| format!("[n={}]", self.vname(o)))
                    .unwrap_or_default(),
                n(*a)
            ),
            Inst::Bin {
                dst,
                op,
                a,
                b,
                partials,
            } => format!(
                "{}{} = {:?}({}, {})",
                n(*dst),
                partials
                    .iter()
                    .flatten()
                    .map(|p| format!(", ∂{}", n(*p)))
                    .collect::<String>(),
                op,
                n(*a),
                n(*b)
            ),
            Inst::Pass { dst, op, a } => format!("{} = {:?}({}) (passive)", n(*dst), op, n(*a)),
            Inst::Int { dst, op, a, b } => {
                format!("{} = int {:?}({}, {})", n(*dst), op, n(*a), n(*b))
            }
            Inst::Cmp { dst, op, a, b } => format!("{} = {:?}({}, {})", n(*dst), op, n(*a), n(*b)),
            Inst::Not { dst, a } => format!("{} = not {}", n(*dst), n(*a)),
            Inst::Cast { dst, a, checked } => format!(
                "{} = {} as {}{}",
                n(*dst),
                n(*a),
                ty_name(self.values[*dst].ty),
                if checked.is_some() { " (checked)" } else { "" }
            ),
            Inst::Len { dst, slice } => format!("{} = len {}", n(*dst), sl(*slice)),
            Inst::Load {
                dst, slice, idx, ..
            } => format!("{} = {}[{}]", n(*dst), sl(*slice), n(*idx)),
            Inst::Store {
                slice, idx, val, ..
            } => format!("{}[{}] = {}", sl(*slice), n(*idx), n(*val)),
            Inst::Fill { slice, val } => format!("fill {} with {}", sl(*slice), n(*val)),
            Inst::Check { a, b, what, .. } => format!("check {what}: {} < {}", n(*a), n(*b)),
            Inst::Assert {
                cond, msg, debug, ..
            } => {
                let d = if *debug { "debug " } else { "" };
                format!("{d}assert {} ({msg:?})", n(*cond))
            }
            Inst::Call {
                dsts,
                ret,
                func,
                args,
            } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Val(v) => n(*v),
                        Arg::Struct(k, how) => {
                            let name = match &self.sig[*k] {
                                SigItem::Agg(a) => a.name.to_string(),
                                SigItem::Leaf(_) => "?".into(),
                            };
                            match how {
                                StructArg::Plain => name,
                                StructArg::Ref => format!("&{name}"),
                                StructArg::Deref => format!("*{name}"),
                            }
                        }
                        Arg::Elems { vals } => format!(
                            "[{}]",
                            vals.iter().map(|v| n(*v)).collect::<Vec<_>>().join(", ")
                        ),
                        Arg::Slice(s) => format!(
                            "&{}[{}..{}]",
                            sl(s.slice),
                            s.lo.map(n).unwrap_or_default(),
                            s.hi.map(n).unwrap_or_default()
                        ),
                    })
                    .collect();
                let d: Vec<String> = dsts.iter().map(|v| n(*v)).collect();
                let d = match ret {
                    Ret::Scalar => format!("{} = ", d.join("")),
                    Ret::Ignored => String::new(),
                    _ => format!("({}) = ", d.join(", ")),
                };
                format!("{d}call {}({})", quote::quote!(#func), a.join(", "))
            }
            Inst::Rule {
                dst,
                rule,
                args,
                partials,
            } => format!(
                "{}{} = rule {}({})",
                n(*dst),
                partials
                    .iter()
                    .flatten()
                    .map(|p| format!(", ∂{}", n(*p)))
                    .collect::<String>(),
                rule.path(&quote::quote!(rt)),
                args.iter().map(|a| n(*a)).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    fn target_text(&self, t: &Target) -> String {
        format!(
            "#{}({})",
            t.block,
            t.args
                .iter()
                .map(|a| self.vname(*a))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// A terminator as text.
    pub fn term_text(&self, t: &Term) -> String {
        match t {
            Term::Jump(t) => format!("goto {}", self.target_text(t)),
            Term::Branch(c, a, b) => format!(
                "if {} goto {} else {}",
                self.vname(*c),
                self.target_text(a),
                self.target_text(b)
            ),
            Term::Return(Some(v)) => format!("return {}", self.vname(*v)),
            Term::Return(None) => "return".into(),
            Term::Unreachable => "unreachable".into(),
        }
    }
}
