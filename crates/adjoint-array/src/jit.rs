//! Run-time compilation of kernels with Cranelift: one native loop over a block's elements.
//!
//! The interpreter in [`kernel`](crate::kernel) runs each node as a loop over a block, so every
//! intermediate value goes through memory. For a kernel with hundreds of nodes per element
//! (ADBench GMM's unrolled quadratic form and its adjoint) that traffic, not arithmetic,
//! is the cost. A [`Jit`] is the same operation list compiled element by element: slots become
//! SSA values (registers or spills chosen by Cranelift), offsets stay integers, gathers are
//! loads and scatters load-add-stores into a dense per-chunk window.
//!
//! Semantics are the interpreter's, operation for operation: `+ − × ÷`, `max`, `min`,
//! negation, `sqrt`, `abs`, `powi` with a small exponent (binary powering, as `f64::powi`
//! computes it: [`powi`]), the partials of `+ − × max min`, `exp` and `powi`, `AdjMul` and
//! `Select` are emitted inline (the same IEEE operations; `max`/`min` of two equal zeros returns the
//! first, where Rust leaves the sign unspecified); every other rule-table value or partial,
//! and every discrete operation, calls the same Rust function the interpreter calls. So roots
//! are bit-identical to the interpreter's (except which NaN an operation on two NaNs returns,
//! its sign and payload, which IEEE 754 leaves open: an `AdjMul` of a NaN adjoint and a NaN
//! partial keeps the adjoint's compiled and the partial's interpreted; a reviewer); scatter
//! windows receive the same terms, summed element by element instead of node by node (chunk
//! boundaries are unchanged, so results stay bit-identical for any thread count).
//!
//! The loop takes two elements per iteration while two remain (then one): element-wise
//! arithmetic (`+ − × ÷ max min`, negation, `sqrt`, `abs`, reciprocals, the partials of
//! `+ − × ÷`, `AdjMul`, `Select`) runs in `f64x2` registers, one lane per element; calls, index
//! arithmetic, gathers and scatters run the scalar code once per element, and values move
//! between the two forms where needed. Each lane computes exactly what the scalar code computes
//! for its element. Measured (1 thread): the map chain of 10⁷ elements 17.9 → 9.2 ms against a
//! hand-fused loop's 6.3 ms when only call-free kernels were paired; then pairing every kernel:
//! ADBench BA's Jacobian 7.7 → 5.2 ms (ba1), the LSTM gradient 4.4 → 3.7 ms, GMM d10 K25
//! 4.2 → 3.4 ms, GMM d20 K25 unchanged within noise (its kernel of 1641 operations per element
//! is bound by spills, gathers and scatters, which pairing does not reduce).
//!
//! A `sin` and a `cos` of the same value (a rotation's angle) are one call computing both
//! ([`sin_cos_twins`]): each call spills the live values around it, so BA's Jacobian kernel
//! went from 4 calls per pair of observations to 2, and from 4.0–4.1× to 3.7–3.8× its
//! objective (ba1–3, 1 thread). The values are the rule table's, as two calls would give.
//!
//! Index components (`Idx`) are carried by the loop from element to element (an increment
//! with carries on the axes any `Idx` reads, [`Counters`]) instead of a division and a
//! remainder per element, and an offset built from them uses the integers directly (no float
//! round trip, no lower-bound check), also where it is one plus or minus an integer constant
//! ([`shifted_index`]). Scatter windows are dense over their targets, except that a large
//! target whose scatter indices are all affine in the index components
//! ([`Kernel::windowed`]) gets, per chunk, a window over only the range the chunk's elements
//! can touch ([`Kernel::window_range`]), one per group of its scatters that land close
//! together (`Kernel::split_windows`: a packed vector read at `i` and `i + n` gets two);
//! positions are clamped into their window, so even a wrong range could not write outside it.
//!
//! `f32` operations (`KOp::F32`) run as the interpreter's `run32` does, element by element
//! ([`emit_f32`]): `+ − × ÷`, negation, `abs`, `sqrt` and reciprocals in `f32` registers,
//! `max`/`min` inline, other values by calls, partials in `f64` at the `f32` point, rounded; an `f32` target's window
//! adds in `f32`; a result stays in its `f32` register for the next `f32` operation. As for
//! `f64`, scattered terms are summed element by element, not node by node: where one element of
//! an `f32` array receives several scatters (a stencil's gradient), the compiled sum can differ
//! from the interpreter's in the last bit (a reviewer: 1 ulp on half the elements of a
//! three-point stencil), the same for any thread count — and by more where the terms cancel or
//! come near the overflow threshold, as any reordered sum (a reviewer: −6.47e37 against −∞ for
//! a stencil over values near ±3e38). The element-wise ones (`+ − × ÷`,
//! negation, `abs`, `sqrt`, reciprocals, `max`/`min`, adjoint products, selects; not `powi`,
//! which `f32` rounds at every step) run two elements at a time like the `f64` ones, in the
//! low lanes of `f32x4` registers ([`pair_f32`]), the same values lane by lane. (They were
//! interpreted, then compiled one element at a time: BENCHMARKS.md, forty-second and
//! forty-third sessions, has the map chain each time; a `tanh`'s calls cost the same either
//! way.)
//!
//! Not compiled (the interpreter runs them): kernels whose
//! scatter targets are large beside the space and not affine (more than [`MAX_WINDOW`]
//! elements and more than a quarter of the space divided by 16 chunks: a dense window per chunk
//! would cost more than the interpreter's windows over the touched range), kernels over
//! fewer than [`MIN_ELEMENTS`] elements (compilation would cost more than it saves), and
//! kernels of more than [`MAX_OPS`] operations (Cranelift's register allocation grows faster
//! than the kernel: a map of a 400-step chain took 0.54 s to compile its gradient, a
//! 1200-step one 5.3 s, where the interpreter's first gradient took 14 and 27 ms and its
//! later ones ran faster than the compiled code; the benchmark models' kernels reach 511
//! operations). An index
//! out of bounds is detected in the compiled code (the load then
//! reads element 0 instead, never outside the array) and the block is re-run by the
//! interpreter, which reports the error with the index and shape.

use crate::expr::{eval_d1, eval_d2, eval_dd1, eval_dd2, DOp};
use crate::f32ops::{bin32, r32, un32};
use crate::kernel::{Comp, KOp, Kernel, Src, Window};
use adjoint_core::rules::{self, Op1, Op2};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, MemFlagsData, SigRef, Signature, StackSlot, StackSlotData,
    StackSlotKind, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use std::collections::HashMap;

/// Scatter targets up to this many elements get a dense window per chunk; larger ones too
/// when the space has at least four elements per window element over its (at most 16)
/// chunks, so that clearing and adding the windows costs little beside the kernel.
pub(crate) const MAX_WINDOW: usize = 1 << 13;
/// Kernels over fewer elements are interpreted.
pub(crate) const MIN_ELEMENTS: usize = 2048;
/// Kernels of more operations are interpreted (see the module docs).
pub(crate) const MAX_OPS: usize = 1024;

/// `fn(start, len, params, arrays, roots, root_strides, windows) -> bad`: evaluate elements
/// `start..start + len` of the space; `params[p]` points at this block's slice, root `r` of
/// element `e` is stored at byte `roots[r] + e·root_strides[r]`, `arrays[a]` at a read array's
/// data; `windows` holds, per window of the kernel ([`Kernel::windows`]: one per scatter
/// target, more for a target split into far-apart parts), its data, then every window's first
/// index, then every window's length. Returns 1 if an index was out of bounds (nothing was read
/// or written outside the arrays), else 0.
type KernelFn = unsafe extern "C" fn(
    u64,
    u64,
    *const *const f64,
    *const *const f64,
    *const *mut f64,
    *const u64,
    *const usize,
) -> u64;

/// A compiled kernel. Holds the code (and the operation tables its calls point into).
pub(crate) struct Jit {
    f: KernelFn,
    /// the code's memory (freed on drop; `None` only during drop)
    module: Option<JITModule>,
    _ops1: Box<[Op1]>,
    _ops2: Box<[Op2]>,
    _dops: Box<[DOp]>,
}

// SAFETY: after `finalize_definitions` the module's code and data are never written again;
// the module is only kept so that its memory outlives `f`. Calling `f` reads only the
// caller's buffers and the immutable operation tables, so sharing it between threads is safe.
unsafe impl Send for Jit {}
// SAFETY: as above: no interior mutability is reachable through `&Jit`.
unsafe impl Sync for Jit {}

/// Pointer tables passed to the compiled code, kept by the caller between blocks so that a
/// block allocates nothing.
#[derive(Default)]
pub(crate) struct Args {
    /// root destinations `(pointer, stride in elements)`, filled by the caller
    pub roots: Vec<(*mut f64, usize)>,
    pp: Vec<*const f64>,
    ap: Vec<*const f64>,
    rp: Vec<*mut f64>,
    rs: Vec<u64>,
    wp: Vec<usize>,
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: `f` points into this module's memory and is only called through `&self`
            // (`Jit::run`), so no call can be running or start after the `Jit` is dropped.
            unsafe { m.free_memory() };
        }
    }
}

impl std::fmt::Debug for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jit")
    }
}

impl Jit {
    /// Run the compiled loop over one block. Returns `false` if an index was out of bounds.
    ///
    /// Parameters, read arrays and windows are checked here (lengths, counts, dense windows
    /// over their targets).
    ///
    /// # Safety
    ///
    /// Each root `(ptr, stride)` in `args.roots` must be valid for writes of `f64` at `ptr + e·stride`
    /// (in elements) for every `e < len`, and no other reference may use those elements during
    /// the call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn run(
        &self,
        k: &Kernel,
        start: usize,
        len: usize,
        params: &[&[f64]],
        arrays: &[&[f64]],
        windows: &mut [Window],
        args: &mut Args,
    ) -> bool {
        assert!(params.len() >= k.params.len(), "missing parameters");
        assert!(params.iter().all(|p| p.len() >= len), "a short parameter");
        assert_eq!(arrays.len(), k.array_shapes.len(), "read arrays");
        for (a, s) in arrays.iter().zip(&k.array_shapes) {
            assert_eq!(
                a.len(),
                s.iter().product::<usize>(),
                "a read array's length"
            );
        }
        assert_eq!(args.roots.len(), k.roots.len(), "roots");
        assert_eq!(windows.len(), k.windows.len(), "windows");
        for (w, part) in windows.iter().zip(&k.windows) {
            let (t, n) = (part.target, k.target_lens[part.target]);
            assert!(
                if k.windowed(t) {
                    !w.data.is_empty() && w.lo + w.data.len() <= n
                } else {
                    w.lo == 0 && w.data.len() == n
                },
                "a window outside its target, or not dense over a target that needs it"
            );
        }
        let a = args;
        a.pp.clear();
        a.pp.extend(params.iter().map(|p| p.as_ptr()));
        a.ap.clear();
        a.ap.extend(arrays.iter().map(|x| x.as_ptr()));
        a.rp.clear();
        a.rp.extend(a.roots.iter().map(|r| r.0));
        a.rs.clear();
        a.rs.extend(a.roots.iter().map(|r| (r.1 * 8) as u64));
        // per window: its data, then every window's first index and length
        a.wp.clear();
        a.wp.extend(windows.iter_mut().map(|w| w.data.as_mut_ptr() as usize));
        a.wp.extend(windows.iter().map(|w| w.lo));
        a.wp.extend(windows.iter().map(|w| w.data.len()));
        // SAFETY: the generated code reads elements `0..len` of each parameter (asserted
        // long enough), elements of the read arrays and writes elements of the windows at
        // offsets bounds-checked against the shapes the arrays and windows were just checked
        // to have (an offset failing the check is replaced by 0 and reported), and writes the
        // roots where the caller guarantees it may.
        let bad = unsafe {
            (self.f)(
                start as u64,
                len as u64,
                a.pp.as_ptr(),
                a.ap.as_ptr(),
                a.rp.as_ptr(),
                a.rs.as_ptr(),
                a.wp.as_ptr(),
            )
        };
        bad == 0
    }
}

