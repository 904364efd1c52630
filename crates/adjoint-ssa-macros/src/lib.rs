//! The `#[differentiable]` attribute of adjoint's SSA transform. All of its logic lives in
//! `adjoint-ssa-syntax`; this crate only finds the runtime crate's path and hands over the
//! tokens. Use it through `adjoint::ssa` or `adjoint_ssa`, whose docs describe the generated
//! items.

use proc_macro::TokenStream;
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;

/// Differentiate a function by source transformation: keeps the function and adds a module of
/// the same name with `primal`, `pullback` and `pullback_vec`, and `grad` and `grad_with` where
/// the function returns `f64` and has no `&mut` outputs. See the `adjoint_ssa` docs.
#[proc_macro_attribute]
pub fn differentiable(attr: TokenStream, item: TokenStream) -> TokenStream {
    adjoint_ssa_syntax::expand(attr.into(), item.into(), runtime_path()).into()
}

/// `#[derive(Differentiable)]` on `struct Params<T = f64> { w: T, b: [T; 3] }`: implements
/// `Differentiable` so that `#[differentiable]` functions take `&Params` (gradient: a `Params`).
/// See the `adjoint_ssa` docs.
#[proc_macro_derive(Differentiable)]
pub fn derive_differentiable(item: TokenStream) -> TokenStream {
    adjoint_ssa_syntax::derive::expand(item.into(), &runtime_path()).into()
}

/// The path of the runtime crate as the caller sees it: `::adjoint_ssa` when the caller depends
/// on it (or is it), else `::adjoint::ssa` through the facade.
fn runtime_path() -> proc_macro2::TokenStream {
    match crate_name("adjoint-ssa") {
        Ok(FoundCrate::Itself) => quote!(::adjoint_ssa),
        Ok(FoundCrate::Name(name)) => {
            let ident = proc_macro2::Ident::new(&name, proc_macro2::Span::call_site());
            quote!(::#ident)
        }
        Err(_) => match crate_name("adjoint") {
            Ok(FoundCrate::Name(name)) => {
                let ident = proc_macro2::Ident::new(&name, proc_macro2::Span::call_site());
                quote!(::#ident::ssa)
            }
            _ => quote!(::adjoint::ssa),
        },
    }
}
