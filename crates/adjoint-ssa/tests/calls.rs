//! Calls of other `#[differentiable]` functions whose results are tuples or arrays
//! (`let (c, s) = polar(r, t);`), and calls that pass one slice twice (`dot(x, x)`).
//! Gradients against finite differences of the functions as written, closed forms, and forward
//! mode over `primal`; Jacobian lanes bit for bit against single pullbacks.

#![allow(clippy::needless_range_loop)]

use adjoint_core::check;
use adjoint_core::forward::{self, Dual, DualVec};
use adjoint_ssa::{differentiable, Cotangents, Workspace};

mod common;
use common::{check as check_all, close};

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    (r * t.cos(), r * t.sin())
}

/// Both results used.
#[differentiable]
fn polar_mix(r: f64, t: f64) -> f64 {
    let (x, y) = polar(r, t);
    x * x + 3.0 * y
}

#[test]
fn a_tuple_result_destructured() {
    for (r, t) in [(1.3, 0.4), (0.7, -2.1), (2.0, 3.0)] {
        let (mut dr, mut dt) = (0.0, 0.0);
        let v = polar_mix::grad(r, t, &mut dr, &mut dt);
        assert_eq!(v, polar_mix(r, t));
        // closed form: r²cos²t + 3 r sin t
        let (s, c) = t.sin_cos();
        assert!(close(dr, 2.0 * r * c * c + 3.0 * s), "dr {dr}");
        assert!(close(dt, -2.0 * r * r * c * s + 3.0 * r * c), "dt {dt}");
    }
}

/// One result unused (`_`), the other used: the unused one's cotangent is zero.
#[differentiable]
fn only_y(r: f64, t: f64) -> f64 {
    let (_, y) = polar(r, t);
    y * y
}

#[differentiable]
fn only_x(r: f64, t: f64) -> f64 {
    let (x, _y) = polar(r, t);
    x.exp()
}

#[test]
fn unused_results_get_no_cotangent() {
    let (r, t) = (1.1, 0.6);
    let (mut dr, mut dt) = (0.0, 0.0);
    only_y::grad(r, t, &mut dr, &mut dt);
    assert!(close(dr, 2.0 * r * t.sin() * t.sin()));
    assert!(close(dt, 2.0 * r * r * t.sin() * t.cos()));
    let (mut dr, mut dt) = (0.0, 0.0);
    only_x::grad(r, t, &mut dr, &mut dt);
    let e = (r * t.cos()).exp();
    assert!(close(dr, e * t.cos()));
    assert!(close(dt, -e * r * t.sin()));
}

/// A tuple bound to one name with its type written, then read by field.
#[differentiable]
fn by_field(r: f64, t: f64) -> f64 {
    let p: (f64, f64) = polar(r, t);
    p.0 * p.1
}

#[test]
fn a_tuple_result_bound_to_a_name() {
    let (r, t) = (0.9, 1.2);
    let (mut dr, mut dt) = (0.0, 0.0);
    let v = by_field::grad(r, t, &mut dr, &mut dt);
    assert_eq!(v, by_field(r, t));
    // r² sin t cos t = ½ r² sin 2t
    assert!(close(dr, r * (2.0 * t).sin()));
    assert!(close(dt, r * r * (2.0 * t).cos()));
}

