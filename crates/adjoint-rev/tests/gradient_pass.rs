//! `f::gradient_pass_unchecked` keeps what its callees' routines compute (issue #13 item 4): a
//! call whose callee ends by uncomputing a routine that writes only its own ancillas leaves them
//! on a stack, and the mirrored uncall takes them back instead of recomputing the routine. The
//! program below calls such a callee in a loop, in a branch, in a nested routine of the body
//! and as a written uncall (`~f`), and calls a callee whose routine moves an argument (never
//! kept). The pass must give bit for bit what `call_unchecked`, the seed and `uncall_unchecked`
//! give (every routine input here is restored exactly), and forward mode's gradient.

use adjoint_core::forward::{self, Dual};
use adjoint_core::Real;
use adjoint_rev::prelude::*;
use adjoint_rev::GVar;

reversible! {
    /// `out += ‖row a of x‖` (rows of length `n`): its routine writes only its ancilla `s`.
    fn norm_into<T: RevReal>(out: &mut T, x: &mut Vec<T>, a: &mut usize, n: &mut usize) {
        @routine {
            let s = T::zero();
            for j in 0..n {
                s += x[a * n + j] * x[a * n + j];
            }
        }
        out += s.sqrt();
        ~@routine;
    }

    /// `x[a·n] += 1`.
    fn bump<T: RevReal>(x: &mut Vec<T>, a: &mut usize, n: &mut usize) {
        x[a * n] += 1.0;
    }

    /// `out += ‖row a of x with its first entry + 1‖`: the routine moves `x` (by a call; its
    /// uncomputation moves it back), so it is never kept.
    fn shifted_norm_into<T: RevReal>(out: &mut T, x: &mut Vec<T>, a: &mut usize, n: &mut usize) {
        @routine {
            bump(x, a, n);
            let s = T::zero();
            for j in 0..n {
                s += x[a * n + j].powi(2);
            }
        }
        out += s.sqrt();
        ~@routine;
    }

    /// `out += c·s` with `c = cos r`, `s = sin r`, `r = x[a]² + x[a+1]²`, when `r > 1` (a
    /// routine nested in a branch, like BA's Rodrigues rotation), else `out += r`.
    fn rot_into<T: RevReal>(out: &mut T, x: &mut Vec<T>, a: &mut usize) {
        @routine {
            let r = T::zero();
            r += x[a].powi(2);
            r += x[a + 1].powi(2);
        }
        if (r > 1.0, ~) {
            @routine {
                let c = T::zero();
                c += r.cos();
                let s = T::zero();
                s += r.sin();
            }
            out += c * s;
            ~@routine;
        } else {
            out += r;
        }
        ~@routine;
    }

    /// `l += p·m + sin e + w·d₃ + m + q` with `dᵢ = ‖xᵢ‖`, `e` the shifted norm of row 1,
    /// `m = d₀d₁ + ‖x₀‖` or `exp d₂`, `w = −‖x₃‖` and `p = ‖x₁‖` from a nested routine
    /// (row 1 again: after `shifted_norm_into`, which must have moved it back), and
    /// `q = rot_into(x, 1)` (entries 1 and 2).
    fn loss<T: RevReal>(l: &mut T, x: &mut Vec<T>, n: &mut usize) {
        @routine {
            let d = [T::zero(); 4];
            for i in 0..4 {
                norm_into(d[i], x, i, n);
            }
            let e = T::zero();
            shifted_norm_into(e, x, 1, n);
            let m = T::zero();
            if (d[0] > 1.0, ~) {
                m += d[0] * d[1];
                norm_into(m, x, 0, n);
            } else {
                m += d[2].exp();
            }
            let w = T::zero();
            ~norm_into(w, x, 3, n);
            let q = T::zero();
            rot_into(q, x, 1);
        }
        @routine inner {
            let p = T::zero();
            norm_into(p, x, 1, n);
        }
        l += p * m;
        ~@routine inner;
        l += e.sin();
        l += w * d[3];
        l += m;
        l += q;
        ~@routine;
    }
}

