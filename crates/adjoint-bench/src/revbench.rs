//! Benchmarks of the reversible engine (seed 001 Appendix): the Petersen graph embedding loss
//! (objective, uncall, gradient, Hessian), a leapfrog integrator, and sparse CSR `dot` and
//! complex `mul!`, each beside the plain Rust program and the other engines.

use crate::harness::{fmt_time, measure};
use crate::problems::uniform;
use adjoint::forward;
use adjoint::rev::examples::{i_leapfrog, i_petersen, leapfrog, petersen};
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
    if filter.is_none_or(|f| "leapfrog".contains(f)) {
        eprintln!("[rev] leapfrog 200 steps");
        rows.extend(leapfrog_rows(budget));
    }
    if filter.is_none_or(|f| "sparse".contains(f)) {
        eprintln!("[rev] sparse dot and mul! 1000×1000");
        rows.extend(sparse(budget));
    }
    rows
}

/// The rows of one task at one size: each column timed with the harness's `measure`, its ratio
/// taken to the first (the plain program).
struct Table {
    task: &'static str,
    size: String,
    base: f64,
    rows: Vec<RevRow>,
}

impl Table {
    fn new(task: &'static str, size: String) -> Self {
        Table {
            task,
            size,
            base: f64::NAN,
            rows: Vec::new(),
        }
    }

    fn time(&mut self, column: &'static str, budget: Duration, f: impl FnMut()) {
        let seconds = measure(f, budget).median_s;
        if self.rows.is_empty() {
            self.base = seconds;
        }
        self.rows.push(RevRow {
            task: self.task.into(),
            size: self.size.clone(),
            column,
            seconds,
            ratio: seconds / self.base,
        });
    }

    /// The backward rows time a backward pass and its inverse together: report half.
    fn halve_last(&mut self) {
        if let Some(r) = self.rows.last_mut() {
            r.seconds /= 2.0;
            r.ratio /= 2.0;
        }
    }
}

