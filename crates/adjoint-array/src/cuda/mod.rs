//! CUDA C for the array engine's kernels (the first part of the GPU backend, issue #17).
//!
//! A [`Kernel`] is a list of operations on one element of an iteration space (`KOp`s over
//! slots), the same list the interpreter runs block by block and Cranelift compiles into a loop.
//! [`kernel_source`] prints it as a CUDA C kernel in which **thread `e` computes element `e`**:
//! slots become local `double`s, offsets `long long`s, reads are loads at the offset the
//! interpreter computes, every rule-table value and partial is a call into the prelude
//! (`prelude.cuh`: `adjoint_core::rules` written in C, operation for operation), and results go
//! to the thread's own element of each output:
//!
//! - root `i` (a value the caller reads after the kernel: a `map`'s result, an adjoint) is
//!   stored at `r{i}[e]`;
//! - scatter `j` (an indexed read's adjoint, added into an array) is not added anywhere: the
//!   thread writes its *contribution*, the value at `cv{j}[e]` and the target offset at
//!   `ci{j}[e]` (`-1` when the read was not taken; packed into one `cv` and one `ci` array for
//!   the executor, [`kernel_source_layout`]), and a separate combining step sums the
//!   contributions per target element in a fixed order. With no floating-point atomics, no
//!   shared memory and no barriers, a kernel's results do not depend on how the GPU schedules
//!   its threads: run to run they are bit-identical;
//! - an index out of bounds makes the thread read element 0 instead and record its element
//!   number in `bad` with an integer `atomicMin`, so the smallest bad element is found the same
//!   way every run, and the caller re-runs that element on the CPU for the error message.
//!
//! The prelude compiles both as CUDA C (NVRTC) and as C99. That is how the generated code is
//! tested on machines without a GPU: the tests compile each kernel with the host's C compiler,
//! run its threads one after another, and compare every root and contribution with the
//! interpreter's (see `tests.rs`). Not supported yet, and refused with a clear error: `f32`
//! kernels (the issue asks for `f64` throughout).
//!
//! The executor (`run.rs`, feature `cuda`) runs whole programs from these kernels, combining
//! the contributions with the kernels of [`combine_source`], [`scan_combine_source`] and
//! `adj_scatter_direct` ([`direct_offsets`], [`static_offsets`]); the device layer
//! (`device.rs`) compiles and launches them. Scans, `scan_n`, permutes, folds other than sums
//! and `awhile` run on the host inside a GPU program (their operands read back, their results
//! uploaded); `f32` arrays are refused with an error.

use crate::error::{Error, Result};
use crate::expr::DOp;
use crate::kernel::{Comp, KOp, Kernel, Src};
use adjoint_core::rules::{Op1, Op2};
use std::fmt::Write;

/// The prelude every generated module starts with.
pub(crate) const PRELUDE: &str = include_str!("prelude.cuh");

/// The generated CUDA C of one kernel, and what its launch passes.
///
/// The kernel's parameters, in order: the element count `n` (`unsigned long long`), one
/// `const double*` per kernel parameter (`p0, p1, …`: per-element values, `n` each), one per
/// array read (`a0, …`: the whole array), one `double*` per root (`r0, …`: `n` each), then per
/// scatter a `double*` and a `long long*` (`cv0, ci0, cv1, ci1, …`: `n` each; the `long long*`
/// only where [`KernelSource::indexed`]), and last an
/// `unsigned long long* bad` holding `ULLONG_MAX` before the launch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KernelSource {
    /// the kernel's function name
    pub name: String,
    /// its definition (without the prelude)
    pub code: String,
    /// number of per-element parameters
    pub params: usize,
    /// number of arrays read
    pub arrays: usize,
    /// number of root arrays (one per root, or one for [`Roots::Interleaved`])
    pub roots: usize,
    /// the scatter target (index into `Kernel::targets`) of each scatter, in order
    pub scatters: Vec<usize>,
    /// per scatter: whether its target offsets are written (`ci{j}` is an argument)
    pub indexed: Vec<bool>,
    /// whether the contributions are packed into `cv` and `ci` ([`kernel_source_layout`])
    pub packed: bool,
}

fn unsupported(what: &str) -> Error {
    Error::Invalid(format!(
        "the CUDA backend does not support {what} yet; run this program on the CPU backend"
    ))
}

/// An `f64` as an exact C expression (its bits).
fn lit(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        // integers print exactly and readably (`-0.0` keeps its sign)
        format!("{v:?}")
    } else {
        format!("adj_bits(0x{:016x}ULL)", v.to_bits())
    }
}

fn src(s: Src) -> String {
    match s {
        Src::S(i) => format!("s{i}"),
        Src::P(p) => format!("p{p}[e]"),
    }
}

