//! Large arrays reused between runs instead of freed and allocated again.
//!
//! A gradient allocates its large intermediates afresh on every call (the GMM's `[1000, 25,
//! 20]` product, its adjoint and the scatter windows behind it: 12 MB per call at d = 20). The
//! allocator hands such blocks back to the system when they are freed, so each call paid for
//! page faults and for clearing new pages: run on a pool thread without reuse, that gradient
//! took 7.7 ms, with it 3.8 ms. Arrays of at least [`MIN_LEN`] elements are therefore kept
//! when a run is done with them (up to [`MAX_KEPT`] elements in all, process-wide) and handed
//! out again by [`zeroed`] (cleared) or [`overwritten`] (for outputs written in full).

use std::sync::Mutex;

/// Arrays shorter than this are left to the allocator (32 KiB of `f64`; the per-chunk scatter
/// windows of a 2 MB adjoint are 128 KiB each).
pub(crate) const MIN_LEN: usize = 1 << 12;
/// At most this many arrays are kept.
const MAX_BUFS: usize = 256;
/// At most this many elements are kept (64 MiB of `f64`).
pub(crate) const MAX_KEPT: usize = 1 << 23;

struct Spare {
    bufs: Vec<Vec<f64>>,
    kept: usize,
}

static SPARE: Mutex<Spare> = Mutex::new(Spare {
    bufs: Vec::new(),
    kept: 0,
});

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
    let found = {
        let mut sp = SPARE.lock().expect("spare arrays");
        let best = sp
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() <= 2 * len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        best.map(|i| {
            let b = sp.bufs.swap_remove(i);
            sp.kept -= b.capacity();
            b
        })
    };
    found
}

/// Keep `v` for a later [`zeroed`] (when it is large and there is room).
pub(crate) fn recycle(v: Vec<f64>) {
    if v.capacity() < MIN_LEN {
        return;
    }
    let mut sp = SPARE.lock().expect("spare arrays");
    if sp.kept + v.capacity() <= MAX_KEPT && sp.bufs.len() < MAX_BUFS {
        sp.kept += v.capacity();
        sp.bufs.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
