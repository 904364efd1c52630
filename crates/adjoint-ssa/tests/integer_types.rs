//! Integer variables get the type Rust gives them (a hunter): a variable is one type across its
//! assignments (`let mut k = 3; let w = k * 1_000_000_000; k = m;` makes `k` and `w` `u64` for
//! `m: u64`), and a typed `let` that only copies a value after a loop (`let total: usize = n;`)
//! types the loop's variable. Both were `i32` in the generated code: in release builds the
//! value and gradient wrapped silently (−1454759936 for 2e12), in debug builds they panicked
//! where the function as written does not. Values against the functions as written, gradients
//! against forward mode on the same functions written over `Dual`.

use adjoint_core::forward;
use adjoint_core::Real;
use adjoint_ssa::differentiable;

#[differentiable]
fn powers_of_ten(x: &[f64], m: usize) -> f64 {
    let mut n = 1;
    for _ in 0..m {
        n *= 10;
    }
    let total: usize = n;
    x[0] * total as f64
}

fn powers_of_ten_t<T: Real>(x: &[T], m: usize) -> T {
    let mut n = 1;
    for _ in 0..m {
        n *= 10;
    }
    let total: usize = n;
    x[0] * total as f64
}

#[differentiable]
fn reassigned(x: &[f64], m: u64) -> f64 {
    let mut k = 3;
    let w = k * 1_000_000_000;
    k = m;
    x[0] * (w as f64) + x[1] * (k as f64)
}

fn reassigned_t<T: Real>(x: &[T], m: u64) -> T {
    let mut k = 3;
    let w = k * 1_000_000_000;
    k = m;
    x[0] * (w as f64) + x[1] * (k as f64)
}

#[differentiable]
fn power(x: &[f64], k: u64) -> f64 {
    x[0].powi(k as i32)
}

/// A typed copy of a counted-up integer passed on to a call (was refused, its message asking
/// for the `let k: u64 = …;` already written).
#[differentiable]
fn typed_copy_to_call(x: &[f64], m: usize) -> f64 {
    let mut n = 0;
    for _ in 0..m {
        n += 1;
    }
    let k: u64 = n;
    power(x, k)
}

/// A literal out of `i32`'s range with a variable later assigned a `usize` (was "literal out
/// of range for `i32`").
#[differentiable]
fn wide_literal(x: &[f64], n: usize) -> f64 {
    let mut k = 0;
    let b = k + 3_000_000_000;
    k = n;
    x[0] * b as f64 + x[0] * k as f64
}

/// The message of a caught panic.
fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or(e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn integer_variables_keep_rust_s_types() {
    let x = [2.0];
    let mut g = [0.0];
    let v = powers_of_ten::grad(&x, 12, &mut g);
    assert_eq!(v, powers_of_ten_t(&x, 12));
    assert_eq!(v, 2e12);
    let gf = forward::gradient(|x| powers_of_ten_t(x, 12), &x);
    assert_eq!(g[0], gf[0]);

    let x = [0.1, 0.2];
    let mut g = [0.0; 2];
    let v = reassigned::grad(&x, 5, &mut g);
    assert!(close(v, reassigned_t(&x, 5)), "{v}");
    let gf = forward::gradient(|x| reassigned_t(x, 5), &x);
    assert_eq!(g, [gf[0], gf[1]]);
    assert_eq!(g, [3e9, 5.0]);

    let x = [2.0];
    let mut g = [0.0];
    let v = typed_copy_to_call::grad(&x, 3, &mut g);
    assert_eq!((v, g[0]), (8.0, 12.0));

    let mut g = [0.0];
    let v = wide_literal::grad(&[1.0], 4, &mut g);
    assert_eq!((v, g[0]), (3_000_000_004.0, 3_000_000_004.0));
}

#[differentiable]
fn tail(x: &[f64], hi: u64) -> f64 {
    let mut s = 0.0;
    for k in hi - 3..=hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    s
}

fn tail_t<T: Real>(x: &[T], hi: u64) -> T {
    let mut s = T::zero();
    for k in hi - 3..=hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    s
}

#[test]
fn inclusive_ranges_of_64_bit_types() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let mut g = [0.0; 4];
    let v = tail::grad(&x, 1000, &mut g);
    assert_eq!(v, tail_t(&x, 1000));
    let gf = forward::gradient(|x| tail_t(x, 1000), &x);
    assert_eq!(g.to_vec(), gf);
    // Ending at u64::MAX: a panic saying so (it counted nothing, and the gradient was 0, in
    // release builds; a hunter).
    let r = std::panic::catch_unwind(|| {
        let mut g = [0.0; 4];
        tail::grad(&x, u64::MAX, &mut g)
    });
    let msg = panic_message(r.unwrap_err());
    assert!(msg.contains("u64::MAX"), "{msg}");
}

#[differentiable]
fn stepped(x: &[f64], k: usize) -> f64 {
    let mut s = 0.0;
    for i in (0..x.len()).step_by(k) {
        s += x[i] * x[i];
    }
    s
}

#[test]
fn a_range_stepped_by_zero_panics_with_rust_s_message() {
    let x = [1.0, 2.0, 3.0];
    let mut g = [0.0; 3];
    assert_eq!(stepped::grad(&x, 2, &mut g), 10.0);
    assert_eq!(g, [2.0, 0.0, 6.0]);
    let r = std::panic::catch_unwind(|| {
        let mut g = [0.0; 3];
        stepped::grad(&[1.0, 2.0, 3.0], 0, &mut g)
    });
    let msg = panic_message(r.unwrap_err());
    assert!(msg.contains("step != 0"), "{msg}");
}

