//! Run-time error messages: the statement as written, and the condition that actually failed.

use adjoint_rev::prelude::*;

reversible! {
    fn leak<T: RevReal>(x: &mut T) {
        let t = T::zero();
        t += x.exp();
        unlet t = T::zero();
    }

    fn branch(x: &mut f64, y: &mut f64) {
        if (x > 0.0, ~) {
            x -= y;
        }
    }

    fn inner_swap<T: Arith>(a: &mut T, b: &mut T) {
        SWAP(a, b);
    }

    fn swap_with_constant<T: Arith>(y: &mut T) {
        inner_swap(y, T::from_f64(2.0));
    }

    fn swap_with_loop_variable(v: &mut Vec<usize>) {
        for i in 0..3 {
            inner_swap(v[0], i);
        }
    }

    fn add_into<T: Arith>(y: &mut T, c: &mut T) {
        y += c;
    }

    fn reads_constant<T: Arith>(y: &mut T) {
        add_into(y, T::from_f64(2.0));
    }

    fn reads_only(y: &mut f64, c: &mut f64) {
        if (c > 0.0, c > 0.0) {
            y += 1.0;
        }
    }

    fn nan_constant(y: &mut f64) {
        reads_only(y, f64::NAN);
    }

    fn power_of_wide_int<T: RevReal>(y: &mut T, x: &mut T, k: &mut i64) {
        y += x.powi(k);
    }

    fn up(x: &mut i64) {
        while (x < 100, x > 0) {
            x += 9;
        }
    }
}

#[test]
fn unlet_is_quoted_as_written() {
    let err = leak(&mut 1.0f64).unwrap_err();
    assert_eq!(err.site().statement, "unlet t = T::zero()");
    assert!(
        err.to_string()
            .contains("statement `unlet t = T::zero()`: ancilla `t`"),
        "{err}"
    );
}

#[test]
fn tilde_is_quoted_as_written() {
    let err = branch(&mut 1.0, &mut 2.0).unwrap_err();
    assert_eq!(err.site().statement, "if (x > 0.0, ~)");
}

reversible! {
    fn inside(y: &mut f64, v: &mut Vec<f64>, i: &mut usize) {
        if (i < v.len() && v[i] > -1.0, v[i] > 2.0 || y > 1e300) {
            y += v[i];
        }
    }

    // (a reviewer: showing every operand read `v[i]` out of range where `i < v.len()` guards
    // it, and panicked instead of returning the error)
    fn guarded(i: &mut usize, v: &mut Vec<f64>) {
        if (i < v.len() && v[i] > 0.0, ~) {
            i += 1;
        }
    }

    // (a reviewer: a side that is itself a comparison with a float literal did not compile)
    fn same_sign<T: RevReal>(x: &mut T, y: &mut T) {
        if ((x > 0.0) == (y > 0.0), ~) {
            x -= y;
        }
    }
}

#[test]
fn failed_conditions_show_the_values_they_read() {
    // (a hunter: "the pre-condition was true but the post-condition is false", no value)
    let err = branch(&mut 0.5, &mut 2.0).unwrap_err().to_string();
    assert!(
        err.ends_with("(they must agree for the branch to be undone); now x = -1.5"),
        "{err}"
    );
    // what the post-condition read: `v[i]`, and `y` since `v[i] > 2.0` is false
    let err = inside(&mut 0.0, &mut vec![0.5, 3.0], &mut 0)
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("; now v[i] = 0.5, y = 0.5"), "{err}");
    // read as the check reads: `v[i]` only where `i < v.len()`
    let err = guarded(&mut 2, &mut vec![0.0, 0.0, 1.0])
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("; now i = 3, v.len() = 3"), "{err}");
    let err = same_sign(&mut 0.5, &mut 1.0).unwrap_err().to_string();
    assert!(err.ends_with("; now x = -0.5, y = 1.0"), "{err}");
    // loops: the value on entry, and after the failing iteration, forwards and backwards
    let err = up(&mut 5).unwrap_err().to_string();
    assert!(
        err.ends_with("(it must be false on entry); now x = 5"),
        "{err}"
    );
    let err = up(&mut -50).unwrap_err().to_string();
    assert!(err.ends_with("; now x = -41"), "{err}");
    let err = up::uncall(&mut 200).unwrap_err().to_string();
    assert!(err.ends_with("; now x = 191"), "{err}");
}

