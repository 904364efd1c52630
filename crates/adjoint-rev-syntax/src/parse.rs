//! The parser: `reversible! { fn … { … } … }` to the IR, with every static reversibility error
//! reported as a `syn::Error` at the offending tokens.

use crate::ir::{Func, Keep, Kind, Operand, Rhs, Stmt};
use proc_macro2::Span;
use quote::{quote, ToTokens};
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{
    braced, parenthesized, BinOp, Error, Expr, FnArg, Ident, Pat, Result, Token, Type, UnOp,
};

/// Every function in one macro invocation, and the errors of those that did not parse (a
/// function in error is skipped, so that the others' errors are reported too).
pub struct Funcs(pub Vec<Func>, pub Option<Error>);

impl Parse for Funcs {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut out = Vec::new();
        let mut errors = None;
        while !input.is_empty() {
            let fork = input.fork();
            match parse_func(&fork) {
                Ok(f) => {
                    input.advance_to(&fork);
                    out.push(f);
                }
                Err(e) => {
                    push_error(&mut errors, e);
                    // Skip to the end of this function's body.
                    while !input.is_empty() {
                        let brace = input.peek(syn::token::Brace);
                        let _: proc_macro2::TokenTree = input.parse()?;
                        if brace {
                            break;
                        }
                    }
                }
            }
        }
        Ok(Funcs(out, errors))
    }
}

fn parse_func(input: ParseStream) -> Result<Func> {
    let attrs = input.call(syn::Attribute::parse_outer)?;
    let vis: syn::Visibility = input.parse()?;
    if !input.peek(Token![fn]) {
        return Err(
            input.error("expected `fn`: `reversible!` holds reversible function definitions")
        );
    }
    let sig: syn::Signature = input.parse()?;
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        return Err(Error::new_spanned(
            ty,
            "a reversible function returns nothing: it changes its `&mut` arguments in place \
             (the macro makes it return `Result<(), InvertibilityError>`)",
        ));
    }
    if let Some(t) = &sig.asyncness {
        return Err(Error::new_spanned(
            t,
            "reversible functions cannot be `async`",
        ));
    }
    let mut params = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(r) => {
                return Err(Error::new_spanned(
                    r,
                    "reversible functions take no `self`: pass the value as a `&mut` argument",
                ))
            }
            FnArg::Typed(pt) => {
                let name = match &*pt.pat {
                    Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
                    other => return Err(Error::new_spanned(other, "expected a parameter name")),
                };
                match &*pt.ty {
                    Type::Reference(r) if r.mutability.is_some() => params.push((name, (*r.elem).clone())),
                    other => {
                        return Err(Error::new_spanned(
                            other,
                            format!(
                                "parameters of a reversible function are changed in place: write `{name}: &mut {}`",
                                other.to_token_stream()
                            ),
                        ))
                    }
                }
            }
        }
    }
    let content;
    braced!(content in input);
    let mut p = Parser {
        vars: params.iter().map(|(n, _)| n.to_string()).collect(),
        loop_vars: Vec::new(),
        read_only: params
            .iter()
            .filter(|(_, t)| matches!(t, Type::Reference(r) if r.mutability.is_none()))
            .map(|(n, _)| n.to_string())
            .collect(),
    };
    let body = p.stmts(&content)?;
    Ok(Func {
        attrs,
        vis,
        sig,
        params,
        body,
    })
}

/// An expression, with each invisible group (a `$e:expr` fragment of a `macro_rules!` macro
/// that expands to `reversible!`) made a parenthesis, which the parser sees through and which
/// keeps the fragment's precedence.
fn expr(input: ParseStream) -> Result<Expr> {
    input.parse().map(ungroup)
}

fn ungroup(mut e: Expr) -> Expr {
    struct Ungroup;
    impl syn::visit_mut::VisitMut for Ungroup {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            syn::visit_mut::visit_expr_mut(self, e);
            if let Expr::Group(g) = e {
                let inner = std::mem::replace(&mut *g.expr, Expr::Verbatim(Default::default()));
                *e = Expr::Paren(syn::ExprParen {
                    attrs: std::mem::take(&mut g.attrs),
                    paren_token: syn::token::Paren(g.group_token.span),
                    expr: Box::new(inner),
                });
            }
        }
    }
    syn::visit_mut::VisitMut::visit_expr_mut(&mut Ungroup, &mut e);
    e
}

