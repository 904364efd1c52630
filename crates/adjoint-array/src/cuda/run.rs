//! A whole program on the GPU (feature `cuda`): the primal pass and the reverse pass of
//! `exec.rs`, over arrays that stay on the device. Inputs are uploaded once per call and only
//! the outputs and the gradients are read back.
//!
//! Every node runs as the CPU backend runs it, from the same kernels (`Kernel`s, printed as CUDA
//! C by [`kernel_source_layout`](super::kernel_source_layout)) and the same adjoint kernels
//! ([`gen_adjoint`], [`sumgen_adjoint`]):
//!
//! - `generate`/`map`/`zip_with` (`Gen`): one launch of its kernel, one thread per element;
//!   several results are stored interleaved, as the CPU stores them;
//! - sums and folds with `+ × max min` (`Sum`, `SumGen`, `Fold`): a thread per row (per part of
//!   a long row, then a thread per row over the parts), left to right;
//! - `matmul`: a thread per 4 × 4 block of the product, each element's sum in the order of the
//!   inner index;
//! - the reverse pass: adjoint kernels as on the CPU; an indexed read's adjoint (a scatter) is
//!   combined by a kernel made for it ([`combine_source`]) with one thread per target element,
//!   when its index is affine and one-to-one in the axes it uses; added where it lands when no
//!   two contributions meet ([`direct_offsets`] for affine indices with many scatters,
//!   [`static_offsets`] for index arithmetic on the position, as GMM's triangular read of
//!   `icf`); by a scanning kernel ([`scan_combine_source`]) for indices that depend on data, and
//!   on the host past that kernel's bound.
//!
//! Nothing adds floating-point values in an order that depends on scheduling, so a gradient is
//! bit-identical from run to run.
//!
//! The other nodes run on the host, inside the GPU program (`placement`): `scan`, `scan_n`,
//! `permute`, `awhile` and folds with a general step, an initial value or reads run both
//! passes there (the values they read are read back into a CPU run, `exec::Exec`, which
//! computes them with the CPU backend's code, keeps what their reverse pass reads, and whose
//! `exec::node_adjoint` gives what their adjoint sends to the nodes they read: uploaded and
//! added on the GPU); folds with `× max min` run their primal pass on the GPU and their reverse
//! pass on the host; `acond` evaluates its condition on the host and runs the branch it takes
//! on the GPU. Each such node costs a read-back and an upload: correct everywhere, fast where
//! the GPU runs the nodes that carry the work. `f32` arrays are refused with an error.

use super::device::{Gpu, Pending};
use super::{
    affine_target, combine_source, direct_offsets, scan_combine_source, static_offsets, Roots,
    CHUNK, SPLIT_SUM,
};
use crate::error::{Error, Result};
use crate::exec::{
    gen_adjoint, gen_own, node_adjoint, primal_kernel, sumgen_adjoint, Exec, LoopSeeds, Val,
    AUX_BC, AUX_DENSE,
};
use crate::graph::{ANode, DType, Graph, NodeId};
use crate::kernel::{Kernel, ParamSrc};
use adjoint_core::rules::Op2;
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use std::cell::RefCell;
use std::sync::Arc;

/// A device array shared between nodes (a reshape is its source's array).
type Dev = Arc<CudaSlice<f64>>;

/// The most comparisons (target elements × kernel elements × scatters) a scanning combine
/// ([`scan_combine_source`]) may make; above it a non-affine scatter is combined on the host.
const SCAN_COMBINE_MAX: u128 = 1 << 32;

/// `ADJOINT_CUDA_MATMUL=simple`: matrix products by the earlier kernel, a thread per 4 × 4
/// block (`adj_matmul`, `adj_matmul_parts`), to measure what the tiles save.
fn simple_matmul() -> bool {
    static SIMPLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SIMPLE.get_or_init(|| std::env::var("ADJOINT_CUDA_MATMUL").as_deref() == Ok("simple"))
}

/// How `adj_matmul_tiled` computes a `rows × inner` by `inner × cols` product: its tiles, and
/// the parts of `chunk` inner indices each tile's sums are split into (one part of all of them
/// unless the tiles are fewer than [`BUSY_BLOCKS`] and the inner dimension is longer than
/// [`SPLIT_SUM`]; parts of at least [`CHUNK`]; no tiles, no parts: an empty product). Shapes
/// alone decide, so results are the same on every run.
pub(super) fn tiled_plan(rows: usize, cols: usize, inner: usize) -> (usize, usize, usize) {
    let tiles = rows.div_ceil(TM) * cols.div_ceil(TM);
    if inner <= SPLIT_SUM || tiles == 0 || tiles >= BUSY_BLOCKS {
        return (tiles, 1, inner);
    }
    let chunk = inner.div_ceil((BUSY_BLOCKS / tiles).min(inner / CHUNK).max(1));
    (tiles, inner.div_ceil(chunk), chunk)
}

/// How the contributions to one scatter target are combined ([`DevRun::apply_adjoint`]).
enum Comb {
    /// each added where it lands (`adj_scatter_direct`, with the offsets)
    Direct(Arc<CudaFunction>, Arc<CudaSlice<i64>>),
    /// a combining kernel (`combine_source` or `scan_combine_source`), its parts, and
    /// whether it reads target offsets
    Kernel(Arc<CudaFunction>, usize, bool),
    /// on the host (past the scanning kernel's bound)
    Host,
}

/// Affine targets with at least this many scatters whose contributions land on distinct
/// elements are combined by adding each where it lands (ADBench GMM's regularisation term at
/// d = 64 read 2080 `icf` elements per component), up to this many contributions; so are
/// targets whose indices are position-only arithmetic ([`static_offsets`]) with any number of
/// scatters (the scanning kernel they took instead makes target × kernel elements comparisons:
/// GMM's triangular read of `icf` at d = 64 was past its bound and combined on the host).
const DIRECT_MIN_SCATTERS: usize = 16;
const DIRECT_MAX: usize = 1 << 26;

