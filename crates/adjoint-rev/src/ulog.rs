//! `ULog`: an unsigned number stored as its logarithm (seed 001 Section 2, the `mypower` listing).
//! Multiplication and division are additions of logarithms, so over integers or fixed point they
//! are exactly reversible.

use crate::num::{Arith, Scale};

/// A positive number `e^log`. `y *= x` and `y /= x` are instructions ([`Scale`]), exact when `T`
/// is an integer or fixed-point type.
///
/// ```
/// use adjoint_rev::{Scale, ULog};
/// use fixed::types::I32F32;
/// let mut y = ULog::new(I32F32::from_num(0.7));   // e^0.7
/// let mut x = ULog::new(I32F32::from_num(1.3));
/// for _ in 0..1000 { ULog::scale(&mut y, &mut x, true); }
/// for _ in 0..1000 { ULog::scale(&mut y, &mut x, false); }
/// assert_eq!(y.log, I32F32::from_num(0.7));        // bit-exact
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct ULog<T> {
    /// The natural logarithm of the value.
    pub log: T,
}

impl<T> ULog<T> {
    /// The number `e^log`.
    pub fn new(log: T) -> Self {
        ULog { log }
    }
}

impl<T: Arith> ULog<T> {
    /// The number one (`log = 0`).
    pub fn one() -> Self {
        ULog { log: T::zero() }
    }
}

impl ULog<f64> {
    /// The number `v > 0`.
    pub fn from_f64(v: f64) -> Self {
        ULog { log: v.ln() }
    }
    /// The value `e^log`.
    pub fn to_f64(self) -> f64 {
        self.log.exp()
    }
}

impl<T: Arith> Scale for ULog<T> {
    #[inline(always)]
    fn scale(y: &mut Self, x: &mut Self, mul: bool) {
        T::acc_id(&mut y.log, &mut x.log, mul);
    }

    /// As for floating-point numbers, a factor of 0 or ∞ (an infinite or NaN log) has no
    /// inverse, and neither has a product whose log overflows; then `y` is unchanged. (Both
    /// passed, checked or not, and the inverse gave NaN or ∞: a hunter.) Integer and fixed-point
    /// logs are always finite: no test.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
        if let Some(v) = x.log.non_finite() {
            return Err(format!(
                "`*=`/`/=` by a ULog whose log is {v} is not invertible: the factor must be \
                 positive and finite"
            ));
        }
        let old = *y;
        Self::scale(y, x, mul);
        if let (None, Some(v)) = (old.log.non_finite(), y.log.non_finite()) {
            *y = old;
            return Err(format!(
                "`*=`/`/=` took a ULog's log to {v}, which cannot be undone"
            ));
        }
        Ok(())
    }
}
