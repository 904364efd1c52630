//! The array engine (`adjoint::array`) on a chain of five element-wise maps, beside a
//! hand-written fused Rust loop in the same run: the array program's objective (fusion turns the
//! chain into one kernel) and its whole-program gradient of the sum.

use crate::harness::{fmt_time, measure};
use adjoint::array::{Builder, Program};
use rayon::prelude::*;
use serde::Serialize;
use std::hint::black_box;
use std::time::Duration;

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct ChainRow {
    /// What was timed.
    pub what: &'static str,
    /// Elements.
    pub n: usize,
    /// Median seconds per call.
    pub seconds: f64,
    /// Time over the hand-fused loop's.
    pub ratio: f64,
}

/// The chain, element by element, as the hand-written loop computes it.
#[inline(always)]
fn chain(v: f64) -> f64 {
    let v = v * 1.5 + 0.25;
    let v = v * v;
    let v = v - 0.5;
    let v = v.max(0.1);
    v * 3.0 - 1.0
}

/// The hand-fused loop: one pass, split over rayon's threads in fixed chunks.
pub fn hand_fused(x: &[f64], out: &mut [f64]) {
    out.par_chunks_mut(1 << 16)
        .zip(x.par_chunks(1 << 16))
        .for_each(|(o, x)| {
            for (o, &v) in o.iter_mut().zip(x) {
                *o = chain(v);
            }
        });
}

/// The same chain as an array program: five `map`s over an input of `n` elements, and the sum
/// of the result (for the gradient).
pub fn chain_programs(n: usize) -> (Program, Program) {
    let build = |sum: bool| {
        let b = Builder::new();
        let a = b.input(&[n]);
        let y = a
            .map(|v| v * 1.5 + 0.25)
            .map(|v| v * v)
            .map(|v| v - 0.5)
            .map(|v| v.max(0.1))
            .map(|v| v * 3.0 - 1.0);
        if sum {
            b.build_scalar(&y.sum())
        } else {
            b.build(&[&y])
        }
        .expect("the chain is well-shaped")
    };
    (build(false), build(true))
}

/// Time the chain over 10⁷ elements (10⁶ with `quick`).
pub fn run(quick: bool, filter: Option<&str>) -> Vec<ChainRow> {
    if filter.is_some_and(|f| !"map-chain".contains(f)) {
        return Vec::new();
    }
    let n = if quick { 1_000_000 } else { 10_000_000 };
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    eprintln!("  map-chain n={n}");
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 1e-7).sin()).collect();
    let mut out = vec![0.0; n];
    let hand = measure(|| hand_fused(black_box(&x), &mut out), budget).median_s;
    // The array program returns a fresh output array per run: the same loop allocating its
    // output is the like-for-like comparison (the page faults of a fresh 80 MB dominate).
    let hand_alloc = measure(
        || {
            let mut o = vec![0.0; n];
            hand_fused(black_box(&x), &mut o);
            black_box(o);
        },
        budget,
    )
    .median_s;
    let (objective, gradient) = chain_programs(n);
    let arr = measure(
        || {
            black_box(objective.run(&[&x]).expect("runs"));
        },
        budget,
    )
    .median_s;
    let mut bufs = vec![Vec::new()];
    let arr_into = measure(
        || {
            objective.run_into(&[&x], &mut bufs).expect("runs");
            black_box(&bufs);
        },
        budget,
    )
    .median_s;
    let grad = measure(
        || {
            black_box(gradient.gradient_a(&[&x]).expect("runs"));
        },
        budget,
    )
    .median_s;
    vec![
        ChainRow {
            what: "hand-fused Rust loop (rayon)",
            n,
            seconds: hand,
            ratio: 1.0,
        },
        ChainRow {
            what: "hand-fused loop allocating its output",
            n,
            seconds: hand_alloc,
            ratio: hand_alloc / hand,
        },
        ChainRow {
            what: "array program (objective)",
            n,
            seconds: arr,
            ratio: arr / hand,
        },
        ChainRow {
            what: "array program, output buffer reused (run_into)",
            n,
            seconds: arr_into,
            ratio: arr_into / hand,
        },
        ChainRow {
            what: "array gradient of the sum",
            n,
            seconds: grad,
            ratio: grad / hand,
        },
    ]
}

/// The rows as a markdown table.
pub fn markdown(rows: &[ChainRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n### map-chain (array engine): five element-wise maps\n\n| n | what | time | × hand-fused |\n|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} |\n",
            r.n,
            r.what,
            fmt_time(r.seconds),
            r.ratio
        );
    }
    s
}
