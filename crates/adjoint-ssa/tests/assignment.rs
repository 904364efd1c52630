//! Destructuring assignment, `(a, b) = (b, a + b);`, as recurrences and swaps are written, and
//! local arrays assigned whole (`v = [v[1], v[0]];`): the whole right side is evaluated before
//! any place is assigned. Variables declared without a value (`let y;`) and assigned later; a
//! `loop`'s value (`let r = loop { … break v; };`). Each gradient against forward mode over the user function written
//! generically, each value against the function as written.

// (`let y;` assigned in branches is the spelling under test.)
#![allow(
    clippy::needless_range_loop,
    clippy::needless_late_init,
    clippy::never_loop
)]

use adjoint_core::forward::{self, Dual, Dual2};
use adjoint_core::Real;
use adjoint_ssa::{differentiable, Workspace};

mod common;
use common::check_slice;

/// A two-term recurrence carried through a loop.
#[differentiable]
fn recurrence(x: &[f64]) -> f64 {
    let (mut a, mut b) = (x[0], x[1]);
    for i in 2..x.len() {
        (a, b) = (b, a * 0.5 + b * x[i]);
    }
    a + b.sin()
}
fn recurrence_ref<T: Real>(x: &[T]) -> T {
    let (mut a, mut b) = (x[0], x[1]);
    for i in 2..x.len() {
        (a, b) = (b, a * 0.5 + b * x[i]);
    }
    a + b.sin()
}

/// Swaps of array elements and of a variable with an element, `_` and a nested tuple, and
/// integers carried beside the numbers.
#[differentiable]
fn swaps(x: &[f64]) -> f64 {
    let mut v = [x[0], x[1], x[2]];
    (v[0], v[2]) = (v[2] * x[3], v[0]);
    let mut s = 0.0;
    let mut t = 1.0;
    (s, (t, _)) = (v[0] * v[1], (t * v[2], s + 1.0));
    (t, v[1]) = (v[1], t);
    let (mut i, mut j) = (0, 1);
    for _ in 0..4 {
        s += x[i] * x[j];
        (i, j) = (j, (i + j) % 4);
    }
    s + t * v[1] + v[2]
}
fn swaps_ref<T: Real>(x: &[T]) -> T {
    let mut v = [x[0], x[1], x[2]];
    (v[0], v[2]) = (v[2] * x[3], v[0]);
    let mut s = T::zero();
    let mut t = T::one();
    (s, (t, _)) = (v[0] * v[1], (t * v[2], s + 1.0));
    (t, v[1]) = (v[1], t);
    let (mut i, mut j) = (0, 1);
    for _ in 0..4 {
        s += x[i] * x[j];
        (i, j) = (j, (i + j) % 4);
    }
    s + t * v[1] + v[2]
}

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    (r * t.cos(), r * t.sin())
}
fn polar_ref<T: Real>(r: T, t: T) -> (T, T) {
    (r * t.cos(), r * t.sin())
}

/// A call's tuple result assigned to existing variables, in a loop.
#[differentiable]
fn rotations(x: &[f64]) -> f64 {
    let (mut c, mut s) = (x[0], x[1]);
    for i in 2..x.len() {
        (c, s) = polar(c + s, x[i]);
    }
    c * s
}
fn rotations_ref<T: Real>(x: &[T]) -> T {
    let (mut c, mut s) = (x[0], x[1]);
    for i in 2..x.len() {
        (c, s) = polar_ref(c + s, x[i]);
    }
    c * s
}

/// A local array assigned whole, from a literal that reads its old elements and from another
/// array, in a loop; an integer array too.
#[differentiable]
fn arrays(x: &[f64]) -> f64 {
    let mut v = [x[0], x[1], x[2]];
    let mut idx = [0usize, 2];
    let mut s = 0.0;
    for i in 0..x.len() {
        v = [v[1] * x[i], v[2], v[0] + x[i]];
        idx = [idx[1], idx[0]];
        s += v[0] * v[2] + x[idx[0]];
    }
    let w = [s, s * s, v[1]];
    v = w;
    s + v[1] + v[2].sin() + w[0]
}
fn arrays_ref<T: Real>(x: &[T]) -> T {
    let mut v = [x[0], x[1], x[2]];
    let mut idx = [0usize, 2];
    let mut s = T::zero();
    for i in 0..x.len() {
        v = [v[1] * x[i], v[2], v[0] + x[i]];
        idx = [idx[1], idx[0]];
        s += v[0] * v[2] + x[idx[0]];
    }
    let w = [s, s * s, v[1]];
    v = w;
    s + v[1] + v[2].sin() + w[0]
}