/// Whether `k` can be compiled (see the module docs).
pub(crate) fn eligible(k: &Kernel) -> bool {
    k.space_total() >= MIN_ELEMENTS
        && k.ops.len() <= MAX_OPS
        && k.target_lens
            .iter()
            .enumerate()
            .all(|(t, &l)| l <= MAX_WINDOW || k.windowed(t) || l * 16 <= k.space_total() * 4)
}

/// `rules::unary(op, x)` with `op` a constant in each arm, so that only the part asked for is
/// computed (as in the interpreter's loops).
macro_rules! by_op1 {
    ($op:expr, $x:expr, $field:ident) => {
        match $op {
            Op1::Neg => rules::unary(Op1::Neg, $x).$field,
            Op1::Recip => rules::unary(Op1::Recip, $x).$field,
            Op1::Sqrt => rules::unary(Op1::Sqrt, $x).$field,
            Op1::Exp => rules::unary(Op1::Exp, $x).$field,
            Op1::Ln => rules::unary(Op1::Ln, $x).$field,
            Op1::Sin => rules::unary(Op1::Sin, $x).$field,
            Op1::Cos => rules::unary(Op1::Cos, $x).$field,
            Op1::Tanh => rules::unary(Op1::Tanh, $x).$field,
            Op1::Abs => rules::unary(Op1::Abs, $x).$field,
            Op1::Ln1p => rules::unary(Op1::Ln1p, $x).$field,
            Op1::ExpM1 => rules::unary(Op1::ExpM1, $x).$field,
            Op1::Atan => rules::unary(Op1::Atan, $x).$field,
            Op1::Erf => rules::unary(Op1::Erf, $x).$field,
            op => rules::unary(op, $x).$field,
        }
    };
}

/// `rules::binary(op, x, y)`, one constant `op` per arm.
macro_rules! by_op2 {
    ($op:expr, $x:expr, $y:expr, $field:ident) => {
        match $op {
            Op2::Add => rules::binary(Op2::Add, $x, $y).$field,
            Op2::Sub => rules::binary(Op2::Sub, $x, $y).$field,
            Op2::Mul => rules::binary(Op2::Mul, $x, $y).$field,
            Op2::Div => rules::binary(Op2::Div, $x, $y).$field,
            Op2::Powf => rules::binary(Op2::Powf, $x, $y).$field,
            Op2::Atan2 => rules::binary(Op2::Atan2, $x, $y).$field,
            Op2::Min => rules::binary(Op2::Min, $x, $y).$field,
            Op2::Max => rules::binary(Op2::Max, $x, $y).$field,
            Op2::Hypot => rules::binary(Op2::Hypot, $x, $y).$field,
            Op2::Rem => rules::binary(Op2::Rem, $x, $y).$field,
        }
    };
}

extern "C" fn un_val(op: *const Op1, x: f64) -> f64 {
    // SAFETY: `op` points into the `Jit`'s operation table, alive while its code runs.
    // the value alone (`sin` without `cos`: `Op1::eval`)
    unsafe { *op }.eval(x)
}
/// `sin x` and `cos x` into `out[0]` and `out[1]`: the rule table's two values (`Op1::eval`,
/// the same bits as two `un_val` calls), in one call for a kernel that needs both.
extern "C" fn sin_cos(x: f64, out: *mut f64) {
    let (s, c) = (Op1::Sin.eval(x), Op1::Cos.eval(x));
    // SAFETY: `out` is the kernel's 16-byte stack slot, written here and read back by the
    // kernel right after the call.
    unsafe {
        out.write(s);
        out.add(1).write(c);
    }
}
extern "C" fn un_d(op: *const Op1, x: f64) -> f64 {
    // SAFETY: as in `un_val`.
    by_op1!(unsafe { *op }, x, d)
}
extern "C" fn un_dd(op: *const Op1, x: f64) -> f64 {
    // SAFETY: as in `un_val`.
    eval_dd1(unsafe { *op }, x)
}
extern "C" fn bin_val(op: *const Op2, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    by_op2!(unsafe { *op }, x, y, value)
}
extern "C" fn bin_d(op: *const Op2, w: u64, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    let op = unsafe { *op };
    if w == 0 {
        by_op2!(op, x, y, dx)
    } else {
        by_op2!(op, x, y, dy)
    }
}
extern "C" fn bin_dd(op: *const Op2, w: u64, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    eval_dd2(unsafe { *op }, w as u8, x, y)
}
extern "C" fn disc(op: *const DOp, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    unsafe { *op }.eval(x, y)
}

// The `f32` operations (`KOp::F32`), each computing what the interpreter's `run32` computes
// for one element: values in `f32` ([`un32`], [`bin32`]), partials in `f64` at the `f32` point,
// rounded to `f32`; every result widened back to `f64`.
extern "C" fn un32_val(op: *const Op1, x: f64) -> f64 {
    // SAFETY: as in `un_val`.
    f64::from(un32(unsafe { *op }, x as f32))
}
extern "C" fn un32_d(op: *const Op1, x: f64) -> f64 {
    // SAFETY: as in `un_val`.
    r32(eval_d1(unsafe { *op }, r32(x)))
}
extern "C" fn un32_dd(op: *const Op1, x: f64) -> f64 {
    // SAFETY: as in `un_val`.
    r32(eval_dd1(unsafe { *op }, r32(x)))
}
extern "C" fn bin32_val(op: *const Op2, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    f64::from(bin32(unsafe { *op }, x as f32, y as f32))
}
extern "C" fn d2_32(op: *const Op2, w: u64, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    r32(eval_d2(unsafe { *op }, w as u8, r32(x), r32(y)))
}
extern "C" fn dd2_32(op: *const Op2, w: u64, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    r32(eval_dd2(unsafe { *op }, w as u8, r32(x), r32(y)))
}
extern "C" fn disc32(op: *const DOp, x: f64, y: f64) -> f64 {
    // SAFETY: as in `un_val`.
    f64::from(unsafe { *op }.eval(x as f32, y as f32))
}

/// Compile `k`, or `None` where Cranelift does not support the host.
/// `ADJOINT_ARRAY_DUMP=1` in the environment (read once): print each kernel's Cranelift IR and
/// machine code to standard error as it is compiled.
fn dump_kernels() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ADJOINT_ARRAY_DUMP").is_ok_and(|v| v != "0"))
}

