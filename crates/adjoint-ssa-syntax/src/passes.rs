//! Clean-up passes after lowering: drop unreachable blocks, order blocks in reverse post-order,
//! remove trivial block parameters (phis whose incoming values are all the same), reuse a load
//! of an element already loaded in the same block, and infer the integer types that Rust would
//! infer.

use crate::ir::*;

/// Visit every value operand of an instruction mutably.
pub fn map_inst_uses(inst: &mut Inst, f: &mut impl FnMut(Val) -> Val) {
    match inst {
        Inst::Const { .. } | Inst::Len { .. } => {}
        Inst::Un { a, n, .. } => {
            *a = f(*a);
            if let Some(n) = n {
                *n = f(*n);
            }
        }
        Inst::Bin { a, b, .. } | Inst::Int { a, b, .. } | Inst::Cmp { a, b, .. } => {
            *a = f(*a);
            *b = f(*b);
        }
        Inst::Pass { a, .. } | Inst::Not { a, .. } | Inst::Cast { a, .. } => *a = f(*a),
        Inst::Load { idx, .. } => *idx = f(*idx),
        Inst::Store { idx, val, .. } => {
            *idx = f(*idx);
            *val = f(*val);
        }
        Inst::Fill { val, .. } => *val = f(*val),
        Inst::Check { a, b, .. } => {
            *a = f(*a);
            *b = f(*b);
        }
        Inst::Assert { cond, .. } => *cond = f(*cond),
        Inst::Call { args, .. } => {
            for a in args {
                match a {
                    Arg::Val(v) => *v = f(*v),
                    Arg::Elems { vals, .. } => vals.iter_mut().for_each(|v| *v = f(*v)),
                    Arg::Struct(..) => {}
                    Arg::Slice(s) => {
                        if let Some(l) = &mut s.lo {
                            *l = f(*l);
                        }
                        if let Some(h) = &mut s.hi {
                            *h = f(*h);
                        }
                    }
                }
            }
        }
        Inst::Rule { args, .. } => {
            for a in args {
                *a = f(*a);
            }
        }
    }
}

fn map_term_uses(t: &mut Term, f: &mut impl FnMut(Val) -> Val) {
    if let Term::Branch(c, _, _) = t {
        *c = f(*c);
    }
    if let Term::Return(Some(v)) = t {
        *v = f(*v);
    }
    for tg in t.targets_mut() {
        for a in &mut tg.args {
            *a = f(*a);
        }
    }
}

