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
