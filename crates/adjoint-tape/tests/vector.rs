//! The slice primitives of `adjoint_core::vector` on the tape: one entry per result, gradients
//! against forward mode and finite differences, and in every position a `Var` can be in
//! (inputs, intermediate results, constants, values imported from another job).

use adjoint_core::check::check_gradient;
use adjoint_core::prelude::*;
use adjoint_core::{forward, vector};
use adjoint_tape::{hvp, join, Tape, Var};

mod common;
use common::in_pool;

fn input(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (seed + 0.37 * i as f64).sin() * 1.5)
        .collect()
}

/// A loss touching every primitive, with constants and intermediate results as operands.
fn loss<T: Real>(p: &[T]) -> T {
    let n = 6;
    let (m, rest) = p.split_at(3 * n); // 3 × 6 matrix
    let (x, y) = rest.split_at(n); // x: 6, y: 6
    let mut z = vec![T::cst(0.0); 3];
    vector::matvec(m, x, &mut z);
    let xs: Vec<T> = x.iter().map(|&v| v.sin()).collect();
    let mut w: Vec<T> = y.to_vec();
    vector::axpy(z[1], &xs, &mut w); // w = y + z₁ sin(x)
    let c: Vec<T> = (0..n).map(|i| T::cst(0.5 * i as f64)).collect();
    vector::dot(&w, &xs)
        + vector::logsumexp(&z) * vector::sum(&w)
        + vector::dot(&c, y)
        + vector::dot(x, x)
}

#[test]
fn every_primitive_matches_forward_mode_and_finite_differences() {
    let p = input(30, 0.3);
    let (v, g) = Tape::new().value_and_grad(|v: &[Var]| loss(v), &p);
    let reference = forward::gradient(|v| loss(v), &p);
    assert!(
        (v - loss(&p)).abs() <= 1e-12 * v.abs().max(1.0),
        "{v} vs {}",
        loss(&p)
    );
    for (i, (a, b)) in g.iter().zip(&reference).enumerate() {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{i}: {a} vs {b}");
    }
    check_gradient(|v| loss(v), &p, &g).assert_passed();
}

#[test]
fn one_entry_per_result() {
    let n = 1000;
    let x = input(2 * n, 1.0);
    let mut tape = Tape::new();
    let (_, g) = tape.value_and_grad(|v: &[Var]| vector::dot(&v[..n], &v[n..]), &x);
    // The sink, 2n inputs and one dot: no per-element entries.
    assert_eq!(tape.entries(), 1 + 2 * n + 1);
    assert_eq!(&g[..n], &x[n..]);
    assert_eq!(&g[n..], &x[..n]);
    // The scalar loop records 2n − 1 more.
    tape.value_and_grad(
        |v: &[Var]| {
            v[..n]
                .iter()
                .zip(&v[n..])
                .map(|(a, b)| *a * *b)
                .sum::<Var>()
        },
        &x,
    );
    assert!(tape.entries() >= 1 + 2 * n + 2 * n - 1);
    // matvec: one entry per row; logsumexp, sum: one each; axpy: one per element.
    let (r, c) = (7, 5);
    let p = input(r * c + c, 2.0);
    tape.value_and_grad(
        |v: &[Var]| {
            let mut out = vec![Var::constant(0.0); r];
            vector::matvec(&v[..r * c], &v[r * c..], &mut out);
            vector::logsumexp(&out) + vector::sum(&out)
        },
        &p,
    );
    assert_eq!(tape.entries(), 1 + p.len() + r + 2 + 1);
}