/// The same loss in plain Rust (forward mode's reference).
fn loss_ref<T: Real>(x: &[T], n: usize) -> T {
    let norm = |a: usize| {
        (0..n)
            .map(|j| x[a * n + j] * x[a * n + j])
            .fold(T::from(0.0), |s, v| s + v)
            .sqrt()
    };
    let d: Vec<T> = (0..4).map(norm).collect();
    let shifted = (0..n)
        .map(|j| {
            let v = if j == 0 { x[n] + 1.0 } else { x[n + j] };
            v * v
        })
        .fold(T::from(0.0), |s, v| s + v)
        .sqrt();
    let m = if d[0].value() > 1.0 {
        d[0] * d[1] + norm(0)
    } else {
        d[2].exp()
    };
    let r = x[1] * x[1] + x[2] * x[2];
    let q = if r.value() > 1.0 {
        r.cos() * r.sin()
    } else {
        r
    };
    norm(1) * m + shifted.sin() - norm(3) * d[3] + m + q
}

fn inputs(n: usize, scale: f64) -> Vec<f64> {
    (0..4 * n)
        .map(|i| scale * (0.9 * i as f64 + 0.3).sin())
        .collect()
}

#[test]
fn the_pass_keeps_routine_values_and_matches_call_seed_uncall() {
    for (n, scale) in [(3, 1.0), (5, 0.2), (1, -0.7)] {
        let x = inputs(n, scale);
        let gvars = || -> Vec<GVar<f64>> { x.iter().map(|&v| GVar::new(v, 0.0)).collect() };

        let (mut l, mut gx, mut nn) = (GVar::new(0.25, 0.0), gvars(), n);
        let mut value = 0.0;
        loss::gradient_pass_unchecked(&mut l, &mut gx, &mut nn, |l, _, _| {
            value = l.x;
            l.g = 1.0;
        })
        .unwrap();

        let (mut l2, mut gx2, mut nn2) = (GVar::new(0.25, 0.0), gvars(), n);
        loss::call_unchecked(&mut l2, &mut gx2, &mut nn2).unwrap();
        assert_eq!(value.to_bits(), l2.x.to_bits(), "the value at the seed");
        l2.g = 1.0;
        loss::uncall_unchecked(&mut l2, &mut gx2, &mut nn2).unwrap();
        assert_eq!(
            (l.x.to_bits(), l.g.to_bits()),
            (l2.x.to_bits(), l2.g.to_bits())
        );
        for (a, b) in gx.iter().zip(&gx2) {
            assert_eq!(
                (a.x.to_bits(), a.g.to_bits()),
                (b.x.to_bits(), b.g.to_bits())
            );
        }

        let want_value = 0.25 + loss_ref(&x, n);
        assert!((value - want_value).abs() <= 1e-12 * (1.0 + want_value.abs()));
        let want = forward::gradient(|v: &[Dual<f64>]| loss_ref(v, n), &x);
        for (g, w) in gx.iter().zip(&want) {
            assert!(
                (g.g - w).abs() <= 1e-10 * (1.0 + w.abs()),
                "n = {n}: {} vs {w}",
                g.g
            );
        }
    }
}

#[test]
fn both_branches_are_taken() {
    // `d₀ > 1` picks the branch with the call; each input set above must not test only one
    let d0 = |n: usize, s: f64| inputs(n, s)[..n].iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!(d0(3, 1.0) > 1.0 && d0(5, 0.2) <= 1.0);
    // `rot_into`'s `r > 1` likewise
    let r = |n: usize, s: f64| inputs(n, s)[1].powi(2) + inputs(n, s)[2].powi(2);
    assert!(r(3, 1.0) > 1.0 && r(5, 0.2) <= 1.0);
}

