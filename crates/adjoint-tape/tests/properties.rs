//! Property tests: random straight-line and branching programs, tape gradient against forward
//! mode (relative 1e-10), and tape Hessian-vector products against forward Hessians.

use adjoint_core::forward::{self, Dual64};
use adjoint_core::Real;
use adjoint_tape::{grad, hvp, Var};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Instr {
    Un(u8, usize),
    Bin(u8, usize, usize),
    /// if v[a] > v[b] { un(op1, a) } else { bin(op2, a, b) }
    Branch(usize, usize, u8, u8),
}

/// Unary functions kept inside their domains.
fn un<T: Real>(op: u8, x: T) -> T {
    match op % 16 {
        0 => x.sin(),
        1 => x.cos(),
        2 => x.tanh(),
        3 => x.tanh().exp(),
        4 => (x * x + 1.0).ln(),
        5 => (x * x + 1.0).sqrt(),
        6 => x.atan(),
        7 => -x,
        8 => x.powi(3) * 0.1,
        9 => (x * x + 0.5).recip(),
        10 => x.sinh() * 0.1,
        11 => x.asinh(),
        12 => x.tanh().asin(),
        13 => x.erf(),
        14 => (x * x + 1.0).lgamma(),
        _ => x.cbrt() * (x * x + 1.0).recip(),
    }
}

/// Binary functions; `atan2` and `hypot` are taken away from the origin. There their second
/// partials grow as 1/r² and cancel in `atan2(v, v)`, `hypot(v, v)` or `atan2(v, 2v)` (the
/// generator draws one value twice, or one proportional to it, at small |v|): forward mode
/// adds the cancelling terms before they meet anything, the tape sums each with the other
/// contributions to `v`'s adjoint, whose low bits they absorb, and both are right only to the
/// rounding of the large terms, which reached 4e-9 of the result (`hypot(v, v)` at v = 6e-5 in
/// a Hessian) and 3e-7 (`atan2(v, v)` at v = −2e-6), in about one run in three hundred. No
/// tolerance that would still catch a wrong rule covers that; the rules near the origin have
/// tests of their own.
fn bin<T: Real>(op: u8, x: T, y: T) -> T {
    match op % 9 {
        0 => x + y,
        1 => x - y,
        2 => x * y,
        3 => x / (y * y + 1.0),
        4 => (x * x + 1.0).powf(y.tanh()),
        5 => x.atan2(y + 2.5),
        6 => x.hypot(y + 2.5),
        7 => x.max(y) + x * 0.5,
        _ => x.min(y) * y,
    }
}

/// One instruction's result over the values computed so far.
fn scalar_op<T: Real>(ins: &Instr, v: &[T]) -> T {
    let n = v.len();
    match *ins {
        Instr::Un(op, a) => un(op, v[a % n]),
        Instr::Bin(op, a, b) => bin(op, v[a % n], v[b % n]),
        Instr::Branch(a, b, o1, o2) => {
            if v[a % n] > v[b % n] {
                un(o1, v[a % n])
            } else {
                bin(o2, v[a % n], v[b % n])
            }
        }
    }
}

fn run<T: Real>(prog: &[Instr], x: &[T]) -> T {
    let mut v: Vec<T> = x.to_vec();
    for ins in prog {
        let r = scalar_op(ins, &v);
        // Keep magnitudes tame so every program stays finite.
        v.push(r.tanh() * 2.0 + r * 0.01);
    }
    v.iter().rev().take(4).copied().sum()
}

fn instr() -> impl Strategy<Value = Instr> {
    prop_oneof![
        (any::<u8>(), 0..64usize).prop_map(|(o, a)| Instr::Un(o, a)),
        (any::<u8>(), 0..64usize, 0..64usize).prop_map(|(o, a, b)| Instr::Bin(o, a, b)),
        (0..64usize, 0..64usize, any::<u8>(), any::<u8>())
            .prop_map(|(a, b, o1, o2)| Instr::Branch(a, b, o1, o2)),
    ]
}

