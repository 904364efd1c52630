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
use adjoint_core::vector::fast;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The id of a constant `Var` (no range ever contains it).
pub(crate) const CONST_ID: u64 = 0;
/// Most jobs one recording may create (job indices are 16 bits).
pub(crate) const MAX_JOBS: usize = 0xFFFF;

/// The next unreserved id. Starts at 1: 0 is [`CONST_ID`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Ids a thread takes from the shared counter at a time (at least), so that recordings on many
/// threads do not all hit one atomic.
const ID_BLOCK: u64 = 1 << 16;

thread_local! {
    /// This thread's reserved ids `next..end`, and the start of the last range it handed out.
    static ID_RANGE: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

/// Reserve `n` consecutive ids that no other range of this process has had or will have;
/// returns the first.
///
/// Why a stale or foreign `Var` can never be mistaken for a value of the current recording: a
/// `Var` is a value and an id, `base + position` in an id range its job reserved here, and a
/// job accepts a `Var` as its own only if the id lies in one of *its* ranges (below its length).
/// Ranges come from one process-wide counter, taken in blocks by one thread at a time
/// (`fetch_update`) and handed out by that thread only, so no id is given twice, and a job
/// reserves fresh ranges for every recording. The counter cannot wrap: a job's first range is
/// 64 ids or twice what its buffer held last time, and each later one twice the one before, so
/// the ids a recording takes are a small multiple (at most about 4×) of the values recorded by
/// it and the one before it on the same buffer, plus 64 per job; at several ids per nanosecond
/// of recording it would still take over a century to reach 2⁶⁴, and should the counter get
/// there, this panics instead of wrapping. So a `Var` from a finished
/// recording (or another thread's, or another job's) never passes the fast path's range test:
/// it takes the slow path, which finds its job through the recording's table of ranges and
/// panics unless that is a job of this recording that may hand values to this one. (A 16-bit
/// nonce used before repeated after 65 536 recordings and silently accepted leaked `Var`s.)
pub(crate) fn reserve_ids(n: u64) -> u64 {
    ID_RANGE.with(|r| {
        let (next, end, _) = r.get();
        if n <= end - next {
            r.set((next + n, end, next));
            return next;
        }
        let take = n.max(ID_BLOCK);
        let start = NEXT_ID
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                c.checked_add(take)
            })
            .unwrap_or_else(|_| panic!("adjoint::tape: value ids exhausted"));
        r.set((start + n, start + take, start));
        start
    })
}

/// Tests use it to simulate 2³² and more recordings cheaply: the next id range this thread
/// reserves starts `n` ids after the start of the last one it reserved (or later, if another
/// thread has taken those ids), and every id in between is skipped.
#[doc(hidden)]
pub fn __skip_ids(n: u64) {
    ID_RANGE.with(|r| {
        let (_, _, last) = r.get();
        let target = last + n;
        let old = NEXT_ID
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                c.max(target).checked_add(ID_BLOCK)
            })
            .expect("ids left");
        let start = old.max(target);
        r.set((start, start + ID_BLOCK, last));
    });
}

/// One recorded operation: the partials of the result with respect to at most two earlier
/// entries of the same job. 24 bytes; the result's own position is implicit. An unused second
/// operand of a one-operand result points at the entry itself with partial 0: its adjoint is
/// never read again once the entry is swept, and (unlike pointing every such entry at one shared
/// sink slot) it makes no chain of dependent additions through memory in the reverse loop.
/// Leaves point both operands at the sink, entry 0.
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
    /// One result of a slice primitive (`vector::dot`, …).
    Vector(&'static str),
}

/// A result with many operands (a slice primitive such as `vector::dot`): the result's entry is
/// a leaf at `at`, and its operands are `runs[runs.0..runs.1]` of `Job::runs`, whose partials
/// are consecutive in `Job::partials` from `p0`. The reverse pass handles it between the scalar
/// entries before and after `at`, like a checkpoint.
///
/// A whole matrix-vector product ([`Shape::Matvec`]) is one such record too: its results are
/// the leaves `at..at + rows`, and its partials are the vector's values then the matrix's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nary {
    pub at: u32,
    pub runs: (u32, u32),
    pub p0: u32,
    pub shape: Shape,
}

/// What a [`Nary`] record computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Shape {
    /// One result, its operands in runs.
    One,
    /// `out = M x`: `rows` results; `M` (row-major, `rows × cols`) at positions `m..`, `x` at
    /// `x..` (each one run of consecutive values, or `None`: constants). The partials are
    /// `x`'s values, then `M`'s when `x` is active.
    Matvec {
        rows: u32,
        cols: u32,
        m: Option<u32>,
        x: Option<u32>,
    },
}

impl Nary {
    /// How many results (consecutive leaves from `at`) the record has.
    pub fn results(&self) -> u32 {
        match self.shape {
            Shape::One => 1,
            Shape::Matvec { rows, .. } => rows,
        }
    }
}

/// Operands at consecutive tape positions `first..first + len` (a slice of `Var`s recorded one
/// after the other is one run): their adjoint update is one vectorisable loop.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub first: u32,
    pub len: u32,
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

/// What [`record1`] records an entry as, for checked mode's report: the label and the
/// operands given the active one's value. Only the slow path (checked mode among others) reads
/// it, so the constant of a [`WithConst`] costs the fast path nothing (usually a literal).
pub(crate) trait EntryLabel: Copy {
    fn label(self) -> Label;
    fn operands(self, active: f64) -> [f64; 2];
}

impl EntryLabel for Op1 {
    #[inline(always)]
    fn label(self) -> Label {
        Label::Un(self)
    }
    #[inline(always)]
    fn operands(self, active: f64) -> [f64; 2] {
        [active, 0.0]
    }
}

/// A binary primitive with one constant operand `c`, on the left (`left`) or the right.
#[derive(Clone, Copy)]
pub(crate) struct WithConst {
    pub op: Op2,
    pub c: f64,
    pub left: bool,
}