/// The side of the block of a matrix product each thread computes (`ADJ_MM` in
/// `runtime.cuh`).
const MM: usize = 4;

/// The side of the tile of a matrix product each block of threads computes (`ADJ_TM` in
/// `runtime.cuh`).
pub(super) const TM: usize = 64;

/// Blocks that keep a GPU busy (two per multiprocessor of an H100, which has 132): a matrix
/// product with fewer tiles than this splits a long inner dimension into parts.
const BUSY_BLOCKS: usize = 264;

/// The slot of each of kernel `k`'s scatters among its indexed ones (their order in the
/// packed `ci`; affine targets' scatters are not indexed), the scatters' targets being
/// `scatters`.
fn index_slots(scatters: &[usize], k: &Kernel) -> Vec<usize> {
    let affine: Vec<bool> = (0..k.targets.len()).map(|t| affine_target(k, t)).collect();
    let mut next = 0;
    scatters
        .iter()
        .map(|&t| {
            let slot = next;
            next += usize::from(!affine[t]);
            slot
        })
        .collect()
}

/// Roles of a node's kernels in the graph's device cache: its primal kernel, its adjoint
/// kernels (`+ mode`), their combining kernels (`+ ROLE_COMBINE`, per target) and their
/// scatters' slots in the packed target offsets (`+ ROLE_SLOTS`).
const ROLE_PRIMAL: u32 = 0;
const ROLE_ADJOINT: u32 = 1;
const ROLE_COMBINE: u32 = 16;
const ROLE_SLOTS: u32 = 32;

/// Rows longer than this are folded in parts of [`PART`] elements, then over the parts.
const SPLIT: usize = 2048;
const PART: usize = 256;

fn unsupported(what: &str) -> Error {
    Error::Invalid(format!(
        "the CUDA backend does not support {what} yet; run this program on the CPU backend"
    ))
}

fn node_name(k: &ANode) -> &'static str {
    match k {
        ANode::Input { .. } => "input",
        ANode::Use(_) => "constant",
        ANode::Gen { .. } => "generate",
        ANode::SumGen { .. } => "sum of generate",
        ANode::Sum { .. } => "sum",
        ANode::Fold { .. } => "fold",
        ANode::Scan { .. } => "scan",
        ANode::Permute { .. } => "permute",
        ANode::ScanN { .. } => "scan_n",
        ANode::Reshape { .. } => "reshape",
        ANode::StopGrad { .. } => "stop_gradient",
        ANode::Acond { .. } => "acond",
        ANode::Awhile { .. } => "awhile",
        ANode::Proj { .. } => "awhile's results",
        ANode::MatMul { .. } => "matmul",
    }
}

/// A row-major matrix view of a device array (`(i, j)` at `i·rs + j·cs`).
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a CudaSlice<f64>,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> View<'a> {
    fn new(data: &'a CudaSlice<f64>, rows: usize, cols: usize) -> Self {
        View {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }
    fn t(self) -> Self {
        View {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// The adjoints of the reverse pass: dense ones, and broadcast ones (one value per row of the
/// last axis) expanded only when a node needs its adjoint whole.
struct Adj {
    dense: Vec<Option<CudaSlice<f64>>>,
    bc: Vec<Option<CudaSlice<f64>>>,
}

/// One run of a graph on the GPU.
pub(crate) struct DevRun<'g> {
    gpu: &'g Gpu,
    g: &'g Graph,
    inputs: &'g [&'g [f64]],
    vals: Vec<Option<Dev>>,
    /// per node, the smallest element of its kernels whose index was out of bounds
    /// (`u64::MAX`: none), read back once at the end ([`DevRun::check`])
    flags: RefCell<CudaSlice<u64>>,
    /// The nodes the GPU does not run (`Where`), run on the host by the CPU backend's code
    /// from their operands' values read back; it keeps what their reverse pass reads.
    host: RefCell<Exec<'g>>,
    /// per `acond` node, whether it took its `then` branch
    taken: Vec<bool>,
}

/// Where a node's primal and reverse passes run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    /// both on the GPU
    Gpu,
    /// the primal pass on the GPU, the reverse pass on the host (folds with `×`, `max`, `min`)
    GpuThenHost,
    /// both on the host: `scan`, `scan_n`, `permute`, `awhile` (and its results), folds with a
    /// general step, an initial value or reads
    Host,
}

fn placement(k: &ANode) -> Where {
    match k {
        ANode::Fold { f, init: None, .. } if f.reads().is_empty() => match f.as_binop() {
            Some(Op2::Add) => Where::Gpu,
            Some(Op2::Mul | Op2::Max | Op2::Min) => Where::GpuThenHost,
            _ => Where::Host,
        },
        ANode::Fold { .. }
        | ANode::Scan { .. }
        | ANode::ScanN { .. }
        | ANode::Permute { .. }
        | ANode::Awhile { .. }
        | ANode::Proj { .. } => Where::Host,
        _ => Where::Gpu,
    }
}

fn len_of(g: &Graph, n: NodeId) -> usize {
    g.nodes[n as usize].shape.iter().product()
}