pub(crate) fn compile(k: &Kernel) -> Option<Jit> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    flags.set("is_pic", "false").ok()?;
    let isa = cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()?;
    let ptr = isa.pointer_type();
    if ptr != types::I64 {
        return None;
    }
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    let mut sig = module.make_signature();
    for _ in 0..7 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I64));
    let id = module
        .declare_function("kernel", Linkage::Local, &sig)
        .ok()?;
    ctx.func.signature = sig;

    // Operation tables: calls pass a pointer to their entry.
    let mut ops1: Vec<Op1> = Vec::new();
    let mut ops2: Vec<Op2> = Vec::new();
    let mut dops: Vec<DOp> = Vec::new();
    for op in &k.ops {
        match op {
            KOp::Un { op, .. } | KOp::D1 { op, .. } => ops1.push(*op),
            KOp::F32(inner) => match &**inner {
                KOp::Un { op, .. } | KOp::D1 { op, .. } => ops1.push(*op),
                KOp::Bin { op, .. } | KOp::D2 { op, .. } => ops2.push(*op),
                KOp::Disc { op, .. } => dops.push(*op),
                _ => {}
            },
            KOp::Bin { op, .. } | KOp::D2 { op, .. } => ops2.push(*op),
            KOp::Disc { op, .. } => dops.push(*op),
            _ => {}
        }
    }
    let (ops1, ops2, dops) = (
        ops1.into_boxed_slice(),
        ops2.into_boxed_slice(),
        dops.into_boxed_slice(),
    );
    let call_conv = module.isa().default_call_conv();
    let mk_sig = |ints: usize, floats: usize| {
        let mut s = Signature::new(call_conv);
        for _ in 0..ints {
            s.params.push(AbiParam::new(types::I64));
        }
        for _ in 0..floats {
            s.params.push(AbiParam::new(types::F64));
        }
        s.returns.push(AbiParam::new(types::F64));
        s
    };

    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let sig_i_f = b.import_signature(mk_sig(1, 1));
        let sig_i_ff = b.import_signature(mk_sig(1, 2));
        let sig_ii_ff = b.import_signature(mk_sig(2, 2));
        let sig_sin_cos = {
            let mut s = Signature::new(call_conv);
            s.params.push(AbiParam::new(types::F64));
            s.params.push(AbiParam::new(types::I64));
            b.import_signature(s)
        };
        let sin_cos_slot =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 3));
        let entry = b.create_block();
        let head = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.append_block_param(head, types::I64); // e
        b.append_block_param(head, types::I64); // bad
        b.append_block_param(exit, types::I64);

        b.switch_to_block(entry);
        let a = b.block_params(entry).to_vec();
        let (start, len, pparams, parrays, proots, pstrides, pwins) =
            (a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        let mem = MemFlagsData::trusted();
        let nparams = k.params.len();
        let param_base: Vec<Value> = (0..nparams)
            .map(|p| b.ins().load(types::I64, mem, pparams, (p * 8) as i32))
            .collect();
        let array_base: Vec<Value> = (0..k.array_shapes.len())
            .map(|i| b.ins().load(types::I64, mem, parrays, (i * 8) as i32))
            .collect();
        let root_base: Vec<Value> = (0..k.roots.len())
            .map(|i| b.ins().load(types::I64, mem, proots, (i * 8) as i32))
            .collect();
        let root_stride: Vec<Value> = (0..k.roots.len())
            .map(|i| b.ins().load(types::I64, mem, pstrides, (i * 8) as i32))
            .collect();
        let nt = k.windows.len();
        let win_base: Vec<Value> = (0..nt)
            .map(|i| b.ins().load(types::I64, mem, pwins, (i * 8) as i32))
            .collect();
        // a window over part of a target: its first index and last position
        let win_range: Vec<Option<(Value, Value)>> = (0..nt)
            .map(|i| {
                k.windowed(k.windows[i].target).then(|| {
                    let lo = b.ins().load(types::I64, mem, pwins, ((nt + i) * 8) as i32);
                    let len = b
                        .ins()
                        .load(types::I64, mem, pwins, ((2 * nt + i) * 8) as i32);
                    (lo, b.ins().iadd_imm_u(len, -1))
                })
            })
            .collect();
        // Each operation's entry in the operation tables (calls pass its address).
        let (mut i1, mut i2, mut id_) = (0usize, 0usize, 0usize);
        let op_ptr: Vec<i64> = k
            .ops
            .iter()
            .map(|op| match op {
                KOp::F32(inner) => &**inner,
                op => op,
            })
            .map(|op| match op {
                KOp::Un { .. } | KOp::D1 { .. } => {
                    i1 += 1;
                    &ops1[i1 - 1] as *const Op1 as i64
                }
                KOp::Bin { .. } | KOp::D2 { .. } => {
                    i2 += 1;
                    &ops2[i2 - 1] as *const Op2 as i64
                }
                KOp::Disc { .. } => {
                    id_ += 1;
                    &dops[id_ - 1] as *const DOp as i64
                }
                _ => 0,
            })
            .collect();
        let env = Env {
            k,
            mem,
            param_base,
            array_base,
            win_base,
            win_range,
            root_base,
            root_stride,
            op_ptr,
            sig_i_f,
            sig_i_ff,
            sig_ii_ff,
            sig_sin_cos,
            sin_cos_slot,
            twin: sin_cos_twins(&k.ops),
            counters: Counters::of(k),
            int_consts: k
                .consts
                .iter()
                .filter(|(_, v)| v.fract() == 0.0 && v.abs() < 1e9)
                .map(|&(s, v)| (s, v as i64))
                .collect(),
        };
        let zero_i = b.ins().iconst(types::I64, 0);
        let idx0 = env.counters.at(&mut b, k, start);
        let nc = idx0.len();
        for _ in 0..nc {
            b.append_block_param(head, types::I64);
        }
        // Two elements per iteration (in `f64x2` registers) while two remain, then the
        // scalar loop. The pair loop tests its bound at the bottom (one taken branch per
        // iteration); a kernel with one root has two of them, chosen once by the root's
        // stride: adjacent elements (a map's output) are stored with one instruction.
        let args = |e: Value, bad: Value, idx: &[Value]| -> Vec<_> {
            [e, bad].iter().chain(idx).map(|&v| v.into()).collect()
        };
        let modes: &[bool] = if k.roots.len() == 1 {
            &[true, false]
        } else {
            &[false]
        };
        let vbodies: Vec<cranelift_codegen::ir::Block> = modes
            .iter()
            .map(|_| {
                let v = b.create_block();
                b.append_block_param(v, types::I64); // e
                b.append_block_param(v, types::I64); // bad
                for _ in 0..nc {
                    b.append_block_param(v, types::I64); // index counters
                }
                v
            })
            .collect();
        let vstart = b.create_block();
        let two = b.ins().iconst(types::I64, 2);
        let fits0 = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, two, len);
        b.ins()
            .brif(fits0, vstart, &[], head, &args(zero_i, zero_i, &idx0));
        b.switch_to_block(vstart);
        if vbodies.len() == 2 {
            let is8 = b.ins().icmp_imm_u(IntCC::Equal, env.root_stride[0], 8);
            let a0 = args(zero_i, zero_i, &idx0);
            b.ins().brif(is8, vbodies[0], &a0, vbodies[1], &a0);
        } else {
            b.ins().jump(vbodies[0], &args(zero_i, zero_i, &idx0));
        }
        for (&adjacent, &vbody) in modes.iter().zip(&vbodies) {
            b.switch_to_block(vbody);
            let e = b.block_params(vbody)[0];
            let bad_in = b.block_params(vbody)[1];
            let idx = b.block_params(vbody)[2..].to_vec();
            let (bad, idx1) = pair_body(&mut b, &env, start, e, &idx, bad_in, adjacent);
            let idx2 = env.counters.next(&mut b, &idx1);
            let e2 = b.ins().iadd_imm_u(e, 2);
            let e4 = b.ins().iadd_imm_u(e, 4);
            let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, e4, len);
            let a2 = args(e2, bad, &idx2);
            b.ins().brif(fits, vbody, &a2, head, &a2);
        }

        b.switch_to_block(head);
        let e = b.block_params(head)[0];
        let bad_in = b.block_params(head)[1];
        let idx = b.block_params(head)[2..].to_vec();
        let more = b.ins().icmp(IntCC::UnsignedLessThan, e, len);
        b.ins().brif(more, body, &[], exit, &[bad_in.into()]);

        b.switch_to_block(body);
        let mut l = Lane::new(&mut b, k, start, e, env.counters.lane(&idx), bad_in);
        for (j, op) in k.ops.iter().enumerate() {
            emit_scalar(&mut b, &env, &mut l, j, op);
        }
        for (r, root) in k.roots.iter().enumerate() {
            let v = l.val(&mut b, &env, *root);
            let at = b.ins().imul(e, env.root_stride[r]);
            let addr = b.ins().iadd(env.root_base[r], at);
            b.ins().store(mem, v, addr, 0);
        }
        let e1 = b.ins().iadd_imm_u(e, 1);
        let idx1 = env.counters.next(&mut b, &idx);
        b.ins().jump(head, &args(e1, l.bad, &idx1));

        b.switch_to_block(exit);
        let r = b.block_params(exit)[0];
        b.ins().return_(&[r]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    let dump = dump_kernels();
    if dump {
        ctx.set_disasm(true);
        eprintln!("=== kernel (Cranelift IR) ===\n{}", ctx.func.display());
    }
    // A kernel the builder emitted wrongly (a verifier error) runs interpreted: right, but
    // slow, and silently so — a debug build (the tests) says so instead (an inline `sqrt`
    // partial added an `f64` zero to an `f64x2` value, and every paired kernel with one ran
    // interpreted).
    if let Err(e) = module.define_function(id, &mut ctx) {
        debug_assert!(false, "a kernel failed to compile: {e:?}");
        return None;
    }
    if dump {
        let code = ctx.compiled_code().and_then(|c| c.vcode.clone());
        eprintln!(
            "=== kernel (machine code) ===\n{}",
            code.unwrap_or_default()
        );
    }
    module.clear_context(&mut ctx);
    module.finalize_definitions().ok()?;
    let code = module.get_finalized_function(id);
    // SAFETY: `code` is the function just defined with the `KernelFn` signature (six `i64`
    // parameters, one `i64` result, the platform's C calling convention).
    let f = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    Some(Jit {
        f,
        module: Some(module),
        _ops1: ops1,
        _ops2: ops2,
        _dops: dops,
    })
}

/// What the code of every element needs: the pointer tables loaded in the entry block, each
/// operation's entry in the operation tables, and the signatures of the calls.
struct Env<'a> {
    k: &'a Kernel,
    mem: MemFlagsData,
    param_base: Vec<Value>,
    array_base: Vec<Value>,
    win_base: Vec<Value>,
    /// per window ([`Kernel::windows`]), when its target is [`Kernel::windowed`]: the window's
    /// first index and last position
    win_range: Vec<Option<(Value, Value)>>,
    root_base: Vec<Value>,
    root_stride: Vec<Value>,
    /// per operation: the address of its entry in the operation tables (0: none)
    op_ptr: Vec<i64>,
    sig_i_f: SigRef,
    sig_i_ff: SigRef,
    sig_ii_ff: SigRef,
    /// `sin_cos(x, out)`
    sig_sin_cos: SigRef,
    /// where `sin_cos` writes its two values
    sin_cos_slot: StackSlot,
    /// per operation: for a `sin` (`cos`) whose argument a later `cos` (`sin`) also takes,
    /// that operation's position ([`sin_cos_twins`])
    twin: Vec<Option<usize>>,
    counters: Counters,
    /// the kernel's integer constants by slot (for [`shifted_index`])
    int_consts: HashMap<u32, i64>,
}

/// Pairs of `sin` and `cos` of the same value (a rotation's angle): `twin[i] = Some(j)` where
/// operation `i` is the first of the two and `j` the second, both plain `Un` operations, and no
/// operation from `i` up to `j` overwrites their argument's slot. The code for `i` then calls
/// [`sin_cos`] once and keeps the second value for `j`: one call instead of two, and one
/// spill of the live values around it (BA's Jacobian kernel: 4 calls per pair of
/// observations, now 2).
fn sin_cos_twins(ops: &[KOp]) -> Vec<Option<usize>> {
    let mut twin = vec![None; ops.len()];
    let mut taken = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        let KOp::Un { op: o, a, .. } = op else {
            continue;
        };
        let want = match o {
            Op1::Sin => Op1::Cos,
            Op1::Cos => Op1::Sin,
            _ => continue,
        };
        if taken[i] {
            continue;
        }
        for (j, later) in ops.iter().enumerate().skip(i) {
            // `a` overwritten at or after `i` (before `j`): a later `cos a` is of another value
            let overwrites = |op: &KOp| matches!(a, Src::S(s) if op.results().contains(s));
            if j > i {
                if let KOp::Un { op: o2, a: a2, .. } = later {
                    if *o2 == want && a2 == a && !taken[j] {
                        twin[i] = Some(j);
                        taken[j] = true;
                        break;
                    }
                }
            }
            if overwrites(later) {
                break;
            }
        }
    }
    twin
}

/// The index components the loop carries from element to element, on axes `first..rank` of the
/// space (`first` = the outermost axis any `Idx` reads; none when none does): one increment
/// with carries per element instead of a division and a remainder per `Idx` (the space
/// `[1000, 25, 10]` read at `[i₁, i₂]` in a sum: 1.6 → 0.5 ms).
struct Counters {
    first: usize,
    dims: Vec<usize>,
}

impl Counters {
    fn of(k: &Kernel) -> Counters {
        let first = k
            .ops
            .iter()
            .filter_map(|op| match op {
                KOp::Idx { axis, .. } => Some(*axis),
                _ => None,
            })
            .min()
            .unwrap_or(k.space.len());
        Counters {
            first,
            dims: k.space.clone(),
        }
    }

    /// The counters of flat element `flat`.
    fn at(&self, b: &mut FunctionBuilder, k: &Kernel, flat: Value) -> Vec<Value> {
        (self.first..self.dims.len())
            .map(|a| {
                let q = b.ins().udiv_imm_u(flat, k.strides[a] as i64);
                if a == 0 {
                    q
                } else {
                    b.ins().urem_imm_u(q, self.dims[a] as i64)
                }
            })
            .collect()
    }

