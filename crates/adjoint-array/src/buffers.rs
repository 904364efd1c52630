//! Large arrays reused between runs instead of freed and allocated again.
//!
//! A gradient allocates its large intermediates afresh on every call (the GMM's `[1000, 25,
//! 20]` product, its adjoint and the scatter windows behind it: 12 MB per call at d = 20). The
//! allocator hands such blocks back to the system when they are freed, so each call paid for
//! page faults and for clearing new pages: run on a pool thread without reuse, that gradient
//! took 7.7 ms, with it 3.8 ms. Arrays of at least [`MIN_LEN`] elements are therefore kept
//! when a run is done with them (up to [`limit`] bytes in all, process-wide; 1 GiB unless
//! changed with [`set_limit`]) and handed out again by [`zeroed`] (cleared) or
//! [`overwritten`] (for outputs written in full).
//!
//! When the limit is reached, the arrays kept longest ago are freed to make room, so the
//! program being run again and again keeps its own arrays. The limit was 64 MiB at first, and
//! a full cache refused new arrays: a gradient whose working set is larger (GMM 10k d10 K200,
//! 1k d32 K200: arrays of 20–50 MB each), or that ran after programs of other sizes, then got
//! fresh pages on every call, and took 1.3–2.7× as long as with its arrays kept
//! (BENCHMARKS.md, twelfth session). An array no run has taken for [`MAX_IDLE_RUNS`] runs
//! is freed too, so that arrays a run hands back beyond what it takes do not pile up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Arrays shorter than this are left to the allocator (32 KiB of `f64`; the per-chunk scatter
/// windows of a 2 MB adjoint are 128 KiB each).
pub(crate) const MIN_LEN: usize = 1 << 12;
/// At most this many arrays are kept.
const MAX_BUFS: usize = 1024;
/// The default limit: 1 GiB.
const DEFAULT_LIMIT: usize = 1 << 30;

/// An array kept this many runs ago and not taken since is freed when another is kept: a run
/// that hands back more arrays of some size than it takes (values allocated outside the cache,
/// such as a fold's rows) would otherwise fill the cache with arrays no one asks for. Measured
/// before this (GMM 10k d2 K5 gradient, 2 threads): the cache grew by one 80 KB array per
/// call, reached its 1024 arrays after ~1100 calls, and from then on each call took 1.03 ms
/// against 0.74 ms (every allocation searched and shifted a thousand kept arrays).
const MAX_IDLE_RUNS: u64 = 16;

/// The limit in bytes ([`set_limit`]).
static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);

/// Runs started so far (process-wide), the clock of [`MAX_IDLE_RUNS`].
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Count a run (a program's `run`, `gradient_a`, … on the pool).
pub(crate) fn start_run() {
    RUNS.fetch_add(1, Ordering::Relaxed);
}

struct Spare {
    /// the kept arrays with the run during which each was kept, the one kept longest ago
    /// first
    bufs: VecDeque<(Vec<f64>, u64)>,
    /// Elements kept (the sum of the arrays' capacities).
    kept: usize,
}

static SPARE: Mutex<Spare> = Mutex::new(Spare {
    bufs: VecDeque::new(),
    kept: 0,
});

fn spare() -> std::sync::MutexGuard<'static, Spare> {
    // The lock guards plain data that every operation leaves consistent.
    SPARE.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many bytes of finished runs' arrays may be kept for later runs (process-wide).
///
/// ```
/// use adjoint_array::cache;
/// assert!(cache::kept_bytes() <= cache::limit());
/// ```
pub fn limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Keep at most `bytes` of finished runs' arrays for later runs (default 1 GiB); `0` turns
/// keeping off. Arrays already kept beyond the new limit are freed at once.
///
/// A program run many times (an optimiser's gradient) reuses its large arrays instead of
/// asking the system for fresh pages on every run; between runs, at most this much memory
/// stays allocated. Lower it where memory is tight, or call [`clear`] when done.
///
/// ```
/// use adjoint_array::{cache, Builder};
/// let b = Builder::new();
/// let x = b.input(&[10_000]);
/// let p = b.build_scalar(&x.map(|v| v * v).sum()).unwrap();
/// let xs = vec![0.5; 10_000];
/// cache::set_limit(0);
/// let g = p.gradient_a(&[&xs]).unwrap(); // nothing is kept after the run
/// assert_eq!(cache::kept_bytes(), 0);
/// cache::set_limit(1 << 30); // back to the default
/// assert_eq!(g.grads[0][0], 1.0);
/// ```
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    let mut sp = spare();
    while sp.kept * 8 > bytes {
        // the arrays kept longest ago first, as in `recycle`
        sp.pop_oldest();
    }
}