impl EntryLabel for WithConst {
    #[inline(always)]
    fn label(self) -> Label {
        Label::Bin(self.op)
    }
    #[inline(always)]
    fn operands(self, active: f64) -> [f64; 2] {
        if self.left {
            [self.c, active]
        } else {
            [active, self.c]
        }
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
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// The tape of one job.
#[derive(Default)]
pub(crate) struct Job {
    /// Ids of this job's values: position `p < limit` has id `base + p` ([`reserve_ids`]).
    pub base: u64,
    pub limit: u32,
    /// This job's earlier ranges `(base, limit)` in the current recording, when its tape
    /// outgrew one: values recorded then keep their ids, and the slow path finds them here.
    pub old_ranges: Vec<(u64, u32)>,
    /// Index within its recording.
    pub idx: u16,
    /// The task this job runs in.
    pub task: u32,
    /// Checked mode (records labels; every operation takes the slow path).
    pub checked: bool,
    /// The entries of positions `leading_leaves..`: `entries[k]` is position
    /// `leading_leaves + k` (see [`Job::len`]).
    pub entries: Vec<Entry>,
    pub imports: Vec<Import>,
    /// Imported `Var`s (id) → local slot.
    pub cache: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    pub checkpoints: Vec<Checkpoint>,
    /// Positions `0..leading_leaves` are the sink and the recording's inputs: leaves, which the
    /// reverse sweep never reads, so they take no entry (24 bytes less per input).
    pub leading_leaves: u32,
    /// Results of slice primitives, in tape order.
    pub nary: Vec<Nary>,
    /// Their operand runs and partials.
    pub runs: Vec<Run>,
    pub partials: Vec<f64>,
    pub adj: Vec<f64>,
    /// Checked mode only: what produced each entry.
    pub labels: Vec<Label>,
    /// Checked mode only: the first non-finite value this job produced from finite operands.
    pub first_bad: Option<BadValue>,
}

impl Job {
    /// Empty the tape for job `idx` of a new recording, with a fresh id range for at least
    /// `values` values besides the sink.
    pub(crate) fn reset(&mut self, idx: u16, checked: bool, values: usize) {
        // The range: twice what this buffer held last time (so that a recording like the last
        // one never outgrows it), at least 64 ids.
        let want = (2 * self.len() as usize).max(values + 1).max(64);
        self.limit = u32::try_from(want).unwrap_or(u32::MAX);
        self.base = reserve_ids(u64::from(self.limit));
        self.old_ranges.clear();
        self.idx = idx;
        self.first_bad = None;
        self.checked = checked;
        self.entries.clear(); // position 0, the sink, is a leading leaf
        self.imports.clear();
        self.cache.clear();
        self.checkpoints.clear();
        self.leading_leaves = 1;
        self.nary.clear();
        self.runs.clear();
        self.partials.clear();
        self.labels.clear();
        if checked {
            self.labels.push(Label::Leaf);
        }
    }

    /// Record a one-result slice primitive whose operands are `runs[r0..]` with partials from
    /// `partials[p0..]`: its leaf entry and its record.
    fn push_nary(&mut self, value: f64, r0: usize, p0: usize) -> Var {
        let seq = self.push(Entry::default());
        self.nary.push(Nary {
            at: seq,
            runs: (r0 as u32, self.runs.len() as u32),
            p0: p0 as u32,
            shape: Shape::One,
        });
        self.var(value, seq)
    }

    /// How many values (positions) the tape holds: the leading leaves, then one per entry.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.leading_leaves + self.entries.len() as u32
    }

    #[inline(always)]
    pub fn push(&mut self, e: Entry) -> u32 {
        let seq = self.len();
        if seq >= self.limit {
            self.grow_ids();
        }
        self.entries.push(e);
        seq
    }

    /// The tape outgrew its id range: reserve a new one, twice as large, for the values to come
    /// (earlier values keep their ids, found through `old_ranges`).
    #[cold]
    #[inline(never)]
    fn grow_ids(&mut self) {
        assert!(
            self.limit < u32::MAX,
            "adjoint::tape: more than 2^32 operations in one job"
        );
        self.old_ranges.push((self.base, self.limit));
        self.limit = self.limit.saturating_mul(2);
        self.base = reserve_ids(u64::from(self.limit));
    }

    /// The `Var` of the value at position `seq` of this job.
    #[inline(always)]
    pub fn var(&self, v: f64, seq: u32) -> Var {
        Var::at(v, self.base + u64::from(seq))
    }

    /// The position of a value with id `id` recorded by this job, if it was.
    #[inline(always)]
    pub fn position(&self, id: u64) -> Option<u32> {
        let p = id.wrapping_sub(self.base);
        if p < u64::from(self.len()) {
            Some(p as u32)
        } else {
            self.old_position(id)
        }
    }

    /// The position of the value with id `first` when the `n` ids `first..first + n` are all
    /// values of this job in one id range (so at consecutive positions). Ids past the end of a
    /// range may belong to the next range reserved, by this job or another one, and are not
    /// the positions that follow.
    #[inline]
    pub fn run_position(&self, first: u64, n: usize) -> Option<u32> {
        let len = u64::from(self.len());
        let n = n as u64;
        let p = first.wrapping_sub(self.base);
        // The current range covers every position below `len` (`limit ≥ len`).
        if p < len && p + n <= len {
            return Some(p as u32);
        }
        self.old_ranges.iter().find_map(|&(base, limit)| {
            let p = first.wrapping_sub(base);
            let end = u64::from(limit).min(len);
            (p < end && p + n <= end).then_some(p as u32)
        })
    }

    #[cold]
    fn old_position(&self, id: u64) -> Option<u32> {
        let len = u64::from(self.len());
        self.old_ranges.iter().find_map(|&(base, limit)| {
            let p = id.wrapping_sub(base);
            (p < u64::from(limit) && p < len).then_some(p as u32)
        })
    }

    /// Every id range of this job.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.old_ranges
            .iter()
            .copied()
            .chain([(self.base, self.limit)])
    }

    /// Push `n` leaves at once; returns the first one's position. Leaves before any other entry
    /// (the recording's inputs) are leading leaves: no entry is written for them.
    #[inline]
    pub fn push_leaves(&mut self, n: usize, checked: bool) -> u32 {
        let first = self.len();
        while (first as usize + n) > self.limit as usize {
            self.grow_ids();
        }
        if checked {
            self.labels.resize(self.labels.len() + n, Label::Leaf);
        }
        if self.entries.is_empty() {
            self.leading_leaves += n as u32;
        } else {
            let k = self.entries.len();
            self.entries.resize(k + n, Entry::default());
        }
        first
    }

    pub fn push_leaf(&mut self, checked: bool) -> u32 {
        self.push_leaves(1, checked)
    }

    /// The job-local position of `v`, importing it if it belongs to an earlier job.
    #[inline(always)]
    pub(crate) fn local(&mut self, v: Var, session: &Session) -> u32 {
        let p = v.id.wrapping_sub(self.base);
        if p < u64::from(self.len()) {
            p as u32
        } else {
            self.import(v, session)
        }
    }