/// The prelude function of a unary primitive and the order argument it takes first, if any.
fn op1_fn(op: Op1) -> (&'static str, Option<String>) {
    let name = match op {
        Op1::Neg => "neg",
        Op1::Recip => "recip",
        Op1::Sqrt => "sqrt",
        Op1::Cbrt => "cbrt",
        Op1::Powi(n) => return ("powi", Some(format!("{n}"))),
        Op1::Exp => "exp",
        Op1::Exp2 => "exp2",
        Op1::ExpM1 => "expm1",
        Op1::Ln => "ln",
        Op1::Ln1p => "ln1p",
        Op1::Log2 => "log2",
        Op1::Log10 => "log10",
        Op1::Sin => "sin",
        Op1::Cos => "cos",
        Op1::Tan => "tan",
        Op1::Asin => "asin",
        Op1::Acos => "acos",
        Op1::Atan => "atan",
        Op1::Sinh => "sinh",
        Op1::Cosh => "cosh",
        Op1::Tanh => "tanh",
        Op1::Asinh => "asinh",
        Op1::Acosh => "acosh",
        Op1::Atanh => "atanh",
        Op1::Abs => "abs",
        Op1::Erf => "erf",
        Op1::Lgamma => "lgamma",
        Op1::Polygamma(n) => return ("polygamma", Some(format!("{n}u"))),
    };
    (name, None)
}

fn op2_fn(op: Op2) -> &'static str {
    match op {
        Op2::Add => "add",
        Op2::Sub => "sub",
        Op2::Mul => "mul",
        Op2::Div => "div",
        Op2::Powf => "powf",
        Op2::Atan2 => "atan2",
        Op2::Min => "min",
        Op2::Max => "max",
        Op2::Hypot => "hypot",
        Op2::Rem => "rem",
    }
}

/// `adj_u_NAME([order, ]x, v, d, dd)` with the outputs given as C lvalues (`None`: discarded).
fn call1(op: Op1, x: &str, outs: [Option<String>; 3]) -> String {
    let (name, order) = op1_fn(op);
    let mut args: Vec<String> = order.into_iter().collect();
    args.push(x.to_string());
    for (o, dummy) in outs.into_iter().zip(["t_v", "t_d", "t_dd"]) {
        args.push(format!("&{}", o.as_deref().unwrap_or(dummy)));
    }
    format!("adj_u_{name}({});", args.join(", "))
}

/// `adj_b_NAME(x, y, v, dx, dy, dxx, dxy, dyy)` with the outputs given as C lvalues.
fn call2(op: Op2, x: &str, y: &str, outs: [Option<String>; 6]) -> String {
    let mut args = vec![x.to_string(), y.to_string()];
    for (o, dummy) in outs
        .into_iter()
        .zip(["t_v", "t_d", "t_d2", "t_dxx", "t_dxy", "t_dyy"])
    {
        args.push(format!("&{}", o.as_deref().unwrap_or(dummy)));
    }
    format!("adj_b_{}({});", op2_fn(op), args.join(", "))
}

fn disc(op: DOp, a: &str, b: &str) -> String {
    let t = |c: String| format!("(({c}) ? 1.0 : 0.0)");
    match op {
        DOp::Floor => format!("floor({a})"),
        DOp::Ceil => format!("ceil({a})"),
        DOp::Round => format!("round({a})"),
        DOp::Trunc => format!("trunc({a})"),
        DOp::Lt => t(format!("{a} < {b}")),
        DOp::Le => t(format!("{a} <= {b}")),
        DOp::Gt => t(format!("{a} > {b}")),
        DOp::Ge => t(format!("{a} >= {b}")),
        DOp::Eq => t(format!("{a} == {b}")),
        DOp::Ne => t(format!("{a} != {b}")),
        DOp::And => t(format!("{a} != 0.0 && {b} != 0.0")),
        DOp::Or => t(format!("{a} != 0.0 || {b} != 0.0")),
        DOp::Not => t(format!("{a} == 0.0")),
        DOp::IDiv => format!("floor({a} / {b})"),
        DOp::SignBit => t(format!("signbit({a})")),
    }
}

/// Print kernel `k` as the CUDA C function `name` (see the module docs for its parameters).
#[cfg_attr(not(test), allow(dead_code))] // the tests' entry point
pub(crate) fn kernel_source(k: &Kernel, name: &str) -> Result<KernelSource> {
    kernel_source_layout(k, name, Roots::Separate, &|_| true, false)
}

/// Where a kernel's roots go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Roots {
    /// root `i` to its own array `r{i}` (`n` elements)
    Separate,
    /// every root to one array `r0` of `n × roots` elements, element `e`'s root `i` at
    /// `r0[e · roots + i]`: the layout of a `generate_n` node's value
    Interleaved,
}

