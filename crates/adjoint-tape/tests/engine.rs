//! Behaviour of the tape engine: misuse, panics in jobs, nesting, checkpoints, structs,
//! recursion, Jacobians — each against an independent reference.

use adjoint_core::check::check_gradient;
use adjoint_core::forward;
use adjoint_core::prelude::*;
use adjoint_tape::{checkpoint, grad, jacobian, join, par_map, value_and_grad, vjp, Tape, Var};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod common;
use common::in_pool;

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

#[test]
fn var_used_after_its_recording_is_a_clear_panic() {
    let mut leaked = None;
    grad(
        |x: &[Var]| {
            leaked = Some(x[0]);
            x[0]
        },
        &[1.0],
    );
    let v = leaked.unwrap();
    let msg = panic_message(catch_unwind(|| v * v));
    assert!(msg.contains("outside its recording"), "{msg}");
    // ... and inside a different recording.
    let msg = panic_message(catch_unwind(|| grad(|y: &[Var]| y[0] * v, &[2.0])));
    assert!(
        msg.contains("finished or to a different recording"),
        "{msg}"
    );
    // The engine is still fine.
    assert_eq!(grad(|y: &[Var]| y[0] * y[0], &[2.0]), vec![4.0]);
}

#[test]
fn constants_work_outside_any_recording() {
    let c = Var::constant(2.0);
    assert_eq!((c * c + 1.0).value(), 5.0);
}

#[test]
fn panic_inside_a_parallel_job_propagates_and_engine_stays_usable() {
    let msg = panic_message(catch_unwind(|| {
        grad(
            |x: &[Var]| {
                let (a, _b): (Var, Var) = join(|| x[0] * 2.0, || panic!("boom in job"));
                a
            },
            &[1.0],
        )
    }));
    assert!(msg.contains("boom in job"), "{msg}");
    let g = grad(
        |x: &[Var]| {
            let (a, b) = join(|| x[0] * 2.0, || x[0] * x[0]);
            a + b
        },
        &[3.0],
    );
    assert_eq!(g, vec![8.0]);
}

/// A panic in a join side caught inside the recording (`catch_unwind` around a `par_map`) left
/// the recording without its context: the next operation said the `Var` was "used outside its
/// recording" (the code used `tape::join`), or the recording's end hit an `unreachable!` (a
/// hunter). Every later use says what happened; the engine stays usable, on one thread and in
/// a pool.
#[test]
fn a_join_panic_caught_inside_the_recording_is_named() {
    let boom = |x: &[Var]| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            join(|| x[0] * 2.0, || -> Var { panic!("side failed") })
        }));
    };
    for pool in [false, true] {
        let run = |f: &(dyn Fn() + Sync)| {
            if pool {
                in_pool(2, f)
            } else {
                f()
            }
        };
        // What the recording does after the catch, as a panic message.
        let after = |rest: &(dyn Fn(&[Var]) -> Var + Sync)| {
            panic_message(catch_unwind(AssertUnwindSafe(|| {
                run(&|| {
                    grad(
                        |x: &[Var]| {
                            boom(x);
                            rest(x)
                        },
                        &[3.0, 4.0],
                    );
                })
            })))
        };
        // its next operation, its next join, its end (it returns a constant), and the end of a
        // join side that caught it
        let nested = |x: &[Var]| {
            let side = || {
                boom(x);
                Var::constant(1.0)
            };
            join(side, || x[1] * 2.0).0
        };
        for msg in [
            after(&|x| x[0] * x[1]),
            after(&|x| join(|| x[0] * 2.0, || 0.0).0),
            after(&|_| Var::constant(1.0)),
            panic_message(catch_unwind(AssertUnwindSafe(|| {
                run(&|| {
                    grad(nested, &[3.0, 4.0]);
                })
            }))),
        ] {
            assert!(msg.contains("was caught inside the recording"), "{msg}");
        }
        // and the engine is usable afterwards (closed form: ∂(x₀x₁) = (x₁, x₀))
        let g = grad(|x: &[Var]| x[0] * x[1], &[3.0, 4.0]);
        assert_eq!(g, vec![4.0, 3.0]);
    }
}

#[test]
fn nested_joins_and_par_map_match_forward_mode() {
    fn f<T: Real>(x: &[T]) -> T {
        x.iter()
            .enumerate()
            .map(|(i, &v)| (v * (i as f64 + 1.0)).sin() * v)
            .sum()
    }
    let x: Vec<f64> = (0..37).map(|i| 0.1 * i as f64 - 1.0).collect();
    let g = grad(
        |v: &[Var]| {
            let (l, r) = v.split_at(20);
            let ((a, b), c) = join(
                || join(|| f(&l[..7]), || f(&l[7..])),
                || par_map(r, |&t| t.exp()).into_iter().sum::<Var>(),
            );
            // Mix values from different jobs after the join.
            a * b + c + v[0] * a
        },
        &x,
    );
    let fwd = forward::gradient(
        |v| {
            let (l, r) = v.split_at(20);
            let (a, b) = (f(&l[..7]), f(&l[7..]));
            let c: forward::Dual64 = r.iter().map(|t| t.exp()).sum();
            a * b + c + v[0] * a
        },
        &x,
    );
    for (a, b) in g.iter().zip(&fwd) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
}

/// The panic message of a gradient whose right side of a `join` reads a value the left side
/// made after `steps` operations, while the left side has not joined yet.
fn unjoined_sibling_message(steps: usize) -> String {
    use std::sync::Mutex;
    let slot: Mutex<Option<Var>> = Mutex::new(None);
    panic_message(catch_unwind(AssertUnwindSafe(|| {
        grad(
            |x: &[Var]| {
                let (a, b) = join(
                    || {
                        let mut v = x[0] * 2.0;
                        for _ in 0..steps {
                            v *= 1.0001;
                        }
                        *slot.lock().unwrap() = Some(v);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        v
                    },
                    || loop {
                        if let Some(v) = *slot.lock().unwrap() {
                            break v * 3.0;
                        }
                        std::thread::yield_now();
                    },
                );
                a + b
            },
            &[1.0],
        )
    })))
}

/// A value from the other side of a `join` that has not joined yet is refused, naming the join;
/// also one the left side made after its tape outgrew its first id range (5000 steps: a range
/// entered in the job table only when the job ends), where the message said the value "belongs
/// to a recording that has finished or to a different recording" (a hunter).
#[test]
fn value_from_unjoined_sibling_job_is_rejected() {
    for steps in [0, 5000] {
        let msg = unjoined_sibling_message(steps);
        assert!(
            msg.contains("has not joined yet") || msg.contains("other side of a join"),
            "{steps} steps: {msg}"
        );
    }
}

/// An outer recording's value read inside an inner recording's `par_map`: refused, and the
/// message names another recording first (it led with "a parallel job that has not joined yet",
/// the likelier mistake being the outer `Var`; a reviewer).
#[test]
fn an_outer_recording_s_value_inside_par_map_names_another_recording() {
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        grad(
            |x: &[Var]| {
                let outer = x[0] * 2.0;
                let _ = grad(
                    |y: &[Var]| {
                        par_map(&[1.0, 2.0, 3.0, 4.0], |&c: &f64| y[0] * outer * c)
                            .into_iter()
                            .sum::<Var>()
                    },
                    &[1.0],
                );
                outer
            },
            &[1.0],
        )
    })));
    // (inside a `par_map` element a sibling job may be running, so the message names both
    // possibilities, another recording first; outside any join it names the recording alone)
    let recording = msg
        .find("another recording")
        .or_else(|| msg.find("different recording"));
    let join = msg.find("not joined yet").unwrap_or(usize::MAX);
    assert!(recording.is_some_and(|r| r < join), "{msg}");
}