    #[cold]
    #[inline(never)]
    fn import(&mut self, v: Var, session: &Session) -> u32 {
        if let Some(p) = self.old_position(v.id) {
            return p;
        }
        if let Some(&slot) = self.cache.get(&v.id) {
            return slot;
        }
        if self.idx == 0 {
            // Job 0 is a recording's first job, and it ends at the recording's first fork: while
            // it records, no other job of its recording exists (and the job graph is only set
            // up at that fork, see `join`).
            stale(v);
        }
        let (job, seq) = {
            let g = session.graph();
            let Some((job, seq)) = g.find(v.id) else {
                // A running job's ranges after its first one are entered only when it is
                // sealed, so an id found nowhere may still be one of a job that has not joined
                // — but only where a job may be running beside this one: inside a side of a
                // join (a task other than the root), whether or not the other side has started.
                // Decided by the program's structure, not by which jobs happen to be running, so
                // that the message does not depend on scheduling (#9).
                if self.task != 0 {
                    // (which one cannot be told: a running job's later id ranges are not in
                    // the graph yet)
                    panic!(
                        "adjoint::tape: {v:?} is not a value of this recording's finished jobs: \
                         either it belongs to another recording (one that has finished, or an \
                         outer or concurrent grad/vjp/jacobian call: a Var is only valid inside \
                         the call that created it), or it was created in a parallel job of this \
                         recording that has not joined yet (pass values between jobs only \
                         through the results of join/par_map)"
                    )
                }
                stale(v)
            };
            let len = match g.jobs.get(usize::from(job)) {
                Some(Some(j)) => j.len() as usize,
                _ => panic!(
                    "adjoint::tape: {v:?} was created in a parallel job that has not joined yet; \
                     pass values between jobs only through the results of join/par_map"
                ),
            };
            if !g.precedes(g.job_task[usize::from(job)], self.task) {
                panic!(
                    "adjoint::tape: {v:?} comes from the other side of a join that has not \
                     joined yet (it was passed through shared memory, not a join result); its \
                     gradient could not flow back, so this is refused"
                );
            }
            assert!(
                (seq as usize) < len,
                "adjoint::tape: {v:?} is past the end of its tape (corrupted Var)"
            );
            (job, seq)
        };
        let slot = self.push_leaf(session.checked);
        self.imports.push(Import { slot, job, seq });
        self.cache.insert(v.id, slot);
        slot
    }
}

#[cold]
fn stale(v: Var) -> ! {
    panic!(
        "adjoint::tape: {v:?} belongs to a recording that has finished or to a different \
         recording; a Var is only valid inside the grad/vjp/jacobian call that created it"
    )
}

/// Which recycled tape buffer a new job gets (see [`Graph::pool`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobSize {
    /// A task's first job or a recording's root job: one of the largest buffers.
    Large,
    /// A join's continuation: one of the smallest.
    Small,
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
    /// The id ranges of this recording's jobs, by first id: `base → (limit, job)`. A job's
    /// first range is entered when it opens, later ones (a tape that outgrew its range) when it
    /// is sealed.
    pub ranges: BTreeMap<u64, (u32, u16)>,
    /// The task each job runs in.
    pub job_task: Vec<u32>,
    /// The parent of each task (the root task is its own parent).
    pub task_parent: Vec<u32>,
    /// The fork that created each task (the two sides of one `join` share it; the root has 0).
    pub task_fork: Vec<u32>,
    /// Spare job buffers for reuse (boxed on purpose: a job moves between here, a thread's
    /// context and `jobs` as one pointer).
    /// Sorted by tape capacity (smallest first) when a recording starts, so that a task's
    /// first job, which usually does the task's work, gets one of the largest buffers and a
    /// join's continuation (usually a few additions) one of the smallest: in steady state no
    /// job's tape grows. (Handing them out in any order made half the large tapes of a wide
    /// `par_map` regrow on every call: fresh pages, faults, and no parallel speed-up.)
    pub pool: VecDeque<Box<Job>>,
}

impl Graph {
    /// The parent of task `t`, or `None` for the root.
    fn parent(&self, t: u32) -> Option<u32> {
        let p = self.task_parent[t as usize];
        (p != t).then_some(p)
    }

    /// May a job in task `from` hand values to a job in task `to` (which runs later)? Only if
    /// they are not on the two sides of one fork that has not joined: below their lowest common
    /// task they must descend from different forks (an earlier fork has joined before a later
    /// one starts), or one of them must be that common task.
    ///
    /// Walks the two ancestor chains without allocating: it runs under the graph's lock, on
    /// every first import of a value into a job (an allocation here serialised wide `par_map`s).
    pub fn precedes(&self, from: u32, to: u32) -> bool {
        // For each ancestor `t` of `to` (with `bt`, the child of `t` on the way from `to`),
        // look for `t` among the ancestors of `from` (with `af`, the child on that side).
        let (mut t, mut bt) = (to, None);
        loop {
            let (mut f, mut af) = (from, None);
            loop {
                if f == t {
                    return match (af, bt) {
                        (Some(a), Some(b)) => {
                            self.task_fork[a as usize] != self.task_fork[b as usize]
                        }
                        _ => true,
                    };
                }
                match self.parent(f) {
                    Some(p) => (af, f) = (Some(f), p),
                    None => break,
                }
            }
            match self.parent(t) {
                Some(p) => (bt, t) = (Some(t), p),
                None => return false,
            }
        }
    }

    /// Put every job buffer back in the pool and clear the graph for a new recording.
    pub fn restart(&mut self) {
        let Graph {
            jobs,
            ranges,
            job_task,
            task_parent,
            task_fork,
            pool,
        } = self;
        if jobs.len() == 1 && pool.is_empty() {
            pool.extend(jobs.pop().flatten());
        } else {
            pool.extend(jobs.drain(..).flatten());
            pool.make_contiguous()
                .sort_unstable_by_key(|j| j.entries.capacity());
        }
        ranges.clear();
        job_task.clear();
        task_parent.clear();
        task_parent.push(0);
        task_fork.clear();
        task_fork.push(0);
    }

    /// Set the graph up for a recording at its first fork, with `root` (the job that ends at
    /// the fork) as job 0 of the root task. A recording that never forks never touches its
    /// graph.
    pub fn start(&mut self, root: &Job) {
        debug_assert_eq!((root.idx, root.task), (0, 0));
        self.restart();
        self.jobs.push(None);
        self.job_task.push(0);
        self.enter_ranges(root);
    }

