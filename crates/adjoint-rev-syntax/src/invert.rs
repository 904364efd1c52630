//! Seed 000 Table I: the inverse of every statement.

use crate::ir::{Keep, Kind, Stmt};

/// The inverse of a statement list: the inverse statements in reverse order.
pub fn invert(stmts: &[Stmt]) -> Vec<Stmt> {
    stmts.iter().rev().map(invert_stmt).collect()
}

fn invert_stmt(s: &Stmt) -> Stmt {
    let kind = match &s.kind {
        Kind::Acc { target, plus, rhs } => Kind::Acc {
            target: target.clone(),
            plus: !plus,
            rhs: rhs.clone(),
        },
        Kind::Xor { .. } | Kind::Safe(_) => s.kind.clone(),
        Kind::Scale { target, mul, x } => Kind::Scale {
            target: target.clone(),
            mul: !mul,
            x: x.clone(),
        },
        Kind::Call {
            func,
            inverse,
            args,
            keep,
        } => Kind::Call {
            func: func.clone(),
            inverse: !inverse,
            args: args.clone(),
            keep: match keep {
                Keep::No => Keep::No,
                Keep::Push => Keep::Pop,
                Keep::Pop => Keep::Push,
            },
        },
        Kind::Instr {
            name,
            inverse,
            args,
        } => Kind::Instr {
            name: name.clone(),
            inverse: !inverse,
            args: args.clone(),
        },
        Kind::Let {
            name,
            ty,
            init,
            copy,
        } => Kind::Unlet {
            name: name.clone(),
            ty: ty.clone(),
            init: init.clone(),
            copy: copy.clone(),
        },
        Kind::Unlet {
            name,
            ty,
            init,
            copy,
        } => Kind::Let {
            name: name.clone(),
            ty: ty.clone(),
            init: init.clone(),
            copy: copy.clone(),
        },
        // Branches, loops and blocks: their bodies inverted; an `if`'s or `while`'s pre- and
        // post-conditions trade places, a `for` loop runs the other way.
        Kind::If { .. }
        | Kind::While { .. }
        | Kind::For { .. }
        | Kind::NoCheck(_)
        | Kind::Block(_) => {
            let mut k = s.kind.map_bodies(&mut |b| invert(b));
            match &mut k {
                Kind::If { pre, post, .. } => std::mem::swap(pre, post),
                Kind::While {
                    pre,
                    post,
                    pre_text,
                    post_text,
                    ..
                } => {
                    std::mem::swap(pre, post);
                    std::mem::swap(pre_text, post_text);
                }
                Kind::For { rev, .. } => *rev = !*rev,
                _ => {}
            }
            k
        }
        // Undoing an uncomputation recomputes the routine, and the other way round.
        Kind::Uncompute(_, routine) => Kind::Recompute(routine.clone()),
        Kind::Recompute(routine) => Kind::Uncompute(invert(routine), routine.clone()),
        // `lower::expand` removes these before anything is inverted; inverting them anyway is
        // well defined.
        Kind::Inverse(b) => Kind::Block(b.clone()),
        Kind::Routine(_, b) => Kind::Block(invert(b)),
        Kind::Unroutine(n) => Kind::Unroutine(n.clone()),
    };
    Stmt {
        kind,
        text: s.text.clone(),
        span: s.span,
        inverted: !s.inverted,
    }
}