/// [`kernel_source`] with the roots laid out as `roots` says, and the target offsets of the
/// scatters into target `t` written only where `indexed(t)` (a target combined by an affine
/// [`combine_source`] kernel needs only the values). `packed`: the contributions go to two
/// arrays, `cv` with scatter `j`'s values at `cv[j·n + e]` and `ci` with the target offsets of
/// the indexed scatters, in their order, at `ci[slot·n + e]`: a kernel with thousands of
/// scatters (ADBench GMM at d = 64 has 2080) then still takes a handful of arguments; unpacked,
/// scatter `j` writes `cv{j}` and `ci{j}`.
pub(crate) fn kernel_source_layout(
    k: &Kernel,
    name: &str,
    roots: Roots,
    indexed: &dyn Fn(usize) -> bool,
    packed: bool,
) -> Result<KernelSource> {
    let mut slots = 0usize;
    let nslots = k.nslots;
    // the interpreter indexes its parameter slices by `Src::P`, so `k.params` covers them all
    let nparams = k.params.len();
    let mut scatters = Vec::new();
    let mut body = String::new();
    let s = &mut body;
    for &(slot, v) in &k.consts {
        writeln!(s, "  s{slot} = {};", lit(v)).unwrap();
    }
    for op in &k.ops {
        match op {
            KOp::Idx { axis, dst } => {
                let (st, dim) = (k.strides[*axis], k.space[*axis]);
                writeln!(s, "  s{dst} = (double)((e / {st}ULL) % {dim}ULL);").unwrap();
            }
            KOp::Un { op, a, dst, d } => {
                let outs = [Some(format!("s{dst}")), d.map(|d| format!("s{d}")), None];
                writeln!(s, "  {}", call1(*op, &src(*a), outs)).unwrap();
            }
            KOp::D1 { op, a, dst, second } => {
                let mut outs = [None, None, None];
                outs[if *second { 2 } else { 1 }] = Some(format!("s{dst}"));
                writeln!(s, "  {}", call1(*op, &src(*a), outs)).unwrap();
            }
            KOp::Bin { op, a, b, dst, d } => {
                let outs = [
                    Some(format!("s{dst}")),
                    d.map(|d| format!("s{}", d.0)),
                    d.map(|d| format!("s{}", d.1)),
                    None,
                    None,
                    None,
                ];
                writeln!(s, "  {}", call2(*op, &src(*a), &src(*b), outs)).unwrap();
            }
            KOp::D2 {
                op,
                w,
                a,
                b,
                dst,
                second,
            } => {
                let mut outs = [None, None, None, None, None, None];
                let at = match (*second, *w) {
                    (false, 0) => 1,
                    (false, _) => 2,
                    (true, w) => 3 + (w as usize).min(2),
                };
                outs[at] = Some(format!("s{dst}"));
                writeln!(s, "  {}", call2(*op, &src(*a), &src(*b), outs)).unwrap();
            }
            KOp::AdjMul { g, d, dst } => {
                writeln!(s, "  s{dst} = adj_adjmul({}, {});", src(*g), src(*d)).unwrap();
            }
            KOp::Disc { op, a, b, dst } => {
                writeln!(s, "  s{dst} = {};", disc(*op, &src(*a), &src(*b))).unwrap();
            }
            KOp::Select { c, a, b, dst } => {
                writeln!(
                    s,
                    "  s{dst} = {} != 0.0 ? {} : {};",
                    src(*c),
                    src(*a),
                    src(*b)
                )
                .unwrap();
            }
            KOp::F32(_) | KOp::Cast { .. } => return Err(unsupported("f32 arrays")),
            KOp::Offset {
                arr: _,
                comps,
                guard,
                quiet,
                dst,
            } => {
                // As the interpreter: the sum of the variable components times their strides,
                // each checked against its axis (constant components are in the gathers' `c`);
                // an element whose guard is zero reads nothing and cannot be out of bounds.
                writeln!(s, "  {{").unwrap();
                writeln!(s, "    long long o_ = 0;").unwrap();
                writeln!(s, "    int bad_ = 0;").unwrap();
                for c in comps {
                    if let Comp::Var(x, st, dim) = c {
                        let x = src(*x);
                        writeln!(
                            s,
                            "    if ({x} >= 0.0 && {x} < {dim}.0) o_ += (long long){x} * {st}LL; else bad_ = 1;"
                        )
                        .unwrap();
                    }
                }
                if let Some(g) = guard {
                    writeln!(s, "    if ({} == 0.0) {{ o_ = 0; bad_ = 0; }}", src(*g)).unwrap();
                }
                if *quiet {
                    // element 0 instead; a later offset with the read's guard reports
                    writeln!(s, "    if (bad_) o_ = 0;").unwrap();
                } else {
                    writeln!(s, "    if (bad_) {{ ADJ_BAD(bad, e); o_ = 0; }}").unwrap();
                }
                writeln!(s, "    o{dst} = o_;").unwrap();
                writeln!(s, "  }}").unwrap();
            }
            KOp::Gather {
                arr,
                off,
                c,
                guard,
                dst,
            } => {
                let at = match off {
                    Some(o) => format!("a{arr}[o{o} + {c}]"),
                    None => format!("a{arr}[{c}]"),
                };
                match guard {
                    Some(g) => writeln!(s, "  s{dst} = {} != 0.0 ? {at} : 0.0;", src(*g)),
                    None => writeln!(s, "  s{dst} = {at};"),
                }
                .unwrap();
            }
            KOp::Scatter {
                target,
                off,
                c,
                guard,
                val,
            } => {
                let j = scatters.len();
                scatters.push(*target);
                let at = match off {
                    Some(o) => format!("o{o} + {c}"),
                    None => format!("{c}"),
                };
                let v = src(*val);
                let with_index = indexed(*target);
                let (cv, ci) = if packed {
                    let slot = slots;
                    slots += usize::from(with_index);
                    (
                        format!("cv[{j}ULL * n + e]"),
                        format!("ci[{slot}ULL * n + e]"),
                    )
                } else {
                    (format!("cv{j}[e]"), format!("ci{j}[e]"))
                };
                match guard {
                    // as the interpreter: a guarded scatter adds only live, nonzero values
                    Some(g) => {
                        let live = format!("({} != 0.0 && {v} != 0.0)", src(*g));
                        writeln!(s, "  {cv} = {live} ? {v} : 0.0;").unwrap();
                        if with_index {
                            writeln!(s, "  {ci} = {live} ? (long long)({at}) : -1LL;").unwrap();
                        }
                    }
                    None => {
                        writeln!(s, "  {cv} = {v};").unwrap();
                        if with_index {
                            writeln!(s, "  {ci} = (long long)({at});").unwrap();
                        }
                    }
                }
            }
        }
    }
    let nroots = k.roots.len();
    for (i, r) in k.roots.iter().enumerate() {
        match roots {
            Roots::Separate => writeln!(s, "  r{i}[e] = {};", src(*r)),
            Roots::Interleaved => writeln!(s, "  r0[e * {nroots}ULL + {i}ULL] = {};", src(*r)),
        }
        .unwrap();
    }
    let root_arrays = match roots {
        Roots::Separate => nroots,
        Roots::Interleaved => usize::from(nroots > 0),
    };

    let mut args = vec!["unsigned long long n".to_string()];
    args.extend((0..nparams).map(|p| format!("const double* p{p}")));
    args.extend((0..k.arrays.len()).map(|a| format!("const double* a{a}")));
    args.extend((0..root_arrays).map(|r| format!("double* r{r}")));
    let indexed: Vec<bool> = scatters.iter().map(|&t| indexed(t)).collect();
    if packed {
        if !scatters.is_empty() {
            args.push("double* cv".into());
        }
        if indexed.contains(&true) {
            args.push("long long* ci".into());
        }
    } else {
        for (j, &with_index) in indexed.iter().enumerate() {
            args.push(format!("double* cv{j}"));
            if with_index {
                args.push(format!("long long* ci{j}"));
            }
        }
    }
    args.push("unsigned long long* bad".to_string());
    let mut code = String::new();
    writeln!(code, "ADJ_KERNEL {name}({}) {{", args.join(", ")).unwrap();
    writeln!(code, "  const unsigned long long e = ADJ_ELEMENT;").unwrap();
    writeln!(code, "  if (e >= n) return;").unwrap();
    writeln!(code, "  (void)bad;").unwrap();
    writeln!(
        code,
        "  double t_v, t_d, t_d2, t_dd, t_dxx, t_dxy, t_dyy; (void)t_v; (void)t_d; (void)t_d2; (void)t_dd; (void)t_dxx; (void)t_dxy; (void)t_dyy;"
    )
    .unwrap();
    if nslots > 0 {
        let decl: Vec<String> = (0..nslots).map(|i| format!("s{i} = 0.0")).collect();
        writeln!(code, "  double {};", decl.join(", ")).unwrap();
    }
    let offs: Vec<String> = k
        .ops
        .iter()
        .filter_map(|op| match op {
            KOp::Offset { dst, .. } => Some(format!("o{dst} = 0")),
            _ => None,
        })
        .collect();
    if !offs.is_empty() {
        writeln!(code, "  long long {};", offs.join(", ")).unwrap();
    }
    code.push_str(&body);
    code.push_str("}\n");
    Ok(KernelSource {
        name: name.to_string(),
        code,
        params: nparams,
        arrays: k.arrays.len(),
        roots: root_arrays,
        scatters,
        indexed,
        packed,
    })
}

