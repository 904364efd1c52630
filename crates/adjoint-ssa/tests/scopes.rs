//! Names as Rust scopes them, through the macro's rewrites (a hunter found both wrong): a
//! `.map(|a| …).fold(…)` whose fold closure reads an outer `a`, and a `const` of an inner block
//! named as a module-level one. Each against the function as written (the same source, plain)
//! and central differences. And module-level constants cast where they are read (`N as f64`),
//! which did not compile (the macro cannot see their type; the cast gives it).

use adjoint_ssa::differentiable;

fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6;
    (f(x + h) - f(x - h)) / (2.0 * h)
}

/// The fold's `a` is the parameter, not the map closure's `a` (it read `Σ xᵢ sin xᵢ`).
#[differentiable]
fn map_fold_capture(x: &[f64], a: f64) -> f64 {
    x.iter().map(|a| a.sin()).fold(0.0, |s, t| s + a * t)
}

#[test]
fn a_fold_after_a_map_reads_the_outer_variable() {
    let x = [0.5, 1.0, -0.3];
    let a = 2.0;
    let (mut dx, mut da) = ([0.0; 3], 0.0);
    let v = map_fold_capture::grad(&x, a, &mut dx, &mut da);
    assert_eq!(v, map_fold_capture(&x, a));
    assert!((v - a * x.iter().map(|v| v.sin()).sum::<f64>()).abs() < 1e-15);
    // closed form: ∂a = Σ sin xᵢ, ∂xᵢ = a cos xᵢ
    assert!((da - x.iter().map(|v| v.sin()).sum::<f64>()).abs() < 1e-14);
    for (d, xi) in dx.iter().zip(x) {
        assert!((d - a * xi.cos()).abs() < 1e-14);
    }
}

#[differentiable]
fn fold_in_fold(x: &[f64], y: &[f64]) -> f64 {
    x.iter()
        .map(|v| v * 2.0)
        .fold(0.5, |a, v| a * 0.5 + y.iter().fold(v, |b, w| b * w))
}

#[test]
fn nested_folds_match_central_differences() {
    let x = [0.5, 1.0, -0.3];
    let y = [0.2, 0.4];
    let (mut dx, mut dy) = ([0.0; 3], [0.0; 2]);
    assert_eq!(
        fold_in_fold::grad(&x, &y, &mut dx, &mut dy),
        fold_in_fold(&x, &y)
    );
    for i in 0..3 {
        let want = fd(
            |t| {
                let mut z = x;
                z[i] = t;
                fold_in_fold(&z, &y)
            },
            x[i],
        );
        assert!((dx[i] - want).abs() < 1e-8, "[{i}] {} vs {want}", dx[i]);
    }
}

const N: usize = 2;
const C: f64 = 10.0;

/// The inner block's `N = 4`, `C = 100` were used in the whole function (704, derivative 1000,
/// where the function gives 576 and 820).
#[differentiable]
fn const_scopes(x: f64) -> f64 {
    let mut s = 0.0;
    let a = [x; N];
    s += a[N - 1] * C;
    {
        const N: usize = 4;
        const C: f64 = 100.0;
        let b = [x * 2.0; N];
        for bi in b {
            s += bi * C;
        }
    }
    let c = [x; N];
    let nn: usize = N;
    s + c[N - 1] * C + nn as f64
}

#[test]
fn a_const_of_an_inner_block_is_seen_only_there() {
    let mut d = 0.0;
    let v = const_scopes::grad(0.7, &mut d);
    assert_eq!(v, const_scopes(0.7));
    // by hand: 0.7·10 + 4·1.4·100 + 0.7·10 + 2 = 576, derivative 10 + 800 + 10
    assert!((v - 576.0).abs() < 1e-12);
    assert!((d - 820.0).abs() < 1e-12);
    assert!((d - fd(const_scopes, 0.7)).abs() < 1e-6);
}

/// A block's `const` is visible in the whole block, before its declaration too, and in a
/// `match` pattern.
#[differentiable]
fn const_before_its_declaration(x: f64, k: usize) -> f64 {
    let mut s = 0.0;
    {
        s += x * M as f64;
        const M: usize = 3;
        const F: f64 = M as f64 * 0.5;
        match k {
            M => s += x * F,
            _ => s -= x,
        }
    }
    s
}

#[test]
fn a_block_const_before_its_declaration_and_in_a_pattern() {
    for k in 0..5 {
        let mut d = 0.0;
        let v = const_before_its_declaration::grad(0.7, k, &mut d);
        assert_eq!(v, const_before_its_declaration(0.7, k), "k = {k}");
        let want = if k == 3 { 3.0 + 1.5 } else { 3.0 - 1.0 };
        assert!((d - want).abs() < 1e-12, "k = {k}: {d}");
    }
}

const STEPS: u32 = 3;

/// Module-level constants of types the macro cannot see, cast where they are read.
#[differentiable]
fn module_const_casts(x: f64) -> f64 {
    let k = STEPS as usize;
    let mut s = x * N as f64 + (2 * N + 1) as f64 - (-(STEPS as i64)) as f64;
    for _ in 0..k {
        s *= x;
    }
    s
}

#[test]
fn module_constants_cast_where_they_are_read() {
    let mut d = 0.0;
    let v = module_const_casts::grad(0.7, &mut d);
    assert_eq!(v, module_const_casts(0.7));
    // (2x + 5 + 3)·x³ = 2x⁴ + 8x³: 3.2242 at 0.7, derivative 8x³ + 24x² = 14.504
    assert!((v - 3.2242).abs() < 1e-12, "{v}");
    assert!((d - 14.504).abs() < 1e-12, "{d}");
    assert!((d - fd(module_const_casts, 0.7)).abs() < 1e-6);
}
