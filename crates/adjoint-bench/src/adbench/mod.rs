//! ADBench GMM, BA and LSTM (seed 001 Tables 1–2, seed 004 §5): readers, objectives, gradients in
//! every landed engine, ADBench's timing protocol.
//!
//! Inputs come from `../shared/adbench` (or `--data DIR`) when present, otherwise from the
//! generator with ADBench's recipe, so a fresh clone runs too.

pub mod array;
pub mod ba;
pub mod gmm;
pub mod io;
pub mod lstm;
pub mod plot;
pub mod protocol;
pub mod reversible;

use crate::alloc::peak_during;
use std::ops::{Add, Mul, Sub};

/// The numbers the ADBench objectives are written for: `num_traits::Float` with `f64` operands.
/// Implemented by `f64`, adjoint's `Dual` and `Var`, and echidna's `Reverse<f64>`, so every
/// engine and the Rust peer run the same source.
pub trait Scalar:
    num_traits::Float + Add<f64, Output = Self> + Sub<f64, Output = Self> + Mul<f64, Output = Self>
{
}

impl<T> Scalar for T where
    T: num_traits::Float + Add<f64, Output = T> + Sub<f64, Output = T> + Mul<f64, Output = T>
{
}

/// A constant of type `T`.
#[inline(always)]
pub fn c<T: Scalar>(v: f64) -> T {
    T::from(v).expect("every Scalar converts from f64")
}

/// The primal value.
#[inline(always)]
pub fn val<T: Scalar>(t: &T) -> f64 {
    t.to_f64().expect("every Scalar converts to f64")
}
use protocol::{agree, time_min, Budget};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What an engine must provide for ADBench: gradients of the GMM's two parts and a BA block.
pub trait Engine: Sync {
    /// Whether the engine records a tape (the GMM gradient then sizes its chunks of points to
    /// the caches: [`gmm::chunk_points`]).
    const TAPE: bool = false;
    /// Column name.
    fn name(&self) -> &'static str;
    /// Value and gradient of the data term over points `from..to`.
    fn gmm_data_grad(&self, g: &io::GmmInput, p: &[f64], from: usize, to: usize)
        -> (f64, Vec<f64>);
    /// Value and gradient of the remaining GMM terms.
    fn gmm_rest_grad(&self, g: &io::GmmInput, p: &[f64]) -> (f64, Vec<f64>);
    /// The 2 × 15 Jacobian of one observation's residuals w.r.t. (camera, point, weight).
    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2];
    /// [`Engine::ba_block`] written row after row into `rows` (its place in the CSR values):
    /// an engine whose derivative comes out in another layout overrides it to skip the
    /// intermediate block.
    fn ba_rows(&self, input: &[f64; 15], feat: &[f64], rows: &mut [f64; 30]) {
        let blk = self.ba_block(input, feat);
        rows[..15].copy_from_slice(&blk[0]);
        rows[15..].copy_from_slice(&blk[1]);
    }
}

/// [`Engine::ba_block`] of an engine that implements [`Engine::ba_rows`].
pub fn ba_block_from_rows<E: Engine + ?Sized>(
    engine: &E,
    input: &[f64; 15],
    feat: &[f64],
) -> [[f64; 15]; 2] {
    let mut rows = [0.0; 30];
    engine.ba_rows(input, feat, &mut rows);
    std::array::from_fn(|r| std::array::from_fn(|i| rows[15 * r + i]))
}

/// adjoint's tape engine. Its GMM data term is written with the slice primitives
/// ([`gmm::gmm_data_term_vector`]); [`TapeScalar`] runs the scalar source.
pub struct Tape;

impl Engine for Tape {
    const TAPE: bool = true;
    fn name(&self) -> &'static str {
        "tape"
    }
    fn gmm_data_grad(
        &self,
        g: &io::GmmInput,
        p: &[f64],
        from: usize,
        to: usize,
    ) -> (f64, Vec<f64>) {
        adjoint_tape::value_and_grad(
            |v: &[adjoint_tape::Var]| gmm::gmm_data_term_vector(g, v, from, to),
            p,
        )
    }
    fn gmm_rest_grad(&self, g: &io::GmmInput, p: &[f64]) -> (f64, Vec<f64>) {
        adjoint_tape::value_and_grad(|v: &[adjoint_tape::Var]| gmm::gmm_rest(g, v), p)
    }
    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
        ba_block_from_rows(self, input, feat)
    }
    fn ba_rows(&self, input: &[f64; 15], feat: &[f64], rows: &mut [f64; 30]) {
        // straight into the CSR values, the outputs an array: no allocation per observation
        adjoint_tape::jacobian_into(
            |v: &[adjoint_tape::Var]| ba::reproj_error(&v[..11], &v[11..14], v[14], feat),
            input,
            rows,
        );
    }
}

/// adjoint's tape engine on the scalar GMM source (every operation one entry), for comparison
/// with [`Tape`]'s slice primitives in the same run.
pub struct TapeScalar;

impl Engine for TapeScalar {
    const TAPE: bool = true;
    fn name(&self) -> &'static str {
        "tape-scalar"
    }
    fn gmm_data_grad(
        &self,
        g: &io::GmmInput,
        p: &[f64],
        from: usize,
        to: usize,
    ) -> (f64, Vec<f64>) {
        adjoint_tape::value_and_grad(
            |v: &[adjoint_tape::Var]| gmm::gmm_data_term(g, v, from, to),
            p,
        )
    }
    fn gmm_rest_grad(&self, g: &io::GmmInput, p: &[f64]) -> (f64, Vec<f64>) {
        Tape.gmm_rest_grad(g, p)
    }
    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
        Tape.ba_block(input, feat)
    }
}

/// The Rust peer `echidna` (Adept-style tape), running the same source.
pub struct Echidna;

impl Engine for Echidna {
    const TAPE: bool = true;
    fn name(&self) -> &'static str {
        "echidna"
    }
    fn gmm_data_grad(
        &self,
        g: &io::GmmInput,
        p: &[f64],
        from: usize,
        to: usize,
    ) -> (f64, Vec<f64>) {
        let (v, gr) = echidna::vjp(|v| vec![gmm::gmm_data_term(g, v, from, to)], p, &[1.0]);
        (v[0], gr)
    }
    fn gmm_rest_grad(&self, g: &io::GmmInput, p: &[f64]) -> (f64, Vec<f64>) {
        let (v, gr) = echidna::vjp(|v| vec![gmm::gmm_rest(g, v)], p, &[1.0]);
        (v[0], gr)
    }
    fn ba_block(&self, input: &[f64; 15], feat: &[f64]) -> [[f64; 15]; 2] {
        // echidna has no record-once reverse Jacobian: one vjp per row.
        let mut out = [[0.0; 15]; 2];
        for (r, row) in out.iter_mut().enumerate() {
            let mut w = [0.0; 2];
            w[r] = 1.0;
            let (_, gr) = echidna::vjp(
                |v| ba::reproj_error(&v[..11], &v[11..14], v[14], feat).to_vec(),
                input,
                &w,
            );
            row.copy_from_slice(&gr);
        }
        out
    }
}

