//! The forward pass: per-job tapes, the job graph, and the thread-local recording context.
//!
//! A recording (one call of `grad` and friends) is a [`Session`]. Straight-line code runs in one
//! job; every [`join`](crate::join) ends the current job, runs each side in a fresh job of a
//! fresh task, and continues in a new job (seed 003 §12.1). Each job owns a compact tape of
//! [`Entry`]s whose operand indices are local to the job: a `Var` from an earlier job is first
//! *imported* into a leaf slot of the current job, and the reverse pass hands the slot's adjoint
//! back to its owner.

use crate::var::Var;
use adjoint_core::rules::{Op1, Op2};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The key of a constant `Var`.
pub(crate) const CONST_KEY: u32 = u32::MAX;
/// Most jobs one recording may create (job indices are 16 bits inside a `Var`).
pub(crate) const MAX_JOBS: usize = 0xFFFF;

static NONCE: AtomicU16 = AtomicU16::new(0);

fn next_nonce() -> u16 {
    loop {
        let n = NONCE.fetch_add(1, Ordering::Relaxed);
        if n != u16::MAX {
            return n;
        }
    }
}

/// One recorded operation: the partials of the result with respect to at most two earlier
/// entries of the same job (unused operands point at the sink, entry 0, with partial 0).
/// 24 bytes; the result's own position is implicit.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct Entry {
    pub p: [f64; 2],
    pub i: [u32; 2],
}

/// What produced an entry, kept only in checked mode for error messages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Label {
    Leaf,
    Un(Op1),
    Bin(Op2),
}

impl From<Op1> for Label {
    fn from(op: Op1) -> Self {
        Label::Un(op)
    }
}
impl From<Op2> for Label {
    fn from(op: Op2) -> Self {
        Label::Bin(op)
    }
}

/// A leaf slot that stands for a `Var` of an earlier job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Import {
    pub slot: u32,
    pub job: u16,
    pub seq: u32,
}

/// A checkpointed region: its outputs are leaf slots `start..end`; the reverse pass recomputes it.
pub(crate) struct Checkpoint {
    pub start: u32,
    pub end: u32,
    /// Local slots of the region's inputs and their values.
    pub inputs: Vec<(Option<u32>, f64)>,
    pub f: crate::checkpoint::RegionFn,
}

/// Multiplicative hashing for the import cache (keys are already well mixed ids).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The tape of one job.
#[derive(Default)]
pub(crate) struct Job {
    pub key: u32,
    /// The task this job runs in.
    pub task: u32,
    /// Checked mode (records labels; every operation takes the slow path).
    pub checked: bool,
    pub entries: Vec<Entry>,
    pub imports: Vec<Import>,
    pub cache: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    pub checkpoints: Vec<Checkpoint>,
    pub adj: Vec<f64>,
    /// Checked mode only: what produced each entry.
    pub labels: Vec<Label>,
}

impl Job {
    fn reset(&mut self, key: u32, checked: bool) {
        self.key = key;
        self.checked = checked;
        self.entries.clear();
        self.entries.push(Entry::default()); // the sink
        self.imports.clear();
        self.cache.clear();
        self.checkpoints.clear();
        self.labels.clear();
        if checked {
            self.labels.push(Label::Leaf);
        }
    }

    #[inline(always)]
    pub fn push(&mut self, e: Entry) -> u32 {
        let seq = self.entries.len() as u32;
        self.entries.push(e);
        seq
    }

    pub fn push_leaf(&mut self, checked: bool) -> u32 {
        if checked {
            self.labels.push(Label::Leaf);
        }
        self.push(Entry::default())
    }

    /// The job-local position of `v`, importing it if it belongs to an earlier job.
    #[inline(always)]
    pub(crate) fn local(&mut self, v: Var, session: &Session) -> u32 {
        if v.key() == self.key && (v.seq() as usize) < self.entries.len() {
            v.seq()
        } else {
            self.import(v, session)
        }
    }

