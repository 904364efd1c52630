//! Fixed-size arrays, tuples and `#[derive(Differentiable)]` structs as parameters and results;
//! every gradient against forward mode over `primal`, finite differences or a closed form.

#![allow(clippy::needless_range_loop)]

use adjoint_core::forward::{self, Dual};
use adjoint_core::{check, Real};
use adjoint_ssa::{differentiable, Differentiable, Workspace};

type D = Dual<f64>;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs()))
}

fn check_all(name: &str, g: &[f64], want: &[f64]) {
    assert_eq!(g.len(), want.len(), "{name}: lengths");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(close(*a, *b), "{name}[{i}]: {a} vs {b}");
    }
}

fn c(x: f64) -> D {
    Dual::constant(x)
}

fn arr<const N: usize>(v: &[D]) -> [D; N] {
    std::array::from_fn(|i| v[i])
}

// ---- fixed-size arrays ----

const N: usize = 3;

#[differentiable]
fn weighted(x: [f64; 3], w: &[f64; N], k: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += w[i] * x[i].sin() * k;
    }
    let local: [f64; 2] = [x[0] * x[1], k];
    s + local[0] * local[1]
}

#[test]
fn array_parameters() {
    let (x, w, k) = ([0.3, -1.2, 0.8], [1.5, 0.25, -2.0], 0.7);
    let (mut dx, mut dw, mut dk) = ([9.0; 3], [9.0; 3], 9.0); // overwritten by grad
    let v = weighted::grad(x, &w, k, &mut dx, &mut dw, &mut dk);
    assert!(close(v, weighted(x, &w, k)));
    let all = [x[0], x[1], x[2], w[0], w[1], w[2], k];
    let want = forward::gradient(|v| weighted::primal(arr(v), &arr(&v[3..]), v[6]), &all);
    let got: Vec<f64> = dx.iter().chain(&dw).copied().chain([dk]).collect();
    check_all("weighted", &got, &want);
}

/// Array parameters copied into mutable locals (`let mut a = x;`, `let mut b = *w;`), as Rust
/// copies arrays: writing the copies leaves the parameters as they were.
#[differentiable]
fn copied(x: [f64; 3], w: &[f64; N], k: f64) -> f64 {
    let mut a = x;
    let mut b = *w;
    for i in 0..N {
        a[i] = a[i] * k + b[i];
        b[i] = a[i].sin() * x[i];
    }
    a[0] * b[1] + a[2] * w[0] + x[1] * b[2]
}

#[test]
fn array_parameters_copied_into_locals() {
    let (x, w, k) = ([0.3, -1.2, 0.8], [1.5, 0.25, -2.0], 0.7);
    let (mut dx, mut dw, mut dk) = ([9.0; 3], [9.0; 3], 9.0);
    let v = copied::grad(x, &w, k, &mut dx, &mut dw, &mut dk);
    assert!(close(v, copied(x, &w, k)));
    let all = [x[0], x[1], x[2], w[0], w[1], w[2], k];
    // forward mode over the function written generically (not the macro's `primal`)
    fn reference<T: Real>(x: [T; 3], w: &[T; N], k: T) -> T {
        let mut a = x;
        let mut b = *w;
        for i in 0..N {
            a[i] = a[i] * k + b[i];
            b[i] = a[i].sin() * x[i];
        }
        a[0] * b[1] + a[2] * w[0] + x[1] * b[2]
    }
    let want = forward::gradient(|v| reference(arr(v), &arr(&v[3..]), v[6]), &all);
    let got: Vec<f64> = dx.iter().chain(&dw).copied().chain([dk]).collect();
    check_all("copied", &got, &want);
}

#[differentiable]
fn softmax(x: &[f64; N]) -> [f64; N] {
    let mut m = x[0];
    for i in 1..N {
        m = m.max(x[i]);
    }
    let mut e = [0.0; N];
    let mut s = 0.0;
    for i in 0..N {
        e[i] = (x[i] - m).exp();
        s += e[i];
    }
    for i in 0..N {
        e[i] /= s;
    }
    e
}