#[test]
fn while_errors_name_the_condition_that_failed() {
    // Forwards, entry: `x > 0` is already true.
    let err = up(&mut 5).unwrap_err();
    assert!(matches!(
        err,
        InvertibilityError::LoopEntry {
            condition: "x > 0",
            ..
        }
    ));
    assert!(
        err.to_string()
            .contains("the post-condition `x > 0` is true before the loop"),
        "{err}"
    );
    // Forwards, after an iteration: `x > 0` is false.
    let err = up(&mut -50).unwrap_err();
    assert!(matches!(
        err,
        InvertibilityError::LoopIteration {
            condition: "x > 0",
            ..
        }
    ));
    assert!(
        err.to_string()
            .contains("the post-condition `x > 0` is false after an iteration"),
        "{err}"
    );
    // Backwards (`while (x > 0, x < 100) { x -= 9 }`), entry: `x < 100` is true — not `x > 0`,
    // which is false here.
    let err = up::uncall(&mut -5).unwrap_err();
    assert!(matches!(
        err,
        InvertibilityError::LoopEntry {
            condition: "x < 100",
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("(running backwards), statement `while (x < 100, x > 0)`: the pre-condition `x < 100` is true"),
        "{msg}"
    );
    // Backwards, after an iteration: `x < 100` is false.
    let err = up::uncall(&mut 200).unwrap_err();
    assert!(matches!(
        err,
        InvertibilityError::LoopIteration {
            condition: "x < 100",
            ..
        }
    ));
    assert!(
        err.to_string()
            .contains("the pre-condition `x < 100` is false after an iteration backwards"),
        "{err}"
    );
    // And a good round trip still works.
    let mut x = 0;
    up(&mut x).unwrap();
    up::uncall(&mut x).unwrap();
    assert_eq!(x, 0);
}

reversible! {
    fn scaled<T: RevReal>(y: &mut T, x: &mut T) {
        y *= x;
    }

    fn logged<T: RevReal>(y: &mut T, x: &mut T) {
        y += x.ln();
    }

    fn added<T: RevReal>(y: &mut T, x: &mut T) {
        y += x;
    }

    fn ulog_scaled<T: Arith>(y: &mut ULog<T>, x: &mut ULog<T>) {
        y *= x;
    }
}

#[test]
fn ulog_factors_and_products_that_cannot_be_undone_are_errors() {
    // The number 0 or ∞ as a factor (an infinite log), a NaN log, and a product whose log
    // overflows were accepted, checked or not, and the inverse gave NaN or ∞ (a hunter).
    let inf = f64::INFINITY;
    for (y0, x0, what) in [
        (2f64.ln(), -inf, "log is -inf"),
        (2f64.ln(), inf, "log is inf"),
        (2f64.ln(), f64::NAN, "log is NaN"),
        (1e308, 1e308, "log to inf"),
    ] {
        let (mut y, mut x) = (ULog::new(y0), ULog::new(x0));
        let err = ulog_scaled(&mut y, &mut x).unwrap_err().to_string();
        assert!(
            err.contains("statement `y *= x`") && err.contains(what),
            "{err}"
        );
        assert_eq!(y.log.to_bits(), y0.to_bits());
        assert!(ulog_scaled::call_unchecked(&mut y, &mut x).is_err());
        assert_eq!(y.log.to_bits(), y0.to_bits());
    }
    // finite logs: undone to rounding (ln 2 + ln 3 − ln 3)
    let (mut y, mut x) = (ULog::from_f64(2.0), ULog::from_f64(3.0));
    ulog_scaled(&mut y, &mut x).unwrap();
    assert!((y.to_f64() - 6.0).abs() < 1e-14);
    ulog_scaled::uncall(&mut y, &mut x).unwrap();
    assert!((y.to_f64() - 2.0).abs() < 1e-15);
    // the number 0 times a finite factor is 0, and undone exactly
    let (mut y, mut x) = (ULog::new(-inf), ULog::from_f64(3.0));
    ulog_scaled(&mut y, &mut x).unwrap();
    ulog_scaled::uncall(&mut y, &mut x).unwrap();
    assert_eq!(y.log, -inf);
}

#[test]
fn floating_point_steps_that_cannot_be_undone_are_errors() {
    // `y *= 0` loses `y` (its inverse divided by 0: NaN), and so does a product that overflows
    // or underflows to 0;
    // both are refused, in unchecked code too, leaving the arguments as they were (a reviewer
    // helper's hunt: Ok both ways, y NaN in the end).
    for (y0, x0, what) in [
        (2.0, 0.0, "by 0"),
        (2.0, f64::INFINITY, "by inf"),
        (1e10, 1e300, "to inf"),
        // (underflow to 0: the uncall left 0, and ∂/∂x was 0; a hunter)
        (1e-200, 1e-200, "to 0.0,"),
        // (a subnormal product that keeps a few bits: 1e-300 · 4e-24 is 5e-324, and `/=`
        // brought back 1.235e-300, accepted by checked code; a hunter)
        (1e-300, 4e-24, "to 5e-324,"),
    ] {
        let (mut y, mut x) = (y0, x0);
        let err = scaled(&mut y, &mut x).unwrap_err().to_string();
        assert!(
            err.contains("statement `y *= x`") && err.contains(what),
            "{err}"
        );
        assert_eq!((y, x), (y0, x0));
        assert!(scaled::call_unchecked(&mut y, &mut x).is_err());
        assert_eq!(y, y0);
    }
    let (mut y, mut x) = (2.0, 3.0);
    scaled(&mut y, &mut x).unwrap();
    scaled::uncall(&mut y, &mut x).unwrap();
    assert_eq!(y, 2.0);
    // A subnormal product that keeps enough bits (1e-310: 14 digits) is accepted, and so is a
    // tiny normal one in f32 (1e-35), each undone to rounding.
    let (mut y, mut x) = (1e-300f64, 1e-10);
    scaled(&mut y, &mut x).unwrap();
    scaled::uncall(&mut y, &mut x).unwrap();
    assert!((y - 1e-300).abs() < 1e-12 * 1e-300, "{y:e}");
    let (mut y, mut x) = (1e-20f32, 1e-15f32);
    scaled(&mut y, &mut x).unwrap();
    scaled::uncall(&mut y, &mut x).unwrap();
    assert!((y - 1e-20).abs() < 3e-7 * 1e-20, "{y:e}");
    // On gradient-carrying values too.
    let (mut y, mut x) = (GVar::new(2.0, 1.0), GVar::new(0.0, 0.0));
    assert!(scaled(&mut y, &mut x).is_err());
    assert_eq!((y.x, y.g, x.g), (2.0, 1.0, 0.0));
    // A target taken from a finite value to ∓∞ or NaN (checked code): `y += ln 0`.
    let (mut y, mut x) = (1.0, 0.0);
    let err = logged(&mut y, &mut x).unwrap_err().to_string();
    assert_eq!(
        err,
        "in `logged`, statement `y += x.ln()`: the target went from a finite value to -inf, \
         which no inverse can undo"
    );
    assert_eq!(y, 1.0);
    // A target already infinite may stay so (its inverse is as exact as before).
    let (mut y, mut x) = (f64::INFINITY, 2.0);
    logged(&mut y, &mut x).unwrap();
    assert_eq!(y, f64::INFINITY);
    logged::uncall(&mut y, &mut x).unwrap();
    assert_eq!(y, f64::INFINITY);
    // But not by an infinite step: `−∞ += ln 0` stays −∞, and `uncall` gave NaN; `+∞ += −∞` is
    // NaN at once (both accepted by checked code; a hunter). Refused, the target unchanged.
    let (mut y, mut x) = (f64::NEG_INFINITY, 0.0);
    let err = logged(&mut y, &mut x).unwrap_err();
    assert_eq!(
        err.to_string(),
        "in `logged`, statement `y += x.ln()`: the target was -inf, and undoing this step there \
         gives NaN: from ±∞ only a finite amount can be added and taken back"
    );
    assert!(matches!(err, InvertibilityError::InfiniteTarget { .. }));
    assert_eq!(y, f64::NEG_INFINITY);
    let (mut y, mut x) = (f64::INFINITY, f64::NEG_INFINITY);
    let err = added(&mut y, &mut x).unwrap_err().to_string();
    assert!(
        err.contains("the target was inf, and undoing this step there gives NaN"),
        "{err}"
    );
    assert_eq!(y, f64::INFINITY);
    // and backwards: `uncall` runs `y -= x`, from −∞ by +∞
    let (mut y, mut x) = (f64::NEG_INFINITY, f64::INFINITY);
    let err = added::uncall(&mut y, &mut x).unwrap_err().to_string();
    assert!(
        err.contains("(running backwards)") && err.contains("gives NaN"),
        "{err}"
    );
    // on gradient-carrying values too (the check runs on copies: gradients untouched)
    let (mut y, mut x) = (
        GVar::new(f64::NEG_INFINITY, 1.0),
        GVar::new(f64::NEG_INFINITY, 0.5),
    );
    assert!(added(&mut y, &mut x).is_err());
    assert_eq!((y.g, x.g), (1.0, 0.5));
}

#[test]
fn a_call_that_changes_a_constant_argument_is_an_error() {
    // `inner_swap` writes its second argument: given a constant (a copy), the old value of `y`
    // would be lost and the inverse could not restore it (it once ran and returned `Ok`).
    let err = swap_with_constant(&mut 5.0f64).unwrap_err();
    assert_eq!(err.site().statement, "inner_swap(y, T::from_f64(2.0))");
    assert!(
        err.to_string().contains(
            "the argument `T::from_f64(2.0)` is a constant passed as a copy, and the call changed it from 2.0 to 5.0"
        ),
        "{err}"
    );
    let err = swap_with_loop_variable(&mut vec![10]).unwrap_err();
    assert!(err.to_string().contains("the argument `i`"), "{err}");
    assert!(
        matches!(err, InvertibilityError::Constant { .. }),
        "{err:?}"
    );
    // A callee that only reads the constant is fine, and the call undoes exactly.
    let mut y = 5.0;
    reads_constant(&mut y).unwrap();
    assert_eq!(y, 7.0);
    reads_constant::uncall(&mut y).unwrap();
    assert_eq!(y, 5.0);
    // a NaN constant only read is unchanged too (a reviewer: NaN ≠ NaN made it "changed")
    nan_constant(&mut y).unwrap();
    nan_constant::uncall(&mut y).unwrap();
}

#[test]
fn powi_takes_integers_of_any_width_and_refuses_wide_ones() {
    // An i64 exponent: x⁻³ and its derivative −3x⁻⁴ (it was cut to i32 with `as`).
    let (mut y, mut x, mut k) = (0.0, 1.5f64, -3i64);
    power_of_wide_int(&mut y, &mut x, &mut k).unwrap();
    assert_eq!(y, 1.5f64.powi(-3));
    let g = adjoint_rev::grad(power_of_wide_int {}, (0.0, 1.5, -3i64), 0).unwrap();
    assert!((g.1 + 3.0 * 1.5f64.powi(-4)).abs() < 1e-15, "{g:?}");
    // 2³² + 2 does not fit powi's i32: cut to 32 bits it was 2 (x² instead of x^(2³² + 2)).
    let r = std::panic::catch_unwind(|| {
        let (mut y, mut x, mut k) = (0.0, 3.0f64, (1i64 << 32) + 2);
        let _ = power_of_wide_int(&mut y, &mut x, &mut k);
    });
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("x.powi(4294967298): the exponent does not fit in an i32"),
        "{msg}"
    );
}

#[test]
fn logsumexp_of_nothing_names_itself() {
    // (it panicked with an index out of bounds inside the library)
    let r = std::panic::catch_unwind(|| {
        let mut out = 0.0;
        let _ = adjoint_rev::library::i_logsumexp(&mut out, &mut Vec::<f64>::new());
    });
    let msg = r.unwrap_err();
    let msg = msg
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| msg.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(msg.contains("i_logsumexp: x is empty"), "{msg}");
}

reversible! {
    fn quotient<T: Arith>(y: &mut T, a: &mut T, b: &mut T) {
        y += a / b;
    }
}

#[test]
fn integer_and_fixed_point_division_by_zero_is_an_error_naming_the_statement() {
    use adjoint_rev::fixed::types::I32F32;
    // Rust's `/` panicked ("attempt to divide by zero") inside the call
    let (mut y, mut a, mut b) = (7i64, 3i64, 0i64);
    let err = quotient(&mut y, &mut a, &mut b).unwrap_err();
    assert!(matches!(err, InvertibilityError::Undefined { .. }), "{err}");
    assert_eq!(err.site().statement, "y += a / b");
    assert!(err.to_string().contains("division by zero: 3 / 0"), "{err}");
    assert_eq!((y, a, b), (7, 3, 0), "nothing changed");
    let (mut y, mut a, mut b) = (I32F32::from_num(1), I32F32::from_num(2.5), I32F32::ZERO);
    let err = quotient(&mut y, &mut a, &mut b).unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
    assert_eq!(y, I32F32::from_num(1));
    // a divisor that is not zero divides (truncating, exactly undone)
    let (mut y, mut a, mut b) = (7i64, 9i64, 2i64);
    quotient(&mut y, &mut a, &mut b).unwrap();
    assert_eq!(y, 11);
    quotient::uncall(&mut y, &mut a, &mut b).unwrap();
    assert_eq!(y, 7);
    // floats are unaffected: x / 0 is ±∞, reported as a non-finite target
    let err = quotient(&mut 1.0f64, &mut 1.0, &mut 0.0).unwrap_err();
    assert!(matches!(err, InvertibilityError::NonFinite { .. }), "{err}");
}

#[test]
fn complex_division_by_zero_on_integers_is_an_error_too() {
    use num_complex::Complex;
    // (`|b|²` is computed in i64: 0 for b = 0, and also for b = 2³², where it wraps)
    for b in [Complex::new(0i64, 0), Complex::new(1 << 32, 0)] {
        let (mut y, mut a, mut bb) = (Complex::new(1i64, 2), Complex::new(3i64, 4), b);
        let err = quotient(&mut y, &mut a, &mut bb).unwrap_err();
        assert!(matches!(err, InvertibilityError::Undefined { .. }), "{err}");
        assert!(err.to_string().contains("division by zero"), "{err}");
        assert_eq!(y, Complex::new(1, 2));
    }
}

reversible! {
    fn bump(y: &mut f64, x: &mut f64) {
        if (y > 0.5, x > 0.5) {
            y += 1.0;
        }
    }
}

#[test]
fn a_branch_that_fails_backwards_names_the_conditions_in_their_roles() {
    // Backwards, `x > 0.5` (false) chooses the branch and `y > 0.5` (true) is checked after it.
    let err = bump::uncall(&mut 1.0, &mut 0.0).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(
            "running backwards, the post-condition was false but the pre-condition is true"
        ),
        "{msg}"
    );
    assert!(msg.contains("if (y > 0.5, x > 0.5)"), "{msg}");
    // Forwards, as before.
    let msg = bump(&mut 1.0, &mut 0.0).unwrap_err().to_string();
    assert!(
        msg.contains("the pre-condition was true but the post-condition is false"),
        "{msg}"
    );
}

