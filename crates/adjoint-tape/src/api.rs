//! The user-facing API: [`Tape`] and the free functions that use a per-thread tape.

use crate::record::{with_state, BadValue, Ctx, Job, Label, Segment, Session, State, Task};
use crate::reverse::{return_jobs, take_jobs, Jobs};
use crate::var::Var;
use adjoint_core::forward::Dual;
use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A context with a fresh session, for a tape's first recording.
fn fresh_ctx() -> Box<Ctx> {
    Box::new(Ctx {
        session: Arc::new(Session::new()),
        job_idx: 0,
        job: None,
        task: Task {
            id: 0,
            segs: Vec::new(),
        },
    })
}

/// A reusable tape. Recording into the same `Tape` again reuses every buffer, so after the first
/// call of a given size, [`Tape::grad_into`] performs no heap allocation (sequential code; a
/// [`join`](crate::join) allocates its job-graph node).
///
/// ```
/// use adjoint_tape::{Tape, Var};
/// let mut tape = Tape::new();
/// let mut g = [0.0; 2];
/// for k in 0..3 {
///     let y = tape.grad_into(|x: &[Var]| x[0] * x[1] + k as f64, &[2.0, 5.0], &mut g);
///     assert_eq!((y, g), (10.0 + k as f64, [5.0, 2.0]));
/// }
/// ```
pub struct Tape {
    /// The recording context, reused from one recording to the next: its session holds the
    /// tape buffers and the job graph, and after a recording its task is the root task.
    /// `None` only after the recorded function panicked (the context was dropped with it).
    ctx: Option<Box<Ctx>>,
    /// Whether `ctx` holds a finished recording.
    recorded: bool,
    jobs: Vec<Mutex<Box<crate::record::Job>>>,
    inputs: Vec<Var>,
    checked: bool,
    /// Record checkpointed regions inline (checked mode's whole recording of a region, see
    /// [`checkpoint`](crate::checkpoint)); carried by the recording's session, not the thread.
    inline_checkpoints: bool,
}

impl Default for Tape {
    fn default() -> Self {
        Tape::new()
    }
}

/// Which pass found a non-finite value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The primal computation.
    Forward,
    /// The backpropagation of adjoints.
    Reverse,
}

/// The first NaN or infinity found in checked mode ([`Tape::checked`], [`checked_grad`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NonFinite {
    /// Forward or reverse pass.
    pub pass: Pass,
    /// The primitive, e.g. `Ln`, `Powf`, `dot` (with " inside a checkpointed region" where it
    /// was found inside one: forward, by checked mode's recording of the region; reverse, by
    /// its recomputation; `position` is then the region's first output).
    pub primitive: String,
    /// Forward: the operand values (a constant operand's too). Reverse: the recorded partials.
    /// Only the first [`arity`](NonFinite::arity) are meaningful.
    pub operands: [f64; 2],
    /// How many of `operands` the primitive has: 1 for a unary primitive and for a slice
    /// primitive or checkpoint (whose first operand is shown), 2 for a binary one.
    pub arity: usize,
    /// What the report is about (for the message and to pass it out of a checkpoint).
    label: Label,
    in_checkpoint: bool,
    /// Forward: the result. Reverse: the (finite) adjoint that met the partials.
    pub value: f64,
    /// The job, numbered in the program's sequential order (0 for sequential code; the jobs
    /// of a fork's left side before its right side), the same for every thread count.
    pub job: u32,
    /// Position of the operation on its job's tape (inputs are 1..=n).
    pub position: u32,
}

impl NonFinite {
    fn new(pass: Pass, b: BadValue) -> Self {
        let (mut primitive, arity) = match b.label {
            Label::Leaf => ("input or checkpoint output".to_string(), 1),
            Label::Un(op) => (format!("{op:?}"), 1),
            Label::Bin(op) => (format!("{op:?}"), 2),
            Label::Vector(name) => (name.to_string(), 1),
        };
        if b.in_checkpoint {
            primitive.push_str(" inside a checkpointed region");
        }
        NonFinite {
            pass,
            primitive,
            operands: b.operands,
            arity,
            label: b.label,
            in_checkpoint: b.in_checkpoint,
            value: b.value,
            job: b.job,
            position: b.seq,
        }
    }
}

/// A number as a message shows it: plainly where that is short, in exponent form otherwise
/// (`1e200`, not two hundred digits).
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-5..1e16).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

impl NonFinite {
    /// As found inside a checkpointed region's recomputation, for the enclosing reverse pass:
    /// job `job`, at the region's first output `seq`.
    pub(crate) fn into_checkpoint(self, job: u16, seq: u32) -> BadValue {
        BadValue {
            label: self.label,
            operands: self.operands,
            value: self.value,
            job: u32::from(job),
            seq,
            in_checkpoint: true,
        }
    }
}

