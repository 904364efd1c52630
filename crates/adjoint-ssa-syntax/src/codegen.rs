//! Rust generation: the primal and the pullback as state machines over block ids
//! (`loop { match blk { … } }`; LLVM threads the constant jumps into direct branches).
//!
//! Generated items for `fn f(x: &[f64], y: f64) -> f64`, in a module `f` beside the function:
//!
//! * `primal<T: Real>(x: &[T], y: T) -> T` — the function at any `Real` type (`Dual` for forward
//!   mode, or called by other differentiable functions);
//! * `pullback<T: Real>(ws, x, y, d_x, d_y, dret) -> T` — forward sweep with recording, then the
//!   reverse sweep; adds `dret ·` the gradient into `d_x`, `d_y`;
//! * `pullback_vec<T: Real, A: Cotangent<T>>(…)` — the body of `pullback` (which is
//!   `pullback_vec::<T, T>`) with adjoints of type `A` (several cotangents per sweep);
//! * `grad(x, y, d_x, d_y) -> f64` and `grad_with(ws, …)` — value and gradient (overwriting the
//!   buffers), with a thread-local or a given workspace (an empty one where the sweeps keep
//!   nothing: then no stack cursors are taken either).
//!
//! (The generated code names these generic parameters `__AdjointT` and `__AdjointA`: named `T`
//! and `A`, they shadowed a user's struct of that name in the signatures.) Locals are hygienic
//! (`Span::mixed_site`), so they never clash with user names. Derivatives
//! come from `rules::unary` / `rules::binary` of `adjoint-core`.

use crate::adjoint::{cheap_reads, Plan, RangeBase, TagMode};
use crate::ir::*;
use crate::structure::{structured, structured_in, Cfg, Emit};
use adjoint_core::rules::{Op1, Op2};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;

/// Code generator for one function.
pub struct Gen<'a> {
    /// the function
    pub f: &'a Func,
    /// its plan
    pub p: &'a Plan,
    /// path of the runtime crate (`::adjoint_ssa` or `::adjoint::ssa`)
    pub rt: &'a TokenStream,
    names: Names,
    /// Whether the sweeps push or pop on the workspace's stacks (set by `pullback_fn`): a
    /// function that keeps nothing between them (no loop-carried records, no calls) takes no
    /// cursors, and its `grad` no thread-local workspace.
    uses_ws: std::cell::Cell<bool>,
}

struct Names {
    ws: Ident,
    dret: Ident,
    /// adjoint parameter per function parameter (active ones)
    dparam: Vec<Option<Ident>>,
    /// adjoint parameter per active aggregate of the signature
    dagg: Vec<Option<Ident>>,
    /// flat parameters that are leaves of an aggregate
    in_agg: Vec<bool>,
    /// the place of a flat parameter's adjoint inside its struct's (`d_p.w`), for structs
    /// passed on to calls: those leaves are not bound to `&mut` locals, which would hold the
    /// struct's adjoint borrowed while the callee's pullback adds into it
    leaf_place: Vec<Option<TokenStream>>,
}

fn ms(s: &str) -> Ident {
    Ident::new(s, Span::mixed_site())
}

/// Whether `ts` names any of `ids` (a token walk, groups included).
fn mentions(ts: &TokenStream, ids: &[Ident]) -> bool {
    ts.clone().into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => ids.contains(&i),
        proc_macro2::TokenTree::Group(g) => mentions(&g.stream(), ids),
        _ => false,
    })
}

