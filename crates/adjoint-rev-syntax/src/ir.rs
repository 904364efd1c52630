//! The reversible IR: what the parser produces, what inversion and checking work on, and what
//! code generation consumes.

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Expr, Ident, Path, Signature, Type, Visibility};

/// One reversible function as written by the user.
pub struct Func {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub sig: Signature,
    /// Parameter names, in order, with the type behind the `&mut`.
    pub params: Vec<(Ident, Type)>,
    pub body: Vec<Stmt>,
}

/// A statement with the source text and span it came from (errors at run time quote the text).
#[derive(Clone)]
pub struct Stmt {
    pub kind: Kind,
    pub text: String,
    pub span: Span,
    /// Whether the statement runs as the inverse of what was written (in `uncall`, inside
    /// `~{ … }`, in a routine's uncomputation; an even number of these cancel): its error
    /// messages say "running backwards" and swap pre- and post-conditions accordingly.
    pub inverted: bool,
}

/// An argument of an instruction or a call.
#[derive(Clone)]
pub enum Operand {
    /// A variable, field or element: read and written in place.
    Place(Expr),
    /// A numeric literal, converted to the number type of the instruction.
    Lit(Expr),
    /// An expression that mentions no variable of the function: evaluated into a temporary.
    Const(Expr),
    /// A call argument computed from the function's variables (`n - 1`, `v.len()`,
    /// `x.value()`): evaluated into a temporary whose type must carry no gradient (a plain
    /// number: `computed_arg`, a compile error at the argument otherwise).
    Computed(Expr),
    /// A call argument that copies a variable, field or element (`x.clone()`): passed as a
    /// temporary that starts without the variable's gradient and gives it its gradient after
    /// the call. The expression as written, and the place.
    Copy(Expr, Box<Expr>),
}

impl Operand {
    pub fn expr(&self) -> &Expr {
        match self {
            Operand::Place(e)
            | Operand::Lit(e)
            | Operand::Const(e)
            | Operand::Computed(e)
            | Operand::Copy(e, _) => e,
        }
    }
}