impl fmt::Display for NonFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |f: &mut fmt::Formatter<'_>| {
            let ops = &self.operands[..self.arity.clamp(1, 2)];
            let list: Vec<String> = ops.iter().map(|&x| num(x)).collect();
            let more = if matches!(self.label, Label::Vector(_)) {
                ", …"
            } else {
                ""
            };
            write!(f, "{}{more}", list.join(", "))
        };
        match self.pass {
            Pass::Forward => {
                const INSIDE: &str = " inside a checkpointed region";
                let op = self
                    .primitive
                    .strip_suffix(INSIDE)
                    .unwrap_or(&self.primitive);
                write!(f, "forward pass: {op}(")?;
                shown(f)?;
                let (inside, at) = if self.in_checkpoint {
                    (INSIDE, ": the region's first output")
                } else {
                    ("", "")
                };
                write!(
                    f,
                    ") = {}{inside} is the first non-finite value from finite operands (job {}, \
                     operation #{}{at})",
                    num(self.value),
                    self.job,
                    self.position
                )
            }
            Pass::Reverse => {
                write!(
                    f,
                    "reverse pass: {} (operation #{} of job {}) has partials [",
                    self.primitive, self.position, self.job
                )?;
                shown(f)?;
                write!(
                    f,
                    "] that turn the finite adjoint {} into a non-finite contribution",
                    num(self.value)
                )
            }
        }
    }
}

impl std::error::Error for NonFinite {}

impl Tape {
    /// An empty tape.
    ///
    /// ```
    /// let _tape = adjoint_tape::Tape::new();
    /// ```
    pub fn new() -> Tape {
        Tape {
            ctx: Some(fresh_ctx()),
            recorded: false,
            jobs: Vec::new(),
            inputs: Vec::new(),
            checked: false,
            inline_checkpoints: false,
        }
    }

    /// Checked mode: every recording reports the first primitive that produced a NaN or an
    /// infinity from finite operands (forward) or a non-finite adjoint contribution (reverse),
    /// through [`Tape::try_value_and_grad`]. Costs a label per operation and a test per result.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var, Pass};
    /// let mut tape = Tape::new().checked();
    /// let err = tape.try_value_and_grad(|x: &[Var]| (x[0] - 1.0).ln() * x[1], &[0.5, 2.0]).unwrap_err();
    /// assert_eq!(err.pass, Pass::Forward);
    /// assert_eq!(err.primitive, "Ln");
    /// assert!(err.to_string().contains("Ln(-0.5) = NaN"), "{err}");
    /// ```
    pub fn checked(mut self) -> Tape {
        self.checked = true;
        self
    }

    /// Checked mode on or off (a checkpoint's recomputation takes the enclosing tape's).
    pub(crate) fn set_checked(&mut self, checked: bool) {
        self.checked = checked;
    }

    /// Whether this tape's recordings run checkpointed regions inline instead of checkpointing
    /// them (only checked mode's look inside a region sets it).
    pub(crate) fn set_inline_checkpoints(&mut self, inline: bool) {
        self.inline_checkpoints = inline;
    }

    /// Record `f` at `x` (inputs marked inactive by `active` become constants).
    pub(crate) fn record<R>(
        &mut self,
        x: &[f64],
        active: Option<&[bool]>,
        f: impl FnOnce(&[Var]) -> R,
    ) -> R {
        self.recorded = false;
        let mut ctx = self.ctx.take().unwrap_or_else(fresh_ctx);
        let mut job = match ctx.job.take() {
            // The last recording did not fork: its only job is still here, nothing else holds
            // the session, and its graph was never set up. Record into the same job again,
            // without touching the session.
            Some(job)
                if job.checked == self.checked
                    && ctx.session.inline_checkpoints == self.inline_checkpoints =>
            {
                job
            }
            last => {
                if Arc::get_mut(&mut ctx.session).is_none() {
                    ctx.session = Arc::new(Session::new());
                }
                let session = Arc::get_mut(&mut ctx.session).expect("unique after the check above");
                session.graph_mut().pool.extend(last);
                session.restart(self.checked, self.inline_checkpoints)
            }
        };
        // The root job: job 0 of task 0.
        job.reset(0, self.checked, x.len());
        job.task = 0;
        self.inputs.clear();
        match active {
            // Every input active: positions 1..=n, written in two vectorisable loops.
            None => {
                let first = job.push_leaves(x.len(), self.checked);
                // The first id in a local (not re-read from `job` after every store).
                let id0 = job.var(0.0, first).id;
                // `enumerate`, not `zip(id0..)`: an exact-size iterator, which `extend` writes
                // in one tight loop (about 10 % off the network (vector) example's gradient,
                // neutral in the bench's row; BENCHMARKS, thirty-fourth session).
                self.inputs.extend(
                    x.iter()
                        .enumerate()
                        .map(|(i, &v)| Var::at(v, id0 + i as u64)),
                );
            }
            Some(active) => {
                for (&v, &is_active) in x.iter().zip(active) {
                    self.inputs.push(if is_active {
                        let seq = job.push_leaf(self.checked);
                        job.var(v, seq)
                    } else {
                        Var::constant(v)
                    });
                }
            }
        }
        ctx.job_idx = 0;
        ctx.job = Some(job);
        ctx.task.id = 0;
        if !matches!(ctx.task.segs[..], [Segment::Job(0)]) {
            // (Skipped when already in place: writing the 64-byte segment is a slow store.)
            ctx.task.segs.clear();
            ctx.task.segs.push(Segment::Job(0));
        }
        let inputs = std::mem::take(&mut self.inputs);
        let (r, state) = with_state(State::Recording(ctx), || f(&inputs));
        self.inputs = inputs;
        let mut ctx = match state {
            State::Recording(ctx) => ctx,
            State::Abandoned => crate::record::abandoned(),
            _ => unreachable!("a recording ends in the state it started"),
        };
        if ctx.task.segs.len() > 1 {
            // The recording forked: seal its last job in the graph with the others. (Without
            // forks the only job stays in `ctx.job`, where the reverse pass reads it with no
            // lock and no atomic operation.)
            let job = ctx.job.take().expect("a recording ends with a job");
            ctx.session.seal(ctx.job_idx, job);
        }
        self.ctx = Some(ctx);
        self.recorded = true;
        r
    }

