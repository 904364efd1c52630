//! Lowering: a `syn::ItemFn` in the supported subset of Rust → SSA ([`crate::ir::Func`]).
//!
//! Variables are tracked per block; at every join (if/match merge, loop header, loop latch, loop
//! exit) each variable in scope becomes a block parameter, and afterwards parameters whose
//! incoming arguments are all the same value are removed (maximal SSA, then pruned). Anything
//! outside the subset is a `syn::Error` at the offending tokens, saying what to write instead.

use crate::ir::*;
use adjoint_core::rules::{Op1, Op2};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Lit, Pat, Stmt, UnOp};

/// Writing an array that is not `&mut` or a local array. A `let` of a struct's array field
/// without a type (`let mut c = q.b;`, `*r` of `let r = &q.b;`) names the field itself: the
/// macro does not know its length, so it cannot make the copy Rust makes unless the `let` says
/// it (a hunter found "not mutable" alone puzzling there).
const NOT_MUTABLE: &str = "this array is not mutable here: only `&mut [f64]` parameters and \
     local arrays (`let mut a = [0.0; N];`, or a copy of an array parameter, `let mut a = x;`) \
     can be written. A struct's array field is copied by a `let` with its type, `let mut c: \
     [f64; 3] = q.b;` (a tuple parameter's member needs none); without the type (`let mut c = \
     q.b;`, or `*r` of `let r = &q.b;`) the name is the field itself, whose length the macro \
     does not know";

/// Indexing something that is not a slice or array.
const NOT_INDEXABLE: &str = "only slices and arrays can be indexed, and this is a number here (an \
    array field of a struct is read through a reference, `let b = &p.b;`, or copied with its \
    type, `let b: [f64; 3] = p.b;`; without the type, `let b = p.b;` is read as a number)";

type Result<T> = syn::Result<T>;

/// Options from the attribute: `#[differentiable(wrt(x, y), rule(f = f_rule))]`.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Parameters to differentiate with respect to (default: every `f64` / `&[f64]` parameter).
    pub wrt: Option<Vec<syn::Ident>>,
    /// Opaque functions with user rules: `name = rule_path`.
    pub rules: Vec<(syn::Ident, syn::Path)>,
}

impl Options {
    /// Parse the attribute's arguments.
    pub fn parse(attr: TokenStream) -> Result<Options> {
        let mut o = Options::default();
        if attr.is_empty() {
            return Ok(o);
        }
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("wrt") {
                // (a second `wrt(…)` replaced the first without a word; a hunter)
                if o.wrt.is_some() {
                    return Err(meta.error(
                        "`wrt` is given twice: list every parameter in one `wrt(a, b, …)`",
                    ));
                }
                let mut names: Vec<syn::Ident> = vec![];
                let list;
                syn::parenthesized!(list in meta.input);
                // (`wrt()` said "unexpected end of input, expected nested attribute"; a hunter)
                if list.is_empty() {
                    return Err(meta.error(
                        "`wrt()` names no parameter: list the ones to differentiate with respect \
                         to (`wrt(x, w)`)",
                    ));
                }
                let ids =
                    syn::punctuated::Punctuated::<syn::Ident, syn::Token![,]>::parse_terminated(
                        &list,
                    )?;
                for id in ids {
                    if names.contains(&id) {
                        return Err(syn::Error::new(
                            id.span(),
                            format!("`{id}` is listed twice in `wrt`"),
                        ));
                    }
                    names.push(id);
                }
                o.wrt = Some(names);
                Ok(())
            } else if meta.path.is_ident("rule") {
                meta.parse_nested_meta(|m| {
                    let name = m.path.require_ident()?.clone();
                    if o.rules.iter().any(|(n, _)| *n == name) {
                        return Err(m.error(format!("a second rule for `{name}`")));
                    }
                    let path: syn::Path = m.value()?.parse()?;
                    o.rules.push((name, path));
                    Ok(())
                })
            } else {
                Err(meta.error(
                    "unknown option; expected `wrt(a, b, …)` or `rule(function = rule_function)`",
                ))
            }
        });
        syn::parse::Parser::parse2(parser, attr)?;
        Ok(o)
    }
}

fn err<T>(tokens: impl ToTokens, msg: impl std::fmt::Display) -> Result<T> {
    Err(syn::Error::new_spanned(tokens, msg))
}

#[derive(Clone, Debug)]
enum Binding {
    Val(Val),
    Slice(SliceArg),
    /// A mutable element (`for o in out.iter_mut()`).
    Elem(SliceId, Val),
    /// A tuple or a struct value (immutable: its leaves are values and slices).
    Agg(AggV),
    /// A `#[derive(Differentiable)]` struct parameter: `Func::sig[k]` (fields become leaves
    /// when read).
    Struct(usize),
    /// A closure bound by `let f = |v: f64| v * s;`: inlined where it is called.
    Closure(std::rc::Rc<ClosureDef>),
}

/// A closure and the variables as they were where it was defined (what it captures: a call
/// sees those, not a later variable of the same name).
#[derive(Clone, Debug)]
struct ClosureDef {
    c: syn::ExprClosure,
    env: Vec<Var>,
}

/// A tuple (members `0`, `1`, …) or struct literal (named members) value.
#[derive(Clone, Debug)]
struct AggV {
    members: Vec<(String, Ev)>,
    /// The struct's path for a struct literal.
    path: Option<syn::Path>,
}

#[derive(Clone, Debug)]
struct Var {
    name: String,
    b: Binding,
}

struct LoopCtx {
    label: Option<String>,
    cont: BlockId,
    brk: BlockId,
    nvars: usize,
    /// A `loop` left by `break value`: the hidden variable (its index in `env`, among the
    /// first `nvars`) that each such `break` assigns before jumping to the exit.
    value: Option<usize>,
}

/// The result of lowering an expression.
#[derive(Clone, Debug)]
enum Ev {
    V(Val),
    S(SliceArg),
    Unit,
    /// A tuple or struct value.
    Agg(AggV),
    /// A struct parameter (`Func::sig[k]`).
    Struct(usize),
}

impl Ev {
    fn binding(self) -> Option<Binding> {
        Some(match self {
            Ev::V(v) => Binding::Val(v),
            Ev::S(s) => Binding::Slice(s),
            Ev::Agg(a) => Binding::Agg(a),
            Ev::Struct(k) => Binding::Struct(k),
            Ev::Unit => return None,
        })
    }
}

/// The items an iterator yields per iteration.
enum Item {
    Int(Val),
    Elem(SliceId, Val, bool),
    Tuple(Vec<Item>),
    /// A sub-slice (`x.windows(k)`, `x.chunks(k)`).
    Sub(SliceArg),
}

enum It {
    Range {
        lo: Val,
        hi: Val,
        rev: bool,
        step: Option<Val>,
        /// The items' type: the bounds', except for an inclusive range of a type of at most 32
        /// bits, whose bounds are `i64` (`0u8..=255` ends at 256).
        item: Ty,
    },
    Slice(SliceArg, bool),
    Enumerate(Box<It>),
    Zip(Box<It>, Box<It>),
    /// Any of these backwards (`x.iter().rev()`; ranges keep `Range::rev`).
    Rev(Box<It>),
    /// Every `s`-th item of any of these (`x.iter().step_by(s)`; ranges keep `Range::step`).
    Step(Box<It>, Val),
    /// Any of these without its first `m` items (`m = min(n, len)`, a `usize`:
    /// `.enumerate().skip(1)` starts at index 1; ranges and `x.iter()` keep their own bounds).
    Skip(Box<It>, Val),
    /// The first `m` items of any of these (`m = min(n, len)`).
    Take(Box<It>, Val),
    /// `x.windows(k)`: `&x[i..i + k]`.
    Windows(SliceArg, Val),
    /// `x.chunks(k)` (`exact`: `x.chunks_exact(k)`): `&x[i·k..min(i·k + k, len)]`.
    Chunks(SliceArg, Val, bool),
}

struct Lower<'a> {
    f: Func,
    opts: &'a Options,
    /// `(base, field)` of struct fields read as arrays (indexed, `.len()`, `.iter()`, `&`).
    array_fields: HashSet<(String, String)>,
    /// The written lengths of tuple parameters' array members (`p.1` of `p: (f64, [f64; 3])`):
    /// a copy of one (`let mut c = p.1;`) is a local array of that length.
    member_lens: Vec<(SliceId, Expr)>,
    cur: BlockId,
    env: Vec<Var>,
    loops: Vec<LoopCtx>,
    ret: BlockId,
    dead: HashSet<BlockId>,
    counter: usize,
    /// Inside an inlined closure: the number of variables it captured (it may not assign
    /// them: the change would be lost when the caller's variables come back).
    captured: Option<usize>,
    /// The stand-in values of variables declared without a value or a type (`let y;`): an
    /// `f64` zero that no path reads (Rust rejects a read before assignment), retyped by
    /// nothing — an integer assigned to such a variable asks for its type.
    untyped_decls: HashSet<Val>,
    /// How deep in blocks the lowering is (1: the function's own block).
    block_depth: usize,
    /// The `const` items of the body seen so far, by their names as written, with the name the
    /// generated module declares each under: a `const` of a nested block is visible only in
    /// that block, so it is declared under a name of its own (declared under its written name
    /// at the module, it shadowed a module-level constant of that name in the whole function).
    /// (Also where in `env` each is bound: it is visible while that variable is.)
    const_names: Vec<(syn::Ident, syn::Ident, usize)>,
}

const FLOAT_CONSTS: &[(&str, f64)] = &[
    ("PI", std::f64::consts::PI),
    ("TAU", std::f64::consts::TAU),
    ("E", std::f64::consts::E),
    ("SQRT_2", std::f64::consts::SQRT_2),
    ("LN_2", std::f64::consts::LN_2),
    ("LN_10", std::f64::consts::LN_10),
    ("LOG2_E", std::f64::consts::LOG2_E),
    ("LOG10_E", std::f64::consts::LOG10_E),
    ("LOG2_10", std::f64::consts::LOG2_10),
    ("LOG10_2", std::f64::consts::LOG10_2),
    ("FRAC_PI_2", std::f64::consts::FRAC_PI_2),
    ("FRAC_PI_3", std::f64::consts::FRAC_PI_3),
    ("FRAC_PI_4", std::f64::consts::FRAC_PI_4),
    ("FRAC_PI_6", std::f64::consts::FRAC_PI_6),
    ("FRAC_PI_8", std::f64::consts::FRAC_PI_8),
    ("FRAC_1_PI", std::f64::consts::FRAC_1_PI),
    ("FRAC_2_PI", std::f64::consts::FRAC_2_PI),
    ("FRAC_2_SQRT_PI", std::f64::consts::FRAC_2_SQRT_PI),
    ("FRAC_1_SQRT_2", std::f64::consts::FRAC_1_SQRT_2),
    ("INFINITY", f64::INFINITY),
    ("NEG_INFINITY", f64::NEG_INFINITY),
    ("EPSILON", f64::EPSILON),
    ("MAX", f64::MAX),
    ("MIN", f64::MIN),
    ("MIN_POSITIVE", f64::MIN_POSITIVE),
    ("NAN", f64::NAN),
];

/// The unary float methods of the rule table.
pub fn method_op1(name: &str) -> Option<Op1> {
    Some(match name {
        "sqrt" => Op1::Sqrt,
        "cbrt" => Op1::Cbrt,
        "exp" => Op1::Exp,
        "exp2" => Op1::Exp2,
        "exp_m1" => Op1::ExpM1,
        "ln" => Op1::Ln,
        "ln_1p" => Op1::Ln1p,
        "log2" => Op1::Log2,
        "log10" => Op1::Log10,
        "sin" => Op1::Sin,
        "cos" => Op1::Cos,
        "tan" => Op1::Tan,
        "asin" => Op1::Asin,
        "acos" => Op1::Acos,
        "atan" => Op1::Atan,
        "sinh" => Op1::Sinh,
        "cosh" => Op1::Cosh,
        "tanh" => Op1::Tanh,
        "asinh" => Op1::Asinh,
        "acosh" => Op1::Acosh,
        "atanh" => Op1::Atanh,
        "abs" => Op1::Abs,
        "recip" => Op1::Recip,
        "erf" => Op1::Erf,
        "lgamma" => Op1::Lgamma,
        "digamma" => Op1::Polygamma(0),
        _ => return None,
    })
}

/// The binary float methods of the rule table.
pub fn method_op2(name: &str) -> Option<Op2> {
    Some(match name {
        "powf" => Op2::Powf,
        "atan2" => Op2::Atan2,
        "min" => Op2::Min,
        "max" => Op2::Max,
        "hypot" => Op2::Hypot,
        _ => return None,
    })
}

fn pass_op(name: &str) -> Option<PassOp> {
    Some(match name {
        "floor" => PassOp::Floor,
        "ceil" => PassOp::Ceil,
        "round" => PassOp::Round,
        "trunc" => PassOp::Trunc,
        "signum" => PassOp::Signum,
        _ => return None,
    })
}

fn type_of(ty: &syn::Type) -> Option<Ty> {
    if let syn::Type::Path(p) = ty {
        let id = p.path.get_ident()?.to_string();
        if id == "f64" {
            return Some(Ty::F64);
        }
        if id == "bool" {
            return Some(Ty::Bool);
        }
        return IntTy::from_name(&id).map(|t| Ty::Int(Some(t)));
    }
    None
}

/// The shape of a call's result from the type it is bound with (`let (v, n): ([f64; 3], f64) =
/// f(x);`).
fn ret_of_type(t: &syn::Type) -> Result<Ret> {
    let bad = |t: &syn::Type| {
        err(
            t,
            "the result of a #[differentiable] function is bound as `f64`, `[f64; N]` with a \
             literal `N`, or a tuple of these",
        )
    };
    match t {
        syn::Type::Paren(p) => ret_of_type(&p.elem),
        syn::Type::Group(g) => ret_of_type(&g.elem),
        syn::Type::Tuple(tt) if !tt.elems.is_empty() => Ok(Ret::Tuple(
            tt.elems.iter().map(ret_of_type).collect::<Result<_>>()?,
        )),
        syn::Type::Array(a) if type_of(&a.elem) == Some(Ty::F64) => match array_len(&a.len)? {
            (_, Some(n)) if n > 0 => Ok(Ret::Array(n)),
            _ => err(
                &a.len,
                "write the length of an array returned by a call as a literal (`[f64; 3]`): \
                 the macro needs to know how many numbers it holds",
            ),
        },
        t if type_of(t) == Some(Ty::F64) => Ok(Ret::Scalar),
        t => bad(t),
    }
}

/// The shape of a call's result from the pattern it is bound to: a tuple pattern is a tuple,
/// each name one `f64` (arrays need a type: `let (v, n): ([f64; 3], f64) = f(x);`).
fn ret_of_pat(p: &Pat) -> Result<Ret> {
    match p {
        Pat::Tuple(pt) if !pt.elems.is_empty() => Ok(Ret::Tuple(
            pt.elems.iter().map(ret_of_pat).collect::<Result<_>>()?,
        )),
        Pat::Paren(pp) => ret_of_pat(&pp.pat),
        Pat::Ident(_) | Pat::Wild(_) => Ok(Ret::Scalar),
        p => err(p, "bind plain names, `_` or tuples of these"),
    }
}

/// An integer type of at most 32 bits, signed or unsigned, written (not open).
fn narrow_int(t: Ty) -> bool {
    use IntTy::*;
    matches!(t, Ty::Int(Some(I8 | I16 | I32 | U8 | U16 | U32)))
}

/// Whether `body`, the body of a `loop` labelled `label`, has a `break value` that leaves it:
/// an unlabelled one outside any inner loop, or one with its label.
fn breaks_with_value(body: &syn::Block, label: Option<&str>) -> bool {
    use syn::visit::Visit;
    struct Find<'a> {
        label: Option<&'a str>,
        depth: usize,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_expr_break(&mut self, b: &'ast syn::ExprBreak) {
            if b.expr.is_some() {
                self.found |= match &b.label {
                    None => self.depth == 0,
                    Some(l) => self.label == Some(l.ident.to_string().as_str()),
                };
            }
            syn::visit::visit_expr_break(self, b);
        }
        fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
            self.depth += 1;
            syn::visit::visit_expr_loop(self, l);
            self.depth -= 1;
        }
        fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
            self.depth += 1;
            syn::visit::visit_expr_while(self, w);
            self.depth -= 1;
        }
        fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
            self.depth += 1;
            syn::visit::visit_expr_for_loop(self, f);
            self.depth -= 1;
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
    }
    let mut f = Find {
        label,
        depth: 0,
        found: false,
    };
    f.visit_block(body);
    f.found
}

/// The shape of a call's result from the places a destructuring assignment gives it: each place
/// (and `_`) one `f64`, tuples nesting.
fn ret_of_places(t: &syn::ExprTuple) -> Result<Ret> {
    if t.elems.is_empty() {
        return err(t, "assign to a tuple of places: `(a, b) = f(x);`");
    }
    Ok(Ret::Tuple(
        t.elems
            .iter()
            .map(|e| match strip(e) {
                Expr::Tuple(inner) => ret_of_places(inner),
                _ => Ok(Ret::Scalar),
            })
            .collect::<Result<_>>()?,
    ))
}

/// The length of `[e; N]`: its tokens, and its value when it is a literal.
fn array_len(len: &Expr) -> Result<(TokenStream, Option<usize>)> {
    match strip(len) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => Ok((len.to_token_stream(), i.base10_parse::<usize>().ok())),
        Expr::Path(_) => Ok((len.to_token_stream(), None)),
        e => err(
            e,
            "array lengths are literals or `const` items (use a slice for run-time sizes)",
        ),
    }
}

/// `&[e]`, `&mut [e]`, `[e; N]`, `&[e; N]`, `&mut [e; N]`: element type, `&mut`, array type.
fn slice_type(ty: &syn::Type) -> Result<Option<(Ty, bool, Option<ArrayTy>)>> {
    let (inner, mutable, by_ref) = match ty {
        syn::Type::Reference(r) => (&*r.elem, r.mutability.is_some(), true),
        t => (t, false, false),
    };
    let (elem_ty, array) = match inner {
        syn::Type::Slice(s) if by_ref => (&*s.elem, None),
        syn::Type::Array(a) => {
            let (len, _) = array_len(&a.len)?;
            (&*a.elem, Some(ArrayTy { len, by_ref }))
        }
        _ => return Ok(None),
    };
    let Some(elem) = type_of(elem_ty) else {
        return Ok(None);
    };
    if elem == Ty::Bool {
        return err(elem_ty, "slices of `bool` are not supported");
    }
    if mutable && elem != Ty::F64 {
        return err(
            ty,
            "only `&mut [f64]` mutable slices are supported (integer data is passive input: take \
             `&[usize]`)",
        );
    }
    Ok(Some((elem, mutable, array)))
}

/// A `#[derive(Differentiable)]` struct type: `Name`, `&Name`, `Name<f64>`, `path::Name`.
fn struct_type(ty: &syn::Type) -> Result<bool> {
    let (inner, r) = match ty {
        syn::Type::Reference(r) => (&*r.elem, Some(r)),
        t => (t, None),
    };
    let syn::Type::Path(tp) = inner else {
        return Ok(false);
    };
    if tp.qself.is_some() {
        return Ok(false);
    }
    let Some(last) = tp.path.segments.last() else {
        return Ok(false);
    };
    let name = last.ident.to_string();
    let std = [
        "Vec", "Box", "Option", "String", "Rc", "Arc", "Cow", "Cell", "RefCell", "HashMap",
        "BTreeMap", "VecDeque", "Result",
    ];
    if std.contains(&name.as_str()) || !name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Ok(false);
    }
    match &last.arguments {
        syn::PathArguments::None => {}
        syn::PathArguments::AngleBracketed(a)
            if a.args.len() == 1
                && matches!(&a.args[0], syn::GenericArgument::Type(t) if type_of(t) == Some(Ty::F64)) =>
            {}
        a => {
            return err(
                a,
                "a differentiable struct parameter is `&Name` or `&Name<f64>` (other generic \
                 arguments, nested generics and lifetimes are not supported)",
            )
        }
    }
    if let Some(r) = r {
        if r.mutability.is_some() {
            return err(
                ty,
                "struct parameters are read-only: take `&Name` (write outputs into a \
                 `&mut [f64]` parameter, or return the struct)",
            );
        }
    }
    Ok(true)
}

/// What a return type is: `Some(false)` a tuple or array, `Some(true)` a struct, `None` other.
fn ret_agg_kind(t: &syn::Type) -> Result<Option<bool>> {
    Ok(match t {
        syn::Type::Tuple(tt) if !tt.elems.is_empty() => Some(false),
        syn::Type::Array(_) => Some(false),
        syn::Type::Path(_) if struct_type(t)? => Some(true),
        _ => None,
    })
}

fn scalar_leaf(f: &mut Func, name: syn::Ident, t: Ty, active: bool) -> Val {
    let val = f.new_val(t, Some(name.to_string()));
    f.blocks[0].params.push(val);
    f.params.push(Param::Scalar { name, val, active });
    val
}

fn slice_leaf(
    f: &mut Func,
    name: syn::Ident,
    elem: Ty,
    mutable: bool,
    declared_active: bool,
    array: Option<ArrayTy>,
) -> SliceId {
    f.slices.push(SliceInfo {
        name: name.to_string(),
        elem,
        kind: SliceKind::Param { mutable },
        declared_active,
        array,
    });
    let slice = f.slices.len() - 1;
    f.params.push(Param::Slice { name, slice });
    slice
}

/// `.0` → `0`, `.w` → `w`.
pub fn member_name(m: &syn::Member) -> String {
    match m {
        syn::Member::Named(i) => i.to_string(),
        syn::Member::Unnamed(x) => x.index.to_string(),
    }
}

/// The flat parameter name of an aggregate's leaf: `p__0_1`, `p__w`.
fn leaf_ident(base: &syn::Ident, path: &[syn::Member]) -> syn::Ident {
    use syn::ext::IdentExt;
    // (without `r#`: `p.r#type`'s leaf is `p__type`, a name `Ident::new` takes)
    let names: Vec<String> = path
        .iter()
        .map(|m| match m {
            syn::Member::Named(i) => i.unraw().to_string(),
            m => member_name(m),
        })
        .collect();
    syn::Ident::new(
        &format!("{}__{}", base.unraw(), names.join("_")),
        Span::call_site(),
    )
}