    #[cold]
    #[inline(never)]
    fn import(&mut self, v: Var, session: &Session) -> u32 {
        let id = (u64::from(v.key()) << 32) | u64::from(v.seq());
        if let Some(&slot) = self.cache.get(&id) {
            return slot;
        }
        let nonce = (v.key() >> 16) as u16;
        let job = (v.key() & 0xFFFF) as usize;
        if nonce != session.nonce {
            panic!(
                "adjoint::tape: {v:?} belongs to a recording that has finished or to a different \
                 recording; a Var is only valid inside the grad/vjp/jacobian call that created it"
            );
        }
        if v.key() == self.key {
            panic!("adjoint::tape: {v:?} is past the end of its tape (corrupted Var)");
        }
        let len = {
            let g = session.graph();
            let len = match g.jobs.get(job) {
                Some(Some(j)) => j.entries.len(),
                _ => panic!(
                    "adjoint::tape: {v:?} was created in a parallel job that has not joined yet; \
                     pass values between jobs only through the results of join/par_map"
                ),
            };
            if !g.precedes(g.job_task[job], self.task) {
                panic!(
                    "adjoint::tape: {v:?} comes from the other side of a join that has not \
                     joined yet (it was passed through shared memory, not a join result); its \
                     gradient could not flow back, so this is refused"
                );
            }
            len
        };
        assert!(
            (v.seq() as usize) < len,
            "adjoint::tape: {v:?} is past the end of its tape (corrupted Var)"
        );
        let slot = self.push_leaf(session.checked);
        self.imports.push(Import {
            slot,
            job: job as u16,
            seq: v.seq(),
        });
        self.cache.insert(id, slot);
        slot
    }
}

/// One segment of a task: a job, or a fork into two sub-tasks (seed 003 Fig. 14).
pub(crate) enum Segment {
    Job(u16),
    Fork(Task, Task),
}

/// A task: its id and the sequence of its jobs and forks.
pub(crate) struct Task {
    pub id: u32,
    pub segs: Vec<Segment>,
}

/// Jobs and tasks of a recording, behind one lock (touched only at job boundaries).
#[derive(Default)]
pub(crate) struct Graph {
    /// Sealed jobs by local index (`None` while running). Boxed so that handing a job between
    /// the pool, a thread's context and the graph moves a pointer, not the struct.
    pub jobs: Vec<Option<Box<Job>>>,
    /// The task each job runs in.
    pub job_task: Vec<u32>,
    /// The parent of each task (the root task is its own parent).
    pub task_parent: Vec<u32>,
    /// The fork that created each task (the two sides of one `join` share it; the root has 0).
    pub task_fork: Vec<u32>,
    /// Spare job buffers for reuse (boxed on purpose: a job moves between here, a thread's
    /// context and `jobs` as one pointer).
    #[allow(clippy::vec_box)]
    pub pool: Vec<Box<Job>>,
}

impl Graph {
    /// The tasks from `t` up to the root.
    fn chain(&self, mut t: u32) -> Vec<u32> {
        let mut v = vec![t];
        while self.task_parent[t as usize] != t {
            t = self.task_parent[t as usize];
            v.push(t);
        }
        v
    }

    /// May a job in task `from` hand values to a job in task `to` (which runs later)? Only if
    /// they are not on the two sides of one fork that has not joined: below their lowest common
    /// task they must descend from different forks (an earlier fork has joined before a later
    /// one starts), or one of them must be that common task.
    pub fn precedes(&self, from: u32, to: u32) -> bool {
        let (cf, ct) = (self.chain(from), self.chain(to));
        for (it, t) in ct.iter().enumerate() {
            if let Some(i_f) = cf.iter().position(|x| x == t) {
                if i_f == 0 || it == 0 {
                    return true;
                }
                let (a, b) = (cf[i_f - 1], ct[it - 1]);
                return self.task_fork[a as usize] != self.task_fork[b as usize];
            }
        }
        false
    }

    /// Open a job in `task` with a recycled buffer.
    pub fn new_job(&mut self, nonce: u16, checked: bool, task: u32) -> (u16, Box<Job>) {
        let idx = self.jobs.len();
        assert!(
            idx < MAX_JOBS,
            "adjoint::tape: more than {MAX_JOBS} parallel jobs in one recording; \
             coarsen the parallelism (larger par_map chunks, fewer nested joins)"
        );
        self.jobs.push(None);
        self.job_task.push(task);
        let mut job = self.pool.pop().unwrap_or_default();
        job.reset((u32::from(nonce) << 16) | idx as u32, checked);
        job.task = task;
        (idx as u16, job)
    }
}