/// The executor's fixed kernels (`runtime.cuh`): adding adjoints, broadcast adds, matrix
/// products and row folds, each thread computing one output element in a fixed order.
pub(crate) const RUNTIME: &str = include_str!("runtime.cuh");

/// Sums longer than this many terms are split into parts of [`CHUNK`] (then the parts are
/// added in order): a thread per part keeps the GPU busy where a thread per sum would wait on
/// one long chain of loads.
pub(crate) const SPLIT_SUM: usize = 256;
/// The terms per part of a split sum.
pub(crate) const CHUNK: usize = 64;

/// A combining kernel ([`combine_source`]) and how its sums are split.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CombineSource {
    /// the kernel's definition
    pub code: String,
    /// `1`: the kernel adds each target element's sum into `out`; more: it writes part `p` of
    /// target element `t` at `part[p·m + t]`, `parts × m` threads, and `adj_add_parts` adds
    /// the parts into `out` in order
    pub parts: usize,
}

/// A combining kernel for the scatters `js` of kernel `k` into its target `t` (of `m`
/// elements) whose indices are affine ([`Kernel`]'s `target_forms`) and one-to-one in the
/// space's axes they use: **one thread per target element** (per part of its sum, when the
/// sums are long) finds, for each scatter in order, the one combination of those axes that
/// reaches it (if any) and adds that scatter's contributions over the remaining axes in
/// element order. So the sums are in a fixed order, with no sort, no atomics and no
/// per-element target indices. Returns `None` when some scatter of `t` is not of that kind
/// (the caller combines those on the host).
///
/// The kernel's parameters: `n` (`m × parts` threads), the kernel's packed contribution values
/// (`const double* cv`, scatter `j`'s at `cv[j·N ..]` for the kernel's `N` elements:
/// [`kernel_source_layout`]), and `double* out`: the target's adjoint, which the sums are added
/// to (one part), or the parts (several).
pub(crate) fn combine_source(
    k: &Kernel,
    t: usize,
    js: &[usize],
    m: usize,
    name: &str,
) -> Option<CombineSource> {
    let forms = k.target_forms.get(t)?.as_ref()?;
    if forms.len() != js.len() {
        return None;
    }
    let plans = affine_plans(k, forms)?;
    let longest = plans
        .iter()
        .map(|(_, _, _, dr)| dr.iter().map(|&a| k.space[a]).product::<usize>())
        .max()
        .unwrap_or(1);
    combine_from_plans(k, &plans, longest, js, m, name)
}