#[differentiable]
fn rotate(x: f64, y: f64, t: f64) -> [f64; 2] {
    [t.cos() * x - t.sin() * y, t.sin() * x + t.cos() * y]
}

/// ⟨cot, J e_i⟩ for every input i, by forward mode: the VJP each pullback must equal.
fn vjp_by_forward<const M: usize>(
    n: usize,
    f: impl Fn(&[D]) -> [D; M],
    x: &[f64],
    cot: &[f64; M],
) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v: Vec<D> = (0..n)
                .map(|j| Dual::new(x[j], if i == j { 1.0 } else { 0.0 }))
                .collect();
            f(&v).iter().zip(cot).map(|(y, c)| y.eps * c).sum()
        })
        .collect()
}

#[test]
fn array_results() {
    let x = [0.4, -1.0, 2.2];
    let cot = [0.3, -0.8, 1.1];
    let mut dx = [0.0; N];
    let y = softmax::pullback(&mut Workspace::new(), &x, &mut dx, cot);
    let plain = softmax(&x);
    check_all("softmax value", &y, &plain);
    assert!(close(y.iter().sum::<f64>(), 1.0));
    let want = vjp_by_forward(3, |v| softmax::primal(&arr(v)), &x, &cot);
    check_all("softmax vjp", &dx, &want);

    let (px, py, t) = (1.5, -0.5, 0.9);
    let (mut dpx, mut dpy, mut dt) = (0.0, 0.0, 0.0);
    let cot2 = [0.7, 1.3];
    let r = rotate::pullback(
        &mut Workspace::new(),
        px,
        py,
        t,
        &mut dpx,
        &mut dpy,
        &mut dt,
        cot2,
    );
    assert_eq!(r, rotate(px, py, t));
    let want = vjp_by_forward(3, |v| rotate::primal(v[0], v[1], v[2]), &[px, py, t], &cot2);
    check_all("rotate vjp", &[dpx, dpy, dt], &want);
}

// ---- tuples ----

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    if r < 0.0 {
        return (0.0, 0.0);
    }
    (r * t.cos(), r * t.sin())
}

#[test]
fn tuple_results_closed_form() {
    let (r, t) = (2.0, 0.6);
    let (cx, cy) = (0.4, -1.5);
    let (mut dr, mut dt) = (0.0, 0.0);
    let (x, y) = polar::pullback(&mut Workspace::new(), r, t, &mut dr, &mut dt, (cx, cy));
    assert_eq!((x, y), polar(r, t));
    assert!(close(dr, cx * t.cos() + cy * t.sin()), "dr {dr}");
    assert!(close(dt, -cx * r * t.sin() + cy * r * t.cos()), "dt {dt}");
    // the early return: constant result, zero gradient
    let (mut dr, mut dt) = (0.0, 0.0);
    let z = polar::pullback(&mut Workspace::new(), -1.0, t, &mut dr, &mut dt, (cx, cy));
    assert_eq!((z, dr, dt), ((0.0, 0.0), 0.0, 0.0));
}

#[differentiable]
fn tuple_param(p: (f64, [f64; 2]), s: f64) -> f64 {
    let (a, b) = p;
    let (u, v) = (b[0], p.1[1]);
    a * a * s + u * v.sin() + p.0.exp()
}

#[differentiable]
fn sc(x: f64) -> f64 {
    let (s, c) = x.sin_cos();
    s * c
}

#[test]
fn sin_cos_is_a_tuple() {
    let x = 0.7;
    let mut dx = 0.0;
    let v = sc::grad(x, &mut dx);
    assert!(close(v, x.sin() * x.cos()));
    assert!(close(dx, (2.0 * x).cos()), "{dx}"); // d/dx sin x cos x = cos 2x
}