#[test]
fn value_smuggled_between_sides_is_rejected_even_when_run_sequentially() {
    use std::sync::Mutex;
    // One thread: the left side runs to the end (its job is sealed) before the right one.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let slot: Mutex<Option<Var>> = Mutex::new(None);
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        pool.install(|| {
            grad(
                |x: &[Var]| {
                    let (a, b) = join(
                        || {
                            let v = x[0] * 2.0;
                            *slot.lock().unwrap() = Some(v);
                            v
                        },
                        || slot.lock().unwrap().expect("left ran first") * 3.0,
                    );
                    a + b
                },
                &[1.0],
            )
        })
    })));
    assert!(msg.contains("other side of a join"), "{msg}");
}

#[test]
fn results_of_an_earlier_join_flow_into_a_later_one() {
    let f = |v: &[Var]| {
        let (a, b) = join(|| v[0].sin() * v[1], || v[1].exp());
        let (c, d) = join(|| a * b, || join(|| b * v[0], || a + 1.0).0);
        c + d * a
    };
    let x = [0.4, -0.3];
    let g = grad(f, &x);
    let fwd = forward::gradient(
        |v| {
            let (a, b) = (v[0].sin() * v[1], v[1].exp());
            let (c, d) = (a * b, b * v[0]);
            c + d * a
        },
        &x,
    );
    for (p, q) in g.iter().zip(&fwd) {
        assert!((p - q).abs() < 1e-14, "{p} vs {q}");
    }
}

#[test]
fn checkpointed_loop_gives_identical_gradients() {
    fn step(s: &[Var]) -> Vec<Var> {
        let (x, v, k) = (s[0], s[1], s[2]);
        let a = -(x * k) - v * 0.1 + (x * 3.0).sin() * 0.2;
        vec![x + v * 0.01, v + a * 0.01, k]
    }
    let run = |x: &[Var], every: usize| {
        let mut s = x.to_vec();
        for i in 0..500 {
            s = if every > 0 && i % every == 0 {
                // a checkpoint containing several steps, one nested checkpoint and a join
                checkpoint(&s, |s: &[Var]| {
                    let s = step(s);
                    let s = checkpoint(&s, step);
                    let (a, b) = join(|| step(&s), || s[2] * 1.0);
                    vec![a[0], a[1], b]
                })
            } else {
                step(&s)
            };
        }
        s[0] * s[1] + s[2]
    };
    let x = [0.4, -0.2, 2.0];
    let plain = grad(|v: &[Var]| run(v, 0), &x);
    for every in [1, 3, 7] {
        let ck = grad(|v: &[Var]| run(v, every), &x);
        // Same arithmetic, same order: identical bits (a checkpoint adds one plain step of
        // recomputation per region, so compare with the matching plain program).
        let reference = grad(
            |v: &[Var]| {
                let mut s = v.to_vec();
                for i in 0..500 {
                    s = if i % every == 0 {
                        let t = step(&step(&s));
                        let a = step(&t);
                        vec![a[0], a[1], t[2] * 1.0]
                    } else {
                        step(&s)
                    };
                }
                s[0] * s[1] + s[2]
            },
            &x,
        );
        assert_eq!(ck, reference, "every {every}");
        // The checkpointed program's gradient against finite differences of its own values.
        let f = |v: &[f64]| {
            let vars: Vec<Var> = v.iter().map(|&t| Var::constant(t)).collect();
            run(&vars, every).value()
        };
        check_gradient(f, &x, &ck).assert_passed();
    }
    // And the plain run against finite differences.
    let f = |v: &[f64]| {
        let vars: Vec<Var> = v.iter().map(|&t| Var::constant(t)).collect();
        run(&vars, 0).value()
    };
    check_gradient(f, &x, &plain).assert_passed();
}

/// User structs generic over the scalar.
#[derive(Clone, Copy)]
struct Body<T> {
    pos: [T; 2],
    mass: T,
}

impl<T: Real> Body<T> {
    fn energy(&self, other: &Body<T>) -> T {
        let dx = self.pos[0] - other.pos[0];
        let dy = self.pos[1] - other.pos[1];
        -(self.mass * other.mass) / (dx * dx + dy * dy).sqrt()
    }
}

fn system<T: Real>(x: &[T]) -> T {
    let bodies: Vec<Body<T>> = x
        .chunks(3)
        .map(|c| Body {
            pos: [c[0], c[1]],
            mass: c[2].exp(),
        })
        .collect();
    let mut e = T::cst(0.0);
    for i in 0..bodies.len() {
        for j in i + 1..bodies.len() {
            e += bodies[i].energy(&bodies[j]);
        }
    }
    e
}

/// Recursion with a data-dependent branch.
fn power_tower<T: Real>(x: T, n: u32) -> T {
    if n == 0 {
        x
    } else if x > 1.0 {
        power_tower(x.sqrt() + 0.5, n - 1)
    } else {
        power_tower(x * x + 0.3, n - 1)
    }
}

#[test]
fn structs_and_recursion() {
    let x = [0.0, 0.0, 0.1, 1.0, 0.5, -0.2, -0.7, 1.2, 0.3];
    let (y, g) = value_and_grad(|v: &[Var]| system(v), &x);
    assert_eq!(y, system(&x));
    check_gradient(|v| system(v), &x, &g).assert_passed();
    let g = grad(|v: &[Var]| power_tower(v[0], 12), &[0.9]);
    let d = forward::derivative(|v| power_tower(v, 12), 0.9);
    assert!((g[0] - d).abs() < 1e-13 * d.abs().max(1.0));
}

#[test]
fn jacobian_and_vjp_match_forward_mode() {
    fn f<T: Real>(x: &[T]) -> Vec<T> {
        vec![x[0] * x[1].sin(), x[2].exp() - x[0], (x[1] * x[2]).atan()]
    }
    let x = [0.7, -1.1, 0.4];
    let j = jacobian(|v: &[Var]| f(v), &x);
    for col in 0..3 {
        let mut e = [0.0; 3];
        e[col] = 1.0;
        let (_, t) = forward::jvp(|v| f(v), &x, &e);
        for row in 0..3 {
            assert!((j[row][col] - t[row]).abs() < 1e-15);
        }
    }
    let w = [0.5, -2.0, 3.0];
    let (y, g) = vjp(|v: &[Var]| f(v), &x, &w);
    assert_eq!(y, f(&x));
    for col in 0..3 {
        let expect: f64 = (0..3).map(|r| w[r] * j[r][col]).sum();
        assert!((g[col] - expect).abs() < 1e-14);
    }
}

