//! Literal operands (`y += x * 3`, `c += 0x9E37_79B9_7F4A_7C15u64`, `z -= 0.1`): read exactly —
//! sign, integer part, the first 128 bits of the fraction and a sticky bit for the rest — and
//! handed to the runtime's `lit`, which converts them to the instruction's number type at compile
//! time (exactly for integers, correctly rounded for fixed point, to the nearest `f64` for
//! floating point, rounded once to `f32` for `f32`) and refuses, at compile time, a literal that
//! does not fit. A suffixed literal keeps its type: the instruction must be of that type.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{Error, Expr, Result, UnOp};

/// Suffixes that name a number type.
const SUFFIXES: &[&str] = &[
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32",
    "f64",
];

/// A numeric literal, exactly.
#[derive(Debug, PartialEq)]
pub struct Literal {
    /// Written with a minus sign (an odd number of them).
    pub neg: bool,
    /// The integer part, `u128::MAX` (with `frac` all ones and `sticky`) when it is `≥ 2¹²⁸`.
    pub int: u128,
    /// The first 128 bits of the fraction.
    pub frac: u128,
    /// Whether any bit of the fraction after the first 128 is set.
    pub sticky: bool,
    /// Written as a float (a decimal point, an exponent or a float suffix).
    pub float: bool,
    /// The suffix, if any (`u64`, `f32`, …).
    pub suffix: Option<String>,
    /// The magnitude in decimal, as a Rust float literal without suffix (`1.5e-3`).
    pub decimal: String,
}