#[test]
fn tuple_parameters() {
    let (p, s) = ((0.7, [1.3, -0.4]), 1.9);
    let (mut dp, mut ds) = ((5.0, [5.0, 5.0]), 5.0); // overwritten by grad
    let v = tuple_param::grad(p, s, &mut dp, &mut ds);
    assert!(close(v, tuple_param(p, s)));
    let want = forward::gradient(
        |v| tuple_param::primal((v[0], [v[1], v[2]]), v[3]),
        &[p.0, p.1[0], p.1[1], s],
    );
    check_all("tuple_param", &[dp.0, dp.1[0], dp.1[1], ds], &want);
}

#[differentiable]
fn mix(p: ((f64, f64), [f64; 2]), k: f64) -> (f64, [f64; 2]) {
    let ((a, b), v) = p;
    let mut out = [0.0; 2];
    for i in 0..2 {
        out[i] = v[i] * a + b * k;
    }
    (a * b, out)
}

#[test]
fn nested_tuples_with_arrays_in_and_out() {
    let (p, k) = (((0.5, -1.25), [2.0, 0.75]), 1.5);
    let cot = (0.9, [-0.3, 1.7]);
    let (mut dp, mut dk) = (((0.0, 0.0), [0.0; 2]), 0.0);
    let (m, out) = mix::pullback(&mut Workspace::new(), p, k, &mut dp, &mut dk, cot);
    assert_eq!((m, out), mix(p, k));
    let x = [p.0 .0, p.0 .1, p.1[0], p.1[1], k];
    let want = vjp_by_forward(
        5,
        |v| {
            let (m, o) = mix::primal(((v[0], v[1]), [v[2], v[3]]), v[4]);
            [m, o[0], o[1]]
        },
        &x,
        &[cot.0, cot.1[0], cot.1[1]],
    );
    check_all("mix vjp", &[dp.0 .0, dp.0 .1, dp.1[0], dp.1[1], dk], &want);
}

// ---- structs ----

#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct Params<T = f64> {
    w: T,
    b: [T; 3],
    unused: T,
}

#[differentiable]
fn loss(p: &Params, x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let r = p.w * x[i] + p.b[i % 3] - 1.0;
        s += r * r;
    }
    for bi in p.b.iter() {
        s += 0.1 * bi * bi;
    }
    s + p.b.len() as f64
}

fn params_d<T: Copy>(v: &[T]) -> Params<T> {
    Params {
        w: v[0],
        b: [v[1], v[2], v[3]],
        unused: v[4],
    }
}

#[test]
fn struct_parameters() {
    let p = Params {
        w: 0.8,
        b: [0.1, -0.4, 0.9],
        unused: 3.0,
    };
    let x = [0.5, 1.5, -2.0, 0.25];
    let mut dp = Params {
        w: 7.0,
        b: [7.0; 3],
        unused: 7.0,
    }; // overwritten by grad: `unused` must come back 0
    let mut dx = [7.0; 4];
    let v = loss::grad(&p, &x, &mut dp, &mut dx);
    assert!(close(v, loss(&p, &x)));
    let all = [
        p.w, p.b[0], p.b[1], p.b[2], p.unused, x[0], x[1], x[2], x[3],
    ];
    let want = forward::gradient(|v| loss::primal(&params_d(v), &v[5..]), &all);
    let got = [
        dp.w, dp.b[0], dp.b[1], dp.b[2], dp.unused, dx[0], dx[1], dx[2], dx[3],
    ];
    check_all("loss", &got, &want);
    assert_eq!(dp.unused, 0.0);
    // and against finite differences, through the plain function
    check::check_gradient(
        |v| {
            let q = Params {
                w: v[0],
                b: [v[1], v[2], v[3]],
                unused: v[4],
            };
            loss(&q, &v[5..])
        },
        &all,
        &got,
    )
    .assert_passed();
}