    /// The last recording's context.
    fn last(&self) -> &Ctx {
        match &self.ctx {
            Some(ctx) if self.recorded => ctx,
            _ => panic!("adjoint::tape: no finished recording on this tape"),
        }
    }

    /// Values on the tape of the last recording, over all its jobs: each job's sink, the inputs,
    /// one per recorded result, one per value a job imports from an earlier one (after a
    /// [`join`](crate::join), each side's first use of a value from before it), and one per
    /// element of a vector a `matvec` copies (an `x` that is not consecutive values). A result
    /// takes one entry of
    /// [`BYTES_PER_ENTRY`](crate::BYTES_PER_ENTRY) = 24 bytes; the sinks and the inputs take
    /// none. A slice primitive ([`adjoint_core::vector::dot`], …) adds one value per result,
    /// plus 8 bytes per active operand for its partials (for a whole `matvec`: one copy of `x`
    /// and one of `M`).
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// use adjoint_core::vector;
    /// let mut tape = Tape::new();
    /// let x = [1.0, 2.0, 3.0, 4.0];
    /// tape.value_and_grad(|v: &[Var]| vector::dot(&v[..2], &v[2..]), &x);
    /// assert_eq!(tape.entries(), 1 + 4 + 1); // sink, four inputs, one dot
    /// let join = |v: &[Var]| {
    ///     let (a, b) = adjoint_tape::join(|| v[0] * v[1], || v[0].sin());
    ///     a + b
    /// };
    /// tape.value_and_grad(join, &[1.0, 2.0]);
    /// // four jobs' sinks, two inputs, three results, five imports (x₀ and x₁ into the left
    /// // side, x₀ into the right one, a and b after the join)
    /// assert_eq!(tape.entries(), 4 + 2 + 3 + 5);
    /// ```
    pub fn entries(&self) -> usize {
        let Some(ctx) = self.ctx.as_ref().filter(|_| self.recorded) else {
            return 0;
        };
        if let Some(job) = &ctx.job {
            return job.len() as usize;
        }
        ctx.session
            .graph()
            .jobs
            .iter()
            .flatten()
            .map(|j| j.len() as usize)
            .sum()
    }

    /// The forward pass's first non-finite value, in checked mode.
    #[inline]
    pub(crate) fn forward_error(&self) -> Result<(), NonFinite> {
        if !self.checked {
            return Ok(());
        }
        self.first_forward_error()
    }

    /// In checked mode, panic with the forward pass's first non-finite value (every API that
    /// returns no `Result`).
    #[inline]
    fn check_forward(&self) {
        if let Err(e) = self.forward_error() {
            panic!("adjoint::tape checked mode: {e}");
        }
    }

    #[cold]
    #[inline(never)]
    fn first_forward_error(&self) -> Result<(), NonFinite> {
        let ctx = self.last();
        if let Some(job) = &ctx.job {
            // No forks: one job.
            return job
                .first_bad
                .clone()
                .map_or(Ok(()), |b| Err(NonFinite::new(Pass::Forward, b)));
        }
        let (root, g) = (&ctx.task, ctx.session.graph());
        let order = program_order(root);
        // The first bad value in the program's sequential order: jobs in program order, and
        // within a job its first (each job keeps only its first).
        let first = order.iter().enumerate().find_map(|(n, &j)| {
            let job = g.jobs[usize::from(j)].as_ref().expect("sealed");
            job.first_bad.clone().map(|b| (n, b))
        });
        match first {
            Some((n, mut b)) => {
                b.job = n as u32;
                Err(NonFinite::new(Pass::Forward, b))
            }
            None => Ok(()),
        }
    }

