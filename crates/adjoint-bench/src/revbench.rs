//! Benchmarks of the reversible engine (seed 001 Appendix): the Petersen graph embedding loss
//! (objective, uncall, gradient, Hessian) and sparse CSR `dot` and complex `mul!`, each beside
//! the plain Rust program and the other engines.

use crate::harness::{fmt_time, measure};
use crate::problems::uniform;
use adjoint::forward;
use adjoint::rev::examples::{i_petersen, petersen};
use adjoint::rev::library::{i_sparse_dot, i_spmv, Csr};
use adjoint::rev::{Differentiable, GVar};
use num_complex::Complex;
use serde::Serialize;
use std::hint::black_box;
use std::time::Duration;

/// One measurement: a task at a size, one column, its time and its ratio to the plain program.
#[derive(Clone, Debug, Serialize)]
pub struct RevRow {
    /// `graph-embedding`, `sparse-dot` or `sparse-mul`.
    pub task: String,
    /// `k = 4`, `1000×1000, 5%`, …
    pub size: String,
    /// What was timed (`primal`, `rev objective`, `rev gradient`, …).
    pub column: &'static str,
    /// Median seconds per evaluation.
    pub seconds: f64,
    /// `seconds` over the plain program's.
    pub ratio: f64,
}

/// Run every reversible-engine benchmark.
pub fn run(quick: bool, filter: Option<&str>) -> Vec<RevRow> {
    let budget = if quick {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(800)
    };
    let mut rows = Vec::new();
    if filter.is_none_or(|f| "graph-embedding".contains(f)) {
        for k in [2usize, 4, 6, 8, 10] {
            eprintln!("[rev] graph-embedding k = {k}");
            rows.extend(graph_embedding(k, budget, quick));
        }
    }
    if filter.is_none_or(|f| "sparse".contains(f)) {
        eprintln!("[rev] sparse dot and mul! 1000×1000");
        rows.extend(sparse(budget));
    }
    rows
}

fn push(
    rows: &mut Vec<RevRow>,
    task: &str,
    size: &str,
    column: &'static str,
    seconds: f64,
    base: f64,
) {
    rows.push(RevRow {
        task: task.into(),
        size: size.into(),
        column,
        seconds,
        ratio: seconds / base,
    });
}

fn graph_embedding(k: usize, budget: Duration, quick: bool) -> Vec<RevRow> {
    let x = uniform(7 + k as u64, 10 * k);
    let size = format!("k = {k} ({} inputs)", 10 * k);
    let task = "graph-embedding";
    let mut rows = Vec::new();

    let base = measure(
        || {
            black_box(petersen::<f64>(black_box(&x), k));
        },
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "primal (plain Rust)", base, base);

    let (mut loss, mut xx, mut kk) = (0.0f64, x.clone(), k);
    let t = measure(
        || i_petersen(&mut loss, black_box(&mut xx), &mut kk).unwrap(),
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "rev objective (checked)", t, base);
    // As NiLang measures: reversibility checks off (`call_unchecked`, `@invcheckoff` throughout).
    let t = measure(
        || i_petersen::call_unchecked(&mut loss, black_box(&mut xx), &mut kk).unwrap(),
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "rev objective", t, base);
    let t = measure(
        || i_petersen::uncall_unchecked(&mut loss, black_box(&mut xx), &mut kk).unwrap(),
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "rev uncall", t, base);

    // Gradient: run f, wrap the outputs in GVar, seed ∂loss = 1, run ~f. Buffers are reused.
    let mut gx: Vec<GVar<f64>> = vec![GVar::default(); 10 * k];
    let mut g = vec![0.0; 10 * k];
    let mut xbuf = x.clone();
    let mut rev_grad = |x: &[f64], g: &mut [f64]| {
        let (mut loss, xx, mut kk) = (0.0f64, &mut xbuf, k);
        xx.copy_from_slice(x);
        i_petersen::call_unchecked(&mut loss, xx, &mut kk).unwrap();
        for (gv, &v) in gx.iter_mut().zip(xx.iter()) {
            *gv = GVar::new(v, 0.0);
        }
        let mut gl = GVar::new(loss, 1.0);
        i_petersen::uncall_unchecked(&mut gl, &mut gx, &mut kk).unwrap();
        for (o, gv) in g.iter_mut().zip(&gx) {
            *o = gv.g;
        }
    };
    rev_grad(&x, &mut g);
    let fg = forward::gradient(|v| petersen(v, k), &x);
    let agree = g
        .iter()
        .zip(&fg)
        .all(|(a, b)| (a - b).abs() <= 1e-10 * (1.0 + b.abs()));
    assert!(
        agree,
        "reversible and forward gradients disagree at k = {k}"
    );
    let t = measure(|| rev_grad(black_box(&x), &mut g), budget).median_s;
    push(&mut rows, task, &size, "rev gradient", t, base);

    let mut tape = adjoint::tape::Tape::new();
    let t = measure(
        || {
            tape.grad_into(|v| petersen(v, k), black_box(&x), &mut g);
        },
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "tape gradient", t, base);
    let t = measure(
        || {
            drop(black_box(forward::gradient(
                |v| petersen(v, k),
                black_box(&x),
            )))
        },
        budget,
    )
    .median_s;
    push(&mut rows, task, &size, "forward gradient", t, base);

    // Hessians: reversible over forward (GVar<Dual<f64>>), forward over forward, tape.
    let hb = if quick { budget / 2 } else { budget };
    let args = (0.0f64, x.clone(), k);
    let t = measure(
        || {
            drop(black_box(
                adjoint::rev::hessian(i_petersen {}, args.clone(), 0).unwrap(),
            ))
        },
        hb,
    )
    .median_s;
    push(&mut rows, task, &size, "(rev + forward) Hessian", t, base);
    let t = measure(
        || {
            drop(black_box(forward::hessian(
                |v| petersen(v, k),
                black_box(&x),
            )))
        },
        hb,
    )
    .median_s;
    push(&mut rows, task, &size, "forward Hessian", t, base);
    let t = measure(
        || {
            drop(black_box(adjoint::tape::hessian(
                |v| petersen(v, k),
                black_box(&x),
            )))
        },
        hb,
    )
    .median_s;
    push(&mut rows, task, &size, "tape Hessian", t, base);
    rows
}

