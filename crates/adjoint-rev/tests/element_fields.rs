//! Fields of one element of a collection as the arguments of one call (`f(v[i].0, v[i].1)`):
//! the same index on the same path, then different fields, so never the same storage. They are
//! borrowed directly through one borrow of the element (`let e = &mut v[i]; f(&mut e.0, &mut
//! e.1)`), whatever their type; only places that may be the same element at run time (`v[0]`
//! beside `v[j]`) are copied in and out, after a run-time check, and must be `Copy`. Two `Vec`
//! fields of one element failed to compile after the copy rule ("`Vec<T>` is passed where
//! another argument may be the same element"; they compiled before it for arrays). Values,
//! inverses, checked-mode errors and gradients (against central differences) below.

use adjoint_core::check::check_gradient;
use adjoint_rev::prelude::*;
use adjoint_rev::{grad, value_and_grad_unchecked, Reversible};

type R = Result<(), InvertibilityError>;
/// Elements whose first field is a pair of `Vec`s.
type Nested<T> = Vec<((Vec<T>, Vec<T>), Vec<T>)>;

reversible! {
    /// `y[k] += x[k]²` for every `k`.
    fn add_squares<T: RevReal>(y: &mut Vec<T>, x: &mut Vec<T>) {
        for k in 0..y.len() {
            y[k] += x[k] * x[k];
        }
    }
    /// `y[k] += x[k]·w[k]` for every `k` (`w` only read).
    fn add_products<T: RevReal>(y: &mut Vec<T>, x: &mut Vec<T>, w: &mut Vec<T>) {
        for k in 0..y.len() {
            y[k] += x[k] * w[k];
        }
    }
    /// `a += b²`.
    fn add_square<T: RevReal>(a: &mut T, b: &mut T) {
        a += b * b;
    }
    /// `y[k] += x[k]² + c·d` (`c`, `d` numbers that may be the same element).
    fn add_squares_and<T: RevReal>(y: &mut Vec<T>, x: &mut Vec<T>, c: &mut T, d: &mut T) {
        for k in 0..y.len() {
            y[k] += x[k] * x[k];
        }
        c += d * d;
    }
    /// `y[0] += 1` where `y[0]` is positive, and the post-condition says `y[0] > 2` then: a
    /// checked-mode error where `0 < y[0] <= 1`.
    fn bump_positive<T: RevReal>(y: &mut Vec<T>, x: &mut Vec<T>) {
        if (y[0] > 0.0, y[0] > 2.0) {
            y[0] += T::one();
        }
        y[0] += x[0];
    }

    /// The two `Vec` fields of each element of a `Vec`, one call per element.
    fn rows_of_a_vec<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>) {
        for i in 0..v.len() {
            add_squares(v[i].0, v[i].1);
        }
    }
    /// The same on an array, fields in the other order, at a computed index that reads a
    /// parameter (evaluated once, before the element is borrowed).
    fn rows_of_an_array<T: RevReal>(a: &mut [(Vec<T>, Vec<T>); 2], i: &mut usize) {
        add_squares(a[1 - i].1, a[1 - i].0);
    }
    /// An index computed from the collection itself (`v.len() - 1`): read before the element
    /// is borrowed, not inside its borrow.
    fn last_row<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>) {
        add_squares(v[v.len() - 1].0, v[v.len() - 1].1);
    }
    /// Elements of the two fields: `e.0[0]` and `e.1[last]` through one borrow of `v[i]`, the
    /// last index read before it.
    fn ends_of_rows<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>) {
        for i in 0..v.len() {
            add_square(v[i].0[0], v[i].1[v[i].1.len() - 1]);
        }
    }
    /// Fields of fields: `v[i].0.0`, `v[i].0.1` and `v[i].1` (`let e = &mut v[i];` once).
    fn nested_fields<T: RevReal>(v: &mut Nested<T>, i: &mut usize) {
        add_products(v[i].0.0, v[i].0.1, v[i].1);
    }
    /// Fields of one element beside two numbers of a third field that may be the same element
    /// (`v[i].2[0]`, `v[i].2[k]`): those two are copied in and out after the run-time check,
    /// the `Vec` fields borrowed directly.
    fn fields_beside_copies<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>, Vec<T>)>, i: &mut usize, k: &mut usize) {
        add_squares_and(v[i].0, v[i].1, v[i].2[0], v[i].2[k]);
    }
    /// Fields of one element beside a copy of a field of another element that the call
    /// changes where `i == j` (a run-time error then).
    fn fields_beside_a_clone<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>, i: &mut usize, j: &mut usize) {
        add_products(v[i].0, v[i].1, v[j].0.clone());
    }
    /// A checked-mode error inside the callee, reached through the new form.
    fn bump_rows<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>, i: &mut usize) {
        bump_positive(v[i].0, v[i].1);
    }
}

