//! `Acc::matmul`: values against a triple loop, gradients against forward mode and against
//! the same contraction written with `generate` + `sum`, clear errors, `f32`, and bit-identity
//! across thread counts.

use adjoint_array::{Buffer, Builder, DType, Error, Input};
use adjoint_core::forward::{self, Dual64};

mod common;
use common::{bits, in_pool, uniform};

/// `Σ_ij c_ij² · (1 + (i + j) mod 3)` of `C = A B`, written out (generic, for forward mode).
fn loss_ref<T>(a: &[T], b: &[T], m: usize, p: usize, q: usize) -> T
where
    T: Copy
        + std::ops::Add<Output = T>
        + std::ops::Mul<Output = T>
        + std::ops::Mul<f64, Output = T>,
{
    let mut s: Option<T> = None;
    for i in 0..m {
        for j in 0..q {
            let c = (1..p).fold(a[i * p] * b[j], |acc, k| acc + a[i * p + k] * b[k * q + j]);
            let t = c * c * (1.0 + ((i + j) % 3) as f64);
            s = Some(s.map_or(t, |s| s + t));
        }
    }
    s.expect("non-empty")
}

/// The same loss as an array program, the product by `matmul` or by `generate` + `sum`.
fn program(m: usize, p: usize, q: usize, by_matmul: bool) -> adjoint_array::Program {
    let bl = Builder::new();
    let a = bl.input(&[m, p]);
    let b = bl.input(&[p, q]);
    let c = if by_matmul {
        a.matmul(&b)
    } else {
        bl.generate(&[m, q, p], |i| a.at(&[i[0], i[2]]) * b.at(&[i[2], i[1]]))
            .sum()
    };
    let w = bl.generate(&[m, q], |i| {
        let v = c.at(i);
        v * v * ((i[0] + i[1]).imod(3.0) + 1.0)
    });
    bl.build_scalar(&w.sum().sum()).unwrap()
}

#[test]
fn matmul_gradients_match_forward_mode_and_generate_sum() {
    // Sizes around the product's 8-row tiles, and big enough (m·q ≥ 2048) for compiled kernels.
    for &(m, p, q) in &[(1, 1, 1), (3, 5, 2), (17, 9, 33), (70, 12, 40)] {
        let a = uniform(m * p, (m * 7 + p) as u64, -1.0, 1.0);
        let b = uniform(p * q, (q * 5 + p) as u64, -1.0, 1.0);
        let g = program(m, p, q, true).gradient_a(&[&a, &b]).unwrap();
        let want = loss_ref(&a, &b, m, p, q);
        assert!((g.value - want).abs() <= 1e-12 * want.abs(), "{m}x{p}x{q}");
        let n = a.len();
        let ab: Vec<f64> = a.iter().chain(&b).copied().collect();
        let gf = forward::gradient(|x: &[Dual64]| loss_ref(&x[..n], &x[n..], m, p, q), &ab);
        let got: Vec<f64> = g.grads[0].iter().chain(&g.grads[1]).copied().collect();
        for (i, (u, w)) in got.iter().zip(&gf).enumerate() {
            assert!(
                (u - w).abs() <= 1e-11 * (1.0 + w.abs()),
                "{m}x{p}x{q} ∂{i}: {u} vs {w}"
            );
        }
        // the contraction written with combinators: the same numbers to rounding
        let gs = program(m, p, q, false).gradient_a(&[&a, &b]).unwrap();
        assert!((gs.value - g.value).abs() <= 1e-12 * g.value.abs());
        for (x, y) in gs.grads.concat().iter().zip(&got) {
            assert!((x - y).abs() <= 1e-11 * (1.0 + y.abs()));
        }
    }
}

