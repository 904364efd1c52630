//! ADBench GMM and BA (seed 001 Tables 1–2, seed 004 §5): readers, objectives, gradients in
//! every landed engine, ADBench's timing protocol.
//!
//! Inputs come from `../shared/adbench` (or `--data DIR`) when present, otherwise from the
//! generator with ADBench's recipe, so a fresh clone runs too.

pub mod ba;
pub mod gmm;
pub mod io;
pub mod protocol;

use crate::alloc::peak_during;
use protocol::{agree, time_min, Budget};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `gmm` or `ba`.
    pub task: String,
    /// Input name, e.g. `1k/gmm_d2_K5` or `ba1`.
    pub input: String,
    /// Where it came from: `shared` or `generated`.
    pub source: String,
    /// Number of differentiated parameters.
    pub params: usize,
    /// Engine.
    pub engine: String,
    /// Objective seconds (minimum per evaluation).
    pub objective_s: f64,
    /// Derivative seconds (minimum per evaluation).
    pub derivative_s: f64,
    /// Derivative ÷ objective.
    pub ratio: f64,
    /// Peak heap bytes of one derivative evaluation above the level before it.
    pub peak_bytes: usize,
    /// Result of the agreement check, `ok` or what failed.
    pub check: String,
}

/// Find ADBench's data directory.
pub fn data_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_dir().then(|| p.to_path_buf());
    }
    let candidates = [
        PathBuf::from("../shared/adbench"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/adbench"),
    ];
    candidates.into_iter().find(|p| p.join("gmm").is_dir())
}

/// The GMM inputs of a run: `(name, source, input)`.
pub fn gmm_inputs(dir: Option<&Path>, quick: bool) -> Vec<(String, String, io::GmmInput)> {
    let ds: &[usize] = if quick {
        &[2, 10, 20]
    } else {
        &[2, 10, 20, 32, 64]
    };
    let ks: &[usize] = if quick {
        &[5, 25]
    } else {
        &[5, 10, 25, 50, 100, 200]
    };
    let mut out = Vec::new();
    let sets: &[(&str, usize, usize)] = if quick {
        &[("1k", 1000, 64)]
    } else {
        &[("1k", 1000, 64), ("10k", 10_000, 32)]
    };
    for &(set, n, dmax) in sets {
        for &d in ds.iter().filter(|&&d| d <= dmax) {
            for &k in ks {
                let name = format!("{set}/gmm_d{d}_K{k}");
                let file = dir.map(|p| p.join(format!("gmm/{set}/gmm_d{d}_K{k}.txt")));
                match file.filter(|f| f.is_file()) {
                    Some(f) => match io::read_gmm(&f) {
                        Ok(g) => out.push((name, "shared".into(), g)),
                        Err(e) => eprintln!("skipping {name}: {e}"),
                    },
                    // ADBench ships no d64 K200 (1k) and no d ≥ 20 at 10k: generate them.
                    None if set == "10k" || dir.is_none() => out.push((
                        name,
                        "generated".into(),
                        io::generate_gmm(d, k, n, (d * 1000 + k) as u64),
                    )),
                    None => {}
                }
            }
        }
    }
    out
}

/// The BA inputs of a run.
pub fn ba_inputs(dir: Option<&Path>, quick: bool) -> Vec<(String, String, io::BaInput)> {
    let count = if quick { 3 } else { 10 };
    let sizes = [
        (49, 7776, 31843),
        (21, 11315, 36455),
        (161, 48126, 182072),
        (372, 47423, 204472),
        (257, 65132, 225911),
        (539, 65220, 277273),
        (93, 61203, 287451),
        (88, 64298, 383937),
        (810, 88814, 393775),
        (1197, 126327, 563734),
    ];
    (1..=count)
        .map(|i| {
            let (n, m, p) = sizes[i - 1];
            let name = format!("ba{i}");
            let file = dir.map(|d| d.join(format!("ba/ba{i}_n{n}_m{m}_p{p}.txt")));
            match file.filter(|f| f.is_file()).map(|f| io::read_ba(&f)) {
                Some(Ok(b)) => (name, "shared".to_string(), b),
                _ => (
                    name,
                    "generated".to_string(),
                    io::parse_ba(&io::write_ba(n, m, p), "generated").expect("well-formed"),
                ),
            }
        })
        .collect()
}

