//! Generated kernels on an NVIDIA GPU (feature `cuda`): `cudarc` loads the driver and NVRTC
//! at run time, so building needs no CUDA installation.
//!
//! **Not yet run on a GPU**: no device was lent to the sessions that wrote this. What is
//! checked everywhere is the generated code (`tests.rs` runs it as C on the CPU); this file
//! compiles it with NVRTC, caches the module by its source text, and launches it with one
//! thread per element. The tests that run it on a GPU are gated by `ADJOINT_CUDA_TESTS=1`.

use super::{kernel_source, module_source, KernelSource};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

fn unavailable(why: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("CUDA backend unavailable: {why}"))
}

fn driver(e: cudarc::driver::DriverError) -> Error {
    Error::Invalid(format!("CUDA driver error: {e}"))
}

/// A GPU with its stream and the kernels compiled for it.
pub(crate) struct Gpu {
    stream: Arc<CudaStream>,
    /// compiled kernels by source text
    kernels: Mutex<HashMap<String, Arc<CudaFunction>>>,
}

/// What one launch of a kernel left on the device.
pub(crate) struct Launched {
    /// one array of `n` per root
    pub roots: Vec<CudaSlice<f64>>,
    /// per scatter: values and target offsets (−1: none), `n` each
    pub contributions: Vec<(CudaSlice<f64>, CudaSlice<i64>)>,
    /// the smallest element whose index was out of bounds, if any
    pub bad: Option<u64>,
}

impl Gpu {
    /// Device 0, or a clear error when there is no driver, no NVRTC or no device. cudarc
    /// panics when a library is missing, so the libraries are probed first and the rest runs
    /// under `catch_unwind`.
    pub(crate) fn new() -> Result<Gpu> {
        // SAFETY: the probes only try to load the shared libraries (running their
        // initialisers, as any use of CUDA does) and drop them; nothing is called through them.
        let (cuda, nvrtc) = unsafe {
            (
                cudarc::driver::sys::is_culib_present(),
                cudarc::nvrtc::sys::is_culib_present(),
            )
        };
        if !cuda {
            return Err(unavailable(
                "the CUDA driver library (libcuda) was not found",
            ));
        }
        if !nvrtc {
            return Err(unavailable("NVRTC (libnvrtc) was not found"));
        }
        let ctx = std::panic::catch_unwind(|| CudaContext::new(0))
            .map_err(|_| unavailable("the CUDA driver failed to start"))?
            .map_err(|e| unavailable(format!("no usable device 0 ({e})")))?;
        Ok(Gpu {
            stream: ctx.default_stream(),
            kernels: Mutex::new(HashMap::new()),
        })
    }

    /// The compiled function of kernel `k` (NVRTC on first use, then cached).
    fn function(&self, k: &Kernel) -> Result<(KernelSource, Arc<CudaFunction>)> {
        let ks = kernel_source(k, "adj_kernel")?;
        let mut cache = self.kernels.lock().expect("kernel cache");
        if let Some(f) = cache.get(&ks.code) {
            return Ok((ks, f.clone()));
        }
        let opts = CompileOptions {
            // no fused multiply-adds: the GPU computes the IEEE operations the CPU does
            fmad: Some(false),
            options: vec!["--std=c++17".into()],
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(module_source(std::slice::from_ref(&ks)), opts)
            .map_err(|e| Error::Invalid(format!("NVRTC could not compile a kernel: {e:?}")))?;
        let module = self.stream.context().load_module(ptx).map_err(driver)?;
        let f = Arc::new(module.load_function(&ks.name).map_err(driver)?);
        cache.insert(ks.code.clone(), f.clone());
        Ok((ks, f))
    }

    /// Copy host data to the device.
    pub(crate) fn upload(&self, data: &[f64]) -> Result<CudaSlice<f64>> {
        if data.is_empty() {
            return self.stream.alloc_zeros(1).map_err(driver);
        }
        self.stream.clone_htod(data).map_err(driver)
    }

    /// Copy device data to the host.
    pub(crate) fn download<T: cudarc::driver::DeviceRepr + Default + Clone>(
        &self,
        data: &CudaSlice<T>,
    ) -> Result<Vec<T>> {
        self.stream.clone_dtoh(data).map_err(driver)
    }

    /// Run kernel `k` over its whole space: `params` hold `n` values each, `arrays` the arrays
    /// it reads (both in the kernel's order).
    pub(crate) fn launch(
        &self,
        k: &Kernel,
        params: &[&CudaSlice<f64>],
        arrays: &[&CudaSlice<f64>],
    ) -> Result<Launched> {
        let (ks, f) = self.function(k)?;
        let n: usize = k.space.iter().product();
        if params.len() < ks.params || arrays.len() != ks.arrays {
            return Err(Error::Invalid(format!(
                "a CUDA kernel needs {} parameters and {} arrays, got {} and {}",
                ks.params,
                ks.arrays,
                params.len(),
                arrays.len()
            )));
        }
        let len = n.max(1);
        let mut roots = Vec::with_capacity(ks.roots);
        for _ in 0..ks.roots {
            roots.push(self.stream.alloc_zeros::<f64>(len).map_err(driver)?);
        }
        let mut contributions = Vec::with_capacity(ks.scatters.len());
        for _ in &ks.scatters {
            contributions.push((
                self.stream.alloc_zeros::<f64>(len).map_err(driver)?,
                self.stream.alloc_zeros::<i64>(len).map_err(driver)?,
            ));
        }
        let mut bad = self.stream.clone_htod(&[u64::MAX]).map_err(driver)?;
        if n > 0 {
            let n64 = n as u64;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&n64);
            for p in &params[..ks.params] {
                b.arg(*p);
            }
            for a in arrays {
                b.arg(*a);
            }
            for r in roots.iter_mut() {
                b.arg(r);
            }
            for (v, i) in contributions.iter_mut() {
                b.arg(v);
                b.arg(i);
            }
            b.arg(&mut bad);
            let threads = 256u32;
            let blocks = u32::try_from(n.div_ceil(threads as usize)).map_err(|_| {
                Error::Invalid(format!("a CUDA kernel over {n} elements is too large"))
            })?;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments match the generated signature one for one (`kernel_source`
            // documents it; the counts were checked above): `n`, `ks.params` parameter arrays
            // and the read arrays as uploaded, `ks.roots` root arrays and two contribution
            // arrays per scatter of `n` elements each (a thread writes only its own element,
            // threads `≥ n` return at once), and the one-element `bad` flag. Gathers stay
            // inside the arrays: an offset out of bounds is replaced by 0 before the load.
            unsafe { b.launch(cfg) }.map_err(driver)?;
        }
        let bad = self.download(&bad)?[0];
        Ok(Launched {
            roots,
            contributions,
            bad: (bad != u64::MAX).then_some(bad),
        })
    }
}