/// The scalars of `d` in `Differentiable` order.
fn flat<D: Differentiable>(d: &D) -> Vec<f64> {
    let mut out = Vec::new();
    let _ = d.wrap(&mut |x| out.push(x));
    out
}

/// The gradient of every output scalar `l` of the call (`grad`, checked, and
/// `value_and_grad_unchecked`) against central differences of `model`, a plain `f64` version of
/// it on the flattened arguments.
fn check_all<A, F>(f: F, args: &A, model: impl Fn(&[f64]) -> Vec<f64>)
where
    A: Differentiable + Clone,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>> + Copy,
{
    let x = flat(args);
    for l in 0..x.len() {
        let g = grad(f, args.clone(), l).unwrap();
        let got = flat(&g);
        check_gradient(|p| model(p)[l], &x, &got).assert_passed();
        let (_, g) = value_and_grad_unchecked(f, args.clone(), l).unwrap();
        assert_eq!(flat(&g), got, "loss {l}: unchecked gradient differs");
    }
}

#[test]
fn vec_fields_of_one_vec_element_are_borrowed_directly() -> R {
    let v0 = vec![
        (vec![0.5, -1.0], vec![1.5, 0.25]),
        (vec![2.0, 0.125], vec![-0.75, 3.0]),
    ];
    let mut v = v0.clone();
    rows_of_a_vec(&mut v)?;
    assert_eq!(v[0].0, [0.5 + 1.5 * 1.5, -1.0 + 0.25 * 0.25]);
    assert_eq!(v[1].0, [2.0 + 0.75 * 0.75, 0.125 + 9.0]);
    assert_eq!((&v[0].1, &v[1].1), (&v0[0].1, &v0[1].1));
    rows_of_a_vec::uncall(&mut v)?;
    assert_eq!(v, v0);
    // scalars: a0 a1 b0 b1 c0 c1 d0 d1 for v = [([a], [b]), ([c], [d])]
    let model = |p: &[f64]| {
        let mut q = p.to_vec();
        for e in [0, 4] {
            for k in 0..2 {
                q[e + k] += p[e + 2 + k] * p[e + 2 + k];
            }
        }
        q
    };
    check_all(rows_of_a_vec {}, &(v0,), model);
    Ok(())
}

#[test]
fn vec_fields_of_one_array_element_at_a_computed_index() -> R {
    let a0 = [
        (vec![0.5f64, -1.0], vec![1.5, 0.25]),
        (vec![2.0, 0.125], vec![-0.75, 3.0]),
    ];
    for i in 0..2usize {
        let mut a = a0.clone();
        rows_of_an_array(&mut a, &mut { i })?;
        let e = 1 - i;
        assert_eq!(
            a[e].1,
            [
                a0[e].1[0] + a0[e].0[0].powi(2),
                a0[e].1[1] + a0[e].0[1].powi(2)
            ]
        );
        assert_eq!((&a[e].0, &a[i]), (&a0[e].0, &a0[i]));
        rows_of_an_array::uncall(&mut a, &mut { i })?;
        assert_eq!(a, a0);
        let model = |p: &[f64]| {
            let mut q = p.to_vec();
            let e = 4 * (1 - i);
            for k in 0..2 {
                q[e + 2 + k] += p[e + k] * p[e + k];
            }
            q
        };
        check_all(rows_of_an_array {}, &(a0.clone(), i), model);
    }
    Ok(())
}