/// An inclusive range over a variable whose type is still open where the range is lowered and
/// becomes `i8` later (`k = t`): `127 + 1` overflowed in `i8` (the reviewer of this change).
#[differentiable]
fn narrow_later(x: &[f64], t: i8) -> f64 {
    let mut k = 0;
    let mut s = 0.0;
    for i in k..=k + 127 {
        s += x[0] * (i as f64);
    }
    k = t;
    s + x[1] * k as f64
}

fn narrow_later_t<T: Real>(x: &[T], t: i8) -> T {
    let mut k = 0;
    let mut s = T::zero();
    for i in k..=k + 127 {
        s += x[0] * (i as f64);
    }
    k = t;
    s + x[1] * k as f64
}

/// A typed `let` of an element loaded twice (the second load merged into the first).
#[differentiable]
fn merged_load(x: &[f64], j: usize) -> f64 {
    let v = [3, 4];
    let p = v[j] * 1_000_000;
    let q: u64 = v[j];
    x[0] * (p * 1000) as f64 + x[1] * q as f64
}

fn merged_load_t<T: Real>(x: &[T], j: usize) -> T {
    let v = [3, 4];
    let p = v[j] * 1_000_000;
    let q: u64 = v[j];
    x[0] * (p * 1000) as f64 + x[1] * q as f64
}

#[test]
fn types_decided_after_the_range_or_by_a_merged_load() {
    let x = [1.0, 1.0];
    let mut g = [0.0; 2];
    let v = narrow_later::grad(&x, 3, &mut g);
    assert_eq!(v, narrow_later_t(&x, 3));
    assert_eq!(g.to_vec(), forward::gradient(|x| narrow_later_t(x, 3), &x));
    let mut g = [0.0; 2];
    let v = merged_load::grad(&x, 1, &mut g);
    assert_eq!(v, merged_load_t(&x, 1));
    assert_eq!(v, 4_000_000_004.0);
    assert_eq!(g.to_vec(), forward::gradient(|x| merged_load_t(x, 1), &x));
}

/// A typed tuple `let` types its integer members (the reviewer: `k` stayed an `i32`).
#[differentiable]
fn tuple_typed(x: &[f64]) -> f64 {
    let k = 3;
    let w = k * 1_000_000_000;
    let (a, b): (u64, f64) = (k, 2.0);
    x[0] * w as f64 + x[1] * a as f64 * b
}

fn tuple_typed_t<T: Real>(x: &[T]) -> T {
    let k = 3;
    let w = k * 1_000_000_000;
    let (a, b): (u64, f64) = (k, 2.0);
    x[0] * w as f64 + x[1] * a as f64 * b
}

#[test]
fn a_typed_tuple_let_types_its_members() {
    let x = [1.0, 1.0];
    let mut g = [0.0; 2];
    let v = tuple_typed::grad(&x, &mut g);
    assert_eq!(v, tuple_typed_t(&x));
    assert_eq!(v, 3_000_000_006.0);
    assert_eq!(g.to_vec(), forward::gradient(|x| tuple_typed_t(x), &x));
}

/// Range bounds whose type is still open where the range is lowered and that a later use makes
/// `u64` (`hi = m` after the loops). Where the loop variable does not meet that use, the ranges
/// were counted in `i64`: from 2⁶³ the loops silently ran no iteration (10.5 for 10.9375), and
/// an inclusive range ending at `i64::MAX` overflowed. Now such a bound is converted with a
/// check that panics saying so (documented); where the loop variable meets it (`hi - k`), the
/// counter is a `u64` and counts right up to `u64::MAX − 1`.
#[differentiable]
fn open_bound_later_u64(x: &[f64], e: u32, minus_one: bool, m: u64) -> f64 {
    let mut hi = 1;
    for _ in 0..e {
        hi *= 2;
    }
    if minus_one {
        hi -= 1;
    }
    let mut s = 0.0;
    for k in hi - 2..hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    for k in hi - 2..=hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    for _ in hi - 2..hi {
        s = s * 0.5 + x[1];
    }
    for _ in hi - 2..=hi {
        s = s * 0.5 + x[2];
    }
    hi = m;
    s + x[0] * hi as f64
}

fn open_bound_later_u64_t<T: Real>(x: &[T], e: u32, minus_one: bool, m: u64) -> T {
    let mut hi = 1;
    for _ in 0..e {
        hi *= 2;
    }
    if minus_one {
        hi -= 1;
    }
    let mut s = T::zero();
    for k in hi - 2..hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    for k in hi - 2..=hi {
        s = s * 0.5 + x[(hi - k) as usize];
    }
    for _ in hi - 2..hi {
        s = s * 0.5 + x[1];
    }
    for _ in hi - 2..=hi {
        s = s * 0.5 + x[2];
    }
    hi = m;
    s + x[0] * hi as f64
}

#[test]
fn open_bounds_later_u64_count_or_panic() {
    let x = [1.0, 2.0, 3.0];
    for (e, minus_one) in [(3, false), (40, true), (62, false), (63, true), (63, false)] {
        let expect = open_bound_later_u64_t(&x, e, minus_one, 7);
        let r = std::panic::catch_unwind(|| {
            let mut g = [0.0; 3];
            let v = open_bound_later_u64::grad(&x, e, minus_one, 7, &mut g);
            (v, g)
        });
        if e < 63 {
            let (v, g) = r.unwrap();
            assert_eq!(v, expect, "2^{e}");
            let gf = forward::gradient(|x| open_bound_later_u64_t(x, e, minus_one, 7), &x);
            assert_eq!(g.to_vec(), gf, "2^{e}");
        } else {
            // 2⁶³ does not fit the `i64` counter; 2⁶³ − 1 = i64::MAX ends an inclusive range
            let msg = panic_message(r.expect_err("a bound beyond i64 must panic"));
            assert!(msg.contains("`i64`") && msg.contains("declare"), "{msg}");
        }
    }
}
