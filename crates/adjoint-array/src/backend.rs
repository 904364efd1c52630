//! Where a program runs: on the CPU (the default; every program) or, with the `cuda` cargo
//! feature, on an NVIDIA GPU (programs of generates, sums, folds and matrix products; see
//! [`Backend::cuda`]). The same [`Program`] runs on either, chosen at run time.

use crate::error::{Error, Result};
use crate::graph::{Array, Gradient, Program};
#[cfg(feature = "cuda")]
use std::sync::{Arc, OnceLock};

/// The machine a [`Program`] runs on: [`Backend::cpu`] (all cores, through rayon) or
/// [`Backend::cuda`] (the GPU). Cheap to clone.
///
/// ```
/// use adjoint_array::{Backend, Builder};
/// let b = Builder::new();
/// let x = b.input(&[3]);
/// let p = b.build_scalar(&x.map(|v| v * v).sum()).unwrap();
/// // the GPU when there is one (and the `cuda` feature is on), else the CPU
/// let backend = Backend::cuda().unwrap_or_else(|_| Backend::cpu());
/// let g = p.gradient_on(&backend, &[&[1.0, 2.0, 3.0]]).unwrap();
/// assert_eq!(g.value, 14.0);
/// assert_eq!(g.grads[0], vec![2.0, 4.0, 6.0]);
/// ```
#[derive(Clone, Default)]
pub struct Backend(Inner);

#[derive(Clone, Default)]
enum Inner {
    #[default]
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::cuda::device::Gpu>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_cuda() {
            "Backend::Cuda"
        } else {
            "Backend::Cpu"
        })
    }
}