#[differentiable]
fn cross(a: &[f64], b: &[f64]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The scalar triple product `c · (a × b)`, through an array result.
#[differentiable]
fn triple(a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let v: [f64; 3] = cross(a, b);
    let mut s = 0.0;
    for i in 0..3 {
        s += c[i] * v[i];
    }
    s
}

#[test]
fn an_array_result() {
    let (a, b, c) = ([0.3, -1.2, 0.8], [1.5, 0.4, -0.6], [-0.2, 0.9, 1.1]);
    let (mut da, mut db, mut dc) = ([0.0; 3], [0.0; 3], [0.0; 3]);
    let v = triple::grad(&a, &b, &c, &mut da, &mut db, &mut dc);
    assert_eq!(v, triple(&a, &b, &c));
    // ∇_c = a × b, ∇_a = b × c, ∇_b = c × a
    check_all("dc", &dc, &cross(&a, &b));
    check_all("da", &da, &cross(&b, &c));
    check_all("db", &db, &cross(&c, &a));
}

/// Mean and variance in one call.
#[differentiable]
fn moments(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let mut var = 0.0;
    for &v in x {
        var += (v - mean) * (v - mean);
    }
    (mean, var / n)
}

/// Skewness: the results of a call read in a loop after it.
#[differentiable]
fn skewness(x: &[f64]) -> f64 {
    let (m, v) = moments(x);
    let sd = v.sqrt();
    let mut s = 0.0;
    for &xi in x {
        s += ((xi - m) / sd).powi(3);
    }
    s / x.len() as f64
}

#[test]
fn results_read_in_a_loop() {
    let x = [0.3, 1.9, -0.4, 2.2, 0.8, -1.1];
    let mut g = [0.0; 6];
    let v = skewness::grad(&x, &mut g);
    assert_eq!(v, skewness(&x));
    check::check_gradient(skewness, &x, &g).assert_passed();
    let want = forward::gradient(|x| skewness::primal(x), &x);
    check_all("skewness", &g, &want);
}

/// A call inside a loop whose results feed a loop-carried product: the reverse sweep runs the
/// callee's pullback once per iteration, with the iteration's arguments.
#[differentiable]
fn rotations(r: &[f64], t: &[f64]) -> f64 {
    let (mut px, mut py) = (1.0, 0.0);
    for i in 0..r.len() {
        let (c, s) = polar(r[i], t[i]);
        let nx = px * c - py * s;
        py = px * s + py * c;
        px = nx;
    }
    px + 2.0 * py
}

#[test]
fn a_call_in_a_loop() {
    let r = [1.1, 0.9, 1.05, 0.8];
    let t = [0.3, -0.7, 1.2, 0.4];
    let (mut dr, mut dt) = ([0.0; 4], [0.0; 4]);
    let v = rotations::grad(&r, &t, &mut dr, &mut dt);
    assert_eq!(v, rotations(&r, &t));
    check::check_gradient(|r| rotations(r, &t), &r, &dr).assert_passed();
    check::check_gradient(|t| rotations(&r, t), &t, &dt).assert_passed();
    // closed form: the product of rotations is a rotation by Σt scaled by Πr
    let (p, a): (f64, f64) = (r.iter().product(), t.iter().sum());
    assert!(close(v, p * (a.cos() + 2.0 * a.sin())));
    for i in 0..4 {
        assert!(close(dt[i], p * (-a.sin() + 2.0 * a.cos())), "dt[{i}]");
        assert!(close(dr[i], v / r[i]), "dr[{i}]");
    }
}

#[differentiable]
fn nested(x: f64) -> ((f64, f64), [f64; 2], f64) {
    ((x.sin(), x * x), [x.exp(), 2.0 * x], x.cos())
}

/// A nested tuple with an array inside, its type written; and the same destructured in the
/// pattern.
#[differentiable]
fn use_nested(x: f64, y: f64) -> f64 {
    let ((a, b), e, c): ((f64, f64), [f64; 2], f64) = nested(x);
    let ((p, _), _, q): ((f64, f64), [f64; 2], f64) = nested(y);
    a * b + e[0] * e[1] + c + p * q
}

#[test]
fn nested_tuples_and_arrays() {
    let (x, y) = (0.7, -0.4);
    let (mut dx, mut dy) = (0.0, 0.0);
    let v = use_nested::grad(x, y, &mut dx, &mut dy);
    assert_eq!(v, use_nested(x, y));
    // d/dx [x² sin x + 2x eˣ + cos x], d/dy [sin y cos y]
    let want_x = 2.0 * x * x.sin() + x * x * x.cos() + 2.0 * x.exp() * (1.0 + x) - x.sin();
    assert!(close(dx, want_x), "{dx} vs {want_x}");
    assert!(close(dy, (2.0 * y).cos()), "{dy}");
}

#[differentiable]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for (u, v) in a.iter().zip(b) {
        s += u * v;
    }
    s
}

