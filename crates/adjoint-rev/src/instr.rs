//! Instructions: the statement-level primitives (`SWAP`, `ROT`, `NEG`, …) and the trait by which
//! users add their own.

use crate::num::{Arith, RevReal};

/// A reversible instruction over a tuple of `&mut` arguments: a statement `NAME(a, b);` in
/// reversible code calls `forward`, and its inverse calls `inverse`. Implement it for your own
/// unit struct to add an instruction, and implement it again for [`GVar`](crate::GVar) arguments
/// to give it an adjoint (or make it generic over [`RevReal`], whose `GVar` implementation
/// carries the adjoints).
///
/// ```
/// use adjoint_rev::{reversible, Arith, Instruction, RevReal};
///
/// /// A rotation by π/4, as a new instruction that reuses `RevReal::rot` (and so its adjoint).
/// #[allow(non_camel_case_types)]
/// pub struct QUARTER;
/// impl<'a, T: RevReal> Instruction<(&'a mut T, &'a mut T)> for QUARTER {
///     fn forward((a, b): (&'a mut T, &'a mut T)) {
///         T::rot(a, b, &mut T::from_f64(core::f64::consts::FRAC_PI_4), false);
///     }
///     fn inverse((a, b): (&'a mut T, &'a mut T)) {
///         T::rot(a, b, &mut T::from_f64(core::f64::consts::FRAC_PI_4), true);
///     }
/// }
///
/// reversible! {
///     fn twice<T: RevReal>(a: &mut T, b: &mut T) {
///         QUARTER(a, b);
///         QUARTER(a, b);
///     }
/// }
/// let (mut a, mut b) = (1.0f64, 2.0);
/// twice(&mut a, &mut b).unwrap();
/// assert!((a + 2.0).abs() < 1e-15 && (b - 1.0).abs() < 1e-15); // a quarter turn twice: (−b, a)
/// twice::uncall(&mut a, &mut b).unwrap();
/// assert!((a - 1.0).abs() < 1e-15 && (b - 2.0).abs() < 1e-15);
/// ```
pub trait Instruction<Args> {
    /// Run the instruction.
    fn forward(args: Args);
    /// Undo it.
    fn inverse(args: Args);
}

/// `SWAP(a, b)`: exchange two values (self-inverse).
#[allow(clippy::upper_case_acronyms)]
pub struct SWAP;
/// `ROT(a, b, θ)`: `(a, b) → (a cos θ − b sin θ, b cos θ + a sin θ)`; inverse `IROT`.
#[allow(clippy::upper_case_acronyms)]
pub struct ROT;
/// `IROT(a, b, θ)`: rotation by `−θ`; inverse `ROT`.
#[allow(clippy::upper_case_acronyms)]
pub struct IROT;
/// `NEG(x)`: `x → −x` (self-inverse).
#[allow(clippy::upper_case_acronyms)]
pub struct NEG;
/// `INC(x)`: `x += 1`; inverse `DEC`.
#[allow(clippy::upper_case_acronyms)]
pub struct INC;
/// `DEC(x)`: `x -= 1`; inverse `INC`.
#[allow(clippy::upper_case_acronyms)]
pub struct DEC;
/// `CONJ(x)`: complex conjugate (self-inverse; the identity on reals).
#[allow(clippy::upper_case_acronyms)]
pub struct CONJ;

/// `ROTL(x, k)`: rotate the bits of the integer `x` left by `k` (modulo its width; `k: u32`);
/// inverse `ROTR`. Exact on every integer width, as hash mixers need.
///
/// ```
/// adjoint_rev::reversible! {
///     fn mix(h: &mut u64, k: &mut u32) {
///         ROTL(h, k);
///         h ^= 0x9E37_79B9_7F4A_7C15u64;
///         ROTR(h, 7);
///     }
/// }
/// let (mut h, mut k) = (0x0123_4567_89AB_CDEFu64, 13u32);
/// mix(&mut h, &mut k).unwrap();
/// assert_eq!(h, (0x0123_4567_89AB_CDEFu64.rotate_left(13) ^ 0x9E37_79B9_7F4A_7C15).rotate_right(7));
/// mix::uncall(&mut h, &mut k).unwrap();
/// assert_eq!(h, 0x0123_4567_89AB_CDEF);
/// ```
#[allow(clippy::upper_case_acronyms)]
pub struct ROTL;
/// `ROTR(x, k)`: rotate the bits of `x` right by `k`; inverse `ROTL`.
#[allow(clippy::upper_case_acronyms)]
pub struct ROTR;