#[test]
fn vector_results_flow_through_joins() {
    let p = input(30, 0.9);
    let f = |v: &[Var]| {
        let (a, b) = join(
            || vector::dot(&v[..15], &v[15..]),
            || vector::logsumexp(&v[3..20]),
        );
        // Operands imported from the forked jobs and from the root's inputs.
        vector::dot(&[a, b, v[0]], &[b, v[1], a])
    };
    let plain = |v: &[f64]| {
        let (a, b) = (
            vector::dot(&v[..15], &v[15..]),
            vector::logsumexp(&v[3..20]),
        );
        vector::dot(&[a, b, v[0]], &[b, v[1], a])
    };
    let g = Tape::new().value_and_grad(f, &p).1;
    let reference = forward::gradient(
        |v| {
            let (a, b) = (
                vector::dot(&v[..15], &v[15..]),
                vector::logsumexp(&v[3..20]),
            );
            vector::dot(&[a, b, v[0]], &[b, v[1], a])
        },
        &p,
    );
    for (a, b) in g.iter().zip(&reference) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
    check_gradient(plain, &p, &g).assert_passed();
}

#[test]
fn hessian_vector_products_through_the_primitives() {
    let p = input(30, 1.7);
    let v = input(30, -0.4);
    let h = hvp(|x| loss(x), &p, &v);
    let full = forward::hessian(|x| loss(x), &p);
    for (i, row) in full.iter().enumerate() {
        let hv: f64 = row.iter().zip(&v).map(|(a, b)| a * b).sum();
        assert!(
            (h[i] - hv).abs() <= 1e-10 * hv.abs().max(1.0),
            "{i}: {} vs {hv}",
            h[i]
        );
    }
}

#[test]
fn logsumexp_limits_and_checked_mode() {
    // Large inputs: stable.
    let g = Tape::new()
        .value_and_grad(|v: &[Var]| vector::logsumexp(v), &[1000.0, 1000.0])
        .1;
    assert_eq!(g, vec![0.5, 0.5]);
    // −∞ inputs get zero weight.
    let (y, g) =
        Tape::new().value_and_grad(|v: &[Var]| vector::logsumexp(v), &[f64::NEG_INFINITY, 0.0]);
    assert_eq!((y, g), (0.0, vec![0.0, 1.0]));
    // Checked mode names the primitive of a NaN produced from finite operands.
    let e = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| vector::dot(&[v[0].ln()], &[v[1]]), &[-1.0, 2.0])
        .unwrap_err();
    assert_eq!(e.primitive, "Ln");
}

/// A slice primitive with a non-finite operand after the first, or a constant one, did not
/// make that value: checked mode blamed `sum`/`dot` for the input's ∞ (where `x[0] + x[1]` is
/// `Ok`), and so hid a later culprit (a hunter). Each case against the scalar spelling.
#[test]
fn checked_mode_does_not_blame_a_primitive_for_its_operands() {
    let inf = f64::INFINITY;
    let checked = |f: &dyn Fn(&[Var]) -> Var, x: &[f64]| {
        Tape::new()
            .checked()
            .try_value_and_grad(|v: &[Var]| f(v), x)
    };
    let c = Var::constant;
    for (f, scalar) in [
        (
            &(|x: &[Var]| vector::sum(x)) as &dyn Fn(&[Var]) -> Var,
            &(|x: &[Var]| x[0] + x[1]) as &dyn Fn(&[Var]) -> Var,
        ),
        (
            &|x: &[Var]| vector::dot(x, &[c(2.0), c(3.0)]),
            &|x: &[Var]| x[0] * 2.0 + x[1] * 3.0,
        ),
        (&|x: &[Var]| vector::sum(&[x[0], c(inf)]), &|x: &[Var]| {
            x[0] + inf
        }),
        (
            &|x: &[Var]| {
                let mut out = [Var::zero()];
                vector::matvec(&[c(1.0), c(2.0)], x, &mut out);
                out[0]
            },
            &|x: &[Var]| x[0] + x[1] * 2.0,
        ),
    ] {
        let (a, b) = (checked(f, &[1.0, inf]), checked(scalar, &[1.0, inf]));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1);
    }
    // The culprit after the primitive is the one reported, as in the scalar spelling.
    let e = checked(
        &|x: &[Var]| vector::sum(&x[..2]) * 0.0 + (x[2] - 1.0).ln(),
        &[1.0, f64::NAN, 0.5],
    )
    .unwrap_err();
    assert_eq!(e.primitive, "Ln");
    // A primitive that does make the value from finite operands is still named.
    let e = checked(&|x: &[Var]| vector::sum(x), &[f64::MAX, f64::MAX]).unwrap_err();
    assert_eq!(e.primitive, "sum");
    // A matrix-vector product (recorded row by row in checked mode) is named as one, not as
    // the `dot` the user never called (a hunter).
    let e = checked(
        &|x: &[Var]| {
            let mut out = [Var::zero(); 2];
            vector::matvec(&[x[0], x[1], x[1], x[0]], x, &mut out);
            out[0] + out[1]
        },
        &[2e300, 1.0],
    )
    .unwrap_err();
    assert_eq!(e.primitive, "matvec (a row)");
    assert!(e.to_string().contains("matvec (a row)("), "{e}");
}

