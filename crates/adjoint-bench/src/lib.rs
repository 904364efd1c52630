//! # adjoint-bench
//!
//! The benchmark harness of adjoint: every problem, every engine, side by side with the plain
//! program, in one run. The `adjoint-bench` binary prints one table per problem and writes
//! `bench-results/bench.json` and `bench-results/bench.md`.
//!
//! * [`problems`] — the objectives, written once generically over [`adjoint::Real`], with
//!   hand-written gradients as references;
//! * [`harness`] — the registry of the engines over `Real` ([`harness::columns`]: hand, tape,
//!   forward; the SSA, reversible and ADBench columns are attached in `ssabench`, `revbench`
//!   and `adbench`), the timing loop and the reports;
//! * [`sec13`] — the benchmarks of seed 003 §13 with the peers `echidna`, `ad_trait`, `reverse`;
//! * [`alloc`] — a counting allocator for the peak-memory column.
//!
//! ```
//! use adjoint_bench::{harness, problems::Rosenbrock};
//! use std::time::Duration;
//!
//! let mut p = harness::problem(Rosenbrock { n: 10 }, true);
//! let rows = harness::run_problem(&mut p, Duration::from_millis(1));
//! assert_eq!(rows[0].engine, "primal");
//! assert!(rows.iter().all(|r| r.max_rel_diff.map_or(true, |d| d < 1e-12)));
//! ```
#![warn(missing_docs)]

pub mod adbench;
pub mod alloc;
pub mod arraybench;
pub mod harness;
pub mod problems;
pub mod revbench;
pub mod sec13;
pub mod ssabench;
pub mod vectorised;

use harness::{problem, Problem};
use problems::*;

/// Every registered problem, in printing order.
pub fn registry(quick: bool) -> Vec<Problem> {
    vec![
        problem(Rosenbrock { n: 2 }, quick),
        problem(Rosenbrock { n: 100 }, quick),
        problem(Rosenbrock { n: 10_000 }, quick),
        problem(SinCos, quick),
        problem(PowLoop { p: 1000 }, quick),
        problem(LogSumExp { n: 1000 }, quick),
        problem(vectorised::LogSumExpV { n: 1000 }, quick),
        problem(Logistic::new(10, 100), quick),
        problem(vectorised::LogisticV(Logistic::new(10, 100)), quick),
        problem(Mlp::new(784, 32, 10), quick),
        problem(vectorised::MlpV(Mlp::new(784, 32, 10)), quick),
    ]
    .into_iter()
    .chain(sec13::problems(quick))
    .chain([
        problem(
            vectorised::DotV {
                n: if quick { 100_000 } else { 1_000_000 },
            },
            quick,
        ),
        problem(vectorised::MatvecV { n: 1000 }, quick),
        problem(vectorised::NetworkV, quick),
    ])
    .map(|mut p| {
        if let Some(c) = ssabench::column(&p) {
            p.columns.push(c);
        }
        if let Some(c) = arraybench::column(&p) {
            p.columns.push(c);
        }
        p
    })
    .collect()
}

/// A one-line description of this machine (CPU model and core count) for reports.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {cores} cores, {}", std::env::consts::ARCH)
}