/// One measured row.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
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
    /// Objective seconds (minimum per evaluation): the plain sequential program's, at every
    /// thread count (adjoint's rows; a peer's row has its own objective).
    pub objective_s: f64,
    /// Derivative seconds (minimum per evaluation).
    pub derivative_s: f64,
    /// Derivative ÷ objective. At more than one thread this is the parallel derivative in units
    /// of one sequential objective evaluation (below 1 where the derivative scales well), not
    /// the derivative's cost over a parallel objective's.
    pub ratio: f64,
    /// Peak heap bytes of one derivative evaluation above the level before it (adjoint's
    /// engines, measured on a separate untimed call; `None` for peers, see [`run_peers`]).
    pub peak_bytes: Option<usize>,
    /// Result of the agreement check, `ok` or what failed.
    pub check: String,
    /// Size of the rayon pool the row ran in (0: not controlled by the harness, e.g. peers).
    #[serde(default)]
    pub threads: usize,
}

/// Find ADBench's data directory: the explicit one (an error if it is not a directory with a
/// `gmm` or `ba` folder), else `../shared/adbench` when present, else `None` (generated inputs).
pub fn data_dir(explicit: Option<&Path>) -> Result<Option<PathBuf>, String> {
    if let Some(p) = explicit {
        if p.exists() && !p.is_dir() {
            return Err(format!("--data {}: not a directory", p.display()));
        }
        if !p.is_dir() {
            return Err(format!("--data {}: no such directory", p.display()));
        }
        if !p.join("gmm").is_dir() && !p.join("ba").is_dir() {
            return Err(format!(
                "--data {}: not an ADBench data directory (no gmm/ or ba/ inside)",
                p.display()
            ));
        }
        return Ok(Some(p.to_path_buf()));
    }
    let candidates = [
        PathBuf::from("../shared/adbench"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/adbench"),
    ];
    Ok(candidates.into_iter().find(|p| p.join("gmm").is_dir()))
}

/// An input of a run: its name, where it came from, the file it was read from (if any).
pub type Named<T> = (String, String, Option<PathBuf>, T);

/// Whether ADBench's data has this GMM input: the 1k set has every d ≤ 128 and K ≤ 200 except
/// d = 64, K = 200; the 10k set only d = 2 and 10. The rest of the measured grid is generated
/// (and named so: `gen-…`).
fn gmm_in_adbench(set: &str, d: usize, k: usize) -> bool {
    match set {
        "1k" if d == 128 => k <= 25,
        "1k" => !(d == 64 && k == 200),
        "10k" => d <= 10,
        _ => false,
    }
}

/// The name of a generated input: ADBench's name with `gen-` in front, so that a reader cannot
/// mistake generated values for ADBench's files.
fn generated_name(name: &str) -> String {
    format!("gen-{name}")
}

/// Which inputs and engines to measure.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Only inputs whose name contains this string (or one of its comma-separated parts).
    pub filter: Option<String>,
    /// Only these engines (adjoint's and peers'); `None`: all.
    pub engines: Option<Vec<String>>,
}

impl Selection {
    /// Whether input `name` is selected: it contains the filter, or one of its comma-separated
    /// parts (`1k/gmm_d10_K25,ba2`); a part ending in `$` must be the whole name (`ba1$`: not
    /// `ba10`).
    fn input(&self, name: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| {
            f.split(',').any(|part| match part.strip_suffix('$') {
                Some(whole) => name == whole,
                None => name.contains(part),
            })
        })
    }
    /// Whether `engine` is selected.
    pub fn engine(&self, engine: &str) -> bool {
        self.engines
            .as_ref()
            .is_none_or(|e| e.iter().any(|x| x == engine))
    }
    /// An error naming the unknown engines, if any.
    pub fn check_engines(&self) -> Result<(), String> {
        let known = known_engines();
        match &self.engines {
            Some(list) => {
                let unknown: Vec<&String> = list
                    .iter()
                    .filter(|e| !known.contains(&e.as_str()))
                    .collect();
                if unknown.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "--engines: unknown {unknown:?}; known engines: {}",
                        known.join(", ")
                    ))
                }
            }
            None => Ok(()),
        }
    }
}

/// Every engine name `--engines` accepts: adjoint's and the peers'.
pub fn known_engines() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = gmm_engines().iter().map(|e| e.name()).collect();
    for e in ba_engines() {
        if !v.contains(&e.name()) {
            v.push(e.name());
        }
    }
    if cfg!(feature = "cuda") && !v.contains(&"array-cuda") {
        v.push("array-cuda");
    }
    v.extend(["pytorch", "jax", "autograd", "adolc"]);
    v
}

/// The GMM inputs of a run. Every input that is not ADBench's file says so: it is named
/// `gen-…`, its source is `generated` (with the reason when a file was expected), and a missing
/// or unreadable file prints one line on stderr.
pub fn gmm_inputs(dir: Option<&Path>, quick: bool, sel: &Selection) -> Vec<Named<io::GmmInput>> {
    let ds: &[usize] = if quick {
        &[2, 10, 20]
    } else {
        &[2, 10, 20, 32, 64, 128]
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
        &[("1k", 1000, 128), ("10k", 10_000, 32)]
    };
    for &(set, n, dmax) in sets {
        for &d in ds.iter().filter(|&&d| d <= dmax) {
            // d = 128: ADBench's three inputs only (K ≤ 25; larger K would take the CPU
            // engines minutes)
            for &k in ks.iter().filter(|&&k| d < 128 || k <= 25) {
                let name = format!("{set}/gmm_d{d}_K{k}");
                if !sel.input(&name) {
                    continue;
                }
                // Inputs ADBench does not have are generated (and named so); files it should
                // have are reported when missing or unreadable.
                let expected = dir.is_some() && gmm_in_adbench(set, d, k);
                let file = dir.map(|p| p.join(format!("gmm/{set}/gmm_d{d}_K{k}.txt")));
                let why = match file.as_ref().filter(|f| f.is_file()) {
                    Some(f) => match io::read_gmm(f) {
                        Ok(g) => {
                            out.push((name, "shared".into(), Some(f.clone()), g));
                            continue;
                        }
                        Err(e) => Some(format!("{} unreadable ({e})", f.display())),
                    },
                    None if expected => Some(format!(
                        "{} missing",
                        file.as_ref().expect("expected only with a dir").display()
                    )),
                    None => None,
                };
                let gen = generated_name(&name);
                let source = match &why {
                    Some(why) => {
                        eprintln!("adbench: {why}; measuring generated input {gen} instead");
                        "generated (file missing or unreadable)".to_string()
                    }
                    None => {
                        if dir.is_some() {
                            eprintln!("adbench: {name} is not in ADBench's data; measuring generated input {gen}");
                        }
                        "generated".to_string()
                    }
                };
                // Round-trip through the file format so that every tool, in process or reading
                // the written file, sees the same (6-decimal) numbers.
                let g = io::generate_gmm(d, k, n, (d * 1000 + k) as u64);
                let g = io::parse_gmm(&io::write_gmm(&g), &gen).expect("own format");
                out.push((gen, source, None, g));
            }
        }
    }
    out
}

