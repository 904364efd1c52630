//! Generated kernels on an NVIDIA GPU (feature `cuda`): `cudarc` loads the driver and NVRTC
//! at run time, so building needs no CUDA installation.
//!
//! What is checked everywhere is the generated code (`tests.rs` runs it as C on the CPU); this
//! file compiles it with NVRTC, caches the module by its source text, and launches it with one
//! thread per element. The tests that run it on a GPU are gated by `ADJOINT_CUDA_TESTS=1`
//! (first run on an H200 on 2026-11-26: BENCHMARKS.md).

use super::{kernel_source_layout, module_source, KernelSource, Roots, RUNTIME};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, CudaViewMut, DeviceRepr, LaunchArgs,
    LaunchConfig, PinnedHostSlice, PushKernelArg, ValidAsZeroBits,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

fn unavailable(why: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("CUDA backend unavailable: {why}"))
}

/// `ADJOINT_CUDA_PLAIN=1`: cudarc's defaults instead of this backend's shortcuts (arrays
/// cleared on allocation, per-allocation events, a memory pool that returns its memory at
/// each synchronisation), a switch for measuring what they save.
fn plain() -> bool {
    static PLAIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PLAIN.get_or_init(|| std::env::var("ADJOINT_CUDA_PLAIN").as_deref() == Ok("1"))
}

/// Let the device's default memory pool (which stream-ordered allocations come from) keep the
/// memory freed back to it instead of returning it to the driver at each synchronisation:
/// a gradient allocates and frees the same arrays (hundreds of MB at ADBench's 10k inputs)
/// every call. Best effort: a driver that refuses leaves the pool as it was.
fn keep_pool_memory(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: plain driver calls on the context's device, which `ctx` holds current on this
    // thread; `pool` is an out-parameter, and the threshold is read from a live `u64`.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let mut threshold = u64::MAX;
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast(),
            );
        }
    }
}

/// `ADJOINT_CUDA_PROFILE=1`: every launch is waited for and timed, per label
/// ([`Gpu::take_profile`], printed after each gradient on the GPU).
pub(crate) fn profile() -> bool {
    static PROFILE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROFILE.get_or_init(|| std::env::var("ADJOINT_CUDA_PROFILE").as_deref() == Ok("1"))
}

fn driver(e: cudarc::driver::DriverError) -> Error {
    Error::Invalid(format!("CUDA driver error: {e}"))
}

/// A GPU with its stream and the kernels compiled for it.
pub(crate) struct Gpu {
    stream: Arc<CudaStream>,
    /// page-locked host memory for large downloads (grown as needed)
    staging: Mutex<Option<PinnedHostSlice<f64>>>,
    /// `ADJOINT_CUDA_PROFILE=1`: the label of the launches being made, and per label the
    /// launches and seconds so far
    label: Mutex<String>,
    profile: Mutex<HashMap<String, (usize, f64)>>,
    /// compiled kernels by source text (and function name)
    kernels: Mutex<HashMap<(String, String), Arc<CudaFunction>>>,
}

/// Threads per block of every launch.
pub(crate) const BLOCK: u32 = 256;

/// What one launch of a kernel left on the device, before anything is read back.
pub(crate) struct Pending {
    /// the root arrays (one per root of `n`, or one of `n × roots`: [`Roots`])
    pub roots: Vec<CudaSlice<f64>>,
    /// per scatter: values and target offsets (−1: none; only where asked for), `n` each
    /// (a kernel whose contributions are not packed)
    pub contributions: Vec<(CudaSlice<f64>, Option<CudaSlice<i64>>)>,
    /// packed contributions ([`kernel_source_layout`](super::kernel_source_layout)): scatter
    /// `j`'s values at `cv[j·n ..]`, the indexed scatters' target offsets, in their order, at
    /// `ci[slot·n ..]`
    pub cv: Option<CudaSlice<f64>>,
    pub ci: Option<CudaSlice<i64>>,
    /// the scatter target (index into `Kernel::targets`) of each scatter
    pub scatters: Vec<usize>,
}