/// Per scatter of an affine target: the constant, each axis's stride in the target, the axes
/// it keeps (largest stride first) and those it drops; `None` unless each is one-to-one in the
/// axes it keeps.
type Plan = (usize, Vec<usize>, Vec<usize>, Vec<usize>);

fn affine_plans(k: &Kernel, forms: &[crate::kernel::Affine]) -> Option<Vec<Plan>> {
    let rank = k.space.len();
    let mut plans = Vec::with_capacity(forms.len());
    for f in forms {
        // the stride of each axis in the target (summed when an axis occurs twice)
        let mut st = vec![0usize; rank];
        for &(a, s) in &f.terms {
            st[a] += s;
        }
        let mut kept: Vec<usize> = (0..rank).filter(|&a| st[a] != 0).collect();
        kept.sort_by_key(|&a| std::cmp::Reverse(st[a]));
        // one-to-one: each stride exceeds the largest offset the smaller ones can make
        for (x, &a) in kept.iter().enumerate() {
            let below: usize = kept[x + 1..]
                .iter()
                .map(|&b| st[b] * (k.space[b].max(1) - 1))
                .sum();
            if st[a] <= below {
                return None;
            }
        }
        let dropped: Vec<usize> = (0..rank).filter(|&a| st[a] == 0).collect();
        // (a negative constant, a neighbour before the first element, is combined on the host)
        plans.push((usize::try_from(f.c).ok()?, st, kept, dropped));
    }
    Some(plans)
}

/// Whether target `t` of kernel `k` is combined by an affine [`combine_source`] kernel (which
/// reads no target offsets).
pub(crate) fn affine_target(k: &Kernel, t: usize) -> bool {
    k.target_forms
        .get(t)
        .and_then(|f| f.as_ref())
        .and_then(|f| affine_plans(k, f))
        .is_some()
}

