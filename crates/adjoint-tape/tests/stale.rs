//! A `Var` that outlives its recording must never be accepted by a later one, however many
//! recordings (and value ids) come in between. The 16-bit nonce used before repeated after 65 536
//! recordings and silently treated the leaked value as an input of the new recording.
//!
//! This file is its own test binary: `__skip_ids` moves the process-wide id counter, so
//! nothing else runs beside these tests.

use adjoint_tape::{grad, join, value_and_grad, Tape, Var};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// The tests of this file run one at a time, so that skipped ids land exactly where the
/// comments say.
static SERIAL: Mutex<()> = Mutex::new(());

fn panic_message(r: Result<impl Sized, Box<dyn std::any::Any + Send>>) -> String {
    match r {
        Ok(_) => panic!("expected a panic"),
        Err(e) => e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

fn leak() -> Var {
    let mut leak = None;
    grad(
        |x: &[Var]| {
            leak = Some(x[0]);
            x[0]
        },
        &[1.0],
    );
    leak.unwrap()
}

/// A `Var`'s id, read from its `Debug` form ("Var(1 @ id 123)").
fn id_of(v: Var) -> u64 {
    let s = format!("{v:?}");
    let digits = s
        .split("@ id ")
        .nth(1)
        .expect("an active Var")
        .trim_end_matches(')');
    digits.parse().expect("an id")
}

/// `v` is refused by the next recording; returns the id its input got.
fn assert_refused(v: Var) -> u64 {
    let mut input = 0;
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        value_and_grad(
            |x: &[Var]| {
                input = id_of(x[0]);
                x[0] * v
            },
            &[5.0],
        )
    })));
    assert!(
        msg.contains("finished or to a different recording"),
        "{msg}"
    );
    input
}

#[test]
fn stale_var_is_refused_after_more_than_2_pow_16_recordings() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The reproduction: the leaked value used to come back as g = [6.0].
    // With the old nonce, exactly this many recordings in between made the ids equal again.
    let v = leak();
    for _ in 0..65_534 {
        grad(|x: &[Var]| x[0], &[1.0]);
    }
    assert_refused(v);
    // And after 140 000 more recordings on a reused tape.
    let mut tape = Tape::new();
    let mut g = [0.0];
    for _ in 0..70_000 {
        tape.grad_into(|x: &[Var]| x[0], &[1.0], &mut g);
        let y = tape.grad_into(|x: &[Var]| x[0] * 2.0, &[1.0], &mut g);
        assert_eq!((y, g), (2.0, [2.0]));
    }
    assert_refused(v);
    // Nothing else is disturbed: the correct gradient of x·x.
    assert_eq!(
        value_and_grad(|x: &[Var]| x[0] * x[0], &[5.0]),
        (25.0, vec![10.0])
    );
}

#[test]
fn stale_var_is_refused_across_2_pow_32_and_2_pow_48_job_ids() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Simulate 2³² (and 2⁴⁸) ids between the leak and the reuse by skipping ids: any scheme
    // keeping 32 (or 48) bits of the id would now see the leaked id again.
    for bits in [32u32, 48] {
        let v = leak();
        // The next recording (on this thread's tape, with the same job buffer) reserves its
        // range exactly 2^bits after the leaked recording's, so its first input has the
        // leaked id + 2^bits.
        adjoint_tape::__skip_ids(1u64 << bits);
        assert_eq!(assert_refused(v) - id_of(v), 1u64 << bits);
        // Also as a value imported into a parallel job.
        let v = leak();
        adjoint_tape::__skip_ids(1u64 << bits);
        let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
            grad(
                |x: &[Var]| {
                    let (a, b) = join(|| x[0] * v, || x[0]);
                    a + b
                },
                &[5.0],
            )
        })));
        assert!(msg.contains("recording"), "{msg}");
    }
    assert_eq!(grad(|x: &[Var]| x[0] * x[0], &[3.0]), vec![6.0]);
}

#[test]
fn output_of_another_recording_is_refused_as_a_seed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = leak();
    let mut tape = Tape::new();
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        let mut g = [0.0];
        tape.grad_into(|_x: &[Var]| v, &[1.0], &mut g)
    })));
    assert!(msg.contains("does not belong to this recording"), "{msg}");
}

#[test]
fn stale_var_from_the_same_tape_is_refused_with_and_without_forks() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A fork-free recording reuses its job (with a fresh id) and sets up no job graph; a forked
    // one sets the graph up at its first fork. A value leaked from either kind, used in a later
    // recording on the same tape — with no fork, inside either side of a join, or after a join —
    // is refused, and the tape stays usable. On one thread a join's right side runs after its
    // left one; on two it is usually stolen while the left one sleeps: the same message either
    // way (it once depended on which thread ran the side, seen in CI).
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| stale_var_on_one_tape(threads));
    }
}

fn stale_var_on_one_tape(threads: usize) {
    let mut tape = Tape::new();
    let mut g = [0.0];
    for forked in [false, true] {
        let mut leaked = None;
        tape.grad_into(
            |x: &[Var]| {
                let y = if forked {
                    join(|| x[0] * 2.0, || x[0]).0
                } else {
                    x[0] * 2.0
                };
                leaked = Some(y);
                y
            },
            &[1.0],
            &mut g,
        );
        let v = leaked.unwrap();
        for place in ["no fork", "left side", "right side", "after a join"] {
            let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
                tape.grad_into(
                    |x: &[Var]| match place {
                        "no fork" => x[0] * v,
                        "left side" => {
                            let (a, b) = join(|| x[0] * v, || x[0]);
                            a + b
                        }
                        "right side" => {
                            let (a, b) = join(
                                || {
                                    std::thread::sleep(std::time::Duration::from_millis(20));
                                    x[0]
                                },
                                || x[0] * v,
                            );
                            a + b
                        }
                        _ => {
                            let (a, b) = join(|| x[0], || x[0]);
                            a * b * v
                        }
                    },
                    &[1.0],
                    &mut g,
                )
            })));
            // (inside a join's side a job of the other side may be running, so the message
            // names both possibilities)
            let expected = if place.ends_with("side") {
                "belongs to another recording (one that has finished"
            } else {
                "finished or to a different recording"
            };
            assert!(
                msg.contains(expected),
                "{threads} thread(s), leaked from a forked recording: {forked}, used {place}: {msg}"
            );
            assert_eq!(tape.grad_into(|x: &[Var]| x[0] * x[0], &[3.0], &mut g), 9.0);
            assert_eq!(g, [6.0]);
        }
    }
}