/// The cursors of the workspace's four stacks (reals, floats, ints, tags).
/// A slice `arg` (`&[T]`, `&mut [A]`) as whichever of `[T; N]`, `&[T; N]` or `&[T]` (or their
/// `&mut` adjoints) the callee's parameter is: the macro does not see it, and in the function as
/// written an array, or a reference to one or to its alias, may go to any of them.
fn to_param(arg: TokenStream) -> TokenStream {
    quote!(::core::result::Result::unwrap(::core::convert::TryInto::try_into(#arg)))
}

/// The place of each leaf of a call's result `base` of shape `ret`, depth first (`r.1[2]`).
fn ret_places(ret: &Ret, base: TokenStream) -> Vec<TokenStream> {
    match ret {
        Ret::Scalar => vec![base],
        Ret::Ignored => vec![],
        Ret::Array(n) => (0..*n).map(|k| quote!(#base[#k])).collect(),
        Ret::Tuple(m) => m
            .iter()
            .enumerate()
            .flat_map(|(k, r)| {
                let k = syn::Index::from(k);
                ret_places(r, quote!(#base.#k))
            })
            .collect(),
    }
}

/// A value of shape `ret` built from `leaves`, depth first (a call's cotangent).
fn ret_tokens(ret: &Ret, leaves: &mut impl Iterator<Item = TokenStream>) -> TokenStream {
    match ret {
        Ret::Scalar => leaves.next().expect("a leaf per result"),
        Ret::Ignored => quote!(()),
        Ret::Array(n) => {
            let e: Vec<TokenStream> = leaves.take(*n).collect();
            quote!([#(#e),*])
        }
        Ret::Tuple(m) => {
            let e: Vec<TokenStream> = m.iter().map(|r| ret_tokens(r, leaves)).collect();
            quote!((#(#e,)*))
        }
    }
}

fn cursors() -> [Ident; 4] {
    [ms("c_reals"), ms("c_floats"), ms("c_ints"), ms("c_tags")]
}

fn op1_tokens(op: Op1, rules: &TokenStream, n: Option<TokenStream>) -> TokenStream {
    match (op, n) {
        (Op1::Powi(_), Some(n)) => quote!(#rules::Op1::Powi(#n as i32)),
        (Op1::Polygamma(_), Some(n)) => quote!(#rules::Op1::Polygamma(#n as u32)),
        (Op1::Powi(k), None) => quote!(#rules::Op1::Powi(#k)),
        (Op1::Polygamma(k), None) => quote!(#rules::Op1::Polygamma(#k)),
        (op, _) => {
            let id = format_ident!("{}", format!("{op:?}"));
            quote!(#rules::Op1::#id)
        }
    }
}

fn op2_tokens(op: Op2, rules: &TokenStream) -> TokenStream {
    let id = format_ident!("{}", format!("{op:?}"));
    quote!(#rules::Op2::#id)
}

impl<'a> Gen<'a> {
    /// A generator for `f` with plan `p`.
    pub fn new(f: &'a Func, p: &'a Plan, rt: &'a TokenStream) -> Self {
        let mut taken: Vec<String> = f
            .params
            .iter()
            .map(|p| match p {
                Param::Scalar { name, .. } | Param::Slice { name, .. } => name.to_string(),
            })
            .collect();
        for it in &f.sig {
            if let SigItem::Agg(a) = it {
                taken.push(a.name.to_string());
            }
        }
        let fresh = |base: String| {
            let mut s = base;
            while taken.contains(&s) {
                s.push('_');
            }
            Ident::new(&s, Span::call_site())
        };
        let dparam = f
            .params
            .iter()
            .map(|pa| match pa {
                // (without `r#`: `d_r#type` is no identifier)
                Param::Scalar { name, val, .. }
                    if p.varied[*val] && f.values[*val].ty == Ty::F64 =>
                {
                    Some(fresh(format!("d_{}", name.unraw())))
                }
                Param::Slice { name, slice } if p.slice_active[*slice] => {
                    Some(fresh(format!("d_{}", name.unraw())))
                }
                _ => None,
            })
            .collect();
        let dagg: Vec<Option<Ident>> = f
            .sig
            .iter()
            .map(|it| match it {
                SigItem::Agg(a) if a.active => Some(fresh(format!("d_{}", a.name.unraw()))),
                _ => None,
            })
            .collect();
        let mut in_agg = vec![false; f.params.len()];
        for it in &f.sig {
            if let SigItem::Agg(a) = it {
                for l in &a.leaves {
                    in_agg[l.param] = true;
                }
            }
        }
        let passed: Vec<usize> = f
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter_map(|i| match i {
                Inst::Call { args, .. } => Some(args),
                _ => None,
            })
            .flatten()
            .filter_map(|a| match a {
                Arg::Struct(k, _) => Some(*k),
                _ => None,
            })
            .collect();
        let mut leaf_place = vec![None; f.params.len()];
        for (k, (it, d)) in f.sig.iter().zip(&dagg).enumerate() {
            if let (SigItem::Agg(a), Some(d), true) = (it, d, passed.contains(&k)) {
                for l in &a.leaves {
                    let path = &l.path;
                    leaf_place[l.param] = Some(quote!(#d #(.#path)*));
                }
            }
        }
        let names = Names {
            ws: fresh("ws".into()),
            dret: fresh("dret".into()),
            dparam,
            dagg,
            in_agg,
            leaf_place,
        };
        Gen {
            f,
            p,
            rt,
            names,
            uses_ws: std::cell::Cell::new(true),
        }
    }

    fn rules(&self) -> TokenStream {
        let rt = self.rt;
        quote!(#rt::__private::rules)
    }

    fn real(&self) -> TokenStream {
        let rt = self.rt;
        quote!(#rt::Real)
    }

    fn zero_t(&self) -> TokenStream {
        let real = self.real();
        quote!(<__AdjointT as #real>::cst(0.0))
    }

    /// What a scalar adjoint is reset to: `-0.0`, the exact identity of `+` (`-0.0 + v == v`
    /// for every `v`, `+0.0` is not: `+0.0 + -0.0 == +0.0`), so LLVM folds the first
    /// accumulation `ā += ∂ · ḡ` into a move. Slice adjoints (the user's buffers) keep `+0.0`.
    /// Adjoints have the pullback's cotangent type `A` (`T`, or several cotangents at once).
    fn adj_zero(&self) -> TokenStream {
        let rt = self.rt;
        quote!(<__AdjointA as #rt::Cotangent<__AdjointT>>::neg_zero())
    }

    /// What adjoint `g` sends through partial `d`: `g · d`, or, where `d` can be infinite while
    /// the value is finite (`unbounded`), `Cotangent::scale_by`, under which an adjoint that is
    /// exactly zero sends nothing (as on the tape): `(√x, 2x)` at 0 pulled back along (0, 1)
    /// gave NaN for ∂(2x)/∂x from `0 · ∞`.
    fn times(&self, g: TokenStream, d: TokenStream, unbounded: bool) -> TokenStream {
        if unbounded {
            let rt = self.rt;
            quote!(<__AdjointA as #rt::Cotangent<__AdjointT>>::scale_by(#g, #d))
        } else {
            quote!(#g * #d)
        }
    }

    /// `+0.0` of the cotangent type `A`: what adjoint buffers are cleared to.
    fn adj_clear(&self) -> TokenStream {
        let rt = self.rt;
        quote!(<__AdjointA as #rt::Cotangent<__AdjointT>>::zero())
    }

    /// What the cotangent of slice `s` is cleared to (initially, and where the reverse sweep
    /// passes a store): `+0.0` for the caller's slices, whose cotangents the caller reads back;
    /// `-0.0`, the exact additive identity, for local arrays, whose cotangents only flow into
    /// adjoints. A store's clear is then usually followed by the adjoint of a load of the same
    /// element (`a[r] += e` reads and writes `a[r]`): `d[r] = -0.0; d[r] += g` is `d[r] = g`
    /// for every `g`, which LLVM folds, where `+0.0 + g` turns `-0.0` into `+0.0` and must be
    /// computed and stored on every iteration.
    fn slice_clear(&self, s: SliceId) -> TokenStream {
        match self.f.slices[s].kind {
            SliceKind::Local { .. } => self.adj_zero(),
            SliceKind::Param { .. } => self.adj_clear(),
        }
    }

    fn v(&self, v: Val) -> Ident {
        ms(&format!("v{v}"))
    }
    fn a(&self, v: Val) -> Ident {
        ms(&format!("a{v}"))
    }

    fn is_t(&self, v: Val) -> bool {
        self.f.values[v].ty == Ty::F64 && self.p.varied[v]
    }

    fn active(&self, v: Val) -> bool {
        self.p.active(self.f, v)
    }

    fn ty(&self, v: Val) -> TokenStream {
        match self.f.values[v].ty {
            Ty::F64 => {
                if self.p.varied[v] {
                    quote!(__AdjointT)
                } else {
                    quote!(f64)
                }
            }
            Ty::Bool => quote!(bool),
            Ty::Int(t) => {
                // an integer of open type: only literals and constant expressions reach
                // calls, written out (see `passes::infer_ints`); the local is an `i64` (the
                // stacks keep 64 bits and give a signed value back)
                let id = format_ident!("{}", t.map_or("i64", IntTy::name));
                quote!(#id)
            }
        }
    }

    fn zero_of(&self, v: Val) -> TokenStream {
        match self.f.values[v].ty {
            Ty::F64 => {
                if self.p.varied[v] {
                    self.zero_t()
                } else {
                    quote!(0.0)
                }
            }
            Ty::Bool => quote!(false),
            Ty::Int(_) => quote!(0),
        }
    }

    /// The value as a `T` (lifting passive floats).
    fn tv(&self, v: Val) -> TokenStream {
        let id = self.v(v);
        if self.is_t(v) {
            quote!(#id)
        } else if self.f.values[v].ty == Ty::F64 {
            let real = self.real();
            quote!(<__AdjointT as #real>::cst(#id))
        } else {
            quote!(#id)
        }
    }

    fn slice(&self, s: SliceId) -> TokenStream {
        for p in &self.f.params {
            if let Param::Slice { name, slice } = p {
                if *slice == s {
                    return quote!(#name);
                }
            }
        }
        let id = ms(&format!("s{s}"));
        quote!(#id)
    }

    fn dslice(&self, s: SliceId) -> TokenStream {
        for (k, p) in self.f.params.iter().enumerate() {
            if let Param::Slice { slice, .. } = p {
                if *slice == s {
                    if let Some(place) = &self.names.leaf_place[k] {
                        return place.clone();
                    }
                    let d = self.names.dparam[k].as_ref().expect("active slice");
                    return quote!(#d);
                }
            }
        }
        let id = ms(&format!("ds{s}"));
        quote!(#id)
    }

    fn slice_elem_ty(&self, s: SliceId) -> TokenStream {
        match self.f.slices[s].elem {
            Ty::F64 => {
                if self.p.slice_active[s] {
                    quote!(__AdjointT)
                } else {
                    quote!(f64)
                }
            }
            Ty::Int(t) => {
                let id = format_ident!("{}", t.unwrap_or(IntTy::Usize).name());
                quote!(#id)
            }
            Ty::Bool => quote!(bool),
        }
    }

    /// A value converted to the element type of slice `s`.
    fn to_slice_elem(&self, s: SliceId, v: Val) -> TokenStream {
        if self.f.slices[s].elem == Ty::F64 && self.p.slice_active[s] {
            self.tv(v)
        } else {
            let id = self.v(v);
            quote!(#id)
        }
    }

    /// A call's argument in the forward sweep (`lift`: floats as `T`, the callee's `primal`)
    /// or as the primal argument of its pullback. An integer literal whose type nothing in this
    /// function fixes (`poly(x, 3)`) is passed as written, taking the callee's parameter type
    /// as in the function as written (any other integer of open type is refused by
    /// [`prepare`](crate::adjoint::prepare)).
    fn call_arg(&self, a: &Arg, lift: bool) -> TokenStream {
        let scalar = |v: Val| match self.f.values[v].ty {
            Ty::F64 if lift => self.tv(v),
            Ty::Int(None) => self
                .f
                .int_const_expr(v)
                .expect("an integer of open type passed on is a constant expression"),
            _ => {
                let id = self.v(v);
                quote!(#id)
            }
        };
        match a {
            Arg::Val(v) => scalar(*v),
            Arg::Slice(s) if lift && self.passive_floats(s.slice) => {
                let (rt, x) = (self.rt, self.slice_arg(s, false));
                self.call_slice(s, quote!(&*#rt::__private::lift::<__AdjointT>(#x)))
            }
            Arg::Slice(s) => self.call_slice(s, self.slice_arg(s, false)),
            Arg::Struct(k, how) => match &self.f.sig[*k] {
                SigItem::Agg(ap) if lift && !ap.active => {
                    // passive (the values at `f64`): lifted to `T` for the callee
                    let name = &ap.name;
                    let by_ref = matches!(ap.ty, syn::Type::Reference(_));
                    let this = if by_ref {
                        quote!(#name)
                    } else {
                        quote!(&#name)
                    };
                    let rt = self.rt;
                    let l = quote!(#rt::Differentiable::lift::<__AdjointT>(#this));
                    match how {
                        StructArg::Deref => l,
                        StructArg::Plain if !by_ref => l,
                        _ => quote!(&#l),
                    }
                }
                SigItem::Agg(ap) => {
                    let name = &ap.name;
                    match how {
                        StructArg::Ref => quote!(&#name),
                        StructArg::Deref => quote!(*#name),
                        // taken by value: the pullback needs it again
                        StructArg::Plain if !matches!(ap.ty, syn::Type::Reference(_)) => {
                            quote!(::core::clone::Clone::clone(&#name))
                        }
                        StructArg::Plain => quote!(#name),
                    }
                }
                SigItem::Leaf(_) => unreachable!("a struct parameter"),
            },
            Arg::Elems { vals } => {
                let e = vals.iter().map(|v| match self.f.values[*v].ty {
                    Ty::F64 if lift => self.tv(*v),
                    _ => {
                        let id = self.v(*v);
                        quote!(#id)
                    }
                });
                to_param(quote!(&[#(#e),*][..]))
            }
        }
    }

    /// A slice of `f64`s without adjoint (a passive parameter).
    fn passive_floats(&self, s: SliceId) -> bool {
        self.f.slices[s].elem == Ty::F64 && !self.p.slice_active[s]
    }

    /// `arg`, a (sub-)slice of `s` or of its adjoint, as a call's argument: a parameter of
    /// array type (`p: [f64; 3]`, `q: &[f64; 3]`) may be passed to a callee taking `[f64; 3]`,
    /// `&[f64; 3]` or `&[f64]`, which the macro does not see, so it is converted to whichever
    /// that is (the function as written, compiled beside, checks that the types fit).
    /// So is an array field of a struct or tuple parameter (`&p.b`, `&t.1`): the macro does not
    /// see the struct's definition either.
    fn call_slice(&self, s: &SliceArg, arg: TokenStream) -> TokenStream {
        let leaf = self.f.params.iter().enumerate().any(|(k, p)| {
            matches!(p, Param::Slice { slice, .. } if *slice == s.slice) && self.names.in_agg[k]
        });
        if self.f.slices[s.slice].array.is_some() || leaf {
            to_param(arg)
        } else {
            arg
        }
    }

    fn slice_arg(&self, sa: &SliceArg, adjoint: bool) -> TokenStream {
        let base = if adjoint {
            self.dslice(sa.slice)
        } else {
            self.slice(sa.slice)
        };
        let lo = sa.lo.map(|v| self.v(v));
        let hi = sa.hi.map(|v| self.v(v));
        let range = match (lo, hi) {
            (None, None) => quote!(..),
            (Some(l), None) => quote!(#l..),
            (None, Some(h)) => quote!(..#h),
            (Some(l), Some(h)) => quote!(#l..#h),
        };
        if adjoint {
            quote!(&mut #base[#range])
        } else {
            quote!(&#base[#range])
        }
    }

    // ---- signatures ----

    /// A type as written with `f64` replaced by `t` and each struct `S` by
    /// `<S as Differentiable>::Of<t>`.
    fn map_ty(&self, ty: &syn::Type, t: &TokenStream) -> TokenStream {
        let rt = self.rt;
        match ty {
            syn::Type::Path(p) if p.qself.is_none() => match p.path.get_ident() {
                Some(id) if id == "f64" => t.clone(),
                Some(id) if IntTy::from_name(&id.to_string()).is_some() || id == "bool" => {
                    quote!(#p)
                }
                _ => quote!(<#p as #rt::Differentiable>::Of<#t>),
            },
            syn::Type::Array(a) => {
                let (e, n) = (self.map_ty(&a.elem, t), &a.len);
                quote!([#e; #n])
            }
            syn::Type::Slice(a) => {
                let e = self.map_ty(&a.elem, t);
                quote!([#e])
            }
            syn::Type::Tuple(tt) => {
                let es: Vec<TokenStream> = tt.elems.iter().map(|e| self.map_ty(e, t)).collect();
                quote!((#(#es,)*))
            }
            syn::Type::Reference(r) => {
                let e = self.map_ty(&r.elem, t);
                if r.mutability.is_some() {
                    quote!(&mut #e)
                } else {
                    quote!(&#e)
                }
            }
            syn::Type::Paren(p) => self.map_ty(&p.elem, t),
            other => quote!(#other),
        }
    }

    /// The zero of a (mapped) type: `T::cst(0.0)`, arrays, tuples, `Differentiable::zero()`.
    fn zero_of_ty(&self, ty: &syn::Type) -> TokenStream {
        let rt = self.rt;
        match ty {
            syn::Type::Array(a) => {
                let (e, n) = (self.zero_of_ty(&a.elem), &a.len);
                quote!([#e; #n])
            }
            syn::Type::Tuple(tt) => {
                let es: Vec<TokenStream> = tt.elems.iter().map(|e| self.zero_of_ty(e)).collect();
                quote!((#(#es,)*))
            }
            syn::Type::Paren(p) => self.zero_of_ty(&p.elem),
            syn::Type::Path(p) if p.path.is_ident("f64") => self.zero_t(),
            t => {
                let m = self.map_ty(t, &quote!(__AdjointT));
                quote!(<#m as #rt::Differentiable>::zero())
            }
        }
    }

    fn leaf_decl(&self, k: usize, generic: bool) -> TokenStream {
        match &self.f.params[k] {
            Param::Scalar { name, val, .. } => {
                let t = if generic {
                    self.ty(*val)
                } else {
                    match self.f.values[*val].ty {
                        Ty::F64 => quote!(f64),
                        _ => self.ty(*val),
                    }
                };
                quote!(#name: #t)
            }
            Param::Slice { name, slice } => {
                let e = if generic {
                    self.slice_elem_ty(*slice)
                } else {
                    match self.f.slices[*slice].elem {
                        Ty::F64 => quote!(f64),
                        _ => self.slice_elem_ty(*slice),
                    }
                };
                let si = &self.f.slices[*slice];
                let m = if si.mutable() {
                    quote!(&mut)
                } else {
                    quote!(&)
                };
                match &si.array {
                    Some(ArrayTy { len, by_ref: true }) => quote!(#name: #m [#e; #len]),
                    Some(ArrayTy { len, by_ref: false }) => quote!(#name: [#e; #len]),
                    None => quote!(#name: #m [#e]),
                }
            }
        }
    }

    fn param_decls(&self, generic: bool) -> Vec<TokenStream> {
        self.f
            .sig
            .iter()
            .map(|it| match it {
                SigItem::Leaf(k) => self.leaf_decl(*k, generic),
                SigItem::Agg(a) => {
                    let name = &a.name;
                    if generic && a.active {
                        let t = self.map_ty(&a.ty, &quote!(__AdjointT));
                        quote!(#name: #t)
                    } else {
                        let t = &a.ty;
                        quote!(#name: #t)
                    }
                }
            })
            .collect()
    }

    fn dparam_decls(&self, t: TokenStream) -> Vec<TokenStream> {
        self.f
            .sig
            .iter()
            .zip(&self.names.dagg)
            .filter_map(|(it, da)| match it {
                SigItem::Leaf(k) => {
                    let d = self.names.dparam[*k].as_ref()?;
                    Some(match &self.f.params[*k] {
                        Param::Scalar { .. } => quote!(#d: &mut #t),
                        Param::Slice { slice, .. } => match &self.f.slices[*slice].array {
                            Some(ArrayTy { len, .. }) => quote!(#d: &mut [#t; #len]),
                            None => quote!(#d: &mut [#t]),
                        },
                    })
                }
                SigItem::Agg(a) => {
                    let d = da.as_ref()?;
                    let inner = match &a.ty {
                        syn::Type::Reference(r) => &*r.elem,
                        ty => ty,
                    };
                    let ty = if t.to_string() == "f64" {
                        quote!(#inner)
                    } else {
                        self.map_ty(inner, &t)
                    };
                    Some(quote!(#d: &mut #ty))
                }
            })
            .collect()
    }

    fn param_names(&self) -> Vec<TokenStream> {
        self.f
            .sig
            .iter()
            .map(|it| match it {
                SigItem::Leaf(k) => match &self.f.params[*k] {
                    Param::Scalar { name, .. } | Param::Slice { name, .. } => quote!(#name),
                },
                SigItem::Agg(a) => {
                    let n = &a.name;
                    quote!(#n)
                }
            })
            .collect()
    }

    fn dparam_names(&self) -> Vec<Ident> {
        self.f
            .sig
            .iter()
            .zip(&self.names.dagg)
            .filter_map(|(it, da)| match it {
                SigItem::Leaf(k) => self.names.dparam[*k].clone(),
                SigItem::Agg(_) => da.clone(),
            })
            .collect()
    }

    fn leaf_in_agg(&self, pa: &Param) -> bool {
        let k = self
            .f
            .params
            .iter()
            .position(|q| std::ptr::eq(q, pa))
            .expect("a parameter of this function");
        self.names.in_agg[k]
    }

    /// Bind the leaves of aggregate parameters (and, in the pullback, of their adjoints).
    fn agg_prologue(&self, adjoints: bool) -> TokenStream {
        let mut out = TokenStream::new();
        for (it, da) in self.f.sig.iter().zip(&self.names.dagg) {
            let SigItem::Agg(a) = it else { continue };
            let name = &a.name;
            for l in &a.leaves {
                let path = &l.path;
                let span = l.span;
                match &self.f.params[l.param] {
                    Param::Scalar { name: ln, val, .. } => {
                        let t = self.ty(*val);
                        out.extend(quote_spanned!(span=> let #ln: #t = #name #(.#path)*;));
                    }
                    Param::Slice { name: ln, slice } => {
                        let e = self.slice_elem_ty(*slice);
                        out.extend(quote_spanned!(span=> let #ln: &[#e] = &#name #(.#path)*;));
                    }
                }
                if !adjoints {
                    continue;
                }
                let (Some(d), Some(dl)) = (da, &self.names.dparam[l.param]) else {
                    continue;
                };
                if self.names.leaf_place[l.param].is_some() {
                    continue;
                }
                match &self.f.params[l.param] {
                    Param::Scalar { .. } => out.extend(
                        quote_spanned!(span=> let #dl: &mut __AdjointA = &mut #d #(.#path)*;),
                    ),
                    Param::Slice { .. } => out.extend(
                        quote_spanned!(span=> let #dl: &mut [__AdjointA] = &mut #d #(.#path)*;),
                    ),
                }
            }
        }
        out
    }

    /// The result built from the hidden result arrays.
    fn build_ret(&self) -> TokenStream {
        let Some(ra) = &self.f.ret_agg else {
            return quote!();
        };
        let ty = self.map_ty(&ra.ty, &quote!(__AdjointT));
        let z = self.zero_of_ty(&ra.ty);
        let r = ms("r");
        let mut sets = TokenStream::new();
        for l in &ra.leaves {
            let (path, s) = (&l.path, self.slice(l.slice));
            if l.scalar {
                sets.extend(quote!(#r #(.#path)* = #s[0];));
            } else {
                sets.extend(quote!(#r #(.#path)* = #s;));
            }
        }
        quote!({ let mut #r: #ty = #z; #sets #r })
    }

    // ---- bodies ----

    fn decls(&self, adjoints: bool) -> TokenStream {
        let mut out = TokenStream::new();
        for v in 0..self.f.values.len() {
            if self.p.def_block[v].is_none() {
                continue;
            }
            let (id, ty, z) = (self.v(v), self.ty(v), self.zero_of(v));
            out.extend(quote!(let mut #id: #ty = #z;));
            if adjoints && self.active(v) {
                let (a, zt) = (self.a(v), self.adj_zero());
                out.extend(quote!(let mut #a: __AdjointA = #zt;));
            }
        }
        for (s, si) in self.f.slices.iter().enumerate() {
            if let SliceKind::Local { len, .. } = &si.kind {
                let id = ms(&format!("s{s}"));
                let et = self.slice_elem_ty(s);
                let z = match si.elem {
                    Ty::F64 if self.p.slice_active[s] => self.zero_t(),
                    Ty::F64 => quote!(0.0),
                    _ => quote!(0),
                };
                out.extend(quote!(let mut #id: [#et; #len] = [#z; #len];));
                if adjoints && self.p.slice_active[s] {
                    let d = ms(&format!("ds{s}"));
                    let zt = self.slice_clear(s);
                    out.extend(quote!(let mut #d: [__AdjointA; #len] = [#zt; #len];));
                }
            }
        }
        if adjoints {
            for b in 0..self.f.blocks.len() {
                if self.p.tag[b] == TagMode::Local {
                    let t = ms(&format!("tag{b}"));
                    out.extend(quote!(let mut #t: u32 = 0;));
                }
                if let Some(fz) = &self.p.fused[b] {
                    for j in 0..fz.carried.len() {
                        let (id, nz) = (ms(&format!("fz{b}_{j}")), self.adj_zero());
                        out.extend(quote!(let mut #id: __AdjointA = #nz;));
                    }
                }
                if let Some(c) = &self.p.counted[b] {
                    let (cnt, lo, ty) =
                        (ms(&format!("cnt{b}")), ms(&format!("lo{b}")), self.ty(c.k));
                    out.extend(quote!(let mut #cnt: #ty = 0; let mut #lo: #ty = 0;));
                    for r in self.p.range_bases(b) {
                        let rb = self.rb(b, r);
                        out.extend(quote!(let mut #rb: usize = 0;));
                    }
                }
            }
        }
        // entry parameters
        for pa in &self.f.params {
            if let Param::Scalar { name, val, .. } = pa {
                let id = self.v(*val);
                out.extend(quote!(#id = #name;));
            }
        }
        out
    }

    /// Forward code of one instruction.
    fn inst(&self, inst: &Inst, in_primal_fn: bool) -> TokenStream {
        let rules = self.rules();
        let real = self.real();
        let f = self.f;
        match inst {
            Inst::Const { dst, c } => {
                let (d, t) = (self.v(*dst), &c.tokens);
                quote!(#d = #t;)
            }
            Inst::Un {
                dst,
                op,
                a,
                n,
                partial,
            } => {
                let d = self.v(*dst);
                let opt = op1_tokens(
                    *op,
                    &rules,
                    n.map(|n| {
                        let id = self.v(n);
                        quote!(#id)
                    }),
                );
                if let Some(pd) = partial.filter(|&p| !in_primal_fn && p != *dst) {
                    let (pd, x) = (self.v(pd), self.tv(*a));
                    return quote!({ let r = #rules::unary(#opt, #x); #d = r.value; #pd = r.d; });
                }
                let x = self.v(*a);
                if *op == Op1::Neg {
                    quote!(#d = -#x;)
                } else {
                    quote!(#d = #rules::unary(#opt, #x).value;)
                }
            }
            Inst::Bin {
                dst,
                op,
                a,
                b,
                partials,
            } => {
                let d = self.v(*dst);
                let opt = op2_tokens(*op, &rules);
                if partials.iter().any(|p| p.is_some()) && !in_primal_fn {
                    let (x, y) = (self.tv(*a), self.tv(*b));
                    let mut sets = quote!();
                    if let Some(p) = partials[0] {
                        let p = self.v(p);
                        sets.extend(quote!(#p = r.dx;));
                    }
                    if let Some(p) = partials[1] {
                        let p = self.v(p);
                        sets.extend(quote!(#p = r.dy;));
                    }
                    return quote!({ let r = #rules::binary(#opt, #x, #y); #d = r.value; #sets });
                }
                let (x, y) = if self.is_t(*dst) {
                    // T op T, T op f64 are direct; f64 op T lifts the left operand
                    let y = self.v(*b);
                    if self.is_t(*a) {
                        let x = self.v(*a);
                        (quote!(#x), quote!(#y))
                    } else {
                        (self.tv(*a), quote!(#y))
                    }
                } else {
                    let (x, y) = (self.v(*a), self.v(*b));
                    (quote!(#x), quote!(#y))
                };
                let native = match op {
                    Op2::Add => Some(quote!(#x + #y)),
                    Op2::Sub => Some(quote!(#x - #y)),
                    Op2::Mul => Some(quote!(#x * #y)),
                    Op2::Div => Some(quote!(#x / #y)),
                    _ => None,
                };
                match native {
                    Some(e) => quote!(#d = #e;),
                    None => {
                        let (x, y) = if self.is_t(*dst) {
                            (self.tv(*a), self.tv(*b))
                        } else {
                            (x, y)
                        };
                        quote!(#d = #rules::binary(#opt, #x, #y).value;)
                    }
                }
            }
            Inst::Pass { dst, op, a } => {
                let d = self.v(*dst);
                let x = self.v(*a);
                let m = format_ident!(
                    "{}",
                    match op {
                        PassOp::Floor => "floor",
                        PassOp::Ceil => "ceil",
                        PassOp::Round => "round",
                        PassOp::Trunc => "trunc",
                        PassOp::Signum => "signum",
                    }
                );
                if self.is_t(*a) {
                    quote!(#d = <__AdjointT as #real>::value(&#x).#m();)
                } else {
                    quote!(#d = #x.#m();)
                }
            }
            Inst::Int { dst, op, a, b } => {
                let (d, x, y) = (self.v(*dst), self.v(*a), self.v(*b));
                let e = match op {
                    IntOp::Add => quote!(#x + #y),
                    IntOp::Sub => quote!(#x - #y),
                    IntOp::Mul => quote!(#x * #y),
                    IntOp::Div => quote!(#x / #y),
                    IntOp::Rem => quote!(#x % #y),
                    IntOp::BitAnd => quote!(#x & #y),
                    IntOp::BitOr => quote!(#x | #y),
                    IntOp::BitXor => quote!(#x ^ #y),
                    IntOp::Shl => quote!(#x << #y),
                    IntOp::Shr => quote!(#x >> #y),
                    IntOp::Min => quote!(::core::cmp::min(#x, #y)),
                    IntOp::Max => quote!(::core::cmp::max(#x, #y)),
                };
                quote!(#d = #e;)
            }
            Inst::Cmp { dst, op, a, b } => {
                let d = self.v(*dst);
                let (x, y) = if self.is_t(*a) && !self.is_t(*b) && f.values[*b].ty == Ty::F64 {
                    let (x, y) = (self.v(*a), self.v(*b));
                    (quote!(#x), quote!(#y))
                } else if self.is_t(*b) && !self.is_t(*a) {
                    (self.tv(*a), {
                        let y = self.v(*b);
                        quote!(#y)
                    })
                } else {
                    let (x, y) = (self.v(*a), self.v(*b));
                    (quote!(#x), quote!(#y))
                };
                let e = match op {
                    CmpOp::Lt => quote!(#x < #y),
                    CmpOp::Le => quote!(#x <= #y),
                    CmpOp::Gt => quote!(#x > #y),
                    CmpOp::Ge => quote!(#x >= #y),
                    CmpOp::Eq => quote!(#x == #y),
                    CmpOp::Ne => quote!(#x != #y),
                };
                quote!(#d = #e;)
            }
            Inst::Not { dst, a } => {
                let (d, x) = (self.v(*dst), self.v(*a));
                quote!(#d = !#x;)
            }
            Inst::Cast { dst, a, checked } => {
                let (d, x) = (self.v(*dst), self.v(*a));
                let t = self.ty(*dst);
                if let Some(check) = checked {
                    let msg = check.message(&t.to_string());
                    let below_max = if check.end_inclusive {
                        quote!(.filter(|v| *v != #t::MAX))
                    } else {
                        quote!()
                    };
                    quote!(#d = <#t as ::core::convert::TryFrom<_>>::try_from(#x).ok()#below_max
                        .unwrap_or_else(|| ::core::panic!("{}", #msg));)
                } else if self.is_t(*a) {
                    quote!(#d = <__AdjointT as #real>::value(&#x) as #t;)
                } else {
                    quote!(#d = #x as #t;)
                }
            }
            Inst::Len { dst, slice } => {
                let (d, s) = (self.v(*dst), self.slice(*slice));
                quote!(#d = #s.len();)
            }
            // (an index out of bounds is reported at the user's `x[i]`, not the attribute)
            Inst::Load {
                dst,
                slice,
                idx,
                span,
            } => {
                let (d, s, i) = (self.v(*dst), self.slice(*slice), self.v(*idx));
                quote_spanned!(*span=> #d = (#s)[#i];)
            }
            Inst::Store {
                slice,
                idx,
                val,
                span,
            } => {
                let (s, i) = (self.slice(*slice), self.v(*idx));
                let x = self.to_slice_elem(*slice, *val);
                quote_spanned!(*span=> (#s)[#i] = #x;)
            }
            Inst::Fill { slice, val } => {
                let s = self.slice(*slice);
                let x = self.to_slice_elem(*slice, *val);
                quote!(#s.fill(#x);)
            }
            Inst::Assert {
                cond,
                msg,
                debug,
                span,
            } => {
                let c = self.v(*cond);
                let on = if *debug {
                    quote!(::core::cfg!(debug_assertions) &&)
                } else {
                    quote!()
                };
                // the panic's location is the user's `assert!` (or the checked call), not the
                // attribute's line
                quote_spanned!(*span=> if #on !#c { ::core::panic!("{}", #msg) })
            }
            Inst::Check { a, b, what, span } => {
                let (a, b, rt) = (self.v(*a), self.v(*b), self.rt);
                let fail = match *what {
                    "index" => quote!(#rt::__private::sub_slice_index_failed),
                    _ => quote!(#rt::__private::sub_slice_range_failed),
                };
                // (reported at the user's `w[i]` or `&x[a..b]`: the call's parentheses carry
                // its span)
                quote_spanned!(*span=> if #a >= #b { (#fail)(#a, #b) })
            }
            Inst::Call {
                dsts,
                ret,
                func,
                args,
            } => {
                // a dropped result has no value to say: then whether an argument varies
                let varied = dsts.iter().any(|d| self.p.varied[*d])
                    || (dsts.is_empty()
                        && args.iter().any(|a| match a {
                            Arg::Val(v) => self.p.varied[*v],
                            Arg::Slice(s) => self.p.slice_active[s.slice],
                            Arg::Elems { vals } => vals.iter().any(|v| self.p.varied[*v]),
                            Arg::Struct(k, _) => {
                                matches!(&f.sig[*k], SigItem::Agg(a) if a.active)
                            }
                        }));
                let a: Vec<TokenStream> = args.iter().map(|a| self.call_arg(a, varied)).collect();
                let call = if varied {
                    quote!(#func::primal::<__AdjointT>(#(#a),*))
                } else {
                    quote!(#func(#(#a),*))
                };
                // spanned at the call: where the callee's result has another shape than the
                // caller binds (`let (u, n) = f(x);` with `u` an array), rustc points there
                let sp = func.span();
                if *ret == Ret::Ignored {
                    quote_spanned!(sp=> let _ = #call;)
                } else if *ret == Ret::Scalar {
                    let d = self.v(dsts[0]);
                    quote_spanned!(sp=> #d = #call;)
                } else {
                    let r = ms("r");
                    let reads = dsts
                        .iter()
                        .zip(ret_places(ret, quote!(#r)))
                        .map(|(d, place)| {
                            let d = self.v(*d);
                            quote_spanned!(sp=> #d = #place;)
                        });
                    quote!({ let #r = #call; #(#reads)* })
                }
            }
            Inst::Rule {
                dst,
                rule,
                args,
                partials,
            } => {
                let d = self.v(*dst);
                let rule_fn = rule;
                let rule = rule.path(self.rt);
                if self.p.varied[*dst] {
                    let a: Vec<TokenStream> = args.iter().map(|v| self.tv(*v)).collect();
                    let mut sets = quote!();
                    if !in_primal_fn {
                        for (k, p) in partials.iter().enumerate() {
                            if let Some(p) = p {
                                let p = self.v(*p);
                                sets.extend(quote!(#p = r.1[#k];));
                            }
                        }
                    }
                    // typed, so that a rule with the wrong number of partials is a compile
                    // error at its name in the attribute
                    let n = args.len();
                    let (call, check) = match &rule_fn {
                        RuleFn::User(p) => {
                            let sp = p.span();
                            let name = quote!(#p).to_string().replace(' ', "");
                            let rt = self.rt;
                            (
                                quote_spanned!(sp=> let r: (__AdjointT, [__AdjointT; #n]) = #rule::<__AdjointT>(#(#a),*);),
                                quote!(#rt::__private::check_rule::<__AdjointT, #n>([#(#a),*], &r, #name);),
                            )
                        }
                        RuleFn::Builtin(_) => {
                            (quote!(let r = #rule::<__AdjointT>(#(#a),*);), quote!())
                        }
                    };
                    quote!({ #call #check #d = r.0; #sets })
                } else {
                    let a: Vec<Ident> = args.iter().map(|v| self.v(*v)).collect();
                    quote!(#d = #rule::<f64>(#(#a),*).0;)
                }
            }
        }
    }

    /// The stack (index into [`cursors`]) a pushed value goes to.
    fn stack_of(&self, v: Val) -> usize {
        match self.f.values[v].ty {
            Ty::F64 if self.p.varied[v] => 0,
            Ty::F64 => 1,
            Ty::Int(_) | Ty::Bool => 2,
        }
    }

    /// Push `v`; `reserved`: into room reserved on entry to its innermost counted loop.
    fn push(&self, v: Val, reserved: bool) -> TokenStream {
        let id = self.v(v);
        let c = &cursors()[self.stack_of(v)];
        let m = if reserved {
            quote!(push_reserved)
        } else {
            quote!(push)
        };
        match self.f.values[v].ty {
            Ty::Int(_) | Ty::Bool => quote!(#c.#m(#id as u64);),
            Ty::F64 => quote!(#c.#m(#id);),
        }
    }

    /// On entry to an innermost counted loop `h` (whose blocks run at most once per
    /// iteration): reserve the room its pushes and tags can take.
    fn reserve(&self, h: BlockId, start: Val) -> TokenStream {
        if self.p.fused[h].is_some() {
            // a fused loop pushes nothing, and its tags are popped in the iteration that
            // pushed them: room for one iteration's, grown by `push`, not the trip count's
            return quote!();
        }
        let c = self.p.counted[h].as_ref().expect("counted loop");
        let mut per = [0usize; 4];
        let mut tagged = vec![];
        for b in (0..self.f.blocks.len()).filter(|&b| c.body[b]) {
            for v in &self.p.pushes[b] {
                per[self.stack_of(*v)] += 1;
            }
            for t in self.f.blocks[b].term.targets() {
                if c.body[t.block]
                    && self.p.tag[t.block] == TagMode::Stack
                    && !tagged.contains(&t.block)
                {
                    tagged.push(t.block);
                    per[3] += 1;
                }
            }
        }
        if per.iter().all(|&n| n == 0) {
            return quote!();
        }
        let (s, e) = (self.v(start), self.v(c.end));
        let trip = ms("trip");
        let mut out = quote! {
            let #trip: usize = if #s < #e { (#e as i128 - #s as i128) as usize } else { 0 }.saturating_add(1);
        };
        for (k, cur) in cursors().iter().enumerate() {
            let n = per[k];
            if n > 0 {
                out.extend(quote!(#cur.reserve(#trip.saturating_mul(#n));));
            }
        }
        quote!({ #out })
    }

    fn pop(&self, v: Val) -> TokenStream {
        let (id, t) = (self.v(v), self.ty(v));
        let [cr, cf, ci, _] = cursors();
        match self.f.values[v].ty {
            Ty::F64 if self.p.varied[v] => quote!(#id = #cr.pop();),
            Ty::F64 => quote!(#id = #cf.pop();),
            Ty::Bool => quote!(#id = #ci.pop() != 0;),
            Ty::Int(_) => quote!(#id = #ci.pop() as #t;),
        }
    }

    fn acquire_cursors(&self, declare: bool) -> TokenStream {
        let ws = &self.names.ws;
        let [cr, cf, ci, ct] = cursors();
        let l = if declare { quote!(let mut) } else { quote!() };
        quote! {
            #l #cr = #ws.reals.cursor();
            #l #cf = #ws.floats.cursor();
            #l #ci = #ws.ints.cursor();
            #l #ct = #ws.tags.cursor();
        }
    }

    fn commit_cursors(&self) -> TokenStream {
        let [cr, cf, ci, ct] = cursors();
        quote!(#cr.commit(); #cf.commit(); #ci.commit(); #ct.commit();)
    }

    /// Code for taking edge `(from, slot)` to `t`.
    fn edge(&self, from: BlockId, slot: usize, t: &Target, record: bool) -> TokenStream {
        let mut out = TokenStream::new();
        let inner = self.p.reserved_loop(from);
        if let (true, Some(c), true) = (
            record,
            &self.p.counted[t.block],
            self.p.fused[t.block].is_some(),
        ) {
            if self.p.preds[t.block][c.entry] == (from, slot) {
                out.extend(self.fused_entry(t.block));
            } else {
                out.extend(self.fused_iteration(t.block));
            }
        }
        if record {
            if let Some(c) = &self.p.counted[t.block] {
                if self.p.preds[t.block][c.entry] == (from, slot) {
                    out.extend(self.fwd_range_entry(t.block));
                }
                if c.innermost && self.p.preds[t.block][c.entry] == (from, slot) {
                    let kp = self.f.blocks[t.block]
                        .params
                        .iter()
                        .position(|&x| x == c.k)
                        .expect("the counter is a header parameter");
                    out.extend(self.reserve(t.block, t.args[kp]));
                }
            }
        }
        if record {
            let e = self.p.preds[t.block]
                .iter()
                .position(|&x| x == (from, slot))
                .unwrap() as u32;
            match self.p.tag[t.block] {
                TagMode::None | TagMode::Counted | TagMode::Any => {}
                TagMode::Local => {
                    let tag = ms(&format!("tag{}", t.block));
                    out.extend(quote!(#tag = #e;));
                }
                TagMode::Stack => {
                    let ct = &cursors()[3];
                    let reserved = inner.is_some_and(|h| {
                        self.p.fused[h].is_none()
                            && self.p.counted[h].as_ref().unwrap().body[t.block]
                    });
                    if reserved {
                        out.extend(quote!(#ct.push_reserved(#e);));
                    } else {
                        out.extend(quote!(#ct.push(#e);));
                    }
                }
            }
        }
        let params = &self.f.blocks[t.block].params;
        let conv = |p: Val, a: Val| -> TokenStream {
            if self.is_t(p) {
                self.tv(a)
            } else {
                let id = self.v(a);
                quote!(#id)
            }
        };
        let clash = params.len() > 1 && t.args.iter().any(|a| params.contains(a));
        if clash {
            let tmps: Vec<Ident> = (0..params.len()).map(|k| ms(&format!("t{k}"))).collect();
            for (k, (p, a)) in params.iter().zip(&t.args).enumerate() {
                let (tmp, e) = (&tmps[k], conv(*p, *a));
                out.extend(quote!(let #tmp = #e;));
            }
            for (k, p) in params.iter().enumerate() {
                let (pid, tmp) = (self.v(*p), &tmps[k]);
                out.extend(quote!(#pid = #tmp;));
            }
        } else {
            for (p, a) in params.iter().zip(&t.args) {
                if p == a {
                    continue;
                }
                let (pid, e) = (self.v(*p), conv(*p, *a));
                out.extend(quote!(#pid = #e;));
            }
        }
        out
    }

    fn edge_sm(&self, from: BlockId, slot: usize, t: &Target, record: bool) -> TokenStream {
        let e = self.edge(from, slot, t, record);
        let b = t.block as u32;
        let blk = ms("blk");
        quote!(#e #blk = #b;)
    }

    fn fwd_body(&self, b: BlockId, record: bool) -> TokenStream {
        let mut body = TokenStream::new();
        for (k, i) in self.f.blocks[b].insts.iter().enumerate() {
            match (record, self.p.ranged[b][k], i) {
                (true, Some((h, base)), Inst::Load { dst, slice, .. }) => {
                    let (d, s, ix) = (self.v(*dst), self.slice(*slice), self.fwd_ranged(h, base));
                    // SAFETY: `ix` is `rb + counter` with the counter in `[start, end)`, and
                    // `rb + end <= s.len()` was checked on entering the loop (`fwd_range_entry`).
                    body.extend(quote!(#d = unsafe { *#s.get_unchecked(#ix) };));
                }
                (true, Some((h, base)), Inst::Store { slice, val, .. }) => {
                    let (s, ix) = (self.slice(*slice), self.fwd_ranged(h, base));
                    let x = self.to_slice_elem(*slice, *val);
                    // SAFETY: as for the load above.
                    body.extend(quote!(unsafe { *#s.get_unchecked_mut(#ix) = #x; }));
                }
                _ => body.extend(self.inst(i, !record)),
            }
        }
        if record && self.fused_of(b).is_none() {
            let reserved = self.p.reserved_loop(b).is_some();
            for v in &self.p.pushes[b] {
                body.extend(self.push(*v, reserved));
            }
        }
        body
    }

    /// The index `rb + counter` of a load or store ranged on loop `h`, in the forward sweep.
    fn fwd_ranged(&self, h: BlockId, base: RangeBase) -> TokenStream {
        let c = self.p.counted[h].as_ref().expect("counted loop");
        let (rb, k) = (self.rb(h, base), self.v(c.k));
        quote!(#rb.wrapping_add(#k))
    }

    fn fwd_term(&self, b: BlockId, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream {
        let fwd = syn::Lifetime::new("'fwd", Span::mixed_site());
        match &self.f.blocks[b].term {
            Term::Jump(_) => jump(0),
            Term::Branch(c, _, _) => {
                let c = self.v(*c);
                let (a, e) = (jump(0), jump(1));
                quote!(if #c { #a } else { #e })
            }
            Term::Return(r) => {
                let ret = ms("ret");
                let set = r.map(|v| {
                    let e = self.tv(v);
                    quote!(#ret = #e;)
                });
                quote!(#set break #fwd;)
            }
            Term::Unreachable => quote!(::core::unreachable!()),
        }
    }

    /// The forward sweep: structured code (always possible for the primal CFG), else a state
    /// machine. `record`: pushes and tags (pullback), else the plain primal.
    fn forward(&self, record: bool) -> TokenStream {
        let fwd = syn::Lifetime::new("'fwd", Span::mixed_site());
        let cfg = Cfg {
            entry: 0,
            succ: self
                .f
                .blocks
                .iter()
                .map(|b| b.term.targets().iter().map(|t| t.block).collect())
                .collect(),
        };
        let emit = FwdEmit { g: self, record };
        if let Some(code) = structured(&cfg, &emit) {
            return quote!(#fwd: { #code });
        }
        let blk = ms("blk");
        let mut arms = TokenStream::new();
        for b in 0..self.f.blocks.len() {
            let body = self.fwd_body(b, record);
            let targets: Vec<Target> = self.f.blocks[b]
                .term
                .targets()
                .into_iter()
                .cloned()
                .collect();
            let term = self.fwd_term(b, &mut |k| self.edge_sm(b, k, &targets[k], record));
            let bb = b as u32;
            arms.extend(quote!(#bb => { #body #term }));
        }
        quote! {
            let mut #blk: u32 = 0;
            #fwd: loop {
                match #blk {
                    #arms
                    _ => ::core::unreachable!(),
                }
            }
        }
    }

    /// Reverse code of one active instruction; `ranged`: the unchecked index of a ranged load
    /// or store (see [`Gen::ranged`]).
    fn rev_inst(
        &self,
        inst: &Inst,
        ranged: Option<TokenStream>,
        fz: Option<BlockId>,
    ) -> TokenStream {
        let rules = self.rules();
        let z = self.zero_t();
        let (nz, az) = (self.adj_zero(), self.adj_clear());
        let f = self.f;
        let val_or_zero = |v: Val, reads: &[Val]| -> TokenStream {
            if reads.contains(&v) {
                self.tv(v)
            } else {
                z.clone()
            }
        };
        match inst {
            Inst::Un {
                dst,
                op,
                a,
                n,
                partial,
            } => {
                let (ad, aa) = (self.a(*dst), self.a(*a));
                let d = match partial {
                    Some(p) => {
                        let p = self.v(*p);
                        quote!(#p)
                    }
                    None => {
                        let reads = cheap_reads(f, self.p, inst);
                        let x = val_or_zero(*a, &reads);
                        let opt = op1_tokens(
                            *op,
                            &rules,
                            n.map(|n| {
                                let id = self.v(n);
                                quote!(#id)
                            }),
                        );
                        quote!(#rules::unary(#opt, #x).d)
                    }
                };
                let sent = self.times(quote!(#ad), quote!(d), op.partial_unbounded());
                quote!({ let d = #d; #aa += #sent; #ad = #nz; })
            }
            Inst::Bin {
                dst,
                op,
                a,
                b,
                partials,
            } => {
                let ad = self.a(*dst);
                let mut body = quote!(let g = #ad; #ad = #nz;);
                let (dx, dy) = if partials.iter().any(|p| p.is_some()) {
                    let pv = |k: usize| match partials[k] {
                        Some(p) => {
                            let p = self.v(p);
                            quote!(#p)
                        }
                        None => z.clone(),
                    };
                    (pv(0), pv(1))
                } else {
                    let reads = cheap_reads(f, self.p, inst);
                    let (x, y) = (val_or_zero(*a, &reads), val_or_zero(*b, &reads));
                    let opt = op2_tokens(*op, &rules);
                    body.extend(quote!(let r = #rules::binary(#opt, #x, #y);));
                    (quote!(r.dx), quote!(r.dy))
                };
                let unbounded = op.partial_unbounded();
                if self.active(*a) {
                    let (aa, sent) = (self.a(*a), self.times(quote!(g), dx, unbounded));
                    body.extend(quote!(#aa += #sent;));
                }
                if self.active(*b) {
                    let (ab, sent) = (self.a(*b), self.times(quote!(g), dy, unbounded));
                    body.extend(quote!(#ab += #sent;));
                }
                quote!({ #body })
            }
            Inst::Load {
                dst, slice, idx, ..
            } => {
                let (ad, ds, i) = (self.a(*dst), self.dslice(*slice), self.v(*idx));
                match self.p.deferred[*dst] {
                    Some(h) if Some(h) != fz => {
                        let (cnt, lo) = (ms(&format!("cnt{h}")), ms(&format!("lo{h}")));
                        quote!(if #cnt == #lo { #ds[#i] += #ad; #ad = #nz; })
                    }
                    _ => match ranged {
                        // SAFETY: as for ranged loads in `rev_body`; `ds` has the length
                        // checked on entering the reversed loop.
                        Some(ix) => quote!({
                            unsafe { *#ds.get_unchecked_mut(#ix) += #ad; }
                            #ad = #nz;
                        }),
                        None => quote!({ #ds[#i] += #ad; #ad = #nz; }),
                    },
                }
            }
            Inst::Store {
                slice, idx, val, ..
            } => {
                let ds = self.dslice(*slice);
                let az = self.slice_clear(*slice);
                // SAFETY (ranged): as for ranged loads in `rev_body`.
                let e = match ranged {
                    Some(ix) => quote!((*unsafe { #ds.get_unchecked_mut(#ix) })),
                    None => {
                        let i = self.v(*idx);
                        quote!(#ds[#i])
                    }
                };
                if self.active(*val) {
                    let av = self.a(*val);
                    quote!({ #av += #e; #e = #az; })
                } else {
                    quote!({ #e = #az; })
                }
            }
            Inst::Fill { slice, val } => {
                let ds = self.dslice(*slice);
                let az = self.slice_clear(*slice);
                if self.active(*val) {
                    let av = self.a(*val);
                    quote!(for e in #ds.iter_mut() { #av += *e; *e = #az; })
                } else {
                    quote!(for e in #ds.iter_mut() { *e = #az; })
                }
            }
            Inst::Call {
                dsts,
                ret,
                func,
                args,
            } => {
                let ws = &self.names.ws;
                let mut leaves = dsts.iter().map(|d| {
                    if self.active(*d) {
                        let ad = self.a(*d);
                        quote!(#ad)
                    } else {
                        nz.clone()
                    }
                });
                let g = ret_tokens(ret, &mut leaves);
                let clear = dsts.iter().filter(|d| self.active(**d)).map(|d| {
                    let ad = self.a(*d);
                    quote!(#ad = #nz;)
                });
                let mut pre = TokenStream::new();
                let mut post = TokenStream::new();
                let mut pargs = vec![];
                let mut dargs = vec![];
                let mut passed = vec![];
                for (k, a) in args.iter().enumerate() {
                    match a {
                        Arg::Val(v) if f.values[*v].ty == Ty::F64 => {
                            pargs.push(self.tv(*v));
                            let t = ms(&format!("d{k}"));
                            pre.extend(quote!(let mut #t: __AdjointA = #az;));
                            dargs.push(quote!(&mut #t));
                            if self.active(*v) {
                                let av = self.a(*v);
                                post.extend(quote!(#av += #t;));
                            }
                        }
                        Arg::Val(_) => pargs.push(self.call_arg(a, true)),
                        Arg::Elems { vals, .. } if f.values[vals[0]].ty == Ty::F64 => {
                            pargs.push(self.call_arg(a, true));
                            let (t, n) = (ms(&format!("d{k}")), vals.len());
                            pre.extend(quote!(let mut #t: [__AdjointA; #n] = [#az; #n];));
                            dargs.push(to_param(quote!(&mut #t[..])));
                            for (j, v) in vals.iter().enumerate() {
                                if self.active(*v) {
                                    let av = self.a(*v);
                                    post.extend(quote!(#av += #t[#j];));
                                }
                            }
                        }
                        Arg::Elems { .. } => pargs.push(self.call_arg(a, true)),
                        Arg::Struct(k, _) => {
                            pargs.push(self.call_arg(a, true));
                            match (&self.names.dagg[*k], &f.sig[*k]) {
                                (Some(d), _) => dargs.push(quote!(&mut *#d)),
                                (None, _) => {
                                    // passive: the callee's adjoint of it goes to a zeroed
                                    // struct nothing reads (its type is the callee's)
                                    let rt = self.rt;
                                    dargs.push(quote!(&mut #rt::Differentiable::zero()));
                                }
                            }
                        }
                        Arg::Slice(s) => {
                            let pa = self.slice_arg(s, false);
                            pargs.push(self.call_arg(a, true));
                            if f.slices[s.slice].elem != Ty::F64 {
                                continue;
                            }
                            if self.passive_floats(s.slice) {
                                // a passive slice: the callee's adjoint of it goes to scratch
                                let rt = self.rt;
                                let d = quote!(&mut *#rt::__private::Scratch::<__AdjointA>::filled(
                                    (#pa).len(), #az));
                                dargs.push(self.call_slice(s, d));
                                continue;
                            }
                            if passed.contains(&s.slice) {
                                // The slice is passed again (`dot(x, x)`): the callee takes each
                                // adjoint buffer as its own `&mut`, so this one collects into a
                                // scratch buffer, added after the call.
                                let (t, da) = (ms(&format!("d{k}")), self.slice_arg(s, true));
                                let rt = self.rt;
                                pre.extend(quote!(
                                    let mut #t = #rt::__private::Scratch::<__AdjointA>::filled(
                                        (#pa).len(), #az);
                                ));
                                dargs.push(self.call_slice(s, quote!(&mut #t[..])));
                                post.extend(quote!(
                                    for (d, t) in (#da).iter_mut().zip(#t.iter()) { *d += *t; }
                                ));
                            } else {
                                passed.push(s.slice);
                                dargs.push(self.call_slice(s, self.slice_arg(s, true)));
                            }
                        }
                    }
                }
                let commit = self.commit_cursors();
                let acquire = self.acquire_cursors(false);
                // mixed-site names: the arguments may name the user's variables (`g`, `r`)
                let gn = ms("g");
                let pull = quote_spanned!(func.span()=>
                    let _ = #func::pullback_vec::<__AdjointT, __AdjointA>(&mut *#ws, #(#pargs,)* #(#dargs,)* #gn);
                );
                quote!({
                    #pre
                    let #gn = #g;
                    #(#clear)*
                    #commit
                    #pull
                    #acquire
                    #post
                })
            }
            Inst::Rule {
                dst,
                args,
                partials,
                ..
            } => {
                let ad = self.a(*dst);
                let mut body = quote!(let g = #ad; #ad = #nz;);
                for (k, a) in args.iter().enumerate() {
                    if let (true, Some(p)) = (self.active(*a), partials[k]) {
                        // a user's partial may be infinite (its rule is opaque)
                        let (aa, p) = (self.a(*a), self.v(p));
                        let sent = self.times(quote!(g), quote!(#p), true);
                        body.extend(quote!(#aa += #sent;));
                    }
                }
                quote!({ #body })
            }
            _ => quote!(),
        }
    }

    fn rev_body(&self, b: BlockId) -> TokenStream {
        self.rev_body_in(b, None)
    }

    /// The adjoint block of `b`; `fz`: emitted inside the forward iteration of fused loop `fz`
    /// (see [`Gen::fused_iteration`]), where the locals of the body's blocks still hold the
    /// iteration's values (nothing is popped, replayed or recomputed).
    fn rev_body_in(&self, b: BlockId, fz: Option<BlockId>) -> TokenStream {
        let mut body = TokenStream::new();
        let fused = fz.is_some();
        for v in self.p.pushes[b].iter().rev().filter(|_| !fused) {
            body.extend(self.pop(*v));
        }
        for (v, h) in self.p.replay[b].iter().filter(|_| !fused) {
            let (id, t, cnt) = (self.v(*v), self.ty(*v), ms(&format!("cnt{h}")));
            body.extend(quote!(let #id: #t = #cnt;));
        }
        for v in self.p.remat[b].iter().filter(|_| !fused) {
            if let Some((h, entry, step)) = self.p.induction(*v) {
                let start = self.p.counted[h].as_ref().expect("counted loop").start;
                let (id, t, cnt) = (self.v(*v), self.ty(*v), ms(&format!("cnt{h}")));
                let (e, s0) = (self.v(entry), self.v(start));
                let step: syn::Expr = syn::parse_str(&format!("({step}i128)")).expect("an integer");
                body.extend(quote! {
                    #id = ((#e as i128) + ((#cnt as i128) - (#s0 as i128)) * #step) as #t;
                });
                continue;
            }
            let (ib, k) = self.p.def_inst[*v].unwrap();
            if let (Some(ix), Inst::Load { dst, slice, .. }) =
                (self.ranged(b, ib, k), &self.f.blocks[ib].insts[k])
            {
                let (d, s) = (self.v(*dst), self.slice(*slice));
                // SAFETY: `ix` is `rb + cnt` with `cnt < hi` inside the reversed loop, and
                // `rb + hi <= s.len()` was checked on entering it (see `ranged`).
                body.extend(quote!(#d = unsafe { *#s.get_unchecked(#ix) };));
                continue;
            }
            let code = self.inst(&self.f.blocks[ib].insts[k], true);
            body.extend(code);
        }
        // Two adjoint updates of one slice in a block (`d_x[i] += …; d_x[i + 1] += …`, a stencil)
        // would be merged by LLVM's SLP vectoriser into one 16-byte load and store, which the
        // next reversed iteration's overlapping access cannot forward from: a store-forwarding
        // stall per iteration (Rosenbrock's gradient ran 2.4× slower). A compiler fence (no
        // machine instruction) between them keeps them scalar. Not between two ranged updates
        // whose starts differ by a value known only at run time (`d_p[w + i·n + j]` and
        // `d_p[x + j]` in one packed parameter vector): they are far apart, and a fence would
        // keep LLVM from vectorising the loop (with a run-time overlap check).
        let mut updated: Vec<Vec<usize>> = vec![vec![]; self.f.slices.len()];
        for (k, i) in self.f.blocks[b].insts.iter().enumerate().rev() {
            if self.p.inst_active(self.f, i) {
                if let Inst::Load { slice, .. } = i {
                    if updated[*slice].iter().any(|&k2| !self.far_apart(b, k, k2)) {
                        body.extend(quote!(::core::sync::atomic::compiler_fence(
                            ::core::sync::atomic::Ordering::SeqCst
                        );));
                    }
                    updated[*slice].push(k);
                }
                body.extend(self.rev_inst(i, self.ranged_in(b, b, k, fz), fz));
            }
        }
        body
    }

    /// The local holding loop `h`'s range base `r` in the reverse sweep (`0` for the counter).
    fn rb(&self, h: BlockId, r: RangeBase) -> TokenStream {
        match self.p.range_bases(h).iter().position(|x| *x == r) {
            Some(k) => {
                let id = ms(&format!("rb{h}_{k}"));
                quote!(#id)
            }
            None => quote!(0usize),
        }
    }

    /// For a ranged load or store `k` of block `ib` (see [`Plan::ranged`]) whose reverse code is
    /// emitted in the adjoint of block `b` inside the same loop: the index as `rb + cnt`, from
    /// locals only the reversed loop's entry and header set (so the range check made on entry
    /// covers it whatever else the sweep does).
    fn ranged(&self, b: BlockId, ib: BlockId, k: usize) -> Option<TokenStream> {
        let (h, base) = self.p.ranged.get(ib)?.get(k).copied().flatten()?;
        let c = self.p.counted[h].as_ref()?;
        if !c.body[b] {
            return None;
        }
        let (rb, cnt) = (self.rb(h, base), ms(&format!("cnt{h}")));
        Some(quote!(#rb.wrapping_add(#cnt)))
    }

    /// Whether loads `k1` and `k2` of block `b` are ranged on one loop at starts that differ by
    /// a run-time value (see [`Plan::ranged`]): not a stencil's neighbours.
    fn far_apart(&self, b: BlockId, k1: usize, k2: usize) -> bool {
        let r = |k: usize| self.p.ranged.get(b)?.get(k).copied().flatten();
        let (Some((h1, r1)), Some((h2, r2))) = (r(k1), r(k2)) else {
            return false;
        };
        let constant = |v: Option<Val>| {
            v.is_none_or(|v| {
                self.p.def_inst[v].is_some_and(|(ib, ik)| {
                    matches!(self.f.blocks[ib].insts[ik], Inst::Const { .. })
                })
            })
        };
        h1 == h2 && r1 != r2 && !(constant(r1.base) && constant(r2.base) && r1.ind == r2.ind)
    }

    /// [`Gen::ranged`], except for accesses ranged on fused loop `fz` (whose reversed loop
    /// does not run: they index from the forward counter).
    fn ranged_in(
        &self,
        b: BlockId,
        ib: BlockId,
        k: usize,
        fz: Option<BlockId>,
    ) -> Option<TokenStream> {
        let (h, base) = self.p.ranged.get(ib)?.get(k).copied().flatten()?;
        if Some(h) == fz {
            // inside the forward iteration: `rb + counter`, checked on entering the loop (see
            // `fwd_range_entry`, which checks a fused loop's adjoint slices too)
            let c = self.p.counted[h].as_ref()?;
            let (rb, k) = (self.rb(h, base), self.v(c.k));
            return Some(quote!(#rb.wrapping_add(#k)));
        }
        self.ranged(b, ib, k)
    }

    /// The fused loop (see [`crate::adjoint::Fused`]) whose body holds `b`, not its header: `b`
    /// runs once per iteration and its adjoint right after it, so it neither pushes nor pops.
    fn fused_of(&self, b: BlockId) -> Option<BlockId> {
        (0..self.f.blocks.len()).find(|&h| {
            self.p.fused[h].is_some()
                && h != b
                && self.p.counted[h].as_ref().is_some_and(|c| c.body[b])
        })
    }

    /// On entering fused loop `h` in the forward sweep: the adjoints its accumulators will have
    /// at its exit, from the cotangent of the result (see [`crate::adjoint::ExitAdj`]).
    fn fused_entry(&self, h: BlockId) -> TokenStream {
        let fz = self.p.fused[h].as_ref().expect("fused");
        let (rules, z, nz) = (self.rules(), self.zero_t(), self.adj_zero());
        let dret = &self.names.dret;
        let mut out = TokenStream::new();
        for (j, adj) in fz.exit_adj.iter().enumerate() {
            for v in &adj.pre {
                let (ib, k) = self.p.def_inst[*v].expect("an instruction");
                out.extend(self.inst(&self.f.blocks[ib].insts[k], false));
            }
            let mut sum = quote!(let mut s: __AdjointA = #nz;);
            for path in &adj.paths {
                let mut e = quote!(#dret);
                for &(b, k, slot) in path.iter().rev() {
                    let d = match &self.f.blocks[b].insts[k] {
                        Inst::Un { op, .. } => {
                            let opt = op1_tokens(*op, &rules, None);
                            quote!(#rules::unary(#opt, #z).d)
                        }
                        Inst::Bin { op, a, b: y, .. } => {
                            // the partial with respect to the loop's value does not depend on
                            // it (`+ − × ÷` by the other operand): it is passed as zero
                            let opt = op2_tokens(*op, &rules);
                            let (x, y) = if slot == 0 {
                                (z.clone(), self.tv(*y))
                            } else {
                                (self.tv(*a), z.clone())
                            };
                            let d = if slot == 0 { quote!(dx) } else { quote!(dy) };
                            quote!(#rules::binary(#opt, #x, #y).#d)
                        }
                        _ => unreachable!("checked by fused_loop"),
                    };
                    e = quote!((#e * #d));
                }
                sum.extend(quote!(s += #e;));
            }
            let id = ms(&format!("fz{h}_{j}"));
            out.extend(quote!(#id = { #sum s };));
        }
        out
    }

    /// On the back edge of fused loop `h` in the forward sweep: the iteration's adjoint, its
    /// body's adjoint blocks as structured code from the latch back to the body's entry (a
    /// branch in the body pops the tag its join pushed in this iteration), with each
    /// accumulator's next value seeded with the adjoint at the exit.
    fn fused_iteration(&self, h: BlockId) -> TokenStream {
        let fz = self.p.fused[h].as_ref().expect("fused");
        let nz = self.adj_zero();
        let mut out = TokenStream::new();
        for (j, (_, nv)) in fz.carried.iter().enumerate() {
            let (a, id) = (self.a(*nv), ms(&format!("fz{h}_{j}")));
            out.extend(quote!(#a = #id;));
        }
        let label = syn::Lifetime::new(&format!("'z{h}"), Span::mixed_site());
        let cfg = crate::adjoint::fused_region(self.p, h, fz.first, fz.latch);
        let emit = FusedRevEmit {
            g: self,
            h,
            first: fz.first,
            label: label.clone(),
        };
        let prefix = format!("z{h}");
        let code = structured_in(&cfg, &emit, &prefix).expect("checked by fused_loop");
        out.extend(quote!(#label: { #code }));
        for (cv, _) in &fz.carried {
            let a = self.a(*cv);
            out.extend(quote!(#a = #nz;));
        }
        quote!({ #out })
    }

    /// A range base of loop `h` as an expression of values defined outside the loop and
    /// constants (see [`crate::adjoint::entry_computable`]), the same operations as forward.
    fn entry_expr(&self, h: BlockId, v: Val) -> TokenStream {
        let c = self.p.counted[h].as_ref().expect("counted loop");
        if !self.p.def_block[v].is_some_and(|db| c.body[db]) {
            let id = self.v(v);
            return quote!(#id);
        }
        let (ib, k) = self.p.def_inst[v].expect("checked by entry_computable");
        match &self.f.blocks[ib].insts[k] {
            Inst::Const { c, .. } => {
                let t = &c.tokens;
                quote!(#t)
            }
            Inst::Int { op, a, b, .. } => {
                let (a, b) = (self.entry_expr(h, *a), self.entry_expr(h, *b));
                match op {
                    IntOp::Add => quote!((#a + #b)),
                    IntOp::Sub => quote!((#a - #b)),
                    IntOp::Mul => quote!((#a * #b)),
                    _ => unreachable!("checked by entry_computable"),
                }
            }
            _ => unreachable!("checked by entry_computable"),
        }
    }

    /// On entering reversed loop `h`: bind its range bases and check, once, that every slice
    /// it indexes without checks holds `rb + [lo, hi)` (the forward sweep indexed exactly that).
    fn range_entry(&self, h: BlockId) -> TokenStream {
        let rt = self.rt;
        let (cnt, lo) = (ms(&format!("cnt{h}")), ms(&format!("lo{h}")));
        let mut code = self.bind_range_bases(h, self.updates_at_two_bases(h));
        let check = quote!(#rt::__private::check_range);
        let checks = self.range_checks(h, true, &check, &quote!(#lo), &quote!(#cnt));
        if !checks.is_empty() {
            code.extend(quote!(if #cnt != #lo { #checks }));
        }
        code
    }

    /// On entering counted loop `h` in the pullback's forward sweep: bind its range bases and
    /// check, once, that every slice it indexes at `base + counter` on each iteration (see
    /// [`Plan::ranged`]) holds the whole range, so the iterations index without checks (four
    /// bounds checks per iteration made Rosenbrock's gradient 1.3× slower). A fused loop
    /// updates the adjoints of its active slices there too: those are checked as well.
    fn fwd_range_entry(&self, h: BlockId) -> TokenStream {
        let rt = self.rt;
        let c = self.p.counted[h].as_ref().expect("counted loop");
        let (lo, hi) = (self.v(c.start), self.v(c.end));
        let fused = self.p.fused[h].is_some();
        let mut code = self.bind_range_bases(h, false);
        let checks = self.range_checks(
            h,
            fused,
            &quote!(#rt::__private::check_loop_range),
            &quote!(#lo),
            &quote!(#hi),
        );
        if !checks.is_empty() {
            code.extend(quote!(if #lo < #hi { #checks }));
        }
        code
    }

    /// Binds loop `h`'s range bases `rb{h}_{k}`; `opaque`: through `black_box` (see below).
    fn bind_range_bases(&self, h: BlockId, opaque: bool) -> TokenStream {
        let mut code = TokenStream::new();
        let c = self.p.counted[h].as_ref().expect("counted loop");
        for r in self.p.range_bases(h) {
            let rb = self.rb(h, r);
            let mut e = match r.base {
                Some(b) => self.entry_expr(h, b),
                None => quote!(0usize),
            };
            if let Some((entry, _)) = r.ind.and_then(|i| c.induction(i)) {
                // `base + ind` with `ind = entry + (counter − start)`
                let (en, st) = (self.v(entry), self.v(c.start));
                // (`usize::` gives a literal base its type: `(1).wrapping_add` does not compile)
                e = quote!(::core::primitive::usize::wrapping_add(#e, #en).wrapping_sub(#st));
            }
            if opaque && r.base.is_some() {
                // LLVM vectorises such a loop behind a run-time overlap check of the two ranges,
                // and hoists that check out of the enclosing loop when the bases are affine in
                // its counter — a form valid only for growing addresses. A reversed enclosing
                // loop's bases shrink, so the hoisted check always failed and the scalar loop
                // ran (network's layer-1 adjoint, `d_p[w1 + i·n0 + j]` beside `d_p[x + j]`).
                // Seen through `black_box` (one store and load per entry) the base is opaque:
                // the check stays per entry, passes, and the vector loop runs.
                e = quote!(::core::hint::black_box(#e));
            }
            code.extend(quote!(#rb = #e;));
        }
        code
    }

    /// `check(rb, lo, hi, len)` once per slice and range base that loop `h` indexes at
    /// `rb + counter`; `adjoints`: also the adjoint slices of the active ones.
    fn range_checks(
        &self,
        h: BlockId,
        adjoints: bool,
        check: &TokenStream,
        lo: &TokenStream,
        hi: &TokenStream,
    ) -> TokenStream {
        let mut checked: Vec<(SliceId, RangeBase, bool)> = vec![];
        let mut checks = TokenStream::new();
        for (ib, block) in self.f.blocks.iter().enumerate() {
            for (k, i) in block.insts.iter().enumerate() {
                let Some((hh, base)) = self.p.ranged[ib][k] else {
                    continue;
                };
                let (Inst::Load { slice, span, .. } | Inst::Store { slice, span, .. }) = i else {
                    continue;
                };
                if hh != h {
                    continue;
                }
                let mut sides = vec![false];
                if adjoints && self.p.slice_active[*slice] {
                    sides.push(true);
                }
                for d in sides {
                    if checked.contains(&(*slice, base, d)) {
                        continue;
                    }
                    checked.push((*slice, base, d));
                    let s = if d {
                        self.dslice(*slice)
                    } else {
                        self.slice(*slice)
                    };
                    let rb = self.rb(h, base);
                    // (reported at the user's first `x[i]` of this range: the call's
                    // parentheses carry its span)
                    checks.extend(quote_spanned!(*span=> (#check)(#rb, #lo, #hi, #s.len());));
                }
            }
        }
        checks
    }

    /// Whether reversed loop `h` updates the adjoint of one slice at two range bases (see
    /// [`Plan::ranged`]): the accesses LLVM can only vectorise behind a run-time overlap check.
    fn updates_at_two_bases(&self, h: BlockId) -> bool {
        let mut seen: Vec<(SliceId, RangeBase)> = vec![];
        for (ib, block) in self.f.blocks.iter().enumerate() {
            for (k, i) in block.insts.iter().enumerate() {
                let (Some((hh, base)), Inst::Load { slice, .. } | Inst::Store { slice, .. }) =
                    (self.p.ranged[ib][k], i)
                else {
                    continue;
                };
                if hh != h || !self.p.slice_active[*slice] {
                    continue;
                }
                if seen.iter().any(|&(s, b)| s == *slice && b != base) {
                    return true;
                }
                seen.push((*slice, base));
            }
        }
        false
    }

    /// Adjoint transfers on reversed edge `k` of block `b` (to its `k`-th predecessor).
    fn rev_edge(&self, b: BlockId, k: usize) -> TokenStream {
        let nz = self.adj_zero();
        let block = &self.f.blocks[b];
        let (pb, slot) = self.p.preds[b][k];
        let t = self.f.blocks[pb].term.targets()[slot];
        let mut code = TokenStream::new();
        if let Some(c) = &self.p.counted[pb] {
            if c.exit == b && slot == 1 {
                // leaving the loop backwards: the counter restarts at its last value (a
                // fused loop ran its iterations' adjoints forward: none here)
                let (cnt, lo) = (ms(&format!("cnt{pb}")), ms(&format!("lo{pb}")));
                let (s, e) = (self.v(c.start), self.v(c.end));
                if self.p.fused[pb].is_some() {
                    code.extend(quote!(#lo = #s; #cnt = #s;));
                } else {
                    code.extend(quote!(#lo = #s; #cnt = if #s < #e { #e } else { #s };));
                    code.extend(self.range_entry(pb));
                }
            }
        }
        let act: Vec<(Val, Val)> = block
            .params
            .iter()
            .zip(&t.args)
            .filter(|(pp, _)| self.active(**pp))
            .map(|(pp, aa)| (*pp, *aa))
            .collect();
        let clash = act.iter().any(|(_, aa)| block.params.contains(aa));
        if clash {
            for (k, (pp, _)) in act.iter().enumerate() {
                let (tmp, ap) = (ms(&format!("t{k}")), self.a(*pp));
                code.extend(quote!(let #tmp = #ap; #ap = #nz;));
            }
            for (k, (_, aa)) in act.iter().enumerate() {
                if self.active(*aa) {
                    let (tmp, aid) = (ms(&format!("t{k}")), self.a(*aa));
                    code.extend(quote!(#aid += #tmp;));
                }
            }
        } else {
            for (pp, aa) in &act {
                let ap = self.a(*pp);
                if self.active(*aa) {
                    let aid = self.a(*aa);
                    code.extend(quote!(#aid += #ap;));
                }
                code.extend(quote!(#ap = #nz;));
            }
        }
        code
    }

    fn rev_term(&self, b: BlockId, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream {
        let rev = syn::Lifetime::new("'rev", Span::mixed_site());
        if b == 0 {
            return quote!(break #rev;);
        }
        match self.p.tag[b] {
            TagMode::None | TagMode::Any => jump(0),
            TagMode::Counted => {
                let c = self.p.counted[b].as_ref().expect("counted loop");
                let (cnt, lo) = (ms(&format!("cnt{b}")), ms(&format!("lo{b}")));
                let (back, entry) = (jump(c.latch), jump(c.entry));
                quote!(if #cnt != #lo { #cnt -= 1; #back } else { #entry })
            }
            m => {
                let sel = if m == TagMode::Local {
                    let t = ms(&format!("tag{b}"));
                    quote!(#t)
                } else {
                    let ct = &cursors()[3];
                    quote!(#ct.pop())
                };
                let n = self.p.preds[b].len();
                let ks: Vec<u32> = (0..n as u32).collect();
                let alts: Vec<TokenStream> = (0..n).map(jump).collect();
                quote!(match #sel {
                    #(#ks => { #alts })*
                    _ => ::core::unreachable!(),
                })
            }
        }
    }

    /// The reverse sweep: structured when the reversed CFG is reducible, else a state machine.
    fn reverse(&self) -> TokenStream {
        let rev = syn::Lifetime::new("'rev", Span::mixed_site());
        let n = self.f.blocks.len();
        let cfg = Cfg {
            entry: self.p.ret_block,
            succ: (0..n)
                .map(|b| {
                    if b == 0 {
                        vec![]
                    } else if self.p.tag[b] == TagMode::Any {
                        vec![self.p.preds[b][0].0]
                    } else {
                        self.p.preds[b].iter().map(|&(pb, _)| pb).collect()
                    }
                })
                .collect(),
        };
        if let Some(code) = structured(&cfg, &RevEmit { g: self }) {
            return quote!(#rev: { #code });
        }
        let blk = ms("blk");
        let mut arms = TokenStream::new();
        for b in 0..n {
            let body = self.rev_body(b);
            let term = self.rev_term(b, &mut |k| {
                let e = self.rev_edge(b, k);
                let pb = self.p.preds[b][k].0 as u32;
                quote!(#e #blk = #pb;)
            });
            let bb = b as u32;
            arms.extend(quote!(#bb => { #body #term }));
        }
        let start = self.p.ret_block as u32;
        quote! {
            let mut #blk: u32 = #start;
            #rev: loop {
                match #blk {
                    #arms
                    _ => ::core::unreachable!(),
                }
            }
        }
    }

    /// `primal<T>`: the function at any `Real` type.
    pub fn primal_fn(&self) -> TokenStream {
        let real = self.real();
        let params = self.param_decls(true);
        let decls = self.decls(false);
        let fwd = self.forward(false);
        let ret = ms("ret");
        let (ret_decl, ret_ty, ret_val) = if self.f.returns_f64 {
            let z = self.zero_t();
            (
                quote!(let mut #ret: __AdjointT = #z;),
                quote!(-> __AdjointT),
                quote!(#ret),
            )
        } else if let Some(ra) = &self.f.ret_agg {
            let t = self.map_ty(&ra.ty, &quote!(__AdjointT));
            (quote!(), quote!(-> #t), self.build_ret())
        } else {
            (quote!(), quote!(), quote!())
        };
        let prologue = self.agg_prologue(false);
        let doc = format!(
            " `{}` at any [`Real`]({}) type: `f64`, `Dual<f64>` for forward mode, …",
            self.f.name,
            real.to_string().replace(' ', "")
        );
        quote! {
            #[doc = #doc]
            #[allow(unused_mut, unused_variables, unused_assignments, unused_parens, unused_braces, unused_labels, unreachable_code, clippy::all)]
            #[inline]
            pub fn primal<__AdjointT: #real>(#(#params),*) #ret_ty {
                #ret_decl
                #prologue
                #decls
                #fwd
                #ret_val
            }
        }
    }

    /// `pullback_vec<T, A>` (forward sweep with recording, reverse sweep, adjoints of type `A`)
    /// and `pullback<T>`, the same with one cotangent (`A = T`).
    pub fn pullback_fn(&self) -> TokenStream {
        let real = self.real();
        let rt = self.rt;
        let ws = &self.names.ws;
        let params = self.param_decls(true);
        let dparams = self.dparam_decls(quote!(__AdjointA));
        let decls = self.decls(true);
        let fwd = self.forward(true);
        let rev = self.reverse();
        let cur = cursors();
        let uses = mentions(&fwd, &cur) || mentions(&rev, &cur);
        self.uses_ws.set(uses);
        let (acquire, commit) = if uses {
            (self.acquire_cursors(true), self.commit_cursors())
        } else {
            (quote!(let _ = &mut *#ws;), quote!())
        };
        let ret = ms("ret");
        let dret = &self.names.dret;
        let z = self.zero_t();
        let (ret_decl, ret_ty, ret_val, dret_param, seed) = if self.f.returns_f64 {
            let r = match self.f.blocks[self.p.ret_block].term {
                Term::Return(Some(v)) => v,
                _ => unreachable!(),
            };
            let seed = if self.active(r) {
                let ar = self.a(r);
                quote!(#ar += #dret;)
            } else {
                quote!(let _ = #dret;)
            };
            (
                quote!(let mut #ret: __AdjointT = #z;),
                quote!(-> __AdjointT),
                quote!(#ret),
                quote!(#dret: __AdjointA),
                seed,
            )
        } else if let Some(ra) = &self.f.ret_agg {
            let t = self.map_ty(&ra.ty, &quote!(__AdjointT));
            let ta = self.map_ty(&ra.ty, &quote!(__AdjointA));
            let build = self.build_ret();
            let mut seed = quote!(let #ret = #build;);
            for l in &ra.leaves {
                let (path, ds) = (&l.path, self.dslice(l.slice));
                if l.scalar {
                    seed.extend(quote!(#ds[0] += #dret #(.#path)*;));
                } else {
                    seed.extend(quote! {
                        for (d, x) in #ds.iter_mut().zip(#dret #(.#path)*.iter()) {
                            *d += *x;
                        }
                    });
                }
            }
            (
                quote!(),
                quote!(-> #t),
                quote!(#ret),
                quote!(#dret: #ta),
                seed,
            )
        } else {
            (quote!(), quote!(), quote!(), quote!(), quote!())
        };
        let prologue = self.agg_prologue(true);
        // adjoint outputs of scalar parameters; length checks of slices
        let mut outs = TokenStream::new();
        let mut checks = TokenStream::new();
        for (k, (pa, d)) in self.f.params.iter().zip(&self.names.dparam).enumerate() {
            let Some(d) = d else { continue };
            match pa {
                Param::Scalar { val, .. } => {
                    if self.active(*val) {
                        let a = self.a(*val);
                        outs.extend(match &self.names.leaf_place[k] {
                            Some(place) => quote!(#place += #a;),
                            None => quote!(*#d += #a;),
                        });
                    }
                }
                Param::Slice { name, slice } => {
                    if self.f.slices[*slice].array.is_some() || self.leaf_in_agg(pa) {
                        continue;
                    }
                    let msg = format!("`{d}` must have the length of `{name}`");
                    checks.extend(quote!(assert_eq!(#d.len(), #name.len(), #msg);));
                }
            }
        }
        let doc = format!(
            " Pullback (vector-Jacobian product) of `{}`: runs it, then adds `dret ·` the \
             gradient of its result (and the cotangents in `d_…` of `&mut` outputs, which are \
             replaced by those of their inputs) to the `d_…` buffers. Returns the result. \
             [`pullback_vec`] with one cotangent.",
            self.f.name
        );
        let doc_vec = format!(
            " [`pullback`] of `{}` with adjoints of any [`Cotangent`]({rt}::Cotangent) type \
             `__AdjointA`: `__AdjointT` itself, or [`Cotangents<__AdjointT, N>`]({rt}::Cotangents) to carry `N` \
             cotangents (`N` rows of a Jacobian) through one forward and one reverse sweep. \
             Lane `k` of every `d_…` buffer computes what `pullback` with cotangent `k` \
             computes, bit for bit.",
            self.f.name,
            rt = rt.to_string().replace(' ', "")
        );
        let sep = if dparams.is_empty() || dret_param.is_empty() {
            quote!()
        } else {
            quote!(,)
        };
        // `<S as Differentiable>::Of<A>` (struct parameters or results, and a callee's struct
        // parameters) needs a `Real` `A`
        let passes_struct = self.f.blocks.iter().flat_map(|b| &b.insts).any(|i| {
            matches!(i, Inst::Call { args, .. } if args.iter().any(|a| matches!(a, Arg::Struct(..))))
        });
        let has_struct = self
            .f
            .sig
            .iter()
            .any(|it| matches!(it, SigItem::Agg(a) if a.is_struct && a.active))
            || self.f.ret_agg.as_ref().is_some_and(|r| r.is_struct)
            || passes_struct;
        let a_bound = if has_struct {
            quote!(#rt::Cotangent<__AdjointT> + #real)
        } else {
            quote!(#rt::Cotangent<__AdjointT>)
        };
        let names = self.param_names();
        let dnames = self.dparam_names();
        let (dparams_t, dret_t, dret_arg) = {
            let d = self.dparam_decls(quote!(__AdjointT));
            let r = if self.f.returns_f64 {
                quote!(#dret: __AdjointT)
            } else if let Some(ra) = &self.f.ret_agg {
                let t = self.map_ty(&ra.ty, &quote!(__AdjointT));
                quote!(#dret: #t)
            } else {
                quote!()
            };
            let arg = if r.is_empty() {
                quote!()
            } else {
                quote!(#dret)
            };
            (d, r, arg)
        };
        let sep_call = if dnames.is_empty() || dret_arg.is_empty() {
            quote!()
        } else {
            quote!(,)
        };
        quote! {
            #[doc = #doc]
            #[allow(clippy::too_many_arguments)]
            #[inline]
            pub fn pullback<__AdjointT: #real>(#ws: &mut #rt::Workspace<__AdjointT>, #(#params,)* #(#dparams_t),* #sep #dret_t) #ret_ty {
                self::pullback_vec::<__AdjointT, __AdjointT>(#ws, #(#names,)* #(#dnames),* #sep_call #dret_arg)
            }
            #[doc = #doc_vec]
            #[allow(unused_mut, unused_variables, unused_assignments, unused_parens, unused_braces, unused_labels, unreachable_code, clippy::all)]
            pub fn pullback_vec<__AdjointT: #real, __AdjointA: #a_bound>(#ws: &mut #rt::Workspace<__AdjointT>, #(#params,)* #(#dparams),* #sep #dret_param) #ret_ty {
                #checks
                #ret_decl
                #prologue
                #decls
                #acquire
                #fwd
                #seed
                #rev
                #commit
                #outs
                #ret_val
            }
        }
    }

    /// `grad` / `grad_with`: value and gradient of an `f64` function without `&mut` outputs.
    pub fn grad_fns(&self) -> TokenStream {
        if !self.f.returns_f64
            || self
                .f
                .slices
                .iter()
                .any(|s| s.mutable() && matches!(s.kind, SliceKind::Param { .. }))
        {
            return quote!();
        }
        let rt = self.rt;
        let ws = &self.names.ws;
        let params = self.param_decls(false);
        let dparams = self.dparam_decls(quote!(f64));
        let names = self.param_names();
        let dnames = self.dparam_names();
        let mut zero = TokenStream::new();
        for (it, da) in self.f.sig.iter().zip(&self.names.dagg) {
            match it {
                SigItem::Leaf(k) => {
                    let Some(d) = &self.names.dparam[*k] else {
                        continue;
                    };
                    match &self.f.params[*k] {
                        Param::Scalar { .. } => zero.extend(quote!(*#d = 0.0;)),
                        Param::Slice { .. } => zero.extend(quote!(#d.fill(0.0);)),
                    }
                }
                SigItem::Agg(a) => {
                    let Some(d) = da else { continue };
                    if a.is_struct {
                        zero.extend(quote!(#rt::Differentiable::set_zero(#d);));
                    } else {
                        for l in &a.leaves {
                            let path = &l.path;
                            match &self.f.params[l.param] {
                                Param::Scalar { .. } => zero.extend(quote!(#d #(.#path)* = 0.0;)),
                                Param::Slice { .. } => {
                                    zero.extend(quote!(#d #(.#path)*.fill(0.0);))
                                }
                            }
                        }
                    }
                }
            }
        }
        let doc1 = format!(
            " Value and gradient of `{}`: writes ∂{}/∂(each active parameter) into the `d_…` \
             buffers and returns the value. {}",
            self.f.name,
            self.f.name,
            if self.uses_ws.get() {
                "Uses the thread's workspace, so a steady-state call allocates nothing."
            } else {
                "Keeps nothing between its sweeps: it uses no workspace and allocates nothing."
            }
        );
        let doc2 = " [`grad`] with an explicit workspace (reused between calls, cleared first).";
        // A function that keeps nothing between its sweeps never grows a workspace: an empty
        // one (no allocation) costs nothing, where the thread's costs a thread-local access.
        let get_ws = if self.uses_ws.get() {
            quote!(#rt::with_workspace(|#ws| self::grad_with(#ws, #(#names,)* #(#dnames),*)))
        } else {
            quote!(self::grad_with(&mut #rt::Workspace::new(), #(#names,)* #(#dnames),*))
        };
        quote! {
            #[doc = #doc1]
            #[allow(clippy::too_many_arguments)]
            pub fn grad(#(#params,)* #(#dparams),*) -> f64 {
                #get_ws
            }
            #[doc = #doc2]
            #[allow(clippy::too_many_arguments)]
            pub fn grad_with(#ws: &mut #rt::Workspace<f64>, #(#params,)* #(#dparams),*) -> f64 {
                #zero
                #ws.clear();
                self::pullback::<f64>(#ws, #(#names,)* #(#dnames,)* 1.0)
            }
        }
    }
}

struct FwdEmit<'g, 'a> {
    g: &'g Gen<'a>,
    record: bool,
}

impl Emit for FwdEmit<'_, '_> {
    fn body(&self, b: usize) -> TokenStream {
        self.g.fwd_body(b, self.record)
    }
    fn term(&self, b: usize, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream {
        self.g.fwd_term(b, jump)
    }
    fn edge(&self, b: usize, k: usize) -> TokenStream {
        let t = self.g.f.blocks[b].term.targets()[k].clone();
        self.g.edge(b, k, &t, self.record)
    }
}

struct FusedRevEmit<'g, 'a> {
    g: &'g Gen<'a>,
    h: BlockId,
    first: BlockId,
    label: syn::Lifetime,
}

impl Emit for FusedRevEmit<'_, '_> {
    fn body(&self, b: usize) -> TokenStream {
        self.g.rev_body_in(b, Some(self.h))
    }
    fn term(&self, b: usize, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream {
        if b == self.first {
            let l = &self.label;
            quote!(break #l;)
        } else {
            self.g.rev_term(b, jump)
        }
    }
    fn edge(&self, b: usize, k: usize) -> TokenStream {
        self.g.rev_edge(b, k)
    }
}

struct RevEmit<'g, 'a> {
    g: &'g Gen<'a>,
}

impl Emit for RevEmit<'_, '_> {
    fn body(&self, b: usize) -> TokenStream {
        self.g.rev_body(b)
    }
    fn term(&self, b: usize, jump: &mut dyn FnMut(usize) -> TokenStream) -> TokenStream {
        self.g.rev_term(b, jump)
    }
    fn edge(&self, b: usize, k: usize) -> TokenStream {
        self.g.rev_edge(b, k)
    }
}