    /// Enter every id range of `job` in the table.
    pub fn enter_ranges(&mut self, job: &Job) {
        for (base, limit) in job.ranges() {
            self.ranges.insert(base, (limit, job.idx));
        }
    }

    /// The job and position of the value with id `id` in this recording, if it has one.
    pub fn find(&self, id: u64) -> Option<(u16, u32)> {
        let (&base, &(limit, job)) = self.ranges.range(..=id).next_back()?;
        let p = id - base;
        (p < u64::from(limit)).then_some((job, p as u32))
    }

    /// Open a job in `task` with a recycled buffer.
    pub fn new_job(&mut self, checked: bool, task: u32, size: JobSize) -> (u16, Box<Job>) {
        let idx = self.jobs.len();
        assert!(
            idx < MAX_JOBS,
            "adjoint::tape: more than {MAX_JOBS} parallel jobs in one recording; \
             coarsen the parallelism (larger par_map chunks, fewer nested joins)"
        );
        self.jobs.push(None);
        self.job_task.push(task);
        let recycled = match size {
            JobSize::Large => self.pool.pop_back(),
            JobSize::Small => self.pool.pop_front(),
        };
        let mut job = recycled.unwrap_or_default();
        job.reset(idx as u16, checked, 0);
        job.task = task;
        self.enter_ranges(&job);
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
    /// Found while a checkpointed region was recomputed (`seq`: the region's first output).
    pub in_checkpoint: bool,
}

/// One recording.
pub(crate) struct Session {
    pub checked: bool,
    /// Checkpointed regions run inline: this recording is checked mode's whole recording of
    /// one region ([`checkpoint`](crate::checkpoint)). A property of the recording, so that work
    /// a thread steals while it waits in a `join` inside it keeps its own recording's setting.
    pub inline_checkpoints: bool,
    pub graph: Mutex<Graph>,
}

impl Session {
    pub fn new() -> Session {
        Session {
            checked: false,
            inline_checkpoints: false,
            graph: Mutex::new(Graph::default()),
        }
    }

    /// Reclaim every job buffer for a new recording; returns the largest, for its first job.
    pub fn restart(&mut self, checked: bool, inline_checkpoints: bool) -> Box<Job> {
        self.checked = checked;
        self.inline_checkpoints = inline_checkpoints;
        let g = self.graph_mut();
        g.restart();
        g.pool.pop_back().unwrap_or_default()
    }