/// The first non-finite value seen in checked mode.
#[derive(Clone, Debug)]
pub(crate) struct BadValue {
    pub label: Label,
    pub operands: [f64; 2],
    pub value: f64,
    pub job: u32,
    pub seq: u32,
}

/// One recording.
pub(crate) struct Session {
    pub nonce: u16,
    pub checked: bool,
    pub graph: Mutex<Graph>,
    pub first_bad: Mutex<Option<BadValue>>,
}

impl Session {
    pub fn new() -> Session {
        Session {
            nonce: next_nonce(),
            checked: false,
            graph: Mutex::new(Graph::default()),
            first_bad: Mutex::new(None),
        }
    }

    /// Start a new recording in this session object (reusing its buffers).
    pub fn restart(&mut self, checked: bool) {
        self.nonce = next_nonce();
        self.checked = checked;
        *self.first_bad.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        let g = self.graph.get_mut().unwrap_or_else(|e| e.into_inner());
        let Graph {
            jobs,
            job_task,
            task_parent,
            task_fork,
            pool,
        } = g;
        pool.extend(jobs.drain(..).flatten());
        job_task.clear();
        task_parent.clear();
        task_parent.push(0);
        task_fork.clear();
        task_fork.push(0);
    }

    pub fn graph(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh job in `task`.
    pub fn new_job(&self, task: u32) -> (u16, Box<Job>) {
        self.graph().new_job(self.nonce, self.checked, task)
    }

    /// The graph, without locking, when this is the only handle to the session.
    pub fn graph_mut(&mut self) -> &mut Graph {
        self.graph.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// The two tasks of a fork in `parent`.
    pub fn new_task_pair(&self, parent: u32) -> (u32, u32) {
        let mut g = self.graph();
        let a = g.task_parent.len() as u32;
        g.task_parent.extend([parent, parent]);
        g.task_fork.extend([a, a]);
        (a, a + 1)
    }

    pub fn seal(&self, idx: u16, job: Box<Job>) {
        self.graph().jobs[idx as usize] = Some(job);
    }

    fn note_bad(&self, bad: BadValue) {
        let mut b = self.first_bad.lock().unwrap_or_else(|e| e.into_inner());
        if b.is_none() {
            *b = Some(bad);
        }
    }
}

/// The recording state of the current thread.
pub(crate) struct Ctx {
    pub session: Arc<Session>,
    pub job_idx: u16,
    pub job: Box<Job>,
    pub task: Task,
}

/// What the current thread is doing.
// One per thread; boxing the context would cost an allocation per recording.
#[allow(clippy::large_enum_variant)]
pub(crate) enum State {
    Idle,
    Recording(Ctx),
    /// Running a checkpointed region's forward pass without recording.
    Checkpointing,
}

thread_local! {
    static STATE: RefCell<State> = const { RefCell::new(State::Idle) };
    /// The job being recorded on this thread, or null: the fast path of [`record1`]/[`record2`].
    /// Measured: going through `STATE` (a `RefCell` with a destructor) cost ~9 ns per operation
    /// on Rosenbrock; this destructor-free `Cell` brings recording to ~2 ns.
    static FAST: Cell<*mut Job> = const { Cell::new(std::ptr::null_mut()) };
}

/// Whether this thread is recording.
pub(crate) fn recording() -> bool {
    with_state_mut(|s| matches!(s, State::Recording(_)))
}

/// Borrow this thread's state mutably. Every access to `STATE` goes through here, and the fast
/// pointer is re-derived from this borrow before it ends, so the pointer always comes from the
/// most recent borrow of the state.
pub(crate) fn with_state_mut<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with_borrow_mut(|s| {
        let r = f(s);
        let fast = match s {
            State::Recording(ctx) if !ctx.job.checked => &mut *ctx.job as *mut Job,
            _ => std::ptr::null_mut(),
        };
        FAST.set(fast);
        r
    })
}

/// Put `state` in place for the duration of `f`, restoring the previous state afterwards, also
/// when `f` panics. Returns `f`'s result and the state as `f` left it.
pub(crate) fn with_state<R>(state: State, f: impl FnOnce() -> R) -> (R, State) {
    struct Restore(Option<State>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0.take() {
                with_state_mut(|s| *s = prev);
            }
        }
    }
    let prev = with_state_mut(|s| std::mem::replace(s, state));
    let mut guard = Restore(Some(prev));
    let r = f();
    let prev = guard.0.take().expect("restored once");
    let mine = with_state_mut(|s| std::mem::replace(s, prev));
    (r, mine)
}