#[test]
fn jacobian_into_matches_forward_mode_and_jacobian() {
    // outputs as an array (no allocation) and as a Vec, into a row-major buffer
    fn f<T: Real>(x: &[T]) -> [T; 3] {
        [x[0] * x[1].sin(), x[2].exp() - x[0], (x[1] * x[2]).atan()]
    }
    let x = [0.7, -1.1, 0.4];
    let mut j = [f64::NAN; 9];
    adjoint_tape::jacobian_into(|v: &[Var]| f(v), &x, &mut j);
    for col in 0..3 {
        let mut e = [0.0; 3];
        e[col] = 1.0;
        let (_, t) = forward::jvp(|v| f(v).to_vec(), &x, &e);
        for row in 0..3 {
            assert!((j[3 * row + col] - t[row]).abs() < 1e-15, "[{row}, {col}]");
        }
    }
    let rows = jacobian(|v: &[Var]| f(v).to_vec(), &x);
    let mut again = [0.0; 9];
    Tape::new().jacobian_into(|v: &[Var]| f(v).to_vec(), &x, &mut again);
    assert_eq!(again.to_vec(), rows.concat());
    assert_eq!(j, again);
}

#[test]
fn jacobian_into_through_forked_jobs() {
    // outputs recorded in two jobs of a `join`: the same rows as the sequential recording
    fn f<T: Real>(x: &[T]) -> [T; 2] {
        [x[0] * x[1].exp(), (x[1] - x[2]).sin() * x[0]]
    }
    let x = [0.3, -0.8, 1.2];
    let mut forked = [0.0; 6];
    adjoint_tape::jacobian_into(
        |v: &[Var]| {
            let (a, b) = join(|| f(v)[0], || f(v)[1]);
            [a, b]
        },
        &x,
        &mut forked,
    );
    let mut plain = [0.0; 6];
    adjoint_tape::jacobian_into(|v: &[Var]| f(v), &x, &mut plain);
    assert_eq!(forked, plain);
    let f0 = forward::gradient(|v| f(v)[0], &x);
    let f1 = forward::gradient(|v| f(v)[1], &x);
    for (a, b) in plain.iter().zip(f0.iter().chain(&f1)) {
        assert!((a - b).abs() < 1e-15, "{a} vs {b}");
    }
}

#[test]
fn large_forked_recordings_are_swept_from_zero_every_time() {
    // 16 jobs of 40 000 entries: more than the 2¹⁸ adjoints from which the reverse pass zeroes
    // its jobs in parallel, each job in two pieces of at most 2¹⁵. A Jacobian sweeps one recording once per row, so a job left
    // unzeroed would add the first row's adjoints into the second; the tape is then reused for
    // a second recording. Both against forward mode, and bit-identical at 1, 2 and 4 threads.
    fn chain<T: Real>(x: T) -> T {
        let mut y = x;
        for _ in 0..20_000 {
            y = y * 0.9999 + T::from(0.0001);
        }
        y
    }
    fn f<T: Real>(x: &[T]) -> [T; 2] {
        let ys: Vec<T> = x.iter().map(|&t| chain(t)).collect();
        let a = ys.iter().copied().sum::<T>();
        let b = ys
            .iter()
            .zip(1..)
            .map(|(&y, i)| y * T::from(i as f64))
            .sum::<T>();
        [a, b]
    }
    fn forked(x: &[Var]) -> Vec<Var> {
        let ys = par_map(x, |&t| chain(t));
        let a = ys.iter().copied().sum::<Var>();
        let b = ys.iter().zip(1..).map(|(&y, i)| y * i as f64).sum::<Var>();
        vec![a, b]
    }
    let x: Vec<f64> = (0..16).map(|i| 0.1 * i as f64 - 0.7).collect();
    let f0 = forward::gradient(|v| f(v)[0], &x);
    let f1 = forward::gradient(|v| f(v)[1], &x);
    let reference = in_pool(1, || Tape::new().jacobian(forked, &x));
    for (a, b) in reference.concat().iter().zip(f0.iter().chain(&f1)) {
        assert!((a - b).abs() <= 1e-13 * b.abs(), "{a} vs forward mode {b}");
    }
    for threads in [1, 2, 4] {
        in_pool(threads, || {
            let mut tape = Tape::new();
            assert_eq!(tape.jacobian(forked, &x), reference, "{threads} threads");
            assert_eq!(
                tape.jacobian(forked, &x),
                reference,
                "{threads} threads, tape reused"
            );
            let (_, g) = tape.value_and_grad(|v: &[Var]| forked(v)[1], &x);
            assert_eq!(g, reference[1], "{threads} threads, one output");
        });
    }
}

#[test]
#[should_panic(expected = "jacobian_into: 3 outputs × 3 inputs, but the buffer has 8")]
fn jacobian_into_names_both_sizes() {
    let mut j = [0.0; 8];
    adjoint_tape::jacobian_into(|v: &[Var]| [v[0], v[1], v[2]], &[1.0, 2.0, 3.0], &mut j);
}

#[test]
fn an_infinite_partial_does_not_meet_a_recorded_zero_tangent_in_a_hessian() {
    // √(x₀²)·x₁ + x₁² at (0, 1) is x₁² along x₁: ∂²/∂x₁² = 2 (a hunter: the tape gave NaN,
    // because the tangent of x₀·x₀ along x₁ was a recorded zero that √'s infinite partial
    // multiplied). The entries with x₀ are at |x₀|'s kink: no value is right there.
    fn f<T: Real>(x: &[T]) -> T {
        (x[0] * x[0]).sqrt() * x[1] + x[1] * x[1]
    }
    let x = [0.0, 1.0];
    let h = adjoint_tape::hessian(|v| f(v), &x);
    let fw = forward::hessian(|v| f(v), &x);
    assert_eq!((h[1][1], fw[1][1]), (2.0, 2.0), "{h:?}");
    assert_eq!(adjoint_tape::hvp(|v| f(v), &x, &[0.0, 1.0])[1], 2.0);
    // three inputs: the zero is a sum of products
    let g = |x: &[forward::Dual<Var>]| (x[0] * x[0] + x[1] * x[1]).sqrt() * x[2] + x[2] * x[2];
    let h = adjoint_tape::hessian(g, &[0.0, 0.0, 1.0]);
    assert_eq!(h[2][2], 2.0, "{h:?}");
}