impl<'g> DevRun<'g> {
    /// A run of `g` on `inputs`; `record`: keep what a reverse pass reads (a gradient's run).
    pub(crate) fn new(
        gpu: &'g Gpu,
        g: &'g Graph,
        inputs: &'g [&'g [f64]],
        record: bool,
    ) -> Result<Self> {
        let n = g.nodes.len();
        let host_inputs = inputs.iter().map(|x| Val::B(x)).collect();
        Ok(DevRun {
            gpu,
            g,
            inputs,
            vals: vec![None; n],
            flags: RefCell::new(gpu.upload_of(&vec![u64::MAX; n])?),
            host: RefCell::new(Exec::new(g, host_inputs, record)),
            taken: vec![false; n],
        })
    }

    /// Give the host the values of `nodes` (computed on the GPU, read back; inputs from the
    /// caller's slices) unless it has them.
    fn to_host(&self, nodes: &[NodeId]) -> Result<()> {
        for &d in nodes {
            if self.host.borrow().computed(d) {
                continue;
            }
            if let ANode::Input { .. } = self.g.nodes[d as usize].kind {
                self.host.borrow_mut().force(d)?;
                continue;
            }
            let v = self.download(d)?;
            self.host.borrow_mut().import(d, v);
        }
        Ok(())
    }

    /// The arrays node `i` reads: its operands and the arrays its lambdas read.
    fn deps(&self, i: NodeId) -> Vec<NodeId> {
        let k = &self.g.nodes[i as usize].kind;
        let mut d = k.operands();
        d.extend(k.reads());
        d
    }

    /// Compute every output.
    pub(crate) fn run_outputs(&mut self) -> Result<()> {
        for &o in &self.g.outputs {
            self.force(o)?;
        }
        Ok(())
    }

    /// Node `n`'s value, read back.
    pub(crate) fn download(&self, n: NodeId) -> Result<Vec<f64>> {
        let mut out = Vec::new();
        self.download_into(n, &mut out)?;
        Ok(out)
    }

    /// Node `n`'s value, read back into `out` (its memory reused).
    pub(crate) fn download_into(&self, n: NodeId, out: &mut Vec<f64>) -> Result<()> {
        let v = self.vals[n as usize].as_ref().expect("computed");
        self.gpu.download_into(v, len_of(self.g, n), out)
    }

    /// Whether some kernel read out of bounds: an error naming the first such node and the
    /// smallest bad element of its kernels (the CPU backend's error names the index and the
    /// shape; the message says to run there for them).
    pub(crate) fn check(&self) -> Result<()> {
        let flags = self.gpu.download(&self.flags.borrow())?;
        if let Some((node, &e)) = flags.iter().enumerate().find(|(_, &f)| f != u64::MAX) {
            let k = &self.g.nodes[node].kind;
            return Err(Error::Invalid(format!(
                "an index out of bounds on the GPU: element {e} of node {node} ({}); run the \
                 program on the CPU backend for the index and shape",
                node_name(k)
            )));
        }
        Ok(())
    }

    fn value(&self, n: NodeId) -> Result<Dev> {
        self.vals[n as usize]
            .clone()
            .ok_or_else(|| Error::Invalid(format!("CUDA backend: node {n} used before computed")))
    }

    fn force_reads(&mut self, reads: &[NodeId]) -> Result<()> {
        for &r in reads {
            self.force(r)?;
        }
        Ok(())
    }

    /// Launch kernel `k` for node `i`: parameters from `caller` and arrays, arrays by key
    /// (`aux` first, for the reverse pass's seeds).
    ///
    /// The kernel is compiled once per graph, node and `role` (the primal kernel, an adjoint
    /// kernel's mode), then kept in the graph's device cache with its source's description.
    fn launch(
        &self,
        i: NodeId,
        role: u32,
        k: &Kernel,
        roots: Roots,
        caller: &[Dev],
        aux: &dyn Fn(u32) -> Option<Dev>,
    ) -> Result<Pending> {
        let get = |key: u32| -> Result<Dev> {
            match aux(key) {
                Some(v) => Ok(v),
                None => self.value(key),
            }
        };
        let params: Vec<Dev> = k
            .params
            .iter()
            .map(|p| match p {
                ParamSrc::Caller(j) => Ok(caller[*j as usize].clone()),
                ParamSrc::Array(key) => get(*key),
            })
            .collect::<Result<_>>()?;
        let arrays: Vec<Dev> = k
            .arrays
            .iter()
            .map(|&key| get(key))
            .collect::<Result<_>>()?;
        let pr: Vec<&CudaSlice<f64>> = params.iter().map(|a| &**a).collect();
        let ar: Vec<&CudaSlice<f64>> = arrays.iter().map(|a| &**a).collect();
        let compiled = self.g.device.get_or_make((i, role, u32::MAX), || {
            // target offsets only for the scatters that no affine combining kernel takes
            let indexed = |t: usize| !affine_target(k, t);
            self.gpu.function(k, roots, &indexed, true)
        })?;
        let (ks, f) = &*compiled;
        self.gpu.label(|| {
            let what = if role == ROLE_PRIMAL {
                "kernel"
            } else {
                "adjoint kernel"
            };
            format!(
                "{what} of node {i} ({}, {:?}, {} scatters)",
                node_name(&self.g.nodes[i as usize].kind),
                k.space,
                ks.scatters.len()
            )
        });
        let mut flags = self.flags.borrow_mut();
        let mut flag = flags.slice_mut(i as usize..i as usize + 1);
        self.gpu
            .launch_compiled(ks, f, k, roots, &pr, &ar, &mut flag)
    }

    /// Compute node `i` (and, first, what it needs).
    fn force(&mut self, i: NodeId) -> Result<()> {
        // first what it needs, in node order (as the CPU executor: see
        // `Graph::needed_in_order`), so that the recursion does not follow the chain of arrays
        for n in self
            .g
            .needed_in_order(i, |d| self.vals[d as usize].is_some())
        {
            self.force_node(n)?;
        }
        Ok(())
    }

    fn force_node(&mut self, i: NodeId) -> Result<()> {
        if self.vals[i as usize].is_some() {
            return Ok(());
        }
        let g = self.g;
        let info = &g.nodes[i as usize];
        if info.dtype == DType::F32 {
            return Err(unsupported("f32 arrays"));
        }
        let total = len_of(g, i);
        if placement(&info.kind) == Where::Host {
            // On the host, from the values of what it reads.
            let deps = self.deps(i);
            for &d in &deps {
                self.force(d)?;
            }
            self.to_host(&deps)?;
            let v = {
                let mut host = self.host.borrow_mut();
                host.force(i)?;
                self.gpu.upload(host.value(i))?
            };
            self.vals[i as usize] = Some(Arc::new(v));
            return Ok(());
        }
        let v: CudaSlice<f64> = match &info.kind {
            ANode::Input { index, .. } => self.gpu.upload(self.inputs[*index])?,
            ANode::Acond { cond, t, e } => {
                // The condition on the host (its reads read back), then the branch it takes.
                self.force_reads(cond.reads())?;
                self.to_host(cond.reads())?;
                let take = self.host.borrow_mut().acond_taken(i, cond)?;
                self.taken[i as usize] = take;
                let b = if take { *t } else { *e };
                self.force(b)?;
                self.vals[i as usize] = self.vals[b as usize].clone();
                return Ok(());
            }
            ANode::Use(d) => self.gpu.upload(d)?,
            ANode::Reshape { src } | ANode::StopGrad { src } => {
                self.force(*src)?;
                self.vals[i as usize] = self.vals[*src as usize].clone();
                return Ok(());
            }
            ANode::Gen { lam, args, space } => {
                for &a in args {
                    self.force(a)?;
                }
                self.force_reads(lam.reads())?;
                let k = primal_kernel(g, i, lam, args, space);
                if k.roots.len() != lam.outs.len() {
                    return Err(unsupported("a generate whose kernel has extra results"));
                }
                let layout = if lam.outs.len() == 1 {
                    Roots::Separate
                } else {
                    Roots::Interleaved
                };
                let caller = args
                    .iter()
                    .map(|&a| self.value(a))
                    .collect::<Result<Vec<_>>>()?;
                let mut p = self.launch(i, ROLE_PRIMAL, k, layout, &caller, &|_| None)?;
                p.roots.pop().expect("one root array")
            }
            ANode::SumGen { lam, args, space } => {
                for &a in args {
                    self.force(a)?;
                }
                self.force_reads(lam.reads())?;
                let k = primal_kernel(g, i, lam, args, space);
                let caller = args
                    .iter()
                    .map(|&a| self.value(a))
                    .collect::<Result<Vec<_>>>()?;
                let mut p = self.launch(i, ROLE_PRIMAL, k, Roots::Separate, &caller, &|_| None)?;
                let terms = p.roots.pop().expect("one root array");
                let inner = *space.last().expect("rank ≥ 1");
                self.fold_rows(Op2::Add, &terms, total, inner)?
            }
            ANode::Sum { src } => {
                self.force(*src)?;
                let inner = *g.nodes[*src as usize].shape.last().expect("rank ≥ 1");
                let x = self.value(*src)?;
                self.fold_rows(Op2::Add, &x, total, inner)?
            }
            ANode::Fold { f, src, .. } => {
                let op = f.as_binop().expect("a fold the GPU runs (`placement`)");
                self.force(*src)?;
                let inner = *g.nodes[*src as usize].shape.last().expect("rank ≥ 1");
                if inner == 0 && total > 0 {
                    return Err(Error::Invalid(
                        "a fold without an initial value over empty rows".into(),
                    ));
                }
                let x = self.value(*src)?;
                self.fold_rows(op, &x, total, inner)?
            }
            ANode::MatMul { a, b } => {
                self.force(*a)?;
                self.force(*b)?;
                let (da, db) = (self.value(*a)?, self.value(*b)?);
                let (sa, sb) = (&g.nodes[*a as usize].shape, &g.nodes[*b as usize].shape);
                self.matmul(View::new(&da, sa[0], sa[1]), View::new(&db, sb[0], sb[1]))?
            }
            k => return Err(unsupported(&format!("{} nodes", node_name(k)))),
        };
        self.vals[i as usize] = Some(Arc::new(v));
        Ok(())
    }

    /// `rows` folds with `op` of `inner` elements each (`x` row-major); an empty row sums to 0.
    fn fold_rows(
        &self,
        op: Op2,
        x: &CudaSlice<f64>,
        rows: usize,
        inner: usize,
    ) -> Result<CudaSlice<f64>> {
        let name = match op {
            Op2::Add => "adj_fold_add",
            Op2::Mul => "adj_fold_mul",
            Op2::Max => "adj_fold_max",
            Op2::Min => "adj_fold_min",
            _ => return Err(unsupported("this fold")),
        };
        let f = self.gpu.runtime(name)?;
        self.gpu
            .label(|| format!("{name} ({rows} rows of {inner})"));
        if inner == 0 {
            return self.gpu.zeros(rows);
        }
        let parts = if inner > SPLIT {
            inner.div_ceil(PART)
        } else {
            1
        };
        let chunk = if parts > 1 { PART } else { inner };
        // SAFETY: each of the `rows × parts` threads below writes its element (and each of the
        // `rows` threads of the second launch its row's).
        let mut out = unsafe { self.gpu.written::<f64>(rows * parts) }?;
        let (inn, pa, ch) = (inner as u64, parts as u64, chunk as u64);
        // SAFETY: `adj_fold_*(n, inner, parts, chunk, x, out)`: `x` holds `rows × inner` values
        // (a node of that shape), thread `e < rows × parts` reads row `e / parts` from
        // `(e % parts) · chunk` up to `min(+chunk, inner)` and writes `out[e]`.
        unsafe {
            self.gpu.launch_n(&f, &((rows * parts) as u64), |b| {
                b.arg(&inn).arg(&pa).arg(&ch).arg(x).arg(&mut out);
            })?;
        }
        if parts == 1 {
            return Ok(out);
        }
        let mut fin = unsafe { self.gpu.written::<f64>(rows) }?;
        let one = 1u64;
        // SAFETY: as above, over the `rows × parts` partial results in one part per row.
        unsafe {
            self.gpu.launch_n(&f, &((rows) as u64), |b| {
                b.arg(&pa).arg(&one).arg(&pa).arg(&out).arg(&mut fin);
            })?;
        }
        Ok(fin)
    }

    /// The product of two views (`a.cols == b.rows`), row-major.
    fn matmul(&self, a: View, b: View) -> Result<CudaSlice<f64>> {
        if a.cols != b.rows {
            return Err(Error::Invalid(format!(
                "matmul of [{}, {}] and [{}, {}]",
                a.rows, a.cols, b.rows, b.cols
            )));
        }
        let (rows, cols, inner) = (a.rows, b.cols, a.cols);
        self.gpu
            .label(|| format!("matmul [{rows}, {inner}] × [{inner}, {cols}]"));
        if !simple_matmul() {
            return self.matmul_tiled(a, b);
        }
        let (ars, acs, brs, bcs) = (a.rs as u64, a.cs as u64, b.rs as u64, b.cs as u64);
        // a thread per block of MM × MM elements (`adj_mm_block`)
        let blocks = rows.div_ceil(MM) * cols.div_ceil(MM);
        let (r64, c64, i64_, bl64) = (rows as u64, cols as u64, inner as u64, blocks as u64);
        if inner > SPLIT_SUM {
            // the inner dimension in parts (a thread per part of each block), then the parts
            // added in order
            let parts = inner.div_ceil(CHUNK);
            let f = self.gpu.runtime("adj_matmul_parts")?;
            let mut c = self.gpu.zeros::<f64>(rows * cols)?;
            // SAFETY: the `blocks × parts` threads below write every element of every part.
            let mut part = unsafe { self.gpu.written::<f64>(rows * cols * parts) }?;
            let ch = CHUNK as u64;
            // SAFETY: `adj_matmul_parts(n, rows, cols, inner, blocks, chunk, a, ars, acs, b,
            // brs, bcs, part)`: the views lie in their arrays (shapes from the graph: `a` is
            // rows × inner, `b` inner × cols, each strided as its node's row-major data or its
            // transpose; reads are at clamped row and column indices), `part` has
            // `rows × cols × parts` elements, thread `e < blocks × parts` reads inner indices
            // `[p·chunk, min(+chunk, inner))` only and writes its block of part `p`.
            unsafe {
                self.gpu.launch_n(&f, &((blocks * parts) as u64), |l| {
                    l.arg(&r64).arg(&c64).arg(&i64_).arg(&bl64).arg(&ch);
                    l.arg(a.data).arg(&ars).arg(&acs);
                    l.arg(b.data).arg(&brs).arg(&bcs);
                    l.arg(&mut part);
                })?;
            }
            self.add_parts(&mut c, &part, rows * cols, parts)?;
            return Ok(c);
        }
        let f = self.gpu.runtime("adj_matmul")?;
        // SAFETY: the product's `blocks` threads together write each of its elements.
        let mut c = unsafe { self.gpu.written::<f64>(rows * cols) }?;
        // SAFETY: `adj_matmul(n, rows, cols, inner, a, ars, acs, b, brs, bcs, c)`: the views lie
        // in their arrays (shapes from the graph: `a` is rows × inner, `b` inner × cols, each
        // strided as its node's row-major data or its transpose; reads are at clamped row and
        // column indices), and `c` has `rows × cols` elements, of which thread `e < blocks`
        // writes its block's.
        unsafe {
            self.gpu.launch_n(&f, &bl64, |l| {
                l.arg(&r64).arg(&c64).arg(&i64_);
                l.arg(a.data).arg(&ars).arg(&acs);
                l.arg(b.data).arg(&brs).arg(&bcs);
                l.arg(&mut c);
            })?;
        }
        Ok(c)
    }

    /// The product of two views as [`DevRun::matmul`] (the shapes checked), by
    /// `adj_matmul_tiled`: a block of threads per [`TM`] × [`TM`] tile of the product, and,
    /// when the tiles alone are too few to keep the GPU busy and the inner dimension is long,
    /// the inner dimension in parts added in order afterwards. The parts depend on the shapes
    /// only, so the result is the same on every run.
    fn matmul_tiled(&self, a: View, b: View) -> Result<CudaSlice<f64>> {
        let (rows, cols, inner) = (a.rows, b.cols, a.cols);
        let (tiles, parts, chunk) = tiled_plan(rows, cols, inner);
        let f = self.gpu.runtime("adj_matmul_tiled")?;
        let (r64, c64, i64_, ch) = (rows as u64, cols as u64, inner as u64, chunk as u64);
        let (ars, acs, brs, bcs) = (a.rs as u64, a.cs as u64, b.rs as u64, b.cs as u64);
        let n = (tiles * parts) as u64;
        // SAFETY: `adj_matmul_tiled(n, rows, cols, inner, chunk, a, ars, acs, b, brs, bcs, out)`:
        // the views lie in their arrays (shapes from the graph: `a` is rows × inner, `b`
        // inner × cols, each strided as its node's row-major data or its transpose; reads are
        // at rows < rows, columns < cols and inner indices < inner only), and `out` has
        // `rows × cols × parts` elements, of which block `blk < tiles × parts` writes its
        // tile's of part `blk / tiles`; together the blocks write every element.
        let launch = |out: &mut CudaSlice<f64>| unsafe {
            self.gpu.launch_blocks(&f, &n, |l| {
                l.arg(&r64).arg(&c64).arg(&i64_).arg(&ch);
                l.arg(a.data).arg(&ars).arg(&acs);
                l.arg(b.data).arg(&brs).arg(&bcs);
                l.arg(out);
            })
        };
        if parts == 1 {
            // SAFETY: the tiles together write every element of the product (above).
            let mut c = unsafe { self.gpu.written::<f64>(rows * cols) }?;
            launch(&mut c)?;
            return Ok(c);
        }
        // SAFETY: the `tiles × parts` blocks write every element of every part (above).
        let mut part = unsafe { self.gpu.written::<f64>(rows * cols * parts) }?;
        launch(&mut part)?;
        let mut c = self.gpu.zeros::<f64>(rows * cols)?;
        self.add_parts(&mut c, &part, rows * cols, parts)?;
        Ok(c)
    }

    /// `out[t] += Σ_p part[p·m + t]` for `t < m`, the parts in order.
    fn add_parts(
        &self,
        out: &mut CudaSlice<f64>,
        part: &CudaSlice<f64>,
        m: usize,
        parts: usize,
    ) -> Result<()> {
        let f = self.gpu.runtime("adj_add_parts")?;
        let p64 = parts as u64;
        // SAFETY: `adj_add_parts(n, parts, part, out)`: `part` holds `parts × m` values,
        // `out` `m`, thread `t < m` reads `part[p·m + t]` and writes `out[t]`.
        unsafe {
            self.gpu.launch_n(&f, &(m as u64), |l| {
                l.arg(&p64).arg(part).arg(out);
            })
        }
    }

    /// `a += b` elementwise over `n` elements.
    fn add_into(&self, a: &mut CudaSlice<f64>, b: &CudaSlice<f64>, n: usize) -> Result<()> {
        let f = self.gpu.runtime("adj_add")?;
        self.gpu.label(|| "adj_add".into());
        // SAFETY: `adj_add(n, a, b)`: both hold a node's `n` adjoint values.
        unsafe {
            self.gpu.launch_n(&f, &((n) as u64), |l| {
                l.arg(a).arg(b);
            })
        }
    }

    fn add(&self, adj: &mut Adj, n: NodeId, v: CudaSlice<f64>) -> Result<()> {
        match &mut adj.dense[n as usize] {
            Some(d) => self.add_into(d, &v, len_of(self.g, n)),
            slot @ None => {
                *slot = Some(v);
                Ok(())
            }
        }
    }

    /// Add `v`, one value per row of `src`'s last axis, to `src`'s broadcast adjoint.
    fn add_bc(&self, adj: &mut Adj, src: NodeId, v: CudaSlice<f64>, rows: usize) -> Result<()> {
        match &mut adj.bc[src as usize] {
            Some(d) => self.add_into(d, &v, rows),
            slot @ None => {
                *slot = Some(v);
                Ok(())
            }
        }
    }

    /// Node `n`'s adjoint as one dense array (a broadcast part expanded), if it has one.
    fn take(&self, adj: &mut Adj, n: NodeId) -> Result<Option<CudaSlice<f64>>> {
        let d = adj.dense[n as usize].take();
        let Some(b) = adj.bc[n as usize].take() else {
            return Ok(d);
        };
        let size = len_of(self.g, n);
        let mut d = match d {
            Some(d) => d,
            None => self.gpu.zeros(size)?,
        };
        let shape = &self.g.nodes[n as usize].shape;
        let inner = (*shape.last().unwrap_or(&1)).max(1) as u64;
        let f = self.gpu.runtime("adj_add_bc")?;
        self.gpu.label(|| "adj_add_bc".into());
        // SAFETY: `adj_add_bc(n, inner, d, b)`: `d` holds the node's `size` values, `b` one per
        // row of `inner` (`size / inner` values).
        unsafe {
            self.gpu.launch_n(&f, &((size) as u64), |l| {
                l.arg(&inner).arg(&mut d).arg(&b);
            })?;
        }
        Ok(Some(d))
    }

    /// Run adjoint kernel `k` for node `i` and route its results: parameter adjoints to
    /// `param_dst`, identity scatters to the read arrays' adjoints, other scatters combined
    /// into them.
    #[allow(clippy::too_many_arguments)]
    fn apply_adjoint(
        &self,
        adj: &mut Adj,
        i: NodeId,
        role: u32,
        k: &Kernel,
        caller: &[Dev],
        aux: &dyn Fn(u32) -> Option<Dev>,
        param_dst: &dyn Fn(u32) -> NodeId,
    ) -> Result<()> {
        let mut p = self.launch(i, role, k, Roots::Separate, caller, aux)?;
        let mut roots: Vec<Option<CudaSlice<f64>>> =
            std::mem::take(&mut p.roots).into_iter().map(Some).collect();
        for (r, &pk) in k.param_roots.iter().enumerate() {
            let v = roots[r].take().expect("a root per parameter");
            self.add(adj, param_dst(pk), v)?;
        }
        for &(ti, r) in &k.dense_targets {
            let v = roots[r].take().expect("a root per dense target");
            self.add(adj, k.targets[ti], v)?;
        }
        for (t, &key) in k.targets.iter().enumerate() {
            let js: Vec<usize> = (0..p.scatters.len())
                .filter(|&j| p.scatters[j] == t)
                .collect();
            if js.is_empty() {
                continue;
            }
            let m = len_of(self.g, key);
            if m == 0 {
                continue;
            }
            if adj.dense[key as usize].is_none() {
                adj.dense[key as usize] = Some(self.gpu.zeros(m)?);
            }
            let out = adj.dense[key as usize].as_mut().expect("set above");
            let n = k.space.iter().product::<usize>();
            let nsc = p.scatters.len();
            // where the indexed scatters' target offsets are in the packed `ci`
            let slots = self
                .g
                .device
                .get_or_make((i, role + ROLE_SLOTS, u32::MAX), || {
                    Ok(index_slots(&p.scatters, k))
                })?;
            let slot_of = |j: usize| slots[j];
            // how this target is combined, decided and compiled once per graph
            let comb = self
                .g
                .device
                .get_or_make((i, role + ROLE_COMBINE, t as u32), || {
                    if affine_target(k, t) {
                        if js.len() >= DIRECT_MIN_SCATTERS {
                            if let Some(idx) = direct_offsets(k, t, &js, nsc, DIRECT_MAX) {
                                let f = self.gpu.runtime("adj_scatter_direct")?;
                                return Ok(Comb::Direct(f, Arc::new(self.gpu.upload_of(&idx)?)));
                            }
                        }
                        // the launch wrote no target offsets for this target
                        let c = combine_source(k, t, &js, m, "adj_combine").ok_or_else(|| {
                            Error::Invalid(
                                "CUDA backend: an affine target without its combining kernel"
                                    .into(),
                            )
                        })?;
                        let f = self.gpu.compiled(&c.code, "adj_combine")?;
                        Ok(Comb::Kernel(f, c.parts, false))
                    } else if let Some(idx) = static_offsets(k, t, nsc, DIRECT_MAX) {
                        // index arithmetic on the position only, each element reached once
                        let f = self.gpu.runtime("adj_scatter_direct")?;
                        Ok(Comb::Direct(f, Arc::new(self.gpu.upload_of(&idx)?)))
                    } else if (m as u128) * (n as u128) * (js.len() as u128) <= SCAN_COMBINE_MAX {
                        let slots: Vec<usize> = js.iter().map(|&j| slot_of(j)).collect();
                        let c = scan_combine_source(&js, &slots, n, m, "adj_combine");
                        let f = self.gpu.compiled(&c.code, "adj_combine")?;
                        Ok(Comb::Kernel(f, c.parts, true))
                    } else {
                        Ok(Comb::Host)
                    }
                })?;
            let cv = p.cv.as_ref().expect("packed contributions");
            self.gpu.label(|| {
                let how = match &*comb {
                    Comb::Direct(..) => "direct",
                    Comb::Kernel(_, _, false) => "affine",
                    Comb::Kernel(_, _, true) => "scanning",
                    Comb::Host => "host",
                };
                format!(
                    "combine ({how}) node {i} → node {key} ({m}), {} scatters",
                    js.len()
                )
            });
            match &*comb {
                Comb::Direct(f, idx) => {
                    let total = (n * nsc) as u64;
                    // SAFETY: `adj_scatter_direct(n, cv, idx, out)`: `cv` and `idx` hold the
                    // kernel's `n × scatters` packed contributions and their offsets in this
                    // target (−1: another target), all `< m` and no two alike
                    // (`direct_offsets` and `static_offsets` checked), so each thread adds into
                    // its own element.
                    unsafe {
                        self.gpu.launch_n(f, &total, |l| {
                            l.arg(cv).arg(&**idx).arg(&mut *out);
                        })?;
                    }
                }
                Comb::Kernel(f, parts, with_index) => {
                    let (parts, with_index) = (*parts, *with_index);
                    let mut part = if parts > 1 {
                        // SAFETY: the combining kernel's `m × parts` threads each write their
                        // element of the parts before `add_parts` reads them.
                        Some(unsafe { self.gpu.written::<f64>(m * parts) }?)
                    } else {
                        None
                    };
                    // SAFETY: the combining kernel's signature is `(n, cv, [ci,] out)` with
                    // the kernel's packed contribution values (and, for the scanning kernel,
                    // target offsets), read at scatters `js` only and at elements inside the
                    // space, and `out` the target's adjoint of `m` elements (one part: a
                    // thread per element) or the `m × parts` partial sums (a thread per part).
                    unsafe {
                        self.gpu.launch_n(f, &((m * parts) as u64), |l| {
                            l.arg(cv);
                            if with_index {
                                l.arg(p.ci.as_ref().expect("indexed scatters"));
                            }
                            match part.as_mut() {
                                Some(part) => l.arg(part),
                                None => l.arg(&mut *out),
                            };
                        })?;
                    }
                    if let Some(part) = part {
                        self.add_parts(out, &part, m, parts)?;
                    }
                }
                Comb::Host => {
                    // On the host, in element order, the scatters in order per element.
                    let mut acc = self.gpu.download(out)?;
                    let vals = self.gpu.download(cv)?;
                    let offs = self
                        .gpu
                        .download(p.ci.as_ref().expect("indexed scatters"))?;
                    for e in 0..n {
                        for &j in &js {
                            let ix = offs[slot_of(j) * n + e];
                            if ix >= 0 {
                                acc[ix as usize] += vals[j * n + e];
                            }
                        }
                    }
                    *out = self.gpu.upload(&acc)?;
                }
            }
        }
        Ok(())
    }

    /// Outputs and vector–Jacobian product: the primal pass, the reverse pass from `seeds`
    /// (one per output), then every output and input adjoint read back in one copy (`None`
    /// for inputs the outputs do not depend on).
    #[allow(clippy::type_complexity)]
    pub(crate) fn vjp(
        &mut self,
        seeds: &[&[f64]],
    ) -> Result<(Vec<Vec<f64>>, Vec<Option<Vec<f64>>>)> {
        self.run_outputs()?;
        let g = self.g;
        let seeds = g
            .outputs
            .iter()
            .copied()
            .zip(seeds.iter().map(|s| s.to_vec()))
            .collect();
        let grads = self.backward(seeds)?;
        let mut parts: Vec<(Dev, usize)> = Vec::new();
        for &o in &g.outputs {
            parts.push((self.value(o)?, len_of(g, o)));
        }
        for (gi, &node) in grads.iter().zip(&g.inputs) {
            if let Some(v) = gi {
                parts.push((v.clone(), len_of(g, node)));
            }
        }
        let host = self.gpu.download_many(&parts)?;
        self.check()?;
        if super::device::profile() {
            eprint!("{}", self.gpu.take_profile());
        }
        let mut host = host.into_iter();
        let outs = g
            .outputs
            .iter()
            .map(|_| host.next().expect("an output"))
            .collect();
        let grads = grads
            .iter()
            .map(|gi| gi.as_ref().map(|_| host.next().expect("a gradient")))
            .collect();
        Ok((outs, grads))
    }

    /// The reverse pass from `seeds` (adjoints of output nodes): one adjoint per graph input,
    /// left on the device (`None` for inputs the outputs do not depend on).
    fn backward(&self, seeds: Vec<(NodeId, Vec<f64>)>) -> Result<Vec<Option<Dev>>> {
        let g = self.g;
        let n = g.nodes.len();
        let mut adj = Adj {
            dense: (0..n).map(|_| None).collect(),
            bc: (0..n).map(|_| None).collect(),
        };
        for (o, s) in seeds {
            let v = self.gpu.upload(&s)?;
            self.add(&mut adj, o, v)?;
        }
        let mut result: Vec<Option<Dev>> = vec![None; g.inputs.len()];
        let mut loop_seeds = LoopSeeds::new();
        for i in (0..n as NodeId).rev() {
            if self.vals[i as usize].is_none() || !g.active[i as usize] {
                continue;
            }
            let info = &g.nodes[i as usize];
            let size = len_of(g, i);
            if placement(&info.kind) != Where::Gpu {
                // On the host: the node's adjoint read back, what it sends uploaded.
                let gv = match self.take(&mut adj, i)? {
                    Some(d) => {
                        let mut v = Vec::new();
                        self.gpu.download_into(&d, size, &mut v)?;
                        Some(v)
                    }
                    None if matches!(info.kind, ANode::Awhile { .. }) => None,
                    None => continue,
                };
                let mut need = self.deps(i);
                need.push(i);
                self.to_host(&need)?;
                let sent = node_adjoint(&self.host.borrow(), i, gv, &mut loop_seeds)?;
                for (dst, v, bc) in sent {
                    let d = self.gpu.upload(&v)?;
                    if bc {
                        self.add_bc(&mut adj, dst, d, v.len())?;
                    } else {
                        self.add(&mut adj, dst, d)?;
                    }
                }
                continue;
            }
            match &info.kind {
                ANode::Gen { lam, args, .. } => {
                    let dense = adj.dense[i as usize].take().map(Arc::new);
                    let bc = adj.bc[i as usize].take().map(Arc::new);
                    if dense.is_none() && bc.is_none() {
                        continue;
                    }
                    let ak = gen_adjoint(g, i, dense.is_some(), bc.is_some())?;
                    let role =
                        ROLE_ADJOINT + u32::from(dense.is_some()) + 2 * u32::from(bc.is_some());
                    let own = gen_own(g, i, false);
                    let mut caller = args
                        .iter()
                        .map(|&a| self.value(a))
                        .collect::<Result<Vec<_>>>()?;
                    if let (Some(d), 1) = (&dense, lam.outs.len()) {
                        caller.push(d.clone());
                    }
                    if !own.is_empty() {
                        caller.push(self.value(i)?);
                    }
                    let aux = |key: u32| match key {
                        AUX_DENSE => dense.clone(),
                        AUX_BC => bc.clone(),
                        _ => None,
                    };
                    self.apply_adjoint(&mut adj, i, role, &ak, &caller, &aux, &|k| {
                        args[k as usize]
                    })?;
                    continue;
                }
                ANode::SumGen { args, .. } => {
                    let Some(gv) = self.take(&mut adj, i)? else {
                        continue;
                    };
                    let gv = Arc::new(gv);
                    let ak = sumgen_adjoint(g, i)?;
                    let caller = args
                        .iter()
                        .map(|&a| self.value(a))
                        .collect::<Result<Vec<_>>>()?;
                    let aux = |key: u32| (key == AUX_BC).then(|| gv.clone());
                    self.apply_adjoint(&mut adj, i, ROLE_ADJOINT + 4, &ak, &caller, &aux, &|k| {
                        args[k as usize]
                    })?;
                    continue;
                }
                _ => {}
            }
            let Some(gv) = self.take(&mut adj, i)? else {
                continue;
            };
            match &info.kind {
                ANode::Input { index, .. } => result[*index] = Some(Arc::new(gv)),
                ANode::Use(_) | ANode::StopGrad { .. } => {}
                ANode::Reshape { src } => self.add(&mut adj, *src, gv)?,
                ANode::Acond { t, e, .. } => {
                    let b = if self.taken[i as usize] { *t } else { *e };
                    self.add(&mut adj, b, gv)?;
                }
                ANode::Sum { src } => {
                    if g.active[*src as usize] {
                        self.add_bc(&mut adj, *src, gv, size)?;
                    }
                }
                ANode::Fold { f, src, .. } if f.as_binop() == Some(Op2::Add) => {
                    if g.active[*src as usize] {
                        self.add_bc(&mut adj, *src, gv, size)?;
                    }
                }
                ANode::MatMul { a, b } => {
                    // C = A B: Ā = C̄ Bᵀ, B̄ = Aᵀ C̄.
                    let (da, db) = (self.value(*a)?, self.value(*b)?);
                    let (sa, sb) = (&g.nodes[*a as usize].shape, &g.nodes[*b as usize].shape);
                    let (va, vb) = (View::new(&da, sa[0], sa[1]), View::new(&db, sb[0], sb[1]));
                    let vc = View::new(&gv, va.rows, vb.cols);
                    if g.active[*a as usize] {
                        let d = self.matmul(vc, vb.t())?;
                        self.add(&mut adj, *a, d)?;
                    }
                    if g.active[*b as usize] {
                        let d = self.matmul(va.t(), vc)?;
                        self.add(&mut adj, *b, d)?;
                    }
                }
                k => {
                    return Err(unsupported(&format!(
                        "the adjoint of {} nodes",
                        node_name(k)
                    )))
                }
            }
        }
        Ok(result)
    }
}