    /// Backpropagate `seeds` (output, weight) through the last recording; the input adjoints
    /// start at `init` (or 0) and end in `grad`. The recording stays usable for another sweep.
    pub(crate) fn reverse(
        &mut self,
        seeds: &[(Var, f64)],
        init: Option<&[f64]>,
        grad: &mut [f64],
    ) -> Result<(), NonFinite> {
        assert!(
            self.recorded,
            "adjoint::tape: reverse pass without a recording"
        );
        let ctx = &mut **self.ctx.as_mut().expect("a recorded tape has its context");
        if let Some(job) = ctx.job.as_deref_mut() {
            return Self::reverse_one_job(job, &self.inputs, self.checked, seeds, init, grad);
        }
        let root = &ctx.task;
        let mut g = ctx.session.graph();
        take_jobs(&mut g, &mut self.jobs);
        let job_task = std::mem::take(&mut g.job_task);
        let task_parent = std::mem::take(&mut g.task_parent);
        let jobs = Jobs {
            jobs: std::mem::take(&mut self.jobs),
            job_task: &job_task,
            task_parent: &task_parent,
            checked: self.checked,
        };
        let lock = |j: usize| jobs.jobs[j].lock().unwrap_or_else(|e| e.into_inner());
        init_inputs(&mut lock(0), &self.inputs, init);
        for &(v, w) in seeds.iter().filter(|(v, _)| !v.is_constant()) {
            let Some((job, seq)) = g.find(v.id) else {
                not_ours(v)
            };
            lock(usize::from(job)).adj[seq as usize] += w;
        }
        let result = jobs.resolve(root);
        read_grad(&lock(0), &self.inputs, grad);
        let mut list = jobs.jobs;
        return_jobs(&mut g, &mut list);
        self.jobs = list;
        g.job_task = job_task;
        g.task_parent = task_parent;
        drop(g);
        result.map(|_| ()).map_err(|mut b| {
            // Report the job by its place in the program, not by its (scheduling-dependent)
            // index.
            let idx = b.job as u16;
            b.job = program_order(root)
                .iter()
                .position(|&j| j == idx)
                .unwrap_or(0) as u32;
            NonFinite::new(Pass::Reverse, b)
        })
    }

    /// The reverse pass of a recording without forks: one job, no locks, no job graph.
    fn reverse_one_job(
        job: &mut Job,
        inputs: &[Var],
        checked: bool,
        seeds: &[(Var, f64)],
        init: Option<&[f64]>,
        grad: &mut [f64],
    ) -> Result<(), NonFinite> {
        let result = Self::sweep_one_job(job, inputs, checked, seeds, init, grad, false);
        // A NaN may be an infinite adjoint times a zero partial, which a careful sweep takes as
        // 0 (see `reverse::sweep`): once more, carefully, out of line — only after the one
        // sweep that was not careful (another pass would also recompute every checkpoint).
        if crate::reverse::plain_scalar(job, checked) && grad.iter().any(|g| g.is_nan()) {
            return Self::sweep_one_job_carefully(job, inputs, seeds, init, grad);
        }
        result
    }

    /// Seed, sweep and read back one job (`careful`: see `reverse::sweep`).
    #[inline(always)]
    fn sweep_one_job(
        job: &mut Job,
        inputs: &[Var],
        checked: bool,
        seeds: &[(Var, f64)],
        init: Option<&[f64]>,
        grad: &mut [f64],
        careful: bool,
    ) -> Result<(), NonFinite> {
        zero_adjoints(job);
        init_inputs(job, inputs, init);
        for &(v, w) in seeds.iter().filter(|(v, _)| !v.is_constant()) {
            // Without forks every recorded value lives in the root job.
            let Some(seq) = job.position(v.id) else {
                not_ours(v)
            };
            job.adj[seq as usize] += w;
        }
        let result = crate::reverse::sweep(job, checked, 0, careful);
        read_grad(job, inputs, grad);
        result.map_err(|b| NonFinite::new(Pass::Reverse, b))
    }

    #[cold]
    #[inline(never)]
    fn sweep_one_job_carefully(
        job: &mut Job,
        inputs: &[Var],
        seeds: &[(Var, f64)],
        init: Option<&[f64]>,
        grad: &mut [f64],
    ) -> Result<(), NonFinite> {
        Self::sweep_one_job(job, inputs, false, seeds, init, grad, true)
    }

