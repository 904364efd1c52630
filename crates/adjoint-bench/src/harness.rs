//! The registry of problems and engines, the timing loop and the reports.
//!
//! A [`Problem`] holds a plain-Rust primal and one gradient [`Column`] per engine that supports
//! it. [`columns`] is the one place that knows the engines: a new engine adds one line there and
//! appears in every table.

use crate::alloc::peak_during;
use crate::problems::Objective;
use serde::Serialize;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A gradient implementation: writes ∇f(x) into the output slice.
pub type GradFn = Box<dyn FnMut(&[f64], &mut [f64])>;

/// A plain primal: f(x).
pub type PrimalFn = Box<dyn FnMut(&[f64]) -> f64>;

/// One engine's gradient of one problem.
pub struct Column {
    /// Engine name as printed.
    pub engine: &'static str,
    /// The gradient.
    pub run: GradFn,
    /// Why the engine is skipped at this size, if it is.
    pub skip: Option<String>,
}

/// One benchmark problem at one size.
pub struct Problem {
    /// Table it is printed in.
    pub group: &'static str,
    /// Problem name.
    pub name: &'static str,
    /// Size in words.
    pub size: String,
    /// The evaluation point.
    pub input: Vec<f64>,
    /// The plain `f64` program.
    pub primal: PrimalFn,
    /// Gradient implementations, reference first.
    pub columns: Vec<Column>,
}

/// Forward mode costs n sweeps; above this many inputs it is skipped in `--quick` runs.
pub const QUICK_FORWARD_LIMIT: usize = 30_000;

/// Every engine's gradient column for an objective. New engines add one entry here.
pub fn columns<O: Objective>(o: Arc<O>, quick: bool) -> Vec<Column> {
    let n = o.input().len();
    let mut cols = Vec::new();
    let mut probe = vec![0.0; n];
    if o.hand_gradient(&o.input(), &mut probe) {
        let h = o.clone();
        cols.push(Column {
            engine: "hand",
            run: Box::new(move |x, g| {
                h.hand_gradient(x, g);
            }),
            skip: None,
        });
    }
    let f = o.clone();
    let mut tape = adjoint_tape::Tape::new();
    cols.push(Column {
        engine: "tape",
        run: Box::new(move |x, g| {
            tape.grad_into(|v| f.eval(v), x, g);
        }),
        skip: None,
    });
    let f = o.clone();
    cols.push(Column {
        engine: "forward",
        run: Box::new(move |x, g| g.copy_from_slice(&adjoint::forward::gradient(|x| f.eval(x), x))),
        skip: (quick && n > QUICK_FORWARD_LIMIT).then(|| {
            format!("n = {n} forward sweeps; skipped in --quick above {QUICK_FORWARD_LIMIT} inputs")
        }),
    });
    cols
}

/// Register an objective as a problem with every engine's column.
pub fn problem<O: Objective>(o: O, quick: bool) -> Problem {
    let o = Arc::new(o);
    let p = o.clone();
    Problem {
        group: o.group(),
        name: o.name(),
        size: o.size(),
        input: o.input(),
        primal: Box::new(move |x| p.eval(x)),
        columns: columns(o, quick),
    }
}

/// Median, minimum and count of per-call times.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Median seconds per call.
    pub median_s: f64,
    /// Fastest seconds per call.
    pub min_s: f64,
    /// Calls per sample (small functions are batched).
    pub batch: usize,
    /// Samples taken.
    pub samples: usize,
}

/// Time `f`: one warm-up call, then batches sized to ≥ 100 µs, until `budget` is spent (at least
/// 3 samples, or 1 when a single call exceeds the budget).
pub fn measure(mut f: impl FnMut(), budget: Duration) -> Timing {
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().max(Duration::from_nanos(1));
    let batch = ((100e-6 / once.as_secs_f64()).ceil() as usize).clamp(1, 1_000_000);
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 3 || start.elapsed() < budget {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed().as_secs_f64() / batch as f64);
        if once > budget || samples.len() >= 10_000 {
            break;
        }
    }
    samples.sort_by(f64::total_cmp);
    Timing {
        median_s: samples[samples.len() / 2],
        min_s: samples[0],
        batch,
        samples: samples.len(),
    }
}

/// One row of results.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// Table.
    pub group: String,
    /// Problem.
    pub problem: String,
    /// Size.
    pub size: String,
    /// Number of inputs.
    pub n_inputs: usize,
    /// `primal` or an engine name.
    pub engine: String,
    /// Timing, absent when skipped.
    pub timing: Option<Timing>,
    /// Median time over the primal's median time.
    pub ratio: Option<f64>,
    /// Peak heap bytes above the starting level during one call.
    pub peak_bytes: Option<usize>,
    /// Heap allocation calls during one call.
    pub alloc_calls: Option<usize>,
    /// Largest |g − g_ref| / max(1, |g_ref|) against the first gradient column.
    pub max_rel_diff: Option<f64>,
    /// Why skipped, or other remarks.
    pub note: Option<String>,
}