    pub fn graph(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh job in `task`.
    pub fn new_job(&self, task: u32, size: JobSize) -> (u16, Box<Job>) {
        self.graph().new_job(self.checked, task, size)
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

    /// Store a finished job. A job that used little of a large recycled buffer (a task whose
    /// first job only forks, say) keeps its few entries in a small buffer and hands the large
    /// one back to the pool for a later job of this recording, so the jobs that do the work find
    /// large buffers and no tape regrows in steady state.
    pub fn seal(&self, idx: u16, mut job: Box<Job>) {
        let mut g = self.graph();
        let used = job.entries.len();
        if job.entries.capacity() >= 4096 && job.entries.capacity() > 8 * used {
            let mut spare = g.pool.pop_front().unwrap_or_default();
            std::mem::swap(&mut spare.entries, &mut job.entries);
            std::mem::swap(&mut spare.adj, &mut job.adj);
            job.entries.clear();
            job.entries.extend_from_slice(&spare.entries);
            spare.entries.clear();
            g.pool.push_back(spare);
        }
        // The job's other buffers, where one is far larger than this job used (a heavy job of
        // an earlier recording left it in the pool, which hands buffers out by `entries` alone):
        // back to about their use. Else a reused `Tape` kept one heavy set per pooled job, and a
        // `par_map` with one heavy element (20 000 imports or slice-primitive partials) grew by
        // a heavy set per call, 9 → 84 MB over 200 identical calls (a hunter).
        shrink_oversized(&mut job.imports);
        shrink_oversized(&mut job.checkpoints);
        shrink_oversized(&mut job.nary);
        shrink_oversized(&mut job.runs);
        shrink_oversized(&mut job.partials);
        shrink_oversized(&mut job.labels);
        if job.cache.capacity() >= 4096 && job.cache.capacity() > 8 * job.cache.len() {
            job.cache.shrink_to(2 * job.cache.len());
        }
        g.enter_ranges(&job);
        g.jobs[idx as usize] = Some(job);
    }
}

/// `v` back to twice its length where its capacity is at least 4096 elements and over eight
/// times its length (see [`Session::seal`]).
fn shrink_oversized<T>(v: &mut Vec<T>) {
    if v.capacity() >= 4096 && v.capacity() > 8 * v.len() {
        v.shrink_to(2 * v.len());
    }
}

/// The recording state of the current thread.
pub(crate) struct Ctx {
    pub session: Arc<Session>,
    pub job_idx: u16,
    /// The job being recorded. Between recordings a [`Tape`](crate::Tape) keeps the context:
    /// with the last recording's only job if it did not fork, `None` if it forked (its jobs are
    /// then sealed in the session's graph).
    pub job: Option<Box<Job>>,
    pub task: Task,
}

impl Ctx {
    /// The job being recorded, and the session.
    pub fn parts(&mut self) -> (&mut Job, &Session) {
        let job = self
            .job
            .as_deref_mut()
            .expect("a recording context has a job");
        (job, &self.session)
    }
}

/// What the current thread is doing.
pub(crate) enum State {
    Idle,
    /// Boxed, and the box reused by a [`Tape`](crate::Tape) from one recording to the next, so
    /// that installing a context on the thread moves one pointer (moving the ~60-byte context
    /// in and out of the thread-local was a third of a tiny gradient's cost, with failed store
    /// forwarding on every move).
    Recording(Box<Ctx>),
    /// Running a checkpointed region's forward pass without recording.
    Checkpointing,
    /// A side of a [`join`] panicked and the panic was caught inside the recording: the
    /// recording cannot go on (the side's jobs are not in its graph, and values of theirs may
    /// have escaped), and every use of it says so.
    Abandoned,
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
            State::Recording(ctx) => match ctx.job.as_deref_mut() {
                Some(job) if !job.checked => job as *mut Job,
                _ => std::ptr::null_mut(),
            },
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

/// Whether the recorded value with id `id` has an exactly zero derivative, as recorded, with
/// respect to everything: each operand of its entry has the partial 0 or is such a value itself
/// (`|x|` or `x²` at an active 0, sums and products of those). nalgebra's Householder, Givens
/// and eigenvalue steps branch on `is_zero()` of values computed from a matrix's entries; with
/// an active entry 0, `|a|` at 0 did not count, and they divided by it: NaN where `f64` and
/// forward mode skip the step (a QR of `[[0, 1], [1, 0]]`, the eigenvalues of a diagonal
/// matrix; a hunter). Such a value carries no gradient, so taking it as a constant zero changes
/// no derivative. Leaves (the inputs, imports, slice-primitive and checkpoint results), values
/// of another job, and walks longer than 64 entries answer `false`, as before.
#[cold]
#[inline(never)]
pub(crate) fn zero_derivative(id: u64) -> bool {
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            return false;
        };
        let Some(job) = ctx.job.as_deref() else {
            return false;
        };
        let Some(p) = job.position(id) else {
            return false;
        };
        let mut stack = [0u32; 64];
        let (mut top, mut visits) = (1, 0);
        stack[0] = p;
        while top > 0 {
            top -= 1;
            let p = stack[top];
            visits += 1;
            let Some(k) = p.checked_sub(job.leading_leaves) else {
                return false; // an input
            };
            let Some(e) = job.entries.get(k as usize) else {
                return false;
            };
            if e.i[0] == 0 || visits > 64 {
                return false; // a leaf (both operands at the sink), or too long a walk
            }
            for (&partial, &operand) in e.p.iter().zip(&e.i) {
                if partial == 0.0 || operand == p {
                    continue;
                }
                if top == stack.len() {
                    return false;
                }
                stack[top] = operand;
                top += 1;
            }
        }
        true
    })
}

/// The panic for an active `Var` a checkpointed region captured instead of taking it through
/// its `inputs`: used in the region, or returned from it.
#[cold]
#[inline(never)]
pub(crate) fn captured_by_checkpoint(v: Var) -> ! {
    panic!(
        "adjoint::tape: {v:?} was captured by a checkpointed region; pass every active value \
         the region reads through its `inputs` slice"
    )
}

#[cold]
#[inline(never)]
fn not_recording(state: &State, v: Var) -> ! {
    match state {
        State::Checkpointing => captured_by_checkpoint(v),
        State::Abandoned => abandoned(),
        _ => panic!(
            "adjoint::tape: {v:?} used outside its recording; a Var is only valid inside the \
             grad/vjp/jacobian call that created it, on the thread running it (inside a \
             recording, run parallel work with adjoint::tape::join or par_map, not \
             rayon::join or par_iter)"
        ),
    }
}

/// The panic for a recording used after a panic in a [`join`] side was caught inside it.
#[cold]
pub(crate) fn abandoned() -> ! {
    panic!(
        "adjoint::tape: a panic in adjoint::tape::join (or par_map) — in a side, or the \
         recording's job limit — was caught inside the recording, which cannot go on after it; \
         catch the panic outside the grad/vjp/jacobian call (around the whole recording), or \
         inside the side's own closure"
    )
}

/// While alive, a panic (unwinding through `join` outside its sides: the job limit in
/// `new_task_pair`/`new_job`) leaves the recording [`State::Abandoned`] instead of the `Idle`
/// that `join` put there while its sides run; disarmed when `join` restores the recording.
struct AbandonOnUnwind(bool);

impl Drop for AbandonOnUnwind {
    fn drop(&mut self) {
        if self.0 && std::thread::panicking() {
            with_state_mut(|s| *s = State::Abandoned);
        }
    }
}

/// Checked mode: remember the job's first non-finite value from finite operands. Each job keeps
/// its own first one, and the report picks the earliest job in program order, so what is
/// reported does not depend on how the jobs were scheduled.
#[cold]
pub(crate) fn check_value(job: &mut Job, label: Label, operands: [f64; 2], value: f64, seq: u32) {
    if job.first_bad.is_none() && !value.is_finite() && operands.iter().all(|o| o.is_finite()) {
        job.first_bad = Some(BadValue {
            label,
            operands,
            value,
            job: u32::from(job.idx),
            seq,
            in_checkpoint: false,
        });
    }
}

/// Record a result with one active operand; `label`: what checked mode reports it as (a
/// binary primitive's constant operand included).
#[inline(always)]
pub(crate) fn record1(a: Var, pa: f64, value: f64, label: impl EntryLabel) -> Var {
    let p = FAST.get();
    if !p.is_null() {
        // SAFETY: `FAST` is non-null only while this thread's `STATE` is `Recording`; it points
        // at that state's job and was derived from the latest borrow of `STATE` (see
        // `with_state_mut`). Only this thread touches its thread-local, no borrow of `STATE` is
        // live here, and nothing below re-enters `STATE` while `job` is in use.
        let job = unsafe { &mut *p };
        let ia = a.id.wrapping_sub(job.base);
        let own = u64::from(job.len());
        if ia < own {
            let seq = job.push(Entry {
                p: [pa, 0.0],
                i: [ia as u32, own as u32],
            });
            return job.var(value, seq);
        }
    }
    record1_slow(a, pa, value, label.label(), label.operands(a.v))
}

#[inline(never)]
fn record1_slow(a: Var, pa: f64, value: f64, label: Label, operands: [f64; 2]) -> Var {
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            not_recording(s, a)
        };
        let (job, session) = ctx.parts();
        let ia = job.local(a, session);
        let own = job.len();
        let seq = job.push(Entry {
            p: [pa, 0.0],
            i: [ia, own],
        });
        if session.checked {
            job.labels.push(label);
            check_value(job, label, operands, value, seq);
        }
        job.var(value, seq)
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
        // An id of the current range below `limit` is a recorded value (ids are handed out
        // only for pushed positions, and a reset takes a fresh range), so the bound is the
        // range's, one field, not the tape's length.
        let limit = u64::from(job.limit);
        let (ia, ib) = (a.id.wrapping_sub(job.base), b.id.wrapping_sub(job.base));
        if ia < limit && ib < limit {
            let seq = job.push(Entry {
                p: [pa, pb],
                i: [ia as u32, ib as u32],
            });
            return job.var(value, seq);
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
        let (job, session) = ctx.parts();
        let ia = job.local(a, session);
        let ib = job.local(b, session);
        let seq = job.push(Entry {
            p: [pa, pb],
            i: [ia, ib],
        });
        if session.checked {
            job.labels.push(label);
            check_value(job, label, [a.v, b.v], value, seq);
        }
        job.var(value, seq)
    })
}