/// Relative agreement; two engines agreeing on a non-finite value (e.g. cbrt at 0) also count.
fn close(a: f64, b: f64, rtol: f64) -> bool {
    if !a.is_finite() || !b.is_finite() {
        return a.is_nan() && b.is_nan() || a == b;
    }
    (a - b).abs() <= rtol * a.abs().max(b.abs()).max(1e-3)
}

/// Why a case whose tape derivative is not finite is skipped although forward mode's is: a
/// derivative through an infinite partial whose operand's tangent is exactly zero (x − x fed
/// into cbrt, a constant) is 0 in forward mode, where a zero tangent moves nothing, and NaN on
/// the tape, whose reverse sweep meets ∞ · 1 − ∞ · 1 and cannot see the cancellation. Such
/// cases were skipped before through forward mode's NaN.
const THROUGH_INFINITY: &str = "an infinite partial: forward mode 0, the tape NaN";

/// Forward mode's gradient of `f` at `x`, the reference every tape gradient here is checked
/// against; the case is skipped where `f` or its derivative is not finite (x − x = 0 fed into
/// cbrt has no derivative).
fn reference(f: impl Fn(&[Dual64]) -> Dual64, x: &[f64]) -> Result<Vec<f64>, TestCaseError> {
    let y = f(&x.iter().map(|&v| Dual64::constant(v)).collect::<Vec<_>>()).re;
    prop_assume!(y.is_finite());
    let g = forward::gradient(f, x);
    prop_assume!(g.iter().all(|d| d.is_finite()));
    Ok(g)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tape_gradient_matches_forward_mode(
        prog in prop::collection::vec(instr(), 1..40),
        x in prop::collection::vec(-2.0f64..2.0, 1..6),
    ) {
        let f = reference(|v| run(&prog, v), &x)?;
        let g = grad(|v: &[Var]| run(&prog, v), &x);
        prop_assume!(g.iter().all(|d| d.is_finite()), "{}", THROUGH_INFINITY);
        for (i, (a, b)) in g.iter().zip(&f).enumerate() {
            prop_assert!(close(*a, *b, 1e-10), "coordinate {}: tape {} forward {}", i, a, b);
        }
    }

    #[test]
    fn tape_hvp_matches_forward_hessian(
        prog in prop::collection::vec(instr(), 1..15),
        x in prop::collection::vec(-1.5f64..1.5, 1..4),
    ) {
        let h = forward::hessian(|v| run(&prog, v), &x);
        prop_assume!(h.iter().flatten().all(|d| d.is_finite()));
        let mut e = vec![0.0; x.len()];
        for j in 0..x.len() {
            e[j] = 1.0;
            let col = hvp(|v| run(&prog, v), &x, &e);
            prop_assume!(col.iter().all(|d| d.is_finite()), "{}", THROUGH_INFINITY);
            e[j] = 0.0;
            for i in 0..x.len() {
                prop_assert!(close(col[i], h[i][j], 1e-9), "H[{}][{}]: tape {} forward {}", i, j, col[i], h[i][j]);
            }
        }
    }

    #[test]
    fn slice_primitives_match_checked_mode_and_forward_mode(
        prog in prop::collection::vec(step(), 1..30),
        x in prop::collection::vec(-2.0f64..2.0, 1..12),
    ) {
        let f = reference(|v| run_steps(&prog, v), &x)?;
        // Unchecked: runs take the one-pass records, a matvec is one record. Checked: every
        // primitive operand by operand.
        let g = grad(|v: &[Var]| run_steps(&prog, v), &x);
        prop_assume!(g.iter().all(|d| d.is_finite()), "{}", THROUGH_INFINITY);
        for (i, (a, r)) in g.iter().zip(&f).enumerate() {
            prop_assert!(close(*a, *r, 1e-10), "coordinate {}: tape {} forward {}", i, a, r);
        }
        match adjoint_tape::Tape::new()
            .checked()
            .try_value_and_grad(|v: &[Var]| run_steps(&prog, v), &x)
        {
            Ok((_, c)) => {
                for (i, (a, b)) in g.iter().zip(&c).enumerate() {
                    prop_assert!(close(*a, *b, 1e-12), "coordinate {}: fast {} checked {}", i, a, b);
                }
            }
            // An infinite partial (`cbrt` at 0) met a finite adjoint, and zero partials further
            // back dropped the infinite contribution (`cbrt(x − x)`): checked mode reports the
            // first such contribution, as documented, though the gradient is finite.
            Err(e) => prop_assert!(
                e.pass == adjoint_tape::Pass::Reverse && e.operands[0].is_infinite(),
                "checked mode: {}", e
            ),
        }
    }
}

