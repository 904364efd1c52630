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
        Kind::Let { name, ty, init } => Kind::Unlet {
            name: name.clone(),
            ty: ty.clone(),
            init: init.clone(),
        },
        Kind::Unlet { name, ty, init } => Kind::Let {
            name: name.clone(),
            ty: ty.clone(),
            init: init.clone(),
        },
        Kind::If {
            pre,
            post,
            then,
            els,
        } => Kind::If {
            pre: post.clone(),
            post: pre.clone(),
            then: invert(then),
            els: invert(els),
        },
        Kind::While {
            pre,
            post,
            pre_text,
            post_text,
            body,
        } => Kind::While {
            pre: post.clone(),
            post: pre.clone(),
            pre_text: post_text.clone(),
            post_text: pre_text.clone(),
            body: invert(body),
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
            rev: !rev,
            body: invert(body),
        },
        Kind::NoCheck(b) => Kind::NoCheck(invert(b)),
        Kind::Block(b) => Kind::Block(invert(b)),
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
    }
}