/// What one launch of a kernel left on the device.
#[cfg_attr(not(test), allow(dead_code))] // the GPU tests' view of a launch
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
        if !plain() {
            // SAFETY: the backend uses the context's default stream only, so nothing can be
            // freed, read or written on another stream while this one uses it: the events
            // cudarc records per allocation to order streams have nothing to order.
            unsafe { ctx.disable_event_tracking() };
            keep_pool_memory(&ctx);
        }
        Ok(Gpu {
            stream: ctx.default_stream(),
            staging: Mutex::new(None),
            label: Mutex::new(String::new()),
            profile: Mutex::new(HashMap::new()),
            kernels: Mutex::new(HashMap::new()),
        })
    }

    /// The compiled function of kernel `k` (NVRTC on first use, then cached).
    pub(crate) fn function(
        &self,
        k: &Kernel,
        roots: Roots,
        indexed: &dyn Fn(usize) -> bool,
        packed: bool,
    ) -> Result<(KernelSource, Arc<CudaFunction>)> {
        let ks = kernel_source_layout(k, "adj_kernel", roots, indexed, packed)?;
        let f = self.compiled(&ks.code, &ks.name)?;
        Ok((ks, f))
    }

    /// Function `name` of the module made of the prelude, the executor's fixed kernels and
    /// `code` (NVRTC on first use, then cached by text and name).
    pub(crate) fn compiled(&self, code: &str, name: &str) -> Result<Arc<CudaFunction>> {
        let key = (code.to_string(), name.to_string());
        if let Some(f) = self.kernels.lock().expect("kernel cache").get(&key) {
            return Ok(f.clone());
        }
        let opts = CompileOptions {
            // no fused multiply-adds: the GPU computes the IEEE operations the CPU does
            fmad: Some(false),
            options: vec!["--std=c++17".into()],
            ..Default::default()
        };
        let mut src = module_source(&[]);
        src.push_str(RUNTIME);
        src.push('\n');
        src.push_str(code);
        let ptx = compile_ptx_with_opts(src, opts)
            .map_err(|e| Error::Invalid(format!("NVRTC could not compile a kernel: {e:?}")))?;
        let module = self.stream.context().load_module(ptx).map_err(driver)?;
        let f = Arc::new(module.load_function(name).map_err(driver)?);
        self.kernels
            .lock()
            .expect("kernel cache")
            .insert(key, f.clone());
        Ok(f)
    }

    /// One of the executor's fixed kernels (`runtime.cuh`).
    pub(crate) fn runtime(&self, name: &str) -> Result<Arc<CudaFunction>> {
        self.compiled("", name)
    }

    /// A device array of `len` elements (at least one) for a kernel to write in full: not
    /// cleared, unless `ADJOINT_CUDA_PLAIN=1` (a measurement switch: clearing costs one
    /// memset per array, of which a gradient makes dozens).
    ///
    /// # Safety
    /// Every element must be written before it is read.
    pub(crate) unsafe fn written<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        if plain() {
            return self.zeros(len);
        }
        // SAFETY: the caller writes every element before reading it (this function's contract).
        unsafe { self.stream.alloc::<T>(len.max(1)) }.map_err(driver)
    }

    /// A zeroed device array of `len` elements (at least one, as CUDA allocates).
    pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros::<T>(len.max(1)).map_err(driver)
    }

    /// Launch `f` over `*n` elements (one thread each, in blocks of 256) with the arguments
    /// `args` pushes after `n`.
    ///
    /// # Safety
    /// `args` must push exactly the arguments the kernel declares after its element count, of
    /// the declared types, with every array long enough for what threads `< n` access.
    pub(crate) unsafe fn launch_n<'a>(
        &'a self,
        f: &'a CudaFunction,
        n: &'a u64,
        args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<()> {
        // SAFETY: as this function's contract: `n` elements, one thread each.
        unsafe { self.launch_grid(f, n, (*n as usize).div_ceil(BLOCK as usize), args) }
    }

    /// Launch block-level kernel `f` (`adj_matmul_tiled`) as `*n` blocks of 256 threads
    /// (`ADJ_TILE_THREADS`, which a test compares with [`BLOCK`]), with the arguments `args`
    /// pushes after `n`.
    ///
    /// # Safety
    /// As [`Gpu::launch_n`], for what blocks `< n` access.
    pub(crate) unsafe fn launch_blocks<'a>(
        &'a self,
        f: &'a CudaFunction,
        n: &'a u64,
        args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<()> {
        // SAFETY: as this function's contract: `n` blocks.
        unsafe { self.launch_grid(f, n, *n as usize, args) }
    }

    /// `f(n, args…)` as `blocks` blocks of [`BLOCK`] threads.
    ///
    /// # Safety
    /// As [`Gpu::launch_n`].
    unsafe fn launch_grid<'a>(
        &'a self,
        f: &'a CudaFunction,
        n: &'a u64,
        blocks: usize,
        args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<()> {
        if *n == 0 {
            return Ok(());
        }
        let mut b = self.stream.launch_builder(f);
        b.arg(n);
        args(&mut b);
        let blocks = u32::try_from(blocks).map_err(|_| {
            Error::Invalid(format!("a CUDA launch of {blocks} blocks is too large"))
        })?;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let profiling = profile();
        let start = profiling
            .then(|| self.stream.synchronize().map(|_| std::time::Instant::now()))
            .transpose()
            .map_err(driver)?;
        // SAFETY: the caller guarantees the arguments (this function's contract).
        unsafe { b.launch(cfg) }.map_err(driver)?;
        if let Some(start) = start {
            self.stream.synchronize().map_err(driver)?;
            let label = self.label.lock().expect("label").clone();
            let mut prof = self.profile.lock().expect("profile");
            let e = prof.entry(label).or_insert((0, 0.0));
            e.0 += 1;
            e.1 += start.elapsed().as_secs_f64();
        }
        Ok(())
    }

    /// Name the launches that follow in the profile (`ADJOINT_CUDA_PROFILE=1`).
    pub(crate) fn label(&self, what: impl FnOnce() -> String) {
        if profile() {
            *self.label.lock().expect("label") = what();
        }
    }

    /// The profile so far (`ADJOINT_CUDA_PROFILE=1`: each launch waited for and timed),
    /// largest total first, and cleared.
    pub(crate) fn take_profile(&self) -> String {
        let mut v: Vec<(String, (usize, f64))> =
            self.profile.lock().expect("profile").drain().collect();
        v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        let total: f64 = v.iter().map(|x| x.1 .1).sum();
        let mut out = format!("CUDA profile: {:.1} µs in launches\n", total * 1e6);
        for (label, (count, secs)) in v {
            out += &format!("  {:>9.1} µs  {count:>4} × {label}\n", secs * 1e6);
        }
        out
    }

    /// Copy host values of any device type to the device (at least one element).
    pub(crate) fn upload_of<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        data: &[T],
    ) -> Result<CudaSlice<T>> {
        if data.is_empty() {
            return self.zeros(1);
        }
        self.stream.clone_htod(data).map_err(driver)
    }

    /// Copy host data to the device.
    pub(crate) fn upload(&self, data: &[f64]) -> Result<CudaSlice<f64>> {
        if data.is_empty() {
            return self.stream.alloc_zeros(1).map_err(driver);
        }
        self.stream.clone_htod(data).map_err(driver)
    }

    /// The first `len` values of `src` into `out` (resized to `len`, its memory reused): large
    /// arrays through page-locked memory (a copy from the GPU into pageable memory runs at a
    /// fraction of the bus's speed), then into `out` on all cores.
    pub(crate) fn download_into(
        &self,
        src: &CudaSlice<f64>,
        len: usize,
        out: &mut Vec<f64>,
    ) -> Result<()> {
        use rayon::prelude::*;
        out.resize(len, 0.0);
        if len == 0 {
            return Ok(());
        }
        let src = src.slice(..len);
        if len < 1 << 16 {
            self.stream
                .memcpy_dtoh(&src, &mut out[..])
                .map_err(driver)?;
            return self.stream.synchronize().map_err(driver);
        }
        let mut staging = self.staging.lock().expect("staging buffer");
        if staging.as_ref().is_none_or(|s| s.len() < len) {
            *staging = None;
            // SAFETY: page-locked host memory (flags 0: cached, not write-combined, so the CPU
            // reads it at full speed), unset until the copy below writes its first `len`
            // values, which are all that is read.
            let fresh = unsafe { self.stream.context().alloc_pinned_with_flags::<f64>(len, 0) };
            *staging = Some(fresh.map_err(driver)?);
        }
        let pinned = staging.as_mut().expect("allocated above");
        // Into the buffer's first `len` values only: cudarc copies as many bytes as its
        // destination holds, so a buffer grown by an earlier, larger download made the copy read
        // past the end of `src` (CUDA_ERROR_INVALID_VALUE, found on 2026-11-27: a GMM gradient
        // of 209 625 values after one of 214 500). Only those `len` values are read below.
        let host = &mut pinned.as_mut_slice().map_err(driver)?[..len];
        self.stream.memcpy_dtoh(&src, host).map_err(driver)?;
        // Wait for the copy: the pinned buffer's event, which `as_slice` would wait on, is
        // recorded only for contexts cudarc manages with several streams, so on this
        // single-stream context it would not wait for the copy to end (found on 2026-11-26: BA
        // Jacobians read back this way had zeros past the first 64Ki values).
        self.stream.synchronize().map_err(driver)?;
        let host = &*host;
        out.par_chunks_mut(1 << 16)
            .zip(host.par_chunks(1 << 16))
            .for_each(|(o, h)| o.copy_from_slice(h));
        Ok(())
    }

    /// The first `len` values of each array, read back with one copy (they are gathered into
    /// one device array first): one wait for the GPU instead of one per array.
    pub(crate) fn download_many(
        &self,
        parts: &[(Arc<CudaSlice<f64>>, usize)],
    ) -> Result<Vec<Vec<f64>>> {
        let total: usize = parts.iter().map(|p| p.1).sum();
        // SAFETY: the copies below write all `total` elements before the download reads them.
        let mut pack = unsafe { self.written::<f64>(total) }?;
        let mut at = 0;
        for (src, len) in parts {
            if *len > 0 {
                let mut dst = pack.slice_mut(at..at + len);
                self.stream
                    .memcpy_dtod(&src.slice(..*len), &mut dst)
                    .map_err(driver)?;
            }
            at += len;
        }
        let mut host = Vec::new();
        self.download_into(&pack, total, &mut host)?;
        let mut out = Vec::with_capacity(parts.len());
        let mut at = 0;
        for (_, len) in parts {
            out.push(host[at..at + len].to_vec());
            at += len;
        }
        Ok(out)
    }

    /// Copy device data to the host.
    pub(crate) fn download<T: cudarc::driver::DeviceRepr + Default + Clone>(
        &self,
        data: &CudaSlice<T>,
    ) -> Result<Vec<T>> {
        self.stream.clone_dtoh(data).map_err(driver)
    }

    /// Run kernel `k`, compiled before ([`Gpu::function`]: `ks`, `f`), over its whole space:
    /// `params` hold `n` values each, `arrays` the arrays it reads (both in the kernel's order).
    /// Nothing is read back: the smallest element whose index was out of bounds goes to the
    /// one-element `bad` (an integer minimum with what it holds), which stays on the device
    /// until the caller checks it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_compiled(
        &self,
        ks: &KernelSource,
        f: &CudaFunction,
        k: &Kernel,
        roots: Roots,
        params: &[&CudaSlice<f64>],
        arrays: &[&CudaSlice<f64>],
        bad: &mut CudaViewMut<'_, u64>,
    ) -> Result<Pending> {
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
        let root_len = match roots {
            Roots::Separate => n,
            Roots::Interleaved => n * k.roots.len(),
        };
        // SAFETY (of the `written` allocations): the kernel writes every element `e < n` of
        // each root array (all of an interleaved one's `n × roots`) and of each contribution
        // array, whatever its data (a guarded scatter writes 0 and −1), before anything reads
        // them; a kernel over no elements leaves them unread.
        let mut root_arrays = Vec::with_capacity(ks.roots);
        for _ in 0..ks.roots {
            root_arrays.push(unsafe { self.written::<f64>(root_len) }?);
        }
        let mut contributions = Vec::new();
        let (mut cv, mut ci) = (None, None);
        if ks.packed {
            let nidx = ks.indexed.iter().filter(|&&x| x).count();
            if !ks.scatters.is_empty() {
                cv = Some(unsafe { self.written::<f64>(n * ks.scatters.len()) }?);
            }
            if nidx > 0 {
                ci = Some(unsafe { self.written::<i64>(n * nidx) }?);
            }
        } else {
            for &with_index in &ks.indexed {
                let v = unsafe { self.written::<f64>(n) }?;
                let i = if with_index {
                    Some(unsafe { self.written::<i64>(n) }?)
                } else {
                    None
                };
                contributions.push((v, i));
            }
        }
        if bad.len() != 1 {
            return Err(Error::Invalid(
                "a CUDA kernel's bad-index flag is one element".into(),
            ));
        }
        // SAFETY: the arguments match the generated signature one for one (`kernel_source`
        // documents it; the counts were checked above): `ks.params` parameter arrays and the
        // read arrays as given (each parameter holds `n` values: the caller's contract), the
        // root arrays (`n` elements each, or `n × roots` interleaved) and the contribution
        // arrays (per scatter `n` values and, where indexed, `n` offsets; packed: `n` per
        // scatter in `cv`, `n` per indexed scatter in `ci`; a thread writes only its own
        // elements, threads `≥ n` return at once), and the one-element `bad` flag. Gathers
        // stay inside the arrays: an offset out of bounds is replaced by 0 before the load.
        let n64 = n as u64;
        unsafe {
            self.launch_n(f, &n64, |b| {
                for p in &params[..ks.params] {
                    b.arg(*p);
                }
                for a in arrays {
                    b.arg(*a);
                }
                for r in root_arrays.iter_mut() {
                    b.arg(r);
                }
                for (v, i) in contributions.iter_mut() {
                    b.arg(v);
                    if let Some(i) = i {
                        b.arg(i);
                    }
                }
                if let Some(cv) = cv.as_mut() {
                    b.arg(cv);
                }
                if let Some(ci) = ci.as_mut() {
                    b.arg(ci);
                }
                b.arg(bad);
            })?;
        }
        Ok(Pending {
            roots: root_arrays,
            contributions,
            cv,
            ci,
            scatters: ks.scatters.clone(),
        })
    }

    /// Compile and run kernel `k` with separate roots and every scatter indexed, its
    /// bad-index flag read back (the tests' view of one launch).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn launch(
        &self,
        k: &Kernel,
        params: &[&CudaSlice<f64>],
        arrays: &[&CudaSlice<f64>],
    ) -> Result<Launched> {
        let mut flag = self.stream.clone_htod(&[u64::MAX]).map_err(driver)?;
        let (ks, f) = self.function(k, Roots::Separate, &|_| true, false)?;
        let p = self.launch_compiled(
            &ks,
            &f,
            k,
            Roots::Separate,
            params,
            arrays,
            &mut flag.slice_mut(..),
        )?;
        let bad = self.download(&flag)?[0];
        Ok(Launched {
            roots: p.roots,
            contributions: p
                .contributions
                .into_iter()
                .map(|(v, i)| (v, i.expect("every scatter indexed")))
                .collect(),
            bad: (bad != u64::MAX).then_some(bad),
        })
    }
}