#[cfg(feature = "cuda")]
fn gpu() -> Result<Arc<crate::cuda::device::Gpu>> {
    static GPU: OnceLock<std::result::Result<Arc<crate::cuda::device::Gpu>, String>> =
        OnceLock::new();
    GPU.get_or_init(|| {
        crate::cuda::device::Gpu::new()
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(Error::Invalid)
}

impl Backend {
    /// The CPU: every program, on rayon's pool.
    ///
    /// ```
    /// use adjoint_array::{Backend, Builder};
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build(&[&x.map(|v| v.exp())]).unwrap();
    /// let out = p.run_on(&Backend::cpu(), &[&[0.0, 1.0]]).unwrap();
    /// assert_eq!(out[0].data(), [1.0, 1f64.exp()]);
    /// assert!(!Backend::cpu().is_cuda());
    /// ```
    pub fn cpu() -> Backend {
        Backend(Inner::Cpu)
    }

    /// The first NVIDIA GPU (one per process, made on first use), or the error
    /// `CUDA backend unavailable: …` when there is none, when the driver or NVRTC cannot be
    /// loaded, or when this crate was built without the `cuda` feature.
    ///
    /// Kernels are compiled at run time by NVRTC (cached per kernel, so only a program's
    /// first run pays for it) and computed in `f64` without contracted multiply-adds, in a
    /// fixed order: a program's results are bit-identical from run to run and agree with the
    /// CPU backend's to rounding. On the GPU run `generate`, `map`, `zip_with`, `sum`,
    /// folds with `+ × max min` (a `+` fold's adjoint too; the adjoints of `× max min` folds
    /// run on the host), `matmul`, `reshape`, `stop_gradient` and their adjoints;
    /// `scan`, `scan_n`, `permute`, `awhile` and general folds run on the host inside the
    /// GPU program (their operands copied back, their results and adjoints up), `acond`
    /// decides its branch there; `f32` arrays are refused with an error naming them.
    pub fn cuda() -> Result<Backend> {
        #[cfg(feature = "cuda")]
        {
            gpu().map(|g| Backend(Inner::Cuda(g)))
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(Error::Invalid(
                "CUDA backend unavailable: adjoint-array was built without its `cuda` feature"
                    .into(),
            ))
        }
    }

    /// Whether this is the GPU.
    ///
    /// ```
    /// use adjoint_array::Backend;
    /// // `Backend::cuda()` is an error without a GPU or the `cuda` feature
    /// match Backend::cuda() {
    ///     Ok(gpu) => assert!(gpu.is_cuda()),
    ///     Err(e) => assert!(e.to_string().contains("CUDA backend unavailable"), "{e}"),
    /// }
    /// ```
    pub fn is_cuda(&self) -> bool {
        match self.0 {
            Inner::Cpu => false,
            #[cfg(feature = "cuda")]
            Inner::Cuda(_) => true,
        }
    }
}

impl Program {
    /// [`run`](Program::run) on `backend`.
    ///
    /// ```
    /// use adjoint_array::{Backend, Builder};
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build(&[&x.map(|v| v.exp())]).unwrap();
    /// let out = p.run_on(&Backend::cpu(), &[&[0.0, 1.0]]).unwrap();
    /// assert_eq!(out[0].data(), &[1.0, 1f64.exp()]);
    /// ```
    pub fn run_on(&self, backend: &Backend, inputs: &[&[f64]]) -> Result<Vec<Array>> {
        match &backend.0 {
            Inner::Cpu => self.run(inputs),
            #[cfg(feature = "cuda")]
            Inner::Cuda(gpu) => {
                self.check_inputs(inputs)?;
                let mut r = crate::cuda::run::DevRun::new(gpu, &self.g, inputs, false)?;
                r.run_outputs()?;
                r.check()?;
                self.g
                    .outputs
                    .iter()
                    .map(|&o| {
                        Ok(Array::new(
                            self.g.nodes[o as usize].shape.clone(),
                            r.download(o)?,
                        ))
                    })
                    .collect()
            }
        }
    }

    /// [`run_into`](Program::run_into) on `backend`: each output into the caller's buffer,
    /// whose memory a program run many times reuses (on the GPU: the copy back from the
    /// device goes into it, with no fresh pages to fault in).
    ///
    /// ```
    /// use adjoint_array::{Backend, Builder};
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let p = b.build(&[&x.map(|v| v + 1.0)]).unwrap();
    /// let mut out = vec![Vec::new()];
    /// p.run_on_into(&Backend::cpu(), &[&[1.0, 2.0]], &mut out).unwrap();
    /// assert_eq!(out[0], vec![2.0, 3.0]);
    /// ```
    pub fn run_on_into(
        &self,
        backend: &Backend,
        inputs: &[&[f64]],
        outputs: &mut [Vec<f64>],
    ) -> Result<()> {
        match &backend.0 {
            Inner::Cpu => self.run_into(inputs, outputs),
            #[cfg(feature = "cuda")]
            Inner::Cuda(gpu) => {
                self.check_inputs(inputs)?;
                if outputs.len() != self.g.outputs.len() {
                    return Err(Error::Invalid(format!(
                        "run_on_into: the program has {} outputs, {} buffers were given",
                        self.g.outputs.len(),
                        outputs.len()
                    )));
                }
                let mut r = crate::cuda::run::DevRun::new(gpu, &self.g, inputs, false)?;
                r.run_outputs()?;
                r.check()?;
                for (&o, buf) in self.g.outputs.iter().zip(outputs.iter_mut()) {
                    r.download_into(o, buf)?;
                }
                Ok(())
            }
        }
    }

    /// [`vjp`](Program::vjp) on `backend`.
    pub fn vjp_on(
        &self,
        backend: &Backend,
        inputs: &[&[f64]],
        seeds: &[&[f64]],
    ) -> Result<(Vec<Array>, Vec<Vec<f64>>)> {
        match &backend.0 {
            Inner::Cpu => self.vjp(inputs, seeds),
            #[cfg(feature = "cuda")]
            Inner::Cuda(gpu) => {
                self.check_inputs(inputs)?;
                self.check_seeds(seeds)?;
                let mut r = crate::cuda::run::DevRun::new(gpu, &self.g, inputs, true)?;
                let (outs, grads) = r.vjp(seeds)?;
                let outs = outs
                    .into_iter()
                    .zip(self.output_shapes())
                    .map(|(data, shape)| Array::new(shape, data))
                    .collect();
                Ok((outs, self.zero_filled(grads)))
            }
        }
    }

    /// [`gradient_a`](Program::gradient_a) (value and gradient of a program with one scalar
    /// output) on `backend`; see [`Backend`] for an example.
    pub fn gradient_on(&self, backend: &Backend, inputs: &[&[f64]]) -> Result<Gradient> {
        let shapes = self.output_shapes();
        if shapes.len() != 1 || !shapes[0].is_empty() {
            return Err(Error::NonScalarOutput(shapes));
        }
        let (outs, grads) = self.vjp_on(backend, inputs, &[&[1.0]])?;
        Ok(Gradient {
            value: outs[0].data()[0],
            grads,
        })
    }
}