impl Literal {
    /// Read a literal operand: `3`, `-0.5`, `(2u64)`, `1e-3`.
    pub fn parse(e: &Expr) -> Result<Literal> {
        match e {
            Expr::Paren(p) => Literal::parse(&p.expr),
            Expr::Group(g) => Literal::parse(&g.expr),
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
                let mut l = Literal::parse(&u.expr)?;
                l.neg = !l.neg;
                Ok(l)
            }
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => {
                let suffix = suffix(i.suffix(), i.span())?;
                let float = matches!(suffix.as_deref(), Some("f32" | "f64"));
                let digits = i.base10_digits();
                let int = digits.parse::<u128>().map_err(|_| {
                    Error::new(
                        i.span(),
                        format!("the integer literal `{i}` is too large for any integer type"),
                    )
                })?;
                Ok(Literal {
                    neg: false,
                    int,
                    frac: 0,
                    sticky: false,
                    float,
                    suffix,
                    decimal: format!("{digits}.0"),
                })
            }
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Float(f),
                ..
            }) => {
                let suffix = suffix(f.suffix(), f.span())?;
                if matches!(suffix.as_deref(), Some(s) if !s.starts_with('f')) {
                    return Err(Error::new(f.span(), "an integer suffix on a float literal"));
                }
                let (int, frac, sticky, decimal) = decimal(f.base10_digits())
                    .ok_or_else(|| Error::new(f.span(), "unreadable float literal"))?;
                let v: f64 = decimal.parse().unwrap_or(f64::INFINITY);
                // (an `f32` literal rounded once, as rustc reads it: through its nearest `f64`,
                // one just below the overflow threshold became infinite)
                let v32: f32 = decimal.parse().unwrap_or(f32::INFINITY);
                if v.is_infinite() || (suffix.as_deref() == Some("f32") && v32.is_infinite()) {
                    let (ty, max) = match suffix.as_deref() {
                        Some("f32") => ("f32", "3.4028235e38"),
                        _ => ("f64", "1.7976931348623157e308"),
                    };
                    return Err(Error::new(
                        f.span(),
                        format!("the literal `{f}` is out of range for {ty} (its largest value is {max})"),
                    ));
                }
                Ok(Literal {
                    neg: false,
                    int,
                    frac,
                    sticky,
                    float: true,
                    suffix,
                    decimal,
                })
            }
            other => Err(Error::new_spanned(other, "expected a numeric literal")),
        }
    }

    /// The generated expression: `lit::<T, NEG, INT, FRAC, STICKY, FLOAT>(value, value32)`, where
    /// `T` is the suffix's type or inferred from the instruction, `value` the nearest `f64` and
    /// `value32` the magnitude's nearest `f32`.
    pub fn tokens(&self, krate: &TokenStream, span: Span) -> TokenStream {
        let ty = match &self.suffix {
            Some(s) => {
                let id = syn::Ident::new(s, span);
                quote!(#id)
            }
            None => quote_spanned!(span=> _),
        };
        let (neg, float, sticky) = (self.neg, self.float, self.sticky);
        // The numbers the macro writes are not the user's tokens: they carry the macro's span, so
        // that lints reading the source at a literal's span (clippy's) do not see the user's.
        let int = proc_macro2::Literal::u128_suffixed(self.int);
        let frac = proc_macro2::Literal::u128_suffixed(self.frac);
        // The nearest `f64`, spelled in the shortest form that reads back as it (`parse` refused
        // one out of f64's range).
        let v: f64 = self.decimal.parse().unwrap_or(f64::INFINITY);
        let text = if v.is_finite() {
            format!("{v:?}f64")
        } else {
            format!("{}f64", self.decimal)
        };
        let value = syn::LitFloat::new(&text, Span::call_site());
        let value = if self.neg {
            quote!(-#value)
        } else {
            quote!(#value)
        };
        // The magnitude's nearest `f32`, rounded once (for `f32`: its nearest `f64`, rounded
        // again, can be off by an ulp).
        let v32: f32 = self.decimal.parse().unwrap_or(f32::INFINITY);
        let value32 = if v32.is_finite() {
            let l = syn::LitFloat::new(&format!("{v32:?}f32"), Span::call_site());
            quote!(#l)
        } else {
            quote!(::core::f32::INFINITY)
        };
        quote_spanned!(span=> #krate::lit::<#ty, #neg, #int, #frac, #sticky, #float>(#value, #value32))
    }
}

fn suffix(s: &str, span: Span) -> Result<Option<String>> {
    if s.is_empty() {
        return Ok(None);
    }
    if SUFFIXES.contains(&s) {
        return Ok(Some(s.to_string()));
    }
    Err(Error::new(
        span,
        format!("unknown literal suffix `{s}`: expected a number type (`u64`, `i32`, `f64`, …)"),
    ))
}

/// A decimal float (`d.ddd`, `d.dde±x`, underscores removed) as its integer part, the first 128
/// bits of its fraction, a sticky bit and a normalised Rust spelling of the magnitude.
fn decimal(s: &str) -> Option<(u128, u128, bool, String)> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(k) => (&s[..k], s[k + 1..].parse::<i64>().ok()?),
        None => (s, 0),
    };
    let (ip, fp) = match mantissa.find('.') {
        Some(k) => (&mantissa[..k], &mantissa[k + 1..]),
        None => (mantissa, ""),
    };
    if !ip.bytes().chain(fp.bytes()).all(|b| b.is_ascii_digit()) || ip.len() + fp.len() == 0 {
        return None;
    }
    let spelled = format!(
        "{}.{}e{exp}",
        if ip.is_empty() { "0" } else { ip },
        if fp.is_empty() { "0" } else { fp }
    );
    // The digits, most significant first, and where the decimal point falls among them.
    let mut digits: Vec<u8> = ip.bytes().chain(fp.bytes()).map(|b| b - b'0').collect();
    let lead = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..lead);
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        return Some((0, 0, false, spelled));
    }
    let point = (ip.len() as i64 - lead as i64).saturating_add(exp);
    let huge = Some((u128::MAX, u128::MAX, true, spelled.clone()));
    // Integer part: the digits before the point (and zeros when the point is past them).
    let mut int: u128 = 0;
    if point > 0 {
        if point > 40 {
            return huge; // at least 10^40 > 2^128
        }
        for k in 0..point as usize {
            let d = digits.get(k).copied().unwrap_or(0);
            int = match int
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d)))
            {
                Some(v) => v,
                None => return huge,
            };
        }
    }
    // Fraction: the digits after the point, doubled 128 times; each carry out is the next bit.
    let mut fd: Vec<u8> = if point >= digits.len() as i64 {
        vec![]
    } else if point >= 0 {
        digits[point as usize..].to_vec()
    } else if point < -400 {
        // Below 10^-400: every one of the 128 bits is zero, and the rest is not.
        return Some((0, 0, true, spelled));
    } else {
        let mut v = vec![0; (-point) as usize];
        v.extend_from_slice(&digits);
        v
    };
    let mut frac: u128 = 0;
    for _ in 0..128 {
        let mut carry = 0;
        for d in fd.iter_mut().rev() {
            let v = *d * 2 + carry;
            *d = v % 10;
            carry = v / 10;
        }
        frac = (frac << 1) | u128::from(carry);
        while fd.last() == Some(&0) {
            fd.pop();
        }
    }
    let sticky = !fd.is_empty();
    Some((int, frac, sticky, spelled))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Literal {
        Literal::parse(&syn::parse_str::<Expr>(s).unwrap()).unwrap()
    }

    #[test]
    fn integers_keep_every_digit_and_their_suffix() {
        let l = lit("0x9E37_79B9_7F4A_7C15u64");
        assert_eq!(l.int, 0x9E37_79B9_7F4A_7C15);
        assert_eq!(l.suffix.as_deref(), Some("u64"));
        assert!(!l.neg && !l.float);
        let l = lit("-(170141183460469231731687303715884105728)");
        assert!(l.neg);
        assert_eq!(l.int, 1 << 127);
        assert_eq!(
            lit("340282366920938463463374607431768211455").int,
            u128::MAX
        );
        assert!(Literal::parse(
            &syn::parse_str::<Expr>("340282366920938463463374607431768211456").unwrap()
        )
        .is_err());
        assert!(Literal::parse(&syn::parse_str::<Expr>("3u7").unwrap()).is_err());
    }

    #[test]
    fn decimals_are_exact_in_binary() {
        let l = lit("0.5");
        assert_eq!(
            (l.int, l.frac, l.sticky, l.float),
            (0, 1 << 127, false, true)
        );
        let l = lit("2.75e1");
        assert_eq!((l.int, l.frac, l.sticky), (27, 1 << 127, false));
        // 2^-32 = 0.00000000023283064365386962890625, exactly bit 32 of the fraction.
        let l = lit("0.00000000023283064365386962890625");
        assert_eq!((l.int, l.frac, l.sticky), (0, 1 << 96, false));
        // 0.1 = 0.000110011001100…: the bits of 0x1999…, never ending.
        let l = lit("0.1");
        assert_eq!(
            (l.int, l.frac >> 64, l.sticky),
            (0, 0x1999_9999_9999_9999, true)
        );
        let l = lit("1e40");
        assert_eq!((l.int, l.sticky), (u128::MAX, true));
        let l = lit("1e-500");
        assert_eq!((l.int, l.frac, l.sticky), (0, 0, true));
        assert_eq!(lit("0.0e7").int, 0);
        assert_eq!(lit("1_000.5f32").suffix.as_deref(), Some("f32"));
        assert_eq!(lit("2.").decimal, "2.0e0");
    }
}
