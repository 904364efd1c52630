//! The array engine (`adjoint::array`) on a chain of five element-wise maps, beside a
//! hand-written fused Rust loop in the same run: the array program's objective (fusion turns the
//! chain into one kernel) and its whole-program gradient of the sum.

use crate::harness::{fmt_time, measure, Column, Problem};
use adjoint::array::{Builder, DType, Input, Program};
use rayon::prelude::*;
use serde::Serialize;
use std::hint::black_box;
use std::time::Duration;

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct ChainRow {
    /// What was timed.
    pub what: String,
    /// Elements.
    pub n: usize,
    /// Threads of the rayon pool it ran in (0: a peer, its own threading).
    pub threads: usize,
    /// Median seconds per call.
    pub seconds: f64,
    /// Time over the hand-fused loop's at the same thread count (at the most threads, for a
    /// peer).
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
    chain_programs_of(n, DType::F64)
}

/// [`chain_programs`] over an input of element type `dtype` (`f32`: the chain in `f32`, its
/// constants rounded to `f32` where they meet it).
pub fn chain_programs_of(n: usize, dtype: DType) -> (Program, Program) {
    let build = |sum: bool| {
        let b = Builder::new();
        let a = b.input_with(&[n], dtype);
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

/// Time the chain over 10⁷ elements (10⁶ with `quick`) at 1 thread and at all threads, and
/// JAX and PyTorch on the same chain when `peers/install.sh` has installed them.
pub fn run(quick: bool, filter: Option<&str>) -> Vec<ChainRow> {
    if filter.is_some_and(|f| !"map-chain".contains(f)) {
        return Vec::new();
    }
    let n = if quick { 1_000_000 } else { 10_000_000 };
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 1e-7).sin()).collect();
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let (objective, gradient) = chain_programs(n);
    let (objective32, gradient32) = chain_programs_of(n, DType::F32);
    let mut rows = Vec::new();
    let all = rayon::current_num_threads();
    let mut counts = vec![1, all];
    counts.dedup();
    let mut hand_at_most = f64::NAN;
    for threads in counts {
        eprintln!("  map-chain n={n}, {threads} thread(s)");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a rayon pool");
        let timed = pool.install(|| {
            let mut t = chain_rows(&x, &objective, &gradient, budget);
            t.extend(chain_rows_f32(&x32, &objective32, &gradient32, budget));
            t
        });
        hand_at_most = timed[0].1;
        for (what, seconds) in &timed {
            rows.push(ChainRow {
                what: what.to_string(),
                n,
                threads,
                seconds: *seconds,
                ratio: seconds / timed[0].1,
            });
        }
    }
    for (what, seconds) in peers(n, quick) {
        rows.push(ChainRow {
            what,
            n,
            threads: 0,
            seconds,
            ratio: seconds / hand_at_most,
        });
    }
    rows
}

/// The timed variants in the current rayon pool: (what, median seconds), the hand-fused loop
/// first.
fn chain_rows(
    x: &[f64],
    objective: &Program,
    gradient: &Program,
    budget: Duration,
) -> Vec<(&'static str, f64)> {
    let n = x.len();
    let mut out = vec![0.0; n];
    let hand = measure(|| hand_fused(black_box(x), &mut out), budget).median_s;
    // `Program::run` returns a fresh output array per call: the same loop allocating its
    // output is the like-for-like comparison (the page faults of a fresh 80 MB dominate);
    // `run_into` reuses the caller's buffer like the first loop.
    let hand_alloc = measure(
        || {
            let mut o = vec![0.0; n];
            hand_fused(black_box(x), &mut o);
            black_box(o);
        },
        budget,
    )
    .median_s;
    let arr = measure(
        || {
            black_box(objective.run(&[x]).expect("runs"));
        },
        budget,
    )
    .median_s;
    let mut bufs = vec![Vec::new()];
    let arr_into = measure(
        || {
            objective.run_into(&[x], &mut bufs).expect("runs");
            black_box(&bufs);
        },
        budget,
    )
    .median_s;
    let grad = measure(
        || {
            black_box(gradient.gradient_a(&[x]).expect("runs"));
        },
        budget,
    )
    .median_s;
    vec![
        ("hand-fused Rust loop (rayon)", hand),
        ("hand-fused loop allocating its output", hand_alloc),
        ("array program (objective)", arr),
        ("array program, output buffer reused (run_into)", arr_into),
        ("array gradient of the sum", grad),
    ]
}

