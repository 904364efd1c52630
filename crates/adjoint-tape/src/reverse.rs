//! The reverse pass: walk the job graph backwards, sweeping each job's tape once.
//!
//! Within a job the sweep is the classic tape loop (seed 003 §10.3): for each entry from last to
//! first, add `partial × adjoint` into its operands. Across jobs it follows the task tree in
//! reverse: a fork in the primal becomes a `rayon::join` here. A job's imported slots hand their
//! adjoints back to the owning job: at once when the owner lies inside the task being resolved
//! (only this thread touches it), otherwise deferred to the enclosing fork, which merges the left
//! side's contributions before the right side's. That fixed order makes the gradient
//! independent of the number of threads, bit for bit.

use crate::record::{BadValue, Entry, Graph, Job, Label, Segment, Shape, Task};
use std::sync::Mutex;

/// An adjoint contribution to entry `seq` of job `job`.
#[derive(Clone, Copy)]
pub(crate) struct Scatter {
    job: u16,
    seq: u32,
    value: f64,
}

/// Sealed jobs prepared for the reverse pass.
pub(crate) struct Jobs<'a> {
    pub jobs: Vec<Mutex<Box<Job>>>,
    pub job_task: &'a [u32],
    pub task_parent: &'a [u32],
    pub checked: bool,
}

impl Jobs<'_> {
    fn lock(&self, j: u16) -> std::sync::MutexGuard<'_, Box<Job>> {
        self.jobs[j as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Is `job` inside `task` or one of its sub-tasks?
    fn inside(&self, job: u16, task: u32) -> bool {
        let mut t = self.job_task[job as usize];
        loop {
            if t == task {
                return true;
            }
            let p = self.task_parent[t as usize];
            if p == t {
                return false;
            }
            t = p;
        }
    }

    fn scatter(&self, task: u32, s: Scatter, deferred: &mut Vec<Scatter>) {
        if self.inside(s.job, task) {
            self.lock(s.job).adj[s.seq as usize] += s.value;
        } else {
            deferred.push(s);
        }
    }

    /// Resolve a task; returns contributions for jobs outside it, in deterministic order.
    pub fn resolve(&self, task: &Task) -> Result<Vec<Scatter>, BadValue> {
        let mut deferred = Vec::new();
        let mut out = Vec::new();
        for seg in task.segs.iter().rev() {
            match seg {
                Segment::Job(j) => {
                    {
                        let mut job = self.lock(*j);
                        // (careful: an ∞ · 0 of one job would surface in another's gradient)
                        sweep(&mut job, self.checked, *j, true)?;
                        out.clear();
                        out.extend(job.imports.iter().filter_map(|imp| {
                            let value = job.adj[imp.slot as usize];
                            (value != 0.0).then_some(Scatter {
                                job: imp.job,
                                seq: imp.seq,
                                value,
                            })
                        }));
                    }
                    for &s in &out {
                        self.scatter(task.id, s, &mut deferred);
                    }
                }
                Segment::Fork(a, b) => {
                    let (da, db) = rayon::join(|| self.resolve(a), || self.resolve(b));
                    // (a checked report names the right side's bad value first: it comes later
                    // in the program, so a sequential reverse sweep meets it first; the left's
                    // was reported, unlike the same terms written without `join`, a hunter)
                    let db = db?;
                    for s in da?.into_iter().chain(db) {
                        self.scatter(task.id, s, &mut deferred);
                    }
                }
            }
        }
        Ok(deferred)
    }
}

/// Prepare the graph's jobs: zeroed adjoint arrays of the right length.
///
/// Zeroing is memory-bound and, done on one thread, was the reverse pass's serial part: 6 % of
/// the gradient of 256 particles (3.6 M entries in some 500 jobs) on one thread, a ceiling of about
/// 8× at 16 threads. From [`PAR_ZERO_MIN`] entries on, the jobs are zeroed in parallel (which
/// thread zeroes which job does not touch any value, so the gradient stays bit-identical).
pub(crate) fn take_jobs(g: &mut Graph, out: &mut Vec<Mutex<Box<Job>>>) {
    out.clear();
    out.extend(
        g.jobs
            .drain(..)
            .map(|j| Mutex::new(j.expect("every job is sealed before the reverse pass"))),
    );
    fn job(m: &mut Mutex<Box<Job>>) -> &mut Job {
        m.get_mut().unwrap_or_else(|e| e.into_inner())
    }
    let entries: usize = out.iter_mut().map(|m| job(m).len() as usize).sum();
    if entries >= PAR_ZERO_MIN && rayon::current_num_threads() > 1 {
        // In pieces of PAR_ZERO_CHUNK adjoints, not a job per thread: a recording of two large
        // jobs would otherwise use two cores.
        use rayon::prelude::*;
        let adjs: Vec<&mut [f64]> = out
            .iter_mut()
            .map(|m| {
                let j = job(m);
                let n = j.len() as usize;
                j.adj.resize(n, 0.0); // (only a grown tail is written here; the rest below)
                &mut j.adj[..]
            })
            .collect();
        adjs.into_par_iter()
            .flat_map(|a| a.par_chunks_mut(PAR_ZERO_CHUNK))
            .for_each(|c| c.fill(0.0));
    } else {
        out.iter_mut()
            .for_each(|m| crate::api::zero_adjoints(job(m)));
    }
}