#[cold]
#[inline(never)]
fn not_recording(state: &State, v: Var) -> ! {
    match state {
        State::Checkpointing => panic!(
            "adjoint::tape: {v:?} was captured by a checkpointed region; pass every active \
             value the region reads through its `inputs` slice"
        ),
        _ => panic!(
            "adjoint::tape: {v:?} used outside its recording; a Var is only valid inside the \
             grad/vjp/jacobian call that created it"
        ),
    }
}

#[cold]
fn check_value(ctx: &Ctx, label: Label, operands: [f64; 2], value: f64, seq: u32) {
    if !value.is_finite() && operands.iter().all(|o| o.is_finite()) {
        ctx.session.note_bad(BadValue {
            label,
            operands,
            value,
            job: u32::from(ctx.job_idx),
            seq,
        });
    }
}

/// Record a result with one active operand.
#[inline(always)]
pub(crate) fn record1(a: Var, pa: f64, value: f64, label: impl Into<Label>) -> Var {
    let p = FAST.get();
    if !p.is_null() {
        // SAFETY: `FAST` is non-null only while this thread's `STATE` is `Recording`; it points
        // at that state's job and was derived from the latest borrow of `STATE` (see
        // `with_state_mut`). Only this thread touches its thread-local, no borrow of `STATE` is
        // live here, and nothing below re-enters `STATE` while `job` is in use.
        let job = unsafe { &mut *p };
        if a.key() == job.key && (a.seq() as usize) < job.entries.len() {
            let seq = job.push(Entry {
                p: [pa, 0.0],
                i: [a.seq(), 0],
            });
            return Var::at(value, job.key, seq);
        }
    }
    record1_slow(a, pa, value, label.into())
}

#[inline(never)]
fn record1_slow(a: Var, pa: f64, value: f64, label: Label) -> Var {
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            not_recording(s, a)
        };
        let ia = ctx.job.local(a, &ctx.session);
        let seq = ctx.job.push(Entry {
            p: [pa, 0.0],
            i: [ia, 0],
        });
        if ctx.session.checked {
            ctx.job.labels.push(label);
            check_value(ctx, label, [a.v, 0.0], value, seq);
        }
        Var::at(value, ctx.job.key, seq)
    })
}

/// Record a result with two active operands.
#[inline(always)]
pub(crate) fn record2(
    a: Var,
    pa: f64,
    b: Var,
    pb: f64,
    value: f64,
    label: impl Into<Label>,
) -> Var {
    let p = FAST.get();
    if !p.is_null() {
        // SAFETY: as in `record1`.
        let job = unsafe { &mut *p };
        let len = job.entries.len();
        if a.key() == job.key
            && b.key() == job.key
            && (a.seq() as usize) < len
            && (b.seq() as usize) < len
        {
            let seq = job.push(Entry {
                p: [pa, pb],
                i: [a.seq(), b.seq()],
            });
            return Var::at(value, job.key, seq);
        }
    }
    record2_slow(a, pa, b, pb, value, label.into())
}

#[inline(never)]
fn record2_slow(a: Var, pa: f64, b: Var, pb: f64, value: f64, label: Label) -> Var {
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            not_recording(s, a)
        };
        let ia = ctx.job.local(a, &ctx.session);
        let ib = ctx.job.local(b, &ctx.session);
        let seq = ctx.job.push(Entry {
            p: [pa, pb],
            i: [ia, ib],
        });
        if ctx.session.checked {
            ctx.job.labels.push(label);
            check_value(ctx, label, [a.v, b.v], value, seq);
        }
        Var::at(value, ctx.job.key, seq)
    })
}