fn combine_from_plans(
    k: &Kernel,
    plans: &[Plan],
    longest: usize,
    js: &[usize],
    m: usize,
    name: &str,
) -> Option<CombineSource> {
    let n: usize = k.space.iter().product();
    let parts = if longest > SPLIT_SUM {
        longest.div_ceil(CHUNK)
    } else {
        1
    };
    let chunk = if parts > 1 { CHUNK } else { longest.max(1) };
    let mut body = String::new();
    for (q, (c, st, kept, dropped)) in plans.iter().enumerate() {
        let terms: usize = dropped.iter().map(|&a| k.space[a]).product();
        writeln!(body, "  if (t >= {c}ULL) {{").unwrap();
        writeln!(
            body,
            "    unsigned long long rem = t - {c}ULL, base = 0; int hit = 1;"
        )
        .unwrap();
        for &a in kept {
            let (s_t, dim, s_e) = (st[a], k.space[a], k.strides[a]);
            writeln!(
                body,
                "    {{ unsigned long long i = rem / {s_t}ULL; if (i >= {dim}ULL) hit = 0; rem -= (i < {dim}ULL ? i : 0) * {s_t}ULL; base += i * {s_e}ULL; }}"
            )
            .unwrap();
        }
        writeln!(body, "    if (hit && rem == 0) {{").unwrap();
        // the dropped axes' combined index `d`, the last axis fastest (element order)
        writeln!(
            body,
            "      const unsigned long long hi = lo + {chunk}ULL < {terms}ULL ? lo + {chunk}ULL : {terms}ULL;"
        )
        .unwrap();
        writeln!(
            body,
            "      for (unsigned long long d = lo; d < hi; d++) {{"
        )
        .unwrap();
        writeln!(body, "        unsigned long long r = d, at = base;").unwrap();
        for &a in dropped.iter().rev() {
            let (dim, s_e) = (k.space[a], k.strides[a]);
            writeln!(
                body,
                "        at += (r % {dim}ULL) * {s_e}ULL; r /= {dim}ULL;"
            )
            .unwrap();
        }
        writeln!(body, "        acc += cv[{}ULL * {n}ULL + at];", js[q]).unwrap();
        writeln!(body, "      }}").unwrap();
        writeln!(body, "    }}").unwrap();
        writeln!(body, "  }}").unwrap();
    }
    Some(combining_kernel(
        name,
        "const double* cv",
        m,
        chunk,
        parts,
        &body,
    ))
}

/// A combining kernel `name(n, <inputs>, double* out)` over `m × parts` threads: thread `e`
/// sums into `acc` part `lo = (e / m)·chunk ..` of target element `t = e % m` by `body`, then
/// adds it to `out[t]` (one part) or writes it to `out[e]` (several: `adj_add_parts` adds them).
fn combining_kernel(
    name: &str,
    inputs: &str,
    m: usize,
    chunk: usize,
    parts: usize,
    body: &str,
) -> CombineSource {
    let mut code = String::new();
    writeln!(
        code,
        "ADJ_KERNEL {name}(unsigned long long n, {inputs}, double* out) {{"
    )
    .unwrap();
    writeln!(code, "  const unsigned long long e = ADJ_ELEMENT;").unwrap();
    writeln!(code, "  if (e >= n) return;").unwrap();
    writeln!(
        code,
        "  const unsigned long long t = e % {m}ULL, lo = (e / {m}ULL) * {chunk}ULL;"
    )
    .unwrap();
    writeln!(code, "  double acc = 0.0;").unwrap();
    code.push_str(body);
    if parts == 1 {
        writeln!(code, "  out[t] += acc;").unwrap();
    } else {
        writeln!(code, "  out[e] = acc;").unwrap();
    }
    code.push_str("}\n");
    CombineSource { code, parts }
}

/// A combining kernel for scatters whose indices are not affine (they depend on data, or on
/// index arithmetic): one thread per target element (per part of the elements, when the kernel
/// has more than [`SPLIT_SUM`]) reads every contribution's target index, in element order and
/// the scatters in order per element, and adds the values that land on it. `n·m·scatters`
/// comparisons, so the executor uses it only up to a bound, and the host above it.
///
/// `js` are the scatters (their values at `cv[j·n ..]`), `slots` where their target offsets
/// are in `ci` (`ci[slot·n ..]`), both packed as [`kernel_source_layout`] packs them. The
/// kernel's parameters: the thread count (`m × parts`), `cv`, `ci`, and `out` as for
/// [`combine_source`].
pub(crate) fn scan_combine_source(
    js: &[usize],
    slots: &[usize],
    n: usize,
    m: usize,
    name: &str,
) -> CombineSource {
    let parts = if n > SPLIT_SUM { n.div_ceil(CHUNK) } else { 1 };
    let chunk = if parts > 1 { CHUNK } else { n.max(1) };
    let mut body = String::new();
    writeln!(
        body,
        "  const unsigned long long hi = lo + {chunk}ULL < {n}ULL ? lo + {chunk}ULL : {n}ULL;"
    )
    .unwrap();
    writeln!(body, "  for (unsigned long long x = lo; x < hi; x++) {{").unwrap();
    for (&j, &slot) in js.iter().zip(slots) {
        writeln!(
            body,
            "    if (ci[{slot}ULL * {n}ULL + x] == (long long)t) acc += cv[{j}ULL * {n}ULL + x];"
        )
        .unwrap();
    }
    writeln!(body, "  }}").unwrap();
    combining_kernel(
        name,
        "const double* cv, const long long* ci",
        m,
        chunk,
        parts,
        &body,
    )
}

