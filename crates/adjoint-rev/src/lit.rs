//! Literals of reversible code. The macro hands every literal operand over exactly — sign,
//! integer part, the first 128 bits of the fraction and whether any bit after those is set — and
//! each number type says how it takes literals ([`Literals`]). The conversion to integers and
//! fixed point is computed at compile time, exactly (correctly rounded for fractions), and a
//! literal that does not fit is a compile error: never a silent rounding or wrap.

use crate::num::Arith;
use core::marker::PhantomData;

/// How a number type takes the literals of reversible code (`y += x * 3`). Integers take
/// integer literals, exactly; fixed point takes any literal, rounded to the nearest value (ties
/// to even) and exact whenever the literal is representable; floating-point types take the
/// literal's nearest `f64` through [`Arith::from_f64`] (`f32` its nearest `f32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Literals {
    /// The literal's nearest `f64`, converted by `from_f64` (floats, `GVar`, `Dual`, and the
    /// default for user types).
    Float,
    /// `f32`: the literal's nearest `f32` (rounded once, from the decimal as written, as
    /// `rustc` rounds an `f32` literal), handed to [`Arith::from_literal`] as its bits in `mag`;
    /// one that rounds to ±∞ (from `2¹²⁸ − 2¹⁰³` ≈ 3.40282357e38 up, `1e39`) does not fit.
    Float32,
    /// A primitive integer of `bits` bits: integer literals that fit, exactly.
    Int {
        /// Whether the type is signed.
        signed: bool,
        /// Its width.
        bits: u32,
    },
    /// Signed binary fixed point of `bits` bits, `frac` of them fractional.
    Fixed {
        /// Its width.
        bits: u32,
        /// The number of fractional bits.
        frac: u32,
    },
}

/// The smallest integer that rounds to infinity as `f32`: half an `f32` ulp above `f32::MAX`
/// (`2¹²⁸ − 2¹⁰³`, a tie that rounds to even, up). A literal at or above it has an integer part
/// at or above it, and one below it has a smaller integer part.
const F32_OVERFLOW: u128 = u128::MAX - (1 << 103) + 1;

/// The bits of a literal in a number type of kind `kind`, as sign and magnitude (the type's
/// [`Arith::from_literal`] builds the value from them). `int` is the literal's integer part,
/// `frac` the first 128 bits of its fraction, `sticky` whether any later bit is set, `float`
/// whether it was written as a float. Panics — at compile time, where the generated code
/// evaluates it — when the literal does not fit.
#[doc(hidden)]
pub const fn literal_bits(
    kind: Literals,
    neg: bool,
    int: u128,
    frac: u128,
    sticky: bool,
    float: bool,
) -> (bool, u128) {
    let (signed, bits, fbits) = match kind {
        Literals::Float => return (neg, 0),
        Literals::Float32 => {
            if int >= F32_OVERFLOW {
                panic!(
                    "reversible!: a literal is out of range for f32 (its largest value is \
                     3.4028235e38)"
                );
            }
            return (neg, 0);
        }
        Literals::Int { signed, bits } => {
            if float {
                panic!(
                    "reversible!: a float literal is an operand of an integer instruction; \
                     write an integer literal"
                );
            }
            (signed, bits, 0)
        }
        Literals::Fixed { bits, frac } => (true, bits, frac),
    };
    assert!(bits >= 1 && bits <= 128 && fbits < 128);
    // value · 2^fbits, rounded to the nearest integer, ties to even.
    if fbits > 0 && int > (u128::MAX >> fbits) {
        panic!("reversible!: a literal is out of range for the instruction's number type");
    }
    let mut mag = int << fbits;
    if fbits > 0 {
        mag |= frac >> (128 - fbits);
    }
    let half = 1u128 << (127 - fbits);
    let below = frac & (half - 1) != 0 || sticky;
    if frac & half != 0 && (below || mag & 1 == 1) {
        mag = match mag.checked_add(1) {
            Some(m) => m,
            None => {
                panic!("reversible!: a literal is out of range for the instruction's number type")
            }
        };
    }
    let (max_pos, max_neg) = if signed {
        ((1u128 << (bits - 1)) - 1, 1u128 << (bits - 1))
    } else if bits == 128 {
        (u128::MAX, 0)
    } else {
        ((1u128 << bits) - 1, 0)
    };
    if neg && mag > max_neg {
        if !signed {
            panic!("reversible!: a negative literal is an operand of an unsigned instruction");
        }
        panic!("reversible!: a literal is out of range for the instruction's number type");
    }
    if !neg && mag > max_pos {
        panic!("reversible!: a literal is out of range for the instruction's number type");
    }
    (neg, mag)
}

