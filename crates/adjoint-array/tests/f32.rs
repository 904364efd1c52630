//! `f32` arrays: values against the same computation in plain Rust `f32` (bit-identical where
//! the operation order is the same), gradients against the `f64` program and finite
//! differences, casts and their adjoints, the mixed-type build error, thread-count identity.

use adjoint_array::{Buffer, Builder, DType, Error, Input, Rep};

fn f32s(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed as f32).sin() * 1.3) + 0.05)
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The engine's row-sum order: four interleaved accumulators (rows shorter than a block).
fn sum_lanes(v: &[f32]) -> f32 {
    let mut a = [0.0f32; 4];
    let mut it = v.chunks_exact(4);
    for c in &mut it {
        for k in 0..4 {
            a[k] += c[k];
        }
    }
    let mut s = (a[0] + a[1]) + (a[2] + a[3]);
    for &x in it.remainder() {
        s += x;
    }
    s
}

fn rel_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "element {i}: {x} vs {y} (scale {scale})"
        );
    }
}

#[test]
fn map_chain_is_plain_f32_arithmetic() {
    let n = 5000;
    let x = f32s(n, 1);
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let y = a
        .map(|v| v * 1.5 + 0.25)
        .map(|v| v * v)
        .map(|v| v - 0.5)
        .map(|v| v.max(0.1))
        .map(|v| (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p());
    assert_eq!(y.dtype(), DType::F32);
    let p = b.build(&[&y]).unwrap();
    let out = p.run_typed(&[Input::F32(&x)]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let v = v * 1.5 + 0.25;
            let v = v * v;
            let v = v - 0.5;
            let v = v.max(0.1);
            (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p()
        })
        .collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    // and it is not the f64 computation rounded at the end
    let b64 = Builder::new();
    let a64 = b64.input(&[n]);
    let y64 = a64
        .map(|v| v * 1.5 + 0.25)
        .map(|v| v * v)
        .map(|v| v - 0.5)
        .map(|v| v.max(0.1))
        .map(|v| (v.sqrt() / 3.0).exp() + v.sin() * v.tanh() - v.ln_1p());
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let o64 = b64.build(&[&y64]).unwrap().run(&[&x64]).unwrap();
    let rounded: Vec<f32> = o64[0].data().iter().map(|&v| v as f32).collect();
    assert_ne!(bits(&rounded), bits(&want));
}

#[test]
fn weak_constants_round_once_when_they_meet_f32() {
    let b = Builder::new();
    let a = b.input_f32(&[3]);
    // 0.1 + 0.2 is folded in f64 (a weak constant) and rounded once
    let y = a.map(|v| v * 0.1 + 0.2);
    let z = a.map(|_| adjoint_array::lit(0.1)); // a constant map of an f32 array is f32
    let p = b.build(&[&y, &z]).unwrap();
    let x = [1.0f32, 3.0, -7.5];
    let out = p.run_typed(&[x.as_slice().into()]).unwrap();
    let want: Vec<f32> = x.iter().map(|&v| v * 0.1 + 0.2).collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    assert_eq!(out[1], Buffer::F32(vec![0.1; 3]));
}

#[test]
fn sums_and_zip_with_are_plain_f32() {
    let (r, c) = (7, 301);
    let x = f32s(r * c, 2);
    let w = f32s(r * c, 3);
    let b = Builder::new();
    let xa = b.input_f32(&[r, c]);
    let wa = b.input_f32(&[r, c]);
    let z = xa.zip_with(&wa, |a, v| a * v + a.sin());
    let rows = z.sum(); // fused: a sum over the zip_with
    let zm = z.materialize();
    let p = b.build(&[&rows, &zm.sum()]).unwrap();
    let out = p.run_typed(&[(&x).into(), (&w).into()]).unwrap();
    let zz: Vec<f32> = x.iter().zip(&w).map(|(&a, &v)| a * v + a.sin()).collect();
    let want: Vec<f32> = (0..r).map(|i| sum_lanes(&zz[i * c..(i + 1) * c])).collect();
    assert_eq!(bits(out[0].as_f32().unwrap()), bits(&want));
    assert_eq!(bits(out[1].as_f32().unwrap()), bits(&want));
    // a scalar total of a vector
    let b = Builder::new();
    let v = b.input_f32(&[c]);
    let p = b.build(&[&v.map(|t| t * t).sum()]).unwrap();
    let out = p.run_typed(&[(&x[..c]).into()]).unwrap();
    let sq: Vec<f32> = x[..c].iter().map(|t| t * t).collect();
    assert_eq!(out[0], Buffer::F32(vec![sum_lanes(&sq)]));
}

/// Mean logistic loss of `w` on data `x` (n × d), labels `y` ∈ {−1, 1}, built over `dt`.
fn logistic(dt: DType, n: usize, d: usize) -> adjoint_array::Program {
    let b = Builder::new();
    let w = b.input_with(&[d], dt);
    let x = match dt {
        DType::F32 => b.constant_input_f32(&[n, d]),
        DType::F64 => b.constant_input(&[n, d]),
    };
    let y = match dt {
        DType::F32 => b.constant_input_f32(&[n]),
        DType::F64 => b.constant_input(&[n]),
    };
    let z = w
        .replicate(&[Rep::New(n), Rep::All])
        .zip_with(&x, |a, c| a * c)
        .sum();
    let l = z
        .zip_with(&y, |zi, yi| (-(yi * zi)).exp().ln_1p())
        .sum()
        .map(|s| s / n as f64);
    b.build_scalar(&l).unwrap()
}

#[test]
fn logistic_regression_gradient_in_f32() {
    let (n, d) = (64, 5);
    let x = f32s(n * d, 4);
    let y: Vec<f32> = (0..n)
        .map(|i| if i % 3 == 0 { 1.0 } else { -1.0 })
        .collect();
    let w: Vec<f32> = vec![0.3, -0.2, 0.5, 0.1, -0.4];
    let p32 = logistic(DType::F32, n, d);
    assert_eq!(p32.input_dtypes(), vec![DType::F32; 3]);
    let g32 = p32
        .gradient_typed(&[(&w).into(), (&x).into(), (&y).into()])
        .unwrap();
    assert_eq!(g32.value.dtype(), DType::F32);
    assert_eq!(g32.grads[0].dtype(), DType::F32);
    assert_eq!(g32.grads[1], Buffer::F32(vec![0.0; n * d]));
    // the value is the plain f32 computation
    let zs: Vec<f32> = (0..n)
        .map(|i| {
            let t: Vec<f32> = (0..d).map(|j| w[j] * x[i * d + j]).collect();
            sum_lanes(&t)
        })
        .collect();
    let ls: Vec<f32> = (0..n).map(|i| (-(y[i] * zs[i])).exp().ln_1p()).collect();
    assert_eq!(g32.value, Buffer::F32(vec![sum_lanes(&ls) / n as f32]));
    // gradient against the f64 program (reverse mode) and finite differences
    let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let y64: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
    let p64 = logistic(DType::F64, n, d);
    let g64 = p64.gradient_a(&[&w64, &x64, &y64]).unwrap();
    rel_close(&g32.grads[0].to_f64_vec(), &g64.grads[0], 1e-5);
    let h = 1e-6;
    let fd: Vec<f64> = (0..d)
        .map(|j| {
            let mut wp = w64.clone();
            wp[j] += h;
            let mut wm = w64.clone();
            wm[j] -= h;
            let f = |v: &[f64]| p64.run(&[v, &x64, &y64]).unwrap()[0].data()[0];
            (f(&wp) - f(&wm)) / (2.0 * h)
        })
        .collect();
    rel_close(&g32.grads[0].to_f64_vec(), &fd, 1e-5);
}

#[test]
fn gmm_like_log_sum_exp_gradient_in_f32() {
    // Σᵢ log Σₖ exp(−½ ‖xᵢ − μₖ‖² + αₖ), x: n × d data, μ: k × d, α: k.
    let (n, k, d) = (40, 6, 3);
    let build = |dt: DType| {
        let b = Builder::new();
        let mu = b.input_with(&[k, d], dt);
        let al = b.input_with(&[k], dt);
        let x = b.input_with(&[n, d], dt);
        let diff = x
            .replicate(&[Rep::All, Rep::New(k), Rep::All])
            .zip_with(&mu.replicate(&[Rep::New(n), Rep::All, Rep::All]), |a, m| {
                a - m
            });
        let q = diff.map(|t| t * t).sum(); // n × k
        let e = q
            .zip_with(&al.replicate(&[Rep::New(n), Rep::All]), |q, a| {
                (a - q * 0.5).exp()
            })
            .sum()
            .map(|s| s.ln())
            .sum();
        b.build_scalar(&e).unwrap()
    };
    let mu = f32s(k * d, 5);
    let al = f32s(k, 6);
    let x = f32s(n * d, 7);
    let p32 = build(DType::F32);
    let g32 = p32
        .gradient_typed(&[(&mu).into(), (&al).into(), (&x).into()])
        .unwrap();
    let w = |v: &[f32]| v.iter().map(|&t| f64::from(t)).collect::<Vec<f64>>();
    let p64 = build(DType::F64);
    let g64 = p64.gradient_a(&[&w(&mu), &w(&al), &w(&x)]).unwrap();
    let v32 = f64::from(g32.value.as_f32().unwrap()[0]);
    assert!((v32 - g64.value).abs() <= 1e-5 * g64.value.abs());
    for (a, b) in g32.grads.iter().zip(&g64.grads) {
        assert_eq!(a.dtype(), DType::F32);
        rel_close(&a.to_f64_vec(), b, 1e-5);
    }
}

#[test]
fn casts_and_their_adjoints() {
    // f64 input, f32 computation: the gradient is the f32 adjoint widened
    let b = Builder::new();
    let x = b.input(&[3]);
    let s = x.cast_f32().map(|v| v * v).sum();
    let p = b.build_scalar(&s).unwrap();
    let xs = [0.1, 0.2, 1.0 / 3.0];
    let g = p.gradient_typed(&[Input::F64(&xs)]).unwrap();
    let r: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    assert_eq!(g.value.dtype(), DType::F32);
    assert_eq!(
        g.grads[0],
        Buffer::F64(r.iter().map(|&v| f64::from(v * 2.0)).collect())
    );
    // f32 input, f64 computation: the f64 adjoint is rounded to f32
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let s = x.cast_f64().map(|v| v * 0.1).sum();
    assert_eq!(s.dtype(), DType::F64);
    let p = b.build_scalar(&s).unwrap();
    let g = p.gradient_typed(&[Input::F32(&[1.0, 2.0])]).unwrap();
    assert_eq!(g.value, Buffer::F64(vec![0.1 + 0.2]));
    assert_eq!(g.grads[0], Buffer::F32(vec![0.1f32; 2]));
    // casts inside closures
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let y = b.input(&[2]);
    let z = x.zip_with(&y, |a, c| a * c.cast_f32()).sum();
    let p = b.build_scalar(&z).unwrap();
    let g = p
        .gradient_typed(&[Input::F32(&[2.0, 3.0]), Input::F64(&[0.1, 0.2])])
        .unwrap();
    assert_eq!(g.grads[0], Buffer::F32(vec![0.1, 0.2]));
    assert_eq!(g.grads[1], Buffer::F64(vec![2.0, 3.0]));
}

#[test]
fn mixing_f32_and_f64_is_a_build_error() {
    let b = Builder::new();
    let x = b.input_f32(&[3]);
    let y = b.input(&[3]);
    let z = x.zip_with(&y, |a, c| a + c);
    let e = b.build(&[&z]).unwrap_err();
    assert_eq!(
        e,
        Error::DTypeMismatch {
            combinator: "zip_with",
            left: DType::F32,
            right: DType::F64
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("zip_with") && msg.contains("f32") && msg.contains("f64"),
        "{msg}"
    );
    // reading an f64 array inside a map over f32
    let b = Builder::new();
    let x = b.input_f32(&[3]);
    let y = b.input(&[3]);
    let z = x.map(|a| a * y.at(&[adjoint_array::lit(0.0)]));
    let msg = b.build(&[&z]).unwrap_err().to_string();
    assert!(
        msg.contains("map") && msg.contains("f32") && msg.contains("f64"),
        "{msg}"
    );
    // acond branches of different types
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let y = b.input(&[2]);
    let z = b.acond(|| adjoint_array::lit(1.0), &x, &y);
    let msg = b.build(&[&z]).unwrap_err().to_string();
    assert!(msg.contains("acond"), "{msg}");
    // not yet supported over f32: a clear error
    let b = Builder::new();
    let x = b.input_f32(&[2, 3]);
    let m = x.maximum();
    let msg = b.build(&[&m]).unwrap_err().to_string();
    assert!(msg.contains("fold") && msg.contains("cast_f64"), "{msg}");
    // and the cast is the way out
    let b = Builder::new();
    let x = b.input_f32(&[2, 3]);
    let m = x.cast_f64().maximum().cast_f32();
    let p = b.build(&[&m]).unwrap();
    let out = p
        .run_typed(&[Input::F32(&[1.0, 5.0, 2.0, -1.0, -3.0, -2.0])])
        .unwrap();
    assert_eq!(out[0], Buffer::F32(vec![5.0, -1.0]));
}

#[test]
fn typed_inputs_are_checked() {
    let b = Builder::new();
    let x = b.input_f32(&[2]);
    let p = b.build(&[&x.map(|v| v + 1.0)]).unwrap();
    assert!(matches!(
        p.run(&[&[1.0, 2.0]]),
        Err(Error::InputType {
            index: 0,
            expected: DType::F32,
            got: DType::F64
        })
    ));
    assert!(matches!(
        p.run_typed(&[Input::F64(&[1.0, 2.0])]),
        Err(Error::InputType { .. })
    ));
    assert_eq!(
        p.run_typed(&[Input::F32(&[1.0, 2.0])]).unwrap()[0],
        Buffer::F32(vec![2.0, 3.0])
    );
    // an f64 program through the typed API gives f64 buffers
    let b = Builder::new();
    let x = b.input(&[2]);
    let p = b.build(&[&x.map(|v| v * 0.1)]).unwrap();
    assert_eq!(
        p.run_typed(&[Input::F64(&[1.0, 2.0])]).unwrap()[0],
        Buffer::F64(vec![0.1, 0.2])
    );
}

fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn f32_results_are_bit_identical_for_any_thread_count() {
    let n = 200_000;
    let x = f32s(n, 8);
    let idx: Vec<f32> = (0..n).map(|i| ((i * 7919) % n) as f32).collect();
    let b = Builder::new();
    let a = b.input_f32(&[n]);
    let ix = b.constant_input_f32(&[n]);
    // a gather (scatter-add in the gradient), a long sum, an element-wise chain
    let g = ix.map(|i| a.at(&[i]));
    let s = g.zip_with(&a, |u, v| (u * v).sin() + u.exp() * 0.01).sum();
    let p = b.build_scalar(&s).unwrap();
    let run = || p.gradient_typed(&[(&x).into(), (&idx).into()]).unwrap();
    let g1 = with_threads(1, run);
    for t in [2, 3, 4] {
        let gt = with_threads(t, run);
        assert_eq!(gt, g1, "{t} threads");
    }
    assert_eq!(g1.grads[0].dtype(), DType::F32);
}