/// ADBench's file for input `name` when there is a data directory (`file`), else a generated
/// input named `gen-<name>`; a missing or unreadable file is said on stderr and in the source.
fn read_or_generate<T>(
    name: String,
    file: Option<PathBuf>,
    read: impl Fn(&Path) -> Result<T, io::ReadError>,
    generate: impl FnOnce(&str) -> T,
) -> Named<T> {
    let why = match &file {
        Some(f) if f.is_file() => match read(f) {
            Ok(v) => return (name, "shared".to_string(), Some(f.clone()), v),
            Err(e) => Some(format!("{} unreadable ({e})", f.display())),
        },
        Some(f) => Some(format!("{} missing", f.display())),
        None => None,
    };
    let gen = generated_name(&name);
    let source = match why {
        Some(why) => {
            eprintln!("adbench: {why}; measuring generated input {gen} instead");
            "generated (file missing or unreadable)"
        }
        None => "generated",
    };
    let v = generate(&gen);
    (gen, source.to_string(), None, v)
}

/// The BA inputs of a run (missing or unreadable files: as for [`gmm_inputs`]).
pub fn ba_inputs(dir: Option<&Path>, quick: bool, sel: &Selection) -> Vec<Named<io::BaInput>> {
    let count = if quick { 3 } else { 20 };
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
        (1723, 156502, 678718),
        (253, 163691, 899155),
        (245, 198739, 1091386),
        (356, 226730, 1255268),
        (1102, 780462, 4052340),
        (1544, 942409, 4750193),
        (1778, 993923, 5001946),
        (1936, 649673, 5213733),
        (4585, 1324582, 9125125),
        (13682, 4456117, 2987644),
    ];
    let mut out = Vec::new();
    for i in 1..=count {
        let (n, m, p) = sizes[i - 1];
        let name = format!("ba{i}");
        if !sel.input(&name) {
            continue;
        }
        let file = dir.map(|d| d.join(format!("ba/ba{i}_n{n}_m{m}_p{p}.txt")));
        out.push(read_or_generate(name, file, io::read_ba, |gen| {
            io::parse_ba(&io::write_ba(n, m, p), gen).expect("well-formed")
        }));
    }
    out
}

/// The LSTM inputs of a run: ADBench's four (`--quick`: l = 2, c = 1024 only), read from the
/// data directory or generated with ADBench's recipe (named `gen-…`).
pub fn lstm_inputs(dir: Option<&Path>, quick: bool, sel: &Selection) -> Vec<Named<io::LstmInput>> {
    let sizes: &[(usize, usize)] = if quick {
        &[(2, 1024)]
    } else {
        &[(2, 1024), (2, 4096), (4, 1024), (4, 4096)]
    };
    let b = 14;
    let mut out = Vec::new();
    for &(l, c) in sizes {
        let name = format!("lstm_l{l}_c{c}");
        if !sel.input(&name) {
            continue;
        }
        let file = dir.map(|d| d.join(format!("lstm/{name}.txt")));
        out.push(read_or_generate(name, file, io::read_lstm, |gen| {
            let g = io::generate_lstm(l, c, b, (100 * l + c) as u64);
            io::parse_lstm(&io::write_lstm(&g), gen).expect("own format")
        }));
    }
    out
}

/// The first element that is NaN or infinite, as a check's verdict.
fn non_finite(v: &[f64]) -> Option<String> {
    let (i, x) = v.iter().enumerate().find(|(_, x)| !x.is_finite())?;
    Some(format!("element {i} is {x}"))
}

/// The check of every engine's row where the plain objective itself is not finite (an input
/// whose objective is NaN passed as `ok`, the engines agreeing on NaN-free gradients; a hunter).
fn objective_failed(why: String) -> String {
    format!("objective: {why}")
}

/// The gradient `grad` of `f` at `p` against forward mode, block by block: for each block of
/// parameters a directional derivative along a pseudo-random direction on that block (one
/// forward-mode evaluation, every coordinate of the block at once), and single coordinates at
/// each block's ends. A hunter found the earlier samples blind: LSTM's extra parameters at
/// l = 4 and most of GMM's alphas and means were never looked at, so a gradient with those
/// zeroed was `ok`. A disagreement beyond 1e-8 of the terms' size (at least 1e-4: an absolute
/// 1e-12), or a NaN, is an error. One direction per block catches a block that is
/// wrong as a whole, or one coordinate wrong by about 1e-2 of a large block's size; smaller
/// errors in one coordinate of a block of thousands can pass.
fn directional_check(
    f: impl Fn(&[adjoint::forward::Dual64]) -> adjoint::forward::Dual64,
    p: &[f64],
    grad: &[f64],
    blocks: &[(&str, std::ops::Range<usize>)],
) -> Result<(), String> {
    let jvp = |v: &[f64]| adjoint::forward::jvp(|x| vec![f(x)], p, v).1[0];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    // The floor of every comparison's scale, 1e-4 (an absolute tolerance of 1e-12): a block
    // whose derivative is exactly 0 (one GMM component: ∂/∂α₀ = n − n) passes against forward
    // mode's rounding (4e-13), while a zeroed block of O(1e-3) or larger derivatives still
    // fails. (A floor of 1e-6 of the objective's value, or of the whole gradient's size, hid a
    // zeroed alpha block where the data are far from the means; a reviewer.)
    let floor = 1e-4;
    for (name, r) in blocks {
        if r.is_empty() {
            continue;
        }
        let mut v = vec![0.0; p.len()];
        for x in &mut v[r.clone()] {
            // a 64-bit LCG's top bits: a direction in [−1, 1), the same on every run
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            *x = (seed >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
        }
        let mut samples = vec![v];
        for i in [r.start, r.end - 1] {
            let mut e = vec![0.0; p.len()];
            e[i] = 1.0;
            samples.push(e);
        }
        for v in samples {
            let want = jvp(&v);
            let (got, size) = r.clone().fold((0.0, 0.0), |(s, a), i| {
                (s + grad[i] * v[i], a + (grad[i] * v[i]).abs())
            });
            let scale = size.max(want.abs()).max(floor).max(1e-300);
            let err = (got - want).abs() / scale;
            if err.is_nan() || err >= 1e-8 {
                return Err(format!(
                    "{name}: gradient · direction {got:e}, forward mode {want:e}"
                ));
            }
        }
    }
    Ok(())
}

/// Check an LSTM gradient: every element finite, and against forward mode block by block
/// ([`directional_check`]: the main and the extra parameters).
fn check_lstm(g: &io::LstmInput, p: &[f64], grad: &[f64]) -> String {
    if let Some(e) = non_finite(grad) {
        return e;
    }
    let m = g.main.len();
    let blocks = [("main parameters", 0..m), ("extra parameters", m..p.len())];
    match directional_check(|v| lstm::lstm_loss(g, v), p, grad, &blocks) {
        Ok(_) => "ok (forward mode, block by block)".into(),
        Err(e) => format!("forward mode disagrees: {e}"),
    }
}

/// Check a GMM gradient: against forward mode, in full when the parameter count is small,
/// otherwise block by block ([`directional_check`]: alphas, means, icf).
fn check_gmm(g: &io::GmmInput, p: &[f64], grad: &[f64]) -> String {
    if p.len() <= 300 {
        let fwd = adjoint::forward::gradient(|v| gmm::gmm_objective(g, v), p);
        return agree(grad, &fwd).map_or_else(|e| format!("vs forward: {e}"), |_| "ok".into());
    }
    if let Some(e) = non_finite(grad) {
        return e;
    }
    let (a, mu) = (g.k, g.k + g.k * g.d);
    let blocks = [("alphas", 0..a), ("means", a..mu), ("icf", mu..p.len())];
    match directional_check(|v| gmm::gmm_objective(g, v), p, grad, &blocks) {
        Ok(_) => "ok (forward mode, block by block)".into(),
        Err(e) => format!("forward mode disagrees: {e}"),
    }
}

/// Whether a BA Jacobian has ADBench's shape and sparsity: 3p × (11n + 3m + p), the 2p
/// reprojection rows first with 15 entries each (observation `i`'s camera, point and weight
/// columns, in that order), then one entry per weight row, in the weight's column.
fn ba_structure(b: &io::BaInput, j: &ba::Csr) -> Result<(), String> {
    let (n, m, p) = (b.n, b.m, b.p);
    let cols = 11 * n + 3 * m + p;
    if (j.rows, j.cols) != (3 * p, cols) {
        return Err(format!(
            "shape {} × {}, ADBench's is {} × {cols}",
            j.rows,
            j.cols,
            3 * p
        ));
    }
    if j.row_ptr.len() != 3 * p + 1 || j.col_idx.len() != j.vals.len() {
        return Err("row offsets or column indices of the wrong length".into());
    }
    let mut want: Vec<u32> = Vec::with_capacity(15);
    for r in 0..3 * p {
        want.clear();
        if r < 2 * p {
            let [cam, pt] = b.obs[r / 2];
            want.extend((0..11).map(|c| (11 * cam + c) as u32));
            want.extend((0..3).map(|c| (11 * n + 3 * pt + c) as u32));
            want.push((11 * n + 3 * m + r / 2) as u32);
        } else {
            want.push((11 * n + 3 * m + r - 2 * p) as u32);
        }
        let (lo, hi) = (j.row_ptr[r] as usize, j.row_ptr[r + 1] as usize);
        if j.col_idx.get(lo..hi) != Some(&want[..]) {
            return Err(format!("row {r}'s columns are not ADBench's"));
        }
    }
    Ok(())
}

/// Check the BA Jacobian: ADBench's sparsity, every value finite, the weight rows (−2w), and
/// against forward mode (ADBench's rule) the rows of the first and last 8 observations and of
/// 48 spread over the rest (the first 20 only were checked, inside the first of the 64-
/// observation tasks that fill the matrix; a hunter).
fn check_ba(b: &io::BaInput, j: &ba::Csr) -> String {
    if let Err(e) = ba_structure(b, j) {
        return e;
    }
    if let Some(e) = non_finite(&j.vals) {
        return e;
    }
    for i in 0..b.p {
        let k = j.row_ptr[2 * b.p + i] as usize;
        if let Err(e) = agree(&j.vals[k..k + 1], &[-2.0 * b.w[i]]) {
            return format!("weight row {}: {e}", 2 * b.p + i);
        }
    }
    let mut sample: Vec<usize> = (0..b.p.min(8)).chain(b.p.saturating_sub(8)..b.p).collect();
    sample.extend((0..48).map(|k| k * b.p / 48));
    sample.sort_unstable();
    sample.dedup();
    for i in sample {
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
            let got = &j.vals[j.row_ptr[k] as usize..j.row_ptr[k + 1] as usize];
            if let Err(e) = agree(got, &row) {
                return format!("row {k} vs forward: {e}");
            }
        }
    }
    "ok".into()
}