    /// The counters of the next element: the innermost axis + 1, carrying outwards.
    fn next(&self, b: &mut FunctionBuilder, idx: &[Value]) -> Vec<Value> {
        let mut out = idx.to_vec();
        let mut carry: Option<Value> = None; // None: 1
        for a in (self.first..self.dims.len()).rev() {
            let c = &mut out[a - self.first];
            let v = match carry {
                None => b.ins().iadd_imm_u(*c, 1),
                Some(cy) => b.ins().iadd(*c, cy),
            };
            if a == 0 {
                *c = v; // the outermost axis never wraps inside the space
                break;
            }
            let wrap = b.ins().icmp_imm_u(IntCC::Equal, v, self.dims[a] as i64);
            let zero = b.ins().iconst(types::I64, 0);
            *c = b.ins().select(wrap, zero, v);
            carry = Some(b.ins().uextend(types::I64, wrap));
        }
        out
    }

    /// A lane's per-axis view of the counters.
    fn lane(&self, idx: &[Value]) -> Vec<Option<Value>> {
        (0..self.dims.len())
            .map(|a| a.checked_sub(self.first).map(|i| idx[i]))
            .collect()
    }
}

/// One element's values while its code is emitted.
struct Lane {
    /// the element's index in the block
    e: Value,
    /// the element's flat index in the space
    flat: Value,
    /// its index components (integers) on the axes the loop counts ([`Counters`]); the
    /// others are computed from `flat`
    idx: Vec<Option<Value>>,
    /// its byte offset into the block's parameter slices
    e8: Value,
    slot: HashMap<u32, Value>,
    /// slots holding an index component (an `Idx` result) or one plus or minus an integer
    /// constant ([`shifted_index`]): its integer value and the range `lo..hi` it lies in, for
    /// offsets that need no conversion (nor a bounds check where the range is inside the
    /// array's)
    ints: HashMap<u32, (Value, i64, i64)>,
    /// slots holding the result of an `f32` operation: the same value in an `f32` register,
    /// so that the next `f32` operation reading it needs no conversion
    f32s: HashMap<u32, Value>,
    off: HashMap<u32, Value>,
    /// values computed ahead by a [`sin_cos`] call, by the operation they belong to
    sin_cos: HashMap<usize, Value>,
    /// 1 once an index was out of bounds
    bad: Value,
    fzero: Value,
    fone: Value,
    zero_i: Value,
}

impl Lane {
    /// Element `e` of the block starting at flat index `start`, the kernel's constants in its
    /// slots.
    fn new(
        b: &mut FunctionBuilder,
        k: &Kernel,
        start: Value,
        e: Value,
        idx: Vec<Option<Value>>,
        bad: Value,
    ) -> Lane {
        let mut slot = HashMap::new();
        for &(s, v) in &k.consts {
            slot.insert(s, b.ins().f64const(v));
        }
        Lane {
            e,
            flat: b.ins().iadd(start, e),
            idx,
            e8: b.ins().ishl_imm_u(e, 3),
            slot,
            ints: HashMap::new(),
            f32s: HashMap::new(),
            off: HashMap::new(),
            sin_cos: HashMap::new(),
            bad,
            fzero: b.ins().f64const(0.0),
            fone: b.ins().f64const(1.0),
            zero_i: b.ins().iconst(types::I64, 0),
        }
    }

    fn val(&self, b: &mut FunctionBuilder, env: &Env, s: Src) -> Value {
        match s {
            Src::S(s) => self.slot[&s],
            Src::P(p) => {
                let addr = b.ins().iadd(env.param_base[p as usize], self.e8);
                b.ins().load(types::F64, env.mem, addr, 0)
            }
        }
    }
}

/// The address of element `c + off` of an array or window at `base`.
fn addr_of(b: &mut FunctionBuilder, base: Value, off: Option<Value>, c: usize) -> Value {
    match off {
        Some(o) => {
            let o8 = b.ins().ishl_imm_u(o, 3);
            let a = b.ins().iadd(base, o8);
            b.ins().iadd_imm_u(a, (c * 8) as i64)
        }
        None => b.ins().iadd_imm_u(base, (c * 8) as i64),
    }
}

/// The integer form of `op`'s result where `op` adds an integer constant to, or subtracts one
/// from, an index component held in `ints` (`i[0] + 1.0`, a stencil's neighbour; `n + i[0]`):
/// its result's slot, value and range. An offset built from it then indexes with integers as
/// one built from `i[0]` does, instead of converting the float back with two bounds checks
/// (the float result is still computed, exact below 2⁵³, for any other use).
fn shifted_index(
    b: &mut FunctionBuilder,
    env: &Env,
    ints: &HashMap<u32, (Value, i64, i64)>,
    op: &KOp,
) -> Option<(u32, (Value, i64, i64))> {
    let KOp::Bin {
        op: o @ (Op2::Add | Op2::Sub),
        a,
        b: bb,
        dst,
        ..
    } = op
    else {
        return None;
    };
    let int = |s: &Src| match s {
        Src::S(s) => ints.get(s).copied(),
        Src::P(_) => None,
    };
    let konst = |s: &Src| match s {
        Src::S(s) => env.int_consts.get(s).copied(),
        Src::P(_) => None,
    };
    let ((i, lo, hi), k) = match (int(a), konst(bb), int(bb), konst(a)) {
        (Some(x), Some(k), ..) => (x, if *o == Op2::Add { k } else { -k }),
        (_, _, Some(x), Some(k)) if *o == Op2::Add => (x, k),
        _ => return None,
    };
    let v = b.ins().iadd_imm_u(i, k);
    Some((*dst, (v, lo + k, hi + k)))
}

/// `x` rounded to the nearest `f32` and widened back (`x as f32 as f64`).
fn round32(b: &mut FunctionBuilder, x: Value) -> Value {
    let s = b.ins().fdemote(types::F32, x);
    b.ins().fpromote(types::F64, s)
}

/// An `f32` operation (`KOp::F32(op)`, its table entry at `p`) for one element, as the
/// interpreter's `run32` computes it: `+ − × ÷`, negation, `abs`, `sqrt` and reciprocals in
/// `f32` registers (the same IEEE operations as Rust's `f32`), `max`/`min` as the `f64` code
/// picks (on the rounded values), every other value by a call
/// ([`un32_val`], …); partials in `f64` at the `f32` point, inline where the `f64` code has
/// them, else by a call ([`un32_d`], [`d2_32`], …), then rounded; a `Select` rounded to `f32`.
fn emit_f32(b: &mut FunctionBuilder, env: &Env, l: &mut Lane, p: Value, op: &KOp) {
    let fn_ptr = |b: &mut FunctionBuilder, f: usize| b.ins().iconst(types::I64, f as i64);
    let call = |b: &mut FunctionBuilder, f: usize, sig: SigRef, args: &[Value]| {
        let f = fn_ptr(b, f);
        let c = b.ins().call_indirect(sig, f, args);
        b.inst_results(c)[0]
    };
    // an operand in an `f32` register: the earlier `f32` result where the slot holds one
    // (exact: that value widened and rounded back is itself), else the `f64` value rounded
    let to32 = |b: &mut FunctionBuilder, l: &Lane, s: Src, x: Value| match s {
        Src::S(s) if l.f32s.contains_key(&s) => l.f32s[&s],
        _ => b.ins().fdemote(types::F32, x),
    };
    let to64 = |b: &mut FunctionBuilder, x: Value| b.ins().fpromote(types::F64, x);
    match op {
        KOp::Un { op, a, dst, d } => {
            let x = l.val(b, env, *a);
            let v = match op {
                Op1::Neg | Op1::Abs | Op1::Sqrt | Op1::Recip => {
                    let x32 = to32(b, l, *a, x);
                    let v = match op {
                        Op1::Neg => b.ins().fneg(x32),
                        Op1::Abs => b.ins().fabs(x32),
                        Op1::Sqrt => b.ins().sqrt(x32),
                        _ => {
                            let one = b.ins().f32const(1.0);
                            b.ins().fdiv(one, x32)
                        }
                    };
                    l.f32s.insert(*dst, v);
                    to64(b, v)
                }
                _ => call(b, un32_val as *const () as usize, env.sig_i_f, &[p, x]),
            };
            l.slot.insert(*dst, v);
            if let Some(ds) = d {
                // the partial in `f64` at the `f32` point, rounded: inline where the `f64`
                // code has it (with the `f64` value it needs), else a call
                let xr = round32(b, x);
                let fone = l.fone;
                let v64 = match op {
                    Op1::Sqrt => Some(b.ins().sqrt(xr)),
                    Op1::Recip => Some(b.ins().fdiv(fone, xr)),
                    Op1::Ln => Some(xr),
                    Op1::Powi(n) if powi_inline(*n) => Some(xr),
                    _ => None,
                };
                let dv = match v64.and_then(|v64| un_partial_inline(b, *op, xr, v64, fone)) {
                    Some(dv) => round32(b, dv),
                    None => call(b, un32_d as *const () as usize, env.sig_i_f, &[p, x]),
                };
                l.slot.insert(*ds, dv);
            }
        }
        KOp::D1 { a, dst, second, .. } => {
            let x = l.val(b, env, *a);
            let f = if *second {
                un32_dd as *const () as usize
            } else {
                un32_d as *const () as usize
            };
            let v = call(b, f, env.sig_i_f, &[p, x]);
            l.slot.insert(*dst, v);
        }
        KOp::Bin {
            op,
            a,
            b: bb,
            dst,
            d,
        } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let v = match op {
                Op2::Add | Op2::Sub | Op2::Mul | Op2::Div => {
                    let (x32, y32) = (to32(b, l, *a, x), to32(b, l, *bb, y));
                    let v = match op {
                        Op2::Add => b.ins().fadd(x32, y32),
                        Op2::Sub => b.ins().fsub(x32, y32),
                        Op2::Mul => b.ins().fmul(x32, y32),
                        _ => b.ins().fdiv(x32, y32),
                    };
                    l.f32s.insert(*dst, v);
                    to64(b, v)
                }
                Op2::Max | Op2::Min => {
                    // as `f32::max`/`min` pick (the `f64` code's choice, on the values
                    // rounded to `f32`: the pick is one of them, exact)
                    let (xr, yr) = (round32(b, x), round32(b, y));
                    max_min(b, max_min_plan(env.k, *op == Op2::Max, *a, *bb), xr, yr)
                }
                _ => call(b, bin32_val as *const () as usize, env.sig_i_ff, &[p, x, y]),
            };
            l.slot.insert(*dst, v);
            if let Some((sx, sy)) = d {
                // the partials in `f64` at the `f32` point (the `f64` code's, inline for
                // `+ − × ÷ max min`), rounded
                let (xr, yr) = (round32(b, x), round32(b, y));
                let fone = l.fone;
                for (w, s) in [(0u64, sx), (1, sy)] {
                    let dv = partial(b, *op, w, xr, yr, fone, p, env.sig_ii_ff);
                    let dv = round32(b, dv);
                    l.slot.insert(*s, dv);
                }
            }
        }
        KOp::D2 {
            w,
            a,
            b: bb,
            dst,
            second,
            ..
        } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let wv = b.ins().iconst(types::I64, i64::from(*w));
            let f = if *second {
                dd2_32 as *const () as usize
            } else {
                d2_32 as *const () as usize
            };
            let v = call(b, f, env.sig_ii_ff, &[p, wv, x, y]);
            l.slot.insert(*dst, v);
        }
        KOp::AdjMul { g, d, dst } => {
            // `+0` where the (rounded) adjoint is zero, else the product, rounded
            // (`expr::adj_mul` at the `f32` point)
            let x = l.val(b, env, *g);
            let y = l.val(b, env, *d);
            let (xr, yr) = (round32(b, x), round32(b, y));
            let m = b.ins().fmul(xr, yr);
            let fzero = l.fzero;
            let nz = b.ins().fcmp(FloatCC::NotEqual, xr, fzero);
            let v = b.ins().select(nz, m, fzero);
            let v = round32(b, v);
            l.slot.insert(*dst, v);
        }
        KOp::Disc { a, b: bb, dst, .. } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let v = call(b, disc32 as *const () as usize, env.sig_i_ff, &[p, x, y]);
            l.slot.insert(*dst, v);
        }
        KOp::Select { c, a, b: bb, dst } => {
            let cv = l.val(b, env, *c);
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let fzero = l.fzero;
            let nz = b.ins().fcmp(FloatCC::NotEqual, cv, fzero);
            let v = b.ins().select(nz, x, y);
            let v = round32(b, v);
            l.slot.insert(*dst, v);
        }
        _ => unreachable!("only arithmetic nodes have f32 versions"),
    }
}