/// A literal's bits in `T`, computed once per type and literal at compile time.
struct Bits<
    T,
    const NEG: bool,
    const INT: u128,
    const FRAC: u128,
    const STICKY: bool,
    const FLOAT: bool,
>(PhantomData<T>);

impl<
        T: Arith,
        const NEG: bool,
        const INT: u128,
        const FRAC: u128,
        const STICKY: bool,
        const FLOAT: bool,
    > Bits<T, NEG, INT, FRAC, STICKY, FLOAT>
{
    const BITS: (bool, u128) = literal_bits(T::LITERALS, NEG, INT, FRAC, STICKY, FLOAT);
}

/// A literal of reversible code as a `T` (generated code calls it; see [`literal_bits`]).
/// `value` is the literal's nearest `f64`, for floating-point types, and `value32` the nearest
/// `f32` of its magnitude, for `f32` ([`Literals::Float32`]: its bits are `from_literal`'s `mag`).
#[doc(hidden)]
#[inline(always)]
pub fn lit<
    T: Arith,
    const NEG: bool,
    const INT: u128,
    const FRAC: u128,
    const STICKY: bool,
    const FLOAT: bool,
>(
    value: f64,
    value32: f32,
) -> T {
    let (neg, mag) = Bits::<T, NEG, INT, FRAC, STICKY, FLOAT>::BITS;
    let mag = match T::LITERALS {
        Literals::Float32 => u128::from(value32.to_bits()),
        _ => mag,
    };
    T::from_literal(neg, mag, value)
}

/// `value`, which must have the type of `_target` (generated code types a literal like the
/// instruction's target, so that a suffix of another type is reported at the literal).
#[doc(hidden)]
#[inline(always)]
pub fn like<T>(_target: &T, value: T) -> T {
    value
}

/// A call argument that may be the same element as another at run time (`f(m[i], m[j])`): it is
/// checked to differ, then copied in and out of the call, so its type must be `Copy` (a number,
/// an array of numbers). Rows of a `Vec<Vec<T>>` are not: pass the matrix and the two indices.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is passed where another argument may be the same element at run time, so \
               it is copied into and out of the call and must be `Copy`: pass the whole \
               collection and the indices instead (`f(m, i, j)` for rows `m[i]`, `m[j]`)",
    label = "may be the same element as another argument"
)]
pub trait SharedArg: Copy {}

impl<T: Copy> SharedArg for T {}

/// The copy of a call argument that may alias another (see [`SharedArg`]).
#[doc(hidden)]
#[inline(always)]
pub fn shared_arg<T: SharedArg>(x: &T) -> T {
    *x
}

/// An exponent of `powi` in reversible code (`y += x.powi(n)`): an integer of any width, as a
/// literal, a constant or a variable. A float (`x.powi(2.5)`, `x.powi(x)`) does not implement
/// it, so, as with `f64::powi`, it is a compile error (write `powf`).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the exponent of `powi` must be an integer, not `{Self}`",
    label = "an integer exponent: for a real one write `powf`"
)]
pub trait PowiExponent: Copy + core::fmt::Debug {
    /// The value as `i32`, the type of `powi`'s exponent, if it fits.
    fn to_i32(self) -> Option<i32>;
}

macro_rules! powi_exponent {
    ($($t:ty),*) => {$(
        impl PowiExponent for $t {
            #[inline(always)]
            fn to_i32(self) -> Option<i32> {
                i32::try_from(self).ok()
            }
        }
    )*};
}
powi_exponent!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

/// `n` as `powi`'s `i32` exponent; an exponent that does not fit panics, naming it (cutting it
/// to 32 bits would compute another power).
#[doc(hidden)]
#[inline(always)]
pub fn powi_exponent<E: PowiExponent>(n: E) -> i32 {
    match n.to_i32() {
        Some(k) => k,
        None => panic!(
            "x.powi({n:?}): the exponent does not fit in an i32, the type of powi's exponent"
        ),
    }
}

/// A value compared with an unsuffixed integer literal in a condition (`if (x > 0, ~)`): for a
/// [`RevReal`](crate::RevReal) (`f64`, `GVar`, … and `T: RevReal`), its primal value against the
/// literal as `f64`, as a float literal compares; for other numbers (integers, fixed point), the
/// value against the literal in its own type (exact, [`lit`]). Generated code calls
/// `(&CmpLit(&x)).pair(lit::<_, …>(v))` and compares the pair.
#[doc(hidden)]
pub struct CmpLit<'a, T>(pub &'a T);

