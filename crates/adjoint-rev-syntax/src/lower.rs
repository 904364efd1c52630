//! Between parsing and code generation: expand `@routine`/`~@routine` and `~{ … }`, then check the
//! ancillas' lifetimes (every `let` has its `unlet` in the same block, no re-allocation of a live
//! ancilla, no use of a deallocated one).

use crate::invert::invert;
use crate::ir::{Kind, Operand, Rhs, Stmt};
use crate::parse::Idents;
use proc_macro2::Span;
use std::collections::HashMap;
use syn::visit::Visit;
use syn::{Error, Expr, Result};

/// Expand routines and inverse blocks, recursively.
pub fn expand(stmts: Vec<Stmt>) -> Result<Vec<Stmt>> {
    let mut out: Vec<Stmt> = Vec::with_capacity(stmts.len());
    // (name, body, where in `out` the routine runs)
    let mut routines: Vec<(Option<String>, Vec<Stmt>, usize)> = Vec::new();
    for s in stmts {
        let Stmt {
            kind,
            text,
            span,
            inverted,
        } = s;
        let kind = match kind {
            Kind::Routine(name, body) => {
                let body = expand(body)?;
                routines.push((name, body.clone(), out.len()));
                Kind::Block(body)
            }
            // `@invcheckoff @routine { … }`: a routine whose body (and so its uncomputation)
            // runs without checks (it was expanded apart, and its `~@routine` not found; a
            // hunter).
            Kind::NoCheck(inner)
                if matches!(
                    inner.as_slice(),
                    [Stmt {
                        kind: Kind::Routine(..),
                        ..
                    }]
                ) =>
            {
                let Some(Stmt {
                    kind: Kind::Routine(name, body),
                    ..
                }) = inner.into_iter().next()
                else {
                    unreachable!("matched above")
                };
                let body = vec![Stmt {
                    kind: Kind::NoCheck(expand(body)?),
                    text: text.clone(),
                    span,
                    inverted,
                }];
                routines.push((name, body.clone(), out.len()));
                Kind::Block(body)
            }
            // `~@routine` undoes the latest routine; `~@routine name` the latest one of that name.
            Kind::Unroutine(name) => {
                let found = match &name {
                    None => routines.len().checked_sub(1),
                    Some(n) => routines.iter().rposition(|(m, ..)| m.as_ref() == Some(n)),
                };
                match found {
                    Some(i) => {
                        let (_, body, at) = routines.remove(i);
                        // The routine and its uncomputation are a pair: the routine is a
                        // computation the inverse undoes last (`Recompute` inverts to
                        // `Uncompute`), which unchecked inverses may then skip as unchecked
                        // forward code skips its own (`codegen::skip_condition`).
                        out[at].kind = Kind::Recompute(body.clone());
                        Kind::Uncompute(invert(&body), body)
                    }
                    None => {
                        let what = match &name {
                            Some(n) => format!("`~@routine {n}` without a `@routine {n} {{ … }}` before it in this block"),
                            None => "`~@routine` without a `@routine { … }` before it in this block".to_string(),
                        };
                        return Err(Error::new(span, what));
                    }
                }
            }
            Kind::Inverse(body) => Kind::Block(invert(&expand(body)?)),
            // Blocks, branches and loops: their bodies expanded.
            k => {
                let mut error = None;
                let k = k.map_bodies(&mut |b| {
                    expand(b.to_vec()).unwrap_or_else(|e| {
                        error.get_or_insert(e);
                        Vec::new()
                    })
                });
                if let Some(e) = error {
                    return Err(e);
                }
                k
            }
        };
        out.push(Stmt {
            kind,
            text,
            span,
            inverted,
        });
    }
    Ok(out)
}

/// The state of every ancilla name seen in a scope.
#[derive(Clone, Default)]
struct Scope {
    /// Allocated and not yet deallocated: where it was allocated.
    live: HashMap<String, Span>,
    /// Deallocated (and not allocated again).
    dead: HashMap<String, Span>,
    /// Variables of the enclosing `for` loops (live, but not ancillas).
    loop_vars: Vec<String>,
}

/// Check ancilla lifetimes in a function body; `params` are never ancillas.
pub fn check(body: &[Stmt], params: &[String]) -> Result<()> {
    let mut scope = Scope::default();
    for p in params {
        scope.live.insert(p.clone(), Span::call_site());
    }
    let mut errors = block(body, &mut scope, params).err();
    if let Err(e) = leaks(&scope, params, &[]) {
        crate::parse::push_error(&mut errors, e);
    }
    errors.map_or(Ok(()), Err)
}

fn leaks(scope: &Scope, params: &[String], outer: &[String]) -> Result<()> {
    let mut leaked: Vec<(&String, &Span)> = scope
        .live
        .iter()
        .filter(|(n, _)| !params.contains(n) && !outer.contains(n))
        .collect();
    leaked.sort_by_key(|(n, _)| n.to_string());
    // every leaked ancilla, not only the first (the docs promise all errors at once; a hunter)
    let mut errors = None;
    for (name, span) in leaked {
        crate::parse::push_error(
            &mut errors,
            Error::new(
                *span,
                format!(
                    "ancilla `{name}` is never deallocated in this block: add `unlet {name} = <its value>;` \
                     (or allocate it inside `@routine {{ … }}` and uncompute with `~@routine;`)"
                ),
            ),
        );
    }
    errors.map_or(Ok(()), Err)
}

/// Every statement's errors, combined.
fn block(stmts: &[Stmt], scope: &mut Scope, params: &[String]) -> Result<()> {
    let mut errors = None;
    for s in stmts {
        if let Err(e) = stmt(s, scope, params) {
            crate::parse::push_error(&mut errors, e);
        }
    }
    errors.map_or(Ok(()), Err)
}