/// A GMM gradient column as the runner sees it (object-safe).
pub trait GmmColumn {
    /// Column name.
    fn name(&self) -> &'static str;
    /// The GMM objective and its gradient (into `grad`) at parameters `p`.
    fn gmm(&self, g: &io::GmmInput, p: &[f64], grad: &mut [f64]) -> f64;
}

/// A BA Jacobian column as the runner sees it (object-safe).
pub trait BaColumn {
    /// Column name.
    fn name(&self) -> &'static str;
    /// The whole sparse Jacobian, assembled into `out` (its arrays reused from call to call:
    /// every index and value is written again, only the allocation is kept).
    fn ba(&self, b: &io::BaInput, out: &mut ba::Csr);
}

impl<E: Engine> GmmColumn for E {
    fn name(&self) -> &'static str {
        Engine::name(self)
    }
    fn gmm(&self, g: &io::GmmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        gmm::gmm_gradient(self, g, p, grad)
    }
}

impl<E: Engine> BaColumn for E {
    fn name(&self) -> &'static str {
        Engine::name(self)
    }
    fn ba(&self, b: &io::BaInput, out: &mut ba::Csr) {
        ba::ba_jacobian_into(self, b, out)
    }
}

/// adjoint's vector forward mode (`DualVec<15>`): the BA blocks in one pass each.
struct ForwardVec;

impl BaColumn for ForwardVec {
    fn name(&self) -> &'static str {
        "forward-vec"
    }
    fn ba(&self, b: &io::BaInput, out: &mut ba::Csr) {
        ba::ba_jacobian_with(ba::ba_block_forward, b, out)
    }
}

/// Every engine that computes the GMM gradient, adjoint's first. New engines add one entry.
fn gmm_engines() -> Vec<Box<dyn GmmColumn>> {
    #[allow(unused_mut)]
    let mut v: Vec<Box<dyn GmmColumn>> = vec![
        Box::new(Tape),
        Box::new(TapeScalar),
        Box::new(reversible::Reversible),
        Box::new(crate::ssabench::Ssa),
        Box::new(array::Array::default()),
        Box::new(Echidna),
    ];
    #[cfg(feature = "cuda")]
    match array::Array::cuda() {
        Ok(c) => v.push(Box::new(c)),
        Err(e) => no_gpu_column(&e),
    }
    v
}

/// No GPU column: say why, once.
#[cfg(feature = "cuda")]
fn no_gpu_column(why: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("adbench: no array-cuda column: {why}"));
}

/// Every engine that computes the BA Jacobian, adjoint's first. New engines add one entry.
fn ba_engines() -> Vec<Box<dyn BaColumn>> {
    #[allow(unused_mut)]
    let mut v: Vec<Box<dyn BaColumn>> = vec![
        Box::new(Tape),
        Box::new(ForwardVec),
        Box::new(reversible::Reversible),
        Box::new(crate::ssabench::Ssa),
        Box::new(array::ArrayBa::default()),
        Box::new(Echidna),
    ];
    #[cfg(feature = "cuda")]
    match array::ArrayBa::cuda() {
        Ok(c) => v.push(Box::new(c)),
        Err(e) => no_gpu_column(&e),
    }
    v
}

/// Every engine that computes the LSTM gradient, adjoint's first. New engines add one entry.
fn lstm_engines() -> Vec<Box<dyn lstm::LstmColumn>> {
    vec![
        Box::new(lstm::Tape),
        Box::new(crate::ssabench::SsaLstm),
        Box::new(array::ArrayLstm::default()),
        Box::new(lstm::Echidna),
    ]
}