/// A pass leaves nothing on its stack: a second pass on this thread (which reuses it) gives the
/// same gradient, and a pass whose callee's routine keeps values runs inside a pass's seed.
#[test]
fn passes_reuse_their_stack() {
    let x = inputs(3, 1.0);
    let grad = || {
        let (mut l, mut gx, mut nn) = (
            GVar::new(0.0, 0.0),
            x.iter().map(|&v| GVar::new(v, 0.0)).collect::<Vec<_>>(),
            3,
        );
        let mut inner = Vec::new();
        loss::gradient_pass_unchecked(&mut l, &mut gx, &mut nn, |l, _, _| {
            l.g = 1.0;
            // a pass inside a pass takes a fresh stack
            let (mut l2, mut gx2, mut n2) = (
                GVar::new(0.0, 0.0),
                x.iter().map(|&v| GVar::new(v, 0.0)).collect::<Vec<_>>(),
                3,
            );
            loss::gradient_pass_unchecked(&mut l2, &mut gx2, &mut n2, |l, _, _| l.g = 1.0).unwrap();
            inner = gx2.iter().map(|g| g.g).collect();
        })
        .unwrap();
        (gx.iter().map(|g| g.g).collect::<Vec<_>>(), inner)
    };
    let (a, inner) = grad();
    let (b, _) = grad();
    assert_eq!(a, b);
    assert_eq!(a, inner);
    let want = forward::gradient(|v: &[Dual<f64>]| loss_ref(v, 3), &x);
    for (g, w) in a.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-10 * (1.0 + w.abs()), "{g} vs {w}");
    }
}

/// Forward over reverse through the pass (`GVar<Dual<f64>>`): the kept values carry tangents,
/// which keeping must not drop; the tangent of the gradient is a Hessian-vector product, against
/// forward mode's Hessian.
#[test]
fn hessian_vector_products_through_the_pass() {
    for (n, scale) in [(3, 1.0), (2, 0.2)] {
        let x = inputs(n, scale);
        let v: Vec<f64> = (0..x.len()).map(|i| 0.5 - 0.1 * i as f64).collect();
        let mut gx: Vec<GVar<Dual<f64>>> = x
            .iter()
            .zip(&v)
            .map(|(&xi, &vi)| GVar::new(Dual::new(xi, vi), Dual::new(0.0, 0.0)))
            .collect();
        let (mut l, mut nn) = (GVar::new(Dual::new(0.0, 0.0), Dual::new(0.0, 0.0)), n);
        loss::gradient_pass_unchecked(&mut l, &mut gx, &mut nn, |l, _, _| {
            l.g = Dual::new(1.0, 0.0)
        })
        .unwrap();
        let h = forward::hessian(|u: &[forward::Dual2]| loss_ref(u, n), &x);
        let want = forward::gradient(|u: &[Dual<f64>]| loss_ref(u, n), &x);
        for (i, g) in gx.iter().enumerate() {
            let hv: f64 = (0..x.len()).map(|j| h[i][j] * v[j]).sum();
            assert!((g.g.re - want[i]).abs() <= 1e-10 * (1.0 + want[i].abs()));
            assert!(
                (g.g.eps - hv).abs() <= 1e-9 * (1.0 + hv.abs()),
                "n = {n}, {i}: {} vs {hv}",
                g.g.eps
            );
        }
    }
}

reversible! {
    /// `out += √(Σᵢ xᵢ²)` over the first three entries, through a `Vec` ancilla (moved onto the
    /// stack and back, not copied).
    fn vec_norm<T: RevReal>(out: &mut T, x: &mut Vec<T>) {
        @routine {
            let v = vec![T::zero(); 3];
            for i in 0..3 {
                v[i] += x[i] * x[i];
            }
            let s = T::zero();
            for i in 0..3 {
                s += v[i];
            }
        }
        out += s.sqrt();
        ~@routine;
    }

    /// `l += exp(vec_norm(x))`.
    fn exp_norm<T: RevReal>(l: &mut T, x: &mut Vec<T>) {
        @routine {
            let a = T::zero();
            vec_norm(a, x);
        }
        l += a.exp();
        ~@routine;
    }
}