/// Run `f` as a new task (its first job fresh) of `session`; returns its result and task.
fn run_task<R>(session: &Arc<Session>, id: u32, f: impl FnOnce() -> R) -> (R, Task) {
    let (job_idx, job) = session.new_job(id);
    let ctx = Ctx {
        session: session.clone(),
        job_idx,
        job,
        task: Task {
            id,
            segs: vec![Segment::Job(job_idx)],
        },
    };
    let (r, state) = with_state(State::Recording(ctx), f);
    let State::Recording(ctx) = state else {
        unreachable!("a task ends in the state it started")
    };
    ctx.session.seal(ctx.job_idx, ctx.job);
    (r, ctx.task)
}

/// Run two closures, potentially in parallel, like [`rayon::join`], recording the fork and join
/// in the job graph so that the reverse pass runs the two sides' derivatives in parallel too
/// ("forks in the primal become joins in the dual"). Outside a recording it is `rayon::join`.
///
/// Gradients do not depend on the number of threads, bit for bit: contributions from the two
/// sides to values defined before the fork are merged in a fixed order (left, then right).
///
/// ```
/// use adjoint_tape::{grad, join, Var};
/// use adjoint_core::prelude::*;
/// let g = grad(|x: &[Var]| {
///     let (a, b) = join(|| x[0].sin() * x[1], || x[0] * x[0]);
///     a + b
/// }, &[0.5, 2.0]);
/// assert!((g[0] - (0.5f64.cos() * 2.0 + 1.0)).abs() < 1e-15);
/// assert!((g[1] - 0.5f64.sin()).abs() < 1e-15);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if !recording() {
        return rayon::join(a, b);
    }
    // End the current job: take the context out of the thread (the thread may run other
    // tasks while it waits in rayon::join).
    let mut ctx = with_state_mut(|s| match std::mem::replace(s, State::Idle) {
        State::Recording(ctx) => ctx,
        _ => unreachable!(),
    });
    let session = ctx.session.clone();
    let parent = ctx.task.id;
    let finished = std::mem::take(&mut ctx.job);
    session.seal(ctx.job_idx, finished);
    // If a side panics, the panic propagates; the thread is left idle and the recording is
    // abandoned by the caller's guard.
    let (task_a, task_b) = session.new_task_pair(parent);
    let ((ra, ta), (rb, tb)) = rayon::join(
        || run_task(&session, task_a, a),
        || run_task(&session, task_b, b),
    );
    let (job_idx, job) = session.new_job(parent);
    ctx.job_idx = job_idx;
    ctx.job = job;
    ctx.task.segs.push(Segment::Fork(ta, tb));
    ctx.task.segs.push(Segment::Job(job_idx));
    with_state_mut(|s| *s = State::Recording(ctx));
    (ra, rb)
}

/// Apply `f` to every element in parallel, recording the parallel structure (a balanced tree of
/// [`join`]s over at most 64 chunks, the split depending only on the length so that gradients
/// are identical for every thread count).
///
/// ```
/// use adjoint_tape::{grad, par_map, Var};
/// use adjoint_core::prelude::*;
/// let g = grad(|x: &[Var]| par_map(x, |v| v.exp()).into_iter().sum::<Var>(), &[0.0, 1.0, 2.0]);
/// assert_eq!(g, vec![1.0, 1f64.exp(), 2f64.exp()]);
/// ```
pub fn par_map<T, R, F>(xs: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let chunk = xs.len().div_ceil(64).max(1);
    let mut out = Vec::with_capacity(xs.len());
    par_chunks(xs, chunk, &f, &mut out);
    out
}

fn par_chunks<T: Sync, R: Send, F: Fn(&T) -> R + Sync>(
    xs: &[T],
    chunk: usize,
    f: &F,
    out: &mut Vec<R>,
) {
    if xs.len() <= chunk {
        out.extend(xs.iter().map(f));
        return;
    }
    let mid = xs.len().div_ceil(chunk) / 2 * chunk;
    let (l, r) = xs.split_at(mid);
    let (mut lo, ro) = join(
        || {
            let mut v = Vec::with_capacity(l.len());
            par_chunks(l, chunk, f, &mut v);
            v
        },
        || {
            let mut v = Vec::with_capacity(r.len());
            par_chunks(r, chunk, f, &mut v);
            v
        },
    );
    out.append(&mut lo);
    out.extend(ro);
}