/// One input handed to the peers: the file to read and adjoint's derivative to compare with.
#[derive(Clone, Debug, Serialize)]
pub struct ManifestItem {
    /// `gmm` or `ba`.
    pub task: String,
    /// Input name.
    pub name: String,
    /// `shared` or `generated`.
    pub source: String,
    /// The input file (ADBench's, or written by this run).
    pub path: PathBuf,
    /// Little-endian f64 file: the GMM or LSTM gradient, or the BA Jacobian's CSR values, of
    /// the first engine selected (the tape's when only peers are selected).
    pub reference: PathBuf,
    /// The engine that computed `reference`: the peers name it in their agreement check.
    pub reference_engine: String,
    /// Where the plain objective at this input is not finite: the check every row of the input
    /// gets, the peers' included (they compare only with `reference`, and agreeing on a
    /// gradient of a NaN objective is no pass). Not written to the manifest the peers read.
    #[serde(skip)]
    pub objective_failed: Option<String>,
}

/// A peer's row as the table shows it: where the input's objective is not finite (see
/// [`ManifestItem::objective_failed`]), its check says so instead of the peer's own verdict.
///
/// ```
/// use adjoint_bench::adbench::{with_objective_check, ManifestItem, Row};
/// let item = |failed: Option<&str>| ManifestItem {
///     task: "gmm".into(),
///     name: "1k/gmm_d2_K5".into(),
///     source: "shared".into(),
///     path: "x.txt".into(),
///     reference: "x.f64".into(),
///     reference_engine: "tape".into(),
///     objective_failed: failed.map(String::from),
/// };
/// let row = Row {
///     task: "gmm".into(),
///     input: "1k/gmm_d2_K5".into(),
///     source: "shared".into(),
///     params: 10,
///     engine: "pytorch".into(),
///     objective_s: 1e-3,
///     derivative_s: 2e-3,
///     ratio: 2.0,
///     peak_bytes: None,
///     check: "ok (= tape)".into(),
///     threads: 0,
/// };
/// let bad = [item(Some("objective: element 0 is NaN"))];
/// assert_eq!(with_objective_check(&bad, row.clone()).check, "objective: element 0 is NaN");
/// assert_eq!(with_objective_check(&[item(None)], row.clone()).check, "ok (= tape)");
/// ```
pub fn with_objective_check(manifest: &[ManifestItem], mut row: Row) -> Row {
    let failed = manifest
        .iter()
        .find(|m| m.task == row.task && m.name == row.input)
        .and_then(|m| m.objective_failed.as_ref());
    if let Some(check) = failed {
        row.check = check.clone();
    }
    row
}

/// Write one engine's derivative beside the inputs (a message, not a failure, when it cannot).
fn write_result(work: &Path, input: &str, engine: &str, v: &[f64]) {
    let path = work.join(format!("{}.{engine}.f64", input.replace('/', "_")));
    if let Err(e) = std::fs::create_dir_all(work).and_then(|_| write_f64s(&path, v)) {
        eprintln!("  cannot write {}: {e}", path.display());
    }
}

fn write_f64s(path: &Path, v: &[f64]) -> std::io::Result<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes)
}

/// The inputs handed to the peers, each written into `work` as it is added.
struct Manifest<'w> {
    work: &'w Path,
    items: Vec<ManifestItem>,
}

impl Manifest<'_> {
    /// Hand an input and a reference derivative (`(engine, values)`) to the peers: the input's
    /// file (ADBench's, or `text` written out) and the reference's. A message, not a failure,
    /// when they cannot be written.
    fn add(
        &mut self,
        (task, name, source): (&str, &str, &str),
        file: Option<&Path>,
        text: impl FnOnce() -> String,
        (reference_engine, reference): (&str, &[f64]),
        objective_failed: Option<String>,
    ) {
        let write = || -> std::io::Result<ManifestItem> {
            std::fs::create_dir_all(self.work)?;
            let stem = name.replace('/', "_");
            let path = match file {
                Some(f) => f.to_path_buf(),
                None => {
                    let p = self.work.join(format!("{stem}.txt"));
                    std::fs::write(&p, text())?;
                    p
                }
            };
            let refp = self.work.join(format!("{stem}.reference.f64"));
            write_f64s(&refp, reference)?;
            Ok(ManifestItem {
                task: task.into(),
                name: name.into(),
                source: source.into(),
                path: std::fs::canonicalize(&path)?,
                reference: std::fs::canonicalize(&refp)?,
                reference_engine: reference_engine.into(),
                objective_failed,
            })
        };
        match write() {
            Ok(item) => self.items.push(item),
            Err(e) => eprintln!("  cannot write peer inputs for {name}: {e}"),
        }
    }
}