/// The leaves of a tuple parameter (every element is `f64`, `[f64; N]` or a tuple of these).
fn tuple_leaves(
    f: &mut Func,
    base: &syn::Ident,
    t: &syn::TypeTuple,
    path: &mut Vec<syn::Member>,
    active: bool,
    leaves: &mut Vec<AggLeaf>,
    lens: &mut Vec<(SliceId, Expr)>,
) -> Result<Ev> {
    let mut members = vec![];
    for (k, et) in t.elems.iter().enumerate() {
        path.push(syn::Member::Unnamed(syn::Index {
            index: k as u32,
            span: Span::call_site(),
        }));
        let ev =
            match et {
                _ if type_of(et) == Some(Ty::F64) => {
                    Ev::V(scalar_leaf(f, leaf_ident(base, path), Ty::F64, active))
                }
                syn::Type::Array(a) if type_of(&a.elem) == Some(Ty::F64) => {
                    array_len(&a.len)?;
                    let s = slice_leaf(f, leaf_ident(base, path), Ty::F64, false, active, None);
                    lens.push((s, a.len.clone()));
                    Ev::S(SliceArg {
                        slice: s,
                        lo: None,
                        hi: None,
                    })
                }
                syn::Type::Tuple(tt) if !tt.elems.is_empty() => {
                    tuple_leaves(f, base, tt, path, active, leaves, lens)?
                }
                _ => return err(
                    et,
                    "tuple parameters hold `f64`, `[f64; N]` or tuples of these (pass integers, \
                     slices and structs as separate parameters)",
                ),
            };
        if let Ev::V(_) | Ev::S(_) = ev {
            leaves.push(AggLeaf {
                path: path.clone(),
                param: f.params.len() - 1,
                span: et.span(),
            });
        }
        members.push((k.to_string(), ev));
        path.pop();
    }
    Ok(Ev::Agg(AggV {
        members,
        path: None,
    }))
}

/// Struct fields used as arrays: indexed, `.len()`, `.iter()`, `&p.b`, `for v in p.b`.
struct ArrayUses<'a>(&'a mut HashSet<(String, String)>);

impl ArrayUses<'_> {
    fn mark(&mut self, e: &Expr) {
        if let Expr::Field(f) = strip(e) {
            if let (Expr::Path(p), syn::Member::Named(m)) = (strip(&f.base), &f.member) {
                if let Some(id) = p.path.get_ident() {
                    self.0.insert((id.to_string(), m.to_string()));
                }
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for ArrayUses<'_> {
    fn visit_local(&mut self, l: &'ast syn::Local) {
        // a copy with its type: `let c: [f64; 3] = p.b;`
        if let (Pat::Type(pt), Some(init)) = (&l.pat, &l.init) {
            if matches!(&*pt.ty, syn::Type::Array(_)) {
                self.mark(&init.expr);
            }
        }
        syn::visit::visit_local(self, l);
    }
    fn visit_expr_index(&mut self, i: &'ast syn::ExprIndex) {
        self.mark(&i.expr);
        syn::visit::visit_expr_index(self, i);
    }
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if matches!(
            m.method.to_string().as_str(),
            "len"
                | "iter"
                | "iter_mut"
                | "into_iter"
                | "is_empty"
                | "fill"
                | "windows"
                | "chunks"
                | "chunks_exact"
        ) {
            self.mark(&m.receiver);
        }
        syn::visit::visit_expr_method_call(self, m);
    }
    fn visit_expr_reference(&mut self, r: &'ast syn::ExprReference) {
        self.mark(&r.expr);
        syn::visit::visit_expr_reference(self, r);
    }
    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        self.mark(&f.expr);
        syn::visit::visit_expr_for_loop(self, f);
    }
}

/// Flatten an aggregate value into `(member path, leaf)`.
fn flatten_ev(ev: Ev, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Ev)>) {
    match ev {
        Ev::Agg(a) => {
            for (m, e) in a.members {
                path.push(m);
                flatten_ev(e, path, out);
                path.pop();
            }
        }
        e => out.push((path.clone(), e)),
    }
}

/// Lower a function.
pub fn lower(item: &syn::ItemFn, opts: &Options) -> Result<Func> {
    let sig = &item.sig;
    if let Some(g) = sig.generics.params.first() {
        let msg = if matches!(g, syn::GenericParam::Lifetime(_)) {
            "lifetime parameters are not supported: leave them out (`x: &[f64]`; a result that \
             borrows an argument is not supported either)"
        } else {
            "generic parameters are not supported: write the function on `f64`; the generated \
             code is generic over `T: Real` for you"
        };
        return err(g, msg);
    }
    if sig.asyncness.is_some() || sig.unsafety.is_some() || sig.variadic.is_some() {
        return err(sig, "only plain `fn` items are supported");
    }
    let mut ret_agg = None;
    let returns_f64 = match &sig.output {
        syn::ReturnType::Default => false,
        // `-> ()`: nothing
        syn::ReturnType::Type(_, t) if matches!(&**t, syn::Type::Tuple(tt) if tt.elems.is_empty()) => {
            false
        }
        syn::ReturnType::Type(_, t) => {
            if type_of(t) == Some(Ty::F64) {
                true
            } else if let Some(is_struct) = ret_agg_kind(t)? {
                ret_agg = Some(RetAgg {
                    ty: (**t).clone(),
                    is_struct,
                    leaves: vec![],
                });
                false
            } else {
                return err(
                    t,
                    "a #[differentiable] function returns `f64`, a tuple of `f64` and `[f64; N]`, \
                     an array `[f64; N]`, a `#[derive(Differentiable)]` struct, or nothing \
                     (write other outputs into a `&mut [f64]` parameter)",
                );
            }
        }
    };
    let mut f = Func {
        name: sig.ident.clone(),
        params: vec![],
        sig: vec![],
        returns_f64,
        ret_agg,
        values: vec![],
        slices: vec![],
        blocks: vec![],
        span: sig.ident.span(),
        consts: vec![],
        int_links: vec![],
    };
    let entry = Block {
        params: vec![],
        insts: vec![],
        term: Term::Unreachable,
    };
    f.blocks.push(entry);
    let mut env = vec![];
    let mut member_lens = vec![];
    if let Some(w) = &opts.wrt {
        for id in w {
            let known = sig.inputs.iter().any(|a| match a {
                syn::FnArg::Typed(pt) => {
                    matches!(&*pt.pat, Pat::Ident(pi) if pi.ident == *id)
                }
                _ => false,
            });
            if !known {
                return err(
                    id,
                    "`wrt` names a parameter that this function does not have",
                );
            }
        }
    }
    for arg in &sig.inputs {
        let pt = match arg {
            syn::FnArg::Typed(pt) => pt,
            syn::FnArg::Receiver(r) => {
                return err(r, "methods are not supported: write a free function")
            }
        };
        let ident = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            Pat::Wild(w) => {
                return err(
                    w,
                    "parameters must be plain names: name an unused one `_x` (`_x: f64`)",
                )
            }
            p => return err(p, "parameters must be plain names"),
        };
        let in_wrt = opts
            .wrt
            .as_ref()
            .map(|w| w.contains(&ident))
            .unwrap_or(true);
        let name = ident.to_string();
        if let Some(t) = type_of(&pt.ty) {
            if opts.wrt.is_some() && in_wrt && t != Ty::F64 {
                return err(
                    &ident,
                    "`wrt` lists a parameter that is not differentiable: `wrt` takes `f64`, \
                     `&[f64]`, `[f64; N]`, tuples of these and `#[derive(Differentiable)]` \
                     structs, not integers",
                );
            }
            let val = scalar_leaf(&mut f, ident.clone(), t, t == Ty::F64 && in_wrt);
            f.sig.push(SigItem::Leaf(f.params.len() - 1));
            env.push(Var {
                name,
                b: Binding::Val(val),
            });
            continue;
        }
        if let Some((elem, mutable, array)) = slice_type(&pt.ty)? {
            if let (Pat::Ident(pi), syn::Type::Array(_)) = (&*pt.pat, &*pt.ty) {
                if let Some(m) = pi.mutability {
                    return err(
                        m,
                        format!(
                            "`mut` array parameters are not supported: take the array as it is \
                             and copy it into a local one to write (`{ident}0: {ty}` and \
                             `let mut {ident} = {ident}0;`)",
                            ty = pt.ty.to_token_stream().to_string().replace(" ;", ";")
                        ),
                    );
                }
            }
            if opts.wrt.is_some() && in_wrt && elem != Ty::F64 {
                return err(
                    &ident,
                    "`wrt` lists a parameter that is not differentiable: `wrt` takes `f64`, \
                     `&[f64]`, `[f64; N]`, tuples of these and `#[derive(Differentiable)]` \
                     structs, not integers",
                );
            }
            let slice = slice_leaf(
                &mut f,
                ident.clone(),
                elem,
                mutable,
                elem == Ty::F64 && (in_wrt || mutable),
                array,
            );
            f.sig.push(SigItem::Leaf(f.params.len() - 1));
            env.push(Var {
                name,
                b: Binding::Slice(SliceArg {
                    slice,
                    lo: None,
                    hi: None,
                }),
            });
            continue;
        }
        if let syn::Type::Tuple(t) = &*pt.ty {
            if !t.elems.is_empty() {
                let mut leaves = vec![];
                let ev = tuple_leaves(
                    &mut f,
                    &ident,
                    t,
                    &mut vec![],
                    in_wrt,
                    &mut leaves,
                    &mut member_lens,
                )?;
                f.sig.push(SigItem::Agg(Box::new(AggParam {
                    name: ident.clone(),
                    ty: (*pt.ty).clone(),
                    active: in_wrt,
                    is_struct: false,
                    leaves,
                })));
                let Ev::Agg(a) = ev else { unreachable!() };
                env.push(Var {
                    name,
                    b: Binding::Agg(a),
                });
                continue;
            }
        }
        if struct_type(&pt.ty)? {
            f.sig.push(SigItem::Agg(Box::new(AggParam {
                name: ident.clone(),
                ty: (*pt.ty).clone(),
                active: in_wrt,
                is_struct: true,
                leaves: vec![],
            })));
            env.push(Var {
                name,
                b: Binding::Struct(f.sig.len() - 1),
            });
            continue;
        }
        return err(
            &pt.ty,
            "unsupported parameter type: use `f64`, an integer type, `bool`, `&[f64]`, \
             `&mut [f64]`, `&[usize]`, `[f64; N]` (or `&[f64; N]`), a tuple of `f64` and \
             `[f64; N]`, or a `#[derive(Differentiable)]` struct",
        );
    }
    let mut array_fields = HashSet::new();
    {
        use syn::visit::Visit;
        let mut v = ArrayUses(&mut array_fields);
        v.visit_block(&item.block);
    }
    let mut l = Lower {
        f,
        opts,
        array_fields,
        member_lens,
        cur: 0,
        env,
        loops: vec![],
        ret: 0,
        dead: HashSet::new(),
        counter: 0,
        captured: None,
        untyped_decls: HashSet::new(),
        block_depth: 0,
        const_names: vec![],
    };
    let ret = l.new_block();
    l.ret = ret;
    if returns_f64 {
        let rv = l.f.new_val(Ty::F64, Some("ret".into()));
        l.f.blocks[ret].params.push(rv);
        l.f.blocks[ret].term = Term::Return(Some(rv));
    } else {
        l.f.blocks[ret].term = Term::Return(None);
    }
    if let Some(ra) = l.f.ret_agg.clone() {
        if !ra.is_struct {
            l.ret_leaves(&ra.ty, &mut vec![])?;
        }
    }
    let tail = l.block(&item.block)?;
    if !l.is_dead(l.cur) {
        let last = || {
            item.block
                .stmts
                .last()
                .map(|s| s.to_token_stream())
                .unwrap_or_else(|| item.block.to_token_stream())
        };
        if returns_f64 {
            match tail {
                Ev::V(v) if l.f.values[v].ty == Ty::F64 => l.set_term(Term::Jump(Target {
                    block: ret,
                    args: vec![v],
                })),
                _ => return err(last(), "the function must end in an `f64` expression"),
            }
        } else {
            if l.f.ret_agg.is_some() {
                if let Ev::Unit = tail {
                    return err(last(), "the function must end in its result");
                }
                l.store_ret(tail, &last())?;
            }
            l.set_term(Term::Jump(Target {
                block: ret,
                args: vec![],
            }));
        }
    }
    let mut f = l.f;
    crate::passes::cleanup(&mut f);
    crate::passes::cse_loads(&mut f);
    crate::passes::infer_ints(&mut f);
    Ok(f)
}