/// A type without `Debug`, read by a condition.
#[derive(PartialEq, PartialOrd)]
pub struct Level(u8);

reversible! {
    fn by_level(y: &mut f64, a: &mut Level, b: &mut Level) {
        if (y > 1.0, a > b) {
            y += 2.0;
        }
    }
}

#[test]
#[allow(clippy::needless_borrow)] // (the borrow is the specialisation: see `Shown`)
fn a_value_without_debug_is_shown_as_an_ellipsis() {
    let err = by_level(&mut -5.0, &mut Level(2), &mut Level(1))
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("; now a = …, b = …"), "{err}");
    // what a failed condition's message shows for a place whose type has no `Debug`
    #[allow(unused_imports)]
    use adjoint_rev::{ShowDebug as _, ShowOther as _, Shown};
    assert_eq!((&Shown(&Level(3))).show(), "…");
    assert_eq!((&Shown(&2.5f64)).show(), "2.5");
    assert_eq!((&Shown(&vec![1usize])).show(), "[1]");
}

reversible! {
    fn inverted_if(y: &mut i64, x: &mut i64) {
        ~{
            if (x > 0, y > 5) {
                y += 10;
            }
        }
    }

    fn inverted_while(x: &mut i64, y: &mut i64) {
        ~{
            while (x < 10, y > 0) {
                x += 1;
            }
        }
    }

    fn uncomputed(y: &mut f64, x: &mut f64) {
        @routine {
            let t = 0.0;
            t += x;
        }
        y += t;
        x += 1.0;
        ~@routine;
    }
}