/// Run GMM and BA with every selected engine; inputs and references for the peers go to `work`,
/// and so does every engine's derivative (`<input>.<engine>.f64`, little-endian f64: the GMM
/// gradient or the BA Jacobian's CSR values), so agreement can be checked from the files.
pub fn run(
    dir: Option<&Path>,
    quick: bool,
    full_grid: bool,
    sel: &Selection,
    work: &Path,
) -> (Vec<Row>, Vec<ManifestItem>) {
    let small = quick && !full_grid;
    let mut manifest = Manifest {
        work,
        items: Vec::new(),
    };
    let budget = if quick {
        Budget::QUICK
    } else {
        Budget::ADBENCH
    };
    let mut rows = Vec::new();
    for (name, source, file, g) in gmm_inputs(dir, small, sel) {
        eprintln!("  gmm {name} ({source})");
        let p = g.params();
        let objective_s = time_min(|| gmm::gmm_objective(&g, &p), budget);
        let objective_check = non_finite(&[gmm::gmm_objective(&g, &p)]).map(objective_failed);
        // The first selected engine's derivative: the others are compared with it, and the
        // peers with the file written from it.
        let mut reference: Option<(&'static str, Vec<f64>)> = None;
        for engine in gmm_engines().into_iter().filter(|e| sel.engine(e.name())) {
            let mut grad = vec![0.0; p.len()];
            let (_, peak, _) = peak_during(|| engine.gmm(&g, &p, &mut grad));
            write_result(work, &name, engine.name(), &grad);
            let check = match (&objective_check, &reference) {
                (Some(failed), _) => failed.clone(),
                (None, None) => check_gmm(&g, &p, &grad),
                (None, Some((first, r))) => agree(&grad, r).map_or_else(
                    |e| format!("vs {first}: {e}"),
                    |_| format!("ok (= {first})"),
                ),
            };
            if reference.is_none() {
                manifest.add(
                    ("gmm", &name, &source),
                    file.as_deref(),
                    || io::write_gmm(&g),
                    (engine.name(), &grad),
                    objective_check.clone(),
                );
            }
            reference.get_or_insert_with(|| (engine.name(), grad.clone()));
            let derivative_s = time_min(|| engine.gmm(&g, &p, &mut grad), budget);
            rows.push(Row {
                task: "gmm".into(),
                input: name.clone(),
                source: source.clone(),
                params: p.len(),
                engine: engine.name().into(),
                objective_s,
                derivative_s,
                ratio: derivative_s / objective_s,
                peak_bytes: Some(peak),
                check,
                threads: rayon::current_num_threads(),
            });
        }
        if reference.is_none() {
            // Only peers selected: they still need the input file and a reference to check.
            let mut grad = vec![0.0; p.len()];
            gmm::gmm_gradient_tape(&g, &p, &mut grad);
            manifest.add(
                ("gmm", &name, &source),
                file.as_deref(),
                || io::write_gmm(&g),
                ("tape", &grad),
                objective_check.clone(),
            );
        }
    }
    for (name, source, file, b) in ba_inputs(dir, small, sel) {
        eprintln!("  ba {name} ({source})");
        let mut out = Vec::new();
        let objective_s = time_min(|| ba::ba_objective(&b, &mut out), budget);
        let objective_check = non_finite(&out).map(objective_failed);
        // The first selected engine's derivative: the others are compared with it, and the
        // peers with the file written from it.
        let mut reference: Option<(&'static str, Vec<f64>)> = None;
        for engine in ba_engines().into_iter().filter(|e| sel.engine(e.name())) {
            // The first call allocates the matrix (counted in the peak); the timed calls
            // rebuild it in place, as ADBench's harness refills its `BASparseMat`.
            let mut j = ba::Csr::default();
            let (_, peak, _) = peak_during(|| engine.ba(&b, &mut j));
            write_result(work, &name, engine.name(), &j.vals);
            let check = match (&objective_check, &reference) {
                (Some(failed), _) => failed.clone(),
                (None, None) => check_ba(&b, &j),
                (None, Some((first, r))) => ba_structure(&b, &j)
                    .and_then(|_| agree(&j.vals, r))
                    .map_or_else(
                        |e| format!("vs {first}: {e}"),
                        |_| format!("ok (= {first})"),
                    ),
            };
            if reference.is_none() {
                manifest.add(
                    ("ba", &name, &source),
                    file.as_deref(),
                    || io::write_ba(b.n, b.m, b.p),
                    (engine.name(), &j.vals),
                    objective_check.clone(),
                );
            }
            reference.get_or_insert_with(|| (engine.name(), j.vals.clone()));
            let derivative_s = time_min(|| engine.ba(&b, &mut j), budget);
            rows.push(Row {
                task: "ba".into(),
                input: name.clone(),
                source: source.clone(),
                params: b.n_cols(),
                engine: engine.name().into(),
                objective_s,
                derivative_s,
                ratio: derivative_s / objective_s,
                peak_bytes: Some(peak),
                check,
                threads: rayon::current_num_threads(),
            });
        }
        if reference.is_none() {
            let j = ba::ba_jacobian(&Tape, &b);
            manifest.add(
                ("ba", &name, &source),
                file.as_deref(),
                || io::write_ba(b.n, b.m, b.p),
                ("tape", &j.vals),
                objective_check.clone(),
            );
        }
    }
    for (name, source, file, g) in lstm_inputs(dir, small, sel) {
        eprintln!("  lstm {name} ({source})");
        let p = g.params();
        let objective_s = time_min(|| lstm::lstm_loss(&g, &p), budget);
        let objective_check = non_finite(&[lstm::lstm_loss(&g, &p)]).map(objective_failed);
        let mut reference: Option<(&'static str, Vec<f64>)> = None;
        for engine in lstm_engines().into_iter().filter(|e| sel.engine(e.name())) {
            let mut grad = vec![0.0; p.len()];
            let (_, peak, _) = peak_during(|| engine.lstm(&g, &p, &mut grad));
            write_result(work, &name, engine.name(), &grad);
            let check = match (&objective_check, &reference) {
                (Some(failed), _) => failed.clone(),
                (None, None) => check_lstm(&g, &p, &grad),
                (None, Some((first, r))) => agree(&grad, r).map_or_else(
                    |e| format!("vs {first}: {e}"),
                    |_| format!("ok (= {first})"),
                ),
            };
            if reference.is_none() {
                manifest.add(
                    ("lstm", &name, &source),
                    file.as_deref(),
                    || io::write_lstm(&g),
                    (engine.name(), &grad),
                    objective_check.clone(),
                );
            }
            reference.get_or_insert_with(|| (engine.name(), grad.clone()));
            let derivative_s = time_min(|| engine.lstm(&g, &p, &mut grad), budget);
            rows.push(Row {
                task: "lstm".into(),
                input: name.clone(),
                source: source.clone(),
                params: p.len(),
                engine: engine.name().into(),
                objective_s,
                derivative_s,
                ratio: derivative_s / objective_s,
                peak_bytes: Some(peak),
                check,
                threads: rayon::current_num_threads(),
            });
        }
    }
    (rows, manifest.items)
}

/// Where `peers/install.sh` puts the peers.
///
/// That is `crates/adjoint-bench/peers` of the checkout the binary was built in, or of the
/// current directory when the binary was carried to another machine (e.g. the `device`
/// machine), or `$ADJOINT_PEERS_DIR`.
pub fn peers_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ADJOINT_PEERS_DIR") {
        return PathBuf::from(d);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers");
    let here = Path::new("crates/adjoint-bench/peers");
    if !built.is_dir() && here.is_dir() {
        return here.to_path_buf();
    }
    built
}

/// Run every installed peer on the manifest; returns their rows (none when nothing is installed).
///
/// Peers report no peak memory (`peak_bytes: None`): their process-wide peak is reached while
/// loading the framework, before any derivative runs, so its growth during one call is 0 and
/// says nothing.
///
/// `device` is where the Python peers compute (`cpu`, or `cuda`: passed on as `--device cuda`).
/// Their interpreter is `peers/.venv/bin/python`, or `$ADJOINT_PEERS_PYTHON` when set (e.g. a
/// machine's own `python3` with PyTorch and JAX installed).
///
/// Each row goes to `each` as soon as its peer prints it (the Python peers print one JSON row
/// per line as they go; ADOL-C prints one JSON array), so a caller can keep what was measured
/// before a run is cut short.
pub fn run_peers(
    manifest: &Path,
    quick: bool,
    sel: &Selection,
    device: &str,
    mut each: impl FnMut(Row),
) {
    let manifest = &std::fs::canonicalize(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let dir = peers_dir();
    let mut commands: Vec<(String, std::process::Command)> = Vec::new();
    let python = std::env::var_os("ADJOINT_PEERS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join(".venv/bin/python"));
    let python_ok = python.is_file()
        || (python.components().count() == 1
            && std::process::Command::new(&python)
                .arg("-c")
                .arg("pass")
                .status()
                .is_ok_and(|s| s.success()));
    if python_ok {
        for tool in ["pytorch", "jax", "autograd"]
            .into_iter()
            .filter(|t| sel.engine(t))
        {
            let module = if tool == "pytorch" { "torch" } else { tool };
            let importable = std::process::Command::new(&python)
                .args(["-c", &format!("import {module}")])
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !importable {
                eprintln!(
                    "  peer {tool}: `{module}` is not installed in peers/.venv (install.sh; \
                     SKIP_TORCH=1 leaves PyTorch out); skipped"
                );
                continue;
            }
            let mut c = std::process::Command::new(&python);
            c.arg(dir.join("adbench_py.py")).arg(tool).arg(manifest);
            if device != "cpu" {
                c.arg("--device").arg(device);
            }
            commands.push((tool.to_string(), c));
        }
    }
    let adolc = dir.join("build/adolc_peer");
    if adolc.is_file() && sel.engine("adolc") {
        let mut c = std::process::Command::new(adolc);
        c.arg(manifest);
        commands.push(("adolc".to_string(), c));
    }
    if !python_ok && !dir.join("build/adolc_peer").is_file() {
        eprintln!("adbench: no peers installed (run crates/adjoint-bench/peers/install.sh)");
    }
    for (tool, mut c) in commands {
        if quick {
            c.arg("--quick");
        }
        // Peers may leave scratch files (ADOL-C's tapes): keep them out of the checkout.
        if let Some(dir) = manifest.parent() {
            c.current_dir(dir);
        }
        eprintln!("  peer {tool}");
        let child = c
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                eprintln!("  peer {tool} could not start: {e}; skipped");
                continue;
            }
        };
        let stdout = child.stdout.take().expect("piped above");
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let line = match line {
                Ok(line) => line,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    eprintln!("  peer {tool}: a line of its output is not UTF-8; skipped");
                    continue;
                }
                Err(e) => {
                    eprintln!("  peer {tool}: reading its output: {e}");
                    break;
                }
            };
            match peer_rows(&line) {
                Ok(rows) => rows.into_iter().for_each(&mut each),
                Err(e) => eprintln!("  peer {tool}: unreadable output line ({e}): {line}"),
            }
        }
        match child.wait() {
            Ok(status) if !status.success() => {
                eprintln!("  peer {tool} failed ({status}); the rows it printed are kept")
            }
            Ok(_) => {}
            Err(e) => eprintln!("  peer {tool}: {e}"),
        }
    }
}