/// The number of adjoints (8 bytes each) from which [`take_jobs`] zeroes jobs in parallel: 2 MiB,
/// a few hundred microseconds of one thread's memory bandwidth, far more than a fork costs.
pub(crate) const PAR_ZERO_MIN: usize = 1 << 18;

/// The pieces [`take_jobs`] zeroes in parallel: 256 KiB of adjoints.
const PAR_ZERO_CHUNK: usize = 1 << 15;

/// Give the jobs back to the graph (for another sweep, or for reuse).
pub(crate) fn return_jobs(g: &mut Graph, jobs: &mut Vec<Mutex<Box<Job>>>) {
    g.jobs.extend(
        jobs.drain(..)
            .map(|m| Some(m.into_inner().unwrap_or_else(|e| e.into_inner()))),
    );
}

/// One job's sweep, stopping at checkpoints (to recompute them) and at the results of slice
/// primitives (to apply their vector adjoints).
#[inline]
///
/// `careful`: an infinite adjoint through a zero partial gives 0 (`through`). Without it the
/// scalar loop multiplies (∞ · 0 = NaN) and saves a test per entry; the one-job reverse pass
/// sweeps so first and again carefully only if the gradient came out with a NaN, which such a
/// product always reaches (every entry has an active operand, and NaN sticks).
pub(crate) fn sweep(job: &mut Job, checked: bool, idx: u16, careful: bool) -> Result<(), BadValue> {
    if plain_scalar(job, checked) {
        // Plain scalar code: one loop.
        let tape = Entries {
            entries: &job.entries,
            lo: job.leading_leaves as usize,
        };
        return if careful {
            sweep_range::<true>(tape, &mut job.adj, tape.lo, tape.hi(), None)
        } else {
            sweep_range::<false>(tape, &mut job.adj, tape.lo, tape.hi(), None)
        };
    }
    sweep_stops(job, checked, idx)
}

/// Whether `sweep` runs `job` as one scalar loop, the only sweep that honours `careful =
/// false`; every other is careful anyway.
pub(crate) fn plain_scalar(job: &Job, checked: bool) -> bool {
    !checked && job.checkpoints.is_empty() && job.nary.is_empty()
}

/// A job with checkpoints or slice primitives, or checked: always careful (the test per entry
/// is small next to what these jobs do).
#[inline(never)]
fn sweep_stops(job: &mut Job, checked: bool, idx: u16) -> Result<(), BadValue> {
    let Job {
        entries,
        leading_leaves,
        adj,
        checkpoints,
        nary,
        runs,
        partials,
        labels,
        ..
    } = job;
    let tape = Entries {
        entries,
        lo: *leading_leaves as usize,
    };
    let labels = checked.then_some((&labels[..], idx));
    let mut hi = tape.hi();
    let (mut c, mut n) = (checkpoints.len(), nary.len());
    // Walk both lists (each in tape order) from the end, taking the later stop first.
    loop {
        let cp_at = c.checked_sub(1).map(|i| checkpoints[i].start as usize);
        let n_at = n.checked_sub(1).map(|i| nary[i].at as usize);
        match (cp_at, n_at) {
            (None, None) => break,
            (Some(a), b) if b.is_none_or(|b| a > b) => {
                let cp = &checkpoints[c - 1];
                sweep_range::<true>(tape, adj, cp.end as usize, hi, labels)?;
                crate::checkpoint::reverse(cp, adj, labels.is_some(), idx)?;
                hi = cp.start as usize;
                c -= 1;
            }
            _ => {
                let op = nary[n - 1];
                sweep_range::<true>(tape, adj, (op.at + op.results()) as usize, hi, labels)?;
                match op.shape {
                    Shape::One => sweep_nary(op, runs, partials, adj, labels)?,
                    Shape::Matvec { rows, cols, m, x } => {
                        let (rows, cols) = (rows as usize, cols as usize);
                        let p0 = op.p0 as usize;
                        let xv = &partials[p0..p0 + cols];
                        let mv = match x {
                            Some(_) => &partials[p0 + cols..p0 + cols + rows * cols],
                            None => &[],
                        };
                        let (m, x) = (m.map(|m| m as usize), x.map(|x| x as usize));
                        sweep_matvec(op.at as usize, rows, m, x, xv, mv, adj);
                    }
                }
                hi = op.at as usize;
                n -= 1;
            }
        }
    }
    sweep_range::<true>(tape, adj, tape.lo.min(hi), hi, labels)
}