/// Variables declared without a value and assigned on every path that reads them.
#[differentiable]
fn deferred(x: &[f64]) -> f64 {
    let y;
    if x[0] > 0.0 {
        y = x[0].sin();
    } else {
        y = x[1] * x[0];
    }
    let k: usize;
    let z: f64;
    if x[1] < 0.0 {
        k = 2;
        z = x[2].exp();
    } else {
        k = 3;
        z = x[3] * 2.0;
    }
    let mut s = y * z + x[k];
    let w;
    loop {
        w = s * x[4];
        break;
    }
    s += w;
    for i in 0..x.len() {
        let t;
        if i % 2 == 0 {
            t = x[i] * s;
        } else {
            t = x[i].cos();
        }
        s += t;
    }
    s
}
fn deferred_ref<T: Real>(x: &[T]) -> T {
    let y;
    if x[0] > 0.0 {
        y = x[0].sin();
    } else {
        y = x[1] * x[0];
    }
    let k: usize;
    let z: T;
    if x[1] < 0.0 {
        k = 2;
        z = x[2].exp();
    } else {
        k = 3;
        z = x[3] * 2.0;
    }
    let mut s = y * z + x[k];
    let w;
    loop {
        w = s * x[4];
        break;
    }
    s += w;
    for i in 0..x.len() {
        let t;
        if i % 2 == 0 {
            t = x[i] * s;
        } else {
            t = x[i].cos();
        }
        s += t;
    }
    s
}

#[test]
fn deferred_initialisation_matches_forward_mode() {
    // both sides of each branch
    for x in [
        [0.3, -0.7, 1.1, 0.4, -0.2, 0.9],
        [-0.3, 0.7, 1.1, 0.4, -0.2, 0.9],
    ] {
        check_slice("deferred", &x, deferred::grad, deferred, deferred_ref);
    }
}

/// A `loop`'s value (`break value`): Newton's square root, and an index found by a labelled
/// `break` from an inner `for`.
#[differentiable]
fn loop_values(x: &[f64]) -> f64 {
    let a = x[0] * x[0] + 1.0;
    let mut y = a;
    let mut it = 0;
    let r = loop {
        let next = 0.5 * (y + a / y);
        it += 1;
        if (next - y).abs() < 1e-12 || it == 50 {
            break next * x[1];
        }
        y = next;
    };
    let k: usize = 'outer: loop {
        for i in 0..x.len() {
            if x[i] > 1.0 {
                break 'outer i;
            }
        }
        break 0;
    };
    r + x[k] * 2.0
}
fn loop_values_ref<T: Real>(x: &[T]) -> T {
    let a = x[0] * x[0] + 1.0;
    let mut y = a;
    let mut it = 0;
    let r = loop {
        let next = (y + a / y) * 0.5;
        it += 1;
        if (next - y).abs() < 1e-12 || it == 50 {
            break next * x[1];
        }
        y = next;
    };
    let k: usize = 'outer: loop {
        for i in 0..x.len() {
            if x[i] > 1.0 {
                break 'outer i;
            }
        }
        break 0;
    };
    r + x[k] * 2.0
}

#[test]
fn loop_values_match_forward_mode() {
    for x in [
        [0.3, -0.7, 1.1, 0.4],
        [2.3, -0.7, 0.1, 0.4],
        [0.3, -0.7, 0.1, 0.4],
    ] {
        check_slice(
            "loop_values",
            &x,
            loop_values::grad,
            loop_values,
            loop_values_ref,
        );
    }
}

/// Rust evaluates the right side of an assignment before the place (`v[i] = { i += 2; … }`
/// stores at the new `i`) and, for numbers, before reading the target of `+=`.
#[differentiable]
fn right_side_first(x: &[f64]) -> f64 {
    let mut v = [0.0; 6];
    let mut i = 0;
    v[i] = loop {
        i += 1;
        if x[i] > 0.0 {
            break x[i] * 3.0;
        }
    };
    let mut j = 0;
    v[j] = {
        j += 3;
        x[j] * x[0]
    };
    let mut s = x[0];
    s += loop {
        s *= x[1];
        break s + 1.0;
    };
    v[0] + 2.0 * v[1] + 5.0 * v[2] + 7.0 * v[3] + s
}
fn right_side_first_ref<T: Real>(x: &[T]) -> T {
    let mut v = [T::zero(); 6];
    let mut i = 0;
    v[i] = loop {
        i += 1;
        if x[i] > 0.0 {
            break x[i] * 3.0;
        }
    };
    let mut j = 0;
    v[j] = {
        j += 3;
        x[j] * x[0]
    };
    let mut s = x[0];
    // (for `f64`, `s += loop { … }` runs the loop first; written out, as `T` is no primitive)
    let r = loop {
        s *= x[1];
        break s + 1.0;
    };
    s += r;
    v[0] + v[1] * 2.0 + v[2] * 5.0 + v[3] * 7.0 + s
}

