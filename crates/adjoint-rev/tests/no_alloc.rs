//! The unitary example allocates nothing on the heap in its call, its uncall and its gradient
//! (seed 001: "zero allocation"), nor does a steady-state gradient pass that keeps routine
//! values, counted with a counting global allocator.

use adjoint_rev::examples::i_umm;
use adjoint_rev::GVar;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Allocations made by this thread (the test harness allocates on other threads meanwhile).
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls (in a thread-local
// `Cell` with a constant initialiser and no destructor, which never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn unitary_call_uncall_and_gradient_do_not_allocate() {
    let m = 6;
    let mut x: Vec<f64> = (0..3 * m).map(|i| (i as f64).cos()).collect();
    let mut theta: Vec<f64> = (0..m * (m - 1) / 2).map(|k| 0.1 * k as f64).collect();
    let mut mm = m;
    assert_eq!(
        allocations(|| i_umm(&mut x, &mut theta, &mut mm).unwrap()),
        0,
        "call"
    );
    assert_eq!(
        allocations(|| i_umm::uncall(&mut x, &mut theta, &mut mm).unwrap()),
        0,
        "uncall"
    );

    // The gradient pass: the forward's outputs wrapped in GVar (allocated up front), the loss
    // gradient seeded, the inverse run.
    i_umm(&mut x, &mut theta, &mut mm).unwrap();
    let mut gx: Vec<GVar<f64>> = x.iter().map(|&v| GVar::new(v, 0.0)).collect();
    let mut gt: Vec<GVar<f64>> = theta.iter().map(|&v| GVar::new(v, 0.0)).collect();
    gx[1].g = 1.0;
    assert_eq!(
        allocations(|| i_umm::uncall(&mut gx, &mut gt, &mut mm).unwrap()),
        0,
        "gradient"
    );
    // …and it computed something: θ's gradient is not all zero, and x is back to the input.
    assert!(gt.iter().any(|t| t.g != 0.0));
    let x0: Vec<f64> = (0..3 * m).map(|i| (i as f64).cos()).collect();
    assert!(gx.iter().zip(&x0).all(|(a, b)| (a.x - b).abs() < 1e-14));
}

/// A gradient pass that keeps routine values (the Petersen loss: 45 `i_dist` sums on the
/// stack) allocates nothing in steady state: the stack is this thread's spare, reused.
#[test]
fn a_steady_state_gradient_pass_does_not_allocate() {
    use adjoint_rev::examples::i_petersen;
    let k = 3;
    let x: Vec<f64> = (0..10 * k).map(|i| (0.7 * i as f64).sin()).collect();
    let mut gx: Vec<GVar<f64>> = vec![GVar::default(); 10 * k];
    let pass = |gx: &mut Vec<GVar<f64>>| {
        for (g, &v) in gx.iter_mut().zip(&x) {
            *g = GVar::new(v, 0.0);
        }
        let (mut l, mut kk) = (GVar::new(0.0, 0.0), k);
        i_petersen::gradient_pass_unchecked(&mut l, gx, &mut kk, |l, _, _| l.g = 1.0).unwrap();
    };
    pass(&mut gx); // the first pass grows this thread's stack
    let first: Vec<f64> = gx.iter().map(|g| g.g).collect();
    assert_eq!(allocations(|| pass(&mut gx)), 0, "steady-state pass");
    assert_eq!(gx.iter().map(|g| g.g).collect::<Vec<_>>(), first);
}