#[test]
fn length_mismatch_is_a_clear_panic() {
    let r = std::panic::catch_unwind(|| vector::dot(&[1.0, 2.0], &[1.0]));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("lengths 2 and 1 differ"), "{msg}");
}

/// Gradients of `f` from an unchecked tape (slice primitives on whole runs of values take the
/// fast path: a `matvec` is one record) and from a checked one (every primitive takes the
/// per-result path), which must agree — bit for bit when `same_bits` (the fast path adds in
/// the per-row path's order unless it copied a vector into a run first) — and against forward
/// mode.
fn both_paths(
    f: impl Fn(&[Var]) -> Var + Copy,
    plain: impl Fn(&[Dual64]) -> Dual64,
    p: &[f64],
    same_bits: bool,
) {
    let (y, fast) = Tape::new().value_and_grad(f, p);
    let (yc, slow) = Tape::new().checked().try_value_and_grad(f, p).unwrap();
    assert_eq!(y.to_bits(), yc.to_bits());
    if same_bits {
        assert_eq!(fast, slow);
    }
    for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
        assert!((a - b).abs() <= 1e-14 * b.abs().max(1.0), "{i}: {a} vs {b}");
    }
    let reference = forward::gradient(plain, p);
    for (i, (a, b)) in fast.iter().zip(&reference).enumerate() {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{i}: {a} vs {b}");
    }
}

use adjoint_core::forward::Dual64;

#[test]
fn whole_matrix_vector_products_match_the_per_row_path() {
    let (r, c) = (7, 5);
    // `[M, x]`, `[x, M]`, `M` times part of itself (overlapping runs), `x` an intermediate
    // vector, `x` not a run (reversed: copied into one), a product as the very first
    // operation, rows whose result is unused (zero adjoint), a 1 × c and an r × 1 product, and
    // products with constants.
    fn cases<T: Real>(v: &[T], r: usize, c: usize, copied: bool) -> T {
        let mv = |m: &[T], x: &[T], rows: usize| {
            let mut out = vec![T::cst(0.0); rows];
            vector::matvec(m, x, &mut out);
            out
        };
        let first = mv(&v[..r * c], &v[r * c..r * c + c], r);
        let swapped = mv(&v[c..c + r * c], &v[..c], r);
        let overlapping = mv(&v[..r * c], &v[2..2 + c], r);
        let xs: Vec<T> = v[..c].iter().map(|&t| t.sin()).collect();
        let intermediate = mv(&v[c..c + r * c], &xs, r);
        let not_a_run = if copied {
            let mut reversed: Vec<T> = v[..c].iter().rev().copied().collect();
            reversed[1] = T::cst(0.25); // and a constant among them
            vector::sum(&mv(&v[c..c + r * c], &reversed, r))
        } else {
            T::cst(1.0)
        };
        let row = mv(&v[..c], &v[c..2 * c], 1);
        let column = mv(&v[..r], &v[r..r + 1], r);
        // Constant data times active weights, active weights times constant data, constants.
        let data: Vec<T> = (0..r * c).map(|i| T::cst((i as f64 * 0.3).cos())).collect();
        let by_data = mv(&data, &v[r * c..r * c + c], r);
        let of_data = mv(&v[..r * c], &data[..c], r);
        let constants = mv(&data, &data[..c], r);
        first[0] * 0.5
            + vector::sum(&first[2..])
            + vector::dot(&swapped, &overlapping)
            + vector::logsumexp(&intermediate)
            + not_a_run * row[0]
            + vector::dot(&column, &first)
            + vector::dot(&by_data, &of_data)
            + vector::dot(&constants, &by_data)
    }
    let p = input(r * c + c + 3, 0.7);
    both_paths(
        |v| cases(v, r, c, false),
        |v| cases(v, r, c, false),
        &p,
        true,
    );
    both_paths(
        |v| cases(v, r, c, true),
        |v| cases(v, r, c, true),
        &p,
        false,
    );
}