/// Run one problem: primal, then each column; progress on stderr.
pub fn run_problem(p: &mut Problem, budget: Duration) -> Vec<Record> {
    let n = p.input.len();
    let x = p.input.clone();
    let base = |engine: &str| Record {
        group: p.group.to_string(),
        problem: p.name.to_string(),
        size: p.size.clone(),
        n_inputs: n,
        engine: engine.to_string(),
        timing: None,
        ratio: None,
        peak_bytes: None,
        alloc_calls: None,
        max_rel_diff: None,
        note: None,
    };
    eprintln!("  {} {}: primal", p.name, p.size);
    let primal = &mut p.primal;
    let (_, peak, calls) = peak_during(|| black_box(primal(black_box(&x))));
    let t = measure(|| _ = black_box(primal(black_box(&x))), budget);
    let primal_s = t.median_s;
    let mut out = vec![Record {
        timing: Some(t),
        ratio: Some(1.0),
        peak_bytes: Some(peak),
        alloc_calls: Some(calls),
        ..base("primal")
    }];
    let mut reference: Option<Vec<f64>> = None;
    let mut g = vec![0.0; n];
    for col in &mut p.columns {
        if let Some(why) = &col.skip {
            eprintln!("  {} {}: {} skipped", p.name, p.size, col.engine);
            out.push(Record {
                note: Some(why.clone()),
                ..base(col.engine)
            });
            continue;
        }
        eprintln!("  {} {}: {}", p.name, p.size, col.engine);
        let run = &mut col.run;
        let (_, peak, calls) = peak_during(|| run(black_box(&x), &mut g));
        let diff = match &reference {
            None => {
                reference = Some(g.clone());
                0.0
            }
            Some(r) => r
                .iter()
                .zip(&g)
                .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
                .fold(0.0, f64::max),
        };
        let t = measure(|| run(black_box(&x), black_box(&mut g)), budget);
        out.push(Record {
            ratio: Some(t.median_s / primal_s),
            timing: Some(t),
            peak_bytes: Some(peak),
            alloc_calls: Some(calls),
            max_rel_diff: Some(diff),
            ..base(col.engine)
        });
    }
    out
}

/// Seconds in a readable unit.
pub fn fmt_time(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.1} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.2} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Bytes in a readable unit.
pub fn fmt_bytes(b: usize) -> String {
    let b = b as f64;
    if b < 1024.0 {
        format!("{b} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    }
}

/// Markdown: one table per problem (rows = engines), then one summary per group
/// (rows = problems, columns = gradient/primal ratio per engine).
pub fn markdown(records: &[Record]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < records.len() {
        let key = (&records[i].problem, &records[i].size);
        let j = records[i..]
            .iter()
            .position(|r| (&r.problem, &r.size) != key)
            .map_or(records.len(), |k| i + k);
        s += &format!(
            "\n### {} ({}, {} inputs)\n\n| engine | time (median) | ratio to primal | peak heap | allocs | max rel diff |\n|---|---:|---:|---:|---:|---:|\n",
            key.0, key.1, records[i].n_inputs
        );
        for r in &records[i..j] {
            match &r.timing {
                Some(t) => {
                    s += &format!(
                        "| {} | {} | {:.2} | {} | {} | {} |\n",
                        r.engine,
                        fmt_time(t.median_s),
                        r.ratio.unwrap_or(f64::NAN),
                        fmt_bytes(r.peak_bytes.unwrap_or(0)),
                        r.alloc_calls.unwrap_or(0),
                        r.max_rel_diff.map_or("—".into(), |d| format!("{d:.1e}"))
                    )
                }
                None => {
                    s += &format!(
                        "| {} | skipped: {} | | | | |\n",
                        r.engine,
                        r.note.clone().unwrap_or_default()
                    )
                }
            }
        }
        i = j;
    }
    s += &summary(records);
    s
}

fn summary(records: &[Record]) -> String {
    let mut s = String::new();
    let mut groups: Vec<&str> = Vec::new();
    for r in records {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    for g in groups {
        let rows: Vec<&Record> = records.iter().filter(|r| r.group == g).collect();
        let mut engines: Vec<&str> = Vec::new();
        let mut problems: Vec<(&str, &str)> = Vec::new();
        for r in &rows {
            if r.engine != "primal" && !engines.contains(&r.engine.as_str()) {
                engines.push(&r.engine);
            }
            if !problems.contains(&(r.problem.as_str(), r.size.as_str())) {
                problems.push((&r.problem, &r.size));
            }
        }
        s += &format!("\n### Summary: {g} (gradient time / primal time)\n\n| problem | primal |");
        for e in &engines {
            s += &format!(" {e} |");
        }
        s += "\n|---|---:|";
        s += &"---:|".repeat(engines.len());
        s += "\n";
        for (p, size) in problems {
            let find = |e: &str| {
                rows.iter()
                    .find(|r| r.problem == p && r.size == size && r.engine == e)
            };
            let primal = find("primal")
                .and_then(|r| r.timing.as_ref())
                .map_or("—".into(), |t| fmt_time(t.median_s));
            s += &format!("| {p} {size} | {primal} |");
            for e in &engines {
                let cell = find(e)
                    .and_then(|r| r.ratio)
                    .map_or("—".into(), |x| format!("{x:.2}×"));
                s += &format!(" {cell} |");
            }
            s += "\n";
        }
    }
    s
}