    /// Value and gradient of `f` at `x`, written into `grad`; no heap allocation once the tape
    /// has seen a call of this size.
    ///
    /// # Panics
    /// If `grad.len() != x.len()`, if `f` panics (the panic propagates; the tape stays usable),
    /// or if a checked tape finds a non-finite value (use [`Tape::try_value_and_grad`]).
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let mut tape = Tape::new();
    /// let mut g = [0.0; 2];
    /// // Rosenbrock's two-variable term, called repeatedly (an optimiser's loop)
    /// for x in [[0.5, 0.5], [1.0, 1.0]] {
    ///     let f = |v: &[Var]| (1.0 - v[0]).powi(2) + (v[1] - v[0] * v[0]).powi(2) * 100.0;
    ///     let y = tape.grad_into(f, &x, &mut g);
    ///     let t = x[1] - x[0] * x[0];
    ///     assert_eq!(y, (1.0 - x[0]).powi(2) + 100.0 * t * t);
    ///     assert_eq!(g, [-2.0 * (1.0 - x[0]) - 400.0 * x[0] * t, 200.0 * t]);
    /// }
    /// ```
    pub fn grad_into<F>(&mut self, f: F, x: &[f64], grad: &mut [f64]) -> f64
    where
        F: FnOnce(&[Var]) -> Var,
    {
        assert_eq!(
            grad.len(),
            x.len(),
            "grad_into: {} inputs but the gradient buffer has {}",
            x.len(),
            grad.len()
        );
        let y = self.record(x, None, f);
        self.check_forward();
        if let Err(e) = self.reverse(&[(y, 1.0)], None, grad) {
            panic!("adjoint::tape checked mode: {e}");
        }
        y.v
    }

    /// Value and gradient, or the first non-finite value in checked mode.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let mut tape = Tape::new().checked();
    /// let (y, g) = tape.try_value_and_grad(|x: &[Var]| x[0].ln(), &[2.0]).unwrap();
    /// assert_eq!((y, g), (2f64.ln(), vec![0.5]));
    /// ```
    pub fn try_value_and_grad<F>(&mut self, f: F, x: &[f64]) -> Result<(f64, Vec<f64>), NonFinite>
    where
        F: FnOnce(&[Var]) -> Var,
    {
        let y = self.record(x, None, f);
        self.forward_error()?;
        let mut g = vec![0.0; x.len()];
        self.reverse(&[(y, 1.0)], None, &mut g)?;
        Ok((y.v, g))
    }

    /// Value and gradient of a scalar function.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let mut tape = Tape::new();
    /// let (y, g) = tape.value_and_grad(|x: &[Var]| x[0] * x[0] * x[1], &[3.0, 2.0]);
    /// assert_eq!((y, g), (18.0, vec![12.0, 9.0]));
    /// ```
    pub fn value_and_grad<F>(&mut self, f: F, x: &[f64]) -> (f64, Vec<f64>)
    where
        F: FnOnce(&[Var]) -> Var,
    {
        let mut g = vec![0.0; x.len()];
        let y = self.grad_into(f, x, &mut g);
        (y, g)
    }

    /// Vector-Jacobian product `wᵀ J` of a vector function, with its value.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let (y, g) = Tape::new().vjp(|x: &[Var]| vec![x[0] * x[1]], &[2.0, 3.0], &[2.0]);
    /// assert_eq!((y, g), (vec![6.0], vec![6.0, 4.0]));
    /// ```
    ///
    /// # Panics
    /// If `w` and the output differ in length, or if a checked tape finds a non-finite value.
    pub fn vjp<F>(&mut self, f: F, x: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>)
    where
        F: FnOnce(&[Var]) -> Vec<Var>,
    {
        let ys = self.record(x, None, f);
        self.check_forward();
        assert_eq!(
            ys.len(),
            w.len(),
            "vjp: the function has {} outputs but the cotangent has {}",
            ys.len(),
            w.len()
        );
        let seeds: Vec<(Var, f64)> = ys.iter().copied().zip(w.iter().copied()).collect();
        let mut g = vec![0.0; x.len()];
        self.reverse(&seeds, None, &mut g)
            .unwrap_or_else(|e| panic!("adjoint::tape checked mode: {e}"));
        (ys.iter().map(|y| y.v).collect(), g)
    }

    /// The Jacobian (rows = outputs) of a vector function: recorded once, one reverse sweep
    /// per output.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let j = Tape::new().jacobian(|x: &[Var]| vec![x[0] + x[1], x[0] * 3.0], &[1.0, 2.0]);
    /// assert_eq!(j, vec![vec![1.0, 1.0], vec![3.0, 0.0]]);
    /// ```
    ///
    /// # Panics
    /// If a checked tape finds a non-finite value.
    pub fn jacobian<F>(&mut self, f: F, x: &[f64]) -> Vec<Vec<f64>>
    where
        F: FnOnce(&[Var]) -> Vec<Var>,
    {
        let ys = self.record(x, None, f);
        self.check_forward();
        ys.iter()
            .map(|&y| {
                let mut row = vec![0.0; x.len()];
                self.reverse(&[(y, 1.0)], None, &mut row)
                    .unwrap_or_else(|e| panic!("adjoint::tape checked mode: {e}"));
                row
            })
            .collect()
    }