#[test]
fn tape_hessian_matches_forward_hessian() {
    let x = [0.3, -0.4, 1.1, 0.5, 0.9, -0.1];
    let h = adjoint_tape::hessian(|v| system(v), &x);
    let f = forward::hessian(|v| system(v), &x);
    for (r, s) in h.iter().zip(&f) {
        for (a, b) in r.iter().zip(s) {
            assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}

#[test]
fn zero_adjoint_does_not_poison_through_infinite_partials() {
    // sqrt(x − x) is computed but multiplied by a constant 0 ⇒ the adjoint of the sqrt is 0.
    let g = grad(|v: &[Var]| (v[0] - v[0]).sqrt() * 0.0 + v[0], &[2.0]);
    assert_eq!(g, vec![1.0]);
}

#[test]
fn tape_is_reusable_across_sizes() {
    let mut tape = Tape::new();
    for n in [3, 10, 2, 10] {
        let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let (_, g) = tape.value_and_grad(|v: &[Var]| v.iter().map(|&t| t * t).sum(), &x);
        assert_eq!(g, x.iter().map(|t| 2.0 * t).collect::<Vec<_>>());
    }
}

#[test]
fn values_recorded_before_a_tape_outgrew_its_id_range_keep_working() {
    // A fresh tape reserves ids for 64 values; a recording of thousands of operations reserves
    // new, larger ranges as it goes, and the inputs (and early values) keep the ids of the first
    // range: they must still be found — in the job that recorded them, in a join's side, and
    // after a join. f(x) = Σₖ sin(k·x₀)·x₁ (1 000 terms) + x₀·e, e = exp(x₁) recorded first.
    let f = |x: &[Var], fork: bool| {
        let e = x[1].exp();
        let mut s = Var::constant(0.0);
        for k in 1..=1000 {
            s += (x[0] * k as f64).sin() * x[1];
        }
        if fork {
            let (a, b) = join(|| x[0] * e, || s + x[1] * 0.0);
            a + b + x[0] * 0.0
        } else {
            s + x[0] * e
        }
    };
    let x = [0.3, 0.7];
    let dx0: f64 = (1..=1000)
        .map(|k| k as f64 * (k as f64 * x[0]).cos() * x[1])
        .sum::<f64>()
        + x[1].exp();
    let dx1: f64 = (1..=1000).map(|k| (k as f64 * x[0]).sin()).sum::<f64>() + x[0] * x[1].exp();
    for fork in [false, true] {
        let g = Tape::new().value_and_grad(|v: &[Var]| f(v, fork), &x).1;
        assert!(
            (g[0] - dx0).abs() < 1e-9 * dx0.abs(),
            "fork {fork}: {} vs {dx0}",
            g[0]
        );
        assert!(
            (g[1] - dx1).abs() < 1e-9 * dx1.abs().max(1.0),
            "fork {fork}: {} vs {dx1}",
            g[1]
        );
    }
}

#[test]
fn a_long_continuation_after_a_join_is_seeded_and_swept() {
    // The job after a join starts with a small id range; 2 000 operations outgrow it, and the
    // output (in a later range) must still be found when the recording is seeded.
    // f(x) = Σₖ (a·b)·k·1e-6 with (a, b) = (x₀², x₁) from a join: ∂/∂x₀ = 2x₀x₁·c, ∂/∂x₁ = x₀²·c.
    let c: f64 = (1..=2000).map(|k| k as f64 * 1e-6).sum();
    let x = [0.6, 1.5];
    let f = |v: &[Var]| {
        let (a, b) = join(|| v[0] * v[0], || v[1]);
        let p = a * b;
        let mut s = Var::constant(0.0);
        for k in 1..=2000 {
            s += p * (k as f64 * 1e-6);
        }
        s
    };
    let mut tape = Tape::new();
    for _ in 0..2 {
        let (y, g) = tape.value_and_grad(f, &x);
        assert!((y - x[0] * x[0] * x[1] * c).abs() < 1e-12);
        assert!((g[0] - 2.0 * x[0] * x[1] * c).abs() < 1e-12, "{g:?}");
        assert!((g[1] - x[0] * x[0] * c).abs() < 1e-12, "{g:?}");
    }
}

#[test]
fn tape_layout_is_compact() {
    // 24 bytes per recorded operation (two f64 partials, two u32 operand indices) and a
    // 16-byte active scalar (value, 64-bit id that no other value of the process has).
    assert_eq!(adjoint_tape::BYTES_PER_ENTRY, 24);
    assert_eq!(std::mem::size_of::<Var>(), 16);
}

#[test]
fn checked_mode_reports_the_first_bad_value_in_program_order_for_any_thread_count() {
    // Several parallel chunks produce NaN (ln of a negative number); the report must name the
    // first one in the program's sequential order, whichever chunk a thread reaches first.
    // Negative inputs at 50, 147, 244 and 341, each with its own value so the report shows which.
    let x: Vec<f64> = (0..400)
        .map(|i| {
            if i % 97 == 50 {
                -(i as f64)
            } else {
                1.0 + i as f64
            }
        })
        .collect();
    let run = |threads: usize| {
        in_pool(threads, || {
            let mut tape = Tape::new().checked();
            tape.try_value_and_grad(
                |v: &[Var]| par_map(v, |t| (*t * 2.0).ln()).into_iter().sum::<Var>(),
                &x,
            )
            .unwrap_err()
        })
    };
    let reference = run(1);
    // The first negative input in sequential order is x[50] = −50: ln(2·x[50]) = ln(−100).
    assert_eq!(reference.primitive, "Ln");
    assert_eq!(reference.operands[0], -100.0);
    assert!(reference.value.is_nan());
    // The same program without parallelism reports the same primitive and operands.
    let sequential = Tape::new()
        .checked()
        .try_value_and_grad(
            |v: &[Var]| v.iter().map(|t| (*t * 2.0).ln()).sum::<Var>(),
            &x,
        )
        .unwrap_err();
    assert_eq!(sequential.operands, reference.operands);
    for threads in [1, 2, 4] {
        for _ in 0..20 {
            // (NaN != NaN, so compare the fields and the message rather than the structs.)
            let e = run(threads);
            assert_eq!(
                (e.job, e.position, e.operands, e.to_string()),
                (
                    reference.job,
                    reference.position,
                    reference.operands,
                    reference.to_string()
                ),
                "{threads} threads"
            );
        }
    }
}

#[test]
fn checked_reverse_pass_error_names_the_job_in_program_order() {
    // sqrt at 0 has an infinite partial; with a finite adjoint reaching it the reverse pass
    // reports it. Two parallel sides both hit it; the report must not depend on scheduling.
    let x = [0.0, 0.0, 1.0];
    let run = |threads: usize| {
        in_pool(threads, || {
            let mut tape = Tape::new().checked();
            tape.try_value_and_grad(
                |v: &[Var]| {
                    let (a, b) = join(|| v[0].sqrt() * v[2], || v[1].sqrt() * v[2]);
                    a + b
                },
                &x,
            )
            .unwrap_err()
        })
    };
    let reference = run(1);
    for threads in [1, 2, 4] {
        for _ in 0..20 {
            assert_eq!(run(threads), reference);
        }
    }
}

/// The reverse pass's report is the same whether two terms are written in sequence or as the
/// sides of a `join`: the right side's bad value, which a sequential reverse sweep meets first
/// (a hunter: the join reported the left side's, adjoint 1 instead of 3).
#[test]
fn checked_reverse_pass_report_does_not_change_with_a_join() {
    let x = [0.0, 0.0, 1.0];
    let seq = Tape::new()
        .checked()
        .try_value_and_grad(
            |v: &[Var]| v[0].sqrt() * v[2] + v[1].sqrt() * (v[2] * 3.0),
            &x,
        )
        .unwrap_err();
    for threads in [1, 2, 4] {
        let fork = in_pool(threads, || {
            Tape::new()
                .checked()
                .try_value_and_grad(
                    |v: &[Var]| {
                        let (a, b) = join(|| v[0].sqrt() * v[2], || v[1].sqrt() * (v[2] * 3.0));
                        a + b
                    },
                    &x,
                )
                .unwrap_err()
        });
        assert_eq!(fork.value, seq.value, "{threads} threads: {fork} vs {seq}");
    }
}

/// The job limit's panic caught inside the recording leaves it abandoned, with the message that
/// says so (a hunter: the recording's end hit an `unreachable!`; another operation first said
/// "used outside its recording … not rayon::join").
#[test]
fn a_caught_job_limit_panic_abandons_the_recording_clearly() {
    let run = |after: &(dyn Fn(&[Var]) -> Var + Sync)| {
        panic_message(catch_unwind(AssertUnwindSafe(|| {
            grad(
                |x: &[Var]| {
                    let limit = catch_unwind(AssertUnwindSafe(|| {
                        for _ in 0..70_000 {
                            join(|| (), || ());
                        }
                    }));
                    assert!(
                        panic_message(limit).contains("parallel jobs"),
                        "the job limit's own message first"
                    );
                    after(x)
                },
                &[1.0],
            )
        })))
    };
    for msg in [run(&|_| Var::constant(1.0)), run(&|x| x[0] * 2.0)] {
        assert!(msg.contains("was caught inside the recording"), "{msg}");
    }
    // the engine is usable afterwards (closed form: ∂(x₀²) = 2x₀)
    assert_eq!(grad(|x: &[Var]| x[0] * x[0], &[3.0]), vec![6.0]);
}

#[test]
fn plain_rayon_join_from_a_recording_outside_the_pool_points_to_tape_join() {
    // Recorded on a thread outside rayon's pool, `rayon::join` runs both sides on pool threads,
    // which hold no recording: a clear panic that names the combinator to use. (Inside the pool
    // a side that is not stolen records correctly; see the crate docs.)
    let msg = std::thread::spawn(|| {
        panic_message(catch_unwind(|| {
            grad(
                |x: &[Var]| {
                    let (a, b) = rayon::join(|| x[0] * 2.0, || x[0] * 3.0);
                    a + b
                },
                &[1.0],
            )
        }))
    })
    .join()
    .unwrap();
    assert!(msg.contains("adjoint::tape::join"), "{msg}");
}

#[test]
fn a_checked_tape_checks_the_forward_pass_of_every_derivative_api() {
    // `ln` of a negative number: a NaN from finite operands whose partial is finite, so only
    // the forward check can see it (a reviewer helper found `jacobian_into` returning a finite
    // Jacobian here, and `jacobian`, `vjp`, `hvp`, `hessian` likewise).
    use adjoint_core::forward::Dual;
    let panics = |what: &str, f: &mut dyn FnMut()| {
        let e = catch_unwind(AssertUnwindSafe(f)).expect_err(what);
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("checked mode") && msg.contains("Ln"),
            "{what}: {msg}"
        );
    };
    let bad = |x: &[Var]| (x[0] - 2.0).ln();
    let bad_dual = |x: &[Dual<Var>]| (x[0] - 2.0).ln() * x[0];
    let mut t = Tape::new().checked();
    panics("jacobian_into", &mut || {
        let mut j = [0.0; 1];
        t.jacobian_into(|x: &[Var]| [bad(x)], &[1.0], &mut j);
    });
    panics("jacobian", &mut || {
        Tape::new()
            .checked()
            .jacobian(|x: &[Var]| vec![bad(x)], &[1.0]);
    });
    panics("vjp", &mut || {
        Tape::new()
            .checked()
            .vjp(|x: &[Var]| vec![bad(x)], &[1.0], &[1.0]);
    });
    panics("hvp", &mut || {
        Tape::new().checked().hvp(bad_dual, &[1.0], &[1.0]);
    });
    panics("hessian", &mut || {
        Tape::new().checked().hessian(bad_dual, &[1.0]);
    });
    // The same tape goes on working, and an unchecked tape still returns the numbers.
    let mut j = [0.0; 1];
    t.jacobian_into(|x: &[Var]| [x[0] * 3.0], &[1.0], &mut j);
    assert_eq!(j, [3.0]);
    let j = Tape::new().jacobian(|x: &[Var]| vec![bad(x)], &[1.0]);
    assert_eq!(j, vec![vec![-1.0]]);
}

#[test]
fn a_checkpoint_region_that_captures_a_var_is_a_panic_saying_so() {
    // Used inside the region, or handed back as it is (that one was "does not belong to this
    // recording", from the reverse pass's recomputation); both name the capture.
    for returned in [false, true] {
        let msg = panic_message(catch_unwind(|| {
            grad(
                |x: &[Var]| {
                    let c = x[1];
                    let region = move |s: &[Var]| vec![if returned { c } else { s[0] * c }];
                    checkpoint(&x[..1], region)[0] * x[0]
                },
                &[1.0, 2.0],
            )
        }));
        assert!(
            msg.contains("was captured by a checkpointed region"),
            "returned: {returned}: {msg}"
        );
    }
    // Read inside a `join` or `par_map` of the region, on whichever thread runs the side (one
    // on a pool thread said "used outside its recording … use adjoint::tape::join"; a hunter).
    // Called outside a pool, both sides run on the global pool's threads; inside one, those
    // not stolen run here.
    for (par, pool) in [(false, false), (true, false), (false, true), (true, true)] {
        for _ in 0..5 {
            let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
                let run = || {
                    grad(
                        |x: &[Var]| {
                            let cap = x[1] * 1.0;
                            checkpoint(&x[..1], move |s: &[Var]| {
                                if par {
                                    par_map(&[s[0], s[0]], |t| *t * cap)
                                } else {
                                    let (a, b) = join(|| s[0] * 2.0, || cap * 3.0);
                                    vec![a + b]
                                }
                            })[0]
                        },
                        &[1.0, 2.0],
                    )
                };
                if pool {
                    in_pool(2, run)
                } else {
                    run()
                }
            })));
            assert!(
                msg.contains("was captured by a checkpointed region"),
                "par_map: {par}, pool: {pool}: {msg}"
            );
        }
    }
    // Passed through `inputs` instead, the same program differentiates.
    let g = grad(
        |x: &[Var]| checkpoint(x, |s: &[Var]| vec![s[0] * s[1]])[0] * x[0],
        &[1.0, 2.0],
    );
    assert_eq!(g, vec![4.0, 1.0]);
}