/// A random `n × n` sparse matrix with about `density · n²` entries.
fn random_csr<T: Copy>(
    n: usize,
    density: f64,
    seed: u64,
    mut val: impl FnMut(f64, f64) -> T,
) -> Csr<T> {
    let per_row = (density * n as f64).round() as usize;
    let u = uniform(seed, n * per_row * 3);
    let mut t = Vec::with_capacity(n * per_row);
    for i in 0..n {
        let mut cols: Vec<usize> = (0..per_row)
            .map(|j| ((u[(i * per_row + j) * 3] + 1.0) * 0.5 * n as f64) as usize % n)
            .collect();
        cols.sort_unstable();
        cols.dedup();
        for (j, &c) in cols.iter().enumerate() {
            let p = (i * per_row + j) * 3;
            t.push((i, c, val(u[p + 1], u[p + 2])));
        }
    }
    Csr::from_triplets(n, n, &t)
}

/// The plain sparse dot: a merge of the two sorted rows.
fn plain_dot(a: &Csr<f64>, b: &Csr<f64>) -> f64 {
    let mut s = 0.0;
    for i in 0..a.rows {
        let (mut p, mut q) = (a.row_ptr[i], b.row_ptr[i]);
        while p < a.row_ptr[i + 1] && q < b.row_ptr[i + 1] {
            match a.col[p].cmp(&b.col[q]) {
                std::cmp::Ordering::Less => p += 1,
                std::cmp::Ordering::Greater => q += 1,
                std::cmp::Ordering::Equal => {
                    s += a.val[p] * b.val[q];
                    p += 1;
                    q += 1;
                }
            }
        }
    }
    s
}

fn plain_spmv(y: &mut [Complex<f64>], a: &Csr<Complex<f64>>, x: &[Complex<f64>]) {
    for (i, yi) in y.iter_mut().enumerate().take(a.rows) {
        let mut s = Complex::new(0.0, 0.0);
        for p in a.row_ptr[i]..a.row_ptr[i + 1] {
            s += a.val[p] * x[a.col[p]];
        }
        *yi += s;
    }
}