/// Run `f` as a new task (its first job fresh) of `session`; returns its result and task.
fn run_task<R>(session: &Arc<Session>, id: u32, f: impl FnOnce() -> R) -> (R, Task) {
    let (job_idx, job) = session.new_job(id, JobSize::Large);
    let ctx = Box::new(Ctx {
        session: session.clone(),
        job_idx,
        job: Some(job),
        task: Task {
            id,
            segs: vec![Segment::Job(job_idx)],
        },
    });
    let (r, state) = with_state(State::Recording(ctx), f);
    let mut ctx = match state {
        State::Recording(ctx) => ctx,
        State::Abandoned => abandoned(),
        _ => unreachable!("a task ends in the state it started"),
    };
    let job = ctx.job.take().expect("a task ends with a job");
    ctx.session.seal(ctx.job_idx, job);
    (r, ctx.task)
}

/// Run two closures, potentially in parallel, like [`rayon::join`], recording the fork and join
/// in the job graph so that the reverse pass runs the two sides' derivatives in parallel too
/// ("forks in the primal become joins in the dual"). Outside a recording it is `rayon::join`.
///
/// Gradients do not depend on the number of threads, bit for bit: contributions from the two
/// sides to values defined before the fork are merged in a fixed order (left, then right).
///
/// A recording holds at most 65 535 jobs: each `join` opens three (its two sides and the
/// caller's continuation), a [`par_map`] about three per chunk. A recording that forks more
/// often (a `par_map` in every step of a long loop: 400 steps of 64 chunks) panics saying so;
/// fork less often, or record each step as a [`checkpoint`](crate::checkpoint) region.
///
/// ```
/// use adjoint_tape::{grad, join, Var};
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
        let (gone, region) = with_state_mut(|s| {
            (
                matches!(s, State::Abandoned),
                matches!(s, State::Checkpointing),
            )
        });
        if gone {
            abandoned(); // (a later join of an abandoned recording; the reviewer of the fix)
        }
        if region {
            // Inside a checkpointed region's forward pass: the sides run as the region does,
            // so a value it captured is named as such on any thread (a side on another thread
            // said "used outside its recording … use adjoint::tape::join"; a hunter).
            return rayon::join(
                || with_state(State::Checkpointing, a).0,
                || with_state(State::Checkpointing, b).0,
            );
        }
        return rayon::join(a, b);
    }
    // End the current job: take the context out of the thread (the thread may run other
    // tasks while it waits in rayon::join).
    let mut ctx = with_state_mut(|s| match std::mem::replace(s, State::Idle) {
        State::Recording(ctx) => ctx,
        _ => unreachable!(),
    });
    // (the job limit's panic, caught inside the recording, ended in an `unreachable!` at the
    // recording's end, or "used outside its recording"; a hunter)
    let mut guard = AbandonOnUnwind(true);
    let session = ctx.session.clone();
    let parent = ctx.task.id;
    let finished = ctx.job.take().expect("a recording context has a job");
    if ctx.job_idx == 0 {
        // The recording's first fork (job 0 runs until then).
        session.graph().start(&finished);
    }
    session.seal(ctx.job_idx, finished);
    // If a side panics, the panic propagates and the recording is abandoned: uncaught, by the
    // caller's guard; caught inside the recording (`catch_unwind` around a `par_map`), by the
    // state left behind, which every later use of the recording reports (it said "used
    // outside its recording", or hit an `unreachable!`; a hunter).
    let (task_a, task_b) = session.new_task_pair(parent);
    let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rayon::join(
            || run_task(&session, task_a, a),
            || run_task(&session, task_b, b),
        )
    }));
    let ((ra, ta), (rb, tb)) = match joined {
        Ok(sides) => sides,
        Err(panic) => {
            with_state_mut(|s| *s = State::Abandoned);
            std::panic::resume_unwind(panic)
        }
    };
    let (job_idx, job) = session.new_job(parent, JobSize::Small);
    ctx.job_idx = job_idx;
    ctx.job = Some(job);
    ctx.task.segs.push(Segment::Fork(ta, tb));
    ctx.task.segs.push(Segment::Job(job_idx));
    guard.0 = false;
    with_state_mut(|s| *s = State::Recording(ctx));
    (ra, rb)
}

/// Apply `f` to every element in parallel, recording the parallel structure (a balanced tree of
/// [`join`]s over at most 64 chunks, the split depending only on the length so that gradients
/// are identical for every thread count).
///
/// ```
/// use adjoint_tape::{grad, par_map, Var};
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

/// Record one result of a slice primitive: `value`, with partial `∂value/∂v` for each operand
/// `(v, ∂)` (constants are skipped). One tape entry, whatever the number of operands.
pub(crate) fn record_nary<I: Iterator<Item = (Var, f64)>>(
    value: f64,
    operands: impl Fn() -> I,
    label: &'static str,
) -> Var {
    let p = FAST.get();
    if !p.is_null() {
        // SAFETY: as in `record1`: `FAST` points at this thread's current (unchecked) job.
        let job = unsafe { &mut *p };
        if let Some(v) = nary_fast(job, value, operands()) {
            return v;
        }
    }
    record_nary_slow(value, operands(), label)
}

/// Record one result of a one-slice primitive (`sum`, `logsumexp`) whose operand slice is a
/// run of consecutive values of this thread's current job (the common case: inputs, or a
/// vector built by one loop), with no per-operand work but the partials' copy: `fill` appends
/// one partial per element of `vars`. `None`, with nothing recorded, when the slice is not
/// such a run (or is empty, or in checked mode, or holds an imported value): the caller then
/// takes [`record_nary`].
#[inline]
pub(crate) fn record_run(
    value: f64,
    vars: &[Var],
    fill: impl FnOnce(&mut Vec<f64>),
) -> Option<Var> {
    let p = FAST.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: as in `record1`: `FAST` points at this thread's current (unchecked) job.
    let job = unsafe { &mut *p };
    let first = as_run(job, vars)?;
    let (r0, p0) = (job.runs.len(), job.partials.len());
    job.runs.push(Run {
        first,
        len: vars.len() as u32,
    });
    fill(&mut job.partials);
    debug_assert_eq!(job.partials.len() - p0, vars.len());
    Some(job.push_nary(value, r0, p0))
}

/// The position of `vars[0]` when `vars` (not empty) are consecutive values of `job`: ids
/// `id, id + 1, …` within one of its id ranges ([`Job::run_position`]). Constants and other
/// jobs' values fail (their ids are in no range of this job, and a run that wrapped would cover
/// 2⁶⁴ ids). One branch-free pass over the ids, which the compiler vectorises.
#[inline]
fn as_run(job: &Job, vars: &[Var]) -> Option<u32> {
    let first = run_candidate(vars)?;
    let gaps = vars
        .iter()
        .zip(first..)
        .fold(0u64, |acc, (v, id)| acc | (v.id ^ id));
    if gaps == 0 {
        job.run_position(first, vars.len())
    } else {
        None
    }
}