/// One slice passed twice, and two overlapping sub-slices of it.
#[differentiable]
fn self_dots(x: &[f64]) -> f64 {
    let n = x.len() / 2;
    dot(x, x) + 3.0 * dot(&x[..n], &x[1..n + 1])
}

#[test]
fn one_slice_passed_twice() {
    let x = [0.5, -1.5, 2.0, 0.25, 1.0];
    let mut g = [0.0; 5];
    let v = self_dots::grad(&x, &mut g);
    assert_eq!(v, self_dots(&x));
    // 2x, plus 3 (x[i+1] + x[i-1]) over the shifted pairs (0,1), (1,2)
    let want = [
        2.0 * x[0] + 3.0 * x[1],
        2.0 * x[1] + 3.0 * (x[0] + x[2]),
        2.0 * x[2] + 3.0 * x[1],
        2.0 * x[3],
        2.0 * x[4],
    ];
    check_all("self_dots", &g, &want);
}

/// A tuple-returning function calling a tuple-returning function: Jacobian rows through
/// `pullback_vec` with [`Cotangents`], lane by lane equal to `pullback`.
#[differentiable]
fn polar_twice(r: f64, t: f64) -> (f64, f64) {
    let (x, y) = polar(r, t);
    let (u, v) = polar(x, y);
    (u + v, u * v)
}

#[test]
fn jacobian_rows_through_tuple_calls() {
    let (r, t) = (0.8, 0.5);
    let mut ws = Workspace::new();
    let (mut dr, mut dt) = (Cotangents([0.0; 2]), Cotangents([0.0; 2]));
    let seed = (Cotangents::unit(0), Cotangents::unit(1));
    let out = polar_twice::pullback_vec(&mut ws, r, t, &mut dr, &mut dt, seed);
    assert_eq!(out, polar_twice(r, t));
    let jac = forward::jacobian(
        |p: &[DualVec<2>]| {
            let (a, b) = polar_twice::primal(p[0], p[1]);
            vec![a, b]
        },
        &[r, t],
    );
    for (j, seed) in [(1.0, 0.0), (0.0, 1.0)].into_iter().enumerate() {
        let (mut d1, mut d2) = (0.0, 0.0);
        polar_twice::pullback(&mut ws, r, t, &mut d1, &mut d2, seed);
        assert_eq!(dr[j].to_bits(), d1.to_bits(), "row {j} r");
        assert_eq!(dt[j].to_bits(), d2.to_bits(), "row {j} t");
        assert!(close(d1, jac[j][0]) && close(d2, jac[j][1]), "row {j}");
    }
}

/// Forward over reverse through a tuple call: a Hessian-vector product.
#[test]
fn hessian_vector_product_through_tuple_calls() {
    let x = [0.3, 1.9, -0.4, 2.2, 0.8];
    let dir = [1.0, -0.5, 0.25, 2.0, 0.1];
    let xd: Vec<Dual<f64>> = x.iter().zip(dir).map(|(&a, d)| Dual::new(a, d)).collect();
    let mut g = vec![Dual::constant(0.0); 5];
    skewness::pullback(&mut Workspace::new(), &xd, &mut g, Dual::constant(1.0));
    let h = forward::hessian(|x| skewness::primal(x), &x);
    for i in 0..5 {
        let hv: f64 = (0..5).map(|j| h[i][j] * dir[j]).sum();
        assert!(close(g[i].eps, hv), "Hv[{i}]: {} vs {hv}", g[i].eps);
    }
}

/// A function whose result is another's: `polar(r, t)` as the tail, and `return cross(…)`.
#[differentiable]
fn polar_of_square(r: f64, t: f64) -> (f64, f64) {
    polar(r * r, t)
}

#[differentiable]
fn cross_or_flip(a: &[f64], b: &[f64]) -> [f64; 3] {
    if a[0] > 0.0 {
        return cross(a, b);
    }
    cross(b, a)
}

