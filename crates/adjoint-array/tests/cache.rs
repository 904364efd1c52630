//! The arrays kept between runs (`adjoint_array::cache`): a run handed arrays that earlier runs
//! (of this program or another) left dirty computes exactly what it computes on fresh memory,
//! and the limit bounds what is kept. One test, since the limit is process-wide.

use adjoint_array::models::Gmm;
use adjoint_array::{cache, Builder};
use adjoint_core::check::check_gradient;

mod common;
use common::{bits, uniform};

/// A GMM gradient (matrix products, windowed scatters, kept exponentials: every kind of large
/// array a run allocates) at `seed`'s parameters.
fn gmm_gradient(gmm: &Gmm, n: usize, d: usize, k: usize, seed: u64) -> (f64, Vec<f64>) {
    let p = uniform(k + k * d + k * d * (d + 1) / 2, seed, -0.5, 0.5);
    let x = uniform(n * d, 99, -1.0, 1.0);
    let (a, rest) = p.split_at(k);
    let (mu, icf) = rest.split_at(k * d);
    gmm.gradient(a, mu, icf, &x).unwrap()
}

#[test]
fn kept_arrays_change_no_result_and_the_limit_bounds_them() {
    let (n, d, k) = (3000, 10, 3);
    let gmm = Gmm::new(n, d, k, 1.0, 0.0).unwrap();

    // Fresh memory for every array.
    cache::set_limit(0);
    let (v_fresh, g_fresh) = gmm_gradient(&gmm, n, d, k, 2);
    assert_eq!(cache::kept_bytes(), 0, "nothing kept with the limit at 0");

    // Kept arrays, dirty from runs at other parameters and from another program.
    cache::set_limit(1 << 30);
    gmm_gradient(&gmm, n, d, k, 1);
    assert!(
        cache::kept_bytes() > 0,
        "a GMM gradient's large arrays are kept"
    );
    let b = Builder::new();
    let x = b.input(&[50_000]);
    let other = b.build_scalar(&x.map(|v| (v * 3.0).sin()).sum()).unwrap();
    let xs = uniform(50_000, 5, -1.0, 1.0);
    let go = other.gradient_a(&[&xs]).unwrap();
    assert_eq!(go.grads[0][7], 3.0 * (3.0 * xs[7]).cos());
    for _ in 0..2 {
        let (v, g) = gmm_gradient(&gmm, n, d, k, 2);
        assert_eq!(v.to_bits(), v_fresh.to_bits());
        assert_eq!(bits(&g), bits(&g_fresh), "a gradient on kept arrays");
    }

    // The gradient compared against is right: finite differences of the objective (the value
    // itself is checked against an independent port in tests/gmm.rs).
    let p = uniform(k + k * d + k * d * (d + 1) / 2, 2, -0.5, 0.5);
    let xd = uniform(n * d, 99, -1.0, 1.0);
    let objective = |q: &[f64]| {
        let (a, rest) = q.split_at(k);
        let (mu, icf) = rest.split_at(k * d);
        gmm.objective(a, mu, icf, &xd).unwrap()
    };
    assert_eq!(objective(&p).to_bits(), v_fresh.to_bits());
    check_gradient(objective, &p, &g_fresh).assert_passed();

    // Lowering the limit frees what is over it; clear frees everything.
    cache::set_limit(1 << 20);
    assert!(cache::kept_bytes() <= 1 << 20);
    cache::clear();
    assert_eq!(cache::kept_bytes(), 0);
    let (v, g) = gmm_gradient(&gmm, n, d, k, 2);
    assert_eq!((v.to_bits(), bits(&g)), (v_fresh.to_bits(), bits(&g_fresh)));
    assert!(
        cache::kept_bytes() <= 1 << 20,
        "the limit holds after a run"
    );
}