#[test]
fn a_checked_tape_reports_a_non_finite_checkpoint_output() {
    // The region runs unrecorded (a reviewer helper found `Ok((NaN, [-1]))` here); checked
    // mode records it once more to name the operation inside it.
    let f = |x: &[Var]| checkpoint(x, |s: &[Var]| vec![(s[0] - 2.0).ln()])[0] * 1.0;
    let e = Tape::new()
        .checked()
        .try_value_and_grad(f, &[1.0])
        .expect_err("a NaN from a finite input");
    assert!(
        e.to_string().contains(
            "Ln(-1) = NaN inside a checkpointed region is the first non-finite value from \
             finite operands (job 0, operation #2: the region's first output)"
        ),
        "{e}"
    );
    // A finite region is not reported, and a non-finite input is not the region's doing.
    let g = Tape::new()
        .checked()
        .try_value_and_grad(
            |x: &[Var]| checkpoint(x, |s: &[Var]| vec![s[0].sin()])[0],
            &[1.0],
        )
        .unwrap();
    assert_eq!(g, (1f64.sin(), vec![1f64.cos()]));
    let (v, _) = Tape::new()
        .checked()
        .try_value_and_grad(
            |x: &[Var]| checkpoint(x, |s: &[Var]| vec![s[0] * 2.0])[0],
            &[f64::INFINITY],
        )
        .unwrap();
    assert_eq!(v, f64::INFINITY);
}