#[test]
fn an_index_computed_from_the_collection_is_read_before_the_borrow() -> R {
    let v0 = vec![
        (vec![0.5, -1.0], vec![1.5, 0.25]),
        (vec![2.0, 0.125], vec![-0.75, 3.0]),
    ];
    let mut v = v0.clone();
    last_row(&mut v)?;
    assert_eq!(v[0], v0[0]);
    assert_eq!(v[1].0, [2.0 + 0.75 * 0.75, 0.125 + 9.0]);
    last_row::uncall(&mut v)?;
    assert_eq!(v, v0);
    let model = |p: &[f64]| {
        let mut q = p.to_vec();
        for k in 0..2 {
            q[4 + k] += p[6 + k] * p[6 + k];
        }
        q
    };
    check_all(last_row {}, &(v0,), model);
    Ok(())
}

#[test]
fn elements_of_two_fields_of_one_element() -> R {
    let v0 = vec![
        (vec![0.5, -1.0], vec![1.5, 0.25, -2.0]),
        (vec![2.0], vec![-0.75]),
    ];
    let mut v = v0.clone();
    ends_of_rows(&mut v)?;
    assert_eq!(v[0].0, [0.5 + 4.0, -1.0]);
    assert_eq!(v[1].0, [2.0 + 0.75 * 0.75]);
    ends_of_rows::uncall(&mut v)?;
    assert_eq!(v, v0);
    // scalars: a0 a1 | b0 b1 b2 | c0 | d0
    let model = |p: &[f64]| {
        let mut q = p.to_vec();
        q[0] += p[4] * p[4];
        q[5] += p[6] * p[6];
        q
    };
    check_all(ends_of_rows {}, &(v0,), model);
    Ok(())
}

#[test]
fn fields_of_fields_of_one_element() -> R {
    let v0 = vec![
        ((vec![0.5, -1.0], vec![1.5, 0.25]), vec![2.0, 0.125]),
        ((vec![-0.75, 3.0], vec![1.0, -2.0]), vec![0.5, 4.0]),
    ];
    for i in 0..2usize {
        let mut v = v0.clone();
        nested_fields(&mut v, &mut { i })?;
        let (y, x, w) = (&v0[i].0 .0, &v0[i].0 .1, &v0[i].1);
        assert_eq!(v[i].0 .0, [y[0] + x[0] * w[0], y[1] + x[1] * w[1]]);
        assert_eq!(v[1 - i], v0[1 - i]);
        nested_fields::uncall(&mut v, &mut { i })?;
        assert_eq!(v, v0);
        let model = |p: &[f64]| {
            let mut q = p.to_vec();
            let e = 6 * i;
            for k in 0..2 {
                q[e + k] += p[e + 2 + k] * p[e + 4 + k];
            }
            q
        };
        check_all(nested_fields {}, &(v0.clone(), i), model);
    }
    Ok(())
}

#[test]
fn fields_beside_numbers_that_may_be_one_element() -> R {
    let v0 = vec![(vec![0.5, -1.0], vec![1.5, 0.25], vec![2.0, 0.125, -3.0])];
    for k in 1..3usize {
        let mut v = v0.clone();
        fields_beside_copies(&mut v, &mut 0, &mut { k })?;
        assert_eq!(v[0].0, [0.5 + 1.5 * 1.5, -1.0 + 0.25 * 0.25]);
        assert_eq!(v[0].2[0], 2.0 + v0[0].2[k] * v0[0].2[k]);
        fields_beside_copies::uncall(&mut v, &mut 0, &mut { k })?;
        assert_eq!(v, v0);
        // scalars: a0 a1 | b0 b1 | c0 c1 c2
        let model = |p: &[f64]| {
            let mut q = p.to_vec();
            q[0] += p[2] * p[2];
            q[1] += p[3] * p[3];
            q[4] += p[4 + k] * p[4 + k];
            q
        };
        check_all(fields_beside_copies {}, &(v0.clone(), 0, k), model);
    }
    // k = 0: `v[i].2[0]` and `v[i].2[k]` are one element, in either direction
    let mut v = v0.clone();
    let e = fields_beside_copies(&mut v, &mut 0, &mut 0).unwrap_err();
    // (the statement as printed: `v[i].2 [0]`, a tuple field's index spaced)
    let msg = e.to_string();
    assert!(
        msg.contains("in `fields_beside_copies`, statement `add_squares_and(v[i].0, v[i].1,")
            && msg.contains("are the same element"),
        "{msg}"
    );
    assert_eq!(v, v0);
    let e = fields_beside_copies::uncall(&mut v, &mut 0, &mut 0).unwrap_err();
    assert!(e.to_string().contains("must not alias"), "{e}");
    assert_eq!(v, v0);
    Ok(())
}

