//! `use adjoint_rev::prelude::*` must not change what `.len()` means (a hunter's finding): the
//! prelude's `Differentiable` once had a `len` counting scalars, and on arrays, which have no
//! inherent `len`, method resolution picked it: `[usize; 3].len()` was 0, `[[f64; 2]; 3].len()`
//! was 6, so loops over `0..a.len()` in reversible code skipped or ran out of bounds.

use adjoint_core::check::check_gradient;
use adjoint_rev::grad;
use adjoint_rev::prelude::*;

reversible! {
    /// `y += Σₖ x[idx[k]]²`: the loop bound is the length of an integer array.
    fn gather_squares<T: RevReal>(y: &mut T, x: &mut [T; 4], idx: &mut [usize; 3]) {
        for k in 0..idx.len() {
            y += x[idx[k]] * x[idx[k]];
        }
    }

    /// `y += Σᵢⱼ mᵢⱼ·(i + 1)`: an array of arrays, row count from `m.len()`.
    fn weighted_rows<T: RevReal>(y: &mut T, m: &mut [[T; 2]; 3]) {
        for i in 0..m.len() {
            for j in 0..m[i].len() {
                y += m[i][j] * T::from_f64((i + 1) as f64);
            }
        }
    }
}

#[test]
fn the_prelude_leaves_array_len_alone() {
    assert_eq!([1usize, 2, 3].len(), 3);
    assert_eq!([[0.0f64; 2]; 3].len(), 3);
    assert_eq!([Complex::new(1.0f64, 2.0); 2].len(), 2);
    assert!(!std::hint::black_box([0.5f64]).is_empty());
    assert_eq!(0.5f64.scalar_count(), 1);
    assert_eq!([[0.0f64; 2]; 3].scalar_count(), 6);
    assert_eq!([1usize, 2, 3].scalar_count(), 0);
}

#[test]
fn loops_over_array_lengths_run_every_iteration() {
    let x = [1.5, -0.5, 2.0, 3.0];
    let idx = [3usize, 0, 3];
    let (mut y, mut xs, mut is) = (0.0f64, x, idx);
    gather_squares(&mut y, &mut xs, &mut is).unwrap();
    assert_eq!(y, 3.0 * 3.0 + 1.5 * 1.5 + 3.0 * 3.0);
    let g = grad(gather_squares {}, (0.0f64, x, idx), 0).unwrap();
    let f = |x: &[f64]| idx.iter().map(|&k| x[k] * x[k]).sum::<f64>();
    check_gradient(f, &x, &g.1).assert_passed();

    let m = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
    let (mut y, mut ms) = (0.0f64, m);
    weighted_rows(&mut y, &mut ms).unwrap();
    assert_eq!(y, 1.0 + 2.0 + 2.0 * (3.0 + 4.0) + 3.0 * (5.0 + 6.0));
    let g = grad(weighted_rows {}, (0.0f64, m), 0).unwrap();
    let flat: Vec<f64> = g.1.iter().flatten().copied().collect();
    let f = |v: &[f64]| (0..6).map(|k| v[k] * (k / 2 + 1) as f64).sum::<f64>();
    check_gradient(f, &m.concat(), &flat).assert_passed();
}