/// Hessians with an infinite partial met by a constant zero tangent (the derivative of a
/// constant such as `acos(−1)` = π, or `sqrt(0)`): 0 times the partial, as in forward mode, not
/// NaN. Closed forms and `forward::hessian`.
#[test]
fn hessians_through_constants_with_infinite_partials() {
    use adjoint_tape::{hessian, hvp};
    use std::f64::consts::PI;
    fn f<T: Real>(x: &[T]) -> T {
        let pi = T::cst(-1.0).acos();
        (x[0] * pi).sin() + x[1] * x[1]
    }
    let x = [0.3, 1.0];
    let h = hessian(|v| f(v), &x);
    let want = [[-PI * PI * (0.3 * PI).sin(), 0.0], [0.0, 2.0]];
    let fh = forward::hessian(|v| f(v), &x);
    for i in 0..2 {
        for j in 0..2 {
            assert!((h[i][j] - want[i][j]).abs() < 1e-12, "{h:?} vs {want:?}");
            assert!(
                (h[i][j] - fh[i][j]).abs() < 1e-12,
                "{h:?} vs forward {fh:?}"
            );
        }
    }
    fn g<T: Real>(x: &[T]) -> T {
        x[0] * x[0] * T::cst(1.0).asin() + x[1] * T::cst(0.0).sqrt()
    }
    let h = hessian(|v| g(v), &[2.0, 1.0]);
    assert_eq!(h, vec![vec![PI, 0.0], vec![0.0, 0.0]]);
    assert_eq!(hvp(|v| g(v), &[2.0, 1.0], &[1.0, 1.0]), vec![PI, 0.0]);
}

/// The norm of a zero vector: the adjoint of `x·x` is ∞ (`sqrt` at 0) and its partials are 0, so
/// nothing flows back, as in forward mode (and central differences: 0). Scalar code, the `dot`
/// primitive and `matvec`.
#[test]
fn an_infinite_adjoint_through_a_zero_partial_is_zero() {
    use adjoint_core::vector;
    fn n<T: Real>(x: &[T]) -> T {
        (x[0] * x[0] + x[1] * x[1]).sqrt() + x[2]
    }
    let x = [0.0, 0.0, 1.0];
    let fg = forward::gradient(|v| n(v), &x);
    assert_eq!(fg, vec![0.0, 0.0, 1.0]);
    assert_eq!(grad(|v| n(v), &x), fg);
    assert_eq!(
        grad(|v| vector::dot(&v[..2], &v[..2]).sqrt() + v[2], &x),
        fg
    );
    assert_eq!(
        grad(|v| v[0].powi(2).sqrt() * v[2] + v[1], &[0.0, 1.0, 1.0]),
        [0.0, 1.0, 0.0]
    );
    // matvec with an infinite result adjoint: M = [[x0, x1]], times (x0, x1), then sqrt.
    let g = grad(
        |v| {
            let mut out = [Var::constant(0.0)];
            vector::matvec(&v[..2], &v[..2], &mut out);
            out[0].sqrt() + v[2]
        },
        &x,
    );
    assert_eq!(g, fg);
    // … in a forked recording (jobs sweep carefully) and with a NaN of its own elsewhere (the
    // one-job pass sweeps again carefully; the other NaN stays).
    let g = grad(
        |v| {
            let (a, b) = join(|| n(v), || v[2] * 2.0);
            a + b
        },
        &x,
    );
    assert_eq!(g, [0.0, 0.0, 3.0]);
    let g = grad(|v| n(v) + (v[2] - 2.0).sqrt(), &x);
    assert_eq!(&g[..2], [0.0, 0.0]);
    assert!(g[2].is_nan());
    // A finite adjoint still meets an infinite partial: sqrt at 0 of an input is ∞.
    assert_eq!(grad(|v| v[0].sqrt(), &[0.0]), [f64::INFINITY]);
    // The Hessian: ∂²|x|/∂x₀² at 0 does not exist (forward mode says NaN). Rows 0 and 1 are
    // NaN: on `Dual<Var>` the tangent along x₀ is NaN there (√0's infinite partial meets 2x₀, a
    // recorded 0), and a finite row would have come from the sweep dropping that NaN through
    // zero partials (it gave 0 for `‖x‖²` written this way, whose Hessian is 2I). Whole rows:
    // forward mode, entry by entry, keeps the off-diagonal zeros that the tape gives up. Row 2,
    // whose tangent is finite, is forward mode's.
    let h = adjoint_tape::hessian(|v| n(v), &[0.0, 0.0, 1.0]);
    let fh = forward::hessian(|v| n(v), &[0.0, 0.0, 1.0]);
    assert!(fh[0][0].is_nan() && fh[1][1].is_nan(), "{fh:?}");
    assert!(h[..2].iter().flatten().all(|v| v.is_nan()), "{h:?}");
    assert_eq!(h[2], fh[2]);
}

/// The Hessian where the first derivative is infinite (∛x and √x at 0): f'' has no value
/// there (∛: −∞ to the right, +∞ to the left), and forward over forward says NaN. The tape said
/// 0 for ∛ (the adjoint −∞ of `1/(3v²)` met the zero partials of `v·v` and was dropped) and
/// −∞ for √; both are NaN now, as is the row of that input only. Beside 0 both agree with the
/// closed forms.
#[test]
fn hessians_where_the_first_derivative_is_infinite_are_nan() {
    fn f<T: Real>(x: &[T]) -> T {
        x[0].cbrt() + x[1].sqrt() + x[2] * x[2]
    }
    for z in [0.0, -0.0] {
        let x = [z, 0.0, 1.5];
        let h = adjoint_tape::hessian(|v| f(v), &x);
        let fh = forward::hessian(|v| f(v), &x);
        for i in 0..2 {
            assert!(h[i].iter().all(|v| v.is_nan()), "row {i} at {z}: {h:?}");
            assert!(fh[i][i].is_nan(), "forward mode at {z}: {fh:?}");
        }
        assert_eq!(h[2], [0.0, 0.0, 2.0]);
        assert_eq!(h[2], fh[2]);
    }
    let x = [0.001, 0.01, 1.5];
    let h = adjoint_tape::hessian(|v| f(v), &x);
    let cbrt2 = -2.0 / 9.0 * 0.001f64.powf(-5.0 / 3.0);
    let sqrt2 = -0.25 * 0.01f64.powf(-1.5);
    assert!((h[0][0] - cbrt2).abs() < 1e-9 * cbrt2.abs(), "{h:?}");
    assert!((h[1][1] - sqrt2).abs() < 1e-9 * sqrt2.abs(), "{h:?}");
}