fn graph_embedding(k: usize, budget: Duration, quick: bool) -> Vec<RevRow> {
    let x = uniform(7 + k as u64, 10 * k);
    let mut t = Table::new("graph-embedding", format!("k = {k} ({} inputs)", 10 * k));
    t.time("primal (plain Rust)", budget, || {
        black_box(petersen::<f64>(black_box(&x), k));
    });

    let (mut loss, mut xx, mut kk) = (0.0f64, x.clone(), k);
    t.time("rev objective (checked)", budget, || {
        i_petersen(&mut loss, black_box(&mut xx), &mut kk).unwrap()
    });
    // As NiLang measures: reversibility checks off (`call_unchecked`, `@invcheckoff` throughout).
    t.time("rev objective", budget, || {
        i_petersen::call_unchecked(&mut loss, black_box(&mut xx), &mut kk).unwrap()
    });
    t.time("rev uncall", budget, || {
        i_petersen::uncall_unchecked(&mut loss, black_box(&mut xx), &mut kk).unwrap()
    });

    // Gradient: f, seed ∂loss = 1, ~f on GVars in one pass (`gradient_pass_unchecked`: the
    // routine that f uncomputes at its end and ~f recomputes first runs once). Buffers are
    // reused.
    let mut gx: Vec<GVar<f64>> = vec![GVar::default(); 10 * k];
    let mut g = vec![0.0; 10 * k];
    let mut rev_grad = |x: &[f64], g: &mut [f64]| {
        for (gv, &v) in gx.iter_mut().zip(x) {
            *gv = GVar::new(v, 0.0);
        }
        let (mut gl, mut kk) = (GVar::new(0.0, 0.0), k);
        i_petersen::gradient_pass_unchecked(&mut gl, &mut gx, &mut kk, |l, _, _| l.g = 1.0)
            .unwrap();
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
    t.time("rev gradient", budget, || rev_grad(black_box(&x), &mut g));

    let mut tape = adjoint::tape::Tape::new();
    t.time("tape gradient", budget, || {
        tape.grad_into(|v| petersen(v, k), black_box(&x), &mut g);
    });
    t.time("forward gradient", budget, || {
        black_box(forward::gradient(|v| petersen(v, k), black_box(&x)));
    });

    // Hessians: reversible over forward (GVar<Dual<f64>>), forward over forward, tape.
    let hb = if quick { budget / 2 } else { budget };
    let args = (0.0f64, x.clone(), k);
    t.time("(rev + forward) Hessian", hb, || {
        black_box(adjoint::rev::hessian(i_petersen {}, args.clone(), 0).unwrap());
    });
    t.time("forward Hessian", hb, || {
        black_box(forward::hessian(|v| petersen(v, k), black_box(&x)));
    });
    t.time("tape Hessian", hb, || {
        black_box(adjoint::tape::hessian(|v| petersen(v, k), black_box(&x)));
    });
    t.rows
}

/// The leapfrog integrator (issue #13): 200 kick–drift–kick steps of `x'' = −k·x − 0.1·x³`,
/// gradient of the final position with respect to `(x₀, v₀, k)`.
fn leapfrog_rows(budget: Duration) -> Vec<RevRow> {
    let (x0, v0, k0, steps) = (0.8f64, -0.3f64, 1.7f64, 200usize);
    let mut t = Table::new("leapfrog", format!("{steps} steps"));
    t.time("primal (plain Rust)", budget, || {
        black_box(leapfrog(black_box(x0), v0, k0, steps));
    });
    t.time("rev objective", budget, || {
        let (mut x, mut v, mut k, mut n) = (black_box(x0), v0, k0, steps);
        i_leapfrog::call_unchecked(&mut x, &mut v, &mut k, &mut n).unwrap();
        black_box(x);
    });
    let rev_grad = |p: [f64; 3]| -> [f64; 3] {
        let (mut x, mut v, mut k, mut n) = (p[0], p[1], p[2], steps);
        i_leapfrog::call_unchecked(&mut x, &mut v, &mut k, &mut n).unwrap();
        let (mut gx, mut gv, mut gk) = (GVar::new(x, 1.0), GVar::new(v, 0.0), GVar::new(k, 0.0));
        i_leapfrog::uncall_unchecked(&mut gx, &mut gv, &mut gk, &mut n).unwrap();
        [gx.g, gv.g, gk.g]
    };
    let g = rev_grad([x0, v0, k0]);
    let fg = forward::gradient(|p| leapfrog(p[0], p[1], p[2], steps), &[x0, v0, k0]);
    assert!(
        g.iter()
            .zip(&fg)
            .all(|(a, b)| (a - b).abs() <= 1e-10 * (1.0 + b.abs())),
        "leapfrog: reversible {g:?} vs forward {fg:?}"
    );
    t.time("rev gradient", budget, || {
        black_box(rev_grad(black_box([x0, v0, k0])));
    });
    let mut tape = adjoint::tape::Tape::new();
    let mut out = [0.0; 3];
    t.time("tape gradient", budget, || {
        tape.grad_into(
            |p| leapfrog(p[0], p[1], p[2], steps),
            black_box(&[x0, v0, k0]),
            &mut out,
        );
    });
    t.time("forward gradient", budget, || {
        black_box(forward::gradient(
            |p| leapfrog(p[0], p[1], p[2], steps),
            black_box(&[x0, v0, k0]),
        ));
    });
    t.rows
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
    let size = "1000×1000, density 0.05";

    let a = random_csr(n, 0.05, 11, |v, _| v);
    let b = random_csr(n, 0.05, 12, |v, _| v);
    let mut t = Table::new("sparse-dot", size.into());
    t.time("primal (plain Rust)", budget, || {
        black_box(plain_dot(black_box(&a), black_box(&b)));
    });
    let (mut out, mut aa, mut bb) = (0.0f64, a.clone(), b.clone());
    t.time("rev objective", budget, || {
        i_sparse_dot::call_unchecked(&mut out, &mut aa, &mut bb).unwrap()
    });
    // Backward: the outputs wrapped in GVar; the loop runs the inverse that moves the gradients
    // and then its own inverse (the forward on GVars), which restores the state for the next
    // iteration, so half of it is the backward time.
    let (mut ga, mut gb) = (
        a.wrap(&mut |v| GVar::new(v, 0.0)),
        b.wrap(&mut |v| GVar::new(v, 0.0)),
    );
    let mut gout = GVar::new(plain_dot(&a, &b), 1.0);
    t.time("rev backward", budget, || {
        i_sparse_dot::uncall_unchecked(&mut gout, &mut ga, &mut gb).unwrap();
        i_sparse_dot::call_unchecked(&mut gout, &mut ga, &mut gb).unwrap();
    });
    t.halve_last();
    let mut rows = t.rows;

    let ac = random_csr(n, 0.05, 13, |r, i| Complex::new(r, i));
    let x: Vec<Complex<f64>> = uniform(14, 2 * n)
        .chunks(2)
        .map(|c| Complex::new(c[0], c[1]))
        .collect();
    let mut t = Table::new("sparse-mul (complex)", size.into());
    let mut y = vec![Complex::new(0.0, 0.0); n];
    t.time("primal (plain Rust)", budget, || {
        plain_spmv(black_box(&mut y), black_box(&ac), black_box(&x))
    });
    let (mut yy, mut aa, mut xx) = (vec![Complex::new(0.0, 0.0); n], ac.clone(), x.clone());
    t.time("rev objective", budget, || {
        i_spmv::call_unchecked(&mut yy, &mut aa, &mut xx).unwrap()
    });
    let mut gy: Vec<Complex<GVar<f64>>> = (0..n)
        .map(|i| Complex::new(GVar::new(0.0, (i % 3) as f64), GVar::new(0.0, 1.0)))
        .collect();
    let mut gac = ac.wrap(&mut |v| GVar::new(v, 0.0));
    let mut gx = x.wrap(&mut |v| GVar::new(v, 0.0));
    i_spmv(&mut gy, &mut gac, &mut gx).unwrap();
    t.time("rev backward", budget, || {
        i_spmv::uncall_unchecked(&mut gy, &mut gac, &mut gx).unwrap();
        i_spmv::call_unchecked(&mut gy, &mut gac, &mut gx).unwrap();
    });
    t.halve_last();
    rows.extend(t.rows);
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