/// A statement inside `~{ … }` or a routine's uncomputation runs inverted in the forward
/// function (and as written in `uncall`): its message says so, and names the pre- and
/// post-conditions as written. They took the function's direction, which swapped them
/// ("the pre-condition was false but the post-condition is true" where `x > 0`, the
/// pre-condition, was true; a hunter).
#[test]
fn statements_run_inverted_say_so_with_the_conditions_as_written() {
    // forwards, `~{ if (x > 0, y > 5) … }` runs `if (y > 5, x > 0)`: y > 5 is false (no branch),
    // then x > 0 must be false and is true
    let err = inverted_if(&mut 0, &mut 1).unwrap_err().to_string();
    assert!(
        err.contains("(running backwards)")
            && err.contains("the post-condition was false but the pre-condition is true"),
        "{err}"
    );
    // `uncall` runs the `if` as written: x > 0 is true (branch: y −= 10 from −20), then y > 5 must be
    // true and is false
    let err = inverted_if::uncall(&mut -20, &mut 1)
        .unwrap_err()
        .to_string();
    assert!(
        !err.contains("running backwards")
            && err.contains("the pre-condition was true but the post-condition is false"),
        "{err}"
    );
    // `~{ while (x < 10, y > 0) … }` forwards runs `while (y > 0, x < 10)` backwards: on entry
    // `x < 10` (the pre-condition as written) must be false
    let err = inverted_while(&mut 0, &mut 1).unwrap_err().to_string();
    assert!(
        err.contains("(running backwards)") && err.contains("the pre-condition `x < 10` is true"),
        "{err}"
    );
    // the uncomputation runs `t -= x` with x changed to 3: t = 2 − 3 = −1, not 0, when `t` is
    // deallocated (the inverse of `let t = 0.0`), reported running backwards
    let err = uncomputed(&mut 0.0, &mut 2.0).unwrap_err().to_string();
    assert!(
        err.contains("(running backwards)") && err.contains("`let t = 0.0`"),
        "{err}"
    );
}