/// `%` on tape values: the value is `f64`'s `%` bit for bit (`1.0 % 0.1` is 0.0999…, not 0),
/// ∂/∂x = 1 and ∂/∂y = −q with q the integer `%` took off (9 here, not 10). Against plain `f64`
/// and finite differences.
#[test]
fn remainder_is_fmod_with_its_quotient_as_derivative() {
    for (x, y, q) in [
        (1.0, 0.1, 9.0),
        (-1.0, 0.1, -9.0),
        (7.5, 2.0, 3.0),
        (-7.5, 2.0, -3.0),
        (7.5, -2.0, -3.0),
        (1e20, 3.0, 1e20 / 3.0),
        (0.5, 2.0, 0.0),
        (-1.0, 1.0, -1.0),
        (2.0, f64::INFINITY, 0.0),
    ] {
        let (v, g) = value_and_grad(|v| v[0] % v[1], &[x, y]);
        let want = x % y;
        assert_eq!(v.to_bits(), want.to_bits(), "{x} % {y}: {v} vs {want}");
        assert_eq!(g[0], 1.0, "{x} % {y}");
        let dy = if q == 0.0 { 0.0 } else { -q };
        assert!(
            (g[1] - dy).abs() <= 1e-15 * dy.abs(),
            "{x} % {y}: dy {} vs {dy}",
            g[1]
        );
        assert_eq!(
            forward::gradient(|v| v[0] % v[1], &[x, y]),
            g,
            "{x} % {y}: forward"
        );
    }
    // With an `f64` on the right, as a user writes it, and `%=`.
    assert_eq!(value_and_grad(|v| v[0] % 2.0, &[7.5]), (1.5, vec![1.0]));
    assert_eq!(
        value_and_grad(
            |v| {
                let mut a = v[0];
                a %= v[1];
                a
            },
            &[1.0, 0.1]
        ),
        (1.0 % 0.1, vec![1.0, -9.0])
    );
    // Away from a jump, central differences agree.
    let x = [3.7, 0.9];
    let g = grad(|v| v[0] % v[1] * v[0], &x);
    let r = check_gradient(|v| v[0] % v[1] * v[0], &x, &g);
    assert!(r.passed(), "{r}");
}

/// A checkpointed region whose recomputation returns a different number of values is a panic
/// that says so.
#[test]
fn a_region_that_changes_between_runs_is_a_clear_panic() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        grad(
            move |x: &[Var]| {
                let r = r.clone();
                let ys = checkpoint(x, move |xs| {
                    let k = r.fetch_add(1, Ordering::SeqCst);
                    vec![xs[0] * xs[0]; 1 + k]
                });
                ys[0]
            },
            &[2.0],
        )
    })));
    assert!(
        msg.contains("returned 1 values when recorded and 2"),
        "{msg}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// `mul_add` on tape values rounds once, as `f64::mul_add`: the value bit for bit (here the
/// product's rounding error, which the unfused form makes 0), the derivative (a, x, 1).
#[test]
fn mul_add_value_is_fused() {
    let x = 1.0 + 2f64.powi(-30);
    let y = x * x;
    let (v, g) = value_and_grad(|v| (v[0].mul_add(v[0], v[1]) * 1e18).exp(), &[x, -y]);
    let want = (x.mul_add(x, -y) * 1e18).exp();
    assert_eq!(v.to_bits(), want.to_bits());
    let fg = forward::gradient(|v| (v[0].mul_add(v[0], v[1]) * 1e18).exp(), &[x, -y]);
    assert_eq!(g, fg);
    assert!(
        (g[0] - want * 1e18 * 2.0 * x).abs() <= 1e-15 * g[0].abs(),
        "{g:?}"
    );
    assert!((g[1] - want * 1e18).abs() <= 1e-15 * g[1].abs(), "{g:?}");
}

#[test]
fn checked_mode_reports_a_constant_operand_as_written() {
    // `x.powf(400.0)` at 10 was reported as `Powf(10, 0) = inf` (the constant dropped).
    let e = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| v[0].powf(400.0), &[10.0])
        .unwrap_err();
    assert_eq!((e.operands, e.arity), ([10.0, 400.0], 2), "{e}");
    assert!(e.to_string().contains("Powf(10, 400) = inf"), "{e}");
    // a constant on the left
    let e = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| 1e300 * v[0], &[1e10])
        .unwrap_err();
    assert_eq!(e.operands, [1e300, 1e10], "{e}");
    assert!(
        e.to_string().contains("Mul(1e300, 10000000000) = inf"),
        "{e}"
    );
    // a unary primitive shows its one operand
    let e = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| (v[0] - 1.0).ln(), &[1.0])
        .unwrap_err();
    assert_eq!(e.arity, 1);
    assert!(e.to_string().contains("Ln(0) = -inf"), "{e}");
}

#[test]
fn checked_mode_sees_a_non_finite_value_a_checkpoint_makes_and_drops() {
    // ln(x₀ − 1) at x₀ = 0.5 is NaN, and `max` drops it: the region's output is finite. Without
    // a checkpoint checked mode reports the Ln; inside one it said nothing (a hunter: the region
    // ran on constants, which are not checked).
    fn f(s: &[Var]) -> Var {
        s[0].max((s[0] - 1.0).ln()) * s[1]
    }
    let x = [0.5, 2.0];
    let plain = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| f(v), &x)
        .unwrap_err();
    assert_eq!(
        (plain.pass, plain.primitive.as_str()),
        (adjoint_tape::Pass::Forward, "Ln")
    );
    let region = |v: &[Var]| checkpoint(v, |s| vec![f(s)])[0];
    let e = Tape::new()
        .checked()
        .try_value_and_grad(region, &x)
        .unwrap_err();
    assert_eq!(e.pass, adjoint_tape::Pass::Forward);
    assert_eq!(e.primitive, "Ln inside a checkpointed region", "{e}");
    assert_eq!(e.operands[0], plain.operands[0], "{e}");
    assert!(e.value.is_nan());
    assert!(e.to_string().contains("Ln(-0.5) = NaN"), "{e}");
    // Nested regions: reported once, from the outermost region's look inside.
    let nested = |v: &[Var]| checkpoint(v, |s| checkpoint(s, |t| vec![f(t)]))[0];
    let n = Tape::new()
        .checked()
        .try_value_and_grad(nested, &x)
        .unwrap_err();
    assert_eq!(
        (n.primitive.as_str(), n.position),
        (e.primitive.as_str(), e.position)
    );
    // The first bad value in program order: one before the region is reported, not the
    // region's; the region's, not one after it.
    let before = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| (v[1] - 2.0).ln() + region(v), &x)
        .unwrap_err();
    assert_eq!(
        (before.primitive.as_str(), before.value),
        ("Ln", f64::NEG_INFINITY)
    );
    let after = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| region(v) + (v[1] - 2.0).ln(), &x)
        .unwrap_err();
    assert_eq!(
        after.primitive, "Ln inside a checkpointed region",
        "{after}"
    );
    // In parallel jobs: the job numbered in program order, for any thread count.
    for threads in [1, 2, 4] {
        let p = in_pool(threads, || {
            Tape::new()
                .checked()
                .try_value_and_grad(
                    |v: &[Var]| {
                        let (a, b) = join(|| v[0] * v[1], || region(v));
                        a + b
                    },
                    &x,
                )
                .unwrap_err()
        });
        assert_eq!(
            p.primitive, "Ln inside a checkpointed region",
            "{threads} threads: {p}"
        );
        assert_eq!(p.job, 2, "{threads} threads: {p}");
    }
    // Unchecked, and checked where nothing is wrong: the gradient of the plain program.
    let (_, g) = value_and_grad(|v: &[Var]| f(v), &x);
    assert_eq!(value_and_grad(region, &x).1, g);
    let y = [2.5, 2.0];
    let (_, gy) = value_and_grad(|v: &[Var]| f(v), &y);
    assert_eq!(
        Tape::new()
            .checked()
            .try_value_and_grad(nested, &y)
            .unwrap()
            .1,
        gy
    );
}