/// The adjoint of one slice-primitive result: each operand run gets `partial × adjoint`, a
/// contiguous, vectorisable loop.
#[inline]
fn sweep_nary(
    op: crate::record::Nary,
    runs: &[crate::record::Run],
    partials: &[f64],
    adj: &mut [f64],
    labels: Option<(&[Label], u16)>,
) -> Result<(), BadValue> {
    let a = adj[op.at as usize];
    if a == 0.0 {
        return Ok(());
    }
    let mut p = op.p0 as usize;
    for r in &runs[op.runs.0 as usize..op.runs.1 as usize] {
        let (first, len) = (r.first as usize, r.len as usize);
        let ps = &partials[p..p + len];
        if let Some((labels, idx)) = labels {
            if a.is_finite() && !ps.iter().all(|&q| through(q, a).is_finite()) {
                let bad = ps
                    .iter()
                    .copied()
                    .find(|&q| !through(q, a).is_finite())
                    .unwrap_or(0.0);
                return Err(BadValue {
                    label: labels[op.at as usize],
                    operands: [bad, 0.0],
                    value: a,
                    job: u32::from(idx),
                    seq: op.at,
                    in_checkpoint: false,
                });
            }
        }
        add_scaled(&mut adj[first..first + len], ps, a);
        p += len;
    }
    Ok(())
}

/// The adjoint of `out = M x` recorded as one record (`record_matvec`): with `ā` the results'
/// adjoints (at `at..`), `M̄ += ā xᵀ` (when `M` is active, at `m`) and `x̄ += Mᵀ ā` (when `x`
/// is, at `x`), from the recorded values `xv` and `mv`. Rows are taken last to first, as the
/// tape would sweep one `dot` per row, so the sums are added in the same order as on that path.
fn sweep_matvec(
    at: usize,
    rows: usize,
    m: Option<usize>,
    x: Option<usize>,
    xv: &[f64],
    mv: &[f64],
    adj: &mut [f64],
) {
    let cols = xv.len();
    // The operands precede the results: split there so the results' adjoints can be read while
    // the operands' are updated.
    let (lo, hi) = adj.split_at_mut(at);
    let out = &hi[..rows];
    let rows_of = |i: usize| i * cols..(i + 1) * cols;
    match (m, x) {
        (Some(m), None) => {
            let gm = &mut lo[m..m + rows * cols];
            for i in (0..rows).rev() {
                let a = out[i];
                if a != 0.0 {
                    add_scaled(&mut gm[rows_of(i)], xv, a);
                }
            }
        }
        (None, Some(x)) => {
            let gx = &mut lo[x..x + cols];
            for i in (0..rows).rev() {
                let a = out[i];
                if a != 0.0 {
                    add_scaled(gx, &mv[rows_of(i)], a);
                }
            }
        }
        (Some(m), Some(x)) if m + rows * cols <= x || x + cols <= m => {
            // Two non-overlapping runs: two slices, and loops the compiler vectorises.
            let (gm, gx) = if m < x {
                let (a, b) = lo.split_at_mut(x);
                (&mut a[m..m + rows * cols], &mut b[..cols])
            } else {
                let (a, b) = lo.split_at_mut(m);
                (&mut b[..rows * cols], &mut a[x..x + cols])
            };
            for i in (0..rows).rev() {
                let a = out[i];
                if a == 0.0 {
                    continue;
                }
                add_scaled(&mut gm[rows_of(i)], xv, a);
                add_scaled(gx, &mv[rows_of(i)], a);
            }
        }
        (Some(m), Some(x)) => {
            // `M` and `x` share values (a matrix times part of itself): element by element,
            // in the order the per-row records would use.
            for i in (0..rows).rev() {
                let a = out[i];
                if a == 0.0 {
                    continue;
                }
                for j in 0..cols {
                    lo[m + i * cols + j] += through(xv[j], a);
                }
                for j in 0..cols {
                    lo[x + j] += through(mv[i * cols + j], a);
                }
            }
        }
        (None, None) => {}
    }
}