/// Arrays in tuple literals are copies (`(a, k)`, `(p, k)` for `p: [f64; 3]`), references in
/// them name the array itself (`(&mut a, k)`).
#[differentiable]
fn tuple_arrays(x: &[f64]) -> f64 {
    let mut a = [x[0], x[1], x[2]];
    let (mut b, t) = (a, x[3]);
    b[0] = x[0] * t;
    let s = a[0] + b[0] * a[1];
    let (r, u) = (&mut a, x[4]);
    r[1] = u * x[2];
    s + a[1] + b[1]
}
fn tuple_arrays_ref<T: Real>(x: &[T]) -> T {
    let mut a = [x[0], x[1], x[2]];
    let (mut b, t) = (a, x[3]);
    b[0] = x[0] * t;
    let s = a[0] + b[0] * a[1];
    let (r, u) = (&mut a, x[4]);
    r[1] = u * x[2];
    s + a[1] + b[1]
}

#[test]
fn evaluation_order_and_tuple_copies_match_forward_mode() {
    for x in [
        [0.3, -0.7, 1.1, 0.4, -0.2, 0.9],
        [0.3, 0.7, -1.1, 0.4, -0.2, 0.9],
    ] {
        check_slice(
            "right_side_first",
            &x,
            right_side_first::grad,
            right_side_first,
            right_side_first_ref,
        );
        check_slice(
            "tuple_arrays",
            &x,
            tuple_arrays::grad,
            tuple_arrays,
            tuple_arrays_ref,
        );
    }
}

#[differentiable]
fn spin(v: &[f64; 3], t: f64) -> [f64; 3] {
    [
        v[0] * t.cos() - v[1] * t.sin(),
        v[0] * t.sin() + v[1] * t.cos(),
        v[2] * t,
    ]
}
fn spin_ref<T: Real>(v: &[T; 3], t: T) -> [T; 3] {
    [
        v[0] * t.cos() - v[1] * t.sin(),
        v[0] * t.sin() + v[1] * t.cos(),
        v[2] * t,
    ]
}

/// A call's array result assigned to an existing array that its arguments read.
#[differentiable]
fn spun(x: &[f64]) -> f64 {
    let mut v = [x[0], x[1], x[2]];
    for i in 3..x.len() {
        v = spin(&v, x[i]);
    }
    v[0] * v[1] + v[2]
}
fn spun_ref<T: Real>(x: &[T]) -> T {
    let mut v = [x[0], x[1], x[2]];
    for i in 3..x.len() {
        v = spin_ref(&v, x[i]);
    }
    v[0] * v[1] + v[2]
}

#[test]
fn array_results_assigned_match_forward_mode() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2, 0.9];
    check_slice("spun", &x, spun::grad, spun, spun_ref);
    check_hvp("spun", &x, spun::pullback, spun_ref);
}

#[test]
fn destructuring_assignment_matches_forward_mode() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2, 0.9];
    check_slice(
        "recurrence",
        &x,
        recurrence::grad,
        recurrence,
        recurrence_ref,
    );
    check_slice("swaps", &x, swaps::grad, swaps, swaps_ref);
    check_slice("rotations", &x, rotations::grad, rotations, rotations_ref);
    check_slice("arrays", &x, arrays::grad, arrays, arrays_ref);
}

type PullbackAtDual =
    fn(&mut Workspace<Dual<f64>>, &[Dual<f64>], &mut [Dual<f64>], Dual<f64>) -> Dual<f64>;

/// Forward over reverse: the pullback at `Dual` along each direction `e_j` against column `j`
/// of the Hessian of the generic reference by forward mode.
fn check_hvp(name: &str, x: &[f64], pullback: PullbackAtDual, reference: fn(&[Dual2]) -> Dual2) {
    let h = forward::hessian(reference, x);
    let mut ws = Workspace::new();
    for j in 0..x.len() {
        let xd: Vec<Dual<f64>> = (0..x.len())
            .map(|i| Dual::new(x[i], if i == j { 1.0 } else { 0.0 }))
            .collect();
        let mut d = vec![Dual::new(0.0, 0.0); x.len()];
        pullback(&mut ws, &xd, &mut d, Dual::new(1.0, 0.0));
        let got: Vec<f64> = d.iter().map(|v| v.eps).collect();
        let want: Vec<f64> = (0..x.len()).map(|i| h[i][j]).collect();
        common::check(&format!("{name} hvp e{j}"), &got, &want);
    }
}

#[test]
fn hessian_vector_products_through_the_new_spellings() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2, 0.9];
    check_hvp("recurrence", &x, recurrence::pullback, recurrence_ref);
    check_hvp("swaps", &x, swaps::pullback, swaps_ref);
    check_hvp("rotations", &x, rotations::pullback, rotations_ref);
    check_hvp("arrays", &x, arrays::pullback, arrays_ref);
    check_hvp("deferred", &x, deferred::pullback, deferred_ref);
    check_hvp(
        "loop_values",
        &x[..4],
        loop_values::pullback,
        loop_values_ref,
    );
}
