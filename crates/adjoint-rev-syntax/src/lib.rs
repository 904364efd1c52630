//! The logic of adjoint's `reversible!` macro, as a plain library: parse reversible functions,
//! check them, invert them (seed 000 Table I) and generate Rust for the function and its inverse.
//! `adjoint-rev-macros` is a thin shell around [`expand`]; everything here is unit-tested without
//! macro expansion.
//!
//! ```
//! let out = adjoint_rev_syntax::expand(
//!     quote::quote! { fn multiplier<T: Arith>(y: &mut T, a: &mut T, b: &mut T) { y += a * b; } },
//!     quote::quote!(::adjoint_rev),
//! );
//! let text = out.to_string();
//! assert!(text.contains("fn uncall"));        // the inverse
//! assert!(!text.contains("compile_error"));
//! ```

mod codegen;
mod invert;
pub mod ir;
pub mod literal;
mod lower;
pub mod parse;

pub use invert::invert;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::cell::Cell;

/// Expand a `reversible! { … }` invocation; `krate` is the path of the runtime crate. Errors come
/// back as `compile_error!` tokens spanned at the offending input.
pub fn expand(input: TokenStream, krate: TokenStream) -> TokenStream {
    match try_expand(input, &krate) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

/// [`expand`], with the error as a value (for tests).
pub fn try_expand(input: TokenStream, krate: &TokenStream) -> syn::Result<TokenStream> {
    let funcs: parse::Funcs = syn::parse2(input)?;
    let mut out = TokenStream::new();
    let mut errors = funcs.1;
    for f in funcs.0 {
        match function(f, krate) {
            Ok(ts) => out.extend(ts),
            Err(e) => parse::push_error(&mut errors, e),
        }
    }
    errors.map_or(Ok(out), Err)
}

fn function(f: ir::Func, krate: &TokenStream) -> syn::Result<TokenStream> {
    let params: Vec<String> = f.params.iter().map(|(n, _)| n.to_string()).collect();
    let body = lower::expand(f.body)?;
    lower::check(&body, &params)?;
    let name = f.sig.ident.clone();
    let gen_in = |stmts: &[ir::Stmt], backwards: bool, checks: bool, keep: bool| {
        codegen::Gen {
            krate,
            fname: name.to_string(),
            params: params.clone(),
            backwards,
            keep,
            counter: Cell::new(0),
            at: Cell::new(proc_macro2::Span::call_site()),
        }
        .stmts(stmts, checks)
    };
    let gen =
        |stmts: &[ir::Stmt], backwards: bool, checks: bool| gen_in(stmts, backwards, checks, false);
    let writes = codegen::written_params(&body, &params);
    // Gradient passes keep routine values on a stack, which needs `'static` value types: not
    // for functions with lifetimes or `impl Trait` arguments (their keeping twins delegate).
    let keeps = f.sig.generics.lifetimes().next().is_none()
        && f.params
            .iter()
            .all(|(_, t)| !matches!(t, syn::Type::ImplTrait(_)));
    let marked = codegen::mark(&body);
    // The body without its final uncomputation, marked (its routine's calls keep too).
    let head = match body.last() {
        Some(ir::Stmt {
            kind: ir::Kind::Uncompute(..),
            ..
        }) => Some(codegen::mark(&body[..body.len() - 1])),
        _ => None,
    };
    // A body that ends by uncomputing its routine gets a fused gradient pass (see its doc),
    // when that routine writes only its own ancillas (else the parameters the seed sees would
    // still hold the routine's values: the pass runs the function, the seed and the inverse).
    let fusable = match body.last() {
        Some(ir::Stmt {
            kind: ir::Kind::Uncompute(_, routine),
            ..
        }) => codegen::fusable(routine, &params),
        _ => None,
    };
    let pass = head.as_ref().map(|head| {
        (
            gen_in(head, false, false, keeps),
            gen_in(&invert(head), true, false, keeps),
            fusable,
        )
    });
    let kept_ty = quote!(#krate::Kept);
    let names: Vec<&syn::Ident> = f.params.iter().map(|(n, _)| n).collect();
    // `f::__call_keep` and `f::__uncall_kept`: `f` and its inverse as a gradient pass runs them
    // (unchecked; see `codegen::mark`). Where `f` uncomputes a routine that writes only its
    // ancillas, `__call_keep` keeps them instead (their gradients, zero in a forward half,
    // dropped), and `__uncall_kept` takes them back instead of recomputing them.
    let (call_keep, uncall_kept) = if keeps {
        (
            gen_in(&marked, false, false, true),
            gen_in(&invert(&marked), true, false, true),
        )
    } else {
        (
            quote!(#name::call_unchecked(#(#names),*)?;),
            quote!(#name::uncall_unchecked(#(#names),*)?;),
        )
    };
    let inverted = invert(&body);
    let forward = gen(&body, false, true);
    let inverse = gen(&inverted, true, true);
    let forward_unchecked = gen(&body, false, false);
    let inverse_unchecked = gen(&inverted, true, false);

    let mut sig = f.sig.clone();
    sig.output = syn::parse_quote!(-> ::core::result::Result<(), #krate::InvertibilityError>);
    let renamed = |n: &str| {
        let mut s = sig.clone();
        s.ident = format_ident!("{}", n, span = name.span());
        s
    };
    let usig = renamed("uncall");
    let csig_unchecked = renamed("call_unchecked");
    let usig_unchecked = renamed("uncall_unchecked");
    let attrs = &f.attrs;
    let code_attrs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    // (`#[cfg]` and the like also on the struct and the impls: they come and go with the fn)
    let item_attrs = item_attrs(&f.attrs);
    let vis = &f.vis;
    // Generic reversible functions are small and called from each other's bodies: inlining lets
    // LLVM delete uncomputation whose result is never read (unchecked code).
    let inline = if f.attrs.iter().any(|a| a.path().is_ident("inline")) {
        quote!()
    } else {
        quote!(#[inline])
    };
    // Reversible loops run over index ranges and literals are converted generically: lints about
    // either would fire on every generated body.
    let allow = quote!(#[allow(
        unused_parens,
        unused_braces,
        clippy::double_parens,
        clippy::needless_question_mark,
        clippy::unit_arg,
        clippy::needless_range_loop,
        clippy::unnecessary_cast,
        clippy::identity_op,
        clippy::int_plus_one,
        clippy::multiple_bound_locations
    )]);

    let doc_struct = format!(
        "The reversible function [`{name}`](fn@{name}) as a value: `{name}::uncall` runs it backwards, and \
         `{name} {{}}` can be handed to `rev::grad` and friends."
    );
    let doc_uncall = format!(
        "The inverse of [`{name}`](fn@{name}): undoes one call exactly (`~{name}` in NiLang)."
    );
    let nparams = params.len();
    let write_consts = writes.iter().enumerate().map(|(l, w)| {
        let c = codegen::writes_const(l);
        quote! {
            #[doc(hidden)]
            #vis const #c: [bool; #nparams] = [#(#w),*];
        }
    });
    let doc_unchecked = format!(
        "[`{name}`](fn@{name}) without reversibility checks, in it and in every reversible function it calls \
         (NiLang's `@invcheckoff` for proven code): no `unlet`, condition or bound checks (the checks \
         that arguments do not alias stay: they guard the result); routines that write only passive \
         ancillas (also through calls) are not uncomputed (the ancillas are dropped)."
    );
    let doc_uncall_unchecked = format!(
        "The inverse of [`{name}`](fn@{name}) without reversibility checks (see `call_unchecked`)."
    );

    // `Reversible` over the tuple of argument types, when every argument is a sized value.
    let sized = f.params.iter().all(|(_, t)| {
        !matches!(
            t,
            syn::Type::Slice(_) | syn::Type::TraitObject(_) | syn::Type::ImplTrait(_)
        )
    }) && f.sig.generics.lifetimes().next().is_none();
    let reversible = if sized {
        let tys: Vec<&syn::Type> = f.params.iter().map(|(_, t)| t).collect();
        let idx: Vec<syn::Index> = (0..tys.len()).map(syn::Index::from).collect();
        let (impl_g, _, where_c) = f.sig.generics.split_for_impl();
        // A second impl for a non-generic function, so that `grad` on it is an unmet
        // `Reversible<(GVar<f64>, …)>` bound (whose diagnostic says to make it generic) rather
        // than a type mismatch inferred from the only impl.
        let not_generic = if f.sig.generics.params.is_empty() && !tys.is_empty() {
            // Of the same arity, so that neither impl can be inferred from the other.
            let ng: Vec<TokenStream> = tys.iter().map(|_| quote!(#krate::NotGeneric)).collect();
            quote! {
                #(#item_attrs)*
                impl #krate::Reversible<(#(#ng,)*)> for #name {
                    fn call(args: &mut (#(#ng,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                        match args.0 {}
                    }
                    fn uncall(args: &mut (#(#ng,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                        match args.0 {}
                    }
                }
            }
        } else {
            quote!()
        };
        quote! {
            #not_generic
            #(#item_attrs)*
            impl #impl_g #krate::Reversible<(#(#tys,)*)> for #name #where_c {
                fn call(args: &mut (#(#tys,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                    #name(#(&mut args.#idx),*)
                }
                fn uncall(args: &mut (#(#tys,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                    #name::uncall(#(&mut args.#idx),*)
                }
                fn call_unchecked(args: &mut (#(#tys,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                    #name::call_unchecked(#(&mut args.#idx),*)
                }
                fn uncall_unchecked(args: &mut (#(#tys,)*)) -> ::core::result::Result<(), #krate::InvertibilityError> {
                    #name::uncall_unchecked(#(&mut args.#idx),*)
                }
            }
        }
    } else {
        quote!()
    };
    // The keeping twins and the pass take `'static` type parameters (the stack's values).
    let statics = |sig: &mut syn::Signature| {
        if keeps {
            let tys: Vec<syn::Ident> = sig
                .generics
                .type_params()
                .map(|t| t.ident.clone())
                .collect();
            let w = sig.generics.make_where_clause();
            for t in tys {
                w.predicates.push(syn::parse_quote!(#t: 'static));
            }
        }
    };
    // (the generated parameters and locals are hygienic: a user's parameter of the same name,
    // `seed` say, neither collides with them nor sees them)
    let kept = codegen::kept();
    let kept_param: syn::FnArg = syn::parse_quote!(#kept: &mut #kept_ty);
    let mut ksig = renamed("__call_keep");
    ksig.inputs.push(kept_param.clone());
    statics(&mut ksig);
    let mut usig_kept = renamed("__uncall_kept");
    usig_kept.inputs.push(kept_param);
    statics(&mut usig_kept);
    let keep_fns = quote! {
        /// Gradient passes only: the function as a pass runs it, keeping the routine values
        /// its uncomputation would drop on `__rev_kept` (unchecked).
        #[doc(hidden)]
        #(#code_attrs)*
        #allow
        #[allow(unused_variables, unused_mut, clippy::too_many_arguments)]
        #inline
        #vis #ksig { #call_keep ::core::result::Result::Ok(()) }

        /// Gradient passes only: the inverse, taking back what the mirrored
        /// `__call_keep` kept instead of recomputing it (unchecked).
        #[doc(hidden)]
        #(#code_attrs)*
        #allow
        #[allow(unused_variables, unused_mut, clippy::too_many_arguments)]
        #inline
        #vis #usig_kept { #uncall_kept ::core::result::Result::Ok(()) }
    };
    let pass_fn = match pass {
        Some((fwd, inv, fusable)) => {
            let mut psig = renamed("gradient_pass_unchecked");
            let tys: Vec<&syn::Type> = f.params.iter().map(|(_, t)| t).collect();
            let seed = syn::Ident::new("seed", proc_macro2::Span::mixed_site());
            psig.inputs
                .push(syn::parse_quote!(#seed: impl ::core::ops::FnOnce(#(&mut #tys),*)));
            statics(&mut psig);
            let doc = format!(
                "[`{name}`](fn@{name}) and its inverse in one pass, without checks, for \
                 gradients: runs `{name}` (its final uncomputation left out), calls `seed` on \
                 the arguments (set the cotangents of the results on `GVar`s whose gradients \
                 are zero), then runs the inverse (whose leading recomputation is left out: \
                 the two would cancel). The routine is computed once instead of three times, \
                 and so is the routine of each function it calls whose routine writes only its \
                 own ancillas: the pass keeps those values (a stack, NiLang's checkpointing) \
                 and the inverse takes them back instead of recomputing them. The results are \
                 those of `call_unchecked`, `seed` and `uncall_unchecked` in turn (bit for bit \
                 where the inverse restores each routine's inputs exactly, as when they are \
                 only read) when every gradient in the arguments is zero on entry \
                 (`GVar::new(x, 0.0)`) and, as `~@routine` itself requires, the code between \
                 a routine and its uncomputation leaves the routine's inputs alone. A final \
                 routine that writes an argument (or calls code that may) is not left out: the \
                 pass then is `call_unchecked`, `seed` and `uncall_unchecked`."
            );
            let fused = fusable.unwrap_or_else(|| quote!(false));
            let (open, close) = if keeps {
                let stack = syn::Ident::new("__rev_kept_stack", proc_macro2::Span::mixed_site());
                (
                    quote! {
                        let mut #stack = #kept_ty::take();
                        let #kept = &mut #stack;
                    },
                    quote!(#kept_ty::give_back(#stack);),
                )
            } else {
                (quote!(), quote!())
            };
            quote! {
                #[doc = #doc]
                #(#code_attrs)*
                #allow
                #[allow(unused_variables, clippy::too_many_arguments)]
                #inline
                #vis #psig {
                    if #fused {
                        #open
                        #fwd
                        #seed(#(&mut *#names),*);
                        #inv
                        #close
                    } else {
                        #name::call_unchecked(#(&mut *#names),*)?;
                        #seed(#(&mut *#names),*);
                        #name::uncall_unchecked(#(&mut *#names),*)?;
                    }
                    ::core::result::Result::Ok(())
                }
            }
        }
        None => quote!(),
    };
    Ok(quote! {
        #(#attrs)*
        #allow
        #inline
        #vis #sig { #forward ::core::result::Result::Ok(()) }

        #[doc = #doc_struct]
        #(#item_attrs)*
        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name {}

        #(#item_attrs)*
        impl #name {
            // Which arguments the function may write, seen through 0 to 3 levels of calls
            // (the unchecked code of a caller's routine that passes it non-ancillas only where
            // this is `false` may skip uncomputing the routine, and a gradient pass may keep it).
            #(#write_consts)*

            #[doc = #doc_uncall]
            #(#code_attrs)*
            #allow
            #inline
            #vis #usig { #inverse ::core::result::Result::Ok(()) }

            #[doc = #doc_unchecked]
            #(#code_attrs)*
            #allow
            #[allow(unused_variables)] // variables read only by the checks
            #inline
            #vis #csig_unchecked { #forward_unchecked ::core::result::Result::Ok(()) }

            #[doc = #doc_uncall_unchecked]
            #(#code_attrs)*
            #allow
            #[allow(unused_variables)]
            #inline
            #vis #usig_unchecked { #inverse_unchecked ::core::result::Result::Ok(()) }

            #pass_fn

            #keep_fns
        }

        #reversible
    })
}

/// The attributes of a reversible function that also go on the other items generated for it
/// (its struct, the struct's `impl` block, its `Reversible` impls), so that they come and go
/// with it: `#[cfg]`, and `#[cfg_attr]` where all it may add is a `cfg`, an `allow` or docs
/// (what else it adds, `inline` say, may not be allowed on a struct or an impl; it stays on the
/// functions and methods).
fn item_attrs(attrs: &[syn::Attribute]) -> Vec<&syn::Attribute> {
    fn cfg_attr_carried(meta: &syn::Meta) -> bool {
        let syn::Meta::List(list) = meta else {
            return false;
        };
        list.path.is_ident("cfg_attr")
            && list
                .parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .is_ok_and(|args| {
                    // (the first is the predicate)
                    args.len() > 1
                        && args.iter().skip(1).all(|m| {
                            ["cfg", "allow", "doc"].iter().any(|n| m.path().is_ident(n))
                                || cfg_attr_carried(m)
                        })
                })
    }
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg") || cfg_attr_carried(&a.meta))
        .collect()
}

#[cfg(test)]
mod tests;