impl Lower<'_> {
    /// End the current block with a branch on `c` to two new blocks (no arguments): the
    /// `then` and `else` sides of an `if`, `clamp` or `rem_euclid`.
    fn fork(&mut self, c: Val) -> (BlockId, BlockId) {
        let (tb, eb) = (self.new_block(), self.new_block());
        let to = |block| Target {
            block,
            args: vec![],
        };
        self.finish(Term::Branch(c, to(tb), to(eb)));
        (tb, eb)
    }

    fn new_block(&mut self) -> BlockId {
        self.f.blocks.push(Block {
            params: vec![],
            insts: vec![],
            term: Term::Unreachable,
        });
        self.f.blocks.len() - 1
    }

    fn is_dead(&self, b: BlockId) -> bool {
        self.dead.contains(&b)
    }

    fn set_term(&mut self, t: Term) {
        self.f.blocks[self.cur].term = t;
    }

    /// End the current block with `t`; following code goes into an unreachable block.
    fn finish(&mut self, t: Term) {
        self.set_term(t);
        let d = self.new_block();
        self.dead.insert(d);
        self.cur = d;
    }

    fn emit(&mut self, i: Inst) {
        let c = self.cur;
        self.f.blocks[c].insts.push(i);
    }

    fn val(&mut self, ty: Ty) -> Val {
        self.f.new_val(ty, None)
    }

    fn ty(&self, v: Val) -> Ty {
        self.f.values[v].ty
    }

    fn konst(&mut self, ty: Ty, tokens: TokenStream, value: ConstVal) -> Val {
        let dst = self.val(ty);
        self.emit(Inst::Const {
            dst,
            c: Const { tokens, value },
        });
        dst
    }

    /// The name the generated module declares the body's constant `id` under, where one is in
    /// scope here (its variable in `env` not yet dropped or shadowed).
    fn const_in_scope(&self, id: &syn::Ident) -> Option<&syn::Ident> {
        self.const_names
            .iter()
            .find(|(k, _, at)| k == id && self.env.get(*at).is_some_and(|v| *k == v.name))
            .map(|(_, to, _)| to)
    }

    /// An array length as written (a literal or a constant's name), naming a `const` of a
    /// nested block by the name the generated module declares it under.
    fn len_tokens(&self, len: &Expr) -> TokenStream {
        if let Expr::Path(p) = strip(len) {
            if let Some(to) = p.path.get_ident().and_then(|id| self.const_in_scope(id)) {
                return quote!(#to);
            }
        }
        len.to_token_stream()
    }

    fn usize_const(&mut self, v: usize) -> Val {
        let lit = proc_macro2::Literal::usize_suffixed(v);
        self.konst(
            Ty::Int(Some(IntTy::Usize)),
            quote!(#lit),
            ConstVal::I(v as i128),
        )
    }

    fn int_op(&mut self, op: IntOp, a: Val, b: Val) -> Val {
        let dst = self.val(self.ty(a));
        self.emit(Inst::Int { dst, op, a, b });
        dst
    }

    fn bin(&mut self, op: Op2, a: Val, b: Val) -> Val {
        let dst = self.val(Ty::F64);
        self.emit(Inst::Bin {
            dst,
            op,
            a,
            b,
            partials: [None, None],
        });
        dst
    }

    fn un(&mut self, op: Op1, a: Val, n: Option<Val>) -> Val {
        let dst = self.val(Ty::F64);
        self.emit(Inst::Un {
            dst,
            op,
            a,
            n,
            partial: None,
        });
        dst
    }

    fn cmp(&mut self, op: CmpOp, a: Val, b: Val) -> Val {
        let dst = self.val(Ty::Bool);
        self.emit(Inst::Cmp { dst, op, a, b });
        dst
    }

    // ---- variables and joins ----

    fn lookup(&self, name: &str) -> Option<usize> {
        self.env.iter().rposition(|v| v.name == name)
    }

    fn snapshot(&self, n: usize) -> Vec<Binding> {
        self.env[..n].iter().map(|v| v.b.clone()).collect()
    }

    fn restore(&mut self, s: &[Binding]) {
        for (v, b) in self.env.iter_mut().zip(s) {
            v.b = b.clone();
        }
    }

    /// The current values of the first `n` variables (the arguments of a jump to a join).
    fn args(&self, n: usize) -> Vec<Val> {
        self.env[..n]
            .iter()
            .filter_map(|v| match v.b {
                Binding::Val(x) => Some(x),
                _ => None,
            })
            .collect()
    }

    /// Give `blk` one parameter per variable among the first `n`.
    fn make_params(&mut self, blk: BlockId, n: usize) {
        for i in 0..n {
            if let Binding::Val(x) = self.env[i].b {
                let p = self.f.new_val(self.ty(x), Some(self.env[i].name.clone()));
                if self.untyped_decls.contains(&x) {
                    // (still the stand-in of `let y;` or of a `loop`'s value, through a loop)
                    self.untyped_decls.insert(p);
                }
                self.f.blocks[blk].params.push(p);
            }
        }
    }

    /// Bind the first `n` variables to `blk`'s parameters.
    fn bind_params(&mut self, blk: BlockId, n: usize) {
        let mut k = 0;
        for i in 0..n {
            if let Binding::Val(_) = self.env[i].b {
                self.env[i].b = Binding::Val(self.f.blocks[blk].params[k]);
                k += 1;
            }
        }
    }

    fn jump(&mut self, blk: BlockId, n: usize, extra: Option<Val>) {
        let mut args = self.args(n);
        args.extend(extra);
        self.finish(Term::Jump(Target { block: blk, args }));
    }

    // ---- statements ----

    fn block(&mut self, b: &syn::Block) -> Result<Ev> {
        let n0 = self.env.len();
        self.block_depth += 1;
        let r = (|| {
            // a `const` is visible in its whole block, before its declaration too
            for s in &b.stmts {
                if let Stmt::Item(syn::Item::Const(c)) = s {
                    self.nested_const(c)?;
                }
            }
            let mut last = Ev::Unit;
            for s in &b.stmts {
                last = self.stmt(s)?;
            }
            Ok(last)
        })();
        self.block_depth -= 1;
        self.env.truncate(n0);
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<Ev> {
        match s {
            Stmt::Local(l) => {
                self.local(l)?;
                Ok(Ev::Unit)
            }
            Stmt::Expr(e, None) => self.expr(e, None),
            Stmt::Expr(e, Some(_)) => {
                match self.is_user_call(e) {
                    // its result, of a shape the macro does not know, is dropped
                    Some(c) => self.user_call(c, Ret::Ignored)?,
                    None => self.expr(e, None)?,
                };
                Ok(Ev::Unit)
            }
            // bound on entering the block (`Lower::block`)
            Stmt::Item(syn::Item::Const(_)) => Ok(Ev::Unit),
            Stmt::Item(i) => err(
                i,
                "nested items other than `const` are not supported: move them out of the \
                 function",
            ),
            Stmt::Macro(m) if assert_kind(&m.mac).is_some() => self.assert(&m.mac),
            Stmt::Macro(m) => err(
                &m.mac,
                "macros are not supported in #[differentiable] functions (write the code they \
                 expand to, or call a #[differentiable] function)",
            ),
        }
    }

    /// `assert!(c)`, `assert!(c, "message")`, `assert_eq!(a, b)`, `assert_ne!(a, b)` and their
    /// `debug_` forms: a passive check that panics as the macro does (the message is the
    /// macro's own for a bare condition, the literal when one is given; a format string's
    /// arguments are not evaluated).
    fn assert(&mut self, mac: &syn::Macro) -> Result<Ev> {
        let (eq, debug) = assert_kind(mac).expect("checked by the caller");
        let args = mac.parse_body_with(
            syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
        )?;
        let args: Vec<&Expr> = args.iter().collect();
        let need = if eq.is_some() { 2 } else { 1 };
        if args.len() < need {
            return err(mac, format!("expected {need} argument(s)"));
        }
        if debug && !args[..need].iter().all(|a| cannot_panic_or_write(a)) {
            // `debug_assert!(c)` is `if cfg!(debug_assertions) { assert!(c) }`: without debug
            // assertions Rust does not evaluate `c`, which here may write a variable or panic
            // (an index, a call, an integer division), so neither may the generated code. (A
            // condition that can do neither is evaluated as it stands and only its panic is
            // behind `cfg!`: a branch costs a tag per run in a loop.)
            let name = mac.path.get_ident().expect("an identifier").to_string();
            let base = name.strip_prefix("debug_").expect("a debug_ form");
            let mut inner = mac.clone();
            inner.path = syn::Ident::new(base, mac.path.span()).into();
            let e: syn::ExprIf = syn::parse_quote_spanned! {mac.path.span()=>
                if cfg!(debug_assertions) { #inner; }
            };
            self.lower_if(&e, None)?;
            return Ok(Ev::Unit);
        }
        let text = |e: &Expr| e.to_token_stream().to_string();
        let given = match args.get(need) {
            // (a format string: `{{` and `}}` print as `{` and `}`, as Rust's own panic does)
            Some(Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            })) => Some(s.value().replace("{{", "{").replace("}}", "}")),
            _ => None,
        };
        let (cond, default) = match eq {
            None => (
                self.cond(args[0])?,
                format!("assertion failed: {}", text(args[0])),
            ),
            Some(op) => {
                let a = self.scalar(args[0], None)?;
                let b = self.scalar(args[1], Some(self.ty(a)))?;
                if !self.ty(a).same_kind(self.ty(b)) {
                    return err(args[1], "compare values of one type");
                }
                let (cmp, sym) = if op {
                    (CmpOp::Eq, "==")
                } else {
                    (CmpOp::Ne, "!=")
                };
                let c = self.cmp(cmp, a, b);
                let m = format!(
                    "assertion `left {sym} right` failed: {} {sym} {}",
                    text(args[0]),
                    text(args[1])
                );
                (c, m)
            }
        };
        self.emit(Inst::Assert {
            cond,
            msg: given.unwrap_or(default),
            debug,
            span: mac.span(),
        });
        Ok(Ev::Unit)
    }

    /// `const NAME: f64 = …;` (or an integer type) in the body: the generated module declares
    /// it too, and the body reads it by name.
    fn nested_const(&mut self, c: &syn::ItemConst) -> Result<()> {
        let Some(ty) = type_of(&c.ty).filter(|t| *t != Ty::Bool) else {
            return err(&c.ty, "a `const` in the body is an `f64` or an integer");
        };
        if !c.generics.params.is_empty() {
            return err(&c.generics, "generic `const` items are not supported");
        }
        let name = c.ident.to_string();
        if self.const_names.iter().any(|(k, _, _)| *k == c.ident) {
            return err(
                &c.ident,
                format!("a second `const {name}` in this function: rename one"),
            );
        }
        let value = match strip(&c.expr) {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Float(x), ..
            }) => ConstVal::F(x.base10_parse()?),
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(i), ..
            }) if ty == Ty::F64 => ConstVal::F(i.base10_parse()?),
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(i), ..
            }) => ConstVal::I(i.base10_parse()?),
            // An expression of other constants: its value is known to rustc only. It must
            // not look like a known integer: the analyses read `ConstVal::I` (a counter's
            // `+= 1`, an induction's step), and a made-up value would send adjoints to the
            // wrong elements. `F(NaN)` is what a module-level constant gets too.
            _ => ConstVal::F(f64::NAN),
        };
        let mut item = c.clone();
        item.vis = syn::Visibility::Inherited;
        if self.block_depth > 1 {
            item.ident = syn::Ident::new(&format!("__ADJOINT_CONST_{name}"), c.ident.span());
        }
        // the body's constants its value reads, under their declared names
        struct Rename<'l, 'a>(&'l Lower<'a>);
        impl syn::visit_mut::VisitMut for Rename<'_, '_> {
            fn visit_expr_path_mut(&mut self, e: &mut syn::ExprPath) {
                if let Some(to) = e.path.get_ident().and_then(|id| self.0.const_in_scope(id)) {
                    e.path = to.clone().into();
                }
            }
        }
        syn::visit_mut::VisitMut::visit_expr_mut(&mut Rename(self), &mut item.expr);
        self.const_names
            .push((c.ident.clone(), item.ident.clone(), self.env.len()));
        let id = item.ident.clone();
        self.f.consts.push(item);
        let v = self.konst(ty, quote!(#id), value);
        self.env.push(Var {
            name,
            b: Binding::Val(v),
        });
        Ok(())
    }

    /// `let y;` or `let y: f64;`, assigned later on every path that reads it (rustc checks
    /// that on the function as written): a stand-in zero of the declared type until then, so
    /// that joins and loops carry the variable like any other.
    fn declare(&mut self, l: &syn::Local) -> Result<()> {
        let (pat, ty) = match &l.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        let Pat::Ident(pi) = pat else {
            return err(
                pat,
                "declare one variable at a time without a value (`let y: f64;`), or give a \
                 value to destructure",
            );
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() {
            return err(pi, "declare a plain name: `let y: f64;`");
        }
        let v = match ty.map(|t| (type_of(t), t)) {
            None => {
                let v = self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0));
                self.untyped_decls.insert(v);
                v
            }
            Some((Some(Ty::F64), _)) => self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0)),
            Some((Some(Ty::Int(t)), _)) => self.konst(Ty::Int(t), quote!(0), ConstVal::I(0)),
            Some((_, t)) => {
                return err(
                    t,
                    "a variable declared without a value is an `f64` or an integer (declare \
                     arrays with a value: `let mut a = [0.0; 3];`)",
                )
            }
        };
        self.env.push(Var {
            name: pi.ident.to_string(),
            b: Binding::Val(v),
        });
        Ok(())
    }

    fn local(&mut self, l: &syn::Local) -> Result<()> {
        let init = match &l.init {
            Some(i) => {
                if let Some((_, d)) = &i.diverge {
                    return err(d, "`let … else` is not supported");
                }
                &*i.expr
            }
            None => return self.declare(l),
        };
        let (pat, ty) = match &l.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        if let Expr::Closure(c) = strip(init) {
            let Pat::Ident(pi) = pat else {
                return err(
                    pat,
                    "bind a closure to a plain name: `let f = |x: f64| x * x;`",
                );
            };
            if let Some(t) = ty {
                return err(t, "leave out the closure's type: `let f = |x: f64| x * x;`");
            }
            check_closure(c)?;
            let def = ClosureDef {
                c: c.clone(),
                env: self.env.clone(),
            };
            self.env.push(Var {
                name: pi.ident.to_string(),
                b: Binding::Closure(std::rc::Rc::new(def)),
            });
            return Ok(());
        }
        // Local arrays: `let mut a = [0.0; N];` or `let mut a: [f64; N] = [0.0; N];`
        if let Expr::Repeat(rep) = init {
            let name = match pat {
                Pat::Ident(pi) => pi.ident.to_string(),
                p => return err(p, "bind a local array to a plain name"),
            };
            if let Some(t) = ty {
                if !matches!(t, syn::Type::Array(_)) {
                    return err(t, "a `[v; N]` array has an array type `[f64; N]`");
                }
            }
            let hint = match ty {
                Some(syn::Type::Array(a)) => type_of(&a.elem),
                _ => None,
            };
            let s = self.repeat_array(&name, rep, hint)?;
            self.env.push(Var {
                name,
                b: Binding::Slice(s),
            });
            return Ok(());
        }
        // `let (c, s) = polar(r, t);`, `let v: [f64; 3] = cross(a, b);`, `let _ = f(x);`
        if let Some(c) = self.is_user_call(init) {
            let ret = match (ty, pat) {
                (Some(t), _) => ret_of_type(t)?,
                (None, Pat::Wild(_)) => Ret::Ignored,
                (None, _) => ret_of_pat(pat)?,
            };
            if ret != Ret::Scalar {
                let ev = self.user_call(c, ret)?;
                return self.bind_ev(pat, ev, init, false);
            }
        }
        let hint = match ty {
            Some(t) => match (type_of(t), t) {
                (Some(t), _) => Some(t),
                (None, syn::Type::Reference(_) | syn::Type::Tuple(_)) => None,
                (None, syn::Type::Array(a)) => type_of(&a.elem),
                _ => {
                    return err(t, "unsupported type: locals are `f64`, integers, `bool`, slices of parameters, `[f64; N]` arrays or tuples");
                }
            },
            None => None,
        };
        let len = match ty {
            Some(syn::Type::Array(a)) => Some(&a.len),
            _ => None,
        };
        self.bind_pat(pat, init, hint, len)?;
        // `let (a, b): (u64, f64) = (k, 2.0);`: the members' written integer types, as a typed
        // `let` of one name gives its value its type (`k` is then a `u64`).
        if let (Some(syn::Type::Tuple(tt)), Pat::Tuple(pt)) = (ty, pat) {
            for (p, t) in pt.elems.iter().zip(&tt.elems) {
                let (Pat::Ident(pi), Some(h @ Ty::Int(Some(_)))) = (p, type_of(t)) else {
                    continue;
                };
                if let Some(i) = self.lookup(&pi.ident.to_string()) {
                    if let Binding::Val(v) = self.env[i].b {
                        if self.ty(v) == Ty::Int(None) {
                            self.f.values[v].ty = h;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// `len`: the length of the declared array type (`let c: [f64; 3] = …;`): the value is a
    /// copy, of that length.
    fn bind_pat(
        &mut self,
        pat: &Pat,
        init: &Expr,
        hint: Option<Ty>,
        len: Option<&Expr>,
    ) -> Result<()> {
        match pat {
            Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return err(pi, "bind plain names (no `ref`, no `@`)");
                }
                let ev = self.expr(init, hint)?;
                let name = pi.ident.to_string();
                let b = match ev {
                    Ev::V(v) => {
                        if let (Some(h), t) = (hint, self.ty(v)) {
                            if !h.same_kind(t) {
                                return err(init, "the value does not have the declared type");
                            }
                            if let (Ty::Int(Some(_)), Ty::Int(None)) = (h, t) {
                                // pin the type through a cast-free copy: record it on the value
                                self.f.values[v].ty = h;
                            }
                        }
                        if self.f.values[v].name.is_none() {
                            self.f.values[v].name = Some(name.clone());
                        }
                        Binding::Val(v)
                    }
                    Ev::S(s) => {
                        // `let b = a;` copies a local array (a reference `&a` aliases it), as
                        // `let mut b = x;` and `let mut b = *r;` copy array parameters
                        // (`x: [f64; 3]`, `r: &[f64; 3]`)
                        if let (SliceKind::Local { .. }, Expr::Path(_)) =
                            (&self.f.slices[s.slice].kind, strip(init))
                        {
                            if s.lo.is_none() && s.hi.is_none() && self.names_of(s.slice) > 1 {
                                return err(
                                    init,
                                    "this array has two names (it and a reference to it): bind \
                                     a copy with `*r` or `[a[0], a[1], …]`, or use the name it \
                                     has",
                                );
                            }
                        }
                        let info = &self.f.slices[s.slice];
                        let fresh = matches!(
                            strip(init),
                            Expr::Reference(_) | Expr::Array(_) | Expr::Repeat(_)
                        );
                        let copy = match (&info.kind, &info.array, strip(init)) {
                            (_, _, _) if fresh => false,
                            // a value of array type is a copy (`let c: [f64; 3] = p.b;`)
                            _ if len.is_some() => true,
                            (SliceKind::Local { .. }, _, _) => true,
                            (SliceKind::Param { .. }, Some(a), Expr::Path(_)) => !a.by_ref,
                            (SliceKind::Param { .. }, Some(_), Expr::Unary(u)) => {
                                matches!(u.op, UnOp::Deref(_))
                            }
                            // a tuple parameter's array member (`let mut c = p.1;`, `*r`)
                            (SliceKind::Param { .. }, None, Expr::Field(_)) => {
                                self.member_len(s.slice).is_some()
                            }
                            (SliceKind::Param { .. }, None, Expr::Unary(u)) => {
                                matches!(u.op, UnOp::Deref(_)) && self.member_len(s.slice).is_some()
                            }
                            _ => false,
                        };
                        if copy && s.lo.is_none() && s.hi.is_none() {
                            Binding::Slice(self.copy_array(&name, s, len.map(|l| (l, init)))?)
                        } else {
                            Binding::Slice(s)
                        }
                    }
                    Ev::Unit => {
                        if self.is_dead(self.cur) {
                            return Ok(());
                        }
                        return err(init, "this expression has no value");
                    }
                    ev => ev.binding().expect("a value"),
                };
                self.env.push(Var { name, b });
                Ok(())
            }
            Pat::Wild(_) => {
                self.expr(init, hint)?;
                Ok(())
            }
            Pat::Tuple(_) => {
                let ev = self.expr(init, None)?;
                if self.is_dead(self.cur) && matches!(ev, Ev::Unit) {
                    return Ok(());
                }
                // a tuple literal's arrays are copies already, and its references must stay
                // references (`let (r, k) = (&mut a, 1);`)
                let literal = matches!(strip(init), Expr::Tuple(_));
                self.bind_ev(pat, ev, init, !literal)
            }
            p => err(
                p,
                "unsupported pattern: bind a plain name, `_` or a tuple of names",
            ),
        }
    }

    /// Bind a pattern to an evaluated value (tuples destructure).
    ///
    /// `copy`: a whole local array bound to a name is copied into a new one, as Rust copies an
    /// array value (`let (mut b, c) = (a, x);`, a closure's parameter `b: [f64; 2]`): changing
    /// `b` must not change `a`. A call's fresh result arrays need no copy.
    fn bind_ev(&mut self, pat: &Pat, ev: Ev, at: &dyn ToTokens, copy: bool) -> Result<()> {
        match pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if let Ev::V(v) = ev {
                    if self.f.values[v].name.is_none() {
                        self.f.values[v].name = Some(pi.ident.to_string());
                    }
                }
                let ev = match ev {
                    Ev::S(s)
                        if copy
                            && (self.is_whole_local(&s)
                                || (self.member_len(s.slice).is_some()
                                    && s.lo.is_none()
                                    && s.hi.is_none())) =>
                    {
                        Ev::S(self.copy_array(&pi.ident.to_string(), s, None)?)
                    }
                    ev => ev,
                };
                let Some(b) = ev.binding() else {
                    return err(pat, "this element has no value");
                };
                self.env.push(Var {
                    name: pi.ident.to_string(),
                    b,
                });
                Ok(())
            }
            Pat::Wild(_) => Ok(()),
            Pat::Tuple(pt) => {
                let Ev::Agg(AggV {
                    members,
                    path: None,
                }) = ev
                else {
                    return err(
                        at,
                        "destructure tuples only (`let (a, b) = (x, y);`, a tuple parameter, a \
                         tuple variable or `let (a, b) = f(x);` with `f` #[differentiable])",
                    );
                };
                if let Some(rest) = pt.elems.iter().find(|e| matches!(e, Pat::Rest(_))) {
                    return err(
                        rest,
                        "`..` in a tuple pattern is not supported: bind every member, with `_` \
                         for those not read (`let (a, _, _) = t;`)",
                    );
                }
                if members.len() != pt.elems.len() {
                    return err(pt, "the tuple pattern and the tuple have different lengths");
                }
                for (p, (_, e)) in pt.elems.iter().zip(members) {
                    self.bind_ev(p, e, p, copy)?;
                }
                Ok(())
            }
            p => err(p, "bind plain names, `_` or tuples of these"),
        }
    }

    /// Whether the array `s`, the value of `e`, is one Rust copies where it is used as a value:
    /// a whole local array or array parameter named as it is (`a`, `x` for `x: [f64; 3]`) or
    /// dereferenced (`*r`), not a reference (`&a`) nor part of a slice.
    fn owned_array_expr(&self, s: &SliceArg, e: &Expr) -> Result<bool> {
        let info = &self.f.slices[s.slice];
        if s.lo.is_some() || s.hi.is_some() {
            return Ok(false);
        }
        Ok(match (&info.kind, &info.array, strip(e)) {
            (_, _, Expr::Reference(_)) => false,
            (SliceKind::Local { .. }, _, Expr::Path(_)) => {
                if self.names_of(s.slice) > 1 {
                    return err(
                        e,
                        "this array has two names (it and a reference to it): write `*r` for \
                         a copy, or use the name it has",
                    );
                }
                true
            }
            (SliceKind::Param { .. }, Some(a), Expr::Path(_)) => !a.by_ref,
            (SliceKind::Local { .. }, _, Expr::Unary(u))
            | (SliceKind::Param { .. }, Some(_), Expr::Unary(u)) => {
                matches!(u.op, UnOp::Deref(_))
            }
            // a tuple parameter's array member (`(t.1, k)`, `(*r, k)` of `r = &t.1`)
            (SliceKind::Param { .. }, None, Expr::Field(_)) => self.member_len(s.slice).is_some(),
            (SliceKind::Param { .. }, None, Expr::Unary(u)) => {
                matches!(u.op, UnOp::Deref(_)) && self.member_len(s.slice).is_some()
            }
            _ => false,
        })
    }

    /// The written length of `s` if it is a tuple parameter's array member.
    fn member_len(&self, s: SliceId) -> Option<&Expr> {
        self.member_lens
            .iter()
            .find(|(m, _)| *m == s)
            .map(|(_, e)| e)
    }

    /// How many variables in scope name the whole local array `s` (more than one: a reference
    /// `let r = &a;` names it too).
    fn names_of(&self, s: SliceId) -> usize {
        self.env
            .iter()
            .filter(|v| matches!(&v.b, Binding::Slice(a) if a.slice == s && a.lo.is_none() && a.hi.is_none()))
            .count()
    }

    /// Whether `s` is a whole local array (a value Rust copies when it is bound).
    fn is_whole_local(&self, s: &SliceArg) -> bool {
        matches!(self.f.slices[s.slice].kind, SliceKind::Local { .. })
            && s.lo.is_none()
            && s.hi.is_none()
    }

    /// A new local array `name` holding a copy of the whole local array or array parameter `s`.
    /// `typed`: the declared length and the copied expression, for a copy of a struct's array
    /// field (`let c: [f64; 3] = p.b;`), whose length only the type says.
    fn copy_array(
        &mut self,
        name: &str,
        s: SliceArg,
        typed: Option<(&Expr, &Expr)>,
    ) -> Result<SliceArg> {
        let src = &self.f.slices[s.slice];
        let info = match (&src.kind, &src.array) {
            (SliceKind::Param { .. }, None) => {
                let member = self.member_len(s.slice);
                let (len, at) = match (typed, member) {
                    (Some((len, at)), _) => (len, Some(at)),
                    (None, Some(len)) => (len, None),
                    // (not reached: untyped copies are of local arrays, array parameters and
                    // tuple parameters' array members)
                    (None, None) => return Err(syn::Error::new(
                        Span::call_site(),
                        "a copy of a struct's array field needs its type: `let c: [f64; 3] = p.b;`",
                    )),
                };
                if src.elem != Ty::F64 {
                    return err(
                        at.map_or(len, |e| e),
                        "only arrays of `f64` fields are copied",
                    );
                }
                let (_, len_value) = array_len(len)?;
                let len = self.len_tokens(len);
                SliceInfo {
                    name: name.to_string(),
                    elem: src.elem,
                    kind: SliceKind::Local { len, len_value },
                    declared_active: false,
                    array: None,
                }
            }
            (SliceKind::Param { .. }, Some(a)) => SliceInfo {
                name: name.to_string(),
                elem: src.elem,
                kind: SliceKind::Local {
                    len: a.len.clone(),
                    len_value: syn::parse2::<syn::LitInt>(a.len.clone())
                        .ok()
                        .and_then(|l| l.base10_parse().ok()),
                },
                declared_active: false,
                array: None,
            },
            _ => SliceInfo {
                name: name.to_string(),
                ..src.clone()
            },
        };
        self.f.slices.push(info);
        let dst = self.f.slices.len() - 1;
        self.copy_into(dst, s)?;
        Ok(SliceArg {
            slice: dst,
            lo: None,
            hi: None,
        })
    }

    /// `for k in 0..src.len() { dst[k] = src[k]; }`
    fn copy_into(&mut self, dst: SliceId, src: SliceArg) -> Result<()> {
        let n0 = self.env.len();
        self.env.push(Var {
            name: "__adjoint_dst".into(),
            b: Binding::Slice(SliceArg {
                slice: dst,
                lo: None,
                hi: None,
            }),
        });
        self.env.push(Var {
            name: "__adjoint_src".into(),
            b: Binding::Slice(src),
        });
        let e: Expr = syn::parse_quote! {
            for __adjoint_k in 0..__adjoint_src.len() {
                __adjoint_dst[__adjoint_k] = __adjoint_src[__adjoint_k];
            }
        };
        self.expr(&e, None)?;
        self.env.truncate(n0);
        Ok(())
    }

    /// A hidden local array holding a leaf of the result.
    fn ret_slice(&mut self, len: TokenStream, len_value: Option<usize>) -> SliceId {
        self.f.slices.push(SliceInfo {
            name: "ret".into(),
            elem: Ty::F64,
            kind: SliceKind::Local { len, len_value },
            declared_active: true,
            array: None,
        });
        self.f.slices.len() - 1
    }

    /// The leaves of a tuple or array return type.
    fn ret_leaves(&mut self, ty: &syn::Type, path: &mut Vec<syn::Member>) -> Result<()> {
        let leaf = match ty {
            syn::Type::Paren(p) => return self.ret_leaves(&p.elem, path),
            t if type_of(t) == Some(Ty::F64) => RetLeaf {
                path: path.clone(),
                slice: self.ret_slice(quote!(1), Some(1)),
                scalar: true,
            },
            syn::Type::Array(a) if type_of(&a.elem) == Some(Ty::F64) => {
                let (len, len_value) = array_len(&a.len)?;
                RetLeaf {
                    path: path.clone(),
                    slice: self.ret_slice(len, len_value),
                    scalar: false,
                }
            }
            syn::Type::Tuple(t) if !t.elems.is_empty() => {
                for (k, e) in t.elems.iter().enumerate() {
                    path.push(syn::Member::Unnamed(syn::Index {
                        index: k as u32,
                        span: Span::call_site(),
                    }));
                    self.ret_leaves(e, path)?;
                    path.pop();
                }
                return Ok(());
            }
            t => {
                return err(
                    t,
                    "a returned tuple or array holds `f64`, `[f64; N]` or tuples of these",
                )
            }
        };
        self.push_ret_leaf(leaf);
        Ok(())
    }

    /// Record one leaf of the aggregate result.
    fn push_ret_leaf(&mut self, leaf: RetLeaf) {
        let ra = self.f.ret_agg.as_mut().expect("aggregate result");
        ra.leaves.push(leaf);
    }

    /// Store a result into the hidden result arrays.
    fn store_ret(&mut self, ev: Ev, at: &dyn ToTokens) -> Result<()> {
        let ra = self.f.ret_agg.clone().expect("aggregate result");
        let ev = match ev {
            Ev::V(v) if !ra.is_struct => self.reshape_call(v, &ra.ty)?,
            ev => ev,
        };
        if ra.is_struct && !matches!(ev, Ev::Agg(AggV { path: Some(_), .. })) {
            return err(
                at,
                "return a struct literal `Name { field: value, … }` (of the declared type)",
            );
        }
        let mut flat = vec![];
        flatten_ev(ev, &mut vec![], &mut flat);
        if ra.is_struct && ra.leaves.is_empty() {
            // the first `return` fixes the struct's leaves
            for (path, e) in &flat {
                let [name] = &path[..] else {
                    return err(
                        at,
                        "the fields of a returned struct are `f64` or `[f64; N]`",
                    );
                };
                let member = syn::Member::Named(syn::Ident::new(name, Span::call_site()));
                let leaf = match e {
                    Ev::V(_) => RetLeaf {
                        path: vec![member],
                        slice: self.ret_slice(quote!(1), Some(1)),
                        scalar: true,
                    },
                    Ev::S(sa) if sa.lo.is_none() && sa.hi.is_none() => {
                        let si = &self.f.slices[sa.slice];
                        let (len, len_value) = match (&si.kind, &si.array) {
                            (SliceKind::Local { len, len_value }, _) => (len.clone(), *len_value),
                            (_, Some(a)) => (a.len.clone(), None),
                            _ => {
                                return err(
                                    at,
                                    format!(
                                        "field `{name}`: return a local array, an array literal \
                                         or an array parameter"
                                    ),
                                )
                            }
                        };
                        RetLeaf {
                            path: vec![member],
                            slice: self.ret_slice(len, len_value),
                            scalar: false,
                        }
                    }
                    _ => {
                        return err(
                            at,
                            format!("field `{name}`: struct fields are `f64` or `[f64; N]`"),
                        )
                    }
                };
                self.push_ret_leaf(leaf);
            }
        }
        let leaves = self
            .f
            .ret_agg
            .as_ref()
            .expect("aggregate result")
            .leaves
            .clone();
        if flat.len() != leaves.len() {
            return err(
                at,
                "the result does not have the declared return type (a tuple or array result is \
                 a literal `(a, [b, c])`, a variable holding one, or a call of a \
                 #[differentiable] function as the last expression; `if`/`match` branches do \
                 not produce them: assign their parts to variables)",
            );
        }
        for leaf in leaves {
            let want: Vec<String> = leaf.path.iter().map(member_name).collect();
            let Some((_, e)) = flat.iter().find(|(p, _)| *p == want) else {
                return err(at, "the result does not have the declared return type");
            };
            match (leaf.scalar, e.clone()) {
                (true, Ev::V(v)) if self.ty(v) == Ty::F64 => {
                    let idx = self.usize_const(0);
                    self.emit(Inst::Store {
                        slice: leaf.slice,
                        idx,
                        val: v,
                        span: Span::call_site(),
                    });
                }
                (false, Ev::S(sa)) => self.copy_into(leaf.slice, sa)?,
                _ => return err(at, "the result does not have the declared return type"),
            }
        }
        Ok(())
    }

    /// `p.w` on a struct parameter: the leaf for the field (created on first read).
    fn struct_field(&mut self, k: usize, base: &Expr, id: &syn::Ident) -> Result<Ev> {
        let base_name = match strip(base) {
            Expr::Path(p) => p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let array = self.array_fields.contains(&(base_name, id.to_string()));
        let SigItem::Agg(ap) = &self.f.sig[k] else {
            unreachable!("a struct parameter")
        };
        let found = ap
            .leaves
            .iter()
            .find(|l| matches!(&l.path[..], [syn::Member::Named(n)] if n == id));
        if let Some(l) = found {
            return match (&self.f.params[l.param], array) {
                (Param::Scalar { val, .. }, false) => Ok(Ev::V(*val)),
                (Param::Slice { slice, .. }, true) => Ok(Ev::S(SliceArg {
                    slice: *slice,
                    lo: None,
                    hi: None,
                })),
                _ => err(
                    id,
                    format!(
                        "field `{id}` is read both as a number and as an array (index it, or \
                         borrow it with `&`, wherever it is an array)"
                    ),
                ),
            };
        }
        let (base, active) = (ap.name.clone(), ap.active);
        let path = vec![syn::Member::Named(id.clone())];
        let lname = leaf_ident(&base, &path);
        let ev = if array {
            let s = slice_leaf(&mut self.f, lname, Ty::F64, false, active, None);
            Ev::S(SliceArg {
                slice: s,
                lo: None,
                hi: None,
            })
        } else {
            Ev::V(scalar_leaf(&mut self.f, lname, Ty::F64, active))
        };
        let param = self.f.params.len() - 1;
        let SigItem::Agg(ap) = &mut self.f.sig[k] else {
            unreachable!("a struct parameter")
        };
        ap.leaves.push(AggLeaf {
            path,
            param,
            span: id.span(),
        });
        Ok(ev)
    }

    fn field(&mut self, fe: &syn::ExprField) -> Result<Ev> {
        let base = self.expr(&fe.base, None)?;
        let m = member_name(&fe.member);
        match base {
            Ev::Agg(a) => match a.members.iter().find(|(n, _)| *n == m) {
                Some((_, e)) => Ok(e.clone()),
                None => err(&fe.member, format!("no field `{m}`")),
            },
            Ev::Struct(k) => match &fe.member {
                syn::Member::Named(id) => self.struct_field(k, &fe.base, id),
                m => err(m, "struct fields have names"),
            },
            Ev::V(v) if self.call_of(v).is_some() => self.unshaped_call(v, fe),
            _ => err(
                fe,
                "fields are read from tuples, struct literals and `#[derive(Differentiable)]` \
                 struct parameters",
            ),
        }
    }

    /// `v` as the result of a function returning `ty`: when `v` comes from the call just
    /// emitted (`fn f(…) -> (f64, f64) { polar(r, t) }`), that call gets the shape of `ty`.
    fn reshape_call(&mut self, v: Val, ty: &syn::Type) -> Result<Ev> {
        let Some(Inst::Call { dsts, ret, .. }) = self.f.blocks[self.cur].insts.last() else {
            return Ok(Ev::V(v));
        };
        if *dsts != [v] || *ret != Ret::Scalar {
            return Ok(Ev::V(v));
        }
        let shape = ret_of_type(ty)?;
        let mut leaves = vec![v];
        leaves.extend((1..shape.count()).map(|_| self.val(Ty::F64)));
        let Some(Inst::Call { dsts, ret, .. }) = self.f.blocks[self.cur].insts.last_mut() else {
            unreachable!("the call above")
        };
        (*dsts, *ret) = (leaves.clone(), shape.clone());
        Ok(self.ret_ev(&shape, &mut leaves.into_iter()))
    }

    /// The error for a field or an element of `v`, a call's result bound as one `f64`.
    fn unshaped_call<T>(&self, v: Val, at: impl ToTokens) -> Result<T> {
        let callee = self.call_of(v).expect("a call");
        let callee = quote!(#callee).to_string();
        err(
            at,
            format!(
                "this holds the result of `{callee}(…)` as one `f64`: destructure the call \
                 (`let (a, b) = {callee}(…);`) or write its type (`let r: ([f64; 2], f64) = \
                 {callee}(…);`), so the macro knows its shape"
            ),
        )
    }

    /// The callee when `v` is the result of a call of another `#[differentiable]` function.
    fn call_of(&self, v: Val) -> Option<&syn::Path> {
        self.f
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .find_map(|i| match i {
                Inst::Call { dsts, func, .. } if dsts.contains(&v) => Some(func),
                _ => None,
            })
    }

    /// A new local array `[v; N]` named `name` (`v` evaluated once, `N` a literal or a
    /// `const`): in a `let`, and anywhere an array value can stand (a tuple's member, a struct
    /// field, a result).
    fn repeat_array(
        &mut self,
        name: &str,
        rep: &syn::ExprRepeat,
        hint: Option<Ty>,
    ) -> Result<SliceArg> {
        let v = self.array_elem(&rep.expr, hint)?;
        let elem = self.ty(v);
        if elem == Ty::Bool {
            return err(&rep.expr, "arrays of `bool` are not supported");
        }
        let len = &rep.len;
        let len_value = match &**len {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(i), ..
            }) => i.base10_parse::<usize>().ok(),
            Expr::Path(_) => None,
            e => {
                return err(
                    e,
                    "the length of a local array must be a literal or a `const` (use a \
                     `&mut [f64]` parameter for run-time sizes)",
                )
            }
        };
        self.f.slices.push(SliceInfo {
            name: name.to_string(),
            elem,
            kind: SliceKind::Local {
                len: self.len_tokens(len),
                len_value,
            },
            declared_active: false,
            array: None,
        });
        let slice = self.f.slices.len() - 1;
        self.emit(Inst::Fill { slice, val: v });
        Ok(SliceArg {
            slice,
            lo: None,
            hi: None,
        })
    }

    /// An element of an array literal: a number (an array there is an array of arrays).
    fn array_elem(&mut self, e: &Expr, hint: Option<Ty>) -> Result<Val> {
        self.scalar_with(
            e,
            hint,
            "arrays of arrays are not supported: use one flat array (`[0.0; 6]` for 2 × 3, \
             element (i, j) at `i * 3 + j`)",
        )
    }

    /// `[a, b, c]`: a fresh local array.
    fn array_lit(&mut self, a: &syn::ExprArray, hint: Option<Ty>) -> Result<Ev> {
        if a.elems.is_empty() {
            return err(a, "empty arrays are not supported");
        }
        let mut h = hint.filter(|t| *t != Ty::Bool);
        let mut vals = vec![];
        for e in &a.elems {
            let v = self.array_elem(e, h)?;
            let t = self.ty(v);
            if t == Ty::Bool {
                return err(e, "arrays of `bool` are not supported");
            }
            if let Some(h) = h {
                if !h.same_kind(t) {
                    return err(e, "the elements of an array have one type");
                }
            }
            h = Some(t);
            vals.push(v);
        }
        Ok(self.local_array(vals))
    }

    /// A new local array holding `vals` (one type, at least one).
    fn local_array(&mut self, vals: Vec<Val>) -> Ev {
        let n = vals.len();
        let lit = proc_macro2::Literal::usize_unsuffixed(n);
        self.f.slices.push(SliceInfo {
            name: "array".into(),
            elem: self.ty(vals[0]),
            kind: SliceKind::Local {
                len: quote!(#lit),
                len_value: Some(n),
            },
            declared_active: false,
            array: None,
        });
        let slice = self.f.slices.len() - 1;
        for (k, v) in vals.into_iter().enumerate() {
            let idx = self.usize_const(k);
            self.emit(Inst::Store {
                slice,
                idx,
                val: v,
                span: Span::call_site(),
            });
        }
        Ev::S(SliceArg {
            slice,
            lo: None,
            hi: None,
        })
    }

    // ---- expressions ----

    fn scalar(&mut self, e: &Expr, hint: Option<Ty>) -> Result<Val> {
        self.scalar_with(e, hint, "expected a number, found a slice")
    }

    /// [`Lower::scalar`] with the message for a slice (an array) where a number is expected.
    fn scalar_with(&mut self, e: &Expr, hint: Option<Ty>, slice_msg: &str) -> Result<Val> {
        match self.expr(e, hint)? {
            Ev::V(v) => Ok(v),
            Ev::S(_) => err(e, slice_msg),
            Ev::Agg(_) | Ev::Struct(_) => err(e, "expected a number, found a tuple or struct"),
            Ev::Unit => {
                if self.is_dead(self.cur) {
                    // unreachable code: any placeholder will do
                    Ok(self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0)))
                } else {
                    err(e, "this expression has no value")
                }
            }
        }
    }

    fn expr(&mut self, e: &Expr, hint: Option<Ty>) -> Result<Ev> {
        match e {
            Expr::Paren(p) => self.expr(&p.expr, hint),
            Expr::Group(g) => self.expr(&g.expr, hint),
            Expr::Lit(l) => self.lit(&l.lit, hint).map(Ev::V),
            Expr::Path(p) => self.path(p, hint),
            Expr::Binary(b) => self.binary(b, hint),
            Expr::Assign(a) => {
                if let Expr::Tuple(t) = strip(&a.left) {
                    // `(a, b) = (b, a + b);`: the right side first, then each place in turn (a
                    // call's result has the left side's shape: `(c, s) = polar(r, t);`)
                    let v = match self.is_user_call(&a.right) {
                        Some(c) => self.user_call(c, ret_of_places(t)?)?,
                        None => self.expr(&a.right, None)?,
                    };
                    self.assign_parts(t, v, &a.right)?;
                } else {
                    self.assign(&a.left, None, Src::Expr(&a.right))?;
                }
                Ok(Ev::Unit)
            }
            Expr::Unary(u) => self.unary(u, hint),
            Expr::MethodCall(m) => self.method(m, hint),
            Expr::Call(c) => self.call(c, hint),
            Expr::Index(ix) => self.index(ix),
            Expr::Reference(r) => match self.expr(&r.expr, hint)? {
                Ev::S(s) => Ok(Ev::S(s)),
                Ev::Struct(k) => Ok(Ev::Struct(k)),
                _ => err(r, "references are supported only to slices (`&x[a..b]`)"),
            },
            Expr::Cast(c) => self.cast(c),
            Expr::If(i) => self.lower_if(i, hint),
            Expr::Block(b) => {
                if let Some(l) = &b.label {
                    return err(
                        l,
                        "labelled blocks are not supported: write `if`/`else` (`let v = if c { a } \
                         else { b };`), or a `loop` that breaks with the value (`let v = 'l: loop \
                         { …; break 'l a; }`)",
                    );
                }
                self.block(&b.block)
            }
            Expr::While(w) => self.lower_while(w),
            Expr::Loop(l) => self.lower_loop(l, hint),
            Expr::ForLoop(f) => self.lower_for(f),
            Expr::Match(m) => self.lower_match(m, hint),
            Expr::Return(r) => {
                if self.f.returns_f64 {
                    let Some(v) = &r.expr else {
                        return err(r, "return an `f64` value");
                    };
                    let v = self.scalar(v, Some(Ty::F64))?;
                    if self.ty(v) != Ty::F64 {
                        return err(r, "return an `f64` value");
                    }
                    let ret = self.ret;
                    self.finish(Term::Jump(Target {
                        block: ret,
                        args: vec![v],
                    }));
                } else if self.f.ret_agg.is_some() {
                    let Some(v) = &r.expr else {
                        return err(r, "return the result");
                    };
                    let ev = self.expr(v, None)?;
                    if !self.is_dead(self.cur) {
                        self.store_ret(ev, v)?;
                    }
                    let ret = self.ret;
                    self.finish(Term::Jump(Target {
                        block: ret,
                        args: vec![],
                    }));
                } else {
                    if let Some(v) = &r.expr {
                        return err(v, "this function returns nothing");
                    }
                    let ret = self.ret;
                    self.finish(Term::Jump(Target {
                        block: ret,
                        args: vec![],
                    }));
                }
                Ok(Ev::Unit)
            }
            Expr::Break(b) => {
                let ctx = self.find_loop(b.label.as_ref(), b)?;
                if let Some(v) = &b.expr {
                    let Some(i) = self.loops[ctx].value else {
                        return err(v, "`break` with a value leaves a `loop` only");
                    };
                    let Binding::Val(old) = self.env[i].b else {
                        unreachable!("the loop's value is a number")
                    };
                    let untyped = self.untyped_decls.contains(&old);
                    let val = self.scalar(v, (!untyped).then(|| self.ty(old)))?;
                    if !self.ty(val).same_kind(self.ty(old)) {
                        return err(
                            v,
                            "a `loop`'s value is an `f64`, or an integer where its type is \
                             written (`let k: usize = loop { … };`)",
                        );
                    }
                    self.env[i].b = Binding::Val(val);
                }
                let (blk, n) = (self.loops[ctx].brk, self.loops[ctx].nvars);
                self.jump(blk, n, None);
                Ok(Ev::Unit)
            }
            Expr::Continue(c) => {
                let ctx = self.find_loop(c.label.as_ref(), c)?;
                let (blk, n) = (self.loops[ctx].cont, self.loops[ctx].nvars);
                self.jump(blk, n, None);
                Ok(Ev::Unit)
            }
            Expr::Tuple(t) if t.elems.is_empty() => Ok(Ev::Unit),
            Expr::Closure(c) => err(
                c,
                "closures are not supported: write a loop, or a separate #[differentiable] \
                 function",
            ),
            Expr::Macro(m) if assert_kind(&m.mac).is_some() => self.assert(&m.mac),
            Expr::Macro(m) if is_cfg_debug_assertions(&m.mac) => {
                // Whether the *user's* crate is built with debug assertions: decided where the
                // generated code is compiled (the interpreter takes it as on).
                let tokens = m.mac.to_token_stream();
                Ok(Ev::V(self.konst(Ty::Bool, tokens, ConstVal::B(true))))
            }
            Expr::Macro(m) if m.mac.path.is_ident("vec") => err(
                &m.mac,
                "`vec!` is not supported: a local array's length is fixed at compile time \
                 (`[0.0; N]` with a literal or a `const` N); for a run-time length, take a \
                 `&mut [f64]` buffer parameter",
            ),
            Expr::Macro(m) => err(
                &m.mac,
                "macros are not supported in #[differentiable] functions (write the code they \
                 expand to)",
            ),
            Expr::Field(f) => self.field(f),
            Expr::Struct(st) => {
                if let Some(r) = &st.rest {
                    return err(r, "`..base` is not supported: give every field");
                }
                if st.qself.is_some() {
                    return err(st, "qualified struct paths are not supported");
                }
                let mut members = vec![];
                for fv in &st.fields {
                    let ev = self.expr(&fv.expr, None)?;
                    if let Ev::Unit = ev {
                        return err(&fv.expr, "this field has no value");
                    }
                    members.push((member_name(&fv.member), ev));
                }
                Ok(Ev::Agg(AggV {
                    members,
                    path: Some(st.path.clone()),
                }))
            }
            Expr::Array(a) => self.array_lit(a, hint),
            Expr::Repeat(r) => Ok(Ev::S(self.repeat_array("array", r, hint)?)),
            Expr::Tuple(t) => {
                let mut members = vec![];
                for (k, e) in t.elems.iter().enumerate() {
                    let ev = self.expr(e, None)?;
                    if let Ev::Unit = ev {
                        return err(e, "this element has no value");
                    }
                    // an array goes into the tuple as a copy (`(a, k)`, `(*out, k)`, `(x, k)`
                    // for `x: [f64; 3]`); a reference `(&mut a, k)` names the array itself
                    let ev = match ev {
                        Ev::S(sa) if self.owned_array_expr(&sa, e)? => {
                            Ev::S(self.copy_array(&format!("{k}"), sa, None)?)
                        }
                        ev => ev,
                    };
                    members.push((k.to_string(), ev));
                }
                Ok(Ev::Agg(AggV {
                    members,
                    path: None,
                }))
            }
            Expr::Unsafe(u) => err(u, "`unsafe` blocks are not supported"),
            Expr::Range(r) => err(r, "ranges are supported in `for` loops and slice indexing"),
            e => err(
                e,
                "this expression is not supported in #[differentiable] functions",
            ),
        }
    }

    fn find_loop(&self, label: Option<&syn::Lifetime>, at: impl ToTokens) -> Result<usize> {
        match label {
            None => match self.loops.len() {
                0 => err(at, "`break`/`continue` outside a loop"),
                n => Ok(n - 1),
            },
            Some(l) => {
                let name = l.ident.to_string();
                match self
                    .loops
                    .iter()
                    .rposition(|c| c.label.as_deref() == Some(&name))
                {
                    Some(i) => Ok(i),
                    None => err(l, "unknown loop label"),
                }
            }
        }
    }

    fn lit(&mut self, l: &Lit, hint: Option<Ty>) -> Result<Val> {
        match l {
            Lit::Float(f) => {
                if !matches!(f.suffix(), "" | "f64") {
                    return err(f, "only `f64` floats are supported");
                }
                let v: f64 = f.base10_parse()?;
                Ok(self.konst(Ty::F64, l.to_token_stream(), ConstVal::F(v)))
            }
            Lit::Int(i) => self.int_lit(i, hint, None),
            Lit::Bool(b) => Ok(self.konst(Ty::Bool, l.to_token_stream(), ConstVal::B(b.value))),
            l => err(l, "unsupported literal"),
        }
    }

    /// An integer literal, or its negation `neg` (`-128i8`, one constant: `0 - 128i8` would
    /// not fit its type).
    fn int_lit(
        &mut self,
        i: &syn::LitInt,
        hint: Option<Ty>,
        neg: Option<&syn::ExprUnary>,
    ) -> Result<Val> {
        let tokens = match neg {
            Some(u) => u.to_token_stream(),
            None => i.to_token_stream(),
        };
        let sign = if neg.is_some() { -1.0 } else { 1.0 };
        let ty = if i.suffix().is_empty() {
            match hint {
                Some(Ty::F64) => {
                    return err(
                        i,
                        "an integer literal where an `f64` is expected: write `2.0`",
                    )
                }
                Some(t @ Ty::Int(_)) => t,
                _ => Ty::Int(None),
            }
        } else if i.suffix() == "f64" {
            let v: f64 = i.base10_parse()?;
            return Ok(self.konst(Ty::F64, tokens, ConstVal::F(sign * v)));
        } else {
            match IntTy::from_name(i.suffix()) {
                Some(t) => Ty::Int(Some(t)),
                None => return err(i, "unsupported integer type"),
            }
        };
        let v: i128 = i.base10_parse()?;
        let v = if neg.is_some() { -v } else { v };
        Ok(self.konst(ty, tokens, ConstVal::I(v)))
    }

    fn path(&mut self, p: &syn::ExprPath, hint: Option<Ty>) -> Result<Ev> {
        if p.qself.is_some() {
            return err(p, "qualified paths are not supported");
        }
        if let Some(id) = p.path.get_ident() {
            let name = id.to_string();
            if let Some(i) = self.lookup(&name) {
                return Ok(match self.env[i].b.clone() {
                    Binding::Val(v) => Ev::V(v),
                    Binding::Slice(s) => Ev::S(s),
                    Binding::Elem(s, idx) => {
                        let dst = self.val(self.f.slices[s].elem);
                        self.emit(Inst::Load {
                            dst,
                            slice: s,
                            idx,
                            span: Span::call_site(),
                        });
                        Ev::V(dst)
                    }
                    Binding::Agg(a) => Ev::Agg(a),
                    Binding::Struct(k) => Ev::Struct(k),
                    Binding::Closure(_) => {
                        return err(p, "a closure is called here, not used as a value: `f(x)`")
                    }
                });
            }
            if name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                let ty =
                    match hint {
                        Some(t) => t,
                        None => return err(
                            p,
                            "the type of this constant is not known here: read it where its type \
                             is clear (`x * C`, `let c: f64 = C;`, `let k: usize = K;` for an \
                             integer, `K as f64`), or declare it inside the function (constant arrays are \
                             not supported: pass the array as a parameter)",
                        ),
                    };
                let value = FLOAT_CONSTS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|c| ConstVal::F(c.1))
                    .unwrap_or(ConstVal::F(f64::NAN));
                return Ok(Ev::V(self.konst(ty, p.to_token_stream(), value)));
            }
            return err(p, format!("unknown variable `{name}`"));
        }
        // f64::consts::PI, std::f64::consts::E, f64::INFINITY, usize::MAX,
        // core::primitive::u8::MAX, …
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let last = segs.last().unwrap().as_str();
        let first = segs
            .iter()
            .find(|s| !matches!(s.as_str(), "std" | "core" | "primitive"))
            .map(|s| s.as_str())
            .unwrap_or("");
        if first == "f64" {
            if let Some((_, v)) = FLOAT_CONSTS.iter().find(|(n, _)| *n == last) {
                return Ok(Ev::V(self.konst(
                    Ty::F64,
                    p.to_token_stream(),
                    ConstVal::F(*v),
                )));
            }
        }
        if let Some(t) = IntTy::from_name(first) {
            // (`usize` and `isize` as on the 64-bit targets this is built for)
            let (min, max): (i128, i128) = match t {
                IntTy::U8 => (0, u8::MAX.into()),
                IntTy::U16 => (0, u16::MAX.into()),
                IntTy::U32 => (0, u32::MAX.into()),
                IntTy::U64 | IntTy::Usize => (0, u64::MAX.into()),
                IntTy::I8 => (i8::MIN.into(), i8::MAX.into()),
                IntTy::I16 => (i16::MIN.into(), i16::MAX.into()),
                IntTy::I32 => (i32::MIN.into(), i32::MAX.into()),
                IntTy::I64 | IntTy::Isize => (i64::MIN.into(), i64::MAX.into()),
            };
            let v = match last {
                "MIN" => min,
                "MAX" => max,
                _ => {
                    return err(
                        p,
                        format!(
                            "unsupported constant `{first}::{last}`: of the integer types' \
                             constants `MIN` and `MAX` are supported; write the value as a \
                             literal"
                        ),
                    )
                }
            };
            return Ok(Ev::V(self.konst(
                Ty::Int(Some(t)),
                p.to_token_stream(),
                ConstVal::I(v),
            )));
        }
        err(
            p,
            "unsupported path: use local variables, literals and `f64::consts::…`",
        )
    }

    fn binary(&mut self, b: &syn::ExprBinary, hint: Option<Ty>) -> Result<Ev> {
        use BinOp::*;
        let compound = match b.op {
            AddAssign(_) => Some(BinOp::Add(Default::default())),
            SubAssign(_) => Some(BinOp::Sub(Default::default())),
            MulAssign(_) => Some(BinOp::Mul(Default::default())),
            DivAssign(_) => Some(BinOp::Div(Default::default())),
            RemAssign(_) => Some(BinOp::Rem(Default::default())),
            BitAndAssign(_) => Some(BinOp::BitAnd(Default::default())),
            BitOrAssign(_) => Some(BinOp::BitOr(Default::default())),
            BitXorAssign(_) => Some(BinOp::BitXor(Default::default())),
            ShlAssign(_) => Some(BinOp::Shl(Default::default())),
            ShrAssign(_) => Some(BinOp::Shr(Default::default())),
            _ => None,
        };
        if let Some(op) = compound {
            self.assign(&b.left, Some((op, &b.op)), Src::Expr(&b.right))?;
            return Ok(Ev::Unit);
        }
        if let And(_) | Or(_) = b.op {
            return self.short_circuit(b);
        }
        let is_cmp = matches!(b.op, Lt(_) | Le(_) | Gt(_) | Ge(_) | Eq(_) | Ne(_));
        let lh = if is_cmp { None } else { hint };
        if lh.is_none() && self.is_unknown_const(&b.left) {
            // `N * n`: the type of a constant comes from the other operand (both are pure)
            let r = self.scalar(&b.right, None)?;
            let a = self.scalar(&b.left, Some(self.ty(r)))?;
            return self.binop(&b.op, a, r, b).map(Ev::V);
        }
        let a = self.scalar(&b.left, lh)?;
        let bh = Some(self.ty(a));
        let r = self.scalar(&b.right, bh)?;
        self.binop(&b.op, a, r, b).map(Ev::V)
    }

    fn binop(&mut self, op: &BinOp, a: Val, r: Val, at: &dyn ToTokens) -> Result<Val> {
        use BinOp::*;
        let (ta, tb) = (self.ty(a), self.ty(r));
        let shift = matches!(op, Shl(_) | Shr(_));
        if !ta.same_kind(tb) && !shift {
            return err(
                at,
                format!(
                    "mismatched operand types ({} and {}): convert with `as f64` / `as usize`",
                    ty_name(ta),
                    ty_name(tb)
                ),
            );
        }
        let cmp = match op {
            Lt(_) => Some(CmpOp::Lt),
            Le(_) => Some(CmpOp::Le),
            Gt(_) => Some(CmpOp::Gt),
            Ge(_) => Some(CmpOp::Ge),
            Eq(_) => Some(CmpOp::Eq),
            Ne(_) => Some(CmpOp::Ne),
            _ => None,
        };
        if let Some(c) = cmp {
            return Ok(self.cmp(c, a, r));
        }
        match ta {
            Ty::F64 => {
                let o = match op {
                    Add(_) => Op2::Add,
                    Sub(_) => Op2::Sub,
                    Mul(_) => Op2::Mul,
                    Div(_) => Op2::Div,
                    // IEEE fmod, as Rust's `%` on floats (the rule table's `Rem`)
                    Rem(_) => Op2::Rem,
                    _ => return err(at, "this operator is not defined on `f64`"),
                };
                Ok(self.bin(o, a, r))
            }
            Ty::Int(_) | Ty::Bool => {
                let o = match op {
                    Add(_) => IntOp::Add,
                    Sub(_) => IntOp::Sub,
                    Mul(_) => IntOp::Mul,
                    Div(_) => IntOp::Div,
                    Rem(_) => IntOp::Rem,
                    BitAnd(_) => IntOp::BitAnd,
                    BitOr(_) => IntOp::BitOr,
                    BitXor(_) => IntOp::BitXor,
                    Shl(_) => IntOp::Shl,
                    Shr(_) => IntOp::Shr,
                    _ => return err(at, "unsupported operator"),
                };
                if ta == Ty::Bool && !matches!(o, IntOp::BitAnd | IntOp::BitOr | IntOp::BitXor) {
                    return err(at, "unsupported operator on `bool`");
                }
                Ok(self.int_op(o, a, r))
            }
        }
    }

    fn short_circuit(&mut self, b: &syn::ExprBinary) -> Result<Ev> {
        // a && b  →  if a { b } else { false };  a || b  →  if a { true } else { b }
        let is_and = matches!(b.op, BinOp::And(_));
        let a = self.scalar(&b.left, Some(Ty::Bool))?;
        if self.ty(a) != Ty::Bool {
            return err(&b.left, "expected a `bool`");
        }
        let n = self.env.len();
        let saved = self.snapshot(n);
        let (rhs_blk, merge) = (self.new_block(), self.new_block());
        self.make_params(merge, n);
        let res = self.f.new_val(Ty::Bool, None);
        self.f.blocks[merge].params.push(res);
        let konst = self.konst(
            Ty::Bool,
            if is_and { quote!(false) } else { quote!(true) },
            ConstVal::B(!is_and),
        );
        let mut short_args = self.args(n);
        short_args.push(konst);
        let short = Target {
            block: merge,
            args: short_args,
        };
        let go = Target {
            block: rhs_blk,
            args: vec![],
        };
        let term = if is_and {
            Term::Branch(a, go, short)
        } else {
            Term::Branch(a, short, go)
        };
        self.finish(term);
        self.cur = rhs_blk;
        let r = self.scalar(&b.right, Some(Ty::Bool))?;
        if self.ty(r) != Ty::Bool {
            return err(&b.right, "expected a `bool`");
        }
        self.jump(merge, n, Some(r));
        self.restore(&saved);
        self.cur = merge;
        self.bind_params(merge, n);
        Ok(Ev::V(res))
    }

    fn is_unknown_const(&self, e: &Expr) -> bool {
        match strip(e) {
            Expr::Path(p) => match p.path.get_ident() {
                Some(id) => {
                    let n = id.to_string();
                    self.lookup(&n).is_none()
                        && n.chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                }
                None => false,
            },
            Expr::Binary(b) => self.is_unknown_const(&b.left) && self.is_unknown_const(&b.right),
            _ => false,
        }
    }

    /// Whether `e` is built of literals and constants whose type is unknown (`N`, `2 * N + 1`,
    /// `-(N - 1)`): `Some(true)` where it names such a constant, `Some(false)` where it is
    /// literals only, `None` where it is not constant.
    fn is_const_expr(&self, e: &Expr) -> Option<bool> {
        match strip(e) {
            Expr::Lit(_) => Some(false),
            Expr::Path(_) => self.is_unknown_const(e).then_some(true),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => self.is_const_expr(&u.expr),
            Expr::Binary(b) => Some(self.is_const_expr(&b.left)? | self.is_const_expr(&b.right)?),
            _ => None,
        }
    }

    fn unary(&mut self, u: &syn::ExprUnary, hint: Option<Ty>) -> Result<Ev> {
        match u.op {
            UnOp::Deref(_) => {
                // `*x`: a float bound by reference is its value; `*o` of `iter_mut` is a load
                self.expr(&u.expr, hint)
            }
            UnOp::Neg(_) => {
                if let Expr::Lit(syn::ExprLit {
                    lit: Lit::Int(i), ..
                }) = strip(&u.expr)
                {
                    // `-128i8`: one literal (`0 - 128i8` would not fit its type)
                    return self.int_lit(i, hint, Some(u)).map(Ev::V);
                }
                let a = self.scalar(&u.expr, hint)?;
                match self.ty(a) {
                    Ty::F64 => Ok(Ev::V(self.un(Op1::Neg, a, None))),
                    Ty::Int(t) => {
                        let z = self.konst(Ty::Int(t), quote!(0), ConstVal::I(0));
                        Ok(Ev::V(self.int_op(IntOp::Sub, z, a)))
                    }
                    Ty::Bool => err(u, "cannot negate a `bool`"),
                }
            }
            UnOp::Not(_) => {
                let a = self.scalar(&u.expr, hint)?;
                if self.ty(a) != Ty::Bool {
                    return err(u, "`!` is supported on `bool` only");
                }
                let dst = self.val(Ty::Bool);
                self.emit(Inst::Not { dst, a });
                Ok(Ev::V(dst))
            }
            _ => err(u, "unsupported unary operator"),
        }
    }

    fn cast(&mut self, c: &syn::ExprCast) -> Result<Ev> {
        let Some(to) = type_of(&c.ty) else {
            return err(
                &c.ty,
                "casts are supported to `f64` and to integer types of up to 64 bits (`usize`, \
                 `i64`, `u32`, …; not `i128`, `u128` or `f32`)",
            );
        };
        if to != Ty::Bool && self.is_const_expr(&c.expr) == Some(true) {
            // `N as f64` of a module-level constant whose type the macro cannot see: the cast
            // fixes the result's type, so it is a constant of that type, written as the user
            // wrote it.
            let tokens = quote!((#c));
            return Ok(Ev::V(self.konst(to, tokens, ConstVal::F(f64::NAN))));
        }
        let a = self.scalar(&c.expr, None)?;
        let from = self.ty(a);
        if from == Ty::F64 && to == Ty::F64 {
            return Ok(Ev::V(a));
        }
        if to == Ty::Bool {
            return err(&c.ty, "casts to `bool` are not supported");
        }
        let dst = self.val(to);
        self.emit(Inst::Cast {
            dst,
            a,
            checked: None,
        });
        Ok(Ev::V(dst))
    }

    /// `x[i]` (a load) or `x[a..b]` (a sub-slice).
    fn index(&mut self, ix: &syn::ExprIndex) -> Result<Ev> {
        let base = match self.expr(&ix.expr, None)? {
            Ev::S(s) => s,
            Ev::V(v) if self.call_of(v).is_some() => return self.unshaped_call(v, &ix.expr),
            _ => return err(&ix.expr, NOT_INDEXABLE),
        };
        if let Expr::Range(r) = strip(&ix.index) {
            return self.subslice(base, r).map(Ev::S);
        }
        let i = self.scalar(&ix.index, Some(Ty::Int(Some(IntTy::Usize))))?;
        if !matches!(self.ty(i), Ty::Int(_)) {
            return err(&ix.index, "indices are `usize`");
        }
        self.f.values[i].ty = Ty::Int(Some(IntTy::Usize));
        let idx = self.checked_offset(&base, i, ix.span());
        let dst = self.val(self.f.slices[base.slice].elem);
        self.emit(Inst::Load {
            dst,
            slice: base.slice,
            idx,
            span: ix.span(),
        });
        Ok(Ev::V(dst))
    }

    /// [`Lower::offset`] of an index written by the user (`w[i]`): a sub-slice with an end
    /// (`&x[a..b]`, a window, a chunk) checks `i` against its length first, as Rust does; the
    /// parent's own bounds check would let `w[i]` read past `b`. (A sub-slice to the end needs
    /// no check: past its end is past the parent's.)
    fn checked_offset(&mut self, base: &SliceArg, i: Val, span: Span) -> Val {
        if base.hi.is_some() {
            let len = self.len_of(base);
            self.emit(Inst::Check {
                a: i,
                b: len,
                what: "index",
                span,
            });
        }
        self.offset(base, i)
    }

    fn offset(&mut self, base: &SliceArg, i: Val) -> Val {
        match base.lo {
            Some(lo) => self.int_op(IntOp::Add, lo, i),
            None => i,
        }
    }

    fn subslice(&mut self, base: SliceArg, r: &syn::ExprRange) -> Result<SliceArg> {
        let us = Some(Ty::Int(Some(IntTy::Usize)));
        let lo = match &r.start {
            Some(e) => Some(self.scalar(e, us)?),
            None => None,
        };
        let mut hi = match &r.end {
            Some(e) => Some(self.scalar(e, us)?),
            None => None,
        };
        if let (syn::RangeLimits::Closed(_), Some(h)) = (&r.limits, hi) {
            let one = self.usize_const(1);
            hi = Some(self.int_op(IntOp::Add, h, one));
        }
        let lo2 = match (base.lo, lo) {
            (Some(b), Some(l)) => Some(self.int_op(IntOp::Add, b, l)),
            (b, None) => b,
            (None, l) => l,
        };
        let hi2 = match hi {
            Some(h) => Some(match base.lo {
                Some(b) => self.int_op(IntOp::Add, b, h),
                None => h,
            }),
            None => base.hi,
        };
        if lo.is_some() || hi.is_some() {
            // as Rust: `lo <= hi <= len` of the slice indexed (checked as `a < b + 1`)
            let end = |me: &mut Self, hi: Option<Val>| match hi {
                Some(h) => h,
                None => me.len_of(&SliceArg {
                    slice: base.slice,
                    lo: None,
                    hi: None,
                }),
            };
            let (outer, inner) = (end(self, base.hi), end(self, hi2));
            let start = match lo2 {
                Some(l) => l,
                None => self.usize_const(0),
            };
            let one = self.usize_const(1);
            for (a, b) in [(start, inner), (inner, outer)] {
                let b1 = self.int_op(IntOp::Add, b, one);
                self.emit(Inst::Check {
                    a,
                    b: b1,
                    what: "range",
                    span: r.span(),
                });
            }
        }
        Ok(SliceArg {
            slice: base.slice,
            lo: lo2,
            hi: hi2,
        })
    }

    fn len_of(&mut self, s: &SliceArg) -> Val {
        let hi = match s.hi {
            Some(h) => h,
            None => {
                let dst = self.val(Ty::Int(Some(IntTy::Usize)));
                self.emit(Inst::Len {
                    dst,
                    slice: s.slice,
                });
                dst
            }
        };
        match s.lo {
            Some(lo) => self.int_op(IntOp::Sub, hi, lo),
            None => hi,
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall, hint: Option<Ty>) -> Result<Ev> {
        let name = m.method.to_string();
        let reduction = match (name.as_str(), m.args.len()) {
            ("sum" | "product", 0) | ("fold", 2) => true,
            ("max" | "min", 0) if is_iterator(&m.receiver) => {
                return err(
                    &m.method,
                    format!(
                        "`.{name}()` of an iterator is not supported (`f64` is not `Ord`): write \
                         `.fold(f64::NEG_INFINITY, |m, v| m.max(v))` or a `for` loop"
                    ),
                );
            }
            _ => false,
        };
        if reduction {
            let e = reduction_loop(m, &name, hint)?;
            return self.expr(&e, hint);
        }
        if name == "fill" && m.args.len() == 1 {
            // `out.fill(v)`, `out[a..b].fill(v)`: the loop it stands for
            let (recv, v, span) = (&m.receiver, &m.args[0], m.method.span());
            let e: Expr = syn::parse2(quote_spanned! {span=>
                {
                    let __adjoint_fill = #v;
                    for __adjoint_elem in #recv.iter_mut() {
                        *__adjoint_elem = __adjoint_fill;
                    }
                }
            })?;
            return self.expr(&e, hint);
        }
        if name == "copy_from_slice" {
            return err(
                &m.method,
                "`.copy_from_slice()` is not supported: write the loop, \
                 `for (o, &v) in out.iter_mut().zip(x.iter()) { *o = v; }` (after checking the \
                 lengths if they can differ)",
            );
        }
        if m.turbofish.is_some() {
            return err(&m.turbofish, "turbofish method calls are not supported");
        }
        let recv = self.expr(&m.receiver, hint)?;
        let recv = match recv {
            Ev::S(s) => {
                if name == "len" && m.args.is_empty() {
                    return Ok(Ev::V(self.len_of(&s)));
                }
                if name == "is_empty" && m.args.is_empty() {
                    let (len, zero) = (self.len_of(&s), self.usize_const(0));
                    return Ok(Ev::V(self.cmp(CmpOp::Eq, len, zero)));
                }
                let hint = if name == "iter" {
                    "loop over it with `for v in x.iter()`, or reduce it with `.sum()`, \
                     `.product()`, `.fold(init, |acc, v| …)` (after an optional `.map(|v| …)`)"
                } else if name == "swap" {
                    "swap two elements with `(v[i], v[j]) = (v[j], v[i]);`"
                } else {
                    "use `.len()`, `.is_empty()`, indexing, or a `for` loop over `.iter()`"
                };
                return err(
                    &m.method,
                    format!("`.{name}()` on a slice is not supported here: {hint}"),
                );
            }
            Ev::V(v) => v,
            Ev::Agg(_) | Ev::Struct(_) => {
                return err(
                    &m.method,
                    "methods on tuples and structs are not supported: call them on fields",
                )
            }
            Ev::Unit => return err(&m.receiver, "this expression has no value"),
        };
        let args: Vec<&Expr> = m.args.iter().collect();
        self.method_on(recv, &name, &args, &m.method)
    }

    fn method_on(&mut self, recv: Val, name: &str, args: &[&Expr], at: &syn::Ident) -> Result<Ev> {
        let nargs = |k: usize| -> Result<()> {
            if args.len() != k {
                err(at, format!("`{name}` takes {k} argument(s)"))
            } else {
                Ok(())
            }
        };
        match self.ty(recv) {
            Ty::F64 => {
                if let Some(op) = method_op1(name) {
                    nargs(0)?;
                    return Ok(Ev::V(self.un(op, recv, None)));
                }
                if let Some(op) = method_op2(name) {
                    nargs(1)?;
                    let b = self.scalar(args[0], Some(Ty::F64))?;
                    if self.ty(b) != Ty::F64 {
                        return err(args[0], "expected an `f64`");
                    }
                    return Ok(Ev::V(self.bin(op, recv, b)));
                }
                if let Some(op) = pass_op(name) {
                    nargs(0)?;
                    let dst = self.val(Ty::F64);
                    self.emit(Inst::Pass { dst, op, a: recv });
                    return Ok(Ev::V(dst));
                }
                match name {
                    // passive predicates on the primal value
                    "is_nan" | "is_finite" | "is_infinite" => {
                        nargs(0)?;
                        Ok(Ev::V(match name {
                            // NaN is the one value unequal to itself
                            "is_nan" => self.cmp(CmpOp::Ne, recv, recv),
                            // `x − x` is 0 for finite `x`, NaN for ±∞ and NaN
                            "is_finite" => {
                                let d = self.bin(Op2::Sub, recv, recv);
                                let z = self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0));
                                self.cmp(CmpOp::Eq, d, z)
                            }
                            _ => {
                                let a = self.un(Op1::Abs, recv, None);
                                let inf = self.konst(
                                    Ty::F64,
                                    quote!(f64::INFINITY),
                                    ConstVal::F(f64::INFINITY),
                                );
                                self.cmp(CmpOp::Eq, a, inf)
                            }
                        }))
                    }
                    "powi" | "polygamma" => {
                        nargs(1)?;
                        let t = if name == "powi" {
                            IntTy::I32
                        } else {
                            IntTy::U32
                        };
                        if let Expr::Lit(syn::ExprLit {
                            lit: Lit::Int(i), ..
                        }) = strip(args[0])
                        {
                            let n: i64 = i.base10_parse()?;
                            let op = if name == "powi" {
                                Op1::Powi(n as i32)
                            } else {
                                Op1::Polygamma(n as u32)
                            };
                            return Ok(Ev::V(self.un(op, recv, None)));
                        }
                        let n = self.scalar(args[0], Some(Ty::Int(Some(t))))?;
                        if !matches!(self.ty(n), Ty::Int(_)) {
                            return err(args[0], "expected an integer");
                        }
                        self.f.values[n].ty = Ty::Int(Some(t));
                        let op = if name == "powi" {
                            Op1::Powi(0)
                        } else {
                            Op1::Polygamma(0)
                        };
                        Ok(Ev::V(self.un(op, recv, Some(n))))
                    }
                    "mul_add" => {
                        nargs(2)?;
                        let a = self.scalar(args[0], Some(Ty::F64))?;
                        let b = self.scalar(args[1], Some(Ty::F64))?;
                        // One rounding, as `f64::mul_add` (a product and a sum would round
                        // twice): the runtime's rule, value `x.mul_add(a, b)`, partials (a, x, 1).
                        let dst = self.val(Ty::F64);
                        self.emit(Inst::Rule {
                            dst,
                            rule: RuleFn::Builtin("mul_add"),
                            args: vec![recv, a, b],
                            partials: vec![None; 3],
                        });
                        Ok(Ev::V(dst))
                    }
                    "log" => {
                        nargs(1)?;
                        let b = self.scalar(args[0], Some(Ty::F64))?;
                        let ln = self.un(Op1::Ln, recv, None);
                        let lb = self.un(Op1::Ln, b, None);
                        Ok(Ev::V(self.bin(Op2::Div, ln, lb)))
                    }
                    "clamp" => {
                        nargs(2)?;
                        let lo = self.scalar(args[0], Some(Ty::F64))?;
                        let hi = self.scalar(args[1], Some(Ty::F64))?;
                        // `f64::clamp` panics unless `lo <= hi` (a NaN bound included)
                        let ok = self.cmp(CmpOp::Le, lo, hi);
                        self.emit(Inst::Assert {
                            cond: ok,
                            msg: "min > max, or either was NaN".into(),
                            debug: false,
                            span: at.span(),
                        });
                        // `f64::clamp` keeps a NaN receiver (max/min would drop it): lowered
                        // as `if x < lo { lo } else if x > hi { hi } else { x }`.
                        let n = self.env.len();
                        let saved = self.snapshot(n);
                        let mut incoming = vec![];
                        let mut rest = None;
                        for (op, bound) in [(CmpOp::Lt, lo), (CmpOp::Gt, hi)] {
                            let c = self.cmp(op, recv, bound);
                            let (tb, eb) = self.fork(c);
                            incoming.push((tb, self.args(n), Ev::V(bound)));
                            self.cur = eb;
                            rest = Some(eb);
                        }
                        let rest = rest.expect("two bounds");
                        incoming.push((rest, self.args(n), Ev::V(recv)));
                        self.merge(n, incoming, &saved, at)
                    }
                    "rem_euclid" => {
                        nargs(1)?;
                        let y = self.scalar(args[0], Some(Ty::F64))?;
                        // As `f64::rem_euclid` computes it, `r = x % y; if r < 0 { r + |y| }
                        // else { r }`: the same value bit for bit, and the derivatives 1 in x
                        // and minus the Euclidean quotient in y.
                        let r = self.bin(Op2::Rem, recv, y);
                        let zero = self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0));
                        let below = self.cmp(CmpOp::Lt, r, zero);
                        let n = self.env.len();
                        let saved = self.snapshot(n);
                        let (tb, eb) = self.fork(below);
                        self.cur = tb;
                        let size = self.un(Op1::Abs, y, None);
                        let up = self.bin(Op2::Add, r, size);
                        let incoming =
                            vec![(tb, self.args(n), Ev::V(up)), (eb, self.args(n), Ev::V(r))];
                        self.merge(n, incoming, &saved, at)
                    }
                    "fract" => {
                        nargs(0)?;
                        let t = self.val(Ty::F64);
                        self.emit(Inst::Pass {
                            dst: t,
                            op: PassOp::Trunc,
                            a: recv,
                        });
                        Ok(Ev::V(self.bin(Op2::Sub, recv, t)))
                    }
                    "to_radians" | "to_degrees" => {
                        nargs(0)?;
                        let (tok, v) = if name == "to_radians" {
                            (
                                quote!((::core::f64::consts::PI / 180.0)),
                                std::f64::consts::PI / 180.0,
                            )
                        } else {
                            (
                                quote!((180.0 / ::core::f64::consts::PI)),
                                180.0 / std::f64::consts::PI,
                            )
                        };
                        let c = self.konst(Ty::F64, tok, ConstVal::F(v));
                        Ok(Ev::V(self.bin(Op2::Mul, recv, c)))
                    }
                    "sin_cos" => {
                        nargs(0)?;
                        let sin = self.un(Op1::Sin, recv, None);
                        let cos = self.un(Op1::Cos, recv, None);
                        Ok(Ev::Agg(AggV {
                            members: vec![("0".into(), Ev::V(sin)), ("1".into(), Ev::V(cos))],
                            path: None,
                        }))
                    }
                    "clone" => Ok(Ev::V(recv)),
                    // (a test, not a function to give a rule for)
                    "is_sign_negative" | "is_sign_positive" => err(
                        at,
                        format!(
                            "`{name}` is not supported: compare instead (`x < 0.0`, `x >= 0.0`; \
                             they differ from the sign bit only at −0.0 and NaN), or test \
                             `x.is_nan()`, `x.is_finite()`, `x.is_infinite()`"
                        ),
                    ),
                    _ => err(
                        at,
                        format!(
                            "`{name}` is not a differentiable primitive: use the methods of the \
                             rule table (sin, exp, powi, max, …) or declare a rule with \
                             `#[differentiable(rule(f = f_rule))]`"
                        ),
                    ),
                }
            }
            Ty::Int(_) => match name {
                "min" | "max" => {
                    nargs(1)?;
                    let b = self.scalar(args[0], Some(self.ty(recv)))?;
                    let op = if name == "min" {
                        IntOp::Min
                    } else {
                        IntOp::Max
                    };
                    Ok(Ev::V(self.int_op(op, recv, b)))
                }
                _ => err(
                    at,
                    format!(
                        "`{name}` on an integer is not supported (`min` and `max` are): write it \
                         with operators (`n * n` for `n.pow(2)`, `if i < 0 {{ -i }} else {{ i }}` \
                         for `i.abs()`, `if n > k {{ n - k }} else {{ 0 }}` for \
                         `n.saturating_sub(k)`)"
                    ),
                ),
            },
            Ty::Bool => err(at, format!("`{name}` on a `bool` is not supported")),
        }
    }

    fn call(&mut self, c: &syn::ExprCall, hint: Option<Ty>) -> Result<Ev> {
        let Expr::Path(p) = &*c.func else {
            return err(&c.func, "only calls of named functions are supported");
        };
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        // f64::from(k): the lossless conversion of a narrow integer (Rust's `From` impls)
        if segs.len() == 2 && segs[0] == "f64" && segs[1] == "from" && c.args.len() == 1 {
            let a = self.scalar(&c.args[0], None)?;
            return match self.ty(a) {
                Ty::F64 => Ok(Ev::V(a)),
                Ty::Int(
                    None
                    | Some(IntTy::I8 | IntTy::I16 | IntTy::I32 | IntTy::U8 | IntTy::U16 | IntTy::U32),
                ) => Ok(Ev::V(self.int_cast(a, Ty::F64))),
                Ty::Int(Some(_)) => err(
                    &c.args[0],
                    "`f64::from` takes integers of at most 32 bits (Rust has no lossless \
                     conversion from wider ones): cast with `as f64`",
                ),
                Ty::Bool => err(&c.args[0], "`f64::from` of a `bool` is not supported"),
            };
        }
        // f64::sin(x), f64::max(a, b)
        if segs.len() == 2 && segs[0] == "f64" {
            let Some(first) = c.args.first() else {
                return err(c, "expected arguments");
            };
            let recv = self.scalar(first, Some(Ty::F64))?;
            let rest: Vec<&Expr> = c.args.iter().skip(1).collect();
            let at = &p.path.segments[1].ident;
            return self.method_on(recv, &segs[1], &rest, at);
        }
        let Some(id) = p.path.get_ident() else {
            let segs = &p.path.segments;
            let base = "only calls of #[differentiable] functions in scope (a plain name) and \
                        `f64::method(x)` are supported";
            if segs.len() < 2 || segs.iter().any(|s| !s.arguments.is_empty()) {
                return err(p, base);
            }
            let names: Vec<String> = segs.iter().map(|s| s.ident.to_string()).collect();
            let last = &names[names.len() - 1];
            return err(
                p,
                format!(
                    "{base}: bring a function of another module into scope with `use` \
                     (`use {};`) and call it as `{last}(…)`",
                    names.join("::")
                ),
            );
        };
        if let Some(i) = self.lookup(&id.to_string()) {
            if let Binding::Closure(def) = &self.env[i].b {
                let def = def.clone();
                return self.inline_closure(&def, c, hint);
            }
        }
        // user rule?
        if let Some((_, rule)) = self.opts.rules.iter().find(|(n, _)| n == id) {
            let rule = rule.clone();
            let mut args = vec![];
            // (an integer literal got the general "write `2.0`" advice, which breaks a call to
            // a function whose parameter is an integer; a hunter)
            let only_f64 = format!(
                "functions with rules take `f64` arguments only: for an integer argument, rule a \
                 wrapper with it fixed (`fn {id}_3(x: f64) -> f64 {{ {id}(3, x) }}` with \
                 `rule({id}_3 = …)`)"
            );
            for a in &c.args {
                if let Expr::Lit(syn::ExprLit {
                    lit: Lit::Int(i), ..
                }) = strip(a)
                {
                    if i.suffix() != "f64" {
                        return err(a, only_f64);
                    }
                }
                let v = self.scalar(a, Some(Ty::F64))?;
                if self.ty(v) != Ty::F64 {
                    return err(
                        a,
                        "functions with rules take `f64` arguments only: an integer that varies \
                         cannot be one (rule a function of `f64`s, or pass it `k as f64` if the \
                         function is written for that)",
                    );
                }
                args.push(v);
            }
            let dst = self.val(Ty::F64);
            let partials = vec![None; args.len()];
            self.emit(Inst::Rule {
                dst,
                rule: RuleFn::User(rule),
                args,
                partials,
            });
            return Ok(Ev::V(dst));
        }
        self.user_call(c, Ret::Scalar)
    }

    /// `f(args)` for a closure `f`: its body, lowered where it is called, with its parameters
    /// bound to the arguments and its captured variables as they were where it was defined.
    fn inline_closure(
        &mut self,
        def: &ClosureDef,
        c: &syn::ExprCall,
        hint: Option<Ty>,
    ) -> Result<Ev> {
        if c.args.len() != def.c.inputs.len() {
            return err(
                &c.args,
                format!("this closure takes {} argument(s)", def.c.inputs.len()),
            );
        }
        let mut args = vec![];
        for (a, p) in c.args.iter().zip(&def.c.inputs) {
            // a parameter's written type types its argument (`|k: i64| …` called with `3`)
            let hint = match p {
                Pat::Type(t) => type_of(&t.ty),
                _ => None,
            };
            let ev = self.expr(a, hint)?;
            if let (Ev::V(v), Some(h)) = (&ev, hint) {
                let t = self.ty(*v);
                if !h.same_kind(t) {
                    return err(a, "the argument does not have the parameter's type");
                }
                if let (Ty::Int(Some(_)), Ty::Int(None)) = (h, t) {
                    self.f.values[*v].ty = h;
                }
            }
            args.push(ev);
        }
        let outer = std::mem::replace(&mut self.env, def.env.clone());
        let captured = self.captured.replace(self.env.len());
        let r = (|| {
            for (p, ev) in def.c.inputs.iter().zip(args) {
                let p = closure_param(p);
                self.bind_ev(p, ev, p, true)?;
            }
            self.expr(&def.c.body, hint)
        })();
        self.captured = captured;
        self.env = outer;
        r
    }

    /// Whether `init` calls another `#[differentiable]` function (not a rule, not `f64::…`).
    fn is_user_call<'e>(&self, init: &'e Expr) -> Option<&'e syn::ExprCall> {
        let Expr::Call(c) = strip(init) else {
            return None;
        };
        let Expr::Path(p) = &*c.func else {
            return None;
        };
        let id = p.path.get_ident()?;
        let user = *id != self.f.name
            && !self.opts.rules.iter().any(|(n, _)| n == id)
            && self.lookup(&id.to_string()).is_none();
        user.then_some(c)
    }

    /// A call of another `#[differentiable]` function whose result has shape `ret`: one
    /// [`Inst::Call`] defining a value per `f64` of the result, returned as a number, a local
    /// array or a tuple of these.
    fn user_call(&mut self, c: &syn::ExprCall, ret: Ret) -> Result<Ev> {
        let Expr::Path(p) = &*c.func else {
            return err(&c.func, "only calls of named functions are supported");
        };
        if p.path.get_ident().is_some_and(|id| *id == self.f.name) {
            return err(&p.path, "recursion is not supported: write a loop");
        }
        let mut args = vec![];
        for a in &c.args {
            match self.expr(a, None)? {
                Ev::V(v) => args.push(Arg::Val(v)),
                Ev::Struct(k) => {
                    let how = match strip(a) {
                        Expr::Reference(_) => StructArg::Ref,
                        Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => StructArg::Deref,
                        _ => StructArg::Plain,
                    };
                    args.push(Arg::Struct(k, how))
                }
                Ev::S(s) => {
                    let si = &self.f.slices[s.slice];
                    match (&si.kind, s.lo, s.hi) {
                        (_, _, _) if !si.mutable() => args.push(Arg::Slice(s)),
                        (SliceKind::Local { .. }, None, None) if matches!(strip(a), Expr::Reference(r) if r.mutability.is_some()) =>
                        {
                            return err(
                                a,
                                "a local array passed as `&mut` (another #[differentiable] \
                                 function's output) is not supported: return the values from \
                                 that function (an array or tuple result: `let o = f(x);`), or \
                                 pass `&o` to read it",
                            );
                        }
                        (SliceKind::Local { len_value, .. }, None, None) => {
                            let (elem, Some(n @ 1..)) = (si.elem, *len_value) else {
                                return err(
                                    a,
                                    "a local array passed to another #[differentiable] function \
                                     needs a literal length (`[0.0; 3]`)",
                                );
                            };
                            let elems = (0..n)
                                .map(|k| {
                                    let (idx, dst) = (self.usize_const(k), self.val(elem));
                                    self.emit(Inst::Load {
                                        dst,
                                        slice: s.slice,
                                        idx,
                                        span: Span::call_site(),
                                    });
                                    dst
                                })
                                .collect();
                            args.push(Arg::Elems { vals: elems });
                        }
                        _ => {
                            return err(
                                a,
                                "passing a `&mut` slice or part of a local array to another \
                                 #[differentiable] function is not supported (its values may \
                                 change before the reverse sweep): pass input slices or a whole \
                                 local array to read (`&a`), and return results from the callee \
                                 (an array or tuple result)",
                            )
                        }
                    }
                }
                Ev::Agg(_) => {
                    return err(
                        a,
                        "passing tuples or struct literals to another #[differentiable] function \
                         is not supported: pass their fields (a struct parameter may be passed \
                         on)",
                    )
                }
                Ev::Unit => return err(a, "this argument has no value"),
            }
        }
        // the callee's pullback takes one `&mut` adjoint per argument
        for (i, a) in args.iter().enumerate() {
            let Arg::Struct(k, _) = a else { continue };
            let SigItem::Agg(ap) = &self.f.sig[*k] else {
                continue;
            };
            let clash = args.iter().enumerate().any(|(j, x)| {
                match x {
                Arg::Struct(k2, _) => j != i && k2 == k,
                Arg::Slice(s) => ap.leaves.iter().any(|l| {
                    matches!(self.f.params[l.param], Param::Slice { slice, .. } if slice == s.slice)
                }),
                _ => false,
            }
            });
            if clash {
                return err(
                    &c.args[i],
                    "passing a struct twice, or with one of its array fields, to one call is not \
                     supported: pass the fields the callee needs",
                );
            }
        }
        let dsts: Vec<Val> = (0..ret.count()).map(|_| self.val(Ty::F64)).collect();
        self.emit(Inst::Call {
            dsts: dsts.clone(),
            ret: ret.clone(),
            func: p.path.clone(),
            args,
        });
        Ok(self.ret_ev(&ret, &mut dsts.into_iter()))
    }

    /// The value of shape `ret` made of `leaves` (arrays become local arrays).
    fn ret_ev(&mut self, ret: &Ret, leaves: &mut impl Iterator<Item = Val>) -> Ev {
        match ret {
            Ret::Ignored => Ev::Unit,
            Ret::Scalar => Ev::V(leaves.next().expect("a value per leaf")),
            Ret::Array(n) => {
                let vals: Vec<Val> = leaves.take(*n).collect();
                self.local_array(vals)
            }
            Ret::Tuple(m) => Ev::Agg(AggV {
                members: m
                    .iter()
                    .enumerate()
                    .map(|(k, r)| (k.to_string(), self.ret_ev(r, leaves)))
                    .collect(),
                path: None,
            }),
        }
    }

    /// Destructuring assignment: the tuple `t` of places gets the parts of `v`, a value of the
    /// right side already lowered (Rust evaluates the whole right side before assigning), in
    /// order; `_` skips a part, and tuples nest.
    fn assign_parts(&mut self, t: &syn::ExprTuple, v: Ev, rhs: &Expr) -> Result<()> {
        let Ev::Agg(agg) = v else {
            return err(
                rhs,
                "the right side of a destructuring assignment must be a tuple: `(a, b) = (b, a + b);`",
            );
        };
        if agg.members.len() != t.elems.len()
            || agg.members.iter().any(|(n, _)| n.parse::<usize>().is_err())
        {
            return err(
                rhs,
                format!(
                    "this tuple does not have the {} parts the left side assigns",
                    t.elems.len()
                ),
            );
        }
        for (place, (_, part)) in t.elems.iter().zip(agg.members) {
            match (strip(place), part) {
                (Expr::Infer(_), _) => {}
                (Expr::Tuple(inner), part) => self.assign_parts(inner, part, rhs)?,
                (place, Ev::V(v)) => self.assign(place, None, Src::Val(v, rhs))?,
                (place, _) => {
                    return err(
                        place,
                        "assign numbers, not arrays or structs, by destructuring: copy them \
                         element by element",
                    )
                }
            }
        }
        Ok(())
    }

    fn assign(&mut self, lhs: &Expr, op: Option<(BinOp, &BinOp)>, rhs: Src) -> Result<()> {
        match strip(lhs) {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().unwrap().to_string();
                let Some(i) = self.lookup(&name) else {
                    return err(p, format!("unknown variable `{name}`"));
                };
                if self.captured.is_some_and(|n| i < n) {
                    return err(
                        lhs,
                        format!(
                            "this closure assigns `{name}`, a variable it captures, which is not \
                             supported: return the new value instead (`{name} = f(…);`)"
                        ),
                    );
                }
                match self.env[i].b.clone() {
                    Binding::Val(old) => {
                        let untyped = self.untyped_decls.contains(&old);
                        let hint = if untyped { None } else { Some(self.ty(old)) };
                        // (Rust evaluates the right side first: `s += loop { s *= 2.0; … }`
                        // adds to the `s` the loop left)
                        let r = rhs.scalar(self, hint)?;
                        let Binding::Val(old) = self.env[i].b else {
                            unreachable!("a number stays a number")
                        };
                        let new = match op {
                            Some((o, at)) => self.binop(&o, old, r, at)?,
                            None => r,
                        };
                        if untyped && !matches!(self.ty(new), Ty::F64) {
                            return err(
                                lhs,
                                format!(
                                    "give `{name}` its type where it is declared (`let {name}: \
                                     i64;`): a variable declared without a value or a type is \
                                     taken to be an `f64`"
                                ),
                            );
                        }
                        if !self.ty(new).same_kind(self.ty(old)) {
                            return err(
                                rhs.at(),
                                "the value has a different type than the variable",
                            );
                        }
                        if self.f.values[new].name.is_none() {
                            self.f.values[new].name = Some(name);
                        }
                        if let (Ty::Int(_), Ty::Int(_)) = (self.ty(old), self.ty(new)) {
                            // one variable, one type (`let mut k = 3; let w = k * 1_000_000_000;
                            // k = m;` makes `k`, and so `w`, a `u64` for `m: u64`)
                            self.f.int_links.push((old, new));
                        }
                        self.env[i].b = Binding::Val(new);
                        Ok(())
                    }
                    Binding::Elem(s, idx) => self.store(s, idx, op, rhs, lhs.span()),
                    Binding::Slice(target) if op.is_none() && self.is_whole_local(&target) => {
                        self.assign_array(target.slice, rhs)
                    }
                    Binding::Slice(_) => err(
                        lhs,
                        "assigning whole slices is not supported (a local array can be \
                         assigned whole: `v = [a, b, c];`)",
                    ),
                    Binding::Agg(_) | Binding::Struct(_) => err(
                        lhs,
                        "tuples and structs are read-only: destructure them into variables \
                         (`let (mut a, mut b) = t;`)",
                    ),
                    Binding::Closure(_) => err(lhs, "assigning closures is not supported"),
                }
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => {
                if let Expr::Path(p) = strip(&u.expr) {
                    if let Some(id) = p.path.get_ident() {
                        if let Some(i) = self.lookup(&id.to_string()) {
                            if let Binding::Elem(s, idx) = self.env[i].b.clone() {
                                return self.store(s, idx, op, rhs, lhs.span());
                            }
                        }
                    }
                }
                err(
                    lhs,
                    "assign through `*` only to elements from `iter_mut()`; write an array \
                     output element by element (`out[0] = a; out[1] = b;`)",
                )
            }
            Expr::Index(ix) => {
                let base = match self.expr(&ix.expr, None)? {
                    Ev::S(s) => s,
                    _ => return err(&ix.expr, NOT_INDEXABLE),
                };
                if !self.f.slices[base.slice].mutable() {
                    return err(&ix.expr, NOT_MUTABLE);
                }
                // The right side first, then the index (Rust's order: `v[i] = { i += 1; … }`
                // stores at the new `i`)
                let elem = self.f.slices[base.slice].elem;
                let rhs = Src::Val(rhs.scalar(self, Some(elem))?, rhs.expr());
                let i = self.scalar(&ix.index, Some(Ty::Int(Some(IntTy::Usize))))?;
                if !matches!(self.ty(i), Ty::Int(_)) {
                    return err(&ix.index, "indices are `usize`");
                }
                self.f.values[i].ty = Ty::Int(Some(IntTy::Usize));
                let idx = self.checked_offset(&base, i, lhs.span());
                self.store(base.slice, idx, op, rhs, lhs.span())
            }
            Expr::Field(f) => err(
                f,
                "fields of tuples and structs are read-only: copy them into variables",
            ),
            e => err(e, "assign to variables, slice elements `x[i]` or `*elem`"),
        }
    }

    /// `v = [a, b, c];` or `v = w;` for a local array `v`: the right side is evaluated in full
    /// (an array literal into a new local array, so `v = [v[1], v[0]]` reads the old
    /// elements), then copied element by element.
    fn assign_array(&mut self, target: SliceId, rhs: Src) -> Result<()> {
        let Src::Expr(e) = rhs else {
            return err(rhs.at(), "assign numbers, not arrays, by destructuring");
        };
        if let Expr::Reference(r) = strip(e) {
            return err(
                r,
                "pointing a reference at another array is not supported: index the arrays \
                 themselves",
            );
        }
        if self.names_of(target) > 1 {
            return err(
                e,
                "this array has another name (a reference to it): assigning it whole is not \
                 supported while both are in scope; assign element by element",
            );
        }
        if let Some(c) = self.is_user_call(e) {
            // `v = rot(&v, t);`: the callee's array result (its arguments read `v` at the call)
            let SliceKind::Local {
                len_value: Some(n), ..
            } = self.f.slices[target].kind
            else {
                return err(
                    e,
                    "assign a call's array result to a local array whose length is a literal",
                );
            };
            if self.f.slices[target].elem != Ty::F64 {
                return err(e, "calls return arrays of `f64`");
            }
            let Ev::S(src) = self.user_call(c, Ret::Array(n))? else {
                unreachable!("an array result is a local array")
            };
            return self.copy_into(target, src);
        }
        let hint = Some(self.f.slices[target].elem);
        let Ev::S(src) = self.expr(e, hint)? else {
            return err(e, "assign an array of the same length to a local array");
        };
        let len = |me: &Self, s: SliceId| match &me.f.slices[s].kind {
            SliceKind::Local { len, len_value } => Some((len.to_string(), *len_value)),
            _ => None,
        };
        let same_len = match (len(self, target), self.is_whole_local(&src)) {
            (Some((t, tv)), true) => {
                let (s, sv) = len(self, src.slice).expect("a local array");
                match (tv, sv) {
                    (Some(a), Some(b)) => a == b,
                    _ => t == s,
                }
            }
            _ => false,
        };
        if !same_len {
            return err(
                e,
                "assign a local array of the same length (an array literal or another local \
                 array) to a local array",
            );
        }
        if !self.f.slices[src.slice]
            .elem
            .same_kind(self.f.slices[target].elem)
        {
            return err(e, "the array has a different element type");
        }
        self.copy_into(target, src)
    }

    /// `s[idx] = rhs` (or `op=`); `span`: the target as written, where an index out of bounds
    /// is reported.
    fn store(
        &mut self,
        s: SliceId,
        idx: Val,
        op: Option<(BinOp, &BinOp)>,
        rhs: Src,
        span: Span,
    ) -> Result<()> {
        let elem = self.f.slices[s].elem;
        let r = rhs.scalar(self, Some(elem))?;
        let val = match op {
            Some((o, at)) => {
                let old = self.val(elem);
                self.emit(Inst::Load {
                    dst: old,
                    slice: s,
                    idx,
                    span,
                });
                self.binop(&o, old, r, at)?
            }
            None => r,
        };
        if !self.ty(val).same_kind(elem) {
            return err(
                rhs.at(),
                "the value has a different type than the slice's elements",
            );
        }
        self.emit(Inst::Store {
            slice: s,
            idx,
            val,
            span,
        });
        Ok(())
    }

    // ---- control flow ----

    fn cond(&mut self, e: &Expr) -> Result<Val> {
        if let Expr::Let(l) = strip(e) {
            return err(
                l,
                "`if let` / `while let` are not supported: compare values",
            );
        }
        let c = self.scalar(e, Some(Ty::Bool))?;
        if self.ty(c) != Ty::Bool {
            return err(e, "expected a `bool` condition");
        }
        Ok(c)
    }

    fn lower_if(&mut self, e: &syn::ExprIf, hint: Option<Ty>) -> Result<Ev> {
        let c = self.cond(&e.cond)?;
        let n = self.env.len();
        let saved = self.snapshot(n);
        let (tb, eb) = self.fork(c);
        let mut incoming: Vec<(BlockId, Vec<Val>, Ev)> = vec![];
        self.cur = tb;
        let tv = self.block(&e.then_branch)?;
        if !self.is_dead(self.cur) {
            incoming.push((self.cur, self.args(n), tv));
        }
        self.restore(&saved);
        self.cur = eb;
        let ev = match &e.else_branch {
            Some((_, el)) => self.expr(el, hint)?,
            None => Ev::Unit,
        };
        if !self.is_dead(self.cur) {
            incoming.push((self.cur, self.args(n), ev));
        }
        self.merge(n, incoming, &saved, e)
    }

    /// Join the incoming paths (block, variable values, branch value) into a new block.
    fn merge(
        &mut self,
        n: usize,
        incoming: Vec<(BlockId, Vec<Val>, Ev)>,
        saved: &[Binding],
        at: &dyn ToTokens,
    ) -> Result<Ev> {
        let m = self.new_block();
        self.restore(saved);
        if incoming.is_empty() {
            self.dead.insert(m);
            self.cur = m;
            return Ok(Ev::Unit);
        }
        self.make_params(m, n);
        let all_vals = incoming.iter().all(|(_, _, e)| matches!(e, Ev::V(_)));
        let mut result = Ev::Unit;
        if all_vals {
            let tys: Vec<Ty> = incoming
                .iter()
                .map(|(_, _, e)| match e {
                    Ev::V(v) => self.ty(*v),
                    _ => unreachable!(),
                })
                .collect();
            if tys.iter().any(|t| !t.same_kind(tys[0])) {
                return err(at, "the branches have values of different types");
            }
            let p = self.f.new_val(tys[0], None);
            self.f.blocks[m].params.push(p);
            result = Ev::V(p);
        } else if incoming
            .iter()
            .any(|(_, _, e)| matches!(e, Ev::S(_) | Ev::Agg(_) | Ev::Struct(_)))
        {
            return err(
                at,
                "branches that produce slices, tuples or structs are not supported: assign \
                 variables in each branch",
            );
        }
        for (b, mut args, ev) in incoming {
            if let (true, Ev::V(v)) = (all_vals, ev) {
                args.push(v);
            }
            self.f.blocks[b].term = Term::Jump(Target { block: m, args });
        }
        self.cur = m;
        self.bind_params(m, n);
        Ok(result)
    }

    fn label(l: &Option<syn::Label>) -> Option<String> {
        l.as_ref().map(|l| l.name.ident.to_string())
    }

    /// Start a loop: header and exit blocks with parameters for the first `n` variables; jumps
    /// from the current block to the header.
    fn loop_start(&mut self, n: usize) -> (BlockId, BlockId) {
        let (h, x) = (self.new_block(), self.new_block());
        self.make_params(h, n);
        self.make_params(x, n);
        self.jump(h, n, None);
        self.cur = h;
        self.bind_params(h, n);
        (h, x)
    }

    fn loop_end(&mut self, x: BlockId, n: usize, exit_reached: bool) {
        self.cur = x;
        if !exit_reached {
            self.dead.insert(x);
        }
        self.bind_params(x, n);
    }

    fn exit_used(&self, x: BlockId) -> bool {
        self.f.blocks.iter().enumerate().any(|(b, blk)| {
            !self.dead.contains(&b) && blk.term.targets().iter().any(|t| t.block == x)
        })
    }

    fn lower_while(&mut self, w: &syn::ExprWhile) -> Result<Ev> {
        let n = self.env.len();
        let (h, x) = self.loop_start(n);
        let c = self.cond(&w.cond)?;
        let body = self.new_block();
        let exit_args = self.args(n);
        self.finish(Term::Branch(
            c,
            Target {
                block: body,
                args: vec![],
            },
            Target {
                block: x,
                args: exit_args,
            },
        ));
        self.cur = body;
        self.loops.push(LoopCtx {
            label: Self::label(&w.label),
            cont: h,
            brk: x,
            nvars: n,
            value: None,
        });
        self.block(&w.body)?;
        self.loops.pop();
        if !self.is_dead(self.cur) {
            self.jump(h, n, None);
        }
        let used = self.exit_used(x);
        self.loop_end(x, n, used);
        Ok(Ev::Unit)
    }

    fn lower_loop(&mut self, l: &syn::ExprLoop, hint: Option<Ty>) -> Result<Ev> {
        let label = Self::label(&l.label);
        // `let r = loop { … break v; };`: a hidden variable that each `break v` assigns,
        // carried to the exit like any other (`f64` unless the context says otherwise)
        let value = breaks_with_value(&l.body, label.as_deref()).then(|| {
            let v = match hint {
                Some(Ty::F64) => self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0)),
                Some(t @ Ty::Int(_)) => self.konst(t, quote!(0), ConstVal::I(0)),
                _ => {
                    // (no type from the context: an `f64`, which a `break` with an integer
                    // does not silently become)
                    let v = self.konst(Ty::F64, quote!(0.0), ConstVal::F(0.0));
                    self.untyped_decls.insert(v);
                    v
                }
            };
            self.counter += 1;
            self.env.push(Var {
                name: format!("#loop{}", self.counter),
                b: Binding::Val(v),
            });
            self.env.len() - 1
        });
        let n = self.env.len();
        let (h, x) = self.loop_start(n);
        self.loops.push(LoopCtx {
            label,
            cont: h,
            brk: x,
            nvars: n,
            value,
        });
        self.block(&l.body)?;
        self.loops.pop();
        if !self.is_dead(self.cur) {
            self.jump(h, n, None);
        }
        let used = self.exit_used(x);
        self.loop_end(x, n, used);
        match value {
            Some(i) => {
                let Binding::Val(v) = self.env[i].b else {
                    unreachable!("the loop's value is a number")
                };
                self.env.truncate(i);
                Ok(Ev::V(v))
            }
            None => Ok(Ev::Unit),
        }
    }

    fn iter_spec(&mut self, e: &Expr) -> Result<It> {
        match strip(e) {
            Expr::Range(r) => {
                let (Some(s), Some(t)) = (&r.start, &r.end) else {
                    return err(
                        r,
                        "only bounded ranges `a..b` are supported: give the range an end \
                         (`(1..n + 1).zip(x.iter())`), or count with `iter().enumerate()` \
                         and add the start to the index",
                    );
                };
                let lo = self.scalar(s, None)?;
                let lot = self.ty(lo);
                if !matches!(lot, Ty::Int(_)) {
                    return err(s, "range bounds are integers");
                }
                let mut hi = self.scalar(t, Some(lot))?;
                if !matches!(self.ty(hi), Ty::Int(_)) {
                    return err(t, "range bounds are integers");
                }
                let item = match (self.ty(lo), self.ty(hi)) {
                    (t @ Ty::Int(Some(_)), _) | (_, t) => t,
                };
                let mut lo = lo;
                if let syn::RangeLimits::Closed(_) = r.limits {
                    // (widened as `range_bounds` widens: a type still open may become `i8`
                    // later, where `hi + 1` would overflow)
                    if narrow_int(item) {
                        let w = Ty::Int(Some(IntTy::I64));
                        (lo, hi) = (self.int_cast(lo, w), self.int_cast(hi, w));
                    } else if item == Ty::Int(None) {
                        // Counted in `i64`, checked: the type may become `u64` later.
                        (lo, hi) = (self.bound_as_i64(lo, false), self.bound_as_i64(hi, true));
                    } else if let Ty::Int(Some(t)) = item {
                        // A 64-bit range counts to `hi + 1`, which does not exist at the type's
                        // MAX: refused where it runs (it counted nothing in release builds).
                        let max = match t {
                            IntTy::I64 | IntTy::Isize => i64::MAX as i128,
                            _ => u64::MAX as i128,
                        };
                        let name = syn::Ident::new(t.name(), Span::call_site());
                        let m = self.konst(item, quote!(#name::MAX), ConstVal::I(max));
                        let cond = self.cmp(CmpOp::Ne, hi, m);
                        self.emit(Inst::Assert {
                            cond,
                            msg: format!(
                                "#[differentiable] does not run an inclusive range `a..=b` whose end is \
                                 `{}::MAX`: loop over `a..b` and treat `b` after the loop",
                                t.name()
                            ),
                            debug: false,
                            span: e.span(),
                        });
                    }
                    let one = self.konst(self.ty(hi), quote!(1), ConstVal::I(1));
                    hi = self.int_op(IntOp::Add, hi, one);
                }
                Ok(It::Range {
                    lo,
                    hi,
                    rev: false,
                    step: None,
                    item,
                })
            }
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                match name.as_str() {
                    "rev" => match self.iter_spec(&m.receiver)? {
                        It::Range {
                            lo,
                            hi,
                            rev: false,
                            step: None,
                            item,
                        } => Ok(It::Range {
                            lo,
                            hi,
                            rev: true,
                            step: None,
                            item,
                        }),
                        // `.rev().rev()`: forwards again
                        It::Range {
                            lo,
                            hi,
                            rev: true,
                            step: None,
                            item,
                        } => Ok(It::Range {
                            lo,
                            hi,
                            rev: false,
                            step: None,
                            item,
                        }),
                        other => Ok(It::Rev(Box::new(other))),
                    },
                    "skip" | "take" => {
                        if m.args.len() != 1 {
                            return err(&m.method, format!("`.{name}()` takes 1 argument"));
                        }
                        let inner = self.iter_spec(&m.receiver)?;
                        let n = self.usize_arg(&m.args[0])?;
                        // `m = min(n, len)` items skipped or taken from `lo`: `lo + m` cannot
                        // pass the end, nor overflow for a huge `n`
                        // (`min(n, len)` is a `usize`; a range's bounds keep their own type,
                        // the sum computed as its items are: `(-3..2).skip(1)` starts at −2)
                        let cut = |me: &mut Self, lo: Val, it: &It| {
                            let len = me.iter_len(it);
                            let m = me.int_op(IntOp::Min, n, len);
                            let ty = me.ty(lo);
                            let wide = match it {
                                It::Range { hi, .. } => me.range_bounds(lo, *hi).0,
                                _ => lo,
                            };
                            let m = me.usize_as(m, me.ty(wide));
                            let c = me.int_op(IntOp::Add, wide, m);
                            me.usize_as(c, ty)
                        };
                        match inner {
                            It::Range {
                                lo,
                                hi,
                                rev: false,
                                step: None,
                                item,
                            } => {
                                let c = cut(self, lo, &inner);
                                let (lo, hi) = if name == "skip" { (c, hi) } else { (lo, c) };
                                Ok(It::Range {
                                    lo,
                                    hi,
                                    rev: false,
                                    step: None,
                                    item,
                                })
                            }
                            It::Slice(ref s, mutable) => {
                                let lo = s.lo.unwrap_or_else(|| self.usize_const(0));
                                let c = cut(self, lo, &inner);
                                let (lo, hi) = if name == "skip" {
                                    (c, s.hi)
                                } else {
                                    (lo, Some(c))
                                };
                                let slice = s.slice;
                                Ok(It::Slice(
                                    SliceArg {
                                        slice,
                                        lo: Some(lo),
                                        hi,
                                    },
                                    mutable,
                                ))
                            }
                            other => {
                                // (`min(n, len)`, so `skip(n)` past the end leaves no items)
                                let len = self.iter_len(&other);
                                let m = self.int_op(IntOp::Min, n, len);
                                Ok(if name == "skip" {
                                    It::Skip(Box::new(other), m)
                                } else {
                                    It::Take(Box::new(other), m)
                                })
                            }
                        }
                    }
                    "windows" | "chunks" | "chunks_exact" => {
                        if m.args.len() != 1 {
                            return err(&m.method, format!("`.{name}()` takes 1 argument"));
                        }
                        let Ev::S(s) = self.expr(&m.receiver, None)? else {
                            return err(&m.receiver, "expected a slice");
                        };
                        let panic = if name == "windows" {
                            "window size must be non-zero"
                        } else {
                            "chunk size must be non-zero"
                        };
                        let k = self.nonzero_usize(&m.args[0], "size", panic)?;
                        Ok(match name.as_str() {
                            "windows" => It::Windows(s, k),
                            _ => It::Chunks(s, k, name == "chunks_exact"),
                        })
                    }
                    "step_by" => match self.iter_spec(&m.receiver)? {
                        It::Range {
                            lo,
                            hi,
                            rev: false,
                            step: None,
                            item,
                        } => {
                            // (Rust's message where the step is 0; it divided by zero here)
                            let s = self.nonzero_usize(
                                &m.args[0],
                                "step",
                                "assertion failed: step != 0",
                            )?;
                            Ok(It::Range {
                                lo,
                                hi,
                                rev: false,
                                step: Some(s),
                                item,
                            })
                        }
                        other => {
                            let s = self.nonzero_usize(
                                &m.args[0],
                                "step",
                                "assertion failed: step != 0",
                            )?;
                            Ok(It::Step(Box::new(other), s))
                        }
                    },
                    "enumerate" => Ok(It::Enumerate(Box::new(self.iter_spec(&m.receiver)?))),
                    "zip" => {
                        let a = self.iter_spec(&m.receiver)?;
                        let b = self.iter_spec(&m.args[0])?;
                        Ok(It::Zip(Box::new(a), Box::new(b)))
                    }
                    "iter" | "iter_mut" | "copied" | "cloned" | "into_iter" => {
                        if name == "copied" || name == "cloned" {
                            return self.iter_spec(&m.receiver);
                        }
                        match self.expr(&m.receiver, None)? {
                            Ev::S(s) => {
                                let mutable = name == "iter_mut";
                                if mutable && !self.f.slices[s.slice].mutable() {
                                    return err(&m.receiver, NOT_MUTABLE);
                                }
                                Ok(It::Slice(s, mutable))
                            }
                            _ => err(&m.receiver, "expected a slice"),
                        }
                    }
                    _ => err(
                        &m.method,
                        "unsupported iterator adapter: loop over ranges or slices with `.iter()`, \
                         `.iter_mut()`, `.enumerate()`, `.zip()`, `.rev()`, `.step_by()`, \
                         `.skip()`, `.take()`, or over `.windows(k)`, `.chunks(k)`, \
                         `.chunks_exact(k)`",
                    ),
                }
            }
            Expr::Reference(r) => {
                let mutable = r.mutability.is_some();
                match self.expr(&r.expr, None)? {
                    Ev::S(s) => Ok(It::Slice(s, mutable)),
                    _ => err(r, "expected a slice"),
                }
            }
            other => match self.expr(other, None)? {
                Ev::S(s) => Ok(It::Slice(s, false)),
                _ => err(other, "loop over a range or a slice"),
            },
        }
    }

    /// A `usize` argument (`skip(n)`, `step_by(k)`, …).
    fn usize_arg(&mut self, e: &Expr) -> Result<Val> {
        let v = self.scalar(e, Some(Ty::Int(Some(IntTy::Usize))))?;
        if self.ty(v) != Ty::Int(Some(IntTy::Usize)) {
            return err(
                e,
                "expected a `usize`: give an integer variable its type where it is declared \
                 (`let n: usize = 1;`); the macro does not infer it from later uses",
            );
        }
        Ok(v)
    }

    /// A `usize` argument of `step_by`, `windows`, `chunks`: a literal zero (which panics in
    /// Rust) is refused here, and any other value is checked where it is computed, with the
    /// message Rust's own method panics with (`panic`): `windows(0)` ran `len + 1` empty
    /// windows.
    fn nonzero_usize(&mut self, e: &Expr, what: &str, panic: &str) -> Result<Val> {
        if let Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) = strip(e)
        {
            if i.base10_parse::<u64>()? == 0 {
                return err(i, format!("the {what} must not be zero"));
            }
            return self.usize_arg(e);
        }
        let k = self.usize_arg(e)?;
        let zero = self.usize_const(0);
        let cond = self.cmp(CmpOp::Ne, k, zero);
        self.emit(Inst::Assert {
            cond,
            msg: panic.into(),
            debug: false,
            span: e.span(),
        });
        Ok(k)
    }

    /// The bounds a range's length and items are computed with: as they are for 64-bit types (a
    /// length past `i64::MAX` is out of reach), widened to `i64` for types of at most 32 bits
    /// and for bounds whose type is still open (it may become `i8` later), so that
    /// `(-100i8..100).rev()` counts 200 and reaches 99 without overflowing.
    fn range_bounds(&mut self, lo: Val, hi: Val) -> (Val, Val) {
        // (the bounds are one integer type: a written one, else open)
        let narrow = match (self.ty(lo), self.ty(hi)) {
            (t @ Ty::Int(Some(_)), _) | (_, t @ Ty::Int(Some(_))) => narrow_int(t),
            _ => true,
        };
        if narrow {
            (self.bound_as_i64(lo, false), self.bound_as_i64(hi, false))
        } else {
            (lo, hi)
        }
    }

    /// A non-negative integer (a range's length) as a `usize`.
    fn usize_of(&mut self, v: Val) -> Val {
        self.usize_as(v, Ty::Int(Some(IntTy::Usize)))
    }

    /// An integer (a `usize` loop counter or offset, a range's length) as type `ty`: cast
    /// unless it has that type already.
    fn usize_as(&mut self, v: Val, ty: Ty) -> Val {
        if self.ty(v) == ty {
            v
        } else {
            self.int_cast(v, ty)
        }
    }

    fn int_cast(&mut self, a: Val, ty: Ty) -> Val {
        let dst = self.val(ty);
        self.emit(Inst::Cast {
            dst,
            a,
            checked: None,
        });
        dst
    }

    /// A range bound as an `i64`, the type ranges of narrow or still open types count in. A
    /// bound whose type is decided after the range (`let mut hi = 0; … hi = m;` with `m: u64`)
    /// is converted with a check: the counter stays an `i64` unless that decision reaches it
    /// (through the loop variable), and a bound that does not fit panics saying so (it counted
    /// nothing from 2⁶³); so does the end of an inclusive range at the counter's `MAX`
    /// (`end_inclusive`).
    fn bound_as_i64(&mut self, a: Val, end_inclusive: bool) -> Val {
        let w = Ty::Int(Some(IntTy::I64));
        let checked = (self.ty(a) == Ty::Int(None)).then_some(BoundCheck { end_inclusive });
        if self.ty(a) == w {
            return a;
        }
        let dst = self.val(w);
        self.emit(Inst::Cast { dst, a, checked });
        dst
    }

    /// `⌈a / b⌉` as `a / b + min(a % b, 1)`: `(a + b − 1) / b` overflows for a huge `b`.
    fn ceil_div(&mut self, a: Val, b: Val) -> Val {
        let q = self.int_op(IntOp::Div, a, b);
        let r = self.int_op(IntOp::Rem, a, b);
        let one = self.konst(self.ty(a), quote!(1), ConstVal::I(1));
        let r1 = self.int_op(IntOp::Min, r, one);
        self.int_op(IntOp::Add, q, r1)
    }

    /// Number of iterations of an iterator.
    fn iter_len(&mut self, it: &It) -> Val {
        match it {
            It::Range { lo, hi, step, .. } => {
                // if hi > lo { (hi - lo + step - 1) / step } else { 0 }, with min/max only; the
                // difference of the bounds (`-3..2` counts 5), then as a `usize`
                let (lo, hi) = self.range_bounds(*lo, *hi);
                let m = self.int_op(IntOp::Max, hi, lo);
                let d = self.int_op(IntOp::Sub, m, lo);
                let d = self.usize_of(d);
                match step {
                    None => d,
                    Some(s) => self.ceil_div(d, *s),
                }
            }
            It::Slice(s, _) => self.len_of(&s.clone()),
            It::Enumerate(i) | It::Rev(i) => self.iter_len(i),
            It::Zip(a, b) => {
                let la = self.iter_len(a);
                let lb = self.iter_len(b);
                self.int_op(IntOp::Min, la, lb)
            }
            It::Step(i, s) => {
                let len = self.iter_len(i);
                self.ceil_div(len, *s)
            }
            It::Skip(i, m) => {
                let len = self.iter_len(i);
                self.int_op(IntOp::Sub, len, *m)
            }
            It::Take(_, m) => *m,
            It::Windows(s, k) => {
                // `len − k + 1` windows when `len >= k`, else none: `max(len + 1, k) − k`
                let len = self.len_of(&s.clone());
                let one = self.usize_const(1);
                let l1 = self.int_op(IntOp::Add, len, one);
                let m = self.int_op(IntOp::Max, l1, *k);
                self.int_op(IntOp::Sub, m, *k)
            }
            It::Chunks(s, k, exact) => {
                let len = self.len_of(&s.clone());
                if *exact {
                    self.int_op(IntOp::Div, len, *k)
                } else {
                    self.ceil_div(len, *k)
                }
            }
        }
    }

    /// The item at counter `k`.
    fn iter_item(&mut self, it: &It, k: Val) -> Item {
        match it {
            It::Range {
                lo,
                hi,
                rev,
                step,
                item: ty,
            } => {
                // (the counter `k` is a `usize`; the item is computed with `range_bounds` and
                // has the range's item type)
                let ty = *ty;
                let (lo, hi) = self.range_bounds(*lo, *hi);
                let item = if *rev {
                    // hi - 1 - k
                    let one = self.konst(self.ty(hi), quote!(1), ConstVal::I(1));
                    let h1 = self.int_op(IntOp::Sub, hi, one);
                    let k = self.usize_as(k, self.ty(hi));
                    self.int_op(IntOp::Sub, h1, k)
                } else {
                    let off = match step {
                        Some(s) => self.int_op(IntOp::Mul, k, *s),
                        None => k,
                    };
                    let off = self.usize_as(off, self.ty(lo));
                    self.int_op(IntOp::Add, lo, off)
                };
                Item::Int(if self.ty(item) == ty {
                    item
                } else {
                    self.int_cast(item, ty)
                })
            }
            It::Slice(s, mutable) => {
                let idx = self.offset(&s.clone(), k);
                Item::Elem(s.slice, idx, *mutable)
            }
            It::Enumerate(i) => {
                let inner = self.iter_item(i, k);
                Item::Tuple(vec![Item::Int(k), inner])
            }
            It::Zip(a, b) => {
                let ia = self.iter_item(a, k);
                let ib = self.iter_item(b, k);
                Item::Tuple(vec![ia, ib])
            }
            It::Rev(i) => {
                // the item at `len − 1 − k`
                let len = self.iter_len(i);
                let one = self.usize_const(1);
                let l1 = self.int_op(IntOp::Sub, len, one);
                let j = self.int_op(IntOp::Sub, l1, k);
                self.iter_item(i, j)
            }
            It::Step(i, s) => {
                let j = self.int_op(IntOp::Mul, k, *s);
                self.iter_item(i, j)
            }
            It::Skip(i, m) => {
                let j = self.int_op(IntOp::Add, k, *m);
                self.iter_item(i, j)
            }
            It::Take(i, _) => self.iter_item(i, k),
            It::Windows(s, w) => {
                let lo = self.offset(&s.clone(), k);
                let hi = self.int_op(IntOp::Add, lo, *w);
                Item::Sub(SliceArg {
                    slice: s.slice,
                    lo: Some(lo),
                    hi: Some(hi),
                })
            }
            It::Chunks(s, c, exact) => {
                let i = self.int_op(IntOp::Mul, k, *c);
                let lo = self.offset(&s.clone(), i);
                let size = if *exact {
                    *c
                } else {
                    // the last chunk ends at the slice's end: `min(c, len − i·c)` (no `lo + c`,
                    // which could overflow for a huge `c`)
                    let len = self.len_of(&s.clone());
                    let rest = self.int_op(IntOp::Sub, len, i);
                    self.int_op(IntOp::Min, *c, rest)
                };
                let hi = self.int_op(IntOp::Add, lo, size);
                Item::Sub(SliceArg {
                    slice: s.slice,
                    lo: Some(lo),
                    hi: Some(hi),
                })
            }
        }
    }

    fn bind_item(&mut self, pat: &Pat, item: Item) -> Result<()> {
        match (pat, item) {
            (Pat::Wild(_), _) => Ok(()),
            (Pat::Ident(pi), Item::Sub(s)) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                self.env.push(Var {
                    name: pi.ident.to_string(),
                    b: Binding::Slice(s),
                });
                Ok(())
            }
            (Pat::Ident(pi), Item::Int(v)) => {
                self.env.push(Var {
                    name: pi.ident.to_string(),
                    b: Binding::Val(v),
                });
                Ok(())
            }
            (Pat::Ident(pi), Item::Elem(s, idx, mutable)) => {
                let b = if mutable {
                    Binding::Elem(s, idx)
                } else {
                    let dst = self.val(self.f.slices[s].elem);
                    self.f.values[dst].name = Some(pi.ident.to_string());
                    self.emit(Inst::Load {
                        dst,
                        slice: s,
                        idx,
                        span: Span::call_site(),
                    });
                    Binding::Val(dst)
                };
                self.env.push(Var {
                    name: pi.ident.to_string(),
                    b,
                });
                Ok(())
            }
            (Pat::Reference(r), Item::Elem(s, idx, false)) => {
                if let Pat::Ident(pi) = &*r.pat {
                    let dst = self.val(self.f.slices[s].elem);
                    self.f.values[dst].name = Some(pi.ident.to_string());
                    self.emit(Inst::Load {
                        dst,
                        slice: s,
                        idx,
                        span: Span::call_site(),
                    });
                    self.env.push(Var {
                        name: pi.ident.to_string(),
                        b: Binding::Val(dst),
                    });
                    Ok(())
                } else {
                    err(r, "bind a plain name")
                }
            }
            (Pat::Tuple(t), Item::Tuple(items)) if t.elems.len() == items.len() => {
                for (p, i) in t.elems.iter().zip(items) {
                    self.bind_item(p, i)?;
                }
                Ok(())
            }
            // (a name for a whole pair is valid Rust; the transform binds the parts by name)
            (Pat::Ident(pi), Item::Tuple(items)) => err(
                pi,
                format!(
                    "this loop's items are tuples of {}: split them with a pattern \
                     (`for (i, v) in …`, `for (a, b) in …`), not one name",
                    items.len()
                ),
            ),
            (p, _) => err(p, "this pattern does not match the loop's items"),
        }
    }

    fn lower_for(&mut self, fl: &syn::ExprForLoop) -> Result<Ev> {
        let it = self.iter_spec(&fl.expr)?;
        // (an inclusive range whose bounds were widened counts with `k` like the others)
        let simple = matches!(
            it,
            It::Range {
                lo,
                rev: false,
                step: None,
                item,
                ..
            } if self.ty(lo) == item || !narrow_int(item)
        );
        // the counter: the range variable itself for `a..b`, else 0..len
        let (start, end) = match &it {
            It::Range { lo, hi, .. } if simple => (*lo, *hi),
            _ => {
                let len = self.iter_len(&it);
                (self.usize_const(0), len)
            }
        };
        self.counter += 1;
        self.env.push(Var {
            name: format!("#k{}", self.counter),
            b: Binding::Val(start),
        });
        let n = self.env.len();
        let (h, x) = self.loop_start(n);
        let k = match self.env[n - 1].b {
            Binding::Val(v) => v,
            _ => unreachable!(),
        };
        self.f.values[k].name = Some(if simple {
            pat_name(&fl.pat).unwrap_or_else(|| "k".into())
        } else {
            "k".into()
        });
        let c = self.cmp(CmpOp::Lt, k, end);
        let body = self.new_block();
        let exit_args = self.args(n);
        self.finish(Term::Branch(
            c,
            Target {
                block: body,
                args: vec![],
            },
            Target {
                block: x,
                args: exit_args,
            },
        ));
        let latch = self.new_block();
        self.make_params(latch, n);
        self.cur = body;
        let nb = self.env.len();
        let item = if simple {
            Item::Int(k)
        } else {
            self.iter_item(&it, k)
        };
        self.bind_item(&fl.pat, item)?;
        self.loops.push(LoopCtx {
            label: Self::label(&fl.label),
            cont: latch,
            brk: x,
            nvars: n,
            value: None,
        });
        self.block(&fl.body)?;
        self.loops.pop();
        self.env.truncate(nb);
        if !self.is_dead(self.cur) {
            self.jump(latch, n, None);
        }
        // latch: k += 1
        self.cur = latch;
        self.bind_params(latch, n);
        let kk = match self.env[n - 1].b {
            Binding::Val(v) => v,
            _ => unreachable!(),
        };
        let one = self.konst(self.ty(kk), quote!(1), ConstVal::I(1));
        let k1 = self.int_op(IntOp::Add, kk, one);
        self.env[n - 1].b = Binding::Val(k1);
        self.jump(h, n, None);
        let used = self.exit_used(x);
        self.loop_end(x, n, used);
        self.env.pop();
        Ok(Ev::Unit)
    }

    fn lower_match(&mut self, m: &syn::ExprMatch, hint: Option<Ty>) -> Result<Ev> {
        if let Expr::Tuple(t) = strip(&m.expr) {
            return err(
                t,
                "`match` on a tuple is not supported (only on an integer or a `bool`): match \
                 on one value and nest a `match` or an `if` in its arms, or use guards \
                 (`0 if flag => …`)",
            );
        }
        let s = self.scalar(&m.expr, None)?;
        let st = self.ty(s);
        if st == Ty::F64 {
            return err(
                &m.expr,
                "`match` on `f64` is not supported: use `if`/`else`",
            );
        }
        let n = self.env.len();
        let saved = self.snapshot(n);
        let mut incoming = vec![];
        for (ai, arm) in m.arms.iter().enumerate() {
            let last = ai + 1 == m.arms.len();
            self.restore(&saved);
            let nb = self.env.len();
            let test = self.pattern_test(&arm.pat, s)?;
            let test = match (&arm.guard, test) {
                (None, t) => t,
                (Some((_, g)), t) => {
                    // bind, then evaluate the guard only when the pattern matched
                    let g = self.cond_after(t, g)?;
                    Some(g)
                }
            };
            let body_blk = self.new_block();
            let next = self.new_block();
            match test {
                None => {
                    self.finish(Term::Jump(Target {
                        block: body_blk,
                        args: vec![],
                    }));
                    self.dead.insert(next);
                }
                Some(t) => {
                    self.finish(Term::Branch(
                        t,
                        Target {
                            block: body_blk,
                            args: vec![],
                        },
                        Target {
                            block: next,
                            args: vec![],
                        },
                    ));
                }
            }
            self.cur = body_blk;
            let v = self.expr(&arm.body, hint)?;
            if !self.is_dead(self.cur) {
                incoming.push((self.cur, self.args(n), v));
            }
            self.env.truncate(nb);
            self.cur = next;
            if last && !self.is_dead(next) {
                self.set_term(Term::Unreachable);
                self.dead.insert(next);
            }
        }
        self.merge(n, incoming, &saved, m)
    }

    /// `t && g`, evaluating `g` only when `t` holds (`None`: always).
    fn cond_after(&mut self, t: Option<Val>, g: &Expr) -> Result<Val> {
        match t {
            None => self.cond(g),
            Some(t) => {
                let n = self.env.len();
                let saved = self.snapshot(n);
                let (gb, merge) = (self.new_block(), self.new_block());
                self.make_params(merge, n);
                let res = self.f.new_val(Ty::Bool, None);
                self.f.blocks[merge].params.push(res);
                let f = self.konst(Ty::Bool, quote!(false), ConstVal::B(false));
                let mut a = self.args(n);
                a.push(f);
                self.finish(Term::Branch(
                    t,
                    Target {
                        block: gb,
                        args: vec![],
                    },
                    Target {
                        block: merge,
                        args: a,
                    },
                ));
                self.cur = gb;
                let g = self.cond(g)?;
                self.jump(merge, n, Some(g));
                self.restore(&saved);
                self.cur = merge;
                self.bind_params(merge, n);
                Ok(res)
            }
        }
    }

    /// Whether `id`, written as a pattern, is a constant rather than a new binding: a `const`
    /// of the body, or an upper-case name (`K`, `MAX_N`) that no local variable has.
    fn names_a_constant(&self, id: &syn::Ident) -> bool {
        let name = id.to_string();
        self.const_names.iter().any(|(k, _, _)| k == id)
            || (name.starts_with(|c: char| c.is_ascii_uppercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && !self.env.iter().any(|v| v.name == name))
    }

    /// The condition under which `pat` matches `s` (`None`: always); binds names.
    fn pattern_test(&mut self, pat: &Pat, s: Val) -> Result<Option<Val>> {
        let st = self.ty(s);
        match pat {
            Pat::Wild(_) => Ok(None),
            // A name that is a constant compares with it, as in Rust (`K => …` with
            // `const K: usize = 2;`): a constant of the body, or an upper-case name no local
            // binds (a module's constant, read as `path` reads one). Binding it instead made
            // the arm match every value.
            Pat::Ident(pi)
                if pi.subpat.is_none()
                    && pi.by_ref.is_none()
                    && pi.mutability.is_none()
                    && self.names_a_constant(&pi.ident) =>
            {
                let id = &pi.ident;
                let v = self.scalar(&syn::parse_quote!(#id), Some(st))?;
                Ok(Some(self.cmp(CmpOp::Eq, s, v)))
            }
            Pat::Ident(pi) if pi.subpat.is_none() => {
                self.env.push(Var {
                    name: pi.ident.to_string(),
                    b: Binding::Val(s),
                });
                Ok(None)
            }
            Pat::Lit(l) => {
                let v = self.lit(&l.lit, Some(st))?;
                Ok(Some(self.cmp(CmpOp::Eq, s, v)))
            }
            Pat::Range(r) => {
                let mut t = None;
                if let Some(lo) = &r.start {
                    let lo = self.scalar(lo, Some(st))?;
                    t = Some(self.cmp(CmpOp::Ge, s, lo));
                }
                if let Some(hi) = &r.end {
                    let hi = self.scalar(hi, Some(st))?;
                    let op = match r.limits {
                        syn::RangeLimits::Closed(_) => CmpOp::Le,
                        syn::RangeLimits::HalfOpen(_) => CmpOp::Lt,
                    };
                    let c = self.cmp(op, s, hi);
                    t = Some(match t {
                        Some(a) => self.int_op(IntOp::BitAnd, a, c),
                        None => c,
                    });
                }
                Ok(t)
            }
            Pat::Or(o) => {
                let mut acc: Option<Val> = None;
                for c in &o.cases {
                    match self.pattern_test(c, s)? {
                        None => return Ok(None),
                        Some(t) => {
                            acc = Some(match acc {
                                Some(a) => self.int_op(IntOp::BitOr, a, t),
                                None => t,
                            })
                        }
                    }
                }
                Ok(acc)
            }
            Pat::Paren(p) => self.pattern_test(&p.pat, s),
            p => err(
                p,
                "unsupported pattern: match integers or bools against literals, ranges, `|`, `_`",
            ),
        }
    }
}

/// The right side of an assignment: an expression still to lower (with the place's type as
/// its hint), or a part of a destructured right side already lowered (`(a, b) = (b, a + b)`),
/// with that right side for error spans.
#[derive(Clone, Copy)]
enum Src<'e> {
    Expr(&'e Expr),
    Val(Val, &'e Expr),
}

impl<'e> Src<'e> {
    fn scalar(self, l: &mut Lower<'_>, hint: Option<Ty>) -> Result<Val> {
        match self {
            Src::Expr(e) => l.scalar(e, hint),
            Src::Val(v, _) => Ok(v),
        }
    }

    fn at(self) -> Expr {
        self.expr().clone()
    }

    fn expr(self) -> &'e Expr {
        match self {
            Src::Expr(e) | Src::Val(_, e) => e,
        }
    }
}

fn pat_name(p: &Pat) -> Option<String> {
    match p {
        Pat::Ident(pi) => Some(pi.ident.to_string()),
        _ => None,
    }
}

/// `assert!`-like macros: `(Some(true))` for `assert_eq!`, `Some(false)` for `assert_ne!`,
/// `None` for `assert!`; and whether it is a `debug_` form.
/// Whether evaluating `e` can neither panic nor write a variable, as far as its syntax shows:
/// literals, names, fields, comparisons and arithmetic other than `/` and `%` (an integer
/// division by zero panics), negation, and a list of math and length methods (not `clamp`,
/// `windows(0)`, `fill`, …) on such operands. (Integer `+ − ×` can still overflow where a
/// build has overflow checks without debug assertions: not seen as a panic.)
fn cannot_panic_or_write(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Paren(p) => cannot_panic_or_write(&p.expr),
        Expr::Group(g) => cannot_panic_or_write(&g.expr),
        Expr::Field(f) => cannot_panic_or_write(&f.base),
        Expr::Unary(u) => cannot_panic_or_write(&u.expr),
        Expr::Binary(b) => {
            use BinOp::*;
            matches!(
                b.op,
                Add(_)
                    | Sub(_)
                    | Mul(_)
                    | And(_)
                    | Or(_)
                    | BitXor(_)
                    | BitAnd(_)
                    | BitOr(_)
                    | Eq(_)
                    | Lt(_)
                    | Le(_)
                    | Ne(_)
                    | Ge(_)
                    | Gt(_)
            ) && cannot_panic_or_write(&b.left)
                && cannot_panic_or_write(&b.right)
        }
        Expr::MethodCall(m) => {
            const QUIET: &[&str] = &[
                "abs",
                "sqrt",
                "cbrt",
                "exp",
                "exp2",
                "exp_m1",
                "ln",
                "ln_1p",
                "log2",
                "log10",
                "sin",
                "cos",
                "tan",
                "asin",
                "acos",
                "atan",
                "sinh",
                "cosh",
                "tanh",
                "asinh",
                "acosh",
                "atanh",
                "powi",
                "powf",
                "max",
                "min",
                "hypot",
                "atan2",
                "signum",
                "floor",
                "ceil",
                "round",
                "trunc",
                "erf",
                "lgamma",
                "len",
                "is_empty",
                "is_nan",
                "is_finite",
                "is_infinite",
                "is_sign_positive",
                "is_sign_negative",
            ];
            QUIET.contains(&m.method.to_string().as_str())
                && cannot_panic_or_write(&m.receiver)
                && m.args.iter().all(cannot_panic_or_write)
        }
        _ => false,
    }
}

/// `cfg!(debug_assertions)`.
fn is_cfg_debug_assertions(mac: &syn::Macro) -> bool {
    mac.path.is_ident("cfg") && mac.tokens.to_string() == "debug_assertions"
}

fn assert_kind(mac: &syn::Macro) -> Option<(Option<bool>, bool)> {
    let name = mac.path.get_ident()?.to_string();
    let (debug, base) = match name.strip_prefix("debug_") {
        Some(b) => (true, b.to_string()),
        None => (false, name),
    };
    let eq = match base.as_str() {
        "assert" => None,
        "assert_eq" => Some(true),
        "assert_ne" => Some(false),
        _ => return None,
    };
    Some((eq, debug))
}

/// Whether `e` is an iterator chain a `for` loop of this macro takes (`x.iter()…`, `(a..b)…`).
fn is_iterator(e: &Expr) -> bool {
    match strip(e) {
        Expr::Range(_) => true,
        Expr::MethodCall(m) => matches!(
            m.method.to_string().as_str(),
            "iter"
                | "iter_mut"
                | "into_iter"
                | "copied"
                | "cloned"
                | "enumerate"
                | "zip"
                | "rev"
                | "step_by"
                | "skip"
                | "take"
                | "windows"
                | "chunks"
                | "chunks_exact"
                | "map"
        ),
        _ => false,
    }
}

/// `iter.sum()`, `iter.product()` and `iter.fold(init, |acc, v| body)`, where `iter` is any
/// iterator a `for` loop takes, optionally followed by `.map(|pat| body)`, as the loop a user
/// would write instead:
///
/// ```text
/// x.iter().zip(y).map(|(a, b)| a * b).sum()
///   → { let mut acc = 0.0; for (a, b) in x.iter().zip(y) { acc += a * b; } acc }
/// ```
///
/// (so a reduction that feeds the result is a fused loop, like the written-out one). The
/// closures' bodies are inlined: a `return` inside one would return from the function instead
/// of the closure, so it is refused.
fn reduction_loop(m: &syn::ExprMethodCall, name: &str, hint: Option<Ty>) -> Result<Expr> {
    let span = m.method.span();
    // the accumulator's type: `::<f64>`, `::<usize>`, …, or the expected type
    let int = match &m.turbofish {
        Some(t) => match (t.args.len(), t.args.first()) {
            (1, Some(syn::GenericArgument::Type(ty))) => {
                let ty = ty.to_token_stream().to_string();
                match ty.as_str() {
                    "f64" => false,
                    "usize" | "u64" | "u32" | "i64" | "i32" => true,
                    _ => return err(t, format!("`{name}` of `{ty}` values is not supported")),
                }
            }
            _ => return err(t, "expected one type: `::<f64>`"),
        },
        None => matches!(hint, Some(Ty::Int(_))),
    };
    let closure = |e: &Expr, params: usize| -> Result<syn::ExprClosure> {
        if let Expr::Path(p) = strip(e) {
            // a function named (`f64::max`, a #[differentiable] function, a local closure):
            // called with the items
            let args: Vec<syn::Ident> = (0..params)
                .map(|k| syn::Ident::new(&format!("__adjoint_arg{k}"), p.span()))
                .collect();
            return syn::parse2(quote_spanned!(p.span()=> |#(#args),*| #p(#(#args),*)));
        }
        let Expr::Closure(c) = strip(e) else {
            return err(
                e,
                "expected a closure (`|v| v * v`) or a function's name (`f64::max`) here",
            );
        };
        if c.inputs.len() != params {
            return err(
                &c.inputs,
                format!("this closure takes {params} parameter(s)"),
            );
        }
        let mut finder = ReturnFinder(None);
        syn::visit::Visit::visit_expr(&mut finder, &c.body);
        if let Some(r) = finder.0 {
            return err(
                r,
                "`return` inside a closure is not supported: the closure is inlined into a loop",
            );
        }
        Ok(c.clone())
    };
    // a closure parameter as a `for`/`let` pattern (without its type annotation)
    let pat = |p: &Pat| -> Pat {
        match p {
            Pat::Type(t) => (*t.pat).clone(),
            p => p.clone(),
        }
    };
    let (iter, map) = match strip(&m.receiver) {
        Expr::MethodCall(r) if r.method == "map" && r.args.len() == 1 => {
            (&*r.receiver, Some(closure(&r.args[0], 1)?))
        }
        _ => (&*m.receiver, None),
    };
    if !is_iterator(iter) {
        return err(
            &m.receiver,
            format!(
                "`.{name}()` is supported on the iterators a `for` loop takes (`x.iter()`, \
                 `(a..b)`, `.enumerate()`, `.zip()`, `.rev()`, `.step_by()`, `.skip()`, \
                 `.take()`, `.windows()`, `.chunks()`), then an optional \
                 `.map(|v| …)`"
            ),
        );
    }
    let acc = syn::Ident::new("__adjoint_acc", span);
    let v = syn::Ident::new("__adjoint_item", span);
    // the loop's pattern and the per-item value
    let (item_pat, item): (TokenStream, TokenStream) = match &map {
        Some(c) => {
            let (p, body) = (pat(&c.inputs[0]), &c.body);
            (quote!(#p), quote!((#body)))
        }
        None => (quote!(#v), quote!(#v)),
    };
    let tokens = match name {
        "fold" => {
            let f = closure(&m.args[1], 2)?;
            let init = &m.args[0];
            if matches!(strip(init), Expr::Tuple(_)) {
                return Err(syn::Error::new_spanned(
                    init,
                    "a `fold` with a tuple accumulator is not supported: write the loop \
                     (`let (mut s, mut p) = (0.0, 1.0); for v in x.iter() { (s, p) = (s + v, p * v); }`)",
                ));
            }
            if map.is_some() {
                // The fold's closure is bound before the loop and inlined at its call, so that
                // it sees the variables of the enclosing scope, not the map closure's
                // parameters that the loop's pattern binds (`.map(|a| a.sin()).fold(0.0, |s,
                // t| s + a * t)` reads the outer `a`).
                let fold = syn::Ident::new("__adjoint_fold", span);
                return syn::parse2(quote_spanned! {span=>
                    {
                        let #fold = #f;
                        let mut #acc = #init;
                        for #item_pat in #iter {
                            #acc = #fold(#acc, #item);
                        }
                        #acc
                    }
                });
            }
            let (pa, pv, body) = (pat(&f.inputs[0]), pat(&f.inputs[1]), &f.body);
            let step = match &map {
                Some(_) => quote!(let #pv = #item;),
                None => quote!(),
            };
            let loop_pat = if map.is_some() {
                item_pat.clone()
            } else {
                quote!(#pv)
            };
            quote_spanned! {span=>
                {
                    let mut #acc = #init;
                    for #loop_pat in #iter {
                        #step
                        let #pa = #acc;
                        #acc = #body;
                    }
                    #acc
                }
            }
        }
        _ => {
            let (zero, op) = match (name, int) {
                // `f64`'s `Sum` starts from −0.0 (an empty or all-−0 sum is −0)
                ("sum", false) => (quote!(-0.0), quote!(+=)),
                ("sum", true) => (quote!(0), quote!(+=)),
                (_, false) => (quote!(1.0), quote!(*=)),
                (_, true) => (quote!(1), quote!(*=)),
            };
            quote_spanned! {span=>
                {
                    let mut #acc = #zero;
                    for #item_pat in #iter {
                        #acc #op #item;
                    }
                    #acc
                }
            }
        }
    };
    syn::parse2(tokens)
}

/// A closure the macro can inline where it is called: not `move` (a moved copy of an array
/// would not see later changes the inlined body sees), not `async`, no `return`.
fn check_closure(c: &syn::ExprClosure) -> Result<()> {
    if let Some(m) = &c.capture {
        return err(m, "`move` closures are not supported: leave out `move`");
    }
    if c.asyncness.is_some() || c.constness.is_some() || c.lifetimes.is_some() {
        return err(c, "only plain closures `|x: f64| …` are supported");
    }
    let mut finder = ReturnFinder(None);
    syn::visit::Visit::visit_expr(&mut finder, &c.body);
    if let Some(r) = finder.0 {
        return err(
            r,
            "`return` inside a closure is not supported: the closure is inlined where it is \
             called",
        );
    }
    Ok(())
}

/// A closure parameter as a `let` pattern: without its type, and `&v` as `v`.
fn closure_param(p: &Pat) -> &Pat {
    match p {
        Pat::Type(t) => closure_param(&t.pat),
        Pat::Reference(r) => closure_param(&r.pat),
        p => p,
    }
}

/// The first `return` in an expression, outside nested closures.
struct ReturnFinder<'a>(Option<&'a syn::ExprReturn>);

impl<'ast> syn::visit::Visit<'ast> for ReturnFinder<'ast> {
    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        self.0.get_or_insert(r);
    }
    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

#[allow(dead_code)]
fn span_of(e: &impl Spanned) -> Span {
    e.span()
}