#[test]
fn a_call_as_the_result() {
    let (r, t) = (0.9, 0.4);
    let (mut dr, mut dt) = (0.0, 0.0);
    let out = polar_of_square::pullback(&mut Workspace::new(), r, t, &mut dr, &mut dt, (1.0, 2.0));
    assert_eq!(out, polar_of_square(r, t));
    // r² cos t + 2 r² sin t
    let (s, c) = t.sin_cos();
    assert!(close(dr, 2.0 * r * (c + 2.0 * s)));
    assert!(close(dt, r * r * (-s + 2.0 * c)));

    let (b, w) = ([1.5, 0.4, -0.6], [0.3, -0.2, 0.5]);
    for a in [[0.3, -1.2, 0.8], [-0.3, -1.2, 0.8]] {
        let (mut da, mut db) = ([0.0; 3], [0.0; 3]);
        let out = cross_or_flip::pullback(&mut Workspace::new(), &a, &b, &mut da, &mut db, w);
        assert_eq!(out, cross_or_flip(&a, &b));
        // w · (a × b) has gradient b × w in a and w × a in b; flipped, the negatives
        let sign = if a[0] > 0.0 { 1.0 } else { -1.0 };
        let (ga, gb) = (cross(&b, &w), cross(&w, &a));
        for i in 0..3 {
            assert!(
                close(da[i], sign * ga[i]) && close(db[i], sign * gb[i]),
                "{a:?} {i}"
            );
        }
    }
}

#[differentiable]
fn norm(v: &[f64]) -> f64 {
    v.iter().map(|a| a * a).sum::<f64>().sqrt()
}