reversible! {
    fn unchecked_routine<T: RevReal>(y: &mut T, x: &mut T) {
        @invcheckoff @routine {
            let t = T::zero();
            t += x.exp();
        }
        y += t * x;
        ~@routine;
    }
}

/// `@invcheckoff @routine { … }` is a routine run (and uncomputed) without checks: its
/// `~@routine` was reported as having no `@routine` before it (a hunter).
#[test]
fn a_routine_without_checks_is_uncomputed_by_its_tilde_routine() {
    let (mut y, mut x) = (0.5f64, 0.7f64);
    unchecked_routine(&mut y, &mut x).unwrap();
    assert_eq!(y, 0.5 + 0.7f64.exp() * 0.7);
    unchecked_routine::uncall(&mut y, &mut x).unwrap();
    assert!((y - 0.5).abs() < 1e-15 && x == 0.7);
    // d/dx (y + x·eˣ) = eˣ(1 + x), against central differences
    let (_, gx) = adjoint_rev::grad(unchecked_routine {}, (0.5f64, 0.7f64), 0).unwrap();
    let h = 1e-6;
    let f = |x: f64| x * x.exp();
    let fd = (f(0.7 + h) - f(0.7 - h)) / (2.0 * h);
    assert!((gx - fd).abs() < 1e-8, "{gx} vs {fd}");
}
