//! `f32` evaluation of the primitives, for expression nodes of `f32` arrays.
//!
//! Values are computed in `f32` with Rust's `f32` functions (`f32::exp`, `f32::sin`, …), as a
//! plain `f32` program would; `erf`, `lgamma` and `polygamma`, which have no `f32` version in
//! `std`, are evaluated in `f64` and rounded once. Partial derivatives (the rule table's `d`,
//! `dx`, `dy`, …) are evaluated in `f64` at the `f32` point and rounded to `f32`.

use adjoint_core::rules::{self, Op1, Op2};

/// Round an `f64` to the nearest `f32` (kept widened, exactly, in an `f64` slot).
#[inline(always)]
pub(crate) fn r32(x: f64) -> f64 {
    x as f32 as f64
}

/// The value of a unary primitive in `f32`.
#[inline(always)]
pub(crate) fn un32(op: Op1, x: f32) -> f32 {
    match op {
        Op1::Neg => -x,
        Op1::Recip => x.recip(),
        Op1::Sqrt => x.sqrt(),
        Op1::Cbrt => x.cbrt(),
        Op1::Powi(n) => x.powi(n),
        Op1::Exp => x.exp(),
        Op1::Exp2 => x.exp2(),
        Op1::ExpM1 => x.exp_m1(),
        Op1::Ln => x.ln(),
        Op1::Ln1p => x.ln_1p(),
        Op1::Log2 => x.log2(),
        Op1::Log10 => x.log10(),
        Op1::Sin => x.sin(),
        Op1::Cos => x.cos(),
        Op1::Tan => x.tan(),
        Op1::Asin => x.asin(),
        Op1::Acos => x.acos(),
        Op1::Atan => x.atan(),
        Op1::Sinh => x.sinh(),
        Op1::Cosh => x.cosh(),
        Op1::Tanh => x.tanh(),
        Op1::Asinh => x.asinh(),
        Op1::Acosh => x.acosh(),
        Op1::Atanh => x.atanh(),
        Op1::Abs => x.abs(),
        Op1::Erf | Op1::Lgamma | Op1::Polygamma(_) => rules::unary(op, f64::from(x)).value as f32,
    }
}

/// The value of a binary primitive in `f32`.
#[inline(always)]
pub(crate) fn bin32(op: Op2, x: f32, y: f32) -> f32 {
    match op {
        Op2::Add => x + y,
        Op2::Sub => x - y,
        Op2::Mul => x * y,
        Op2::Div => x / y,
        Op2::Powf => x.powf(y),
        Op2::Atan2 => x.atan2(y),
        Op2::Min => x.min(y),
        Op2::Max => x.max(y),
        Op2::Hypot => x.hypot(y),
        Op2::Rem => x % y,
    }
}

/// `a + b` in the element type (`f32` rounds).
#[inline(always)]
pub(crate) fn add_t(f32: bool, a: f64, b: f64) -> f64 {
    if f32 {
        f64::from(a as f32 + b as f32)
    } else {
        a + b
    }
}