/// Add `e` to the errors reported together.
pub fn push_error(errors: &mut Option<Error>, e: Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// Skip one statement after an error: up to and including its `;`, or its last block (a block
/// followed by `else` goes on to the `else` branch).
fn skip_stmt(input: ParseStream) -> Result<()> {
    while !input.is_empty() {
        if input.peek(Token![;]) {
            let _: Token![;] = input.parse()?;
            return Ok(());
        }
        let brace = input.peek(syn::token::Brace);
        let _: proc_macro2::TokenTree = input.parse()?;
        if brace && !input.peek(Token![else]) {
            return Ok(());
        }
    }
    Ok(())
}

/// A parsed condition.
struct Cond {
    pre: Expr,
    post: Expr,
    /// Whether a post-condition (or `~`) was written.
    explicit: bool,
    /// The `~` standing for the post-condition, if written so.
    tilde: Option<Span>,
    /// The condition as written.
    text: String,
}

/// Names seen so far (parameters, ancillas, loop variables): an expression that mentions none of
/// them is a constant.
struct Parser {
    vars: Vec<String>,
    /// The variables of the `for` loops around the statement being read: read-only, so an
    /// operand or argument that is one is passed as a copy (a constant of the iteration).
    loop_vars: Vec<String>,
    /// Parameters that hold a shared reference (`x: &mut &[f64]`): data that is read, never
    /// written (nor given gradients).
    read_only: Vec<String>,
}

const UNARY: &[(&str, &str)] = &[
    ("recip", "Recip"),
    ("sqrt", "Sqrt"),
    ("cbrt", "Cbrt"),
    ("exp", "Exp"),
    ("exp2", "Exp2"),
    ("exp_m1", "ExpM1"),
    ("expm1", "ExpM1"),
    ("ln", "Ln"),
    ("log", "Ln"),
    ("ln_1p", "Ln1p"),
    ("log1p", "Ln1p"),
    ("log2", "Log2"),
    ("log10", "Log10"),
    ("sin", "Sin"),
    ("cos", "Cos"),
    ("tan", "Tan"),
    ("asin", "Asin"),
    ("acos", "Acos"),
    ("atan", "Atan"),
    ("sinh", "Sinh"),
    ("cosh", "Cosh"),
    ("tanh", "Tanh"),
    ("asinh", "Asinh"),
    ("acosh", "Acosh"),
    ("atanh", "Atanh"),
    ("abs", "Abs"),
    ("erf", "Erf"),
    ("lgamma", "Lgamma"),
];

const BINARY: &[(&str, &str)] = &[
    ("powf", "Powf"),
    ("pow", "Powf"),
    ("atan2", "Atan2"),
    ("hypot", "Hypot"),
    ("min", "Min"),
    ("max", "Max"),
];

/// The instruction names `reversible!` knows, for error messages.
fn known_instructions() -> String {
    let mut v: Vec<&str> = UNARY.iter().chain(BINARY).map(|(n, _)| *n).collect();
    v.extend(["identity", "powi", "digamma"]);
    v.join(", ")
}

impl Parser {
    /// Statements until the end of `input`. A statement in error is skipped (up to its `;` or
    /// its block) and parsing goes on, so that every error of a function is reported at once.
    fn stmts(&mut self, input: ParseStream) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        let mut errors: Option<Error> = None;
        while !input.is_empty() {
            let fork = input.fork();
            match self.stmt(&fork) {
                Ok(s) => {
                    input.advance_to(&fork);
                    out.push(s);
                }
                Err(e) => {
                    push_error(&mut errors, e);
                    skip_stmt(input)?;
                }
            }
        }
        match errors {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn block(&mut self, input: ParseStream) -> Result<Vec<Stmt>> {
        let content;
        braced!(content in input);
        self.stmts(&content)
    }

    fn stmt(&mut self, input: ParseStream) -> Result<Stmt> {
        let span = input.span();
        if input.peek(Token![;]) {
            let _: Token![;] = input.parse()?;
            return Ok(Stmt {
                kind: Kind::Block(vec![]),
                text: String::new(),
                span,
                inverted: false,
            });
        }
        if input.peek(Token![#]) {
            // (a `#[cfg(..)]` on a call was dropped and the call ran; other attributes gave
            // errors about the statement after them; a hunter)
            let attrs = input.call(syn::Attribute::parse_outer)?;
            let msg = if attrs[0].path().is_ident("doc") {
                "a doc comment on a statement: write `//` comments inside reversible code"
            } else {
                "attributes on statements are not supported in reversible code (a `#[cfg(..)]` \
                 cannot remove a statement: its inverse would still run); move the statement \
                 into a reversible function of its own and put the attribute on that function"
            };
            return Err(Error::new_spanned(&attrs[0], msg));
        }
        if input.peek(syn::Lifetime) {
            let label: syn::Lifetime = input.parse()?;
            return Err(Error::new_spanned(
                label,
                "loop labels are not supported: reversible loops have no `break` or `continue`",
            ));
        }
        if input.peek(Token![@]) {
            return self.at_stmt(input);
        }
        if input.peek(Token![~]) {
            let _: Token![~] = input.parse()?;
            if input.peek(Token![@]) {
                let _: Token![@] = input.parse()?;
                let kw: Ident = input.parse()?;
                if kw != "routine" {
                    return Err(Error::new_spanned(kw, "expected `~@routine`"));
                }
                let name = if input.peek(Ident) {
                    Some(input.parse::<Ident>()?.to_string())
                } else {
                    None
                };
                let _: Token![;] = input.parse()?;
                let text = match &name {
                    Some(n) => format!("~@routine {n}"),
                    None => "~@routine".into(),
                };
                return Ok(Stmt {
                    kind: Kind::Unroutine(name),
                    text,
                    span,
                    inverted: false,
                });
            }
            if input.peek(syn::token::Brace) {
                let body = self.block(input)?;
                return Ok(Stmt {
                    kind: Kind::Inverse(body),
                    text: "~{ … }".into(),
                    span,
                    inverted: false,
                });
            }
            let e = expr(input)?;
            let _: Token![;] = input.parse()?;
            let text = format!("~{}", pretty(&e));
            return match self.expr_stmt(e)? {
                Kind::Call { func, args, .. } => Ok(Stmt {
                    kind: Kind::Call {
                        func,
                        inverse: true,
                        args,
                        keep: Keep::No,
                    },
                    text,
                    span,
                    inverted: false,
                }),
                Kind::Instr { name, args, .. } => Ok(Stmt {
                    kind: Kind::Instr {
                        name,
                        inverse: true,
                        args,
                    },
                    text,
                    span,
                    inverted: false,
                }),
                _ => Err(Error::new(
                    span,
                    "`~` inverts a call `~f(args);`, a block `~{ … }` or a routine `~@routine;`",
                )),
            };
        }
        if input.peek(Token![let]) {
            let _: Token![let] = input.parse()?;
            let (name, ty, init, text) = self.binding(input, "let")?;
            let copy = self.copied_place(&init);
            return Ok(Stmt {
                kind: Kind::Let {
                    name,
                    ty,
                    init,
                    copy,
                },
                text,
                span,
                inverted: false,
            });
        }
        if input.peek(Ident)
            && input
                .fork()
                .parse::<Ident>()
                .map(|i| i == "unlet")
                .unwrap_or(false)
        {
            let _: Ident = input.parse()?;
            let (name, ty, init, text) = self.binding(input, "unlet")?;
            let copy = self.copied_place(&init);
            return Ok(Stmt {
                kind: Kind::Unlet {
                    name,
                    ty,
                    init,
                    copy,
                },
                text,
                span,
                inverted: false,
            });
        }
        if input.peek(Token![if]) {
            return self.if_stmt(input);
        }
        if input.peek(Token![while]) {
            let _: Token![while] = input.parse()?;
            let cond = self.cond(input)?;
            if let Some(t) = cond.tilde {
                return Err(Error::new(
                    t,
                    format!(
                        "a `while` loop needs an explicit post-condition: `~` would repeat the pre-condition \
                         `{pre}`, which is true before every iteration and false after the last, so the loop \
                         could never be run backwards. Write `while ({pre}, post) {{ … }}` with a `post` that is \
                         false on entry and true after every iteration (for example a counter `n`, passed in \
                         at 0 and `INC(n);` in the body: `while ({pre}, n > 0)`)",
                        pre = pretty(&cond.pre)
                    ),
                ));
            }
            if !cond.explicit {
                return Err(Error::new(
                    span,
                    "a reversible `while` needs a post-condition: `while (pre, post) { … }`, where `post` is \
                     false on entry and true after every iteration",
                ));
            }
            let body = self.block(input)?;
            let text = format!("while {}", cond.text);
            let (pre_text, post_text) = (pretty(&cond.pre), pretty(&cond.post));
            return Ok(Stmt {
                kind: Kind::While {
                    pre: cond.pre,
                    post: cond.post,
                    pre_text,
                    post_text,
                    body,
                },
                text,
                span,
                inverted: false,
            });
        }
        if input.peek(Token![for]) {
            return self.for_stmt(input);
        }
        if input.peek(syn::token::Brace) {
            let body = self.block(input)?;
            return Ok(Stmt {
                kind: Kind::Block(body),
                text: "{ … }".into(),
                span,
                inverted: false,
            });
        }
        let e = expr(input)?;
        let _: Token![;] = input
            .parse()
            .map_err(|_| Error::new(e.span(), "expected `;` after this statement"))?;
        let text = pretty(&e);
        let kind = self.expr_stmt(e)?;
        Ok(Stmt {
            kind,
            text,
            span,
            inverted: false,
        })
    }

    fn at_stmt(&mut self, input: ParseStream) -> Result<Stmt> {
        let span = input.span();
        let _: Token![@] = input.parse()?;
        let kw: Ident = input.parse()?;
        match kw.to_string().as_str() {
            "routine" => {
                let name = if input.peek(Ident) {
                    Some(input.parse::<Ident>()?.to_string())
                } else {
                    None
                };
                let body = self.block(input)?;
                let text = match &name {
                    Some(n) => format!("@routine {n} {{ … }}"),
                    None => "@routine { … }".into(),
                };
                Ok(Stmt {
                    kind: Kind::Routine(name, body),
                    text,
                    span,
                    inverted: false,
                })
            }
            "safe" => {
                let e = expr(input)?;
                let _: Token![;] = input.parse()?;
                let text = format!("@safe {}", pretty(&e));
                Ok(Stmt {
                    kind: Kind::Safe(e.to_token_stream()),
                    text,
                    span,
                    inverted: false,
                })
            }
            "invcheckoff" => {
                let inner = self.stmt(input)?;
                // (`~@routine` is replaced by the inverse of its routine's body, with the
                // routine's checks: alone under `@invcheckoff` it was not found, and the error
                // said that no routine came before it; a hunter)
                if let Kind::Unroutine(name) = &inner.kind {
                    let (undo, routine) = match name {
                        Some(n) => (format!("~@routine {n}"), format!("@routine {n}")),
                        None => ("~@routine".to_string(), "@routine".to_string()),
                    };
                    return Err(Error::new(
                        kw.span(),
                        format!(
                            "`@invcheckoff {undo}`: an uncomputation takes its checks from its \
                             routine. Write `@invcheckoff {routine} {{ … }}`, which runs the \
                             routine and its uncomputation (`{undo};`) without checks"
                        ),
                    ));
                }
                let text = format!("@invcheckoff {}", inner.text);
                Ok(Stmt {
                    kind: Kind::NoCheck(vec![inner]),
                    text,
                    span,
                    inverted: false,
                })
            }
            _ => Err(Error::new_spanned(
                kw,
                "unknown `@` statement: expected `@routine`, `@safe` or `@invcheckoff`",
            )),
        }
    }

    fn binding(
        &mut self,
        input: ParseStream,
        kw: &str,
    ) -> Result<(Ident, Option<Type>, Expr, String)> {
        if input.peek(Token![mut]) {
            let _: Token![mut] = input.parse()?;
        }
        let name: Ident = input.parse()?;
        let ty = if input.peek(Token![:]) {
            let _: Token![:] = input.parse()?;
            Some(input.parse::<Type>()?)
        } else {
            None
        };
        let _: Token![=] = input.parse().map_err(|_| {
            Error::new(
                name.span(),
                format!("`{kw} {name}` needs its value: `{kw} {name} = <value>;`"),
            )
        })?;
        let init = expr(input)?;
        let _: Token![;] = input.parse()?;
        let text = match &ty {
            Some(t) => format!("{kw} {name}: {} = {}", pretty_type(t), pretty(&init)),
            None => format!("{kw} {name} = {}", pretty(&init)),
        };
        if !self.vars.contains(&name.to_string()) {
            self.vars.push(name.to_string());
        }
        Ok((name, ty, init, text))
    }

    /// `(pre, post)`, `(pre, ~)` or a bare `pre`.
    fn cond(&mut self, input: ParseStream) -> Result<Cond> {
        if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            let pre = expr(&content)?;
            if content.is_empty() {
                // A parenthesised plain condition: `if (x > 0) { … }`.
                let text = format!("({})", pretty(&pre));
                return Ok(Cond {
                    post: pre.clone(),
                    pre,
                    explicit: false,
                    tilde: None,
                    text,
                });
            }
            let _: Token![,] = content.parse()?;
            let (post, tilde) = if content.peek(Token![~]) {
                let t: Token![~] = content.parse()?;
                (pre.clone(), Some(t.span))
            } else {
                (expr(&content)?, None)
            };
            if !content.is_empty() {
                return Err(content.error("a reversible condition is `(pre, post)` or `(pre, ~)`"));
            }
            let text = match tilde {
                Some(_) => format!("({}, ~)", pretty(&pre)),
                None => format!("({}, {})", pretty(&pre), pretty(&post)),
            };
            return Ok(Cond {
                pre,
                post,
                explicit: true,
                tilde,
                text,
            });
        }
        let pre = ungroup(Expr::parse_without_eager_brace(input)?);
        let text = pretty(&pre);
        Ok(Cond {
            post: pre.clone(),
            pre,
            explicit: false,
            tilde: None,
            text,
        })
    }

    fn if_stmt(&mut self, input: ParseStream) -> Result<Stmt> {
        let span = input.span();
        let _: Token![if] = input.parse()?;
        let Cond {
            pre, post, text, ..
        } = self.cond(input)?;
        // Both branches are parsed, so that the errors of both are reported.
        let then = self.block(input);
        let els = if input.peek(Token![else]) {
            let _: Token![else] = input.parse()?;
            if input.peek(Token![if]) {
                self.if_stmt(input).map(|s| vec![s])
            } else {
                self.block(input)
            }
        } else {
            Ok(vec![])
        };
        let (then, els) = match (then, els) {
            (Ok(t), Ok(e)) => (t, e),
            (Err(mut a), Err(b)) => {
                a.combine(b);
                return Err(a);
            }
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let text = format!("if {text}");
        Ok(Stmt {
            kind: Kind::If {
                pre,
                post,
                then,
                els,
            },
            text,
            span,
            inverted: false,
        })
    }

    fn for_stmt(&mut self, input: ParseStream) -> Result<Stmt> {
        let span = input.span();
        let _: Token![for] = input.parse()?;
        let var: Ident = if input.peek(Ident) {
            input.parse()?
        } else if input.peek(Token![_]) {
            let u: Token![_] = input.parse()?;
            return Err(Error::new_spanned(
                u,
                "name the loop variable (`for i in 0..n`): the reversed loop counts with it",
            ));
        } else {
            // `for (i, v) in x.iter().enumerate()`: a pattern is an iterator's item
            let pat = syn::Pat::parse_single(input)?;
            return Err(Error::new_spanned(
                pat,
                "a reversible `for` loop binds one integer name over a range: \
                 `for i in 0..x.len()`, then `x[i]` (no iterators or patterns)",
            ));
        };
        let _: Token![in] = input.parse()?;
        let range = ungroup(Expr::parse_without_eager_brace(input)?);
        let text = format!("for {var} in {}", pretty(&range));
        let (mut rev, mut step) = (false, None);
        let mut e = &range;
        let (start, end, inclusive) = loop {
            match e {
                Expr::Paren(p) => e = &p.expr,
                // Peeled from the outside in: `.step_by(s).rev()` is supported,
                // `.rev().step_by(s)` (stepping down from the top) is not.
                Expr::MethodCall(m) if m.method == "rev" && m.args.is_empty() && step.is_none() => {
                    rev = !rev;
                    e = &m.receiver;
                }
                Expr::MethodCall(m)
                    if m.method == "step_by" && m.args.len() == 1 && step.is_none() =>
                {
                    step = Some(m.args[0].clone());
                    e = &m.receiver;
                }
                Expr::Range(r) => match (&r.start, &r.end) {
                    (Some(s), Some(t)) => {
                        break (
                            (**s).clone(),
                            (**t).clone(),
                            matches!(r.limits, syn::RangeLimits::Closed(_)),
                        )
                    }
                    _ => {
                        return Err(Error::new_spanned(
                            r,
                            "a reversible `for` loop needs both bounds: `a..b` or `a..=b`",
                        ))
                    }
                },
                other => {
                    return Err(Error::new_spanned(
                        other,
                        "a reversible `for` loop runs over a range: `a..b` or `a..=b`, optionally \
                         `(a..b).step_by(s)` and `.rev()`",
                    ))
                }
            }
        };
        self.vars.push(var.to_string());
        self.loop_vars.push(var.to_string());
        let body = self.block(input);
        self.loop_vars.pop();
        let body = body?;
        Ok(Stmt {
            kind: Kind::For {
                var,
                start,
                end,
                inclusive,
                step,
                rev,
                body,
            },
            text,
            span,
            inverted: false,
        })
    }

    /// An expression statement: an instruction or a call.
    fn expr_stmt(&mut self, e: Expr) -> Result<Kind> {
        // (a statement passed whole as a `macro_rules!` fragment arrives parenthesised)
        match strip_parens(&e).clone() {
            Expr::Binary(b) => {
                let target = *b.left;
                self.target(&target)?;
                let kind = match b.op {
                    BinOp::AddAssign(_) | BinOp::SubAssign(_) => {
                        let plus = matches!(b.op, BinOp::AddAssign(_));
                        let (rhs, flip) = self.rhs(*b.right)?;
                        Kind::Acc { target: target.clone(), plus: plus != flip, rhs }
                    }
                    BinOp::BitXorAssign(_) => {
                        let mut operands = Vec::new();
                        self.xor_operands(&b.right, &mut operands)?;
                        Kind::Xor { target: target.clone(), rhs: *b.right, operands }
                    }
                    BinOp::MulAssign(_) | BinOp::DivAssign(_) => {
                        let x = self.operand(&b.right)?;
                        Kind::Scale { target: target.clone(), mul: matches!(b.op, BinOp::MulAssign(_)), x }
                    }
                    op => {
                        return Err(Error::new_spanned(
                            op,
                            "not a reversible statement: instructions are `y += …`, `y -= …`, `y ^= …`, `y *= x` and `y /= x`",
                        ))
                    }
                };
                let ops: Vec<&Operand> = match &kind {
                    Kind::Acc { rhs, .. } => match rhs {
                        Rhs::Id(a) | Rhs::Op1(_, a) | Rhs::Powi(_, a) => vec![a],
                        Rhs::Arith(_, a, b) | Rhs::Op2(_, a, b) => vec![a, b],
                    },
                    Kind::Xor { operands, .. } => operands.iter().collect(),
                    Kind::Scale { x, .. } => vec![x],
                    _ => vec![],
                };
                // An index that reads what the instruction writes would differ when the inverse
                // runs (`i += v[i]`, `w[0] += w[w[0]]`).
                let written = place_path(&target).0;
                for e in std::iter::once(&target).chain(ops.iter().map(|o| o.expr())) {
                    if let Some(id) = index_reads(e).into_iter().find(|id| *id == written) {
                        return Err(Error::new_spanned(
                            &id,
                            format!(
                                "`{written}` is written by this instruction and read by an index in it, \
                                 so the index would differ when the inverse runs: copy the index into an \
                                 ancilla first (`let k = 0; k += {written};` … `k -= {written}; unlet k = 0;`)"
                            ),
                        ));
                    }
                }
                // Nor may the exponent of `powi` read it (`y += x.powi(y.value() as i32)`: the
                // inverse took another power, and `uncall` did not restore `y`; a hunter).
                // (`v[j]` beside a target `v[i]` may be the same element: refused too)
                if let Kind::Acc { rhs: Rhs::Powi(n, _), .. } = &kind {
                    if let Some(r) = read_places(n)
                        .into_iter()
                        .find(|r| overlaps(&target, r) || may_alias(&target, r))
                    {
                        return Err(Error::new_spanned(
                            n,
                            format!(
                                "`{}` is written by this instruction and read by its exponent `{}`, so the \
                                 exponent would differ when the inverse runs: pass an exponent computed \
                                 from what the instruction does not write (an integer ancilla: `let k = 0; \
                                 k += …;` … `k -= …; unlet k = 0;`)",
                                pretty(&r),
                                pretty(n)
                            ),
                        ));
                    }
                }
                for op in ops {
                    if let Operand::Place(p) = op {
                        if overlaps(&target, p) {
                            return Err(Error::new_spanned(
                                p,
                                format!(
                                    "`{}` is both the target and an argument of this instruction, which makes it \
                                     irreversible: copy it into an ancilla of its type first (`let t = T::zero(); t += {};` … \
                                     `t -= {}; unlet t = T::zero();`, with `0` for integers, `0.0` for floats)",
                                    pretty(p),
                                    pretty(p),
                                    pretty(p)
                                ),
                            ));
                        }
                    }
                }
                Ok(kind)
            }
            Expr::Call(c) => {
                let func = match strip_parens(&c.func) {
                    Expr::Path(p) if p.qself.is_none() => p.path.clone(),
                    other => return Err(Error::new_spanned(other, "expected the name of a reversible function or instruction")),
                };
                let args = c.args.iter().map(|a| self.arg(a)).collect::<Result<Vec<_>>>()?;
                let places: Vec<&Expr> =
                    args.iter().filter_map(|a| if let Operand::Place(p) = a { Some(p) } else { None }).collect();
                for (i, a) in places.iter().enumerate() {
                    for b in &places[..i] {
                        if overlaps(a, b) {
                            return Err(Error::new_spanned(
                                a,
                                format!("`{}` is passed twice (or overlaps another argument): the arguments of a reversible call must not alias", pretty(a)),
                            ));
                        }
                    }
                }
                // Every argument may be written: none may be read by an index of an argument
                // (`bump(v[i], i)` would undo at the wrong element)
                for a in &places {
                    let root = place_path(a).0;
                    for b in &args {
                        if let Some(id) = index_reads(b.expr()).into_iter().find(|id| *id == root) {
                            return Err(Error::new_spanned(
                                &id,
                                format!(
                                    "`{root}` is an argument of this call, which may change it, and is read by \
                                     an index of an argument: copy the index into an ancilla and pass that"
                                ),
                            ));
                        }
                    }
                }
                // nor by an argument computed from variables (`addto(k, k + 1)`: the inverse
                // would recompute `k + 1` from the changed `k`; unchecked code gave wrong
                // numbers, checked code blamed the callee; a new user)
                // (place by place: `addk(s.0, s.1 + 1)` reads what the call cannot change;
                // `v[j]` beside `v[i]` may be the same element: refused)
                for a in &places {
                    for b in &args {
                        let Operand::Computed(e) = b else { continue };
                        if let Some(r) = read_places(e)
                            .into_iter()
                            .find(|r| overlaps(a, r) || may_alias(a, r))
                        {
                            return Err(Error::new_spanned(
                                e,
                                format!(
                                    "`{}` is computed from `{}`, which this call may change through its \
                                     argument `{}`: the call could not be undone. Compute the value into an \
                                     ancilla that the call does not change, and pass that",
                                    pretty(e),
                                    pretty(&r),
                                    pretty(a)
                                ),
                            ));
                        }
                    }
                }
                let last = func.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                if let Some(written) = func.get_ident().and_then(|id| builtin_writes(&id.to_string())) {
                    for &k in written {
                        if let (Some(a), Some(e)) = (args.get(k), c.args.iter().nth(k)) {
                            if !matches!(a, Operand::Place(_)) {
                                return Err(Error::new_spanned(
                                    e,
                                    format!(
                                        "`{last}` writes its argument `{}`, which is not a variable, a parameter or an \
                                         element: it would write into a copy, and the value it takes from its other \
                                         argument would be lost (the function could not be undone). Pass a variable \
                                         (an ancilla holding the value: `let t = …;` … `unlet t = …;`)",
                                        pretty(e)
                                    ),
                                ));
                            }
                        }
                    }
                }
                if last.starts_with(|c: char| c.is_ascii_uppercase()) {
                    Ok(Kind::Instr { name: func, inverse: false, args })
                } else {
                    Ok(Kind::Call { func, inverse: false, args, keep: Keep::No })
                }
            }
            Expr::Assign(a) => Err(Error::new_spanned(
                a.eq_token,
                "plain assignment `=` discards the old value and cannot be reversed: accumulate into a zeroed \
                 variable with `+=`, or allocate one with `let`",
            )),
            Expr::Macro(m) => Err(Error::new_spanned(m, "macros run as external statements: write `@safe mac!(…);`")),
            other => Err(Error::new_spanned(
                other,
                "not a reversible statement: expected an instruction (`y += f(x)`, `SWAP(a, b)`, …), a call `f(args)`, \
                 `let`/`unlet`, `if`, `while`, `for`, `@routine`, `@safe` or `~…`",
            )),
        }
    }

    /// The place an ancilla's initial value copies, if it is one: a variable, field or element
    /// (`x`, `v[i]`, `s.f`), or `.clone()` of one, rooted at a parameter or ancilla that can be
    /// written (not a loop variable, not read-only data such as `x: &mut &[f64]`).
    fn copied_place(&self, init: &Expr) -> Option<Expr> {
        let e = match strip_parens(init) {
            Expr::MethodCall(m) if m.method == "clone" && m.args.is_empty() => &*m.receiver,
            e => e,
        };
        let root = place_path(e).0;
        (is_place(e)
            && self.vars.contains(&root)
            && !self.loop_vars.contains(&root)
            && !self.read_only.contains(&root))
        .then(|| strip_parens(e).clone())
    }

    fn root_is_var(&self, e: &Expr) -> bool {
        self.vars.contains(&place_path(e).0)
    }

    /// Whether `e` is the variable of a `for` loop around it (shadowing any other of its name).
    fn is_loop_var(&self, e: &Expr) -> bool {
        match strip_parens(e) {
            Expr::Path(p) => p
                .path
                .get_ident()
                .is_some_and(|id| self.loop_vars.contains(&id.to_string())),
            _ => false,
        }
    }

    fn target(&self, t: &Expr) -> Result<()> {
        if self.is_loop_var(t) {
            return Err(Error::new_spanned(
                t,
                format!(
                    "`{}` is a `for` loop's variable, which is read-only: it cannot be the target of \
                     an instruction (copy it into an ancilla first: `let j = 0; j += {0};`)",
                    pretty(t)
                ),
            ));
        }
        if is_place(t) && self.root_is_var(t) {
            Ok(())
        } else {
            Err(Error::new_spanned(
                t,
                "the target of an instruction must be a variable, a field or an element",
            ))
        }
    }

    /// The right-hand side of `+=`/`-=`; the flag says the sign flips (`y += -x` is `y -= x`).
    fn rhs(&mut self, e: Expr) -> Result<(Rhs, bool)> {
        if !self.mentions_state(&e) {
            return Ok((Rhs::Id(self.operand(&e)?), false));
        }
        match &e {
            Expr::Paren(p) => return self.rhs((*p.expr).clone()),
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
                return Ok((Rhs::Id(self.operand(&u.expr)?), true));
            }
            Expr::Binary(b) => {
                let name = match b.op {
                    BinOp::Add(_) => "Add",
                    BinOp::Sub(_) => "Sub",
                    BinOp::Mul(_) => "Mul",
                    BinOp::Div(_) => "Div",
                    op => return Err(Error::new_spanned(op, "expected `+`, `-`, `*` or `/`")),
                };
                return Ok((
                    Rhs::Arith(name, self.operand(&b.left)?, self.operand(&b.right)?),
                    false,
                ));
            }
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                let args: Vec<&Expr> = m.args.iter().collect();
                return self
                    .named(&name, &m.method, &m.receiver, &args)
                    .map(|r| (r, false));
            }
            Expr::Call(c) => {
                if let Expr::Path(p) = &*c.func {
                    if let Some(id) = p.path.get_ident() {
                        let args: Vec<&Expr> = c.args.iter().collect();
                        if args.is_empty() {
                            return Err(Error::new_spanned(&c.args, "expected arguments"));
                        }
                        if id == "identity" && args.len() == 1 {
                            return Ok((Rhs::Id(self.operand(args[0])?), false));
                        }
                        if id == "atan" && args.len() == 2 {
                            return self
                                .named("atan2", id, args[0], &args[1..])
                                .map(|r| (r, false));
                        }
                        return self
                            .named(&id.to_string(), id, args[0], &args[1..])
                            .map(|r| (r, false));
                    }
                }
                return Err(Error::new_spanned(
                    &c.func,
                    format!(
                        "not an instruction: the right-hand side of `+=` is a variable, `a op b`, or one of {}; \
                         call reversible functions as statements (`f(y, x);`) or define an instruction (see `Instruction`)",
                        known_instructions()
                    ),
                ));
            }
            _ => {}
        }
        Ok((Rhs::Id(self.operand(&e)?), false))
    }

    /// `name(first, rest…)` / `first.name(rest…)`.
    fn named(&mut self, name: &str, at: &Ident, first: &Expr, rest: &[&Expr]) -> Result<Rhs> {
        if name == "powi" && rest.len() == 1 {
            return Ok(Rhs::Powi(rest[0].clone(), self.operand(first)?));
        }
        if name == "digamma" && rest.is_empty() {
            return Ok(Rhs::Op1(quote!(Polygamma(0)), self.operand(first)?));
        }
        if let Some((_, v)) = UNARY.iter().find(|(n, _)| *n == name) {
            if !rest.is_empty() {
                return Err(Error::new_spanned(
                    at,
                    format!("`{name}` takes one argument"),
                ));
            }
            let v = Ident::new(v, Span::call_site());
            return Ok(Rhs::Op1(quote!(#v), self.operand(first)?));
        }
        if let Some((_, v)) = BINARY.iter().find(|(n, _)| *n == name) {
            if rest.len() != 1 {
                return Err(Error::new_spanned(
                    at,
                    format!("`{name}` takes two arguments"),
                ));
            }
            return Ok(Rhs::Op2(v, self.operand(first)?, self.operand(rest[0])?));
        }
        // reductions a user reaches for: the library's reversible routines
        let library = match name {
            "sum" => " For `y += x.iter().sum()` call the library's `i_sum(y, x);`.",
            "dot" => " For a dot product call the library's `i_dot(y, x, z);`.",
            "norm" => " For a norm call the library's `i_norm(y, sq, x);` (or `i_norm2`).",
            "mean" => " For a mean call the library's `i_mean(y, x);`.",
            _ => "",
        };
        Err(Error::new_spanned(
            at,
            format!(
                "`{name}` is not an instruction; the right-hand side of `+=` is a variable, `a op b`, or one of {}. \
                 Call reversible functions as statements (`f(y, x);`) or define an instruction (see `Instruction`).{library}",
                known_instructions()
            ),
        ))
    }

    fn xor_operands(&mut self, e: &Expr, out: &mut Vec<Operand>) -> Result<()> {
        match e {
            Expr::Binary(b)
                if matches!(b.op, BinOp::BitAnd(_) | BinOp::BitOr(_) | BinOp::BitXor(_)) =>
            {
                out.push(self.operand(&b.left)?);
                out.push(self.operand(&b.right)?);
                Ok(())
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => {
                out.push(self.operand(&u.expr)?);
                Ok(())
            }
            Expr::Paren(p) => self.xor_operands(&p.expr, out),
            other => {
                out.push(self.operand(other)?);
                Ok(())
            }
        }
    }

    /// An instruction operand: a place, a literal or a constant; anything else is a nested call.
    fn operand(&self, e: &Expr) -> Result<Operand> {
        if is_literal(e) {
            crate::literal::Literal::parse(e)?;
            return Ok(Operand::Lit(e.clone()));
        }
        if !self.mentions_state(e) {
            return Ok(Operand::Const(e.clone()));
        }
        if is_place(e) && self.root_is_var(e) {
            return Ok(Operand::Place(strip_parens(e).clone()));
        }
        if is_place(e) {
            // An element of a constant table indexed by a variable: read, not differentiated.
            return Ok(Operand::Const(e.clone()));
        }
        Err(Error::new_spanned(
            e,
            format!(
                "nested expression `{}`: an instruction's arguments are variables, fields, elements or constants. \
                 Compute it into an ancilla of the operands' type first (`let t = T::zero(); t += …;`, then \
                 uncompute it; `let t = 0;` for integers, `let t = 0.0;` for floats)",
                pretty(e)
            ),
        ))
    }

    /// A call argument: places are passed by `&mut`, other expressions as temporaries.
    fn arg(&self, e: &Expr) -> Result<Operand> {
        // A literal takes the type of the parameter it is passed to (`ROT(a, b, 0.3)` in code
        // generic over `T`), as in `y += x * 0.3`.
        if is_literal(e) {
            crate::literal::Literal::parse(e)?;
            return Ok(Operand::Lit(e.clone()));
        }
        // A loop variable is passed as a copy: the callee may not change it.
        if self.is_loop_var(e) {
            return Ok(Operand::Const(e.clone()));
        }
        if is_place(e) && self.root_is_var(e) {
            return Ok(Operand::Place(strip_parens(e).clone()));
        }
        if let Some(place) = self.copied_place(e) {
            return Ok(Operand::Copy(e.clone(), Box::new(place)));
        }
        if let Expr::Call(c) = e {
            if let Some(arg) = c
                .args
                .iter()
                .find(|a| self.mentions_state(a) && !is_place(a))
            {
                return Err(Error::new_spanned(
                    arg,
                    "nested call: compute the inner value into an ancilla first",
                ));
            }
        }
        // Anything else computed from the function's variables is passed as a copy that must
        // carry no gradient (`g(out, n - 1)` with an integer `n`, `g(y, v.len())`): its type is
        // checked to be a plain number (`Operand::Computed`). `g(y, h(x))`, `g(y, [a, b])`,
        // `g(y, m!(x))` were passed as constants, their gradients silently 0 (a hunter).
        if self.state_read(e).is_some() {
            return Ok(Operand::Computed(e.clone()));
        }
        Ok(Operand::Const(e.clone()))
    }

    /// The first variable `e` reads that may carry a gradient: not a loop variable, not a
    /// read-only parameter (`data: &mut &[f64]`).
    fn state_read(&self, e: &Expr) -> Option<String> {
        let mut v = Idents::default();
        v.visit_expr(e);
        v.0.iter().map(|i| i.to_string()).find(|i| {
            self.vars.contains(i) && !self.loop_vars.contains(i) && !self.read_only.contains(i)
        })
    }

    /// Whether `e` mentions a variable other than the loop variables in scope: an expression
    /// over loop variables and constants (`T::from_f64(i as f64)`, `2 * i + 1`) is a constant
    /// of the iteration, evaluated into a temporary like any constant.
    fn mentions_state(&self, e: &Expr) -> bool {
        let mut v = Idents::default();
        v.visit_expr(e);
        v.0.iter().any(|i| {
            let i = i.to_string();
            self.vars.contains(&i) && !self.loop_vars.contains(&i)
        })
    }
}

/// Every single-segment path in an expression.
#[derive(Default)]
pub struct Idents(pub Vec<Ident>);

impl<'a> Visit<'a> for Idents {
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if let Some(id) = p.path.get_ident() {
            self.0.push(id.clone());
        }
        syn::visit::visit_expr_path(self, p);
    }
    /// Every identifier of a macro's tokens: a macro call (`h!(x)`) that names a variable
    /// reads it (it was taken for a constant, and its gradient lost; a hunter).
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        // (not a field's, method's or path segment's name: after `.` or `::`)
        fn tokens(ts: proc_macro2::TokenStream, out: &mut Vec<Ident>) {
            let mut after_dot = false;
            for t in ts {
                match &t {
                    proc_macro2::TokenTree::Ident(i) if !after_dot => out.push(i.clone()),
                    proc_macro2::TokenTree::Group(g) => tokens(g.stream(), out),
                    _ => {}
                }
                after_dot = matches!(&t, proc_macro2::TokenTree::Punct(p) if p.as_char() == '.' || p.as_char() == ':');
            }
        }
        tokens(m.tokens.clone(), &mut self.0);
    }
}

/// The variables read by the index expressions inside `e` (`v[i]` reads `i`, `w[w[0]]` reads
/// `w`), apart from lengths (`x[x.len() - 1 - i]` reads `i`: no instruction changes a length).
fn index_reads(e: &Expr) -> Vec<Ident> {
    struct Reads(Vec<Ident>);
    impl<'a> Visit<'a> for Reads {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                self.0.push(id.clone());
            }
        }
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            if m.method == "len" && m.args.is_empty() {
                return;
            }
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    struct Indices(Vec<Ident>);
    impl<'a> Visit<'a> for Indices {
        fn visit_expr_index(&mut self, ix: &'a syn::ExprIndex) {
            let mut ids = Reads(vec![]);
            ids.visit_expr(&ix.index);
            self.0.extend(ids.0);
            syn::visit::visit_expr_index(self, ix);
        }
    }
    let mut v = Indices(vec![]);
    v.visit_expr(e);
    v.0
}

/// The places `e` reads: each variable, field or element read (a macro's identifiers as
/// variables), and the places its indices read, apart from the length of a place (`v.len()`:
/// no call changes one; the length of anything else is a value like any other).
fn read_places(e: &Expr) -> Vec<Expr> {
    struct Reads(Vec<Expr>);
    impl<'a> Visit<'a> for Reads {
        fn visit_expr(&mut self, e: &'a Expr) {
            let e0 = strip_parens(e);
            if is_place(e0) {
                self.0.push(e0.clone());
                // and what its indices read
                let mut at = e0;
                loop {
                    match at {
                        Expr::Field(f) => at = strip_parens(&f.base),
                        Expr::Index(i) => {
                            self.visit_expr(&i.index);
                            at = strip_parens(&i.expr);
                        }
                        _ => break,
                    }
                }
                return;
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_macro(&mut self, m: &'a syn::Macro) {
            let mut ids = Idents::default();
            ids.visit_macro(m);
            self.0
                .extend(ids.0.into_iter().map(|id| syn::parse_quote!(#id)));
        }
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            if (m.method == "len" || m.method == "is_empty")
                && m.args.is_empty()
                && is_place(&m.receiver)
            {
                // (an index inside the receiver is still read)
                let mut ids = Reads(Vec::new());
                let mut at = strip_parens(&m.receiver);
                while let Expr::Field(_) | Expr::Index(_) = at {
                    match at {
                        Expr::Field(f) => at = strip_parens(&f.base),
                        Expr::Index(i) => {
                            ids.visit_expr(&i.index);
                            at = strip_parens(&i.expr);
                        }
                        _ => unreachable!(),
                    }
                }
                self.0.extend(ids.0);
                return;
            }
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut r = Reads(Vec::new());
    r.visit_expr(e);
    r.0
}

/// `e` without the parentheses around it.
pub(crate) fn strip_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_parens(&p.expr),
        Expr::Group(g) => strip_parens(&g.expr),
        _ => e,
    }
}

/// A number literal, possibly negated or parenthesised.
pub(crate) fn is_literal(e: &Expr) -> bool {
    match strip_parens(e) {
        Expr::Lit(l) => matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Float(_)),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => is_literal(&u.expr),
        _ => false,
    }
}

/// A variable, a field of a place or an element of a place.
pub fn is_place(e: &Expr) -> bool {
    match strip_parens(e) {
        Expr::Path(p) => p.path.get_ident().is_some(),
        Expr::Field(f) => is_place(&f.base),
        Expr::Index(i) => is_place(&i.expr),
        _ => false,
    }
}

/// One step of a place: `.field` or `[index]`.
#[derive(PartialEq)]
pub enum Seg {
    Field(String),
    Index(String),
}

/// A place as its root variable and its steps, the indices as text ([`place_steps`]).
pub fn place_path(e: &Expr) -> (String, Vec<Seg>) {
    let (root, steps) = place_steps(e);
    let segs = steps
        .into_iter()
        .map(|s| match s {
            Step::Field(f) => Seg::Field(f),
            Step::Index(i) => Seg::Index(i.to_token_stream().to_string()),
        })
        .collect();
    (root, segs)
}

/// One step of a place with its index expression (see [`place_steps`]).
pub enum Step<'a> {
    Field(String),
    Index(&'a Expr),
}

/// A place as its root variable and its steps, the indices as expressions.
pub fn place_steps(e: &Expr) -> (String, Vec<Step<'_>>) {
    match strip_parens(e) {
        Expr::Field(f) => {
            let (r, mut s) = place_steps(&f.base);
            s.push(Step::Field(f.member.to_token_stream().to_string()));
            (r, s)
        }
        Expr::Index(i) => {
            let (r, mut s) = place_steps(&i.expr);
            s.push(Step::Index(&i.index));
            (r, s)
        }
        other => (other.to_token_stream().to_string(), vec![]),
    }
}

/// The place `e` without its last `n` steps (`v[i].a[k]` without 2: `v[i]`); the steps as
/// [`place_steps`] counts them (parentheses are no step).
pub(crate) fn place_prefix(e: &Expr, n: usize) -> Expr {
    if n == 0 {
        return e.clone();
    }
    match strip_parens(e) {
        Expr::Field(f) => place_prefix(&f.base, n - 1),
        Expr::Index(i) => place_prefix(&i.expr, n - 1),
        _ => unreachable!("a place has as many steps as place_steps counts"),
    }
}

/// The last `n` steps of the place `e` taken from `base` instead of from the rest of `e`
/// (`v[i].a[k]`, 2 and `e`: `e.a[k]`).
pub(crate) fn rebase(e: &Expr, n: usize, base: &Expr) -> Expr {
    if n == 0 {
        return base.clone();
    }
    match strip_parens(e) {
        Expr::Field(f) => {
            let mut f = f.clone();
            *f.base = rebase(&f.base, n - 1, base);
            Expr::Field(f)
        }
        Expr::Index(i) => {
            let mut i = i.clone();
            *i.expr = rebase(&i.expr, n - 1, base);
            Expr::Index(i)
        }
        _ => unreachable!("a place has as many steps as place_steps counts"),
    }
}

/// Statically the same storage, or one inside the other.
pub fn overlaps(a: &Expr, b: &Expr) -> bool {
    let (ra, sa) = place_path(a);
    let (rb, sb) = place_path(b);
    ra == rb && sa.iter().zip(&sb).all(|(x, y)| x == y)
}

/// Possibly the same storage at run time (same root, differing only in an index).
pub fn may_alias(a: &Expr, b: &Expr) -> bool {
    let (ra, sa) = place_path(a);
    let (rb, sb) = place_path(b);
    if ra != rb {
        return false;
    }
    for (x, y) in sa.iter().zip(&sb) {
        match (x, y) {
            (Seg::Field(p), Seg::Field(q)) if p != q => return false,
            (Seg::Index(p), Seg::Index(q)) if p != q => return true,
            _ => {}
        }
    }
    true
}

/// Source text of an expression as written (see [`render`]).
/// The arguments a built-in instruction writes (by position): `SWAP`, `ROT` and `IROT` their
/// first two, the others their first (`ROT`'s angle and `ROTL`'s amount are read).
pub(crate) fn builtin_writes(name: &str) -> Option<&'static [usize]> {
    match name {
        "SWAP" | "ROT" | "IROT" => Some(&[0, 1]),
        "NEG" | "INC" | "DEC" | "CONJ" | "ROTL" | "ROTR" => Some(&[0]),
        _ => None,
    }
}

pub fn pretty(e: &impl ToTokens) -> String {
    render(e.to_token_stream(), false)
}

/// Source text of a type as written (`<` and `>` are generic brackets).
pub fn pretty_type(t: &impl ToTokens) -> String {
    render(t.to_token_stream(), true)
}

/// The tokens' source text: the span's own text when the compiler can join the first and last
/// token's spans (then spacing and literals are exactly as written), otherwise the tokens
/// re-printed the way they are usually written — `T::zero()`, `x.re`, `v[i]`, `f(a, b)`, `-1`,
/// `a..b`, `x > -10`, `Vec<T>` in types and `::<T>` in expressions — with each literal's own text.
pub fn render(ts: proc_macro2::TokenStream, type_mode: bool) -> String {
    if let Some(text) = joined_source(&ts) {
        return text;
    }
    let mut atoms = Vec::new();
    flatten(ts, &mut atoms);
    print_atoms(&atoms, type_mode)
}

fn joined_source(ts: &proc_macro2::TokenStream) -> Option<String> {
    let mut it = ts.clone().into_iter();
    let first = it.next()?.span();
    let last = it.last().map(|t| t.span()).unwrap_or(first);
    let text = first.join(last)?.source_text()?;
    // Only trust text that holds the same tokens (not a macro's call site, say).
    let same = text
        .parse::<proc_macro2::TokenStream>()
        .map(|t| t.to_string() == ts.to_string())
        .unwrap_or(false);
    same.then(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[derive(Clone, PartialEq)]
enum Atom {
    Open(char),
    Close(char),
    Word(String),
    Lit(String),
    Op(String),
}

fn flatten(ts: proc_macro2::TokenStream, out: &mut Vec<Atom>) {
    use proc_macro2::{Delimiter, Spacing, TokenTree};
    let mut pending = String::new();
    for tt in ts {
        let joint = match &tt {
            TokenTree::Punct(p) => {
                pending.push(p.as_char());
                p.spacing() == Spacing::Joint
            }
            _ => false,
        };
        if let TokenTree::Punct(_) = &tt {
            if joint && pending != "'" {
                continue;
            }
            split_ops(&std::mem::take(&mut pending), out);
            continue;
        }
        if !pending.is_empty() {
            split_ops(&std::mem::take(&mut pending), out);
        }
        match tt {
            TokenTree::Ident(i) => {
                if let Some(Atom::Op(o)) = out.last() {
                    if o == "'" {
                        out.pop();
                        out.push(Atom::Word(format!("'{i}")));
                        continue;
                    }
                }
                out.push(Atom::Word(i.to_string()))
            }
            TokenTree::Literal(l) => out.push(Atom::Lit(l.to_string())),
            TokenTree::Group(g) => {
                let (o, c) = match g.delimiter() {
                    Delimiter::Parenthesis => ('(', ')'),
                    Delimiter::Bracket => ('[', ']'),
                    Delimiter::Brace => ('{', '}'),
                    Delimiter::None => {
                        flatten(g.stream(), out);
                        continue;
                    }
                };
                out.push(Atom::Open(o));
                flatten(g.stream(), out);
                out.push(Atom::Close(c));
            }
            TokenTree::Punct(_) => unreachable!(),
        }
    }
    if !pending.is_empty() {
        split_ops(&pending, out);
    }
}

/// Joint punctuation into Rust's operators, longest first (`=-` is `=` then `-`).
fn split_ops(mut s: &str, out: &mut Vec<Atom>) {
    const OPS: &[&str] = &[
        "..=", "...", "<<=", ">>=", "::", "..", "->", "=>", "==", "!=", "<=", ">=", "&&", "||",
        "+=", "-=", "*=", "/=", "%=", "^=", "&=", "|=", "<<", ">>",
    ];
    while !s.is_empty() {
        let n = OPS
            .iter()
            .find(|o| s.starts_with(**o))
            .map(|o| o.len())
            .unwrap_or_else(|| s.chars().next().map(char::len_utf8).unwrap_or(1));
        out.push(Atom::Op(s[..n].to_string()));
        s = &s[n..];
    }
}

const KEYWORDS: &[&str] = &[
    "if", "while", "in", "let", "return", "mut", "as", "for", "match", "else", "move", "ref",
    "unlet", "dyn", "impl", "where", "const",
];

fn print_atoms(atoms: &[Atom], type_mode: bool) -> String {
    let mut out = String::new();
    // Whether the previous atom wants a space after it.
    let mut space_after = false;
    let mut prev: Option<&Atom> = None;
    // Open generic brackets (`Vec<`, `::<`).
    let mut generics = 0usize;
    let (mut prev_generic_close, mut prev_macro_bang) = (false, false);
    for a in atoms {
        let is_word =
            |p: Option<&Atom>| matches!(p, Some(Atom::Word(w)) if !KEYWORDS.contains(&w.as_str()));
        // The previous atom ends an operand: a unary operator cannot follow.
        let operand_before = is_word(prev)
            || matches!(prev, Some(Atom::Lit(_) | Atom::Close(_)))
            || matches!(prev, Some(Atom::Op(o)) if o == "?")
            || prev_generic_close;
        let (was_generic_close, was_bang) = (prev_generic_close, prev_macro_bang);
        prev_generic_close = false;
        prev_macro_bang = false;
        let (before, after) = match a {
            Atom::Word(_) | Atom::Lit(_) => (true, true),
            Atom::Open(c) => {
                let call = *c != '{'
                    && (is_word(prev)
                        || matches!(prev, Some(Atom::Close(_)))
                        || was_bang
                        || was_generic_close);
                (!call, *c == '{')
            }
            Atom::Close(c) => (*c == '}', true),
            Atom::Op(o) => match o.as_str() {
                "::" | "." | ".." | "..=" => (false, false),
                "," | ";" => (false, true),
                ":" => (false, true),
                "?" => (false, true),
                "~" | "@" | "#" | "'" => (true, false),
                "<" if type_mode || matches!(prev, Some(Atom::Op(p)) if p == "::") => {
                    generics += 1;
                    (false, false)
                }
                ">" if generics > 0 => {
                    generics -= 1;
                    prev_generic_close = true;
                    (false, true)
                }
                "!" if is_word(prev) => {
                    // A macro's bang.
                    prev_macro_bang = true;
                    (false, false)
                }
                "-" | "*" | "&" | "!" | "&&" if !operand_before => (true, false),
                _ => (true, true),
            },
        };
        if !out.is_empty() && space_after && before {
            out.push(' ');
        }
        match a {
            Atom::Open(c) | Atom::Close(c) => out.push(*c),
            Atom::Word(s) | Atom::Lit(s) | Atom::Op(s) => out.push_str(s),
        }
        space_after = after;
        prev = Some(a);
    }
    out
}