/// An adjoint `a` through a partial `p`: `p · a`, but 0 for a zero partial whatever the
/// adjoint, ∞ and NaN included. A zero partial means the result does not move with that operand,
/// so nothing flows back: the reverse twin of forward mode's zero tangent through an infinite
/// partial (`forward::tangent`), and what makes the two agree at, say, the norm of a zero vector
/// (`sqrt(x·x)` at 0: the adjoint of `x·x` is ∞, its partial `2x` is 0).
#[inline(always)]
fn through(p: f64, a: f64) -> f64 {
    if p == 0.0 {
        0.0
    } else {
        p * a
    }
}

/// `g += a · v` element by element (`through` each partial when `a` is not finite).
#[inline]
fn add_scaled(g: &mut [f64], v: &[f64], a: f64) {
    if a.is_finite() {
        for (g, &v) in g.iter_mut().zip(v) {
            *g += v * a;
        }
    } else {
        for (g, &v) in g.iter_mut().zip(v) {
            *g += through(v, a);
        }
    }
}

/// A job's entries by position: positions `lo..` have entries, those below are the leading
/// leaves (the sink and the inputs), which have no operands and so nothing to sweep.
#[derive(Clone, Copy)]
struct Entries<'a> {
    entries: &'a [Entry],
    lo: usize,
}

impl Entries<'_> {
    /// One past the last position.
    fn hi(&self) -> usize {
        self.lo + self.entries.len()
    }
}

/// The tape loop over positions `lo..hi`, last to first (leading leaves skipped). In checked
/// mode (`labels` given) it stops at the first entry whose finite adjoint makes a non-finite
/// contribution.
#[inline]
fn sweep_range<const CAREFUL: bool>(
    tape: Entries<'_>,
    adj: &mut [f64],
    lo: usize,
    hi: usize,
    labels: Option<(&[Label], u16)>,
) -> Result<(), BadValue> {
    // Entry `k - base` is position `k`.
    let (entries, base) = (tape.entries, tape.lo);
    let lo = lo.max(base);
    if let Some((labels, idx)) = labels {
        for k in (lo..hi).rev() {
            let a = adj[k];
            if a != 0.0 {
                let e = entries[k - base];
                let (c0, c1) = (through(e.p[0], a), through(e.p[1], a));
                if a.is_finite() && !(c0.is_finite() && c1.is_finite()) {
                    return Err(BadValue {
                        label: labels[k],
                        operands: e.p,
                        value: a,
                        job: u32::from(idx),
                        seq: k as u32,
                        in_checkpoint: false,
                    });
                }
                adj[e.i[0] as usize] += c0;
                adj[e.i[1] as usize] += c1;
            }
        }
        return Ok(());
    }
    assert!(hi <= tape.hi() && tape.hi() == adj.len());
    for k in (lo..hi).rev() {
        // SAFETY: base ≤ lo ≤ k < hi ≤ tape.hi() = base + entries.len() = adj.len() (asserted
        // above), so `k` indexes `adj` and `k - base` indexes `entries`. Every entry's operands
        // precede it: `Job::push` only ever receives positions of existing values or the
        // entry's own position — `Job::local` returns a position < len or a freshly pushed
        // slot, `copy_to_run` positions from `Job::position`, and `record1`/`record2` accept an
        // id of the current range only below `len`/`limit`, where every id was handed out for
        // a pushed position (ids exist only for pushed positions; a reset takes a fresh range).
        // So all operand indices are < adj.len().
        unsafe {
            let a = *adj.get_unchecked(k);
            // A zero adjoint contributes nothing, even through an infinite partial (sqrt at 0),
            // and a zero partial nothing, even of an infinite adjoint (`through`).
            if a != 0.0 {
                let e = *entries.get_unchecked(k - base);
                let (c0, c1) = if !CAREFUL || a.is_finite() {
                    (e.p[0] * a, e.p[1] * a)
                } else {
                    (through(e.p[0], a), through(e.p[1], a))
                };
                *adj.get_unchecked_mut(e.i[0] as usize) += c0;
                *adj.get_unchecked_mut(e.i[1] as usize) += c1;
            }
        }
    }
    Ok(())
}