#[test]
fn fields_beside_a_clone_of_another_element() -> R {
    let v0 = vec![
        (vec![0.5, -1.0], vec![1.5, 0.25]),
        (vec![2.0, 0.125], vec![-0.75, 3.0]),
    ];
    for (i, j) in [(0usize, 1usize), (1, 0)] {
        let mut v = v0.clone();
        fields_beside_a_clone(&mut v, &mut { i }, &mut { j })?;
        let (y, x, w) = (&v0[i].0, &v0[i].1, &v0[j].0);
        assert_eq!(v[i].0, [y[0] + x[0] * w[0], y[1] + x[1] * w[1]]);
        fields_beside_a_clone::uncall(&mut v, &mut { i }, &mut { j })?;
        assert_eq!(v, v0);
        // the gradient through the copy reaches v[j].0
        let model = |p: &[f64]| {
            let mut q = p.to_vec();
            let (e, f) = (4 * i, 4 * j);
            for k in 0..2 {
                q[e + k] += p[e + 2 + k] * p[f + k];
            }
            q
        };
        check_all(fields_beside_a_clone {}, &(v0.clone(), i, j), model);
    }
    // i == j: the clone is of what the call changes
    let mut v = v0.clone();
    let e = fields_beside_a_clone(&mut v, &mut 1, &mut 1).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(
            "`v[j].0.clone()` copies what this statement may change through its argument `v[i].0`"
        ),
        "{msg}"
    );
    assert_eq!(v, v0);
    Ok(())
}

#[test]
fn a_callee_s_checked_error_through_fields_of_one_element() -> R {
    let v0 = vec![(vec![1.5], vec![0.25]), (vec![0.5], vec![2.0])];
    // y[0] = 1.5: bumped to 2.5 > 2; call then uncall restores
    let mut v = v0.clone();
    bump_rows(&mut v, &mut 0)?;
    assert_eq!(v[0].0, [1.5 + 1.0 + 0.25]);
    assert_eq!(v[1], v0[1]);
    bump_rows::uncall(&mut v, &mut 0)?;
    assert_eq!(v, v0);
    // y[0] = 0.5: bumped to 1.5, and the post-condition says it was not
    let msg = bump_rows(&mut v0.clone(), &mut 1).unwrap_err().to_string();
    assert!(
        msg.contains("in `bump_positive`, statement `if (y[0] > 0.0, y[0] > 2.0)`")
            && msg.contains("the pre-condition was true but the post-condition is false")
            && msg.contains("y[0] = 1.5"),
        "{msg}"
    );
    // backwards from y[0] = 1.0, x[0] = 0: the post-condition is false, the pre-condition true
    let mut v = vec![(vec![1.0], vec![0.0])];
    let msg = bump_rows::uncall(&mut v, &mut 0).unwrap_err().to_string();
    assert!(
        msg.contains("in `bump_positive` (running backwards)")
            && msg.contains("the post-condition was false but the pre-condition is true"),
        "{msg}"
    );
    Ok(())
}

/// A body of a simulation: named `Vec` fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pos: Vec<f64>,
    vel: Vec<f64>,
}

reversible! {
    /// `pos += vel²` of body `i`, by name.
    fn drift(bs: &mut Vec<Body>, i: &mut usize) {
        add_squares(bs[i].pos, bs[i].vel);
    }
}

#[test]
fn named_vec_fields_of_one_struct_element() -> R {
    let b0 = vec![
        Body {
            pos: vec![0.5, 1.0],
            vel: vec![2.0, -0.5],
        },
        Body {
            pos: vec![-1.0, 0.0],
            vel: vec![0.25, 3.0],
        },
    ];
    let mut bs = b0.clone();
    drift(&mut bs, &mut 1)?;
    assert_eq!(bs[1].pos, [-1.0 + 0.0625, 9.0]);
    assert_eq!((&bs[0], &bs[1].vel), (&b0[0], &b0[1].vel));
    drift::uncall(&mut bs, &mut 1)?;
    assert_eq!(bs, b0);
    Ok(())
}