#[differentiable]
fn turn(a: &[f64; 3], t: f64) -> [f64; 3] {
    [a[0] * t, a[1] + t, a[2] * a[0]]
}

/// A struct's array field and a tuple's array member passed to a callee taking `&[f64; 3]`
/// (a hunter found rustc errors inside the generated code: the field went as a slice).
#[differentiable]
fn field_to_array_callee(p: &Params, q: (f64, [f64; 3]), t: f64) -> f64 {
    let r: [f64; 3] = turn(&p.b, t);
    let u: [f64; 3] = turn(&q.1, q.0);
    r[0] + r[1] * r[2] + p.w + u[0] * u[2] - u[1]
}

/// A `grad` and the plain function of `(p: &Params, q: (f64, [f64; 3]), t: f64)`.
type StructTupleGrad =
    fn(&Params, (f64, [f64; 3]), f64, &mut Params, &mut (f64, [f64; 3]), &mut f64) -> f64;
type StructTuplePlain = fn(&Params, (f64, [f64; 3]), f64) -> f64;

/// `grad` at the point the struct-and-tuple tests share, its value checked against `plain`:
/// the point and the gradient, each flattened as `[p.w, p.b…, p.unused, q.0, q.1…, t]`.
fn at_struct_and_tuple(grad: StructTupleGrad, plain: StructTuplePlain) -> ([f64; 10], [f64; 10]) {
    let p = Params {
        w: 0.8,
        b: [0.1, -0.4, 0.9],
        unused: 3.0,
    };
    let (q, t) = ((1.3, [0.5, -0.7, 0.2]), 0.6);
    let mut dp = Params {
        w: 0.0,
        b: [0.0; 3],
        unused: 0.0,
    };
    let (mut dq, mut dt) = ((0.0, [0.0; 3]), 0.0);
    let v = grad(&p, q, t, &mut dp, &mut dq, &mut dt);
    assert!(close(v, plain(&p, q, t)));
    (
        [
            p.w, p.b[0], p.b[1], p.b[2], p.unused, q.0, q.1[0], q.1[1], q.1[2], t,
        ],
        [
            dp.w, dp.b[0], dp.b[1], dp.b[2], dp.unused, dq.0, dq.1[0], dq.1[1], dq.1[2], dt,
        ],
    )
}

#[test]
fn array_fields_passed_to_array_parameters() {
    let (all, got) = at_struct_and_tuple(field_to_array_callee::grad, field_to_array_callee);
    check::check_gradient(
        |v| field_to_array_callee(&params_d(v), (v[5], [v[6], v[7], v[8]]), v[9]),
        &all,
        &got,
    )
    .assert_passed();
}

/// A struct's array field and a tuple's array member copied by a `let` with its type, and the
/// copies changed: the fields keep their values (a field copy was refused: the macro does not
/// see a struct field's length; the type gives it).
#[differentiable]
fn field_copies(p: &Params, q: (f64, [f64; 3]), x: f64) -> f64 {
    let mut c: [f64; 3] = p.b;
    c[0] *= x;
    let r = &p.b;
    let mut e: [f64; N] = *r;
    e[1] += c[0] * q.0;
    let mut t: [f64; 3] = q.1;
    t[2] = t[2] * e[1] + x;
    c[0] + p.b[0] * c[1] + e[1] * e[2] + t[2] * q.1[2] + p.w
}

/// `field_copies` by hand, generic (Rust copies the arrays).
fn field_copies_ref<T: Real>(p: &Params<T>, q: (T, [T; 3]), x: T) -> T {
    let mut c = p.b;
    c[0] *= x;
    let mut e = p.b;
    e[1] += c[0] * q.0;
    let mut t = q.1;
    t[2] = t[2] * e[1] + x;
    c[0] + p.b[0] * c[1] + e[1] * e[2] + t[2] * q.1[2] + p.w
}

