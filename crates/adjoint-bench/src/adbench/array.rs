//! The array engine (`adjoint::array`, seed 004) as an ADBench GMM, BA and LSTM column: the objective written
//! with the combinators ([`adjoint::array::models::Gmm`]), built once per input size (JAX's
//! `jit` model: building is not timed, as compilation is not for JAX) and differentiated as a
//! whole program on rayon's threads.

use super::ba::{self, Csr};
use super::io::{BaInput, GmmInput, LstmInput};
use super::lstm::LstmColumn;
use super::{BaColumn, GmmColumn};
use adjoint::array::models::{Ba, Gmm, Lstm};
use adjoint::array::Backend;
use std::cell::RefCell;

/// A program built for the sizes of the last input (three sizes), rebuilt when they change.
type Built<T> = RefCell<Option<((usize, usize, usize), T)>>;

/// What a built program depends on: `(n, d, K, γ bits, m bits)`.
type Sizes = (usize, usize, usize, u64, u64);

/// The array engine's GMM gradient, on the CPU (`array`) or the GPU (`array-cuda`).
pub struct Array {
    name: &'static str,
    backend: Backend,
    built: RefCell<Option<(Sizes, Gmm)>>,
}

impl Default for Array {
    fn default() -> Self {
        Array {
            name: "array",
            backend: Backend::cpu(),
            built: RefCell::new(None),
        }
    }
}

impl Array {
    /// The column on the GPU (`array-cuda`), or why there is none (no GPU, no driver, or the
    /// bench built without its `cuda` feature).
    pub fn cuda() -> Result<Self, String> {
        Ok(Array {
            name: "array-cuda",
            backend: Backend::cuda().map_err(|e| e.to_string())?,
            built: RefCell::new(None),
        })
    }
}

impl GmmColumn for Array {
    fn name(&self) -> &'static str {
        self.name
    }
    fn gmm(&self, g: &GmmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let key = (g.n, g.d, g.k, g.gamma.to_bits(), g.m.to_bits());
        let mut built = self.built.borrow_mut();
        if built.as_ref().is_none_or(|(k, _)| *k != key) {
            let program = Gmm::for_backend(g.n, g.d, g.k, g.gamma, g.m, &self.backend)
                .unwrap_or_else(|e| panic!("array GMM for d = {}, K = {}: {e}", g.d, g.k));
            *built = Some((key, program));
        }
        let (_, program) = built.as_ref().expect("built above");
        let (k, d) = (g.k, g.d);
        let (alphas, rest) = p.split_at(k);
        let (means, icf) = rest.split_at(k * d);
        let (v, gr) = program
            .gradient_on(&self.backend, alphas, means, icf, &g.x)
            .unwrap_or_else(|e| panic!("{} GMM gradient: {e}", self.name));
        grad.copy_from_slice(&gr);
        v
    }
}

/// The array engine's LSTM column: [`adjoint::array::models::Lstm`], the time loop one
/// `scan_n`, built once per `(l, c, b)`.
#[derive(Default)]
pub struct ArrayLstm {
    built: Built<Lstm>,
}

impl LstmColumn for ArrayLstm {
    fn name(&self) -> &'static str {
        "array"
    }
    fn lstm(&self, g: &LstmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let key = (g.l, g.c, g.b);
        let mut built = self.built.borrow_mut();
        if built.as_ref().is_none_or(|(k, _)| *k != key) {
            let program = Lstm::new(g.l, g.c, g.b)
                .unwrap_or_else(|e| panic!("array LSTM for l = {}, c = {}: {e}", g.l, g.c));
            *built = Some((key, program));
        }
        let (_, program) = built.as_ref().expect("built above");
        let (main, extra) = p.split_at(8 * g.l * g.b);
        let (v, gr) = program
            .gradient(main, extra, &g.state, &g.seq)
            .unwrap_or_else(|e| panic!("array LSTM gradient: {e}"));
        grad.copy_from_slice(&gr);
        v
    }
}

/// The array engine's BA column: [`adjoint::array::models::Ba`] (`jacobian_e` inside a
/// `generate_n` over observations), built once per `(n, m, p)`; the CSR assembly is timed. On
/// the CPU (`array`) or the GPU (`array-cuda`).
pub struct ArrayBa {
    name: &'static str,
    backend: Backend,
    built: Built<Ba>,
    /// Observation indices as numbers, a buffer reused between calls.
    obs: RefCell<Vec<f64>>,
}

impl Default for ArrayBa {
    fn default() -> Self {
        ArrayBa {
            name: "array",
            backend: Backend::cpu(),
            built: RefCell::new(None),
            obs: RefCell::new(Vec::new()),
        }
    }
}

impl ArrayBa {
    /// The column on the GPU (`array-cuda`), or why there is none.
    pub fn cuda() -> Result<Self, String> {
        Ok(ArrayBa {
            name: "array-cuda",
            backend: Backend::cuda().map_err(|e| e.to_string())?,
            ..ArrayBa::default()
        })
    }
}

impl BaColumn for ArrayBa {
    fn name(&self) -> &'static str {
        self.name
    }
    fn ba(&self, b: &BaInput, out: &mut Csr) {
        let key = (b.n, b.m, b.p);
        let mut built = self.built.borrow_mut();
        if built.as_ref().is_none_or(|(k, _)| *k != key) {
            let program = Ba::new(b.n, b.m, b.p)
                .unwrap_or_else(|e| panic!("array BA for n = {}, m = {}: {e}", b.n, b.m));
            *built = Some((key, program));
        }
        let (_, program) = built.as_ref().expect("built above");
        let mut obs = self.obs.borrow_mut();
        obs.clear();
        obs.extend(b.obs.iter().flat_map(|o| [o[0] as f64, o[1] as f64]));
        program
            .blocks_on(
                &self.backend,
                &b.cams,
                &b.x,
                &b.w,
                &b.feats,
                &obs,
                &mut out.vals,
            )
            .unwrap_or_else(|e| panic!("{} BA Jacobian: {e}", self.name));
        ba::assemble_in_place(b, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adbench::io;

    #[test]
    fn ba_blocks_match_vector_forward_mode_including_a_zero_rotation() {
        let mut b = io::parse_ba(&io::write_ba(3, 4, 7), "generated").unwrap();
        // Camera 1: θ = 0, the reference's `x + r × x` branch.
        b.cams[11..14].fill(0.0);
        for (i, v) in b.x.iter_mut().enumerate() {
            *v += 0.1 * i as f64;
        }
        // Then 2100 observations (a compiled kernel, whose rotation's sin and cos are one
        // call) and the small input again, into the same matrix: the blocks are run straight
        // into its values, whatever length they had.
        let big = io::parse_ba(&io::write_ba(5, 40, 2100), "generated").unwrap();
        let mut got = Csr::default();
        let column = ArrayBa::default();
        for input in [&b, &big, &b] {
            column.ba(input, &mut got);
            let want = ba::ba_jacobian_forward(input);
            assert_eq!(got.row_ptr, want.row_ptr);
            assert_eq!(got.col_idx, want.col_idx);
            assert_eq!(got.vals.len(), want.vals.len());
            for (k, (a, w)) in got.vals.iter().zip(&want.vals).enumerate() {
                assert!(
                    (a - w).abs() <= 1e-10 * (1.0 + w.abs()),
                    "p = {}, value {k}: {a} vs {w}",
                    input.p
                );
            }
        }
    }
}