/// The right-hand side of `y += …` / `y -= …`.
#[derive(Clone)]
pub enum Rhs {
    /// `y += x`
    Id(Operand),
    /// `y += a ∘ b` for `+ − × ÷`: the `Op2` variant name.
    Arith(&'static str, Operand, Operand),
    /// `y += f(x)`: the `Op1` variant as tokens (`Exp`, `Powi(3)`, …).
    Op1(TokenStream, Operand),
    /// `y += f(a, b)`: the `Op2` variant name.
    Op2(&'static str, Operand, Operand),
    /// `y += x.powi(n)`: the exponent is read, not differentiated.
    Powi(Expr, Operand),
}

/// A call's part in a gradient pass's checkpointing (`crate::codegen::mark`): a forward call
/// that keeps its callee's routine values for the mirrored uncall (`Push`), that uncall, which
/// takes them back instead of recomputing them (`Pop`), or neither. Inversion swaps `Push` and
/// `Pop`, so a marked body and its inverse pair every push with its pop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    No,
    Push,
    Pop,
}

#[derive(Clone)]
pub enum Kind {
    /// `y += rhs` (`plus`) or `y -= rhs`.
    Acc { target: Expr, plus: bool, rhs: Rhs },
    /// `y ^= expr` over operands (self-inverse).
    Xor {
        target: Expr,
        rhs: Expr,
        operands: Vec<Operand>,
    },
    /// `y *= x` (`mul`) or `y /= x`.
    Scale { target: Expr, mul: bool, x: Operand },
    /// `f(args)` or, with `inverse`, `~f(args)`.
    Call {
        func: Path,
        inverse: bool,
        args: Vec<Operand>,
        /// What the call does with the checkpoint stack in a gradient pass ([`Keep`]).
        keep: Keep,
    },
    /// `NAME(args)`: an instruction (built in, like `SWAP`, or the user's).
    Instr {
        name: Path,
        inverse: bool,
        args: Vec<Operand>,
    },
    /// `let x = init;`: allocate an ancilla.
    Let {
        name: Ident,
        ty: Option<Type>,
        init: Expr,
        /// The variable, field or element that `init` copies (`let a = x;`, `let a =
        /// v[i].clone();`): the ancilla starts without its gradient.
        copy: Option<Expr>,
    },
    /// `unlet x = init;`: deallocate an ancilla after checking it is back to `init`.
    Unlet {
        name: Ident,
        ty: Option<Type>,
        init: Expr,
        /// The place `init` copies: the ancilla's gradient goes to it (as `x -= v; unlet x =
        /// 0;` would send it).
        copy: Option<Expr>,
    },
    /// `if (pre, post) { then } else { els }`.
    If {
        pre: Expr,
        post: Expr,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// `while (pre, post) { body }`.
    While {
        pre: Expr,
        post: Expr,
        /// `pre` and `post` as written (for error messages).
        pre_text: String,
        post_text: String,
        body: Vec<Stmt>,
    },
    /// `for var in start..end` (or `..=`), optionally `.step_by(step)` and `.rev()`.
    For {
        var: Ident,
        start: Expr,
        end: Expr,
        inclusive: bool,
        step: Option<Expr>,
        rev: bool,
        body: Vec<Stmt>,
    },
    /// `@safe stmt;`: an external statement, run as is in both directions.
    Safe(TokenStream),
    /// `@invcheckoff stmt`: the statement without reversibility checks.
    NoCheck(Vec<Stmt>),
    /// `@routine { … }` or `@routine name { … }` (removed by `lower::expand`).
    Routine(Option<String>, Vec<Stmt>),
    /// `~@routine;` or `~@routine name;` (removed by `lower::expand`).
    Unroutine(Option<String>),
    /// `~{ … }` (removed by `lower::expand`).
    Inverse(Vec<Stmt>),
    /// Statements spliced into the enclosing block (no new scope).
    Block(Vec<Stmt>),
    /// `~@routine` after expansion: the routine's inverse, and the routine itself (consulted by
    /// unchecked code, which may skip the uncomputation).
    Uncompute(Vec<Stmt>, Vec<Stmt>),
    /// A routine computed: `@routine { … }` after expansion, when a `~@routine` uncomputes it,
    /// and the inverse of an uncomputation (the routine computed again; a gradient pass's
    /// inverse half may take back the values its forward half kept instead). Inverts to
    /// `Uncompute`.
    Recompute(Vec<Stmt>),
}

impl Kind {
    /// The statement with each nested body (an `if`'s branches, a loop's body, a block, an
    /// `@invcheckoff` block) replaced by `f` of it; any other statement as it is (an
    /// uncomputation and a recomputation included).
    pub fn map_bodies(&self, f: &mut dyn FnMut(&[Stmt]) -> Vec<Stmt>) -> Kind {
        match self {
            Kind::If {
                pre,
                post,
                then,
                els,
            } => Kind::If {
                pre: pre.clone(),
                post: post.clone(),
                then: f(then),
                els: f(els),
            },
            Kind::While {
                pre,
                post,
                pre_text,
                post_text,
                body,
            } => Kind::While {
                pre: pre.clone(),
                post: post.clone(),
                pre_text: pre_text.clone(),
                post_text: post_text.clone(),
                body: f(body),
            },
            Kind::For {
                var,
                start,
                end,
                inclusive,
                step,
                rev,
                body,
            } => Kind::For {
                var: var.clone(),
                start: start.clone(),
                end: end.clone(),
                inclusive: *inclusive,
                step: step.clone(),
                rev: *rev,
                body: f(body),
            },
            Kind::Block(b) => Kind::Block(f(b)),
            Kind::NoCheck(b) => Kind::NoCheck(f(b)),
            k => k.clone(),
        }
    }
}