/// Emit operation `j` (`op`) for one element: the scalar code, operation for operation the
/// interpreter's.
fn emit_scalar(b: &mut FunctionBuilder, env: &Env, l: &mut Lane, j: usize, op: &KOp) {
    let (mem, fzero, fone) = (env.mem, l.fzero, l.fone);
    let fn_ptr = |b: &mut FunctionBuilder, f: usize| b.ins().iconst(types::I64, f as i64);
    let p = b.ins().iconst(types::I64, env.op_ptr[j]);
    let shifted = shifted_index(b, env, &l.ints, op);
    for dst in op.results() {
        l.ints.remove(&dst);
        l.f32s.remove(&dst);
    }
    if let Some((dst, int)) = shifted {
        l.ints.insert(dst, int);
    }
    match op {
        KOp::Idx { axis, dst } => {
            let i = match l.idx[*axis] {
                Some(i) => i,
                None => index_component(b, env.k, *axis, l.flat),
            };
            // (signed conversions are one instruction; indices are far below 2⁶³)
            let v = b.ins().fcvt_from_sint(types::F64, i);
            l.slot.insert(*dst, v);
            l.ints.insert(*dst, (i, 0, env.k.space[*axis] as i64));
        }
        KOp::Un { op, a, dst, d } => {
            let x = l.val(b, env, *a);
            let v = match op {
                _ if l.sin_cos.contains_key(&j) => l.sin_cos.remove(&j).expect("kept"),
                Op1::Sin | Op1::Cos if env.twin[j].is_some() => {
                    // both values in one call; the twin's kept for its operation
                    let f = fn_ptr(b, sin_cos as *const () as usize);
                    let out = b.ins().stack_addr(types::I64, env.sin_cos_slot, 0);
                    b.ins().call_indirect(env.sig_sin_cos, f, &[x, out]);
                    let sv = b.ins().load(types::F64, env.mem, out, 0);
                    let cv = b.ins().load(types::F64, env.mem, out, 8);
                    let (mine, other) = if *op == Op1::Sin { (sv, cv) } else { (cv, sv) };
                    l.sin_cos.insert(env.twin[j].expect("a twin"), other);
                    mine
                }
                Op1::Neg => b.ins().fneg(x),
                Op1::Sqrt => b.ins().sqrt(x),
                Op1::Abs => b.ins().fabs(x),
                Op1::Recip => b.ins().fdiv(fone, x),
                Op1::Powi(n) if powi_inline(*n) => powi(b, x, *n, fone),
                _ => {
                    let f = fn_ptr(b, un_val as *const () as usize);
                    let c = b.ins().call_indirect(env.sig_i_f, f, &[p, x]);
                    b.inst_results(c)[0]
                }
            };
            l.slot.insert(*dst, v);
            if let Some(ds) = d {
                // Partials that are cheap in the value or the argument are computed inline,
                // with the rule table's operations (so the same bits), instead of a call that
                // would evaluate the function again.
                let dv = match un_partial_inline(b, *op, x, v, fone) {
                    Some(dv) => dv,
                    None => {
                        let f = fn_ptr(b, un_d as *const () as usize);
                        let c = b.ins().call_indirect(env.sig_i_f, f, &[p, x]);
                        b.inst_results(c)[0]
                    }
                };
                l.slot.insert(*ds, dv);
            }
        }
        KOp::D1 {
            op: Op1::Powi(n),
            a,
            dst,
            second,
        } if powi_inline(*n) => {
            let x = l.val(b, env, *a);
            let v = powi_partial(b, x, *n, *second, fone);
            l.slot.insert(*dst, v);
        }
        KOp::D1 { op, a, dst, second } => {
            let x = l.val(b, env, *a);
            let f = if !*second && *op == Op1::Exp {
                un_val as *const ()
            } else if *second {
                un_dd as *const ()
            } else {
                un_d as *const ()
            };
            let f = fn_ptr(b, f as usize);
            let c = b.ins().call_indirect(env.sig_i_f, f, &[p, x]);
            let v = b.inst_results(c)[0];
            l.slot.insert(*dst, v);
        }
        KOp::Bin {
            op,
            a,
            b: bb,
            dst,
            d,
        } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let v = match op {
                Op2::Add => b.ins().fadd(x, y),
                Op2::Sub => b.ins().fsub(x, y),
                Op2::Mul => b.ins().fmul(x, y),
                Op2::Div => b.ins().fdiv(x, y),
                Op2::Max | Op2::Min => {
                    max_min(b, max_min_plan(env.k, *op == Op2::Max, *a, *bb), x, y)
                }
                _ => {
                    let f = fn_ptr(b, bin_val as *const () as usize);
                    let c = b.ins().call_indirect(env.sig_i_ff, f, &[p, x, y]);
                    b.inst_results(c)[0]
                }
            };
            l.slot.insert(*dst, v);
            if let Some((sx, sy)) = d {
                for (w, s) in [(0u64, *sx), (1, *sy)] {
                    let dv = partial(b, *op, w, x, y, fone, p, env.sig_ii_ff);
                    l.slot.insert(s, dv);
                }
            }
        }
        KOp::D2 {
            op,
            w,
            a,
            b: bb,
            dst,
            second,
        } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let v = if *second {
                let f = fn_ptr(b, bin_dd as *const () as usize);
                let wv = b.ins().iconst(types::I64, *w as i64);
                let c = b.ins().call_indirect(env.sig_ii_ff, f, &[p, wv, x, y]);
                b.inst_results(c)[0]
            } else {
                partial(b, *op, *w as u64, x, y, fone, p, env.sig_ii_ff)
            };
            l.slot.insert(*dst, v);
        }
        KOp::AdjMul { g, d, dst } => {
            // `+0` where the adjoint is zero, else `g·d` (`expr::adj_mul`) as a mask in a
            // vector register (`cmpneqpd`, `andpd`): a scalar `select` on a float compare
            // becomes two branches per node
            let gv = l.val(b, env, *g);
            let dv = l.val(b, env, *d);
            let m = b.ins().fmul(gv, dv);
            let vzero = b.ins().splat(types::F64X2, fzero);
            let g2 = b.ins().splat(types::F64X2, gv);
            let mask = b.ins().fcmp(FloatCC::NotEqual, g2, vzero);
            let mask = b.ins().bitcast(types::F64X2, MemFlagsData::new(), mask);
            let m2 = b.ins().splat(types::F64X2, m);
            let v2 = b.ins().band(m2, mask);
            let v = b.ins().extractlane(v2, 0);
            l.slot.insert(*dst, v);
        }
        KOp::Disc {
            op: _,
            a,
            b: bb,
            dst,
        } => {
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let f = fn_ptr(b, disc as *const () as usize);
            let c = b.ins().call_indirect(env.sig_i_ff, f, &[p, x, y]);
            let v = b.inst_results(c)[0];
            l.slot.insert(*dst, v);
        }
        KOp::Select { c, a, b: bb, dst } => {
            let cv = l.val(b, env, *c);
            let x = l.val(b, env, *a);
            let y = l.val(b, env, *bb);
            let nz = b.ins().fcmp(FloatCC::NotEqual, cv, fzero);
            let v = b.ins().select(nz, x, y);
            l.slot.insert(*dst, v);
        }
        KOp::Offset {
            comps,
            guard,
            quiet,
            dst,
            ..
        } => {
            let mut o = b.ins().iconst(types::I64, 0);
            let mut ok = b.ins().iconst(types::I8, 1);
            for c in comps {
                let Comp::Var(s, st, dim) = c else { continue };
                let int = match s {
                    Src::S(s) => l.ints.get(s).copied(),
                    Src::P(_) => None,
                };
                let xi = match int {
                    // an index component (plus a constant): an integer in lo..hi already
                    Some((i, lo, hi)) => {
                        if lo < 0 || hi > *dim as i64 {
                            // (a negative value is a large unsigned one)
                            let in_ = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, i, *dim as i64);
                            ok = b.ins().band(ok, in_);
                        }
                        i
                    }
                    None => {
                        let x = l.val(b, env, *s);
                        let dimf = b.ins().f64const(*dim as f64);
                        let ge = b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, fzero);
                        let lt = b.ins().fcmp(FloatCC::LessThan, x, dimf);
                        let in_ = b.ins().band(ge, lt);
                        ok = b.ins().band(ok, in_);
                        // in range (else 0): the signed conversion's short path
                        let x = b.ins().select(in_, x, fzero);
                        b.ins().fcvt_to_sint_sat(types::I64, x)
                    }
                };
                let t = b.ins().imul_imm_u(xi, *st as i64);
                o = b.ins().iadd(o, t);
            }
            // live: the guard holds (a read not demanded reads element 0, as the interpreter's
            // does); out of bounds and live: bad
            let live = match guard {
                Some(g) => {
                    let gv = l.val(b, env, *g);
                    b.ins().fcmp(FloatCC::NotEqual, gv, fzero)
                }
                None => b.ins().iconst(types::I8, 1),
            };
            let use_ = b.ins().band(ok, live);
            let o = b.ins().select(use_, o, l.zero_i);
            // (quiet: element 0 instead, reported by a later offset with the read's guard)
            if !*quiet {
                let not_ok = b.ins().bxor_imm_u(ok, 1);
                let fail = b.ins().band(not_ok, live);
                let fail = b.ins().uextend(types::I64, fail);
                l.bad = b.ins().bor(l.bad, fail);
            }
            l.off.insert(*dst, o);
        }
        KOp::Gather {
            arr,
            off: o,
            c,
            guard,
            dst,
        } => {
            let ov = o.map(|o| l.off[&o]);
            let addr = addr_of(b, env.array_base[*arr], ov, *c);
            let v = b.ins().load(types::F64, mem, addr, 0);
            let v = match guard {
                Some(g) => {
                    let gv = l.val(b, env, *g);
                    let nz = b.ins().fcmp(FloatCC::NotEqual, gv, fzero);
                    b.ins().select(nz, v, fzero)
                }
                None => v,
            };
            l.slot.insert(*dst, v);
        }
        KOp::Scatter {
            target,
            off: o,
            c,
            guard,
            val: vs,
        } => {
            let ov = o.map(|o| l.off[&o]);
            let mut v = l.val(b, env, *vs);
            if let Some(g) = guard {
                let gv = l.val(b, env, *g);
                let nz = b.ins().fcmp(FloatCC::NotEqual, gv, fzero);
                v = b.ins().select(nz, v, fzero);
            }
            let w = env.k.scatter_window[j];
            debug_assert_eq!(env.k.windows[w].target, *target);
            let addr = match env.win_range[w] {
                // the position in a window over part of the target, clamped into it (live
                // scatters land inside by `Kernel::window_range`; dead ones add 0 anywhere)
                Some((lo, last)) => {
                    let i = match ov {
                        Some(o) => b.ins().iadd_imm_u(o, *c as i64),
                        None => b.ins().iconst(types::I64, *c as i64),
                    };
                    let rel = b.ins().isub(i, lo);
                    let rel = b.ins().umin(rel, last);
                    addr_of(b, env.win_base[w], Some(rel), 0)
                }
                None => addr_of(b, env.win_base[w], ov, *c),
            };
            let old = b.ins().load(types::F64, mem, addr, 0);
            let new = if env.k.target_f32[*target] {
                // (an `f32` target's window adds in `f32`: `add_t`)
                let (o32, v32) = (
                    b.ins().fdemote(types::F32, old),
                    b.ins().fdemote(types::F32, v),
                );
                let s = b.ins().fadd(o32, v32);
                b.ins().fpromote(types::F64, s)
            } else {
                b.ins().fadd(old, v)
            };
            b.ins().store(mem, new, addr, 0);
        }
        KOp::F32(inner) => emit_f32(b, env, l, p, inner),
        KOp::Cast { a, dst, to32 } => {
            let x = l.val(b, env, *a);
            let v = if *to32 { round32(b, x) } else { x };
            l.slot.insert(*dst, v);
        }
    }
}