#[test]
fn array_fields_copied_by_a_typed_let() {
    let (all, got) = at_struct_and_tuple(field_copies::grad, field_copies);
    // the hand reference computes what the function as written computes
    let (p, q) = (params_d(&all), (all[5], [all[6], all[7], all[8]]));
    assert!(close(
        field_copies_ref(&p, q, all[9]),
        field_copies(&p, q, all[9])
    ));
    let want = forward::gradient(
        |v| field_copies_ref(&params_d(v), (v[5], [v[6], v[7], v[8]]), v[9]),
        &all,
    );
    check_all("field_copies", &got, &want);
}

/// A tuple parameter's array member copied without a type (its length is in the signature), by
/// `let`, by destructuring, through `*r` and in a tuple literal; the copies are changed, the
/// member is not.
#[differentiable]
fn member_copies(q: (f64, [f64; 3]), x: f64) -> f64 {
    let mut c = q.1;
    c[0] *= x;
    let (k, mut d) = q;
    d[2] += c[0] * k;
    let r = &q.1;
    let mut e = *r;
    e[1] *= d[2];
    let (mut f, z) = (q.1, 2.0);
    f[2] *= z * x;
    c[0] + q.1[0] * d[2] + e[1] + q.1[1] * k + f[2] * q.1[2]
}

fn member_copies_ref<T: Real>(q: (T, [T; 3]), x: T) -> T {
    let mut c = q.1;
    c[0] *= x;
    let (k, mut d) = q;
    d[2] += c[0] * k;
    let mut e = q.1;
    e[1] *= d[2];
    let (mut f, z) = (q.1, 2.0);
    f[2] *= x * z;
    c[0] + q.1[0] * d[2] + e[1] + q.1[1] * k + f[2] * q.1[2]
}

#[test]
fn tuple_members_copied_without_a_type() {
    let q = (1.3, [0.5, -0.7, 0.2]);
    let x = 0.6;
    let (mut dq, mut dx) = ((0.0, [0.0; 3]), 0.0);
    let v = member_copies::grad(q, x, &mut dq, &mut dx);
    assert!(close(v, member_copies(q, x)));
    assert!(close(v, member_copies_ref(q, x)));
    let all = [q.0, q.1[0], q.1[1], q.1[2], x];
    let want = forward::gradient(
        |v| member_copies_ref((v[0], [v[1], v[2], v[3]]), v[4]),
        &all,
    );
    check_all(
        "member_copies",
        &[dq.0, dq.1[0], dq.1[1], dq.1[2], dx],
        &want,
    );
}

#[differentiable]
fn step(p: &Params, lr: f64, g: &[f64]) -> Params {
    let mut b = [0.0; 3];
    for i in 0..3 {
        b[i] = p.b[i] - lr * g[i + 1] * p.w;
    }
    Params {
        w: p.w - lr * g[0],
        b,
        unused: p.unused * 2.0,
    }
}

#[test]
fn struct_results() {
    let p = Params {
        w: 1.2,
        b: [0.3, -0.6, 2.0],
        unused: -0.5,
    };
    let (lr, g) = (0.1, [0.4, -1.0, 0.5, 2.5]);
    let cot = Params {
        w: 0.7,
        b: [1.0, -2.0, 0.5],
        unused: 1.5,
    };
    let mut dp = Params::zero();
    let (mut dlr, mut dg) = (0.0, [0.0; 4]);
    let q = step::pullback(
        &mut Workspace::new(),
        &p,
        lr,
        &g,
        &mut dp,
        &mut dlr,
        &mut dg,
        cot,
    );
    assert_eq!(q, step(&p, lr, &g));
    let x = [
        p.w, p.b[0], p.b[1], p.b[2], p.unused, lr, g[0], g[1], g[2], g[3],
    ];
    let want = vjp_by_forward(
        10,
        |v| {
            let q = step::primal(&params_d(v), v[5], &v[6..]);
            [q.w, q.b[0], q.b[1], q.b[2], q.unused]
        },
        &x,
        &[cot.w, cot.b[0], cot.b[1], cot.b[2], cot.unused],
    );
    let got = [
        dp.w, dp.b[0], dp.b[1], dp.b[2], dp.unused, dlr, dg[0], dg[1], dg[2], dg[3],
    ];
    check_all("step vjp", &got, &want);
}