/// The position of `vars[0]` when `vars` are values of `job` at consecutive positions whose ids
/// are not consecutive: a run that crosses from one of the job's id ranges into the next.
/// Where a range ends depends on the buffer the job recycled (so on scheduling and on earlier
/// recordings). [`record_matvec`] asks before it copies a vector that [`as_run`] rejected (the
/// copy adds the vector's adjoint in another order) and before it gives a matrix that is not a
/// run to the per-row path (which adds `x̄` row by row): an operand that is a run must be taken
/// as one in every recording, or the gradient's last bits would depend on them (hunters). (The
/// other slice primitives need not ask: their fallback, [`record_nary`], forms runs by
/// position and adds in the same order.) One position lookup per element, stopping at the first
/// that does not follow, and only where a range end lies inside the slice's positions.
#[cold]
#[inline(never)]
fn run_across_ranges(job: &Job, vars: &[Var]) -> Option<u32> {
    let first = vars.first().filter(|v| !v.is_constant())?;
    let p0 = job.position(first.id)?;
    // (a range ends where the next one's positions start: at an old range's limit)
    let end = u64::from(p0) + vars.len() as u64;
    let crosses =
        |&(_, limit): &(u64, u32)| u64::from(p0) < u64::from(limit) && u64::from(limit) < end;
    if !job.old_ranges.iter().any(crosses) {
        return None;
    }
    let follows = |(v, p): (&Var, u32)| !v.is_constant() && job.position(v.id) == Some(p);
    vars.iter().zip(p0..).all(follows).then_some(p0)
}

/// `vector::dot(a, b)` (equal lengths) when `a` and `b` are runs of this thread's current job:
/// one pass over each slice checks its ids and copies its values into the partials (`b`'s are
/// `a`'s partials and the other way round), and the value is the `f64` kernel's over the
/// copies (the same products, added in the same order). `None`, with nothing recorded,
/// otherwise.
#[inline]
pub(crate) fn record_dot(a: &[Var], b: &[Var]) -> Option<Var> {
    let p = FAST.get();
    // (`vector::dot` asserts equal lengths; `Real::slice_dot` called directly does not, and
    // the partials' split below relies on them.)
    if p.is_null() || a.is_empty() || a.len() != b.len() {
        return None;
    }
    // SAFETY: as in `record1`: `FAST` points at this thread's current (unchecked) job.
    let job = unsafe { &mut *p };
    let (n, p0) = (a.len(), job.partials.len());
    let b0 = copy_run(job, b)?;
    let Some(a0) = copy_run(job, a) else {
        job.partials.truncate(p0);
        return None;
    };
    let (pb, pa) = job.partials[p0..].split_at(n);
    let value = fast::dot(pa, pb);
    let r0 = job.runs.len();
    let n = n as u32;
    if a0 + n == b0 {
        job.runs.push(Run {
            first: a0,
            len: 2 * n,
        });
    } else {
        job.runs.push(Run { first: a0, len: n });
        job.runs.push(Run { first: b0, len: n });
    }
    Some(job.push_nary(value, r0, p0))
}

/// The first id of `vars` (not empty) if its last id is where a run would put it: most slices
/// that are not runs fail here, at their last element, with no pass over the rest.
#[inline(always)]
fn run_candidate(vars: &[Var]) -> Option<u64> {
    let first = vars.first()?.id;
    (vars[vars.len() - 1].id == first.wrapping_add(vars.len() as u64 - 1)).then_some(first)
}

/// [`as_run`] and the values' copy to `job.partials` in one pass; nothing copied on `None`.
#[inline]
fn copy_run(job: &mut Job, vars: &[Var]) -> Option<u32> {
    let first = run_candidate(vars)?;
    let p0 = job.partials.len();
    let mut gaps = 0u64;
    job.partials.extend(vars.iter().zip(first..).map(|(v, id)| {
        gaps |= v.id ^ id;
        v.v
    }));
    match job.run_position(first, vars.len()) {
        Some(start) if gaps == 0 => Some(start),
        _ => {
            job.partials.truncate(p0);
            None
        }
    }
}

/// Record `out = M x` (`M` row-major, `out.len()` rows, `x.len() > 0` columns) as one record
/// when `M` and `x` are each a run of consecutive values of this thread's current job or all
/// constants (data times weights): the partials are one copy of `x` (when `M` is active) and
/// one of `M` (when `x` is), not two values per element, and the reverse pass is one
/// matrix-vector loop. Returns `false`, with nothing recorded, otherwise.
#[inline]
pub(crate) fn record_matvec(m: &[Var], x: &[Var], out: &mut [Var]) -> bool {
    let p = FAST.get();
    if p.is_null() || out.is_empty() {
        return false;
    }
    // SAFETY: as in `record1`: `FAST` points at this thread's current (unchecked) job.
    let job = unsafe { &mut *p };
    let p0 = job.partials.len();
    let all_constant = |vars: &[Var]| vars.iter().fold(0, |acc, v| acc | v.id) == CONST_ID;
    // A vector that is not one run (a layer's outputs built element by element, with
    // constants among them) is first copied into one: `cols` entries, against two partials per
    // element of every row on the per-row path.
    let x0 = match as_run(job, x) {
        Some(x0) => Some(x0),
        None if all_constant(x) => None,
        None if out.len() > 1 => match run_across_ranges(job, x).or_else(|| copy_to_run(job, x)) {
            Some(x0) => Some(x0),
            None => return false,
        },
        None => return false,
    };
    job.partials.extend(x.iter().map(|v| v.v));
    let m0 = if x0.is_some() {
        // `x̄ += Mᵀ ā` needs `M`'s values: copied while checking its ids.
        match copy_run(job, m).or_else(|| {
            // (`M` crossing into the job's next id range is one run too, or the per-row path
            // would add `x̄` in another order depending on earlier recordings: a hunter.)
            let m0 = run_across_ranges(job, m)?;
            job.partials.extend(m.iter().map(|v| v.v));
            Some(m0)
        }) {
            Some(m0) => Some(m0),
            None if all_constant(m) => {
                job.partials.extend(m.iter().map(|v| v.v));
                None
            }
            None => {
                // (A copy of `x` made above stays on the tape, unused: harmless.)
                job.partials.truncate(p0);
                return false;
            }
        }
    } else {
        match as_run(job, m).or_else(|| run_across_ranges(job, m)) {
            Some(m0) => Some(m0),
            None => {
                // Both constant (the generic path returns constants), or `M` not a run.
                job.partials.truncate(p0);
                return false;
            }
        }
    };
    let cols = x.len();
    let at = job.push_leaves(out.len(), false);
    let (xv, mv) = job.partials[p0..].split_at(cols);
    if mv.is_empty() {
        for (k, (o, row)) in out.iter_mut().zip(m.chunks_exact(cols)).enumerate() {
            *o = job.var(fast::dot_by(row, xv, |a| a.v, |&b| b), at + k as u32);
        }
    } else {
        // From the copies: contiguous `f64`s, the loop `f64`'s own matvec runs.
        for (k, (o, row)) in out.iter_mut().zip(mv.chunks_exact(cols)).enumerate() {
            *o = job.var(fast::dot(row, xv), at + k as u32);
        }
    }
    let r = job.runs.len() as u32;
    job.nary.push(Nary {
        at,
        runs: (r, r),
        p0: p0 as u32,
        shape: Shape::Matvec {
            rows: out.len() as u32,
            cols: cols as u32,
            m: m0,
            x: x0,
        },
    });
    true
}