    /// [`Tape::jacobian`] into `jac` (row-major, `outputs × x.len()`), without allocating: `f`
    /// may return its outputs as an array (`[Var; 2]`) or a `Vec`. Steady-state calls on one
    /// tape reuse its buffers, so a loop of small Jacobians (one per observation of a bundle
    /// adjustment) allocates nothing.
    ///
    /// ```
    /// use adjoint_tape::{Tape, Var};
    /// let mut tape = Tape::new();
    /// let mut j = [0.0; 4];
    /// tape.jacobian_into(|x: &[Var]| [x[0] + x[1], x[0] * 3.0], &[1.0, 2.0], &mut j);
    /// assert_eq!(j, [1.0, 1.0, 3.0, 0.0]);
    /// ```
    ///
    /// # Panics
    /// If `jac.len()` is not the number of outputs times `x.len()`, or if a checked tape finds
    /// a non-finite value.
    pub fn jacobian_into<F, Y>(&mut self, f: F, x: &[f64], jac: &mut [f64])
    where
        F: FnOnce(&[Var]) -> Y,
        Y: AsRef<[Var]>,
    {
        let ys = self.record(x, None, f);
        self.check_forward();
        let ys = ys.as_ref();
        let n = x.len();
        assert_eq!(
            jac.len(),
            ys.len() * n,
            "jacobian_into: {} outputs × {n} inputs, but the buffer has {}",
            ys.len(),
            jac.len()
        );
        if n == 0 {
            return;
        }
        for (&y, row) in ys.iter().zip(jac.chunks_exact_mut(n)) {
            self.reverse(&[(y, 1.0)], None, row)
                .unwrap_or_else(|e| panic!("adjoint::tape checked mode: {e}"));
        }
    }

    /// Hessian-vector product `H(x)·v`, by reverse over forward: `f` runs on `Dual<Var>` with
    /// tangent `v`, so its tangent output is the scalar `∇f·v` recorded on the tape, and one
    /// reverse sweep of that scalar gives `∇(∇f·v) = H v`. Cost: a small constant times one
    /// gradient; every partial comes from the shared rule table evaluated at `Var`.
    ///
    /// ```
    /// use adjoint_tape::Tape;
    /// // f = x³ → f'' = 6x
    /// assert_eq!(Tape::new().hvp(|x| x[0] * x[0] * x[0], &[2.0], &[1.0]), vec![12.0]);
    /// ```
    ///
    /// Where `∇f·v` itself is not finite, every entry of the product is NaN. A NaN there means
    /// an infinite partial met a tangent whose value is 0 but which depends on `x` (`‖x‖²`
    /// written as `x.norm()²` at 0); an infinite one, that `H v` is the derivative of a function
    /// that is infinite at `x` (`∛x` at 0, whose `∇f·v` is `(1/3)·x^(−2/3)`; an overflow too:
    /// `eˣ` at 800 gives NaN, not +∞). In both cases the
    /// sweep's rule that a zero partial sends nothing would otherwise turn the product into a
    /// finite number, which can be wrong (`x.norm()²`: 0 instead of 2; `∛x`: 0 where `f''` is
    /// `−∞` to the right of 0 and `+∞` to its left), as forward over forward is NaN there too.
    /// This is all or nothing per product: forward over forward, which sees each entry
    /// separately, is NaN on such a diagonal but may keep finite off-diagonal entries (so a
    /// [`hessian`](Tape::hessian) can then have a NaN row where its column is finite):
    ///
    /// ```
    /// use adjoint_core::forward::Dual;
    /// use adjoint_tape::{Tape, Var};
    /// let sq_norm = |x: &[Dual<Var>]| {
    ///     let n = (x[0] * x[0] + x[1] * x[1]).sqrt();
    ///     n * n
    /// };
    /// assert!(Tape::new().hvp(sq_norm, &[0.0, 0.0], &[1.0, 0.0]).iter().all(|h| h.is_nan()));
    /// assert_eq!(Tape::new().hvp(sq_norm, &[3.0, 4.0], &[1.0, 0.0]), vec![2.0, 0.0]);
    /// ```
    ///
    /// # Panics
    /// If `v` and `x` differ in length, or if a checked tape finds a non-finite value.
    pub fn hvp<F>(&mut self, f: F, x: &[f64], v: &[f64]) -> Vec<f64>
    where
        F: FnOnce(&[Dual<Var>]) -> Dual<Var>,
    {
        assert_eq!(
            x.len(),
            v.len(),
            "hvp: {} inputs but direction has {}",
            x.len(),
            v.len()
        );
        let y = self.record(x, None, |xs| {
            let d: Vec<Dual<Var>> = xs
                .iter()
                .zip(v)
                .map(|(&xi, &vi)| Dual::new(xi, Var::constant(vi)))
                .collect();
            f(&d).eps
        });
        self.check_forward();
        let mut g = vec![0.0; x.len()];
        self.reverse(&[(y, 1.0)], None, &mut g)
            .unwrap_or_else(|e| panic!("adjoint::tape checked mode: {e}"));
        if !y.v.is_finite() {
            g.fill(f64::NAN);
        }
        g
    }