#[test]
fn a_vec_ancilla_is_kept_and_taken_back() {
    let x = vec![0.3, -1.2, 0.8, 5.0];
    let (mut l, mut gx) = (
        GVar::new(0.0, 0.0),
        x.iter().map(|&v| GVar::new(v, 0.0)).collect::<Vec<_>>(),
    );
    exp_norm::gradient_pass_unchecked(&mut l, &mut gx, |l, _| l.g = 1.0).unwrap();
    let f = |v: &[Dual<f64>]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt().exp();
    let want = forward::gradient(f, &x);
    for (g, w) in gx.iter().zip(&want) {
        assert!((g.g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{} vs {w}", g.g);
    }
    let (mut l2, mut gx2) = (
        GVar::new(0.0, 0.0),
        x.iter().map(|&v| GVar::new(v, 0.0)).collect::<Vec<_>>(),
    );
    exp_norm::call_unchecked(&mut l2, &mut gx2).unwrap();
    l2.g = 1.0;
    exp_norm::uncall_unchecked(&mut l2, &mut gx2).unwrap();
    for (a, b) in gx.iter().zip(&gx2) {
        assert_eq!(
            (a.x.to_bits(), a.g.to_bits()),
            (b.x.to_bits(), b.g.to_bits())
        );
    }
}

reversible! {
    /// The identity on `(z, x)`: the routine writes the argument `z` and its uncomputation
    /// takes it back.
    fn writes_arg<T: RevReal>(z: &mut T, x: &mut T) {
        @routine {
            z += x.exp();
        }
        ~@routine;
    }

    /// `y += a·z` with `a = eˣ`, where the routine first adds `ln a · a` to the argument `z`
    /// when `a > 2` (taken back by the uncomputation): `y += eˣ·(z + [eˣ > 2]·x·eˣ)`.
    fn writes_arg_in_branch<T: RevReal>(y: &mut T, x: &mut T, z: &mut T) {
        @routine {
            let a = T::zero();
            a += x.exp();
            if (a > 2.0, ~) {
                let b = T::zero();
                b += a.ln();
                z += b * a;
                b -= a.ln();
                unlet b = T::zero();
            }
        }
        y += a * z;
        ~@routine;
    }
}

#[test]
fn a_final_routine_that_writes_an_argument_is_not_left_out() {
    // Leaving out the uncomputation let the seed see `z` still holding the routine's value, and
    // the gradient then moved through the pair of routine runs the pass had left out (a
    // reviewer helper's hunt: x.g = e^0.5 where the identity's is 0).
    let (mut z, mut x) = (GVar::new(0.0, 0.0), GVar::new(0.5, 0.0));
    writes_arg::gradient_pass_unchecked(&mut z, &mut x, |z, _| z.g = 1.0).unwrap();
    assert_eq!((z.x, x.x, z.g, x.g), (0.0, 0.5, 1.0, 0.0));
    // Both branches, against forward mode (∂y/∂z = eˣ).
    let y_of = |x: Dual<f64>, z: Dual<f64>| {
        let a = x.exp();
        let z = if a > 2.0 { z + a.ln() * a } else { z };
        a * z
    };
    for x0 in [0.2, 1.5] {
        let (mut y, mut x, mut z) = (GVar::new(0.0, 0.0), GVar::new(x0, 0.0), GVar::new(0.7, 0.0));
        writes_arg_in_branch::gradient_pass_unchecked(&mut y, &mut x, &mut z, |y, _, _| y.g = 1.0)
            .unwrap();
        let dx = forward::derivative(|x| y_of(x, Dual::constant(0.7)), x0);
        assert!(
            (x.g - dx).abs() < 1e-14 * dx.abs(),
            "x0 = {x0}: {} vs {dx}",
            x.g
        );
        assert!(
            (z.g - x0.exp()).abs() < 1e-14 * x0.exp(),
            "x0 = {x0}: {}",
            z.g
        );
    }
}