/// Record a copy of `vars` as consecutive values of `job` (an entry `1 × v` for each active
/// value, a leaf for each constant) and return the first one's position; `None`, with nothing
/// recorded, when one of them belongs to another job.
fn copy_to_run(job: &mut Job, vars: &[Var]) -> Option<u32> {
    let (first, k0) = (job.len(), job.entries.len());
    for v in vars {
        let own = job.len();
        let e = if v.is_constant() {
            Entry::default()
        } else {
            match job.position(v.id) {
                Some(i) => Entry {
                    p: [1.0, 0.0],
                    i: [i, own],
                },
                None => {
                    job.entries.truncate(k0);
                    return None;
                }
            }
        };
        job.push(e);
    }
    Some(first)
}

/// Add the operand at position `i` to the run being built, pushing the finished run to `runs`
/// when `i` does not follow it.
#[inline(always)]
fn extend_run(run: &mut Option<Run>, runs: &mut Vec<Run>, i: u32) {
    *run = match *run {
        Some(r) if r.first + r.len == i => Some(Run {
            first: r.first,
            len: r.len + 1,
        }),
        Some(r) => {
            runs.push(r);
            Some(Run { first: i, len: 1 })
        }
        None => Some(Run { first: i, len: 1 }),
    };
}

/// [`record_nary`] when every active operand belongs to the current job (no imports, no
/// checked mode): no access to the thread's state. `None` (with nothing recorded) otherwise.
#[inline]
fn nary_fast(job: &mut Job, value: f64, operands: impl Iterator<Item = (Var, f64)>) -> Option<Var> {
    let (r0, p0) = (job.runs.len(), job.partials.len());
    let len = job.len();
    job.partials.reserve(operands.size_hint().0);
    let mut run: Option<Run> = None;
    for (v, p) in operands {
        if v.is_constant() {
            continue;
        }
        let i = v.id.wrapping_sub(job.base);
        if i >= u64::from(len) {
            job.runs.truncate(r0);
            job.partials.truncate(p0);
            return None;
        }
        job.partials.push(p);
        extend_run(&mut run, &mut job.runs, i as u32);
    }
    let r = run?; // no active operand: the slow path returns a constant
    job.runs.push(r);
    Some(job.push_nary(value, r0, p0))
}

#[inline(never)]
fn record_nary_slow(
    value: f64,
    operands: impl Iterator<Item = (Var, f64)>,
    label: &'static str,
) -> Var {
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            // Outside a recording every operand must be a constant.
            let mut operands = operands;
            match operands.find(|(v, _)| !v.is_constant()) {
                Some((v, _)) => not_recording(s, v),
                None => return Var::constant(value),
            }
        };
        let (job, session) = ctx.parts();
        let (r0, p0) = (job.runs.len() as u32, job.partials.len() as u32);
        job.partials.reserve(operands.size_hint().0);
        let mut first_operand = None;
        // Checked mode: whether every operand, constants included, is finite (only then is a
        // non-finite result this primitive's doing; `sum([1, ∞])` was reported as the first
        // non-finite value "from finite operands", and hid a later culprit; a hunter).
        let checked = session.checked;
        let mut operands_finite = true;
        // The run being extended, kept in registers; pushed when the next operand is not at the
        // following position.
        let mut run: Option<Run> = None;
        for (v, p) in operands {
            if checked {
                operands_finite &= v.v.is_finite();
            }
            if v.is_constant() {
                continue;
            }
            first_operand.get_or_insert(v.v);
            let i = job.local(v, session);
            job.partials.push(p);
            extend_run(&mut run, &mut job.runs, i);
        }
        if let Some(r) = run {
            job.runs.push(r);
        }
        if first_operand.is_none() {
            return Var::constant(value);
        }
        let seq = job.push(Entry::default());
        job.nary.push(Nary {
            at: seq,
            runs: (r0, job.runs.len() as u32),
            p0,
            shape: Shape::One,
        });
        if session.checked {
            job.labels.push(Label::Vector(label));
            let first = first_operand.unwrap_or(0.0);
            let finite = job.partials[p0 as usize..].iter().all(|p| p.is_finite());
            if finite && operands_finite {
                check_value(job, Label::Vector(label), [first, 0.0], value, seq);
            }
        }
        job.var(value, seq)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_stay_inside_one_id_range() {
        let mut job = Job::default();
        job.reset(0, false, 10); // range of 64 ids: positions 0..64
        let b0 = job.base;
        job.push_leaves(10, false);
        for _ in 0..60 {
            job.push(Entry::default()); // past 64: a second range, 128 ids
        }
        assert_eq!(job.len(), 71);
        assert_eq!(job.old_ranges, vec![(b0, 64)]);
        let b1 = job.base;
        // Inside the old range, inside the current one.
        assert_eq!(job.run_position(b0 + 1, 10), Some(1));
        assert_eq!(job.run_position(b0 + 60, 4), Some(60));
        assert_eq!(job.run_position(b1 + 64, 7), Some(64));
        // Across the end of the old range: ids b0 + 64.. are not positions 64.. (those have ids
        // b1 + 64..), so this is no run, whatever holds those ids.
        assert_eq!(job.run_position(b0 + 60, 5), None);
        // Past the values recorded so far.
        assert_eq!(job.run_position(b1 + 64, 8), None);
    }
}