/// Where each packed contribution of kernel `k` lands in target `t` (`[j·n + e]`, as
/// [`kernel_source_layout`] packs them; −1 for the scatters into other targets), when the
/// scatters `js` into `t` are affine and no two contributions land on the same element: then
/// each can be added where it lands, in any order, with the same result
/// (`adj_scatter_direct`). `None` otherwise, or above `limit` contributions.
pub(crate) fn direct_offsets(
    k: &Kernel,
    t: usize,
    js: &[usize],
    nscatters: usize,
    limit: usize,
) -> Option<Vec<i64>> {
    let forms = k.target_forms.get(t)?.as_ref()?;
    let n: usize = k.space.iter().product();
    if forms.len() != js.len() || n.checked_mul(nscatters)? > limit {
        return None;
    }
    let len = k.target_lens.get(t).copied()?;
    let mut seen = vec![false; len];
    let mut out = vec![-1i64; n * nscatters];
    for (f, &j) in forms.iter().zip(js) {
        for e in 0..n {
            let mut off = f.c;
            for &(a, st) in &f.terms {
                off += (((e / k.strides[a].max(1)) % k.space[a].max(1)) * st) as i64;
            }
            let off = usize::try_from(off).ok().filter(|&o| o < len)?;
            if std::mem::replace(&mut seen[off], true) {
                return None;
            }
            out[j * n + e] = off as i64;
        }
    }
    Some(out)
}

/// [`direct_offsets`] for a target whose scatter indices are not affine but still depend on
/// the element's position only: index arithmetic on `Idx` values and constants, as the
/// triangular read of ADBench GMM's `icf` (`Q[row, col]` at `col·(2d − 1 − col)/2 + row − …`).
/// The kernel's position-only operations are evaluated for every element on the host (once
/// per program: the executor caches the result). A scatter whose guard is position-only and
/// false lands nowhere (−1); one whose guard depends on data is taken to land at its offset
/// (not taken, it adds a zero there). `None` when some offset depends on data, lies outside
/// the target, or two contributions may land on one element, or above `limit`
/// contributions.
pub(crate) fn static_offsets(
    k: &Kernel,
    t: usize,
    nscatters: usize,
    limit: usize,
) -> Option<Vec<i64>> {
    let n: usize = k.space.iter().product();
    if n.checked_mul(nscatters)? > limit {
        return None;
    }
    let len = k.target_lens.get(t).copied()?;
    let mut seen = vec![false; len];
    let mut out = vec![-1i64; n * nscatters];
    // per slot: its value where it depends on the position only; per offset slot: the offset
    // (`Some(None)`: out of bounds)
    let mut val: Vec<Option<f64>> = vec![None; k.nslots];
    let mut offs: Vec<Option<Option<usize>>> = vec![None; k.nslots];
    for &(sl, v) in &k.consts {
        val[sl as usize] = Some(v);
    }
    // Only the operations these offsets and guards depend on run: each of them writes its
    // result before any of them reads it, so nothing is cleared between elements.
    let keep = slice_for_target(k, t);
    for e in 0..n {
        let mut j = 0;
        for (op, &kept) in k.ops.iter().zip(&keep) {
            if !kept {
                j += usize::from(matches!(op, KOp::Scatter { .. }));
                continue;
            }
            let get = |a: Src| match a {
                Src::S(sl) => val[sl as usize],
                Src::P(_) => None,
            };
            match op {
                KOp::Idx { axis, dst } => {
                    let i = (e / k.strides[*axis].max(1)) % k.space[*axis].max(1);
                    val[*dst as usize] = Some(i as f64);
                }
                KOp::Un { op, a, dst, d } => {
                    let r = get(*a).map(|x| adjoint_core::rules::unary(*op, x));
                    val[*dst as usize] = r.map(|r| r.value);
                    if let Some(d) = d {
                        val[*d as usize] = r.map(|r| r.d);
                    }
                }
                KOp::Bin { op, a, b, dst, d } => {
                    let r = get(*a)
                        .zip(get(*b))
                        .map(|(x, y)| adjoint_core::rules::binary(*op, x, y));
                    val[*dst as usize] = r.map(|r| r.value);
                    if let Some((dx, dy)) = d {
                        val[*dx as usize] = r.map(|r| r.dx);
                        val[*dy as usize] = r.map(|r| r.dy);
                    }
                }
                KOp::Disc { op, a, b, dst } => {
                    val[*dst as usize] = get(*a).zip(get(*b)).map(|(x, y)| op.eval(x, y));
                }
                KOp::Select { c, a, b, dst } => {
                    val[*dst as usize] = get(*c).and_then(|c| get(if c != 0.0 { *a } else { *b }));
                }
                KOp::Cast { a, dst, to32 } => {
                    val[*dst as usize] =
                        get(*a).map(|x| if *to32 { crate::f32ops::r32(x) } else { x });
                }
                KOp::Offset {
                    comps,
                    guard,
                    quiet,
                    dst,
                    ..
                } => {
                    // as the interpreter: the variable components' sum, 0 where the guard is off
                    // (and, quiet, where out of bounds)
                    let mut at = Some(Some(0usize));
                    for c in comps {
                        if let Comp::Var(a, st, dim) = c {
                            at = match (at, get(*a)) {
                                (Some(o), Some(x)) => Some(o.and_then(|o| {
                                    (x >= 0.0 && x < *dim as f64).then(|| o + (x as usize) * st)
                                })),
                                _ => None,
                            };
                        }
                    }
                    if guard.and_then(get) == Some(0.0) || (*quiet && at == Some(None)) {
                        at = Some(Some(0));
                    }
                    offs[*dst as usize] = at;
                }
                KOp::Scatter {
                    target,
                    off,
                    c,
                    guard,
                    ..
                } => {
                    if *target == t && guard.and_then(get) != Some(0.0) {
                        let base = match off {
                            None => 0,
                            Some(o) => offs[*o as usize]??,
                        };
                        let at = base + c;
                        if at >= len || std::mem::replace(&mut seen[at], true) {
                            return None;
                        }
                        out[j * n + e] = at as i64;
                    }
                    j += 1;
                }
                op => {
                    for d in op.results() {
                        val[d as usize] = None;
                    }
                }
            }
        }
    }
    Some(out)
}

