//! ADBench's timing protocol: double the repeat count until one batch takes ≥ 0.5 s, then
//! collect up to 10 batches within 10 s; report the minimum time per evaluation.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Budgets of the protocol (ADBench's, or shortened for `--quick`).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Minimum batch duration.
    pub batch: Duration,
    /// Most batches.
    pub max_batches: usize,
    /// Total time limit for the batches.
    pub total: Duration,
}

impl Budget {
    /// ADBench's values: 0.5 s batches, ≤ 10 batches, ≤ 10 s.
    pub const ADBENCH: Budget = Budget {
        batch: Duration::from_millis(500),
        max_batches: 10,
        total: Duration::from_secs(10),
    };
    /// Short values for `--quick`.
    pub const QUICK: Budget = Budget {
        batch: Duration::from_millis(50),
        max_batches: 3,
        total: Duration::from_millis(300),
    };
}

/// Minimum seconds per evaluation of `f` under the protocol.
pub fn time_min<R>(mut f: impl FnMut() -> R, b: Budget) -> f64 {
    let mut reps = 1usize;
    let mut best = f64::INFINITY;
    loop {
        let t = Instant::now();
        for _ in 0..reps {
            black_box(f());
        }
        let e = t.elapsed();
        best = best.min(e.as_secs_f64() / reps as f64);
        if e >= b.batch || reps >= 1 << 24 {
            break;
        }
        reps *= 2;
    }
    let start = Instant::now();
    for _ in 1..b.max_batches {
        if start.elapsed() >= b.total {
            break;
        }
        let t = Instant::now();
        for _ in 0..reps {
            black_box(f());
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

/// ADBench's agreement rule: |x − y| / max(1, |x| + |y|) < 1e-8 for every element.
pub fn agree(x: &[f64], y: &[f64]) -> Result<(), String> {
    if x.len() != y.len() {
        return Err(format!("lengths differ: {} vs {}", x.len(), y.len()));
    }
    for (i, (a, b)) in x.iter().zip(y).enumerate() {
        let e = (a - b).abs() / (a.abs() + b.abs()).max(1.0);
        // NaN fails too.
        if e.is_nan() || e >= 1e-8 {
            return Err(format!("element {i}: {a} vs {b} (error {e:.2e})"));
        }
    }
    Ok(())
}