/// Free every kept array.
///
/// ```
/// adjoint_array::cache::clear();
/// assert_eq!(adjoint_array::cache::kept_bytes(), 0);
/// ```
pub fn clear() {
    let mut sp = spare();
    sp.bufs.clear();
    sp.kept = 0;
}

/// The bytes of arrays kept now.
///
/// ```
/// assert!(adjoint_array::cache::kept_bytes() <= adjoint_array::cache::limit());
/// ```
pub fn kept_bytes() -> usize {
    spare().kept * 8
}

/// `len` zeros: a kept array of at least that capacity (at most twice it) when there is one.
pub(crate) fn zeroed(len: usize) -> Vec<f64> {
    match kept(len) {
        Some(mut b) => {
            b.resize(len, 0.0);
            b.truncate(len);
            // cleared in parallel when large (a 20 MB adjoint took 2 ms on one thread)
            crate::kernel::for_chunks(&mut b, 1 << 16, len, |_, c| c.fill(0.0));
            b
        }
        None => vec![0.0; len],
    }
}

/// `len` numbers to be overwritten (a kept array's old contents, or zeros): for outputs that
/// every element of is written, which need no clearing.
pub(crate) fn overwritten(len: usize) -> Vec<f64> {
    match kept(len) {
        Some(mut b) => {
            b.resize(len, 0.0);
            b.truncate(len);
            b
        }
        None => vec![0.0; len],
    }
}

fn kept(len: usize) -> Option<Vec<f64>> {
    if len < MIN_LEN {
        return None;
    }
    spare().take(len)
}

/// Keep `v` for a later [`zeroed`] (when it is large), making room by freeing the arrays kept
/// longest ago ([`Spare::put`]).
pub(crate) fn recycle(v: Vec<f64>) {
    if v.capacity() < MIN_LEN {
        return;
    }
    spare().put(v, limit(), RUNS.load(Ordering::Relaxed));
}

impl Spare {
    /// The smallest kept array of capacity `len` to `2 len`, if any.
    fn take(&mut self, len: usize) -> Option<Vec<f64>> {
        let i = (self.bufs.iter().enumerate())
            .filter(|(_, (b, _))| b.capacity() >= len && b.capacity() <= 2 * len)
            .min_by_key(|(_, (b, _))| b.capacity())
            .map(|(i, _)| i)?;
        // the others stay in the order they were kept
        let (b, _) = self.bufs.remove(i)?;
        self.kept -= b.capacity();
        Some(b)
    }

    /// Free the array kept longest ago.
    fn pop_oldest(&mut self) {
        let (old, _) = self
            .bufs
            .pop_front()
            .expect("kept elements are in some array");
        self.kept -= old.capacity();
    }