/// Which of kernel `k`'s operations the offsets and guards of its scatters into target `t`
/// depend on: a backward slice through the value and offset slots (slots are reused, so a slot
/// is needed from a read back to the operation that last wrote it). Operations that
/// [`static_offsets`] does not evaluate are kept without their operands (they make their
/// results unknown).
fn slice_for_target(k: &Kernel, t: usize) -> Vec<bool> {
    let mut need_val = vec![false; k.nslots];
    let mut need_off = vec![false; k.nslots];
    let mut keep = vec![false; k.ops.len()];
    let use_src = |a: &Src, need_val: &mut Vec<bool>| {
        if let Src::S(sl) = a {
            need_val[*sl as usize] = true;
        }
    };
    for (i, op) in k.ops.iter().enumerate().rev() {
        match op {
            KOp::Scatter {
                target, off, guard, ..
            } => {
                if *target == t {
                    keep[i] = true;
                    if let Some(o) = off {
                        need_off[*o as usize] = true;
                    }
                    if let Some(g) = guard {
                        use_src(g, &mut need_val);
                    }
                }
            }
            KOp::Offset {
                comps, guard, dst, ..
            } => {
                if std::mem::replace(&mut need_off[*dst as usize], false) {
                    keep[i] = true;
                    for c in comps {
                        if let Comp::Var(a, ..) = c {
                            use_src(a, &mut need_val);
                        }
                    }
                    if let Some(g) = guard {
                        use_src(g, &mut need_val);
                    }
                }
            }
            op => {
                let results = op.results();
                if results.iter().any(|&d| need_val[d as usize]) {
                    keep[i] = true;
                    for d in results {
                        need_val[d as usize] = false;
                    }
                    let operands: &[&Src] = match op {
                        KOp::Un { a, .. } | KOp::Cast { a, .. } => &[a],
                        KOp::Bin { a, b, .. } | KOp::Disc { a, b, .. } => &[a, b],
                        KOp::Select { c, a, b, .. } => &[c, a, b],
                        _ => &[],
                    };
                    for a in operands {
                        use_src(a, &mut need_val);
                    }
                }
            }
        }
    }
    keep
}

/// A whole CUDA module: the prelude followed by the kernels.
pub(crate) fn module_source(kernels: &[KernelSource]) -> String {
    let mut s = String::from(PRELUDE);
    for k in kernels {
        s.push('\n');
        s.push_str(&k.code);
    }
    s
}

#[cfg(feature = "cuda")]
pub(crate) mod device;
#[cfg(feature = "cuda")]
pub(crate) mod run;
#[cfg(test)]
mod tests;