fn sparse(budget: Duration) -> Vec<RevRow> {
    let n = 1000;
    let mut rows = Vec::new();
    let size = "1000×1000, density 0.05";

    let a = random_csr(n, 0.05, 11, |v, _| v);
    let b = random_csr(n, 0.05, 12, |v, _| v);
    let base = measure(
        || {
            black_box(plain_dot(black_box(&a), black_box(&b)));
        },
        budget,
    )
    .median_s;
    push(
        &mut rows,
        "sparse-dot",
        size,
        "primal (plain Rust)",
        base,
        base,
    );
    let (mut out, mut aa, mut bb) = (0.0f64, a.clone(), b.clone());
    let t = measure(
        || i_sparse_dot::call_unchecked(&mut out, &mut aa, &mut bb).unwrap(),
        budget,
    )
    .median_s;
    push(&mut rows, "sparse-dot", size, "rev objective", t, base);
    // Backward: the outputs already wrapped in GVar; time the inverse that moves the gradients.
    let (mut ga, mut gb) = (
        a.wrap(&mut |v| GVar::new(v, 0.0)),
        b.wrap(&mut |v| GVar::new(v, 0.0)),
    );
    let mut gout = GVar::new(plain_dot(&a, &b), 1.0);
    let t = measure(
        || {
            i_sparse_dot::uncall_unchecked(&mut gout, &mut ga, &mut gb).unwrap();
            i_sparse_dot::call_unchecked(&mut gout, &mut ga, &mut gb).unwrap();
        },
        budget,
    )
    .median_s;
    // The loop above runs the backward pass and then its inverse (the forward on GVars), which
    // restores the state for the next iteration; report half of it as the backward time.
    push(&mut rows, "sparse-dot", size, "rev backward", t / 2.0, base);

    let ac = random_csr(n, 0.05, 13, |r, i| Complex::new(r, i));
    let x: Vec<Complex<f64>> = uniform(14, 2 * n)
        .chunks(2)
        .map(|c| Complex::new(c[0], c[1]))
        .collect();
    let mut y = vec![Complex::new(0.0, 0.0); n];
    let base = measure(
        || plain_spmv(black_box(&mut y), black_box(&ac), black_box(&x)),
        budget,
    )
    .median_s;
    push(
        &mut rows,
        "sparse-mul (complex)",
        size,
        "primal (plain Rust)",
        base,
        base,
    );
    let (mut yy, mut aa, mut xx) = (vec![Complex::new(0.0, 0.0); n], ac.clone(), x.clone());
    let t = measure(
        || i_spmv::call_unchecked(&mut yy, &mut aa, &mut xx).unwrap(),
        budget,
    )
    .median_s;
    push(
        &mut rows,
        "sparse-mul (complex)",
        size,
        "rev objective",
        t,
        base,
    );
    let gc = |c: &Complex<f64>| Complex::new(GVar::new(c.re, 0.0), GVar::new(c.im, 0.0));
    let mut gy: Vec<Complex<GVar<f64>>> = (0..n)
        .map(|i| Complex::new(GVar::new(0.0, (i % 3) as f64), GVar::new(0.0, 1.0)))
        .collect();
    let mut gac = Csr {
        rows: ac.rows,
        cols: ac.cols,
        row_ptr: ac.row_ptr.clone(),
        col: ac.col.clone(),
        val: ac.val.iter().map(gc).collect(),
    };
    let mut gx: Vec<Complex<GVar<f64>>> = x.iter().map(gc).collect();
    i_spmv(&mut gy, &mut gac, &mut gx).unwrap();
    let t = measure(
        || {
            i_spmv::uncall_unchecked(&mut gy, &mut gac, &mut gx).unwrap();
            i_spmv::call_unchecked(&mut gy, &mut gac, &mut gx).unwrap();
        },
        budget,
    )
    .median_s;
    push(
        &mut rows,
        "sparse-mul (complex)",
        size,
        "rev backward",
        t / 2.0,
        base,
    );
    rows
}

/// The rows as markdown tables, one per task.
pub fn markdown(rows: &[RevRow]) -> String {
    let mut out = String::new();
    let mut tasks: Vec<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    tasks.dedup();
    for task in tasks {
        out.push_str(&format!("\n### {task} (reversible engine)\n\n| size | what | time | × plain |\n|---|---|---|---|\n"));
        for r in rows.iter().filter(|r| r.task == task) {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2} |\n",
                r.size,
                r.column,
                fmt_time(r.seconds),
                r.ratio
            ));
        }
    }
    out
}