/// The first partial of unary `op` at `x` (value `v`) where it is cheap in the value or the
/// argument, with the rule table's operations; works on `f64` and `f64x2` values (`one` of the
/// same type). `None`: the rule table is called.
fn un_partial_inline(
    b: &mut FunctionBuilder,
    op: Op1,
    x: Value,
    v: Value,
    one: Value,
) -> Option<Value> {
    Some(match op {
        Op1::Exp => v,
        Op1::Tanh => {
            let vv = b.ins().fmul(v, v);
            b.ins().fsub(one, vv)
        }
        Op1::Ln => b.ins().fdiv(one, x),
        Op1::Recip => {
            let vv = b.ins().fmul(v, v);
            b.ins().fneg(vv)
        }
        Op1::Sqrt => {
            // `+ 0` as the rule table: at x = −0 (√ gives −0) the partial is +∞, not −∞ (a
            // hunter: the compiled gradient's sign differed from the interpreter's); a zero of
            // `one`'s type (`f64` or `f64x2`)
            let zero = b.ins().f64const(0.0);
            let zero = if b.func.dfg.value_type(one) == types::F64X2 {
                b.ins().splat(types::F64X2, zero)
            } else {
                zero
            };
            let v0 = b.ins().fadd(v, zero);
            let v2 = b.ins().fadd(v0, v0);
            b.ins().fdiv(one, v2)
        }
        Op1::Powi(n) if powi_inline(n) => powi_partial(b, x, n, false, one),
        _ => return None,
    })
}

/// The rule table's partials of `xⁿ`, bit for bit: `n · xⁿ⁻¹` (1 for n = 1, 0 for n = 0), or
/// with `second` `n(n − 1) · xⁿ⁻²` (0 for n = 0, 1); `f64` or `f64x2` (`one` of the same type).
fn powi_partial(b: &mut FunctionBuilder, x: Value, n: i32, second: bool, one: Value) -> Value {
    let (k, factor) = if second {
        (2, f64::from(n) * (f64::from(n) - 1.0))
    } else {
        (1, f64::from(n))
    };
    match n {
        0 => b.ins().fsub(one, one),
        1 if second => b.ins().fsub(one, one),
        1 => one,
        _ => {
            let p = powi(b, x, n - k, one);
            let c = b.ins().f64const(factor);
            let c = if b.func.dfg.value_type(one) == types::F64X2 {
                b.ins().splat(types::F64X2, c)
            } else {
                c
            };
            b.ins().fmul(p, c)
        }
    }
}

/// Whether `x.powi(n)` is compiled inline ([`powi`]) rather than called from the rule table:
/// small exponents, where the multiplications cost less than the call (`a.powi(2)` ran 7×
/// slower than `a * a` in a kernel; a new user).
fn powi_inline(n: i32) -> bool {
    (-64..=64).contains(&n)
}

/// `xⁿ` as `f64::powi` computes it, bit for bit: binary powering from the lowest bit
/// (compiler-rt's `__powidf2`, and LLVM's expansion for a constant `n`), then `1 / r` for a
/// negative `n`; `1` for `n = 0` (also at NaN). Works on `f64` and `f64x2` values (`one` of
/// the same type).
fn powi(b: &mut FunctionBuilder, x: Value, n: i32, one: Value) -> Value {
    let mut m = n.unsigned_abs();
    let (mut r, mut square) = (None, x);
    while m != 0 {
        if m & 1 == 1 {
            r = Some(match r {
                Some(r) => b.ins().fmul(r, square),
                None => square,
            });
        }
        m >>= 1;
        if m != 0 {
            square = b.ins().fmul(square, square);
        }
    }
    let r = r.unwrap_or(one);
    if n < 0 {
        b.ins().fdiv(one, r)
    } else {
        r
    }
}

/// Whether operation `op` runs on both elements of a pair at once in `f64x2` registers
/// (element-wise IEEE arithmetic); the others run once per element with the scalar code.
fn vectorizable(op: &KOp) -> bool {
    match op {
        KOp::Un { op, d, .. } => match op {
            Op1::Powi(n) => powi_inline(*n),
            _ => {
                matches!(op, Op1::Neg | Op1::Sqrt | Op1::Abs | Op1::Recip)
                    && (d.is_none() || matches!(op, Op1::Sqrt | Op1::Recip))
            }
        },
        KOp::Bin { op, d, .. } => {
            matches!(
                op,
                Op2::Add | Op2::Sub | Op2::Mul | Op2::Div | Op2::Max | Op2::Min
            ) && (d.is_none() || matches!(op, Op2::Add | Op2::Sub | Op2::Mul | Op2::Div))
        }
        KOp::D2 { op, second, .. } => {
            !*second && matches!(op, Op2::Add | Op2::Sub | Op2::Mul | Op2::Div)
        }
        KOp::AdjMul { .. } | KOp::Select { .. } => true,
        // `f32` operations that the scalar code runs inline ([`emit_f32`]), as the `f64` ones
        // (not `powi`: `f32::powi` rounds at every step, its `f64` twin once)
        KOp::F32(inner) => match &**inner {
            KOp::Un {
                op: Op1::Powi(_), ..
            } => false,
            inner => vectorizable(inner),
        },
        _ => false,
    }
}

/// `x` (`f64x2`) rounded lane by lane to the nearest `f32` and widened back.
fn round32x2(b: &mut FunctionBuilder, x: Value) -> Value {
    let s = b.ins().fvdemote(x);
    b.ins().fvpromote_low(s)
}

/// An `f32` operation ([`vectorizable`]) on both elements of a pair, lane by lane what
/// [`emit_f32`] computes for one: the value in `f32x4` registers (lanes 0 and 1; operands kept
/// there from earlier `f32` operations, in `vslot32`, else rounded from their `f64x2` form, from
/// `get64`), `max`/`min` picked as the `f64` code picks; partials in `f64` at the `f32` point,
/// rounded; a `Select` picks in `f64` and rounds. Returns each result's slot, `f64x2` value
/// (widened: exact) and `f32x4` value where it has one.
fn pair_f32(
    b: &mut FunctionBuilder,
    k: &Kernel,
    op: &KOp,
    get64: &mut dyn FnMut(&mut FunctionBuilder, Src) -> Value,
    vslot32: &mut HashMap<u32, Value>,
    vone: Value,
) -> Vec<(u32, Value, Option<Value>)> {
    let mut get32 = |b: &mut FunctionBuilder, s: Src| {
        if let Src::S(slot) = s {
            if let Some(&v) = vslot32.get(&slot) {
                return v;
            }
        }
        let v = get64(b, s);
        let v32 = b.ins().fvdemote(v);
        if let Src::S(slot) = s {
            vslot32.insert(slot, v32);
        }
        v32
    };
    let up = |b: &mut FunctionBuilder, v32: Value| b.ins().fvpromote_low(v32);
    let mask32 = |b: &mut FunctionBuilder, cc: FloatCC, x: Value, y: Value| {
        let m = b.ins().fcmp(cc, x, y);
        b.ins().bitcast(types::F32X4, MemFlagsData::new(), m)
    };
    let value = |b: &mut FunctionBuilder, dst: u32, v32: Value| (dst, up(b, v32), Some(v32));
    match op {
        KOp::Un { op, a, dst, d } => {
            let x = get32(b, *a);
            let v = match op {
                Op1::Neg => b.ins().fneg(x),
                Op1::Abs => b.ins().fabs(x),
                Op1::Sqrt => b.ins().sqrt(x),
                _ => {
                    let one = b.ins().f32const(1.0);
                    let one = b.ins().splat(types::F32X4, one);
                    b.ins().fdiv(one, x)
                }
            };
            let mut out = vec![value(b, *dst, v)];
            if let Some(ds) = d {
                // (`Sqrt`, `Recip`: the partial from the `f64` value at the `f32` point)
                let xr = up(b, x);
                let v64 = match op {
                    Op1::Sqrt => b.ins().sqrt(xr),
                    _ => b.ins().fdiv(vone, xr),
                };
                let dv = un_partial_inline(b, *op, xr, v64, vone).expect("vectorizable");
                out.push((*ds, round32x2(b, dv), None));
            }
            out
        }
        KOp::Bin {
            op,
            a,
            b: bb,
            dst,
            d,
        } => {
            let (x, y) = (get32(b, *a), get32(b, *bb));
            let v = match op {
                Op2::Add => b.ins().fadd(x, y),
                Op2::Sub => b.ins().fsub(x, y),
                Op2::Mul => b.ins().fmul(x, y),
                Op2::Div => b.ins().fdiv(x, y),
                _ => {
                    // as `max_min`: `y` where it wins or `x` is NaN (comparisons of `f32`
                    // values are those of their exact `f64` widenings)
                    let pick_y = match max_min_plan(k, *op == Op2::Max, *a, *bb) {
                        MaxMin::One(cc) => mask32(b, cc, x, y),
                        MaxMin::Two(cc) => {
                            let wins = mask32(b, cc, x, y);
                            let nan = mask32(b, FloatCC::Unordered, x, x);
                            b.ins().bor(wins, nan)
                        }
                    };
                    b.ins().bitselect(pick_y, y, x)
                }
            };
            let mut out = vec![value(b, *dst, v)];
            if let Some((sx, sy)) = d {
                let (xr, yr) = (up(b, x), up(b, y));
                for (w, s) in [(0, sx), (1, sy)] {
                    let dv = arith_partial(b, *op, w, xr, yr, vone).expect("vectorizable");
                    out.push((*s, round32x2(b, dv), None));
                }
            }
            out
        }
        KOp::D2 {
            op,
            w,
            a,
            b: bb,
            dst,
            ..
        } => {
            let (x, y) = (get32(b, *a), get32(b, *bb));
            let (xr, yr) = (up(b, x), up(b, y));
            let dv = arith_partial(b, *op, *w as u64, xr, yr, vone).expect("vectorizable");
            vec![(*dst, round32x2(b, dv), None)]
        }
        KOp::AdjMul { g, d, dst } => {
            // `+0` where the (rounded) adjoint is zero, else the product (of two `f32` values:
            // exact in `f64`, so rounded once either way)
            let (gv, dv) = (get32(b, *g), get32(b, *d));
            let m = b.ins().fmul(gv, dv);
            let zero = b.ins().f32const(0.0);
            let zero = b.ins().splat(types::F32X4, zero);
            let live = mask32(b, FloatCC::NotEqual, gv, zero);
            let v = b.ins().band(m, live);
            vec![value(b, *dst, v)]
        }
        KOp::Select { c, a, b: bb, dst } => {
            // (the condition as it is; what is picked, rounded)
            let cv = get64(b, *c);
            let (x, y) = (get64(b, *a), get64(b, *bb));
            let zero = b.ins().f64const(0.0);
            let zero = b.ins().splat(types::F64X2, zero);
            let m = b.ins().fcmp(FloatCC::NotEqual, cv, zero);
            let nz = b.ins().bitcast(types::F64X2, MemFlagsData::new(), m);
            let v = b.ins().bitselect(nz, x, y);
            let v32 = b.ins().fvdemote(v);
            vec![value(b, *dst, v32)]
        }
        _ => unreachable!("vectorizable f32 operations are matched above"),
    }
}