#[test]
fn matmul_is_bit_identical_for_any_thread_count() {
    // Several row tiles in every product (forward and both adjoint products); a long inner
    // dimension, split into slabs whose partial products are added in order (the forward
    // product of the second, the adjoint `Aᵀ C̄` of the third, as in the GMM's gradient).
    for &(m, p, q) in &[(300, 40, 50), (6, 4000, 5), (4000, 6, 5)] {
        let a = uniform(m * p, 1, -1.0, 1.0);
        let b = uniform(p * q, 2, -1.0, 1.0);
        let prog = program(m, p, q, true);
        let run = || prog.gradient_a(&[&a, &b]).unwrap();
        let g1 = in_pool(1, run);
        for t in [2, 3] {
            let g = in_pool(t, run);
            assert_eq!(
                g.value.to_bits(),
                g1.value.to_bits(),
                "{m}x{p}x{q}, {t} threads"
            );
            assert_eq!(
                bits(&g.grads.concat()),
                bits(&g1.grads.concat()),
                "{m}x{p}x{q}, {t} threads"
            );
        }
        // against the contraction written with combinators (another code path)
        let gs = program(m, p, q, false).gradient_a(&[&a, &b]).unwrap();
        assert!((gs.value - g1.value).abs() <= 1e-12 * g1.value.abs());
        for (x, y) in gs.grads.concat().iter().zip(&g1.grads.concat()) {
            assert!(
                (x - y).abs() <= 1e-10 * (1.0 + y.abs()),
                "{m}x{p}x{q}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn matmul_shape_errors_name_both_shapes() {
    let bl = Builder::new();
    let a = bl.input(&[2, 3]);
    let b = bl.input(&[4, 5]);
    let _ = a.matmul(&b);
    let e = bl.build(&[&a]).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { combinator, left, right }
            if combinator.contains("columns must be the right's rows")
                && left == &[2, 3] && right == &[4, 5]),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("matmul") && msg.contains("[2, 3]") && msg.contains("[4, 5]"),
        "{msg}"
    );
    // rank 1 is not a matrix
    let bl = Builder::new();
    let v = bl.input(&[3]);
    let b = bl.input(&[3, 2]);
    let _ = v.matmul(&b);
    let e = bl.build(&[&b]).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { combinator, .. } if combinator.contains("rank 2")),
        "{e}"
    );
    // a vector times itself: the rank, not the shapes, is what is wrong
    let bl = Builder::new();
    let v = bl.input(&[3]);
    let _ = v.matmul(&v);
    let msg = bl.build(&[&v]).unwrap_err().to_string();
    assert!(
        msg.contains("rank 2") && msg.contains("[3] vs [3]"),
        "{msg}"
    );
}

#[test]
fn matmul_of_different_element_types_is_an_error() {
    let bl = Builder::new();
    let a = bl.input(&[2, 2]);
    let b = bl.input_f32(&[2, 2]);
    let _ = a.matmul(&b);
    assert!(matches!(
        bl.build(&[&a]).unwrap_err(),
        Error::DTypeMismatch {
            combinator: "matmul",
            left: DType::F64,
            right: DType::F32
        }
    ));
}