/// Check a GMM gradient: against forward mode when the parameter count is small, otherwise
/// against finite differences on a sample of coordinates.
fn check_gmm(g: &io::GmmInput, p: &[f64], grad: &[f64]) -> String {
    if p.len() <= 300 {
        let fwd = adjoint::forward::gradient(|v| gmm::gmm_objective(g, v), p);
        return agree(grad, &fwd).map_or_else(|e| format!("vs forward: {e}"), |_| "ok".into());
    }
    let mut worst = 0.0f64;
    for i in (0..p.len()).step_by(p.len() / 7 + 1) {
        let (fd, _) = adjoint::check::numeric_derivative(
            |t| {
                let mut q = p.to_vec();
                q[i] = t;
                gmm::gmm_objective(g, &q)
            },
            p[i],
            1e-3,
        );
        worst = worst.max((fd - grad[i]).abs() / (fd.abs() + grad[i].abs()).max(1.0));
    }
    if worst < 1e-6 {
        "ok (sampled finite differences)".into()
    } else {
        format!("finite differences disagree: {worst:.1e}")
    }
}

/// Check the BA Jacobian's first rows against forward mode (ADBench's rule).
fn check_ba(b: &io::BaInput, j: &ba::Csr) -> String {
    for i in 0..b.p.min(20) {
        let o = b.obs[i];
        let mut input = vec![0.0; 15];
        input[..11].copy_from_slice(&b.cams[11 * o[0]..11 * o[0] + 11]);
        input[11..14].copy_from_slice(&b.x[3 * o[1]..3 * o[1] + 3]);
        input[14] = b.w[i];
        let feat = &b.feats[2 * i..2 * i + 2];
        for r in 0..2 {
            let mut row = vec![0.0; 15];
            for (c, slot) in row.iter_mut().enumerate() {
                let mut e = vec![0.0; 15];
                e[c] = 1.0;
                let (_, t) = adjoint::forward::jvp(
                    |v| ba::reproj_error(&v[..11], &v[11..14], v[14], feat).to_vec(),
                    &input,
                    &e,
                );
                *slot = t[r];
            }
            let k = 2 * i + r;
            let got = &j.vals[j.row_ptr[k]..j.row_ptr[k + 1]];
            if let Err(e) = agree(got, &row) {
                return format!("row {k} vs forward: {e}");
            }
        }
    }
    "ok".into()
}

/// Run GMM and BA with every landed engine.
pub fn run(dir: Option<&Path>, quick: bool) -> Vec<Row> {
    let budget = if quick {
        Budget::QUICK
    } else {
        Budget::ADBENCH
    };
    let mut rows = Vec::new();
    for (name, source, g) in gmm_inputs(dir, quick) {
        eprintln!("  gmm {name} ({source})");
        let p = g.params();
        let objective_s = time_min(|| gmm::gmm_objective(&g, &p), budget);
        let mut grad = vec![0.0; p.len()];
        let (_, peak, _) = peak_during(|| gmm::gmm_gradient_tape(&g, &p, &mut grad));
        let check = check_gmm(&g, &p, &grad);
        let derivative_s = time_min(|| gmm::gmm_gradient_tape(&g, &p, &mut grad), budget);
        rows.push(Row {
            task: "gmm".into(),
            input: name,
            source,
            params: p.len(),
            engine: "tape".into(),
            objective_s,
            derivative_s,
            ratio: derivative_s / objective_s,
            peak_bytes: peak,
            check,
        });
    }
    for (name, source, b) in ba_inputs(dir, quick) {
        eprintln!("  ba {name} ({source})");
        let mut out = Vec::new();
        let objective_s = time_min(|| ba::ba_objective(&b, &mut out), budget);
        let (j, peak, _) = peak_during(|| ba::ba_jacobian_tape(&b));
        let check = check_ba(&b, &j);
        let derivative_s = time_min(|| ba::ba_jacobian_tape(&b), budget);
        rows.push(Row {
            task: "ba".into(),
            input: name,
            source,
            params: b.n_cols(),
            engine: "tape".into(),
            objective_s,
            derivative_s,
            ratio: derivative_s / objective_s,
            peak_bytes: peak,
            check,
        });
    }
    rows
}

/// Markdown table of the rows.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| task | input | source | params | engine | objective | derivative | ratio | peak heap | check |\n|---|---|---|---:|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} |\n",
            r.task,
            r.input,
            r.source,
            r.params,
            r.engine,
            crate::harness::fmt_time(r.objective_s),
            crate::harness::fmt_time(r.derivative_s),
            r.ratio,
            crate::harness::fmt_bytes(r.peak_bytes),
            r.check
        );
    }
    s
}