    /// The Hessian, as `n` Hessian-vector products with the unit vectors.
    ///
    /// ```
    /// use adjoint_tape::Tape;
    /// let h = Tape::new().hessian(|x| x[0] * x[1], &[1.0, 2.0]);
    /// assert_eq!(h, vec![vec![0.0, 1.0], vec![1.0, 0.0]]);
    /// ```
    ///
    /// # Panics
    /// If a checked tape finds a non-finite value.
    pub fn hessian<F>(&mut self, f: F, x: &[f64]) -> Vec<Vec<f64>>
    where
        F: Fn(&[Dual<Var>]) -> Dual<Var>,
    {
        let mut e = vec![0.0; x.len()];
        (0..x.len())
            .map(|i| {
                e[i] = 1.0;
                let row = self.hvp(&f, x, &e);
                e[i] = 0.0;
                row
            })
            .collect()
    }
}

/// Every adjoint of `job` zero, one per entry. An array that is long enough (a steady-state
/// call) is zeroed in place: `clear` + `resize` went through a `memset` call, ~1.5 ns of the
/// ~40 ns a one-multiplication gradient took (`examples/small.rs`).
#[inline]
pub(crate) fn zero_adjoints(job: &mut Job) {
    let n = job.len() as usize;
    if job.adj.len() >= n {
        job.adj.truncate(n);
        job.adj.iter_mut().for_each(|a| *a = 0.0);
    } else {
        job.adj.clear();
        job.adj.resize(n, 0.0);
    }
}

/// Set the input leaves' starting adjoints (checkpoint recomputation); before the seeds, which add
/// to them, since an output may be an input.
fn init_inputs(root: &mut Job, inputs: &[Var], init: Option<&[f64]>) {
    if let Some(init) = init {
        for (x, &v) in inputs.iter().zip(init) {
            if !x.is_constant() {
                let seq = input_position(root, *x);
                root.adj[seq] = v;
            }
        }
    }
}

/// Where an input leaf is on the root job's tape.
#[inline]
fn input_position(root: &Job, x: Var) -> usize {
    root.position(x.id)
        .expect("the inputs are leaves of the root job") as usize
}

/// Panic clearly: a seeded output comes from another recording.
#[cold]
fn not_ours(v: Var) -> ! {
    panic!("adjoint::tape: output {v:?} does not belong to this recording")
}