/// A slice primitive over windows of the values computed so far: the inputs are one run of
/// tape values, intermediate results are not (each takes several entries), so windows mix runs,
/// non-runs, reversed copies and constants.
#[derive(Clone, Debug)]
enum Slice {
    Dot(usize, usize, usize, bool),
    Sum(usize, usize),
    LogSumExp(usize, usize),
    /// matrix start, vector start, rows, columns, a constant in the vector
    Matvec(usize, usize, usize, usize, bool),
}

#[derive(Clone, Debug)]
enum Step {
    Scalar(Instr),
    Slice(Slice),
}

fn window<T: Real>(v: &[T], start: usize, len: usize) -> &[T] {
    let s = start % v.len();
    let l = 1 + len % (v.len() - s).min(8);
    &v[s..s + l]
}

fn slice_op<T: Real>(op: &Slice, v: &[T]) -> T {
    use adjoint_core::vector;
    match *op {
        Slice::Dot(a, b, l, reversed) => {
            let x = window(v, a, l);
            let y = window(v, b, l);
            let n = x.len().min(y.len());
            let y: Vec<T> = if reversed {
                y[..n].iter().rev().copied().collect()
            } else {
                y[..n].to_vec()
            };
            vector::dot(&x[..n], &y)
        }
        Slice::Sum(s, l) => vector::sum(window(v, s, l)),
        Slice::LogSumExp(s, l) => vector::logsumexp(window(v, s, l)),
        Slice::Matvec(sm, sx, r, c, with_constant) => {
            let (rows, cols) = (1 + r % 3, 1 + c % 4);
            if rows * cols > v.len() {
                return v[0] * 0.5;
            }
            let sm = sm % (v.len() - rows * cols + 1);
            let m = &v[sm..sm + rows * cols];
            let mut x = window(v, sx, cols + 7).to_vec();
            x.resize(cols, T::cst(0.3)); // a short window is padded with constants
            if with_constant {
                x[0] = T::cst(-0.7);
            }
            let mut out = vec![T::cst(0.0); rows];
            vector::matvec(m, &x, &mut out);
            out.iter()
                .enumerate()
                .fold(T::cst(0.0), |s, (i, &o)| s + o * (i as f64 + 1.0))
        }
    }
}

fn run_steps<T: Real>(prog: &[Step], x: &[T]) -> T {
    let mut v: Vec<T> = x.to_vec();
    for step in prog {
        let r = match step {
            Step::Scalar(ins) => scalar_op(ins, &v),
            Step::Slice(op) => slice_op(op, &v),
        };
        v.push(r.tanh() * 2.0 + r * 0.01);
    }
    v.iter().rev().take(4).copied().sum()
}

fn step() -> impl Strategy<Value = Step> {
    let slice = prop_oneof![
        (0..64usize, 0..64usize, 0..64usize, any::<bool>())
            .prop_map(|(a, b, l, r)| Slice::Dot(a, b, l, r)),
        (0..64usize, 0..64usize).prop_map(|(s, l)| Slice::Sum(s, l)),
        (0..64usize, 0..64usize).prop_map(|(s, l)| Slice::LogSumExp(s, l)),
        (0..64usize, 0..64usize, 0..8usize, 0..8usize, any::<bool>())
            .prop_map(|(m, x, r, c, k)| Slice::Matvec(m, x, r, c, k)),
    ];
    prop_oneof![instr().prop_map(Step::Scalar), slice.prop_map(Step::Slice)]
}