/// Integers whose bits [`ROTL`]/[`ROTR`] rotate.
pub trait RotateBits: Copy {
    /// `self.rotate_left(k)`.
    fn rotl(self, k: u32) -> Self;
    /// `self.rotate_right(k)`.
    fn rotr(self, k: u32) -> Self;
}

macro_rules! rotate_bits {
    ($($t:ty)*) => {$(
        impl RotateBits for $t {
            #[inline(always)]
            fn rotl(self, k: u32) -> Self {
                self.rotate_left(k)
            }
            #[inline(always)]
            fn rotr(self, k: u32) -> Self {
                self.rotate_right(k)
            }
        }
    )*};
}
rotate_bits!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize);

impl<'a, T: RotateBits> Instruction<(&'a mut T, &'a mut u32)> for ROTL {
    #[inline(always)]
    fn forward((x, k): (&'a mut T, &'a mut u32)) {
        *x = x.rotl(*k);
    }
    #[inline(always)]
    fn inverse((x, k): (&'a mut T, &'a mut u32)) {
        *x = x.rotr(*k);
    }
}

impl<'a, T: RotateBits> Instruction<(&'a mut T, &'a mut u32)> for ROTR {
    #[inline(always)]
    fn forward((x, k): (&'a mut T, &'a mut u32)) {
        *x = x.rotr(*k);
    }
    #[inline(always)]
    fn inverse((x, k): (&'a mut T, &'a mut u32)) {
        *x = x.rotl(*k);
    }
}

impl<'a, T> Instruction<(&'a mut T, &'a mut T)> for SWAP {
    #[inline(always)]
    fn forward((a, b): (&'a mut T, &'a mut T)) {
        core::mem::swap(a, b);
    }
    #[inline(always)]
    fn inverse((a, b): (&'a mut T, &'a mut T)) {
        core::mem::swap(a, b);
    }
}