/// The value operands of an operation (slots or parameters; not offsets).
fn operands(op: &KOp) -> Vec<Src> {
    match op {
        KOp::Idx { .. } => vec![],
        KOp::Un { a, .. } | KOp::D1 { a, .. } | KOp::Cast { a, .. } => vec![*a],
        KOp::Bin { a, b, .. } | KOp::D2 { a, b, .. } | KOp::Disc { a, b, .. } => vec![*a, *b],
        KOp::AdjMul { g, d, .. } => vec![*g, *d],
        KOp::Select { c, a, b, .. } => vec![*c, *a, *b],
        KOp::F32(op) => operands(op),
        KOp::Offset { comps, guard, .. } => comps
            .iter()
            .filter_map(|c| match c {
                Comp::Var(s, ..) => Some(*s),
                Comp::Const(_) => None,
            })
            .chain(*guard)
            .collect(),
        KOp::Gather { guard, .. } => guard.iter().copied().collect(),
        KOp::Scatter { guard, val, .. } => guard.iter().copied().chain([*val]).collect(),
    }
}

/// One iteration of the paired loop: elements `e` and `e + 1` of the block. Element-wise
/// arithmetic ([`vectorizable`]) runs in `f64x2` registers, one lane per element; every other
/// operation (calls, index arithmetic, gathers, scatters) runs the scalar code once per element,
/// the first element's first. Values move between the two forms where an operation of the other
/// kind needs them. Each lane computes exactly what the scalar loop computes for its element;
/// a scatter target receives the same terms, the two elements' interleaved operation by
/// operation. Returns the updated out-of-bounds flag.
/// Two elements' code (`e`, `e + 1`; index counters `idx` at `e`); returns the lanes' bad flag
/// and the counters at `e + 1`.
/// `adjacent`: the kernel has one root, stored at a stride of 8 bytes in this loop.
#[allow(clippy::too_many_arguments)]
fn pair_body(
    b: &mut FunctionBuilder,
    env: &Env,
    start: Value,
    e: Value,
    idx: &[Value],
    bad: Value,
    adjacent: bool,
) -> (Value, Vec<Value>) {
    let k = env.k;
    let e1 = b.ins().iadd_imm_u(e, 1);
    let zero = b.ins().iconst(types::I64, 0);
    let idx1 = env.counters.next(b, idx);
    let mut lanes = [
        Lane::new(b, k, start, e, env.counters.lane(idx), bad),
        Lane::new(b, k, start, e1, env.counters.lane(&idx1), zero),
    ];
    let e8 = lanes[0].e8;
    let fzero = lanes[0].fzero;
    let vzero = b.ins().splat(types::F64X2, fzero);
    let vone = b.ins().splat(types::F64X2, lanes[0].fone);
    let mut vslot: HashMap<u32, Value> = HashMap::new();
    // slots' values as `f32x4` (lanes 0 and 1), for `f32` operations ([`pair_f32`])
    let mut vslot32: HashMap<u32, Value> = HashMap::new();
    // constants splatted once (built from the lanes' scalars at every use, a chain of maps
    // ran 1.7× slower)
    for &(s, _) in &k.consts {
        let c = lanes[0].slot[&s];
        vslot.insert(s, b.ins().splat(types::F64X2, c));
    }
    // a slot's `f64x2` value, built from the lanes' scalars where only those exist
    let vec_of =
        |b: &mut FunctionBuilder, vslot: &mut HashMap<u32, Value>, lanes: &[Lane; 2], s: Src| {
            match s {
                Src::P(p) => {
                    let addr = b.ins().iadd(env.param_base[p as usize], e8);
                    b.ins().load(types::F64X2, env.mem, addr, 0)
                }
                Src::S(s) => *vslot.entry(s).or_insert_with(|| {
                    let v = b.ins().scalar_to_vector(types::F64X2, lanes[0].slot[&s]);
                    b.ins().insertlane(v, lanes[1].slot[&s], 1)
                }),
            }
        };
    // a lane mask (all ones where `cc` holds) as `f64x2` bits, for `bitselect`
    let mask = |b: &mut FunctionBuilder, cc: FloatCC, x: Value, y: Value| {
        let m = b.ins().fcmp(cc, x, y);
        b.ins().bitcast(types::F64X2, MemFlagsData::new(), m)
    };
    for (j, op) in k.ops.iter().enumerate() {
        if !vectorizable(op) {
            for (i, l) in lanes.iter_mut().enumerate() {
                for s in operands(op) {
                    if let Src::S(s) = s {
                        l.slot
                            .entry(s)
                            .or_insert_with(|| b.ins().extractlane(vslot[&s], i as u8));
                    }
                }
                emit_scalar(b, env, l, j, op);
            }
            // an earlier value of a result's slot in `f64x2` (or `f32x4`) form is stale
            for dst in op.results() {
                vslot.remove(&dst);
                vslot32.remove(&dst);
            }
            continue;
        }
        if let KOp::F32(inner) = op {
            let mut get64 = |b: &mut FunctionBuilder, s: Src| vec_of(b, &mut vslot, &lanes, s);
            let out = pair_f32(b, k, inner, &mut get64, &mut vslot32, vone);
            for (dst, v, v32) in out {
                vslot.insert(dst, v);
                match v32 {
                    Some(v32) => vslot32.insert(dst, v32),
                    None => vslot32.remove(&dst),
                };
                for l in &mut lanes {
                    l.slot.remove(&dst);
                    l.ints.remove(&dst);
                    l.f32s.remove(&dst);
                }
            }
            continue;
        }
        let shifted: Vec<_> = lanes
            .iter()
            .map(|l| shifted_index(b, env, &l.ints, op))
            .collect();
        let mut get = |b: &mut FunctionBuilder, s: Src| vec_of(b, &mut vslot, &lanes, s);
        let out: Vec<(u32, Value)> = match op {
            KOp::Un { op, a, dst, d } => {
                let x = get(b, *a);
                let v = match op {
                    Op1::Neg => b.ins().fneg(x),
                    Op1::Sqrt => b.ins().sqrt(x),
                    Op1::Abs => b.ins().fabs(x),
                    Op1::Powi(n) => powi(b, x, *n, vone),
                    _ => b.ins().fdiv(vone, x),
                };
                let mut out = vec![(*dst, v)];
                if let Some(ds) = d {
                    let dv = un_partial_inline(b, *op, x, v, vone).expect("vectorizable");
                    out.push((*ds, dv));
                }
                out
            }
            KOp::Bin {
                op,
                a,
                b: bb,
                dst,
                d,
            } => {
                let x = get(b, *a);
                let y = get(b, *bb);
                let v = match op {
                    Op2::Add => b.ins().fadd(x, y),
                    Op2::Sub => b.ins().fsub(x, y),
                    Op2::Mul => b.ins().fmul(x, y),
                    Op2::Div => b.ins().fdiv(x, y),
                    _ => {
                        // as `max_min`: `y` where it wins or `x` is NaN
                        let max = *op == Op2::Max;
                        let pick_y = match max_min_plan(k, max, *a, *bb) {
                            MaxMin::One(cc) => mask(b, cc, x, y),
                            MaxMin::Two(cc) => {
                                let wins = mask(b, cc, x, y);
                                let nan = mask(b, FloatCC::Unordered, x, x);
                                b.ins().bor(wins, nan)
                            }
                        };
                        b.ins().bitselect(pick_y, y, x)
                    }
                };
                let mut out = vec![(*dst, v)];
                if let Some((sx, sy)) = d {
                    out.push((
                        *sx,
                        arith_partial(b, *op, 0, x, y, vone).expect("vectorizable"),
                    ));
                    out.push((
                        *sy,
                        arith_partial(b, *op, 1, x, y, vone).expect("vectorizable"),
                    ));
                }
                out
            }
            KOp::D2 {
                op,
                w,
                a,
                b: bb,
                dst,
                ..
            } => {
                let x = get(b, *a);
                let y = get(b, *bb);
                vec![(
                    *dst,
                    arith_partial(b, *op, *w as u64, x, y, vone).expect("vectorizable"),
                )]
            }
            KOp::AdjMul { g, d, dst } => {
                let gv = get(b, *g);
                let dv = get(b, *d);
                let m = b.ins().fmul(gv, dv);
                let live = mask(b, FloatCC::NotEqual, gv, vzero);
                vec![(*dst, b.ins().band(m, live))]
            }
            KOp::Select { c, a, b: bb, dst } => {
                let cv = get(b, *c);
                let x = get(b, *a);
                let y = get(b, *bb);
                let nz = mask(b, FloatCC::NotEqual, cv, vzero);
                vec![(*dst, b.ins().bitselect(nz, x, y))]
            }
            _ => unreachable!("vectorizable operations are matched above"),
        };
        debug_assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            op.results(),
            "results"
        );
        for (dst, v) in out {
            vslot.insert(dst, v);
            vslot32.remove(&dst);
            // the lanes' scalars of an earlier value of this slot are stale
            for l in &mut lanes {
                l.slot.remove(&dst);
                l.ints.remove(&dst);
                l.f32s.remove(&dst);
            }
        }
        for (l, shifted) in lanes.iter_mut().zip(shifted) {
            if let Some((dst, int)) = shifted {
                l.ints.insert(dst, int);
            }
        }
    }
    for (r, root) in k.roots.iter().enumerate() {
        // the only root, in vector form, whose elements are adjacent (stride 8 bytes, a map's
        // output) is stored in one instruction; otherwise lane by lane (a branch per root
        // split the body of BA's 30-root kernel into 30 diamonds and made it 4× slower)
        if let Src::S(s) = root {
            if adjacent && !lanes[0].slot.contains_key(s) {
                let at = b.ins().ishl_imm_u(lanes[0].e, 3);
                let addr = b.ins().iadd(env.root_base[r], at);
                b.ins().store(env.mem, vslot[s], addr, 0);
                continue;
            }
        }
        for (i, l) in lanes.iter().enumerate() {
            let v = match root {
                Src::S(s) if !l.slot.contains_key(s) => b.ins().extractlane(vslot[s], i as u8),
                _ => l.val(b, env, *root),
            };
            let at = b.ins().imul(l.e, env.root_stride[r]);
            let addr = b.ins().iadd(env.root_base[r], at);
            b.ins().store(env.mem, v, addr, 0);
        }
    }
    let [l0, l1] = lanes;
    (b.ins().bor(l0.bad, l1.bad), idx1)
}

