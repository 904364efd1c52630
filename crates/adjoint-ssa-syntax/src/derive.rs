//! `#[derive(Differentiable)]`: a struct of differentiable fields, generic over its number type.
//!
//! The struct is written once, over a type parameter: `struct Params<T = f64> { w: T, b: [T; 3] }`.
//! `Params` (that is, `Params<f64>`) holds values and gradients; `Params<T>` is what `primal` and
//! `pullback` take at any `Real` type (`Params<Dual<f64>>` for forward mode). The derive checks
//! the shape (every field `T` or `[T; N]`) and implements the runtime's `Differentiable` trait:
//! `Of<U>` (the same struct over `U`), `zero()`, `set_zero()` and `lift()`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;

/// Expand `#[derive(Differentiable)]` on `item`; `rt` is the runtime crate's path. Errors are
/// `compile_error!` tokens at the offending part of the struct.
///
/// ```
/// let out = adjoint_ssa_syntax::derive::expand(
///     quote::quote! { struct P<T = f64> { w: T, b: [T; 3] } },
///     &quote::quote!(::adjoint_ssa),
/// );
/// assert!(out.to_string().contains("Differentiable for P"));
/// let bad = adjoint_ssa_syntax::derive::expand(
///     quote::quote! { struct Q { w: f64 } },
///     &quote::quote!(::adjoint_ssa),
/// );
/// assert!(bad.to_string().contains("compile_error"));
/// for bad in [quote::quote! { struct R<T = f32> { w: T } }, quote::quote! { struct E<T = f64> {} }] {
///     let out = adjoint_ssa_syntax::derive::expand(bad, &quote::quote!(::adjoint_ssa));
///     assert!(out.to_string().contains("compile_error"), "{out}");
/// }
/// ```
pub fn expand(item: TokenStream, rt: &TokenStream) -> TokenStream {
    match try_expand(item, rt) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn err<T>(at: impl quote::ToTokens, msg: &str) -> syn::Result<T> {
    Err(syn::Error::new_spanned(at, msg))
}

const SHAPE: &str = "a differentiable struct is generic over its number type, with fields `T` or \
                     `[T; N]`: `#[derive(Differentiable)] struct Params<T = f64> { w: T, b: [T; 3] }`";

fn try_expand(item: TokenStream, rt: &TokenStream) -> syn::Result<TokenStream> {
    let input: syn::DeriveInput = syn::parse2(item)?;
    let data = match &input.data {
        syn::Data::Struct(d) => d,
        syn::Data::Enum(e) => return err(e.enum_token, "only structs can derive `Differentiable`"),
        syn::Data::Union(u) => {
            return err(u.union_token, "only structs can derive `Differentiable`")
        }
    };
    let syn::Fields::Named(fields) = &data.fields else {
        return err(
            &input.ident,
            "give the fields names: `struct Params<T = f64> { w: T }`",
        );
    };
    let g = &input.generics;
    if let Some(w) = &g.where_clause {
        return err(
            w,
            "`where` clauses are not supported on a differentiable struct",
        );
    }
    let mut tps = vec![];
    for p in &g.params {
        match p {
            syn::GenericParam::Type(t) => tps.push(t),
            syn::GenericParam::Lifetime(l) => {
                return err(
                    l,
                    "references inside a differentiable struct are not supported: own the data \
                     (`[T; N]`) or pass slices as separate parameters",
                )
            }
            syn::GenericParam::Const(c) => {
                return err(
                    c,
                    "const generics are not supported: give array lengths as literals or `const` \
                     items",
                )
            }
        }
    }
    let [tp] = &tps[..] else {
        return err(&input.ident, SHAPE);
    };
    if !tp.bounds.is_empty() {
        return err(
            &tp.bounds,
            "leave the number type unbounded: `struct Params<T = f64>`",
        );
    }
    // (a hunter: these were accepted, then failed with rustc errors far from the cause)
    if let Some(d) = &tp.default {
        if !matches!(d, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f64")) {
            return err(
                d,
                "the number type's default is `f64` (values and gradients are `f64`): \
                 `struct Params<T = f64>`",
            );
        }
    }
    if fields.named.is_empty() {
        return err(
            &input.ident,
            "a differentiable struct needs at least one field `T` or `[T; N]`",
        );
    }
    let t = &tp.ident;
    let is_t = |ty: &syn::Type| matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident(t));
    let real = quote!(#rt::Real);
    let zero = quote!(<#t as #real>::cst(0.0));
    let u = syn::Ident::new("__AdjointU", proc_macro2::Span::mixed_site());
    let lift1 = |x: TokenStream| quote!(<#u as #real>::cst(<#t as #real>::value(&#x)));
    let mut inits = vec![];
    let mut lifts = vec![];
    for f in &fields.named {
        let name = f.ident.as_ref().expect("named field");
        let z = match &f.ty {
            ty if is_t(ty) => {
                let l = lift1(quote!(self.#name));
                lifts.push(quote!(#name: #l));
                zero.clone()
            }
            syn::Type::Array(a) if is_t(&a.elem) => {
                let n = &a.len;
                let l = lift1(quote!(self.#name[i]));
                lifts.push(quote!(#name: ::core::array::from_fn(|i| #l)));
                quote!([#zero; #n])
            }
            ty => {
                let what = match ty {
                    syn::Type::Reference(_) => "references inside a differentiable struct are not supported: own the data (`[T; N]`) or pass slices as separate parameters",
                    syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| !s.arguments.is_empty()) => "nested structs and generic types are not supported: flatten their fields into this struct (fields are `T` or `[T; N]`)",
                    syn::Type::Path(p) if p.path.is_ident("f64") => "write the number type parameter (`T`), not `f64`: the generated code runs the struct at any `Real` type",
                    _ => "fields of a differentiable struct are `T` or `[T; N]` (pass integers and other data as separate parameters)",
                };
                return Err(syn::Error::new(ty.span(), what));
            }
        };
        inits.push(quote!(#name: #z));
    }
    let name = &input.ident;
    Ok(quote! {
        #[automatically_derived]
        impl<#t: #real> #rt::Differentiable for #name<#t> {
            type Of<#u: #real> = #name<#u>;
            #[inline]
            fn zero() -> Self {
                #name { #(#inits),* }
            }
            #[inline]
            fn lift<#u: #real>(&self) -> #name<#u> {
                #name { #(#lifts),* }
            }
        }
    })
}