#[test]
fn f32_matmul_computes_in_single_precision() {
    let (m, p, q) = (5, 6, 4);
    let a: Vec<f32> = uniform(m * p, 3, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let b: Vec<f32> = uniform(p * q, 4, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let bl = Builder::new();
    let ai = bl.input_f32(&[m, p]);
    let bi = bl.input_f32(&[p, q]);
    let c = ai.matmul(&bi);
    assert_eq!(c.dtype(), DType::F32);
    let loss = c.map(|v| v * v).sum().sum();
    let prog = bl.build_scalar(&loss).unwrap();
    let g = prog
        .gradient_typed(&[Input::F32(&a), Input::F32(&b)])
        .unwrap();
    let (Buffer::F32(ga), Buffer::F32(gb)) = (&g.grads[0], &g.grads[1]) else {
        panic!("f32 gradients of f32 inputs");
    };
    // ∂/∂A = 2 C Bᵀ, in f64 from the f32 data: equal to f32 rounding
    let c64: Vec<f64> = (0..m * q)
        .map(|x| {
            (0..p)
                .map(|k| a[x / q * p + k] as f64 * b[k * q + x % q] as f64)
                .sum()
        })
        .collect();
    for i in 0..m {
        for k in 0..p {
            let want: f64 = (0..q)
                .map(|j| 2.0 * c64[i * q + j] * b[k * q + j] as f64)
                .sum();
            assert!((ga[i * p + k] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()));
        }
    }
    for k in 0..p {
        for j in 0..q {
            let want: f64 = (0..m)
                .map(|i| 2.0 * a[i * p + k] as f64 * c64[i * q + j])
                .sum();
            assert!((gb[k * q + j] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()));
        }
    }
}

/// A zero adjoint sends nothing back through a matrix product, even against an operand's ∞ or
/// NaN (the crate's rule, as every other node keeps it): the dense adjoint products made
/// `0 · ∞ = NaN` on entries no used output depends on (a hunter). Padding rows masked out after
/// the product, against the closed form and the same contraction as `generate` + `sum`; an
/// unused output column beside an ∞; and over `f32`.
#[test]
fn a_zero_adjoint_sends_nothing_back_through_an_infinite_operand() {
    use adjoint_array::Sl;
    let grad = |use_matmul: bool, pad: f64| {
        let b = Builder::new();
        let x = b.constant_input(&[3, 2]); // data; row 2 is padding
        let w = b.input(&[2, 1]);
        let y = if use_matmul {
            x.matmul(&w)
        } else {
            b.generate(&[3, 1, 2], |i| x.at(&[i[0], i[2]]) * w.at(&[i[2], i[1]]))
                .sum()
        };
        let mask = b.use_array(&[3, 1], vec![1.0, 1.0, 0.0]);
        let loss = y
            .zip_with(&mask, |v, m| m.gt(0.0).select(v * v, 0.0))
            .sum()
            .sum();
        let p = b.build_scalar(&loss).unwrap();
        p.gradient_a(&[&[1.0, 2.0, 3.0, 4.0, pad, 0.0], &[0.5, -1.0]])
            .unwrap()
    };
    for pad in [f64::INFINITY, f64::NAN] {
        let (gm, gg) = (grad(true, pad), grad(false, pad));
        // y = (−1.5, −2.5): ∂/∂w = 2 Σᵢ yᵢ xᵢ over the two data rows
        assert_eq!(gg.grads[1], vec![-18.0, -26.0]);
        assert_eq!(gm.value, gg.value);
        assert_eq!(gm.grads[1], vec![-18.0, -26.0], "pad {pad}");
    }
    let b = Builder::new();
    let a = b.input(&[2, 2]);
    let c = b.input(&[2, 2]);
    let l = a.matmul(&c).slice(&[Sl::At(0), Sl::At(0)]); // C₀₀ = a₀₀c₀₀ + a₀₁c₁₀
    let p = b.build_scalar(&l).unwrap();
    let g = p
        .gradient_a(&[&[1.0, 2.0, 3.0, 4.0], &[1.0, f64::INFINITY, 2.0, 5.0]])
        .unwrap();
    assert_eq!(g.value, 5.0);
    assert_eq!(g.grads[0], vec![1.0, 2.0, 0.0, 0.0]);
    assert_eq!(g.grads[1], vec![1.0, 0.0, 2.0, 0.0]);
    // the same over f32
    let b = Builder::new();
    let a = b.input_f32(&[2, 2]);
    let c = b.input_f32(&[2, 2]);
    let l = a.matmul(&c).slice(&[Sl::At(0), Sl::At(0)]);
    let p = b.build_scalar(&l).unwrap();
    let (av, cv) = ([1.0f32, 2.0, 3.0, 4.0], [1.0f32, f32::INFINITY, 2.0, 5.0]);
    let g = p
        .gradient_typed(&[Input::F32(&av), Input::F32(&cv)])
        .unwrap();
    let Buffer::F32(ga) = &g.grads[0] else {
        panic!("f32 gradients of f32 inputs");
    };
    assert_eq!(ga, &vec![1.0f32, 2.0, 0.0, 0.0]);
}