/// The rows on one line of a peer's output: one JSON row (the Python peers), a JSON array of
/// rows (ADOL-C), or none (a blank line). Peers' peak memory is dropped (see [`run_peers`]).
///
/// ```
/// use adjoint_bench::adbench::peer_rows;
/// let line = r#"{"task":"gmm","input":"1k/gmm_d2_K5","source":"shared","params":30,
///     "engine":"jax","objective_s":1e-4,"derivative_s":2e-4,"ratio":2.0,
///     "peak_bytes":4096,"check":"ok"}"#;
/// let one = line.replace('\n', "");
/// let rows = peer_rows(&one).unwrap();
/// assert_eq!((rows.len(), rows[0].engine.as_str(), rows[0].peak_bytes), (1, "jax", None));
/// assert_eq!(peer_rows(&format!("[{one},{one}]")).unwrap().len(), 2);
/// assert!(peer_rows("  ").unwrap().is_empty());
/// assert!(peer_rows("Traceback (most recent call last):").is_err());
/// ```
pub fn peer_rows(line: &str) -> Result<Vec<Row>, serde_json::Error> {
    if line.trim().is_empty() {
        return Ok(Vec::new());
    }
    let rows = match serde_json::from_str::<Row>(line) {
        Ok(row) => vec![row],
        Err(_) => serde_json::from_str::<Vec<Row>>(line)?,
    };
    Ok(rows
        .into_iter()
        .map(|r| Row {
            peak_bytes: None,
            ..r
        })
        .collect())
}

/// Markdown table of the rows, with a note on what the ratio means where a row ran on more
/// than one thread.
///
/// ```
/// use adjoint_bench::adbench::{markdown, Row};
/// let row = |threads: usize| Row {
///     task: "ba".into(),
///     input: "ba1".into(),
///     source: "generated".into(),
///     params: 10,
///     engine: "tape".into(),
///     objective_s: 1e-3,
///     derivative_s: 5e-4,
///     ratio: 0.5,
///     peak_bytes: None,
///     check: "ok".into(),
///     threads,
/// };
/// assert!(!markdown(&[row(1)]).contains("sequential"));
/// let table = markdown(&[row(1), row(16)]);
/// assert!(table.contains("| 16 | 1.00 ms | 500.00 µs | 0.5 |"), "{table}");
/// assert!(table.contains("the objective is the sequential program's"), "{table}");
/// ```
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| task | input | source | params | engine | threads | objective | derivative | ratio | peak heap | check |\n|---|---|---|---:|---|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let threads = match r.threads {
            0 => "—".to_string(),
            t => t.to_string(),
        };
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} |\n",
            r.task,
            r.input,
            r.source,
            r.params,
            r.engine,
            threads,
            crate::harness::fmt_time(r.objective_s),
            crate::harness::fmt_time(r.derivative_s),
            r.ratio,
            r.peak_bytes
                .map_or_else(|| "—".to_string(), crate::harness::fmt_bytes),
            r.check
        );
    }
    if rows.iter().any(|r| r.threads > 1) {
        s += "\nadjoint's rows: the objective is the sequential program's at every thread count, so \
              at more than one thread the ratio is the parallel derivative over one sequential \
              evaluation.\n";
    }
    s
}