/// The recording's jobs in the program's sequential order: a task's segments in order, the left
/// side of a fork before the right. Job *indices* follow the order in which threads happened to
/// open jobs; this order is the same for every thread count.
fn program_order(task: &Task) -> Vec<u16> {
    fn walk(task: &Task, out: &mut Vec<u16>) {
        for seg in &task.segs {
            match seg {
                Segment::Job(j) => out.push(*j),
                Segment::Fork(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(task, &mut out);
    out
}

/// The gradient: the root job's adjoints at the input leaves (0 for constant inputs).
fn read_grad(root: &Job, inputs: &[Var], grad: &mut [f64]) {
    let n = inputs.len();
    if n > 32
        && root.position(inputs[0].id) == Some(1)
        && root.position(inputs[n - 1].id) == Some(n as u32)
    {
        // Every input active (`record` put them at positions 1..=n, and a position holds one
        // value): the gradient is one contiguous block of adjoints. (Short inputs take the
        // loop below, which costs less than a call to `memcpy`.)
        grad.copy_from_slice(&root.adj[1..=n]);
        return;
    }
    for (gi, x) in grad.iter_mut().zip(inputs) {
        *gi = if x.is_constant() {
            0.0
        } else {
            root.adj[input_position(root, *x)]
        };
    }
}

thread_local! {
    static THREAD_TAPE: RefCell<Option<Tape>> = const { RefCell::new(None) };
}

/// Run `body` with this thread's cached tape (a fresh one when nested).
fn with_tape<R>(body: impl FnOnce(&mut Tape) -> R) -> R {
    let mut tape = THREAD_TAPE
        .with_borrow_mut(|t| t.take())
        .unwrap_or_default();
    let r = body(&mut tape);
    THREAD_TAPE.with_borrow_mut(|t| *t = Some(tape));
    r
}

/// The gradient of a scalar function.
///
/// ```
/// use adjoint_tape::{grad, Var};
/// use adjoint_core::Real;
/// fn f<T: Real>(x: &[T]) -> T { x.iter().map(|&v| v * v).sum::<T>().sqrt() }
/// let g = grad(|x: &[Var]| f(x), &[3.0, 4.0]);
/// assert!((g[0] - 0.6).abs() < 1e-15 && (g[1] - 0.8).abs() < 1e-15);
/// ```
pub fn grad<F: FnOnce(&[Var]) -> Var>(f: F, x: &[f64]) -> Vec<f64> {
    value_and_grad(f, x).1
}

/// Value and gradient of a scalar function.
///
/// ```
/// use adjoint_tape::{value_and_grad, Var};
/// let (y, g) = value_and_grad(|x: &[Var]| x[0].exp() * x[1], &[0.0, 3.0]);
/// assert_eq!((y, g), (3.0, vec![3.0, 1.0]));
/// ```
pub fn value_and_grad<F: FnOnce(&[Var]) -> Var>(f: F, x: &[f64]) -> (f64, Vec<f64>) {
    with_tape(|t| t.value_and_grad(f, x))
}

/// Value and gradient, or the first primitive that produced a NaN or an infinity.
///
/// ```
/// use adjoint_tape::{checked_grad, Var, Pass};
/// // sqrt at 0 has an infinite derivative: found in the reverse pass.
/// let err = checked_grad(|x: &[Var]| x[0].sqrt() * 2.0, &[0.0]).unwrap_err();
/// assert_eq!((err.pass, err.primitive.as_str()), (Pass::Reverse, "Sqrt"));
/// assert!(checked_grad(|x: &[Var]| x[0].sqrt(), &[4.0]).is_ok());
/// ```
pub fn checked_grad<F: FnOnce(&[Var]) -> Var>(
    f: F,
    x: &[f64],
) -> Result<(f64, Vec<f64>), NonFinite> {
    Tape::new().checked().try_value_and_grad(f, x)
}

/// Vector-Jacobian product: `(f(x), wᵀ J(x))`.
///
/// ```
/// use adjoint_tape::{vjp, Var};
/// let (y, g) = vjp(|x: &[Var]| vec![x[0] * x[1], x[0] + x[1]], &[2.0, 3.0], &[1.0, 10.0]);
/// assert_eq!((y, g), (vec![6.0, 5.0], vec![13.0, 12.0]));
/// ```
pub fn vjp<F: FnOnce(&[Var]) -> Vec<Var>>(f: F, x: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
    with_tape(|t| t.vjp(f, x, w))
}

/// The Jacobian of a vector function (rows = outputs), recorded once.
///
/// ```
/// use adjoint_tape::{jacobian, Var};
/// let j = jacobian(|x: &[Var]| vec![x[0] * x[1], x[0] - x[1]], &[2.0, 3.0]);
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![1.0, -1.0]]);
/// ```
pub fn jacobian<F: FnOnce(&[Var]) -> Vec<Var>>(f: F, x: &[f64]) -> Vec<Vec<f64>> {
    with_tape(|t| t.jacobian(f, x))
}

/// [`Tape::jacobian_into`] on this thread's cached tape: a Jacobian into a caller's buffer
/// (row-major), allocating nothing in steady state.
///
/// ```
/// use adjoint_tape::{jacobian_into, Var};
/// let mut j = [0.0; 4];
/// jacobian_into(|x: &[Var]| [x[0] * x[1], x[0] - x[1]], &[3.0, 2.0], &mut j);
/// assert_eq!(j, [2.0, 3.0, 1.0, -1.0]);
/// ```
pub fn jacobian_into<F, Y>(f: F, x: &[f64], jac: &mut [f64])
where
    F: FnOnce(&[Var]) -> Y,
    Y: AsRef<[Var]>,
{
    with_tape(|t| t.jacobian_into(f, x, jac))
}

/// Hessian-vector product by reverse over forward (see [`Tape::hvp`]).
///
/// ```
/// use adjoint_tape::hvp;
/// // f = x² y → H = [[2y, 2x], [2x, 0]]
/// let hv = hvp(|x| x[0] * x[0] * x[1], &[3.0, 2.0], &[1.0, 1.0]);
/// assert_eq!(hv, vec![4.0 + 6.0, 6.0]);
/// ```
pub fn hvp<F: FnOnce(&[Dual<Var>]) -> Dual<Var>>(f: F, x: &[f64], v: &[f64]) -> Vec<f64> {
    with_tape(|t| t.hvp(f, x, v))
}

/// The Hessian by `n` Hessian-vector products. `f` runs on `Dual<Var>` (forward over
/// reverse), so write it generic over [`Real`](adjoint_core::Real) (`fn f<T: Real>(x: &[T]) ->
/// T`, passed as `|x| f(x)`): a function written for `Var` alone does not take `Dual<Var>`.
///
/// ```
/// use adjoint_tape::hessian;
/// let h = hessian(|x| x[0].sin() * x[1], &[0.0, 2.0]);
/// assert_eq!(h, vec![vec![0.0, 1.0], vec![1.0, 0.0]]);
/// ```
pub fn hessian<F: Fn(&[Dual<Var>]) -> Dual<Var>>(f: F, x: &[f64]) -> Vec<Vec<f64>> {
    with_tape(|t| t.hessian(f, x))
}