/// [`CmpLit`] of a `RevReal` (tried first).
#[doc(hidden)]
pub trait CmpLitReal {
    /// The value and the literal, as `f64`.
    fn pair(&self, lit: f64) -> (f64, f64);
}

impl<T: crate::RevReal> CmpLitReal for CmpLit<'_, T> {
    #[inline(always)]
    fn pair(&self, lit: f64) -> (f64, f64) {
        (self.0.value(), lit)
    }
}

/// [`CmpLit`] of another number (tried when the value is not a `RevReal`).
#[doc(hidden)]
pub trait CmpLitOther<T> {
    /// The value and the literal, in the value's type.
    fn pair(&self, lit: T) -> (T, T);
}

impl<T: Copy> CmpLitOther<T> for &CmpLit<'_, T> {
    #[inline(always)]
    fn pair(&self, lit: T) -> (T, T) {
        (*self.0, lit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_literals_stop_where_they_round_to_infinity() {
        // (the threshold rounds up to infinity; below it, rounded once, is f32::MAX: std's
        // parser rounds once)
        assert!(F32_OVERFLOW
            .to_string()
            .parse::<f32>()
            .unwrap()
            .is_infinite());
        let below = (F32_OVERFLOW - 1).to_string().parse::<f32>().unwrap();
        assert_eq!(below, f32::MAX);
        assert_eq!(
            literal_bits(Literals::Float32, false, F32_OVERFLOW - 1, 0, false, true),
            (false, 0)
        );
        let r = std::panic::catch_unwind(|| {
            literal_bits(Literals::Float32, false, F32_OVERFLOW, 0, false, true)
        });
        assert!(r.is_err());
    }

    const I64: Literals = Literals::Int {
        signed: true,
        bits: 64,
    };
    const U64: Literals = Literals::Int {
        signed: false,
        bits: 64,
    };
    const I32F32: Literals = Literals::Fixed { bits: 64, frac: 32 };

    #[test]
    fn integers_are_exact_at_the_edges() {
        assert_eq!(
            literal_bits(U64, false, u64::MAX as u128, 0, false, false),
            (false, u64::MAX as u128)
        );
        assert_eq!(
            literal_bits(I64, true, 1 << 63, 0, false, false),
            (true, 1 << 63)
        );
        assert_eq!(
            literal_bits(I64, false, i64::MAX as u128, 0, false, false),
            (false, i64::MAX as u128)
        );
        assert_eq!(
            literal_bits(U64, true, 0, 0, false, false),
            (true, 0) // -0
        );
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn i64_max_plus_one_does_not_fit() {
        literal_bits(I64, false, 1 << 63, 0, false, false);
    }

    #[test]
    #[should_panic(expected = "negative literal")]
    fn negative_unsigned_does_not_fit() {
        literal_bits(U64, true, 1, 0, false, false);
    }

    #[test]
    #[should_panic(expected = "float literal")]
    fn float_literal_on_integers() {
        literal_bits(I64, false, 2, 0, false, true);
    }

    #[test]
    fn fixed_point_rounds_to_nearest_even() {
        // 0.5 in 0 fractional bits: a tie, to even (0); 1.5 → 2; 0.5 + ε → 1.
        let f0 = Literals::Fixed { bits: 32, frac: 0 };
        assert_eq!(literal_bits(f0, false, 0, 1 << 127, false, true).1, 0);
        assert_eq!(literal_bits(f0, false, 1, 1 << 127, false, true).1, 2);
        assert_eq!(literal_bits(f0, false, 0, 1 << 127, true, true).1, 1);
        // 2^-32 in I32F32 is bit 0; 2^-33 is a tie to even (0), 3·2^-33 rounds up to 2.
        assert_eq!(literal_bits(I32F32, false, 0, 1 << 96, false, true).1, 1);
        assert_eq!(literal_bits(I32F32, false, 0, 1 << 95, false, true).1, 0);
        assert_eq!(literal_bits(I32F32, false, 0, 3 << 95, false, true).1, 2);
        // The largest value, 2^31 − 2^-32, and the smallest, −2^31.
        let max_frac = !0u128 << 96;
        assert_eq!(
            literal_bits(I32F32, false, (1 << 31) - 1, max_frac, false, true).1,
            i64::MAX as u128
        );
        assert_eq!(
            literal_bits(I32F32, true, 1 << 31, 0, false, false).1,
            1 << 63
        );
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn fixed_point_overflow_by_rounding() {
        // 2^31 − 2^-33 rounds up to 2^31, which I32F32 cannot hold.
        literal_bits(I32F32, false, (1 << 31) - 1, !0u128 << 95, false, true);
    }
}