#[differentiable]
fn norm3(v: &[f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// Local arrays passed to other functions: a call's array result, in a loop that rewrites it
/// every iteration (the reverse sweep passes each call the values it saw), a literal array,
/// and a callee taking `&[f64; 3]`.
#[differentiable]
fn areas(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..a.len() / 3 {
        let v: [f64; 3] = cross(&a[3 * i..3 * i + 3], &b[3 * i..3 * i + 3]);
        s += norm(&v) * (i as f64 + 1.0);
    }
    let w = [a[0] * b[1], a[1], 2.0];
    s + norm3(&w) + norm(&w)
}

#[test]
fn local_arrays_passed_to_calls() {
    let a = [0.3, -1.2, 0.8, 1.5, 0.4, -0.6, 0.9, 0.1, -0.7];
    let b = [1.1, 0.2, -0.5, -0.3, 0.8, 1.4, 0.6, -1.0, 0.25];
    let (mut da, mut db) = ([0.0; 9], [0.0; 9]);
    let v = areas::grad(&a, &b, &mut da, &mut db);
    assert_eq!(v, areas(&a, &b));
    check::check_gradient(|a| areas(a, &b), &a, &da).assert_passed();
    check::check_gradient(|b| areas(&a, b), &b, &db).assert_passed();
    let want = forward::gradient(|a| areas::primal(a, &b.map(Dual::constant)), &a);
    check_all("areas/a", &da, &want);
}

#[differentiable]
fn dot3(a: [f64; 3], b: &[f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[differentiable]
fn poly(x: f64, n: usize) -> f64 {
    let mut s = 0.0;
    for k in 0..n {
        s += x.powi(k as i32);
    }
    s
}

#[differentiable]
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Arrays to callees taking `[f64; 3]` and `&[f64; 3]`: array parameters as they are, local
/// arrays by value and by reference; an integer literal for a `usize` parameter; calls inside
/// a reduction's closure, nested, and in a condition.
#[differentiable]
fn many_calls(x: &[f64], p: [f64; 3], q: &[f64; 3]) -> f64 {
    let u = [x[0], x[1], x[2]];
    let a = dot3(p, q) + dot3(*q, &p) + dot3(u, &u);
    let b: f64 = x.iter().map(|v| sigmoid(*v)).sum();
    let c = poly(poly(x[0], 2), 3);
    let d = if norm(x) > 1.0 {
        poly(x[1], 4)
    } else {
        0.5 * x[2]
    };
    a + b + c + d
}

#[test]
fn arrays_integers_and_calls_where_users_write_them() {
    let q = [0.1, 0.2, 0.3];
    let p = [1.0, 2.0, 0.5];
    for x in [[0.3, 0.4, 1.2, -0.5], [0.1, 0.2, -0.3, 0.2]] {
        let (mut dx, mut dp, mut dq) = ([0.0; 4], [0.0; 3], [0.0; 3]);
        let v = many_calls::grad(&x, p, &q, &mut dx, &mut dp, &mut dq);
        assert_eq!(v, many_calls(&x, p, &q));
        check::check_gradient(|x| many_calls(x, p, &q), &x, &dx).assert_passed();
        // 2 p·q: the gradients in p and q are 2q and 2p
        check_all("dp", &dp, &q.map(|a| 2.0 * a));
        check_all("dq", &dq, &p.map(|a| 2.0 * a));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, adjoint_ssa::Differentiable)]
struct Layer<T = f64> {
    w: [T; 3],
    b: T,
    scale: T,
}

/// A struct parameter passed on to a helper.
#[differentiable]
fn predict(p: &Layer, x: &[f64]) -> f64 {
    let mut z = p.b;
    for k in 0..3 {
        z += p.w[k] * x[k];
    }
    z.tanh()
}

/// The caller reads some fields itself (`w`, `scale`) and passes the struct on, in a loop;
/// the helper reads `b`, which the caller never does.
#[differentiable]
fn fit(p: &Layer, xs: &[f64], ys: &[f64]) -> f64 {
    let mut loss = 0.0;
    for i in 0..ys.len() {
        let e = p.scale * predict(p, &xs[3 * i..3 * i + 3]) - ys[i];
        loss += e * e;
    }
    loss + 0.01 * (p.w[0] * p.w[0] + p.w[1] * p.w[1] + p.w[2] * p.w[2])
}

/// A `Layer`'s fields as a vector (for finite differences), and back.
fn flat(p: &Layer) -> [f64; 5] {
    [p.w[0], p.w[1], p.w[2], p.b, p.scale]
}

fn unflat(v: &[f64]) -> Layer {
    Layer {
        w: [v[0], v[1], v[2]],
        b: v[3],
        scale: v[4],
    }
}

#[test]
fn a_struct_parameter_passed_to_a_call() {
    use adjoint_ssa::Differentiable;
    let p = Layer {
        w: [0.3, -0.2, 0.5],
        b: 0.1,
        scale: 1.5,
    };
    let xs = [0.2, 0.4, -0.1, 1.0, -0.5, 0.3, -0.7, 0.2, 0.9];
    let ys = [0.4, -0.2, 0.6];
    let (mut dp, mut dxs, mut dys) = (Layer::zero(), [0.0; 9], [0.0; 3]);
    let v = fit::grad(&p, &xs, &ys, &mut dp, &mut dxs, &mut dys);
    assert_eq!(v, fit(&p, &xs, &ys));
    // against finite differences of the function as written, field by field
    check::check_gradient(|v| fit(&unflat(v), &xs, &ys), &flat(&p), &flat(&dp)).assert_passed();
    check::check_gradient(|xs| fit(&p, xs, &ys), &xs, &dxs).assert_passed();
    check::check_gradient(|ys| fit(&p, &xs, ys), &ys, &dys).assert_passed();
}

/// The same with the data passive (`wrt(p)`): the slices passed on are lifted to the callee's
/// number type (not copied for `f64`), and the callee's adjoint of them goes to scratch.
#[differentiable(wrt(p))]
fn fit_p(p: &Layer, xs: &[f64], ys: &[f64]) -> f64 {
    let mut loss = 0.0;
    for i in 0..ys.len() {
        let e = p.scale * predict(p, &xs[3 * i..3 * i + 3]) - ys[i];
        loss += e * e;
    }
    loss
}

#[test]
fn passive_slices_passed_to_a_call() {
    use adjoint_ssa::Differentiable;
    let p = Layer {
        w: [0.3, -0.2, 0.5],
        b: 0.1,
        scale: 1.5,
    };
    let xs = [0.2, 0.4, -0.1, 1.0, -0.5, 0.3, -0.7, 0.2, 0.9];
    let ys = [0.4, -0.2, 0.6];
    let mut dp = Layer::zero();
    let v = fit_p::grad(&p, &xs, &ys, &mut dp);
    assert_eq!(v, fit_p(&p, &xs, &ys));
    check::check_gradient(|v| fit_p(&unflat(v), &xs, &ys), &flat(&p), &flat(&dp)).assert_passed();
    // forward over reverse: the lifted copies at `Dual`; a Hessian-vector product in `p`
    let dir = [0.5, -1.0, 0.25, 2.0, -0.5];
    let pd = Layer {
        w: [0, 1, 2].map(|k| Dual::new(p.w[k], dir[k])),
        b: Dual::new(p.b, dir[3]),
        scale: Dual::new(p.scale, dir[4]),
    };
    let mut g = Layer::<Dual<f64>>::zero();
    fit_p::pullback(
        &mut Workspace::new(),
        &pd,
        &xs,
        &ys,
        &mut g,
        Dual::constant(1.0),
    );
    let h = forward::hessian(
        |v| {
            fit_p::primal(
                &Layer {
                    w: [v[0], v[1], v[2]],
                    b: v[3],
                    scale: v[4],
                },
                &xs,
                &ys,
            )
        },
        &flat(&p),
    );
    let gv = [g.w[0], g.w[1], g.w[2], g.b, g.scale];
    for i in 0..5 {
        let hv: f64 = (0..5).map(|j| h[i][j] * dir[j]).sum();
        assert!(close(gv[i].eps, hv), "Hv[{i}]: {} vs {hv}", gv[i].eps);
        assert!(close(gv[i].re, flat(&dp)[i]));
    }
}

/// Closures bound to names and called: inlined where they are called, over the variables they
/// captured where they were defined (a later `let` of the same name is another variable).
#[differentiable]
fn closures(x: &[f64], w: f64) -> f64 {
    let n = x.len();
    let at = |i: usize| n - 1 - i;
    let scale = w * 2.0;
    let f = |v: f64| (v * scale).tanh();
    let scale = 100.0; // shadows; `f` keeps the first
    let pair = |v: f64| (v.sin(), v * v);
    let mut s = 0.0;
    for i in 0..n {
        let (a, b) = pair(x[at(i)]);
        s += f(x[i]) * a + b / scale;
    }
    let norm2 = |v: &[f64]| -> f64 { v.iter().map(|a| a * a).sum() };
    s + norm2(x) + x.iter().copied().map(f).sum::<f64>() + polar_mix(x[0], w)
}

#[test]
fn closures_bound_and_called() {
    let x = [0.3, -1.2, 0.8, 0.5];
    let w = 0.7;
    let (mut dx, mut dw) = ([0.0; 4], 0.0);
    let v = closures::grad(&x, w, &mut dx, &mut dw);
    assert_eq!(v, closures(&x, w));
    check::check_gradient(|x| closures(x, w), &x, &dx).assert_passed();
    check::check_gradient(|p| closures(&x, p[0]), &[w], &[dw]).assert_passed();
}

// ---- shapes found in review ----

#[differentiable]
fn scaled(x: f64, n: u64) -> f64 {
    x * (n as f64)
}

/// Integer literals take the callee's parameter type (`3_000_000_000` fits a `u64`, not the
/// `i32` an unconstrained integer would default to).
#[differentiable]
fn big_count(x: f64) -> f64 {
    scaled(x, 3_000_000_000) + poly(x, 3)
}

#[differentiable]
fn pick(x: &[f64], idx: &[usize]) -> f64 {
    x[idx[0]] * x[idx[1]]
}

#[differentiable]
fn second(x: &[f64; 2]) -> f64 {
    x[1] * x[1]
}

/// An untyped integer array (its elements become `usize` as Rust infers), a local array passed
/// through a reference to it, a parameter named `g` and one named `r`, and calls whose result
/// is dropped.
#[differentiable]
fn review_shapes(g: &[f64], r: f64) -> f64 {
    let idx = [2, 0];
    let v = [g[0] * r, g[1]];
    let u = &v;
    let _ = polar(r, g[0]);
    polar(g[1], r);
    pick(g, &idx) + norm(u) + second(u) + g[idx[0]] + dot(g, g)
}

#[derive(Clone, Copy, Debug, PartialEq, adjoint_ssa::Differentiable)]
struct Pt<T = f64> {
    x: T,
    y: T,
}

#[differentiable]
fn pt_len(p: Pt) -> f64 {
    (p.x * p.x + p.y * p.y).sqrt()
}

#[differentiable]
fn pt_dot(p: &Pt, q: &Pt) -> f64 {
    p.x * q.x + p.y * q.y
}

/// A struct passed on by value from a reference (`*p`), by value as it is, and by reference.
#[differentiable]
fn pt_mix(p: &Pt, q: Pt) -> f64 {
    pt_len(*p) * pt_len(q) + pt_dot(p, &q)
}

#[test]
fn shapes_found_in_review() {
    let x = 0.4;
    let mut dx = 0.0;
    let v = big_count::grad(x, &mut dx);
    assert_eq!(v, big_count(x));
    assert!(close(dx, 3e9 + 1.0 + 2.0 * x), "{dx}");

    let g = [0.5, -1.5, 2.0];
    let r = 0.7;
    let (mut dg, mut dr) = ([0.0; 3], 0.0);
    let v = review_shapes::grad(&g, r, &mut dg, &mut dr);
    assert_eq!(v, review_shapes(&g, r));
    check::check_gradient(|g| review_shapes(g, r), &g, &dg).assert_passed();
    check::check_gradient(|p| review_shapes(&g, p[0]), &[r], &[dr]).assert_passed();

    let (p, q) = (Pt { x: 0.3, y: -1.2 }, Pt { x: 2.0, y: 0.5 });
    let (mut dp, mut dq) = (Pt { x: 0.0, y: 0.0 }, Pt { x: 0.0, y: 0.0 });
    let v = pt_mix::grad(&p, q, &mut dp, &mut dq);
    assert_eq!(v, pt_mix(&p, q));
    let f = |v: &[f64]| pt_mix(&Pt { x: v[0], y: v[1] }, Pt { x: v[2], y: v[3] });
    check::check_gradient(f, &[p.x, p.y, q.x, q.y], &[dp.x, dp.y, dq.x, dq.y]).assert_passed();
}

/// Input sensitivities: the model's parameters passive (`wrt(x)`), passed on to the helper,
/// which runs at the caller's number type (`lift` gives their values at `T`).
#[differentiable(wrt(xs))]
fn saliency(p: &Layer, q: Layer, xs: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..xs.len() / 3 {
        s += predict(p, &xs[3 * i..3 * i + 3]) * predict(&q, &xs[3 * i..3 * i + 3]);
    }
    s
}

#[test]
fn passive_structs_passed_to_a_call() {
    use adjoint_ssa::Differentiable;
    let p = Layer {
        w: [0.3, -0.2, 0.5],
        b: 0.1,
        scale: 1.5,
    };
    let q = Layer {
        w: [-0.4, 0.6, 0.1],
        b: -0.2,
        scale: 1.0,
    };
    let xs = [0.2, 0.4, -0.1, 1.0, -0.5, 0.3];
    let mut dxs = [0.0; 6];
    let v = saliency::grad(&p, q, &xs, &mut dxs);
    assert_eq!(v, saliency(&p, q, &xs));
    check::check_gradient(|xs| saliency(&p, q, xs), &xs, &dxs).assert_passed();
    // forward over reverse: a Hessian-vector product in `xs`, the struct lifted to `Dual`
    let dir = [1.0, -0.5, 0.25, 0.0, 2.0, -1.0];
    let xd: Vec<Dual<f64>> = xs.iter().zip(dir).map(|(&a, d)| Dual::new(a, d)).collect();
    let mut g = vec![Dual::constant(0.0); 6];
    saliency::pullback(
        &mut Workspace::new(),
        &p.lift(),
        q.lift(),
        &xd,
        &mut g,
        Dual::constant(1.0),
    );
    let h = forward::hessian(|x| saliency::primal(&p.lift(), q.lift(), x), &xs);
    for i in 0..6 {
        let hv: f64 = (0..6).map(|j| h[i][j] * dir[j]).sum();
        assert!(close(g[i].eps, hv), "Hv[{i}]: {} vs {hv}", g[i].eps);
    }
}

// ---- shapes found in the second review ----

#[differentiable]
fn shifted(x: f64, n: i64) -> f64 {
    x + (n as f64)
}

/// Arrays are values: a closure's array parameter and a tuple's array member are copies, so
/// changing them leaves the caller's array as it was.
#[differentiable]
fn array_copies(x: &[f64]) -> f64 {
    let a = [x[0], x[1]];
    let f = |mut b: [f64; 2]| {
        b[0] *= 10.0;
        b[0] + b[1]
    };
    let s = f(a);
    let (mut c, t) = (a, x[2]);
    c[0] = 5.0 * t;
    let g = |u: f64| (a, u);
    let (mut d, w) = g(x[2]);
    d[1] = w * w;
    s + a[0] * a[1] + c[0] + c[1] + a[1] + d[1] + d[0]
}

/// An integer of open type saved for the reverse sweep keeps its sign; negative literals and
/// arithmetic of literals go to callees as written; a closure's parameter type types its
/// argument (`100_000 * 100_000` is an `i64` here, not an overflowing `i32`).
#[differentiable]
fn open_integers(x: f64) -> f64 {
    let n = 2;
    let mut k = n;
    let mut s = shifted(x, n);
    for _ in 0..3 {
        k = 1 - 3 * k;
        s = s * x * (k as f64);
    }
    let sq = |k: i64| (k * k) as f64;
    s + shifted(x, -3) * poly(x, 1 + 2) + 1e-10 * x * sq(100_000)
}

#[test]
fn shapes_found_in_the_second_review() {
    let x = [0.7, -0.3, 1.1];
    let mut g = [0.0; 3];
    let v = array_copies::grad(&x, &mut g);
    assert_eq!(v, array_copies(&x));
    check::check_gradient(array_copies, &x, &g).assert_passed();

    let x = 0.9;
    let mut dx = 0.0;
    let v = open_integers::grad(x, &mut dx);
    assert_eq!(v, open_integers(x));
    check::check_gradient(|p| open_integers(p[0]), &[x], &[dx]).assert_passed();
}

#[differentiable]
fn horner_sin(x: &[f64], w: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s = s * w + x[i].sin();
    }
    s
}

/// Sub-slices whose bounds are untyped integer variables, passed to another function: the
/// bounds are `usize` as Rust infers (they defaulted to `i32`, and the generated code did not
/// compile: a hunter).
#[differentiable]
fn tail_call(x: &[f64]) -> f64 {
    let k = 1;
    horner_sin(&x[k..], 0.5)
}

#[differentiable]
fn mid_call(x: &[f64]) -> f64 {
    let k = 1;
    let m = 3;
    horner_sin(&x[k..m], 0.5)
}

#[differentiable]
fn bound_call(x: &[f64]) -> f64 {
    let k = 1;
    let y = &x[k..];
    horner_sin(y, 0.5)
}

#[differentiable]
fn loop_call(x: &[f64]) -> f64 {
    let mut t = 0.0;
    for i in 0..2 {
        t += horner_sin(&x[i..], 0.5);
    }
    t
}

#[test]
fn sub_slice_bounds_without_a_type_are_usize() {
    let x = [0.3, -0.8, 1.1, 0.4];
    type Primal = fn(&[f64]) -> f64;
    type Grad = fn(&[f64], &mut [f64]) -> f64;
    let fns: [(Primal, Grad); 4] = [
        (tail_call, tail_call::grad),
        (mid_call, mid_call::grad),
        (bound_call, bound_call::grad),
        (loop_call, loop_call::grad),
    ];
    for (k, (f, grad)) in fns.into_iter().enumerate() {
        let mut g = [0.0; 4];
        assert_eq!(grad(&x, &mut g), f(&x), "{k}");
        check::check_gradient(f, &x, &g).assert_passed();
    }
}