/// Reachable blocks in reverse post-order from the entry.
pub fn rpo(f: &Func) -> Vec<BlockId> {
    let mut seen = vec![false; f.blocks.len()];
    let mut post = vec![];
    // iterative DFS
    let mut stack: Vec<(BlockId, usize)> = vec![(0, 0)];
    seen[0] = true;
    while let Some(&mut (b, ref mut i)) = stack.last_mut() {
        let succ: Vec<BlockId> = f.blocks[b].term.targets().iter().map(|t| t.block).collect();
        if *i < succ.len() {
            let s = succ[*i];
            *i += 1;
            if !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            post.push(b);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// Remove unreachable blocks, renumber in reverse post-order, remove trivial parameters.
pub fn cleanup(f: &mut Func) {
    let order = rpo(f);
    let mut newid = vec![usize::MAX; f.blocks.len()];
    for (i, &b) in order.iter().enumerate() {
        newid[b] = i;
    }
    let mut blocks = Vec::with_capacity(order.len());
    for &b in &order {
        let mut blk = f.blocks[b].clone();
        for t in blk.term.targets_mut() {
            t.block = newid[t.block];
        }
        blocks.push(blk);
    }
    f.blocks = blocks;
    remove_trivial_params(f);
}

/// Within each block, a load of `s[i]` that repeats an earlier load of `s[i]` (the same index
/// value, no store to `s` or call in between) reuses the earlier value, and a load of `s[i]`
/// after a store `s[i] = v` of floats is `v`. `x[j] * x[j]` then reads, and in a loop records
/// for the reverse sweep, one value instead of two; `xc[j] = a − b; … xc[j]` uses `a − b`,
/// which the reverse sweep can recompute.
pub fn cse_loads(f: &mut Func) {
    let mut repl: Vec<Val> = (0..f.values.len()).collect();
    let mut int_links = vec![];
    for blk in &mut f.blocks {
        let mut seen: Vec<(SliceId, Val, Val)> = vec![];
        blk.insts.retain_mut(|inst| {
            map_inst_uses(inst, &mut |v| find(&mut repl, v));
            match *inst {
                Inst::Load {
                    dst, slice, idx, ..
                } => {
                    if let Some(&(_, _, first)) =
                        seen.iter().find(|&&(s, i, _)| s == slice && i == idx)
                    {
                        repl[dst] = first;
                        // (one value now: a type a typed `let` gave the dropped load is kept)
                        int_links.push((dst, first));
                        return false;
                    }
                    seen.push((slice, idx, dst));
                }
                Inst::Store {
                    slice, idx, val, ..
                } => {
                    seen.retain(|&(s, _, _)| s != slice);
                    if f.slices[slice].elem == Ty::F64 {
                        seen.push((slice, idx, val));
                    }
                }
                Inst::Fill { slice, .. } => seen.retain(|&(s, _, _)| s != slice),
                Inst::Call { .. } => seen.clear(),
                _ => {}
            }
            true
        });
    }
    f.int_links.extend(int_links);
    let mut m = |v: Val| find(&mut repl, v);
    for blk in &mut f.blocks {
        for i in &mut blk.insts {
            map_inst_uses(i, &mut m);
        }
        map_term_uses(&mut blk.term, &mut m);
    }
}

fn find(repl: &mut [Val], v: Val) -> Val {
    let mut r = v;
    while repl[r] != r {
        r = repl[r];
    }
    let mut x = v;
    while repl[x] != r {
        let n = repl[x];
        repl[x] = r;
        x = n;
    }
    r
}

fn remove_trivial_params(f: &mut Func) {
    let mut repl: Vec<Val> = (0..f.values.len()).collect();
    loop {
        let mut changed = false;
        let preds = f.preds();
        for (b, incoming) in preds.iter().enumerate().skip(1) {
            if incoming.is_empty() {
                continue;
            }
            let mut i = f.blocks[b].params.len();
            while i > 0 {
                i -= 1;
                let p = f.blocks[b].params[i];
                let mut uniq: Option<Val> = None;
                let mut trivial = true;
                for &(pb, slot) in incoming {
                    let a = f.blocks[pb].term.targets()[slot].args[i];
                    let a = find(&mut repl, a);
                    if a == p {
                        continue;
                    }
                    match uniq {
                        None => uniq = Some(a),
                        Some(u) if u == a => {}
                        Some(_) => {
                            trivial = false;
                            break;
                        }
                    }
                }
                if let (true, Some(w)) = (trivial, uniq) {
                    repl[p] = w;
                    // (the parameter's type, if a typed `let` gave it one, goes to `w`:
                    // `let total: usize = n;` after a loop)
                    f.int_links.push((p, w));
                    f.blocks[b].params.remove(i);
                    for &(pb, slot) in incoming {
                        f.blocks[pb].term.targets_mut()[slot].args.remove(i);
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut m = |v: Val| find(&mut repl, v);
    for blk in &mut f.blocks {
        for i in &mut blk.insts {
            map_inst_uses(i, &mut m);
        }
        map_term_uses(&mut blk.term, &mut m);
    }
}

/// Decide every integer value's type as Rust would: unify through operations, phis, indexing;
/// unconstrained integers are `i32`.
pub fn infer_ints(f: &mut Func) {
    let n = f.values.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], v: usize) -> usize {
        let mut r = v;
        while p[r] != r {
            r = p[r];
        }
        p[v] = r;
        r
    }
    let is_int = |f: &Func, v: Val| matches!(f.values[v].ty, Ty::Int(_));
    let unite = |p: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (root(p, a), root(p, b));
        if ra != rb {
            p[ra] = rb;
        }
    };
    for &(a, b) in &f.int_links {
        if is_int(f, a) && is_int(f, b) {
            unite(&mut parent, a, b);
        }
    }
    for blk in &f.blocks {
        for i in &blk.insts {
            match i {
                Inst::Int { dst, op, a, b } if is_int(f, *dst) => {
                    unite(&mut parent, *dst, *a);
                    if !matches!(op, IntOp::Shl | IntOp::Shr) {
                        unite(&mut parent, *dst, *b);
                    }
                }
                Inst::Cmp { a, b, .. } if is_int(f, *a) && is_int(f, *b) => {
                    unite(&mut parent, *a, *b)
                }
                _ => {}
            }
        }
        for t in blk.term.targets() {
            for (k, &a) in t.args.iter().enumerate() {
                let p = f.blocks[t.block].params[k];
                if is_int(f, a) && is_int(f, p) {
                    unite(&mut parent, a, p);
                }
            }
        }
    }
    // the elements of an integer array of open type are one class (`let idx = [2, 0];` read
    // as `x[idx[0]]` makes them `usize`)
    let mut elem_class: Vec<Option<Val>> = vec![None; f.slices.len()];
    for blk in &f.blocks {
        for i in &blk.insts {
            let (slice, v) = match i {
                Inst::Load { dst, slice, .. } => (*slice, *dst),
                Inst::Store { slice, val, .. } | Inst::Fill { slice, val } => (*slice, *val),
                _ => continue,
            };
            if f.slices[slice].elem == Ty::Int(None) && is_int(f, v) {
                match elem_class[slice] {
                    Some(first) => unite(&mut parent, first, v),
                    None => elem_class[slice] = Some(v),
                }
            }
        }
    }
    // indices are `usize`; loads and stores of integer slices have the element type
    let mut known: Vec<Option<IntTy>> = vec![None; n];
    for blk in &f.blocks {
        for i in &blk.insts {
            if let Inst::Load { idx, .. } | Inst::Store { idx, .. } = i {
                // (lowering types the index it reads, but a copy of a variable can be replaced
                // by the variable's own value later: `for i8 in 0..1 { … out[i8] … }` indexed
                // with an `i32`, a compile error in the generated code)
                known[*idx] = Some(IntTy::Usize);
            }
            if let Inst::Check { a, b, .. } = i {
                // an index and a length, or a sub-slice's bounds: a bound that is only passed
                // on (`let k = 1; g(&x[k..])`) is a `usize` too, not the `i32` default
                known[*a] = Some(IntTy::Usize);
                known[*b] = Some(IntTy::Usize);
            }
            match i {
                Inst::Load { dst, slice, .. } => {
                    if let Ty::Int(Some(t)) = f.slices[*slice].elem {
                        known[*dst] = Some(t);
                    }
                }
                Inst::Store { slice, val, .. } | Inst::Fill { slice, val } => {
                    if let Ty::Int(Some(t)) = f.slices[*slice].elem {
                        known[*val] = Some(t);
                    }
                }
                _ => {}
            }
        }
    }
    let mut class_ty: Vec<Option<IntTy>> = vec![None; n];
    for (v, kn) in known.iter().enumerate() {
        let t = match f.values[v].ty {
            Ty::Int(Some(t)) => Some(t),
            Ty::Int(None) => *kn,
            _ => continue,
        };
        if let Some(t) = t {
            let r = root(&mut parent, v);
            class_ty[r].get_or_insert(t);
        }
    }
    // An integer passed to another function whose type nothing here fixes is the callee's
    // parameter type in the function as written, which the macro does not see: it stays open
    // (a literal is then passed as written; anything else is an error in `adjoint::prepare`),
    // rather than become an `i32` that could overflow where the function as written does not.
    let mut open = vec![false; n];
    for blk in &f.blocks {
        for i in &blk.insts {
            if let Inst::Call { args, .. } = i {
                for a in args {
                    if let Arg::Val(v) = a {
                        if is_int(f, *v) {
                            let r = root(&mut parent, *v);
                            open[r] = class_ty[r].is_none();
                        }
                    }
                }
            }
        }
    }
    for v in 0..n {
        if let Ty::Int(_) = f.values[v].ty {
            let r = root(&mut parent, v);
            if !open[r] {
                let t = class_ty[r].unwrap_or(IntTy::I32);
                f.values[v].ty = Ty::Int(Some(t));
            }
        }
    }
    for (s, first) in elem_class.iter().enumerate() {
        if let Some(v) = first {
            f.slices[s].elem = f.values[*v].ty;
        }
    }
}