/// A nested scope (branch or loop body): what it allocates it must deallocate.
fn nested(
    stmts: &[Stmt],
    scope: &Scope,
    params: &[String],
    extra: Option<&syn::Ident>,
) -> Result<()> {
    let mut inner = scope.clone();
    if let Some(v) = extra {
        inner.live.insert(v.to_string(), v.span());
        inner.dead.remove(&v.to_string());
        inner.loop_vars.push(v.to_string());
    }
    block(stmts, &mut inner, params)?;
    let outer: Vec<String> = scope
        .live
        .keys()
        .cloned()
        .chain(extra.map(|v| v.to_string()))
        .collect();
    leaks(&inner, params, &outer)?;
    // Deallocating an outer ancilla inside a branch would make its lifetime depend on the branch.
    // (In name order: the first error reported does not depend on the hash map's order.)
    let mut names: Vec<&String> = scope.live.keys().collect();
    names.sort();
    for name in names {
        if !inner.live.contains_key(name) {
            let span = inner
                .dead
                .get(name)
                .copied()
                .unwrap_or_else(Span::call_site);
            return Err(Error::new(
                span,
                format!(
                    "`{name}` is allocated outside this block and cannot be deallocated inside it"
                ),
            ));
        }
    }
    Ok(())
}

fn uses(e: &Expr, scope: &Scope) -> Result<()> {
    let mut v = Idents::default();
    v.visit_expr(e);
    for id in v.0 {
        let name = id.to_string();
        if scope.dead.contains_key(&name) && !scope.live.contains_key(&name) {
            return Err(Error::new(
                id.span(),
                format!("use of deallocated ancilla `{name}`"),
            ));
        }
    }
    Ok(())
}

fn operand_uses(o: &Operand, scope: &Scope) -> Result<()> {
    uses(o.expr(), scope)
}

fn stmt(s: &Stmt, scope: &mut Scope, params: &[String]) -> Result<()> {
    match &s.kind {
        Kind::Acc { target, rhs, .. } => {
            uses(target, scope)?;
            match rhs {
                Rhs::Id(a) | Rhs::Op1(_, a) => operand_uses(a, scope),
                Rhs::Powi(n, a) => {
                    uses(n, scope)?;
                    operand_uses(a, scope)
                }
                Rhs::Arith(_, a, b) | Rhs::Op2(_, a, b) => {
                    operand_uses(a, scope)?;
                    operand_uses(b, scope)
                }
            }
        }
        Kind::Xor { target, rhs, .. } => {
            uses(target, scope)?;
            uses(rhs, scope)
        }
        Kind::Scale { target, x, .. } => {
            uses(target, scope)?;
            operand_uses(x, scope)
        }
        Kind::Call { args, .. } | Kind::Instr { args, .. } => {
            args.iter().try_for_each(|a| operand_uses(a, scope))
        }
        Kind::Let { name, init, .. } => {
            uses(init, scope)?;
            let n = name.to_string();
            if params.contains(&n) {
                return Err(Error::new(
                    name.span(),
                    format!("`{n}` is a parameter; an ancilla needs a new name"),
                ));
            }
            if scope.loop_vars.contains(&n) {
                return Err(Error::new(
                    name.span(),
                    format!("`{n}` is the variable of an enclosing `for` loop; an ancilla needs a new name"),
                ));
            }
            if scope.live.contains_key(&n) {
                return Err(Error::new(
                    name.span(),
                    format!("re-allocation of live ancilla `{n}`: deallocate it with `unlet {n} = …;` first"),
                ));
            }
            scope.dead.remove(&n);
            scope.live.insert(n, name.span());
            Ok(())
        }
        Kind::Unlet { name, init, .. } => {
            uses(init, scope)?;
            let n = name.to_string();
            if params.contains(&n) {
                return Err(Error::new(
                    name.span(),
                    format!("`{n}` is a parameter, not an ancilla: it cannot be deallocated"),
                ));
            }
            if scope.live.remove(&n).is_none() {
                let msg = if scope.dead.contains_key(&n) {
                    format!("`{n}` is already deallocated")
                } else {
                    format!(
                        "`{n}` is not an allocated ancilla: allocate it with `let {n} = …;` first"
                    )
                };
                return Err(Error::new(name.span(), msg));
            }
            scope.dead.insert(n, name.span());
            Ok(())
        }
        Kind::If {
            pre,
            post,
            then,
            els,
        } => {
            uses(pre, scope)?;
            uses(post, scope)?;
            nested(then, scope, params, None)?;
            nested(els, scope, params, None)
        }
        Kind::While {
            pre, post, body, ..
        } => {
            uses(pre, scope)?;
            uses(post, scope)?;
            nested(body, scope, params, None)
        }
        Kind::For {
            var,
            start,
            end,
            step,
            body,
            ..
        } => {
            uses(start, scope)?;
            uses(end, scope)?;
            if let Some(st) = step {
                uses(st, scope)?;
            }
            // (a parameter shadowed by the loop variable gave rustc's "type `usize` cannot be
            // dereferenced" inside the body, far from the cause; a hunter. A live ancilla may be
            // shadowed: it is a local, as in Rust.)
            let n = var.to_string();
            if params.contains(&n) {
                return Err(Error::new(
                    var.span(),
                    format!("`{n}` is a parameter; a `for` loop's variable needs a new name"),
                ));
            }
            nested(body, scope, params, Some(var))
        }
        Kind::Safe(_) => Ok(()),
        Kind::NoCheck(b) | Kind::Block(b) | Kind::Uncompute(b, _) | Kind::Recompute(b) => {
            block(b, scope, params)
        }
        Kind::Routine(..) | Kind::Unroutine(_) | Kind::Inverse(_) => {
            unreachable!("expanded by `expand`")
        }
    }
}