    /// Keep `v` within `limit` bytes, freeing the arrays kept longest ago to make room: a
    /// program run many times then keeps its own arrays even after earlier programs, of other
    /// sizes, filled the cache. (Keeping only while there was room made such runs allocate
    /// afresh on every call: GMM 10k d10 K50 gradient 80 against 37 ms after a grid of other
    /// inputs.)
    ///
    /// `run` is the current run ([`start_run`]): arrays kept more than [`MAX_IDLE_RUNS`] runs
    /// before it, and not taken since, are freed first.
    fn put(&mut self, v: Vec<f64>, limit: usize, run: u64) {
        while (self.bufs.front()).is_some_and(|&(_, r)| r + MAX_IDLE_RUNS < run) {
            self.pop_oldest();
        }
        let cap = v.capacity();
        if cap * 8 > limit {
            return;
        }
        while (self.kept + cap) * 8 > limit || self.bufs.len() >= MAX_BUFS {
            self.pop_oldest();
        }
        self.kept += cap;
        self.bufs.push_back((v, run));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of its own (not the process-wide one other tests use).
    fn empty() -> Spare {
        Spare {
            bufs: VecDeque::new(),
            kept: 0,
        }
    }

    #[test]
    fn a_recycled_array_comes_back_cleared() {
        let mut v = zeroed(MIN_LEN + 3);
        assert!(v.iter().all(|&x| x == 0.0));
        v.iter_mut().for_each(|x| *x = 7.0);
        let p = v.as_ptr();
        recycle(v);
        // Another test may take it first; when this one gets it, it is all zeros.
        let w = zeroed(MIN_LEN + 1);
        assert_eq!(w.len(), MIN_LEN + 1);
        assert!(w.iter().all(|&x| x == 0.0), "cleared");
        let _ = p;
        // small arrays are not kept
        recycle(vec![1.0; 10]);
        assert_eq!(zeroed(10), vec![0.0; 10]);
    }

    #[test]
    fn a_full_cache_frees_the_arrays_kept_longest_ago() {
        let mut sp = empty();
        let n = MIN_LEN;
        let limit = 3 * n * 8; // room for three arrays of n
        for tag in 0..3 {
            sp.put(vec![tag as f64; n], limit, 0);
        }
        // a fourth frees the first
        sp.put(vec![3.0; n], limit, 0);
        assert_eq!(sp.kept, 3 * n);
        let tags: Vec<f64> = sp.bufs.iter().map(|(b, _)| b[0]).collect();
        assert_eq!(tags, [1.0, 2.0, 3.0]);
        // one of twice the size frees the two oldest
        sp.put(vec![4.0; 2 * n], limit, 0);
        let tags: Vec<f64> = sp.bufs.iter().map(|(b, _)| b[0]).collect();
        assert_eq!(tags, [3.0, 4.0]);
        // taking the best fit keeps the others in order; one larger than the limit is dropped
        assert_eq!(sp.take(n).map(|b| b[0]), Some(3.0));
        sp.put(vec![5.0; 4 * n], limit, 0);
        assert_eq!(sp.bufs.len(), 1);
        assert_eq!(sp.take(2 * n).map(|b| b[0]), Some(4.0));
        assert_eq!(sp.kept, 0);
        assert!(sp.take(n).is_none());
    }

    #[test]
    fn arrays_no_run_asks_for_are_freed_after_a_while() {
        let mut sp = empty();
        let n = MIN_LEN;
        let limit = 1 << 30;
        // every run hands back one array more than it takes (a size no one asks for, 2n)
        // and takes back the one it needs (n): the surplus stays bounded
        for run in 0..200 {
            if run > 0 {
                assert!(
                    sp.take(n).is_some(),
                    "run {run}: the array it needs is kept"
                );
            }
            sp.put(vec![0.0; n], limit, run);
            sp.put(vec![1.0; 4 * n], limit, run);
            assert!(sp.bufs.len() as u64 <= MAX_IDLE_RUNS + 2, "run {run}");
        }
        // an array taken again in time is never freed for its age
        let mut sp = empty();
        sp.put(vec![7.0; n], limit, 0);
        for run in 1..100 {
            let b = sp.take(n).expect("kept");
            assert_eq!(b[0], 7.0);
            sp.put(b, limit, run * MAX_IDLE_RUNS);
        }
        // one kept too long ago goes when the next is kept
        sp.put(vec![8.0; 2 * n], limit, 100 * MAX_IDLE_RUNS + 1);
        assert_eq!(sp.bufs.len(), 1);
        assert_eq!(sp.bufs[0].0[0], 8.0);
        assert_eq!(sp.kept, 2 * n);
    }
}