/// Speed-up of each engine's derivative with the number of threads: time at the smallest thread
/// count measured over the time at each larger one (rows with `threads > 0` only).
pub fn scaling_markdown(rows: &[Row]) -> String {
    let mut counts: Vec<usize> = rows.iter().map(|r| r.threads).filter(|&t| t > 0).collect();
    counts.sort_unstable();
    counts.dedup();
    if counts.len() < 2 {
        return String::new();
    }
    let base = counts[0];
    let mut s = format!("| task | input | engine | derivative at {base} thread(s) |");
    for t in &counts[1..] {
        s += &format!(" speed-up at {t} |");
    }
    s += "\n|---|---|---|---:|";
    s += &"---:|".repeat(counts.len() - 1);
    s += "\n";
    let mut seen = Vec::new();
    for r in rows.iter().filter(|r| r.threads == base) {
        let key = (&r.task, &r.input, &r.engine);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        s += &format!(
            "| {} | {} | {} | {} |",
            r.task,
            r.input,
            r.engine,
            crate::harness::fmt_time(r.derivative_s)
        );
        for t in &counts[1..] {
            let other = rows.iter().find(|o| {
                o.threads == *t && o.task == r.task && o.input == r.input && o.engine == r.engine
            });
            s += &match other {
                Some(o) => format!(" {:.2}× |", r.derivative_s / o.derivative_s),
                None => " — |".to_string(),
            };
        }
        s += "\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ba_check_sees_a_wrong_structure_a_nan_and_a_wrong_weight_row() {
        let b = io::parse_ba(&io::write_ba(2, 3, 5), "test").unwrap();
        let mut j = ba::Csr::default();
        ba::ba_jacobian_into(&Tape, &b, &mut j);
        assert!(check_ba(&b, &j).starts_with("ok"), "{}", check_ba(&b, &j));
        // (the check read values only, of the first rows: any structure passed)
        let mut bad = j.clone();
        bad.col_idx.swap(3, 4);
        assert!(
            check_ba(&b, &bad).contains("row 0's columns"),
            "{}",
            check_ba(&b, &bad)
        );
        let mut bad = j.clone();
        bad.vals[16] = f64::NAN;
        assert_eq!(check_ba(&b, &bad), "element 16 is NaN");
        let mut bad = j.clone();
        let w = bad.row_ptr[2 * b.p + 4] as usize;
        bad.vals[w] *= 1.5;
        assert!(
            check_ba(&b, &bad).starts_with("weight row 14"),
            "{}",
            check_ba(&b, &bad)
        );
    }

    #[test]
    fn a_nan_fails_the_gmm_and_lstm_checks() {
        // (the earlier sampled checks folded errors with `f64::max`, which drops a NaN)
        let g = io::generate_gmm(10, 5, 20, 7);
        let p = g.params();
        assert!(p.len() > 300, "the block-by-block branch");
        let mut grad = vec![0.0; p.len()];
        gmm::gmm_gradient(&Tape, &g, &p, &mut grad);
        assert!(check_gmm(&g, &p, &grad).starts_with("ok"));
        for i in [0, 1] {
            // (an alpha at the block's start, and one inside it)
            let mut bad = grad.clone();
            bad[i] = f64::NAN;
            assert_eq!(check_gmm(&g, &p, &bad), format!("element {i} is NaN"));
            // and the block check alone, without the finiteness test in front of it
            let blocks = [("alphas", 0..g.k), ("rest", g.k..p.len())];
            let e = directional_check(|v| gmm::gmm_objective(&g, v), &p, &bad, &blocks);
            assert!(e.as_ref().is_err_and(|e| e.contains("alphas")), "{e:?}");
        }
        let l = io::generate_lstm(1, 3, 2, 5);
        let p = l.params();
        let mut grad = vec![f64::NAN; p.len()];
        assert!(check_lstm(&l, &p, &grad).contains("NaN"));
        grad.fill(0.0);
        assert!(check_lstm(&l, &p, &grad).contains("disagrees"));
    }

    /// ADBench's BA files give every observation the same camera, point, weight and feature,
    /// so an engine that read another observation's data would agree with every other one
    /// there (a hunter): here each differs, and every engine's whole Jacobian is compared with
    /// vector forward mode's, element by element.
    #[test]
    fn every_ba_engine_reads_each_observation_s_own_data() {
        let mut b = io::parse_ba(&io::write_ba(7, 11, 150), "test").unwrap();
        let mut s = 7u64;
        let mut r = move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        b.cams.iter_mut().for_each(|c| *c *= 0.9 + 0.2 * r());
        b.x.iter_mut().for_each(|x| *x *= 0.9 + 0.2 * r());
        b.w.iter_mut().for_each(|w| *w = 0.5 + r());
        b.feats.iter_mut().for_each(|f| *f += r() - 0.5);
        let want = ba::ba_jacobian_forward(&b);
        assert!(
            check_ba(&b, &want).starts_with("ok"),
            "{}",
            check_ba(&b, &want)
        );
        for e in ba_engines() {
            let mut j = ba::Csr::default();
            e.ba(&b, &mut j);
            assert_eq!(
                (&j.row_ptr, &j.col_idx),
                (&want.row_ptr, &want.col_idx),
                "{}",
                e.name()
            );
            if let Err(err) = agree(&j.vals, &want.vals) {
                panic!("{}: {err}", e.name());
            }
        }
    }

    /// A hunter's blind spots of the checks: GMM's alphas beyond the first and most means,
    /// LSTM's extra parameters at l = 4, BA's observations after the 20th were never looked
    /// at, so gradients wrong there were `ok`.
    /// A block whose derivative is exactly 0 (one component: ∂/∂α₀ = n − n) was "forward
    /// mode disagrees" for every engine: forward mode's 4e-13 against 0 (a reviewer).
    #[test]
    fn a_zero_block_derivative_passes_the_check() {
        let g = io::generate_gmm(30, 1, 200, 3);
        let p = g.params();
        assert!(p.len() > 300, "the block-by-block branch");
        let mut grad = vec![0.0; p.len()];
        gmm::gmm_gradient(&Tape, &g, &p, &mut grad);
        let verdict = check_gmm(&g, &p, &grad);
        assert!(verdict.starts_with("ok"), "{verdict}");
        let mut bad = grad.clone();
        bad[0] = 1e-3;
        let verdict = check_gmm(&g, &p, &bad);
        assert!(verdict.contains("alphas"), "{verdict}");
        // Data far from the means: an objective of ~1e20, alpha derivatives in the hundreds;
        // a zeroed alpha block fails (a floor from the objective's value hid it; a reviewer).
        let mut g = io::generate_gmm(10, 5, 1000, 7);
        g.x.iter_mut().for_each(|x| *x *= 1e8);
        let p = g.params();
        let mut grad = vec![0.0; p.len()];
        gmm::gmm_gradient(&Tape, &g, &p, &mut grad);
        assert!(check_gmm(&g, &p, &grad).starts_with("ok"));
        grad[..g.k].fill(0.0);
        let verdict = check_gmm(&g, &p, &grad);
        assert!(verdict.contains("alphas"), "{verdict}");
    }

    #[test]
    fn the_checks_look_at_every_block() {
        let g = io::generate_gmm(10, 25, 30, 3);
        let p = g.params();
        let mut grad = vec![0.0; p.len()];
        gmm::gmm_gradient(&Tape, &g, &p, &mut grad);
        assert!(
            check_gmm(&g, &p, &grad).starts_with("ok"),
            "{}",
            check_gmm(&g, &p, &grad)
        );
        let (k, kd) = (g.k, g.k * g.d);
        let mut bad = grad.clone();
        bad[1..k].fill(0.0);
        assert!(
            check_gmm(&g, &p, &bad).contains("alphas"),
            "{}",
            check_gmm(&g, &p, &bad)
        );
        let mut bad = grad.clone();
        bad[k + 3..k + kd - 3].iter_mut().for_each(|m| *m = -*m);
        assert!(
            check_gmm(&g, &p, &bad).contains("means"),
            "{}",
            check_gmm(&g, &p, &bad)
        );
        let mut bad = grad.clone();
        *bad.last_mut().unwrap() *= 1.001;
        assert!(
            check_gmm(&g, &p, &bad).contains("icf"),
            "{}",
            check_gmm(&g, &p, &bad)
        );

        let l = io::generate_lstm(4, 3, 4, 5);
        let p = l.params();
        let (_, grad) = adjoint::tape::value_and_grad(|v| lstm::lstm_loss(&l, v), &p);
        assert!(
            check_lstm(&l, &p, &grad).starts_with("ok"),
            "{}",
            check_lstm(&l, &p, &grad)
        );
        let mut bad = grad.clone();
        bad[l.main.len()..].iter_mut().for_each(|e| *e += 123.0);
        let verdict = check_lstm(&l, &p, &bad);
        assert!(verdict.contains("extra parameters"), "{verdict}");

        let b = io::parse_ba(&io::write_ba(3, 5, 200), "test").unwrap();
        let mut j = ba::Csr::default();
        ba::ba_jacobian_into(&Tape, &b, &mut j);
        assert!(check_ba(&b, &j).starts_with("ok"), "{}", check_ba(&b, &j));
        let mut bad = j.clone();
        bad.vals[600..30 * b.p].fill(0.0);
        assert!(
            check_ba(&b, &bad).contains("vs forward"),
            "{}",
            check_ba(&b, &bad)
        );
        let mut bad = j.clone();
        bad.vals[30 * b.p - 1] *= 1.5; // the last observation's last value
        assert!(
            check_ba(&b, &bad).contains("vs forward"),
            "{}",
            check_ba(&b, &bad)
        );
    }
}