/// The `f32` chain's objective and gradient in the current rayon pool.
fn chain_rows_f32(
    x: &[f32],
    objective: &Program,
    gradient: &Program,
    budget: Duration,
) -> Vec<(&'static str, f64)> {
    let arr = measure(
        || {
            black_box(objective.run_typed(&[Input::F32(x)]).expect("runs"));
        },
        budget,
    )
    .median_s;
    let grad = measure(
        || {
            black_box(gradient.gradient_typed(&[Input::F32(x)]).expect("runs"));
        },
        budget,
    )
    .median_s;
    vec![
        ("array program in f32 (objective)", arr),
        ("array gradient of the sum in f32", grad),
    ]
}

/// JAX (jit) and PyTorch on the chain, from `peers/chain_py.py`, when installed: nothing
/// otherwise (never needed by CI).
fn peers(n: usize, quick: bool) -> Vec<(String, f64)> {
    let dir = crate::adbench::peers_dir();
    let python = dir.join(".venv/bin/python");
    if !python.is_file() {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for tool in ["jax", "pytorch"] {
        let mut c = std::process::Command::new(&python);
        c.arg(dir.join("chain_py.py")).arg(tool).arg(n.to_string());
        if quick {
            c.arg("--quick");
        }
        eprintln!("  map-chain peer {tool}");
        let out = match c.stderr(std::process::Stdio::inherit()).output() {
            Ok(o) if o.status.success() => o.stdout,
            Ok(o) => {
                eprintln!("  map-chain peer {tool}: exited with {}; skipped", o.status);
                continue;
            }
            Err(e) => {
                eprintln!("  map-chain peer {tool}: {e}; skipped");
                continue;
            }
        };
        match serde_json::from_slice::<Vec<(String, f64)>>(&out) {
            Ok(r) => rows.extend(r),
            Err(e) => eprintln!("  map-chain peer {tool}: unreadable output ({e}); skipped"),
        }
    }
    rows
}

/// The rows as a markdown table.
pub fn markdown(rows: &[ChainRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n### map-chain (array engine): five element-wise maps\n\n| n | threads | what | time | × hand-fused |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        let threads = match r.threads {
            0 => "—".to_string(),
            t => t.to_string(),
        };
        s += &format!(
            "| {} | {} | {} | {} | {:.2} |\n",
            r.n,
            threads,
            r.what,
            fmt_time(r.seconds),
            r.ratio
        );
    }
    s
}

/// The array engine's column for the registered problems written for it here — Rosenbrock (a
/// `generate` over neighbouring pairs: the gather at `i + 1` is a stencil) and the vector dot
/// product — each built once as a whole program and differentiated with `gradient_a`; `None`
/// for the others.
pub fn column(p: &Problem) -> Option<Column> {
    let n = p.input.len();
    let b = Builder::new();
    let x = b.input(&[n]);
    let out = match p.name {
        "rosenbrock" if n >= 2 => b
            .generate(&[n - 1], |i| {
                let (a, c) = (x.at(&[i[0]]), x.at(&[i[0] + 1.0]));
                let (t, u) = (c - a * a, 1.0 - a);
                t * t * 100.0 + u * u
            })
            .sum(),
        "dot (vector)" => {
            let h = n / 2;
            b.generate(&[h], |i| x.at(&[i[0]]) * x.at(&[i[0] + h as f64]))
                .sum()
        }
        _ => return None,
    };
    let program = b.build_scalar(&out).ok()?;
    Some(Column {
        engine: "array",
        run: Box::new(move |x, g| {
            let r = program.gradient_a(&[x]).expect("array gradient");
            g.copy_from_slice(&r.grads[0]);
        }),
        skip: None,
    })
}