#[test]
fn primitives_on_runs_and_on_scattered_values_agree() {
    fn f<T: Real>(v: &[T]) -> T {
        let n = v.len() / 2;
        let (a, b) = v.split_at(n);
        let every_other: Vec<T> = v.iter().step_by(2).copied().collect();
        let with_constant: Vec<T> = a.iter().copied().chain([T::cst(2.0)]).collect();
        vector::dot(a, b)
            + vector::dot(&every_other, &v[..every_other.len()])
            + vector::sum(&with_constant) * vector::logsumexp(b)
            + vector::sum(&v[1..])
    }
    let p = input(40, -0.3);
    both_paths(f, f, &p, true);
}

#[test]
fn matrix_vector_products_in_forked_jobs() {
    // Inside a job of a fork: `M` a run of that job, `x` mixing a value of the parent job (an
    // import: the product takes the per-row path) or only the job's own values (copied into a
    // run: one record).
    fn f(v: &[Var]) -> Var {
        let a = v[0] * v[1];
        let (l, r) = join(
            || {
                let m: Vec<Var> = v[..6].iter().map(|t| t.sin()).collect();
                let mut out = [Var::constant(0.0); 3];
                vector::matvec(&m, &[a, v[7]], &mut out);
                vector::sum(&out)
            },
            || {
                let m: Vec<Var> = v[2..8].iter().map(|t| t.cos()).collect();
                let x = [v[1].exp(), Var::constant(0.5)];
                let mut out = [Var::constant(0.0); 3];
                vector::matvec(&m, &[x[1], x[0]], &mut out);
                vector::dot(&out, &m[..3])
            },
        );
        l * r + a
    }
    fn plain(v: &[Dual64]) -> Dual64 {
        let a = v[0] * v[1];
        let m: Vec<Dual64> = v[..6].iter().map(|t| t.sin()).collect();
        let mut out = [Dual64::cst(0.0); 3];
        vector::matvec(&m, &[a, v[7]], &mut out);
        let l = vector::sum(&out);
        let m: Vec<Dual64> = v[2..8].iter().map(|t| t.cos()).collect();
        let mut out = [Dual64::cst(0.0); 3];
        vector::matvec(&m, &[Dual64::cst(0.5), v[1].exp()], &mut out);
        l * vector::dot(&out, &m[..3]) + a
    }
    both_paths(f, plain, &input(8, 0.2), false);
}

#[test]
fn primitives_inside_a_checkpoint() {
    // A checkpointed region with a whole matvec, a dot of runs and a logsumexp: recomputed on
    // the reverse pass's own tape, bit for bit the un-checkpointed gradient.
    use adjoint_tape::checkpoint;
    fn layer<T: Real>(s: &[T]) -> Vec<T> {
        let (m, x) = s.split_at(12);
        let mut out = vec![T::cst(0.0); 3];
        vector::matvec(m, x, &mut out);
        let y: Vec<T> = out.iter().map(|o| o.tanh()).collect();
        vec![vector::dot(&y, &y), vector::logsumexp(&y)]
    }
    let p = input(16, 0.45);
    let ck = Tape::new()
        .value_and_grad(
            |v: &[Var]| {
                let r = checkpoint(v, |s: &[Var]| layer(s));
                r[0] * r[1] + v[0]
            },
            &p,
        )
        .1;
    let plain = Tape::new()
        .value_and_grad(
            |v: &[Var]| {
                let r = layer(v);
                r[0] * r[1] + v[0]
            },
            &p,
        )
        .1;
    assert_eq!(ck, plain);
    let reference = forward::gradient(
        |v| {
            let r = layer(v);
            r[0] * r[1] + v[0]
        },
        &p,
    );
    for (a, b) in ck.iter().zip(&reference) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
}