#[test]
fn checked_mode_sees_the_reverse_pass_inside_a_checkpoint() {
    // √x₀ · x₁ at (0, 2): the partial ∞ meets the adjoint 2. Without a checkpoint this was
    // reported; inside one the recomputation ran unchecked and returned the gradient [∞, 0].
    let f_plain = |v: &[Var]| v[0].sqrt() * v[1];
    let plain = Tape::new()
        .checked()
        .try_value_and_grad(f_plain, &[0.0, 2.0])
        .unwrap_err();
    assert_eq!(plain.primitive, "Sqrt");
    let e = Tape::new()
        .checked()
        .try_value_and_grad(
            |v: &[Var]| checkpoint(v, |s| vec![s[0].sqrt() * s[1]])[0],
            &[0.0, 2.0],
        )
        .unwrap_err();
    assert_eq!(e.pass, plain.pass);
    assert_eq!(e.primitive, "Sqrt inside a checkpointed region", "{e}");
    assert_eq!(e.operands[0], f64::INFINITY, "{e}");
    // unchecked, the same program runs (the documented ∞ partial)
    let (_, g) = Tape::new().value_and_grad(
        |v: &[Var]| checkpoint(v, |s| vec![s[0].sqrt() * s[1]])[0],
        &[0.0, 2.0],
    );
    assert_eq!(g[0], f64::INFINITY);
}

/// Second derivatives whose factors underflow or overflow alone (a hunter): `atan`'s partial
/// `1/(x² + 1)` went through `recip`'s partial `−1/(x²)²` (0 beyond ~1e80), and `powf`'s
/// `y (y − 1) x^(y−2)` through `x^(y−2)` (−∞ at a tiny y). Closed forms and mpmath.
#[test]
fn hessians_whose_factors_leave_the_range_alone() {
    for (x, want) in [
        (1e80, -2e-240),
        (1e90, -2e-270),
        (1e100, -2e-300),
        (3.0, -0.06),
    ] {
        let h = adjoint_tape::hessian(|v| v[0].atan(), &[x])[0][0];
        assert!(
            (h - want).abs() <= 1e-14 * want.abs(),
            "atan at {x:e}: {h:e}"
        );
    }
    #[allow(clippy::excessive_precision)]
    let want = -9.999999999999999963058638512095269123955e299;
    let h = adjoint_tape::hessian(|v| v[0].powf(v[1]), &[1e-160, 1e-20]);
    assert!((h[0][0] - want).abs() <= 1e-14 * -want, "{h:?}");
    let h = adjoint_tape::hessian(|v| v[0].powf(1e-20), &[1e-160]);
    assert!((h[0][0] - want).abs() <= 1e-14 * -want, "{h:?}");
    // At a subnormal x the tape divided by x in that form: NaN where forward mode gives −∞
    // (the true value overflows) or the right number (a reviewer).
    for (x, y) in [(1e-309, 0.999), (1e-320, 0.99), (1e-310, 0.5)] {
        let h = adjoint_tape::hessian(|v| v[0].powf(y), &[x])[0][0];
        let f = forward::hessian(|v| v[0].powf(y), &[x])[0][0];
        assert!(
            !h.is_nan() && h == f,
            "({x:e}, {y}): tape {h:e}, forward {f:e}"
        );
    }
}

/// `hypot`'s Hessian with one argument much larger (forward over reverse differentiates the
/// rule's unit vector, whose `x/h` form cancelled: 2e-6 relative off at (1e5, 1), 0 past 1e8;
/// a hunter), against the closed form `[[y², −xy], [−xy, x²]] / h³`.
#[test]
fn hypot_hessian_with_one_argument_much_larger() {
    for (a, b) in [(1e5, 1.0), (1.1e8, -1.0), (-20.0, 1.0), (1.0, 3e9)] {
        let h = adjoint_tape::hessian(|v| v[0].hypot(v[1]), &[a, b]);
        let r = f64::hypot(a, b);
        let (ua, ub) = (a / r, b / r);
        let want = [[ub * ub / r, -ua * ub / r], [-ua * ub / r, ua * ua / r]];
        for i in 0..2 {
            for j in 0..2 {
                let (got, w) = (h[i][j], want[i][j]);
                assert!(
                    (got - w).abs() <= 1e-14 * w.abs(),
                    "({a}, {b}) H[{i}][{j}]: {got:e} vs {w:e}"
                );
            }
        }
    }
}

/// Checked mode records each outermost checkpointed region once more, whole, with the regions
/// nested in it inline. That "inline" was a flag of the thread, so a thread waiting in a `join`
/// inside such a recording stole pending work of the outer (or another) recording, and that
/// work's checkpoints ran inline too: the gradient's last bits and the tape's size depended on
/// scheduling (7 of 100 runs differed at 4 threads, the tape grew from ~500 to ~200 000 entries;
/// a hunter). Now the inline decision belongs to the check recording: same bits and the same
/// tape at 1 and at 7 threads, run after run, checked and unchecked side by side.
#[test]
fn checked_checkpoints_are_deterministic_across_threads() {
    fn heavy(a: Var, b: Var) -> Var {
        let mut t = a;
        for _ in 0..3000 {
            t = (t * 0.999).sin() + b * 1e-3;
        }
        t
    }
    fn region(s: &[Var]) -> Vec<Var> {
        let (a, b) = join(|| heavy(s[0], s[1]), || heavy(s[1], s[0]));
        vec![a, b]
    }
    let f = |x: &[Var]| -> Var {
        par_map(x, |&x| {
            let o = checkpoint(&[x, x * 0.5], region);
            o[0] * o[1]
        })
        .into_iter()
        .sum()
    };
    let x: Vec<f64> = (0..64).map(|i| 0.1 + 0.013 * i as f64).collect();
    let run = |threads: usize, checked: bool| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut tape = if checked {
                Tape::new().checked()
            } else {
                Tape::new()
            };
            let (v, g) = tape.try_value_and_grad(f, &x).expect("finite");
            (
                v.to_bits(),
                g.iter().map(|g| g.to_bits()).collect::<Vec<_>>(),
                tape.entries(),
            )
        })
    };
    let want = run(1, false);
    assert!(
        want.2 < 2000,
        "checkpoints keep the tape small: {} entries",
        want.2
    );
    assert_eq!(run(1, true), want, "checked, 1 thread");
    for _ in 0..12 {
        assert_eq!(run(7, true), want, "checked, 7 threads");
        assert_eq!(run(4, false), want, "unchecked, 4 threads");
    }
    // A checked and an unchecked recording at once in one pool.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    for _ in 0..6 {
        let (a, b) = pool.install(|| {
            rayon::join(
                || {
                    let mut t = Tape::new().checked();
                    let (v, g) = t.try_value_and_grad(f, &x).expect("finite");
                    (
                        v.to_bits(),
                        g.iter().map(|g| g.to_bits()).collect::<Vec<_>>(),
                        t.entries(),
                    )
                },
                || {
                    let mut t = Tape::new();
                    let (v, g) = t.value_and_grad(f, &x);
                    (
                        v.to_bits(),
                        g.iter().map(|g| g.to_bits()).collect::<Vec<_>>(),
                        t.entries(),
                    )
                },
            )
        });
        assert_eq!(a, want, "checked beside unchecked");
        assert_eq!(b, want, "unchecked beside checked");
    }
}