/// The first (`w = 0`) or second partial of `+ − × ÷` at `(x, y)` with the rule table's
/// operations, on `f64` or `f64x2` values (`one` of the same type); `None` for other ops.
fn arith_partial(
    b: &mut FunctionBuilder,
    op: Op2,
    w: u64,
    x: Value,
    y: Value,
    one: Value,
) -> Option<Value> {
    Some(match (op, w) {
        (Op2::Add, _) | (Op2::Sub, 0) => one,
        (Op2::Sub, _) => b.ins().fneg(one),
        (Op2::Mul, 0) => y,
        (Op2::Mul, _) => x,
        // the rule table: ∂/∂x = 1/y, ∂/∂y = −((x/y)·(1/y)), or −((x/y)/y) where 1/y
        // overflows, the same operations (`x`, `y` are `f64` or `f64x2`)
        (Op2::Div, 0) => b.ins().fdiv(one, y),
        (Op2::Div, _) => {
            let v = b.ins().fdiv(x, y);
            let inv = b.ins().fdiv(one, y);
            let p = b.ins().fmul(v, inv);
            // The third division only on the rare path, behind a branch (always computing it
            // cost BA's compiled Jacobian 10 %).
            let size = b.ins().fabs(inv);
            let inf = b.ins().f64const(f64::INFINITY);
            let ty = b.func.dfg.value_type(x);
            let (m, any) = if ty.is_vector() {
                let inf = b.ins().splat(ty, inf);
                let m = b.ins().fcmp(FloatCC::Equal, size, inf);
                (m, b.ins().vany_true(m))
            } else {
                let m = b.ins().fcmp(FloatCC::Equal, size, inf);
                (m, m)
            };
            let (slow, join) = (b.create_block(), b.create_block());
            b.append_block_param(join, ty);
            b.ins().brif(any, slow, &[], join, &[p.into()]);
            b.switch_to_block(slow);
            let q = b.ins().fdiv(v, y);
            let d = if ty.is_vector() {
                let m = b.ins().bitcast(ty, MemFlagsData::new(), m);
                b.ins().bitselect(m, q, p)
            } else {
                b.ins().select(m, q, p)
            };
            b.ins().jump(join, &[d.into()]);
            b.switch_to_block(join);
            let d = b.block_params(join)[0];
            b.ins().fneg(d)
        }
        _ => return None,
    })
}

/// Index component `axis` of flat element `flat` of the space (an integer).
fn index_component(b: &mut FunctionBuilder, k: &Kernel, axis: usize, flat: Value) -> Value {
    let (st, dim) = (k.strides[axis] as i64, k.space[axis] as i64);
    let q = b.ins().udiv_imm_u(flat, st);
    b.ins().urem_imm_u(q, dim)
}

/// How `x.max(y)` (`x.min(y)`) picks `y`: where `y` wins or `x` is NaN, so the other operand
/// where one is NaN, as Rust computes it. `One(cc)`: one comparison does, because an operand is
/// a constant that is not NaN (`x.max(0.0)`: `x < 0 or unordered`; `c.max(x)`: `c < x`, as
/// `c` is never NaN); `Two(cc)`: `cc` or `x` NaN.
#[derive(Clone, Copy)]
enum MaxMin {
    One(FloatCC),
    Two(FloatCC),
}

/// (A constant's slot is never reused for another value: `Kernel::compile` gives each constant
/// a fresh slot and never frees it, so `k.consts` says what the slot holds at every use.)
fn max_min_plan(k: &Kernel, max: bool, a: Src, b: Src) -> MaxMin {
    let number = |s: Src| k.consts.iter().any(|&(c, v)| Src::S(c) == s && !v.is_nan());
    let (wins, or_nan) = if max {
        (FloatCC::LessThan, FloatCC::UnorderedOrLessThan)
    } else {
        (FloatCC::GreaterThan, FloatCC::UnorderedOrGreaterThan)
    };
    if number(b) {
        MaxMin::One(or_nan)
    } else if number(a) {
        MaxMin::One(wins)
    } else {
        MaxMin::Two(wins)
    }
}

/// `x.max(y)` (`x.min(y)`) as Rust computes it (see [`max_min_plan`]).
fn max_min(b: &mut FunctionBuilder, plan: MaxMin, x: Value, y: Value) -> Value {
    let pick_y = match plan {
        MaxMin::One(cc) => b.ins().fcmp(cc, x, y),
        MaxMin::Two(cc) => {
            let wins = b.ins().fcmp(cc, x, y);
            let x_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
            b.ins().bor(wins, x_nan)
        }
    };
    b.ins().select(pick_y, y, x)
}

/// The first (`w = 0`) or second partial of a binary op: inline for `+ − × ÷`
/// ([`arith_partial`]) and `max`/`min`, a call otherwise.
#[allow(clippy::too_many_arguments)]
fn partial(
    b: &mut FunctionBuilder,
    op: Op2,
    w: u64,
    x: Value,
    y: Value,
    one: Value,
    p: Value,
    sig: cranelift_codegen::ir::SigRef,
) -> Value {
    if let Some(v) = arith_partial(b, op, w, x, y, one) {
        return v;
    }
    match (op, w) {
        (Op2::Max | Op2::Min, _) => {
            // the rule table: the larger (smaller) operand gets 1, a tie ½ each, and
            // against a NaN the non-NaN operand's partial is 1
            let (gt, lt) = if op == Op2::Max {
                (FloatCC::GreaterThan, FloatCC::LessThan)
            } else {
                (FloatCC::LessThan, FloatCC::GreaterThan)
            };
            let take_x = b.ins().fcmp(gt, x, y);
            let take_y = b.ins().fcmp(lt, x, y);
            let tie = b.ins().fcmp(FloatCC::Equal, x, y);
            let x_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
            let zero = b.ins().f64const(0.0);
            let half = b.ins().f64const(0.5);
            let (mine, other) = if w == 0 {
                (take_x, take_y)
            } else {
                (take_y, take_x)
            };
            // neither wins, no tie: a NaN is involved; x's partial is 0 when x is NaN
            let nan_case = if w == 0 {
                b.ins().select(x_nan, zero, one)
            } else {
                b.ins().select(x_nan, one, zero)
            };
            let v = b.ins().select(tie, half, nan_case);
            let v = b.ins().select(other, zero, v);
            b.ins().select(mine, one, v)
        }
        _ => {
            let f = b
                .ins()
                .iconst(types::I64, bin_d as *const () as usize as i64);
            let wv = b.ins().iconst(types::I64, w as i64);
            let c = b.ins().call_indirect(sig, f, &[p, wv, x, y]);
            b.inst_results(c)[0]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn un(op: Op1, a: Src, dst: u32) -> KOp {
        KOp::Un {
            op,
            a,
            dst,
            d: None,
        }
    }

    /// `powi` with |n| ≤ 64 is inline and paired (two elements in `f64x2`), larger exponents
    /// call the rule table (its value and partials are checked bit for bit against the
    /// interpreter in `tests/jit.rs`).
    #[test]
    fn small_powers_are_inline_and_paired() {
        for n in [-64, -1, 0, 1, 2, 3, 64] {
            assert!(powi_inline(n), "{n}");
            let op = KOp::Un {
                op: Op1::Powi(n),
                a: Src::S(0),
                dst: 1,
                d: Some(2),
            };
            assert!(vectorizable(&op), "{n}");
        }
        for n in [-65, 65, i32::MAX, i32::MIN] {
            assert!(!powi_inline(n), "{n}");
            assert!(!vectorizable(&un(Op1::Powi(n), Src::S(0), 1)), "{n}");
        }
    }

    #[test]
    fn sin_and_cos_twins_only_of_the_same_value() {
        let (x, y) = (Src::S(0), Src::P(0));
        let ops = [
            un(Op1::Sin, x, 1),         // 0: twin of 2
            un(Op1::Sin, y, 2),         // 1: twin of 3
            un(Op1::Cos, x, 3),         // 2
            un(Op1::Cos, y, 4),         // 3
            un(Op1::Cos, x, 0),         // 4: overwrites x: its sin at 5 is of another value
            un(Op1::Sin, x, 5),         // 5: twin of 6 (the new x)
            un(Op1::Cos, x, 6),         // 6
            un(Op1::Cos, Src::S(5), 7), // 7: no sin of slot 5 follows
            un(Op1::Exp, x, 8),
        ];
        assert_eq!(
            sin_cos_twins(&ops),
            [
                Some(2),
                Some(3),
                None,
                None,
                None,
                Some(6),
                None,
                None,
                None
            ]
        );
        // an argument overwritten between the two: no twin
        let ops = [
            un(Op1::Sin, x, 1),
            KOp::Bin {
                op: Op2::Add,
                a: x,
                b: x,
                dst: 0,
                d: None,
            },
            un(Op1::Cos, x, 2),
        ];
        assert_eq!(sin_cos_twins(&ops), [None, None, None]);
    }
}