#[test]
fn jacobian_of_a_layer_through_one_matvec_record() {
    // y = tanh(W x) with W and x inputs: one sweep per output over the same recording (the
    // whole-matvec record is swept again each time, with one result's adjoint nonzero).
    let (r, c) = (4, 3);
    fn layer<T: Real>(v: &[T], r: usize, c: usize) -> Vec<T> {
        let mut out = vec![T::cst(0.0); r];
        vector::matvec(&v[..r * c], &v[r * c..], &mut out);
        out.iter().map(|o| o.tanh()).collect()
    }
    let p = input(r * c + c, 0.15);
    let j = adjoint_tape::jacobian(|v: &[Var]| layer(v, r, c), &p);
    assert_eq!(j.len(), r);
    for (i, row) in j.iter().enumerate() {
        let reference = forward::gradient(|v| layer(v, r, c)[i], &p);
        for (a, b) in row.iter().zip(&reference) {
            assert!(
                (a - b).abs() <= 1e-13 * b.abs().max(1.0),
                "row {i}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn logsumexp_with_infinite_entries_has_softmax_limit_as_gradient() {
    // softmax(a) → 1/k on the k entries at +∞: the tape gave [0, 0] (a zero partial from
    // `ln′(∞) · exp′(∞)`), forward mode NaN.
    let inf = f64::INFINITY;
    for (x, want) in [
        (vec![inf, 1.0], vec![1.0, 0.0]),
        (vec![inf, inf], vec![0.5, 0.5]),
        (vec![-3.0, inf, 2.0, inf], vec![0.0, 0.5, 0.0, 0.5]),
    ] {
        let (v, g) = Tape::new().value_and_grad(|v: &[Var]| vector::logsumexp(v), &x);
        assert_eq!((v, &g), (inf, &want), "tape at {x:?}");
        let gf = forward::gradient(|v| vector::logsumexp(v), &x);
        assert_eq!(gf, want, "forward mode at {x:?}");
        assert_eq!(vector::logsumexp(&x), inf);
    }
    // a NaN entry still makes everything NaN
    let g = Tape::new()
        .value_and_grad(|v: &[Var]| vector::logsumexp(v), &[inf, f64::NAN])
        .1;
    assert!(g.iter().all(|g| g.is_nan()), "{g:?}");
}

/// A layer `W h` whose activations `h` (built by one loop: a run) sit where a job's id range
/// ends in one recording and not in another. Where a range ends depends on the buffer a job
/// recycled, so on earlier recordings and on which thread opened which job first; a run cut by
/// a range end was not a run, `matvec` copied `h` into one and added its adjoint in another
/// order, and the gradient's last bits changed between two calls on one tape and between 1 and
/// 7 threads (a hunter). Runs are now found by position, across range ends.
fn layer<T: Real>(w: &[T], src: &[T], pad: usize) -> T {
    let mut acc = src[0];
    for _ in 0..pad {
        acc *= 1.0001;
    }
    let t: Vec<T> = src.iter().map(|v| *v + acc).collect();
    let h: Vec<T> = t.iter().map(|v| v.tanh()).collect();
    let mut out = vec![T::cst(0.0); 8];
    vector::matvec(w, &h, &mut out);
    // (and the other slice primitives on the same run, whose fallback forms runs by position)
    let others = vector::dot(&h, &t) + vector::sum(&h) * vector::logsumexp(&h);
    out.iter().map(|o| o.sin()).sum::<T>() + h.iter().map(|v| *v * *v).sum::<T>() + others
}

#[test]
fn a_run_across_an_id_range_end_gives_the_same_bits() {
    let x: Vec<f64> = (0..45).map(|i| ((i * 7 % 13) as f64) * 0.1 - 0.6).collect();
    let bits = |g: &[f64]| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for pad in 0..80 {
        let f = |x: &[Var]| layer(&x[..40], &x[40..45], pad);
        let mut t = Tape::new();
        let first = t.value_and_grad(f, &x).1;
        let reference = forward::gradient(|x| layer(&x[..40], &x[40..45], pad), &x);
        for (a, b) in first.iter().zip(&reference) {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "pad {pad}: {a} vs {b}"
            );
        }
        for call in 1..3 {
            let again = t.value_and_grad(f, &x).1;
            assert_eq!(bits(&again), bits(&first), "pad {pad}, call {call}");
        }
        assert_eq!(bits(&adjoint_tape::grad(f, &x)), bits(&first), "pad {pad}");
    }
    // Jobs opened in different orders on 1 and 7 threads, each tape reused three times.
    fn work(x: &[Var], pad: usize) -> Var {
        let s = vector::sum(x);
        let w: Vec<Var> = x[..40].iter().map(|v| *v * 1.0).collect();
        let src: Vec<Var> = x[40..45].iter().map(|v| *v * 1.0).collect();
        layer(&w, &src, pad) + s
    }
    let prog = |x: &[Var]| {
        let (a, b) = join(
            || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                let (a1, a2) = join(|| work(x, 30), || work(x, 31));
                a1 * a2
            },
            || work(x, 20),
        );
        a + b
    };
    let run = |threads: usize| {
        in_pool(threads, || {
            let mut t = Tape::new();
            (0..3)
                .map(|_| bits(&t.value_and_grad(prog, &x).1))
                .collect::<Vec<_>>()
        })
    };
    let one = run(1);
    assert_eq!(one[1], one[0]);
    assert_eq!(one[2], one[0]);
    assert_eq!(run(7), one);
}

/// The same for the matrix: `M` built by one loop (a run) where a range end may lie inside it,
/// times a vector that is not a run (copied) or is constants. A matrix cut by a range end went
/// to the per-row path, which adds `x̄` row by row, where a whole one is one record: the
/// second call on one tape changed the last bit (a hunter).
fn built_matrix<T: Real>(v: &[T], pad: usize, constant_x: bool) -> T {
    let mut a = v[0];
    for k in 0..pad {
        a = a * 0.999 + k as f64 * 1e-3;
    }
    let t: Vec<T> = (0..12)
        .map(|k| v[k % 2] * (0.1 + 0.37 * k as f64))
        .collect();
    let m: Vec<T> = t.iter().map(|a| a.sin()).collect();
    let x = if constant_x {
        [T::cst(-0.4), T::cst(1.3)]
    } else {
        [v[1], v[0]] // not a run
    };
    let mut o = vec![T::cst(0.0); 6];
    vector::matvec(&m, &x, &mut o);
    let w = [0.3, -1.7, 2.9, 0.11, -0.61, 1.37];
    let mut s = a * 1e-3;
    for (o, w) in o.iter().zip(w) {
        s += *o * w;
    }
    s + v[0] * 0.123456789 + v[1] * 3.3333333
}

#[test]
fn a_matrix_across_an_id_range_end_gives_the_same_bits() {
    let x = [0.712345678, -1.3456789];
    let bits = |g: &[f64]| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for constant_x in [false, true] {
        for pad in 0..80 {
            let f = |v: &[Var]| built_matrix(v, pad, constant_x);
            let reference = forward::gradient(|v| built_matrix(v, pad, constant_x), &x);
            let fresh = Tape::new().value_and_grad(f, &x).1;
            for (a, b) in fresh.iter().zip(&reference) {
                assert!(
                    (a - b).abs() <= 1e-13 * b.abs().max(1.0),
                    "pad {pad}: {a} vs {b}"
                );
            }
            let mut t = Tape::new();
            t.value_and_grad(|v: &[Var]| built_matrix(v, 500, constant_x), &x);
            for call in 0..2 {
                let again = t.value_and_grad(f, &x).1;
                assert_eq!(
                    bits(&again),
                    bits(&fresh),
                    "pad {pad}, call {call}, {constant_x}"
                );
            }
        }
    }
}
