//! Structured control flow from a CFG (Ramsey, "Beyond Relooper", 2022): a reducible CFG becomes
//! nested labelled `loop`s (backward edges are `continue 'l`) and labelled blocks (edges to join
//! points are `break 'b`); every other edge inlines its target's dominator subtree. The primal
//! CFG is always reducible (it comes from structured Rust); a reversed CFG is reducible unless a
//! loop had several exits, and then the caller falls back to a `loop { match blk { … } }`.

use proc_macro2::{Span, TokenStream};
use quote::quote;

/// A control-flow graph: `succ[b]` are the edge targets of `b` in edge order.
pub struct Cfg {
    /// Entry node.
    pub entry: usize,
    /// Successors per node.
    pub succ: Vec<Vec<usize>>,
}

/// What the structurer asks of the code generator.
pub trait Emit {
    /// The straight-line code of node `b`.
    fn body(&self, b: usize) -> TokenStream;
    /// The terminator of `b`; `jump(k)` is the code that takes edge `k` (already including
    /// [`Emit::edge`]).
    fn term(&self, b: usize, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream;
    /// Code on edge `k` of `b`, before control moves (phi copies, tags).
    fn edge(&self, b: usize, k: usize) -> TokenStream;
}

struct Info {
    rpo: Vec<usize>, // rpo number per node (usize::MAX: unreachable)
    idom: Vec<usize>,
    children: Vec<Vec<usize>>, // dominator-tree children that are merge nodes, by rpo
    header: Vec<bool>,
    merge: Vec<bool>,
}

fn analyse(cfg: &Cfg) -> Option<Info> {
    let n = cfg.succ.len();
    // reverse post-order
    let mut seen = vec![false; n];
    let mut post = vec![];
    let mut stack = vec![(cfg.entry, 0usize)];
    seen[cfg.entry] = true;
    while let Some(&mut (b, ref mut i)) = stack.last_mut() {
        if *i < cfg.succ[b].len() {
            let s = cfg.succ[b][*i];
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
    let order = post;
    let mut rpo = vec![usize::MAX; n];
    for (i, &b) in order.iter().enumerate() {
        rpo[b] = i;
    }
    let mut preds = vec![vec![]; n];
    for &b in &order {
        for &s in &cfg.succ[b] {
            preds[s].push(b);
        }
    }
    // Cooper–Harvey–Kennedy dominators
    let mut idom = vec![usize::MAX; n];
    idom[cfg.entry] = cfg.entry;
    let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while rpo[a] > rpo[b] {
                a = idom[a];
            }
            while rpo[b] > rpo[a] {
                b = idom[b];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new = usize::MAX;
            for &p in &preds[b] {
                if idom[p] == usize::MAX {
                    continue;
                }
                new = if new == usize::MAX {
                    p
                } else {
                    intersect(&idom, p, new)
                };
            }
            if new != idom[b] {
                idom[b] = new;
                changed = true;
            }
        }
    }
    let dominates = |a: usize, mut b: usize| loop {
        if a == b {
            return true;
        }
        if b == cfg.entry {
            return false;
        }
        b = idom[b];
    };
    let mut header = vec![false; n];
    let mut fwd_in = vec![0usize; n];
    for &b in &order {
        for &s in &cfg.succ[b] {
            if rpo[s] <= rpo[b] {
                if !dominates(s, b) {
                    return None; // irreducible
                }
                header[s] = true;
            } else {
                fwd_in[s] += 1;
            }
        }
    }
    let merge: Vec<bool> = fwd_in.iter().map(|&k| k >= 2).collect();
    let mut children = vec![vec![]; n];
    for &b in order.iter().skip(1) {
        if merge[b] {
            children[idom[b]].push(b);
        }
    }
    for c in &mut children {
        c.sort_by_key(|&b| rpo[b]);
    }
    Some(Info {
        rpo,
        idom,
        children,
        header,
        merge,
    })
}

enum Ctx {
    Loop(usize, syn::Lifetime),
    Block(usize, syn::Lifetime),
}

struct St<'a> {
    cfg: &'a Cfg,
    info: Info,
    emit: &'a dyn Emit,
    prefix: &'a str,
}

impl St<'_> {
    fn tree(&self, x: usize, ctx: &mut Vec<Ctx>) -> TokenStream {
        let ys = self.info.children[x].clone();
        if self.info.header[x] {
            let l = syn::Lifetime::new(&format!("'{}l{x}", self.prefix), Span::mixed_site());
            ctx.push(Ctx::Loop(x, l.clone()));
            let inner = self.within(x, &ys, ctx);
            ctx.pop();
            quote!(#l: loop { #inner })
        } else {
            self.within(x, &ys, ctx)
        }
    }

    fn within(&self, x: usize, ys: &[usize], ctx: &mut Vec<Ctx>) -> TokenStream {
        match ys.split_last() {
            None => {
                let body = self.emit.body(x);
                let term = self.emit.term(x, &mut |k| {
                    let e = self.emit.edge(x, k);
                    let j = self.branch(x, self.cfg.succ[x][k], ctx);
                    quote!(#e #j)
                });
                quote!(#body #term)
            }
            Some((&y, rest)) => {
                let l = syn::Lifetime::new(&format!("'{}b{y}", self.prefix), Span::mixed_site());
                ctx.push(Ctx::Block(y, l.clone()));
                let inner = self.within(x, rest, ctx);
                ctx.pop();
                let after = self.tree(y, ctx);
                quote!(#l: { #inner } #after)
            }
        }
    }

    fn branch(&self, from: usize, to: usize, ctx: &mut Vec<Ctx>) -> TokenStream {
        if self.info.rpo[to] <= self.info.rpo[from] {
            for c in ctx.iter().rev() {
                if let Ctx::Loop(h, l) = c {
                    if *h == to {
                        return quote!(continue #l;);
                    }
                }
            }
            unreachable!("backward edge to a loop header not in scope");
        }
        if self.info.merge[to] {
            for c in ctx.iter().rev() {
                if let Ctx::Block(y, l) = c {
                    if *y == to {
                        return quote!(break #l;);
                    }
                }
            }
            unreachable!("edge to a join not in scope");
        }
        self.tree(to, ctx)
    }
}

/// Structured code for `cfg`, or `None` when it is irreducible.
pub fn structured(cfg: &Cfg, emit: &dyn Emit) -> Option<TokenStream> {
    structured_in(cfg, emit, "")
}

/// [`structured`] with labels that start with `prefix` (for code nested in other structured
/// code whose labels it must not shadow).
pub fn structured_in(cfg: &Cfg, emit: &dyn Emit, prefix: &str) -> Option<TokenStream> {
    let info = analyse(cfg)?;
    let _ = &info.idom;
    let st = St {
        cfg,
        info,
        emit,
        prefix,
    };
    Some(st.tree(cfg.entry, &mut vec![]))
}

/// Whether [`structured`] succeeds on `cfg` (it is reducible).
pub fn reducible(cfg: &Cfg) -> bool {
    analyse(cfg).is_some()
}