impl<'a, T: RevReal> Instruction<(&'a mut T, &'a mut T, &'a mut T)> for ROT {
    #[inline(always)]
    fn forward((a, b, t): (&'a mut T, &'a mut T, &'a mut T)) {
        T::rot(a, b, t, false);
    }
    #[inline(always)]
    fn inverse((a, b, t): (&'a mut T, &'a mut T, &'a mut T)) {
        T::rot(a, b, t, true);
    }
}

impl<'a, T: RevReal> Instruction<(&'a mut T, &'a mut T, &'a mut T)> for IROT {
    #[inline(always)]
    fn forward((a, b, t): (&'a mut T, &'a mut T, &'a mut T)) {
        T::rot(a, b, t, true);
    }
    #[inline(always)]
    fn inverse((a, b, t): (&'a mut T, &'a mut T, &'a mut T)) {
        T::rot(a, b, t, false);
    }
}

impl<'a, T: Arith> Instruction<(&'a mut T,)> for NEG {
    #[inline(always)]
    fn forward((x,): (&'a mut T,)) {
        T::neg(x);
    }
    #[inline(always)]
    fn inverse((x,): (&'a mut T,)) {
        T::neg(x);
    }
}

impl<'a, T: Arith> Instruction<(&'a mut T,)> for INC {
    #[inline(always)]
    fn forward((x,): (&'a mut T,)) {
        T::acc_id(x, &mut T::one(), true);
    }
    #[inline(always)]
    fn inverse((x,): (&'a mut T,)) {
        T::acc_id(x, &mut T::one(), false);
    }
}

impl<'a, T: Arith> Instruction<(&'a mut T,)> for DEC {
    #[inline(always)]
    fn forward((x,): (&'a mut T,)) {
        T::acc_id(x, &mut T::one(), false);
    }
    #[inline(always)]
    fn inverse((x,): (&'a mut T,)) {
        T::acc_id(x, &mut T::one(), true);
    }
}

impl<'a, T: Arith> Instruction<(&'a mut T,)> for CONJ {
    #[inline(always)]
    fn forward((x,): (&'a mut T,)) {
        T::conj(x);
    }
    #[inline(always)]
    fn inverse((x,): (&'a mut T,)) {
        T::conj(x);
    }
}

/// The values of `start..end` (or `..=end`) with a step, optionally reversed: the iterator behind
/// `for i in (a..b).step_by(s)` in reversible code, whose inverse visits the same values in the
/// opposite order.
///
/// ```
/// let v: Vec<i64> = adjoint_rev::steps(1, 10, 3, false, false).collect();
/// assert_eq!(v, [1, 4, 7]);
/// let r: Vec<i64> = adjoint_rev::steps(1, 10, 3, false, true).collect();
/// assert_eq!(r, [7, 4, 1]);
/// // a span wider than the type: counted without overflow
/// let w: Vec<i8> = adjoint_rev::steps(-100i8, 100, 50, false, false).collect();
/// assert_eq!(w, [-100, -50, 0, 50]);
/// assert_eq!(adjoint_rev::steps(i8::MIN, i8::MAX, 1, true, true).count(), 256);
/// assert_eq!(adjoint_rev::steps(0u64, u64::MAX, u64::MAX / 2, true, false).last(), Some(u64::MAX - 1));
/// // every 128-bit value is a bound
/// let top: Vec<u128> = adjoint_rev::steps(u128::MAX - 2, u128::MAX, 1, true, true).collect();
/// assert_eq!(top, [u128::MAX, u128::MAX - 1, u128::MAX - 2]);
/// let low: Vec<i128> = adjoint_rev::steps(i128::MIN, i128::MAX, i128::MAX, true, false).collect();
/// assert_eq!(low, [i128::MIN, -1, i128::MAX - 1]);
/// ```
pub fn steps<T: num_traits::PrimInt>(
    start: T,
    end: T,
    step: T,
    inclusive: bool,
    rev: bool,
) -> Steps<T> {
    assert!(
        step > T::zero(),
        "a reversible loop's step must be positive (a loop that counts down is \
         `(a..b).step_by(k).rev()`, k > 0)"
    );
    // Counted in u128, on values shifted so that order is kept (`Steps::key`): `end − start`
    // and `k · step` overflow the loop's own type (`-100i8..100` has a span of 200), where the
    // values visited do not; every 128-bit value fits, `u128::MAX` and `i128::MIN` too.
    let (s, e) = (Steps::<T>::key(start), Steps::<T>::key(end));
    let t = step.to_u128().expect("a positive step fits in u128");
    let n = if inclusive {
        if e < s {
            0
        } else {
            ((e - s) / t).checked_add(1).expect(
                "a reversible loop of 2^128 iterations (every value of a 128-bit type, step 1)",
            )
        }
    } else if e <= s {
        0
    } else {
        (e - s - 1) / t + 1
    };
    Steps {
        start: s,
        step: t,
        front: 0,
        back: n,
        rev,
        ty: core::marker::PhantomData,
    }
}

/// Whether `step` is a valid step for [`steps`] (positive): checked reversible code tests it
/// before a stepped loop runs, and returns an error where [`steps`] would panic.
///
/// ```
/// assert!(adjoint_rev::positive_step(3u8));
/// assert!(!adjoint_rev::positive_step(0i64) && !adjoint_rev::positive_step(-2i32));
/// ```
#[doc(hidden)]
pub fn positive_step<T: num_traits::PrimInt>(step: T) -> bool {
    step > T::zero()
}

/// The iterator of [`steps`].
#[derive(Clone, Debug)]
pub struct Steps<T> {
    /// The first value, as [`Steps::key`].
    start: u128,
    step: u128,
    front: u128,
    back: u128,
    rev: bool,
    ty: core::marker::PhantomData<T>,
}

impl<T: num_traits::PrimInt> Steps<T> {
    /// Whether `T` is signed.
    fn signed() -> bool {
        T::min_value() < T::zero()
    }
    /// `v` as a `u128` in the same order: a signed value with its sign bit flipped (so
    /// `i128::MIN` is 0), an unsigned one as it is.
    fn key(v: T) -> u128 {
        if Self::signed() {
            let w = v.to_i128().expect("a signed integer type fits in i128");
            (w as u128) ^ (1 << 127)
        } else {
            v.to_u128().expect("an unsigned integer type fits in u128")
        }
    }
    /// The value of `T` whose key is `k` (one between the loop's bounds).
    fn value(k: u128) -> T {
        let v = if Self::signed() {
            T::from((k ^ (1 << 127)) as i128)
        } else {
            T::from(k)
        };
        v.expect("a value between the loop's bounds is one of its type")
    }
}

impl<T: num_traits::PrimInt> Iterator for Steps<T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.front >= self.back {
            return None;
        }
        let k = if self.rev {
            self.back -= 1;
            self.back
        } else {
            self.front += 1;
            self.front - 1
        };
        // between `start` and `end`: a value of `T`
        Some(Self::value(self.start + k * self.step))
    }
}