/// Forward over reverse on a struct: the pullback at `Dual` gives Hessian-vector products.
#[test]
fn struct_hessian_vector_product() {
    let p = Params {
        w: 0.8,
        b: [0.1, -0.4, 0.9],
        unused: 3.0,
    };
    let x = [0.5, 1.5, -2.0];
    // direction: along w only
    let pd = Params {
        w: Dual::new(p.w, 1.0),
        b: p.b.map(c),
        unused: c(p.unused),
    };
    let xd: Vec<D> = x.iter().map(|&v| c(v)).collect();
    let mut dp = Params::<D>::zero();
    let mut dx = vec![c(0.0); 3];
    loss::pullback(&mut Workspace::new(), &pd, &xd, &mut dp, &mut dx, c(1.0));
    let all = [p.w, p.b[0], p.b[1], p.b[2], p.unused, x[0], x[1], x[2]];
    let h = forward::hessian(|v| loss::primal(&params_d(v), &v[5..]), &all);
    let got = [
        dp.w.eps,
        dp.b[0].eps,
        dp.b[1].eps,
        dp.b[2].eps,
        dp.unused.eps,
    ];
    let want: Vec<f64> = (0..5).map(|i| h[i][0]).collect();
    check_all("hvp", &got, &want);
    // the real parts are the gradient, in closed form for w
    let dw: f64 = (0..3)
        .map(|i| 2.0 * (p.w * x[i] + p.b[i] - 1.0) * x[i])
        .sum();
    assert!(close(Real::value(&dp.w), dw));
}

// ---- `[v; N]` where an array value stands ----

#[differentiable]
fn repeated_result(x: f64) -> [f64; 2] {
    [x * x; 2]
}

#[differentiable]
fn repeated_in_tuple(x: f64, y: f64) -> (f64, [f64; 3]) {
    (x * y, [x.sin() * y; 3])
}

#[differentiable]
fn repeated_field(x: f64) -> Params {
    Params {
        w: x,
        b: [x.exp(); 3],
        unused: 0.0,
    }
}

/// `[v; N]` as a result, a tuple's member and a struct literal's field (a `let` was needed
/// before): each pullback against forward mode.
#[test]
fn repeat_expressions_outside_a_let() {
    let x = 0.7;
    let cot = [0.3, -1.1];
    let mut dx = 0.0;
    let y = repeated_result::pullback(&mut Workspace::new(), x, &mut dx, cot);
    assert_eq!(y, repeated_result(x));
    let want = vjp_by_forward(1, |v| repeated_result::primal(v[0]), &[x], &cot);
    check_all("[x * x; 2]", &[dx], &want);

    let (x, y) = (0.4, -1.3);
    let cot = (0.5, [1.0, -2.0, 0.25]);
    let (mut dx, mut dy) = (0.0, 0.0);
    let r = repeated_in_tuple::pullback(&mut Workspace::new(), x, y, &mut dx, &mut dy, cot);
    assert_eq!(r, repeated_in_tuple(x, y));
    let want = vjp_by_forward(
        2,
        |v| {
            let (a, b) = repeated_in_tuple::primal(v[0], v[1]);
            [a, b[0], b[1], b[2]]
        },
        &[x, y],
        &[cot.0, cot.1[0], cot.1[1], cot.1[2]],
    );
    check_all("(x * y, [x.sin() * y; 3])", &[dx, dy], &want);

    let x = -0.2;
    let cot = Params {
        w: 0.7,
        b: [1.0, -2.0, 0.5],
        unused: 1.5,
    };
    let mut dx = 0.0;
    let p = repeated_field::pullback(&mut Workspace::new(), x, &mut dx, cot);
    assert_eq!(p, repeated_field(x));
    let want = 0.7 + (1.0 - 2.0 + 0.5) * x.exp();
    assert!(close(dx, want), "{dx} vs {want}");
}

