//! The `reversible!` macro. All of its logic lives in `adjoint-rev-syntax`; this crate only finds
//! the runtime crate's path and hands over the tokens. Use it through `adjoint::rev` or
//! `adjoint_rev`, whose docs teach the language.

use proc_macro::TokenStream;
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;

/// Define reversible functions and their inverses. See the `adjoint_rev` crate docs.
#[proc_macro]
pub fn reversible(input: TokenStream) -> TokenStream {
    adjoint_rev_syntax::expand(input.into(), runtime_path()).into()
}

/// The path of the runtime crate as the caller sees it: `::adjoint_rev` when the caller depends on
/// it (or is it), else `::adjoint::rev` through the facade.
fn runtime_path() -> proc_macro2::TokenStream {
    match crate_name("adjoint-rev") {
        Ok(FoundCrate::Itself) => quote!(::adjoint_rev),
        Ok(FoundCrate::Name(name)) => {
            let ident = proc_macro2::Ident::new(&name, proc_macro2::Span::call_site());
            quote!(::#ident)
        }
        Err(_) => match crate_name("adjoint") {
            Ok(FoundCrate::Name(name)) => {
                let ident = proc_macro2::Ident::new(&name, proc_macro2::Span::call_site());
                quote!(::#ident::rev)
            }
            _ => quote!(::adjoint::rev),
        },
    }
}