// ---- names the generated code must not capture (a hunter) ----

/// A struct named `A` (or `T`): the generated functions' generic parameters were named `T` and
/// `A`, so the struct's name meant the generic parameter in their signatures ("`A` is not a
/// `#[derive(Differentiable)]` struct").
#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct A<T = f64> {
    w: T,
    b: [T; 2],
}

#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct T<U = f64> {
    v: U,
}

#[differentiable]
fn struct_named_a(a: &A, t: &T, s: f64) -> f64 {
    a.w * a.b[1] * s + t.v.sin()
}

#[test]
fn structs_named_like_generic_parameters() {
    let (a, t, s) = (
        A {
            w: 2.0,
            b: [1.0, 3.0],
        },
        T { v: 0.4 },
        0.5,
    );
    let mut da = A {
        w: 9.0,
        b: [9.0; 2],
    };
    let (mut dt, mut ds) = (T { v: 9.0 }, 9.0);
    let v = struct_named_a::grad(&a, &t, s, &mut da, &mut dt, &mut ds);
    assert!(close(v, struct_named_a(&a, &t, s)));
    // closed form: ∂/∂w = b₁·s, ∂/∂b = (0, w·s), ∂/∂v = cos v, ∂/∂s = w·b₁
    check_all(
        "A",
        &[da.w, da.b[0], da.b[1], dt.v, ds],
        &[1.5, 0.0, 1.0, 0.4f64.cos(), 6.0],
    );
}

/// Types passed through `macro_rules!` as `$t:ty` arrive in invisible groups: `f64` and
/// `usize` so wrapped were "unsupported parameter type" (a hunter).
macro_rules! scaled_power {
    ($name:ident, $f:ty, $n:ty) => {
        #[differentiable]
        fn $name(x: $f, k: $n) -> $f {
            let mut p: $f = 1.0;
            for _ in 0..k {
                p *= x;
            }
            p
        }
    };
}
scaled_power!(power_via_macro, f64, usize);

#[test]
fn types_from_macro_rules_fragments() {
    let mut dx = 9.0;
    let v = power_via_macro::grad(1.5, 3, &mut dx);
    assert!(close(v, 3.375) && close(dx, 3.0 * 1.5 * 1.5), "{v} {dx}");
}

#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct Q<T = f64> {
    a: T,
    b: [T; 2],
}

/// A changed copy of an array field written element by element (without a type, `let r = &q.b;
/// let mut c = *r;` names the field: `tests/ui/field_copy_written.rs`; with one, it is a copy,
/// `array_fields_copied_by_a_typed_let`).
#[differentiable]
fn field_copy(q: &Q) -> f64 {
    let mut c = [q.b[0], q.b[1]];
    c[1] *= q.a;
    c[0] + c[1] * q.b[1]
}

#[test]
fn a_changed_copy_of_an_array_field() {
    let q = Q {
        a: 2.0,
        b: [1.0, 3.0],
    };
    let mut dq = Q {
        a: 9.0,
        b: [9.0; 2],
    };
    let v = field_copy::grad(&q, &mut dq);
    // value b₀ + a·b₁²; ∂/∂a = b₁², ∂/∂b₀ = 1, ∂/∂b₁ = 2a·b₁ (closed form)
    assert!(close(v, 19.0) && close(field_copy(&q), 19.0), "{v}");
    check_all("Q", &[dq.a, dq.b[0], dq.b[1]], &[9.0, 1.0, 12.0]);
}
