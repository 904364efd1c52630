//! Array programs: the [`Builder`], array handles ([`Acc`]), the built [`Program`].

use crate::error::{Error, Result};
use crate::expr::{capture, idx_exp, infer, read_exp, Exp, Id, Lambda, Node, Ty};
use crate::f32ops::r32;
use crate::kernel::Kernel;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) type NodeId = u32;

/// How `permute` combines values that land on the same target element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// `+` (the adjoint of `backpermute`); gradient: a gather of the adjoint.
    Add,
    /// `max`; gradient: to the winner (the default when it is not beaten, otherwise the
    /// first source element, in index order, that attains the maximum). NaN behaves as in
    /// `f64::max` folded in index order: a NaN source never wins, a NaN default is replaced by
    /// the first number that lands on it.
    Max,
    /// `min`; gradient as for `Max`.
    Min,
}

/// The element type of an array: every array of a program has one, fixed when it is built.
///
/// Inputs are `f64` unless declared otherwise ([`Builder::input_f32`],
/// [`Builder::input_with`], [`Builder::use_array_f32`]); a combinator's result has its
/// arguments' type. Every combinator works over `f32` — element-wise ones, `sum`, `fold`,
/// `fold1`, `maximum`, `minimum`, `product`, `scanl`, `scanr`, `permute`, `acond`, `awhile` —
/// computing in `f32` (bit-identical to a plain `f32` loop in the same order), and so does the
/// gradient. A combinator that meets an `f32` and an `f64` array (or expression) is a build
/// error ([`Error::DTypeMismatch`]): convert one with [`Acc::cast_f32`] / [`Acc::cast_f64`]
/// (or [`Exp::cast_f32`] / [`Exp::cast_f64`] inside a closure). Constants and indices inside
/// closures are *weak*, as Python scalars in JAX: they take the type of what they meet (so a
/// `generate` from indices and constants alone is `f64`), and fold/scan initial values are
/// rounded to the array's type.
///
/// ```
/// use adjoint_array::{Buffer, Builder, DType};
/// let b = Builder::new();
/// let x = b.input_f32(&[3]);
/// let y = x.map(|v| v * 0.1);
/// assert_eq!(y.dtype(), DType::F32);
/// assert_eq!(y.cast_f64().dtype(), DType::F64);
/// // a fold over f32 steps in f32
/// let s = x.fold(f32::MIN.into(), |acc, v| acc.max(v));
/// assert_eq!(s.dtype(), DType::F32);
/// let out = b.build(&[&s]).unwrap().run_typed(&[(&[1.0f32, 2.0, 3.0]).into()]).unwrap();
/// let want = [1.0f32, 2.0, 3.0].iter().fold(f32::MIN, |a, &v| a.max(v));
/// assert_eq!(out[0], Buffer::F32(vec![want]));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `f64` (the default)
    F64,
    /// `f32`: stored and computed in single precision
    F32,
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
        })
    }
}

/// One entry of a `replicate` specification (Accelerate's slice index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rep {
    /// an axis of the source array
    All,
    /// a new axis of this many copies
    New(usize),
}

/// One entry of a `slice` specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sl {
    /// keep the axis
    All,
    /// fix the axis at this index (the axis disappears)
    At(usize),
}

#[derive(Clone, Debug)]
pub(crate) enum ANode {
    Input {
        index: usize,
        diff: bool,
    },
    Use(Arc<Vec<f64>>),
    /// element-wise/generate kernel over `space`; `args` (params) have shape `space`
    Gen {
        lam: Lambda,
        args: Vec<NodeId>,
        space: Vec<usize>,
    },
    Sum {
        src: NodeId,
    },
    /// a sum over the innermost axis of a fused (not materialised) `Gen`
    SumGen {
        lam: Lambda,
        args: Vec<NodeId>,
        space: Vec<usize>,
    },
    Fold {
        f: Lambda,
        init: Option<Lambda>,
        src: NodeId,
    },
    Scan {
        f: Lambda,
        init: Lambda,
        src: NodeId,
        right: bool,
    },
    Permute {
        comb: Combine,
        default: NodeId,
        idx: Lambda,
        src: NodeId,
    },
    /// [`Builder::scan_n`]: for every lane of `lanes`, `steps` applications of `step` to an
    /// `n`-number state (`n` = the lambdas' output count) that starts at `init`. `init` runs
    /// over the space `lanes`; `step` over `[steps] ++ lanes` (axis 0 is the step number, so
    /// one step's lanes are contiguous) with the state as its `n` parameters. Shape
    /// `[steps + 1] ++ lanes ++ [n]`.
    ScanN {
        init: Lambda,
        step: Lambda,
        lanes: Vec<usize>,
        steps: usize,
    },
    Reshape {
        src: NodeId,
    },
    StopGrad {
        src: NodeId,
    },
    Acond {
        cond: Lambda,
        t: NodeId,
        e: NodeId,
    },
    Awhile {
        lp: Arc<Loop>,
        init: Vec<NodeId>,
        inv: Vec<NodeId>,
    },
    Proj {
        src: NodeId,
        k: usize,
    },
    /// [`Acc::matmul`]: `a [m, p] × b [p, q]`
    MatMul {
        a: NodeId,
        b: NodeId,
    },
}

impl ANode {
    /// Array operands (not counting reads inside lambdas).
    pub(crate) fn operands(&self) -> Vec<NodeId> {
        match self {
            ANode::Input { .. } | ANode::Use(_) | ANode::ScanN { .. } => vec![],
            ANode::Gen { args, .. } | ANode::SumGen { args, .. } => args.clone(),
            ANode::Sum { src }
            | ANode::Fold { src, .. }
            | ANode::Scan { src, .. }
            | ANode::Reshape { src }
            | ANode::StopGrad { src }
            | ANode::Proj { src, .. } => vec![*src],
            ANode::Permute { default, src, .. } => vec![*default, *src],
            ANode::Acond { t, e, .. } | ANode::MatMul { a: t, b: e } => vec![*t, *e],
            ANode::Awhile { init, inv, .. } => init.iter().chain(inv).copied().collect(),
        }
    }
    /// Arrays read inside the node's lambdas.
    pub(crate) fn reads(&self) -> Vec<NodeId> {
        let mut v = match self {
            ANode::Gen { lam, .. } | ANode::SumGen { lam, .. } => lam.reads().to_vec(),
            ANode::Fold { f, init, .. } => {
                let mut r = f.reads().to_vec();
                if let Some(i) = init {
                    r.extend(i.reads());
                }
                r
            }
            ANode::Scan { f, init, .. } => {
                let mut r = f.reads().to_vec();
                r.extend(init.reads());
                r
            }
            ANode::Permute { idx, .. } => idx.reads().to_vec(),
            ANode::ScanN { init, step, .. } => {
                let mut r = init.reads().to_vec();
                r.extend(step.reads());
                r
            }
            ANode::Acond { cond, .. } => cond.reads().to_vec(),
            _ => vec![],
        };
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[derive(Clone, Debug)]
pub(crate) struct NodeInfo {
    pub kind: ANode,
    pub shape: Vec<usize>,
    pub store: bool,
    pub dtype: DType,
}

/// A loop: condition and body graphs over (state ++ invariants).
#[derive(Debug)]
pub(crate) struct Loop {
    pub cond: Graph,
    pub body: Graph,
    pub nstate: usize,
}

/// A built, optimised graph with its kernel caches.
#[derive(Debug)]
pub(crate) struct Graph {
    pub nodes: Vec<NodeInfo>,
    pub inputs: Vec<NodeId>,
    pub outputs: Vec<NodeId>,
    pub active: Vec<bool>,
    pub primal: Vec<OnceLock<Arc<Kernel>>>,
    pub adjoint: Vec<Mutex<HashMap<u32, Arc<Kernel>>>>,
    /// compile kernels to native code ([`Builder::set_jit`])
    pub jit: bool,
    /// `scan_n` gradients store their steps' transcendental values ([`Builder::set_scan_store`])
    pub scan_store: bool,
    /// what a backend other than the CPU made for this graph (the CUDA backend's compiled
    /// kernels), by `(node, role, part)`
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub device: DeviceCache,
}

impl Graph {
    /// What computing node `i` needs whatever happens, `i` included, in node order (operands
    /// precede their users): its operands and the arrays its lambdas read, transitively, but
    /// not the branches of an `acond` (only the one taken runs), and nothing `done` already
    /// holds. An executor computes these in order, each finding its operands ready, so its
    /// recursion is as deep as `acond`s nest, not as long as the chain of arrays (a chain of
    /// ~1500 arrays, an unrolled explicit-Euler loop, overflowed a pool thread's stack).
    pub(crate) fn needed_in_order(&self, i: NodeId, done: impl Fn(NodeId) -> bool) -> Vec<NodeId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![i];
        let mut need = Vec::new();
        seen[i as usize] = true;
        while let Some(n) = stack.pop() {
            need.push(n);
            let kind = &self.nodes[n as usize].kind;
            let mut deps = kind.reads();
            if !matches!(kind, ANode::Acond { .. }) {
                deps.extend(kind.operands());
            }
            for d in deps {
                if !seen[d as usize] && !done(d) {
                    seen[d as usize] = true;
                    stack.push(d);
                }
            }
        }
        need.sort_unstable();
        need
    }
}

/// A value of any type a backend keeps.
type Kept = Arc<dyn std::any::Any + Send + Sync>;

/// Values a backend keeps per graph ([`Graph::device`]), of any type.
#[derive(Default)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct DeviceCache(Mutex<HashMap<(u32, u32, u32), Kept>>);

impl std::fmt::Debug for DeviceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceCache")
    }
}

impl DeviceCache {
    /// The value under `key`, made by `make` the first time.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn get_or_make<T: std::any::Any + Send + Sync>(
        &self,
        key: (u32, u32, u32),
        make: impl FnOnce() -> crate::Result<T>,
    ) -> crate::Result<Arc<T>> {
        if let Some(v) = self.0.lock().expect("device cache").get(&key) {
            if let Ok(t) = v.clone().downcast::<T>() {
                return Ok(t);
            }
        }
        let v = Arc::new(make()?);
        self.0
            .lock()
            .expect("device cache")
            .insert(key, v.clone() as Kept);
        Ok(v)
    }
}

impl Graph {
    pub(crate) fn shape_of(&self, key: u32) -> Vec<usize> {
        self.nodes[key as usize].shape.clone()
    }
}

fn ty_name(t: Ty) -> DType {
    if t == Ty::F32 {
        DType::F32
    } else {
        DType::F64
    }
}

fn mismatch(combinator: &'static str, a: Ty, b: Ty) -> Error {
    Error::DTypeMismatch {
        combinator,
        left: ty_name(a),
        right: ty_name(b),
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct GB {
    id: u64,
    nodes: Vec<NodeInfo>,
    inputs: Vec<NodeId>,
    error: Option<Error>,
    recompute: usize,
    scan_store: bool,
    jit: bool,
}

/// Builds an array program. Combinators on [`Acc`] handles add nodes; errors (shape
/// mismatches, misuse) are recorded and returned by [`Builder::build`].
///
/// ```
/// use adjoint_array::Builder;
/// let b = Builder::new();
/// let a = b.input(&[4]);
/// let s = a.map(|x| x * x).sum();           // Σ xᵢ²
/// let p = b.build(&[&s]).unwrap();
/// let g = p.gradient_a(&[&[1.0, 2.0, 3.0, 4.0]]).unwrap();
/// assert_eq!(g.value, 30.0);
/// assert_eq!(g.grads[0], vec![2.0, 4.0, 6.0, 8.0]);
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    g: Rc<RefCell<GB>>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

/// A handle to an array of a program being built (Accelerate's `Acc`): its node and shape.
/// Combinators are methods; closures receive [`Exp`]s.
///
/// `a + b`, `a - b`, `a * b`, `a / b` of two arrays of one shape (owned or borrowed) are
/// element-wise, as `a.zip_with(&b, |x, y| x + y)` (a shape mismatch is an error naming both
/// shapes); with a number on either side (`&a * 2.0`, `1.0 - a`) they are a `map`.
///
/// ```
/// use adjoint_array::Builder;
/// let b = Builder::new();
/// let x = b.input(&[3]);
/// let y = b.input(&[3]);
/// let p = b.build_scalar(&((&x + &y) * x.clone()).sum()).unwrap();
/// let g = p.gradient_a(&[&[1.0, 2.0, 3.0], &[0.5, 0.5, 0.5]]).unwrap();
/// // ∂/∂x of Σ (x + y)·x is 2x + y, ∂/∂y is x
/// assert_eq!(g.grads[0], vec![2.5, 4.5, 6.5]);
/// assert_eq!(g.grads[1], vec![1.0, 2.0, 3.0]);
/// let s = (1.0 - &x * 2.0) / 4.0;
/// let out = b.build(&[&s]).unwrap().run(&[&[1.0, 2.0, 3.0], &[0.0; 3]]).unwrap();
/// assert_eq!(out[0].data(), [-0.25, -0.75, -1.25]);
/// ```
#[derive(Clone, Debug)]
pub struct Acc {
    g: Rc<RefCell<GB>>,
    owner: u64,
    id: NodeId,
    shape: Rc<Vec<usize>>,
}

impl Builder {
    /// A new, empty program.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let p = b.build(&[&x.map(|v| v * 2.0 + 1.0)]).unwrap();
    /// let out = p.run(&[&[1.0, 2.0, 3.0]]).unwrap();
    /// assert_eq!(out[0].data(), [3.0, 5.0, 7.0]);
    /// ```
    pub fn new() -> Self {
        Builder {
            g: Rc::new(RefCell::new(GB {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                nodes: Vec::new(),
                inputs: Vec::new(),
                error: None,
                recompute: 1,
                scan_store: true,
                jit: true,
            })),
        }
    }

    /// Element-wise nodes with at most this many arithmetic operations are recomputed in each
    /// consumer instead of stored when they are used more than once (default 1; 0 stores every
    /// shared node). [`Acc::materialize`] forces a node to be stored.
    pub fn set_recompute_threshold(&self, ops: usize) {
        self.g.borrow_mut().recompute = ops;
    }

    /// Compile kernels to native code with Cranelift (the default; `false` interprets them
    /// block by block). Kernels over at least 2048 elements with `f64` values and at most 1024
    /// operations are compiled, once, on their first run (a longer kernel took seconds to
    /// compile and ran no faster); `ADJOINT_ARRAY_JIT=0` in the environment turns compilation
    /// off for every program. Results are the same either way up to the order in which
    /// scattered adjoints are summed.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// b.set_jit(false);
    /// let x = b.input(&[4096]);
    /// let s = x.map(|v| v * v).sum();
    /// let p = b.build(&[&s]).unwrap();
    /// let data = vec![0.5; 4096];
    /// assert_eq!(p.run(&[&data]).unwrap()[0].data()[0], 1024.0);
    /// ```
    pub fn set_jit(&self, on: bool) {
        self.g.borrow_mut().jit = on;
    }

    /// Whether a [`scan_n`](Builder::scan_n) gradient stores its step's transcendental values
    /// (`exp`, `exp2`, `tanh`, `tan`, `ln`, `ln_1p`, `atan`; at most 4 per state component)
    /// during the primal pass, for the reverse pass to read instead of evaluating them again
    /// (seed 004's to-store sets, for the nodes worth storing). On by default: the reverse pass
    /// of an RNN step is then mostly multiplications. `false` recomputes them (less memory:
    /// the stored values take up to 4× the states' own). The gradient is bit-identical either
    /// way; [`Program::run`] never stores.
    ///
    /// ```
    /// use adjoint_array::{lit, Builder};
    /// // a tanh RNN over 4 lanes, 50 steps: h ← tanh(w·h + 0.5)
    /// let grad = |store: bool| {
    ///     let b = Builder::new();
    ///     b.set_scan_store(store);
    ///     let w = b.input(&[4]);
    ///     let hs = b.scan_n(&[4], 50, 1, |_| vec![lit(0.1)], |i, s| {
    ///         vec![(w.at(&[i[1]]) * s[0] + 0.5).tanh()]
    ///     });
    ///     let p = b.build_scalar(&hs.sum().sum().sum()).unwrap();
    ///     p.gradient_a(&[&[0.3, -0.7, 1.1, 0.9]]).unwrap()
    /// };
    /// let (stored, recomputed) = (grad(true), grad(false));
    /// assert_eq!(stored.value, recomputed.value);
    /// assert_eq!(stored.grads, recomputed.grads);
    /// // and right: a central difference of the same loop in plain Rust (lane 0)
    /// let lane = |w: f64| {
    ///     let (mut h, mut total) = (0.1, 0.1);
    ///     for _ in 0..50 {
    ///         h = (w * h + 0.5f64).tanh();
    ///         total += h;
    ///     }
    ///     total
    /// };
    /// let fd = (lane(0.3 + 1e-6) - lane(0.3 - 1e-6)) / 2e-6;
    /// assert!((stored.grads[0][0] - fd).abs() < 1e-7);
    /// ```
    pub fn set_scan_store(&self, on: bool) {
        self.g.borrow_mut().scan_store = on;
    }

    fn handle(&self, id: NodeId, shape: Vec<usize>) -> Acc {
        Acc {
            owner: self.g.borrow().id,
            g: self.g.clone(),
            id,
            shape: Rc::new(shape),
        }
    }

    /// Push a node whose element type follows from its operands.
    fn push(&self, kind: ANode, shape: Vec<usize>) -> Acc {
        let dtype = {
            let g = self.g.borrow();
            let d = |i: NodeId| g.nodes[i as usize].dtype;
            match &kind {
                ANode::Sum { src }
                | ANode::Fold { src, .. }
                | ANode::Scan { src, .. }
                | ANode::Reshape { src }
                | ANode::StopGrad { src }
                | ANode::Permute { src, .. } => d(*src),
                ANode::Acond { t, .. } | ANode::MatMul { a: t, .. } => d(*t),
                _ => DType::F64,
            }
        };
        self.push_t(kind, shape, dtype)
    }

    fn push_t(&self, kind: ANode, shape: Vec<usize>, dtype: DType) -> Acc {
        let id = {
            let mut g = self.g.borrow_mut();
            // An element count beyond 2⁵³ (or past `usize`) is a build error: it wrapped to 0,
            // and `generate(&[1 << 32, 1 << 32], …)` built and ran to an array with no data,
            // panicked in a reduction, or aborted allocating an input (a hunter). Indices are
            // `f64`, exact up to 2⁵³.
            if g.error.is_none() {
                if let Err(e) = element_count(&shape) {
                    g.error = Some(e);
                }
            }
            g.nodes.push(NodeInfo {
                kind,
                shape: shape.clone(),
                store: false,
                dtype,
            });
            g.nodes.len() as NodeId - 1
        };
        self.handle(id, shape)
    }

    fn fail(&self, e: Error, shape: Vec<usize>) -> Acc {
        {
            let mut g = self.g.borrow_mut();
            if g.error.is_none() {
                g.error = Some(e);
            }
        }
        // A placeholder of the expected shape, so later combinators can go on; it holds no
        // data (the build fails with the first error, so it never runs, and a placeholder of a
        // huge shape allocated it: an abort instead of the error).
        self.push(ANode::Use(Arc::new(Vec::new())), shape)
    }

    fn owner(&self) -> u64 {
        self.g.borrow().id
    }

    fn check(&self, a: &Acc) -> bool {
        if a.owner != self.owner() {
            let mut g = self.g.borrow_mut();
            if g.error.is_none() {
                g.error = Some(Error::Invalid(
                    "an array handle of another program, or of the scope outside an `awhile` \
                     body, was used: inside a body, pass an outer array to the loop as an \
                     invariant, and build new arrays from the state and invariants (`s[0].map`, \
                     `zip_with`, `fold`, …), not with the outer `Builder` (`generate`, `acond`, \
                     `use_array` make arrays of the outer scope)"
                        .into(),
                ));
            }
            return false;
        }
        true
    }

    /// Declare an input array (differentiated by `gradient_a`).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 2]); // data row-major: [x00, x01, x10, x11]
    /// let p = b.build_scalar(&x.map(|v| v.sin()).sum().sum()).unwrap();
    /// let xs = [0.1, 0.2, 0.3, 0.4];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// assert!((g.value - xs.iter().map(|v| v.sin()).sum::<f64>()).abs() < 1e-15);
    /// for (d, v) in g.grads[0].iter().zip(&xs) {
    ///     assert!((d - v.cos()).abs() < 1e-15); // ∂/∂x sin x = cos x
    /// }
    /// ```
    pub fn input(&self, shape: &[usize]) -> Acc {
        self.input_impl(shape, DType::F64, true)
    }

    /// Declare an input that is data, not a parameter: `gradient_a` returns zeros for it and
    /// spends no work on its adjoint.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let w = b.input(&[2]);
    /// let x = b.constant_input(&[2]); // data
    /// let p = b.build_scalar(&w.zip_with(&x, |a, c| a * c).sum()).unwrap();
    /// let g = p.gradient_a(&[&[3.0, 4.0], &[0.5, 2.0]]).unwrap();
    /// assert_eq!(g.value, 3.0 * 0.5 + 4.0 * 2.0);
    /// assert_eq!(g.grads[0], [0.5, 2.0]); // ∂/∂w = x
    /// assert_eq!(g.grads[1], [0.0, 0.0]); // zeros for the data
    /// ```
    pub fn constant_input(&self, shape: &[usize]) -> Acc {
        self.input_impl(shape, DType::F64, false)
    }

    /// Declare an `f32` input array (differentiated). Runs take its data as `&[f32]`
    /// ([`Input::F32`], through [`Program::run_typed`] / [`Program::gradient_typed`]);
    /// arithmetic on it is done in `f32` by every combinator (see [`DType`]), and its gradient
    /// is computed and comes back in `f32`.
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[3]);
    /// let s = x.map(|v| v * v * 0.5).sum();
    /// let p = b.build_scalar(&s).unwrap();
    /// let xs: &[f32] = &[1.0, 2.0, 3.0];
    /// let g = p.gradient_typed(&[xs.into()]).unwrap();
    /// assert_eq!(g.value, Buffer::F32(vec![7.0]));
    /// assert_eq!(g.grads[0].as_f32().unwrap(), &[1.0f32, 2.0, 3.0]);
    /// ```
    pub fn input_f32(&self, shape: &[usize]) -> Acc {
        self.input_impl(shape, DType::F32, true)
    }

    /// Declare a constant (not differentiated) `f32` input.
    pub fn constant_input_f32(&self, shape: &[usize]) -> Acc {
        self.input_impl(shape, DType::F32, false)
    }

    /// Declare a differentiated input of element type `dtype`.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let x = b.input_with(&[2], DType::F32);
    /// assert_eq!(x.dtype(), DType::F32);
    /// ```
    pub fn input_with(&self, shape: &[usize], dtype: DType) -> Acc {
        self.input_impl(shape, dtype, true)
    }

    fn input_impl(&self, shape: &[usize], dtype: DType, diff: bool) -> Acc {
        let idx = self.g.borrow().inputs.len();
        let a = self.push_t(ANode::Input { index: idx, diff }, shape.to_vec(), dtype);
        self.g.borrow_mut().inputs.push(a.id);
        a
    }

    fn dtype_of(&self, id: NodeId) -> DType {
        self.g
            .borrow()
            .nodes
            .get(id as usize)
            .map_or(DType::F64, |n| n.dtype)
    }

    /// Record an error (the first one wins).
    fn record(&self, e: Error) {
        let mut g = self.g.borrow_mut();
        if g.error.is_none() {
            g.error = Some(e);
        }
    }

    /// Types of a lambda's nodes (parameters of types `params`, reads by their arrays); a
    /// mix of `f32` and `f64` is recorded as a [`Error::DTypeMismatch`] of `combinator`.
    fn type_lambda(
        &self,
        combinator: &'static str,
        lam: &Lambda,
        params: &[Ty],
    ) -> Option<Vec<Ty>> {
        let r = infer(
            &lam.ar,
            &|k| params.get(k as usize).copied().unwrap_or(Ty::F64),
            &|k| Ty::of(self.dtype_of(k)),
        );
        match r {
            Ok(t) => Some(t),
            Err((a, b)) => {
                self.record(mismatch(combinator, a, b));
                None
            }
        }
    }

    /// Type a fold/scan step function `f(acc, x)` over arrays of element type `dtype`: both
    /// parameters have that type, reads have their arrays' types; the result must be of that
    /// type too (a weak result — a constant — is rounded into an `f32` accumulator). A mix is
    /// recorded as a [`Error::DTypeMismatch`] of `combinator` and gives `None`.
    fn type_step(&self, combinator: &'static str, f: Lambda, dtype: DType) -> Option<Lambda> {
        let ty = Ty::of(dtype);
        let t = self.type_lambda(combinator, &f, &[ty, ty])?;
        let out = t[f.outs[0] as usize];
        if let Err((a, b)) = ty.join(out) {
            self.record(mismatch(combinator, a, b));
            return None;
        }
        if out == Ty::Weak && dtype == DType::F32 {
            let mut ar = f.ar.clone();
            let o = ar.push(Node::Cast(true, f.outs[0]));
            return Some(Lambda::new(ar, vec![o], f.nparams));
        }
        Some(f)
    }

    /// A constant of element type `dtype`: a weak literal rounded to `f32` for `f32`.
    fn init_lambda(&self, v: f64, dtype: DType) -> Lambda {
        let v = if dtype == DType::F32 { r32(v) } else { v };
        self.lambda(0, |_| vec![crate::expr::lit(v)])
            .expect("a constant lambda")
    }

    /// A constant `f64` array baked into the program (Accelerate's `use`); for an `f32` one,
    /// [`Builder::use_array_f32`].
    pub fn use_array(&self, shape: &[usize], data: Vec<f64>) -> Acc {
        self.use_impl(shape, data, DType::F64)
    }

    /// A constant `f32` array baked into the program (stored widened, exactly, like every
    /// `f32` array). Its values take part in `f32` arithmetic without a cast.
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder, DType};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[3]);
    /// let w = b.use_array_f32(&[3], vec![0.1, 0.2, 0.3]);
    /// assert_eq!(w.dtype(), DType::F32);
    /// let p = b.build(&[&x.zip_with(&w, |a, c| a * c)]).unwrap();
    /// let out = p.run_typed(&[(&[1.0f32, 2.0, 3.0]).into()]).unwrap();
    /// assert_eq!(out[0], Buffer::F32(vec![0.1, 2.0 * 0.2, 3.0 * 0.3]));
    /// ```
    pub fn use_array_f32(&self, shape: &[usize], data: Vec<f32>) -> Acc {
        let wide = data.into_iter().map(f64::from).collect();
        self.use_impl(shape, wide, DType::F32)
    }

    fn use_impl(&self, shape: &[usize], data: Vec<f64>, dtype: DType) -> Acc {
        // (an overflowing count: `push_t`'s error; wrapping here panicked in checked builds)
        let n = element_count(shape).unwrap_or(usize::MAX);
        if data.len() != n {
            return self.fail(
                Error::ShapeMismatch {
                    combinator: "use_array",
                    left: shape.to_vec(),
                    right: vec![data.len()],
                },
                shape.to_vec(),
            );
        }
        self.push_t(ANode::Use(Arc::new(data)), shape.to_vec(), dtype)
    }

    fn lambda(&self, nparams: u32, f: impl FnOnce(&[Exp]) -> Vec<Exp>) -> Option<Lambda> {
        match capture(self.owner(), nparams, f) {
            Ok(l) => Some(l),
            Err(e) => {
                let mut g = self.g.borrow_mut();
                if g.error.is_none() {
                    g.error = Some(e);
                }
                None
            }
        }
    }

    fn gen(
        &self,
        name: &'static str,
        space: Vec<usize>,
        shape: Vec<usize>,
        args: Vec<NodeId>,
        lam: Option<Lambda>,
    ) -> Acc {
        let Some(lam) = lam else {
            return self.fail(Error::Invalid("in a closure".into()), shape);
        };
        // The element type: the outputs', else (all weak) the arguments', else f64.
        let ptys: Vec<Ty> = args.iter().map(|&a| Ty::of(self.dtype_of(a))).collect();
        let Some(t) = self.type_lambda(name, &lam, &ptys) else {
            return self.fail(Error::Invalid(name.into()), shape);
        };
        let mut out = Ty::Weak;
        for ty in lam
            .outs
            .iter()
            .map(|&o| t[o as usize])
            .chain(std::iter::once(Ty::Weak))
        {
            match out.join(ty) {
                Ok(j) => out = j,
                Err((a, b)) => return self.fail(mismatch(name, a, b), shape),
            }
        }
        if out == Ty::Weak {
            for &ty in &ptys {
                match out.join(ty) {
                    Ok(j) => out = j,
                    Err((a, b)) => return self.fail(mismatch(name, a, b), shape),
                }
            }
        }
        let dtype = if out == Ty::F32 {
            DType::F32
        } else {
            DType::F64
        };
        let lam = if dtype == DType::F32 && lam.outs.iter().any(|&o| t[o as usize] == Ty::Weak) {
            // weak outputs (constants, indices) are rounded into the f32 array
            let mut ar = lam.ar.clone();
            let outs = lam
                .outs
                .iter()
                .map(|&o| {
                    if t[o as usize] == Ty::Weak {
                        ar.push(Node::Cast(true, o))
                    } else {
                        o
                    }
                })
                .collect();
            Lambda::new(ar, outs, lam.nparams)
        } else {
            lam
        };
        self.push_t(ANode::Gen { lam, args, space }, shape, dtype)
    }

    /// `generate shape f`: element `i` is `f(i)` (the index, one `Exp` per axis). The element
    /// type is that of the arrays the closure reads; from indices and constants alone it is
    /// `f64` (end the closure with [`Exp::cast_f32`] for an `f32` array).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let g = b.generate(&[2, 3], |i| i[0] * 10.0 + i[1]);
    /// let out = b.build(&[&g]).unwrap().run(&[]).unwrap();
    /// assert_eq!(out[0].data(), &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    /// ```
    pub fn generate(&self, shape: &[usize], f: impl FnOnce(&[Exp]) -> Exp) -> Acc {
        let rank = shape.len() as u32;
        let lam = self.lambda(0, |_| {
            let idx: Vec<Exp> = (0..rank).map(idx_exp).collect();
            vec![f(&idx)]
        });
        self.gen("generate", shape.to_vec(), shape.to_vec(), vec![], lam)
    }

    /// `generate` of `n` values per index: the result has shape `shape ++ [n]` (a tuple-valued
    /// generate; e.g. a Jacobian block per observation).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// // (sin xᵢ, cos xᵢ) for each i
    /// let sc = b.generate_n(&[3], 2, |i| vec![x.at(&[i[0]]).sin(), x.at(&[i[0]]).cos()]);
    /// assert_eq!(sc.shape(), [3, 2]);
    /// let p = b.build_scalar(&sc.sum().sum()).unwrap();
    /// let xs = [0.0, 0.5, 2.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// for (d, v) in g.grads[0].iter().zip(&xs) {
    ///     assert!((d - (v.cos() - v.sin())).abs() < 1e-15);
    /// }
    /// ```
    pub fn generate_n(&self, shape: &[usize], n: usize, f: impl FnOnce(&[Exp]) -> Vec<Exp>) -> Acc {
        let rank = shape.len() as u32;
        let mut full = shape.to_vec();
        full.push(n);
        let mut bad = None;
        let lam = self.lambda(0, |_| {
            let idx: Vec<Exp> = (0..rank).map(idx_exp).collect();
            let v = f(&idx);
            if v.len() != n {
                bad = Some(v.len());
            }
            v
        });
        if let Some(got) = bad {
            return self.fail(
                Error::Invalid(format!(
                    "generate_n: the closure returned {got} values, expected {n}"
                )),
                full,
            );
        }
        self.gen("generate_n", shape.to_vec(), full, vec![], lam)
    }

    /// `scan_n`: a recurrence with an `n`-number state in every lane of `shape`, run for
    /// `steps` steps — a scan whose accumulator is a tuple, like Accelerate's scans over tuple
    /// elements or the carry of JAX's `lax.scan`. `init(i)` gives lane `i`'s starting state;
    /// `step(&[t, i..], state)` gives its state after step `t` (`0 ≤ t < steps`) and may read
    /// any array by index. The result has shape `[steps + 1] ++ shape ++ [n]` (time-major, as
    /// `lax.scan` stacks its outputs): element `[t, i.., c]` is component `c` of lane `i`'s
    /// state after `t` steps (`t = 0`: `init`).
    ///
    /// Lanes run in parallel and steps in order, so an RNN over a sequence, or an integrator
    /// over many independent systems, is one kernel however long it runs. The gradient runs
    /// the adjoint recurrence backwards from the stored states, one run of the step's adjoint
    /// kernel per step, which also gives the contributions to the arrays the step reads. The
    /// state is `f64`.
    ///
    /// ```
    /// use adjoint_array::{lit, Builder};
    /// let b = Builder::new();
    /// let k = b.input(&[2]); // a stiffness per lane
    /// // x' = v, v' = −k·x: three Euler steps of 0.1 from (x, v) = (1, 0)
    /// let path = b.scan_n(&[2], 3, 2, |_| vec![lit(1.0), lit(0.0)], |i, s| {
    ///     vec![s[0] + 0.1 * s[1], s[1] - 0.1 * k.at(&[i[1]]) * s[0]]
    /// });
    /// assert_eq!(path.shape(), &[4, 2, 2]);
    /// // the final positions
    /// let x_end = b.generate(&[2], |i| path.at(&[lit(3.0), i[0], lit(0.0)]));
    /// let p = b.build(&[&x_end.sum()]).unwrap();
    /// let stiff = [4.0, 9.0];
    /// let g = p.gradient_a(&[&stiff]).unwrap();
    /// let euler = |k: f64| {
    ///     let (mut x, mut v) = (1.0, 0.0);
    ///     for _ in 0..3 {
    ///         (x, v) = (x + 0.1 * v, v - 0.1 * k * x);
    ///     }
    ///     x
    /// };
    /// assert_eq!(g.value, euler(4.0) + euler(9.0));
    /// // x₃ = 1 − 0.03·k, so ∂x₃/∂k = −0.03 in each lane
    /// assert!((g.grads[0][0] + 0.03).abs() < 1e-15 && (g.grads[0][1] + 0.03).abs() < 1e-15);
    /// ```
    pub fn scan_n(
        &self,
        shape: &[usize],
        steps: usize,
        n: usize,
        init: impl FnOnce(&[Exp]) -> Vec<Exp>,
        step: impl FnOnce(&[Exp], &[Exp]) -> Vec<Exp>,
    ) -> Acc {
        let rank = shape.len() as u32;
        let full: Vec<usize> = std::iter::once(steps + 1)
            .chain(shape.iter().copied())
            .chain([n])
            .collect();
        if n == 0 {
            return self.fail(
                Error::Invalid("scan_n: the state needs at least one number (n = 0)".into()),
                full,
            );
        }
        let mut bad = None;
        let il = self.lambda(0, |_| {
            let idx: Vec<Exp> = (0..rank).map(idx_exp).collect();
            let v = init(&idx);
            if v.len() != n {
                bad = Some(("init", v.len()));
            }
            v
        });
        // The step runs over the space `[steps] ++ shape`: its index is `[t, i..]`.
        let sl = self.lambda(n as u32, |p| {
            let idx: Vec<Exp> = (0..=rank).map(idx_exp).collect();
            let v = step(&idx, p);
            if v.len() != n && bad.is_none() {
                bad = Some(("step", v.len()));
            }
            v
        });
        if let Some((which, got)) = bad {
            return self.fail(
                Error::Invalid(format!(
                    "scan_n: the {which} closure returned {got} values, expected n = {n}"
                )),
                full,
            );
        }
        let (Some(il), Some(sl)) = (il, sl) else {
            return self.fail(Error::Invalid("scan_n: in a closure".into()), full);
        };
        for (lam, params) in [(&il, vec![]), (&sl, vec![Ty::F64; n])] {
            let Some(t) = self.type_lambda("scan_n", lam, &params) else {
                return self.fail(Error::Invalid("scan_n".into()), full);
            };
            for &o in &lam.outs {
                if let Err((a, b)) = Ty::F64.join(t[o as usize]) {
                    return self.fail(mismatch("scan_n", a, b), full);
                }
            }
        }
        self.push(
            ANode::ScanN {
                init: il,
                step: sl,
                lanes: shape.to_vec(),
                steps,
            },
            full,
        )
    }

    /// `zipWith` over any number of arrays of one shape.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y, z) = (b.input(&[2]), b.input(&[2]), b.input(&[2]));
    /// let f = b.zip_with_n(&[&x, &y, &z], |p| p[0] * p[1] + p[2]);
    /// let p = b.build_scalar(&f.sum()).unwrap();
    /// let g = p.gradient_a(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]).unwrap();
    /// assert_eq!(g.value, (1.0 * 3.0 + 5.0) + (2.0 * 4.0 + 6.0));
    /// assert_eq!(g.grads[0], [3.0, 4.0]); // y
    /// assert_eq!(g.grads[1], [1.0, 2.0]); // x
    /// assert_eq!(g.grads[2], [1.0, 1.0]);
    /// ```
    pub fn zip_with_n(&self, arrays: &[&Acc], f: impl FnOnce(&[Exp]) -> Exp) -> Acc {
        // (a shape mismatch names the combinator the user called: `left` is the first array's
        // shape, `right` the first that differs; a hunter saw `zip_with`)
        self.zip_named("zip_with_n", arrays, f)
    }

    fn zip_named(&self, name: &'static str, arrays: &[&Acc], f: impl FnOnce(&[Exp]) -> Exp) -> Acc {
        let Some(first) = arrays.first() else {
            return self.fail(Error::Invalid("zip_with_n of no arrays".into()), vec![]);
        };
        let shape = first.shape.to_vec();
        for a in arrays {
            if !self.check(a) {
                return self.fail(Error::Invalid("foreign array".into()), shape);
            }
            if *a.shape != shape {
                return self.fail(
                    Error::ShapeMismatch {
                        combinator: name,
                        left: shape.clone(),
                        right: a.shape.to_vec(),
                    },
                    shape,
                );
            }
        }
        let lam = self.lambda(arrays.len() as u32, |p| vec![f(p)]);
        self.gen(
            name,
            shape.clone(),
            shape,
            arrays.iter().map(|a| a.id).collect(),
            lam,
        )
    }

    /// `acond c t e`: `t` if the scalar expression `c()` is true (non-zero), else `e`. Only the
    /// branch taken is computed; the gradient flows into it.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let s = x.sum();
    /// // Σ x² where Σ x > 0, else Σ 3x
    /// let y = b.acond(|| s.the().gt(0.0), &x.map(|v| v * v), &x.map(|v| v * 3.0));
    /// let p = b.build_scalar(&y.sum()).unwrap();
    /// let g = p.gradient_a(&[&[1.0, 2.0]]).unwrap();
    /// assert_eq!((g.value, &g.grads[0][..]), (1.0 + 4.0, &[2.0, 4.0][..]));
    /// let g = p.gradient_a(&[&[1.0, -2.0]]).unwrap();
    /// assert_eq!((g.value, &g.grads[0][..]), (3.0 - 6.0, &[3.0, 3.0][..]));
    /// ```
    pub fn acond(&self, c: impl FnOnce() -> Exp, t: &Acc, e: &Acc) -> Acc {
        if !self.check(t) || !self.check(e) {
            return self.fail(Error::Invalid("foreign array".into()), t.shape.to_vec());
        }
        if t.shape != e.shape {
            return self.fail(
                Error::ShapeMismatch {
                    combinator: "acond",
                    left: t.shape.to_vec(),
                    right: e.shape.to_vec(),
                },
                t.shape.to_vec(),
            );
        }
        if t.dtype() != e.dtype() {
            return self.fail(
                Error::DTypeMismatch {
                    combinator: "acond",
                    left: t.dtype(),
                    right: e.dtype(),
                },
                t.shape.to_vec(),
            );
        }
        match self.lambda(0, |_| vec![c()]) {
            Some(cond) if self.type_lambda("acond", &cond, &[]).is_some() => self.push(
                ANode::Acond {
                    cond,
                    t: t.id,
                    e: e.id,
                },
                t.shape.to_vec(),
            ),
            _ => self.fail(Error::Invalid("acond".into()), t.shape.to_vec()),
        }
    }

    /// `awhile`: starting from `init`, while `cond(state, inv)` (a scalar array) is non-zero,
    /// `state = body(state, inv)`. `inv` are loop invariants the closures may use; arrays of the
    /// outer program cannot be used inside directly, and the closures build new arrays from the
    /// state and invariants' methods (`map`, `zip_with`, `fold`, `sum`, `permute`, …): the
    /// `Builder`'s own combinators (`generate`, `acond`, `use_array`, a nested `awhile`) make
    /// arrays of the outer scope, an error there. The body must keep the state's shapes
    /// and element types (`f32` state is computed in `f32`, in both passes). The gradient
    /// stores every iteration's state and runs the body's adjoint backwards.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// // double x until its sum exceeds 10
    /// let out = b.awhile(&[&x], &[], |s, _| s[0].sum().map(|t| t.lt(10.0)), |s, _| {
    ///     vec![s[0].map(|v| v * 2.0)]
    /// });
    /// let p = b.build(&[&out[0].sum()]).unwrap();
    /// let g = p.gradient_a(&[&[1.0, 2.0]]).unwrap();
    /// assert_eq!(g.value, 12.0);
    /// assert_eq!(g.grads[0], vec![4.0, 4.0]);
    /// ```
    pub fn awhile(
        &self,
        init: &[&Acc],
        inv: &[&Acc],
        cond: impl FnOnce(&[Acc], &[Acc]) -> Acc,
        body: impl FnOnce(&[Acc], &[Acc]) -> Vec<Acc>,
    ) -> Vec<Acc> {
        let shapes: Vec<Vec<usize>> = init.iter().map(|a| a.shape.to_vec()).collect();
        let placeholders = |s: &Self| -> Vec<Acc> {
            shapes
                .iter()
                .map(|sh| s.fail(Error::Invalid("awhile".into()), sh.clone()))
                .collect()
        };
        if init.iter().chain(inv).any(|a| !self.check(a)) {
            return placeholders(self);
        }
        type Body<'a> = dyn FnMut(&Builder, &[Acc], &[Acc]) -> Vec<Acc> + 'a;
        let sub = |f: &mut Body| -> Result<Graph> {
            let b = Builder::new();
            let s: Vec<Acc> = init
                .iter()
                .map(|a| b.input_with(&a.shape, a.dtype()))
                .collect();
            let v: Vec<Acc> = inv
                .iter()
                .map(|a| b.input_with(&a.shape, a.dtype()))
                .collect();
            let outs = f(&b, &s, &v);
            let refs: Vec<&Acc> = outs.iter().collect();
            b.finish(&refs, true)
        };
        let mut cond = Some(cond);
        let cg = sub(&mut |_b, s, v| {
            let c = (cond.take().expect("once"))(s, v);
            vec![c]
        });
        let mut body = Some(body);
        let mut out_shapes = Vec::new();
        let mut out_types = Vec::new();
        let bg = sub(&mut |_b, s, v| {
            let o = (body.take().expect("once"))(s, v);
            out_shapes = o.iter().map(|a| a.shape.to_vec()).collect();
            out_types = o.iter().map(|a| a.dtype()).collect();
            o
        });
        let (cg, bg) = match (cg, bg) {
            (Ok(c), Ok(b)) => (c, b),
            (Err(e), _) | (_, Err(e)) => {
                let mut g = self.g.borrow_mut();
                if g.error.is_none() {
                    g.error = Some(e);
                }
                drop(g);
                return placeholders(self);
            }
        };
        if !cg.outputs.is_empty() && !cg.nodes[cg.outputs[0] as usize].shape.is_empty() {
            let sh = cg.nodes[cg.outputs[0] as usize].shape.clone();
            self.fail(
                Error::ShapeMismatch {
                    combinator: "awhile (condition must be a scalar)",
                    left: sh,
                    right: vec![],
                },
                vec![],
            );
            return placeholders(self);
        }
        if out_shapes != shapes {
            // The count first, then the first array whose shape changed (the shapes of all
            // arrays run together read alike for different mistakes).
            let e = match shapes.iter().zip(&out_shapes).find(|(a, b)| a != b) {
                _ if shapes.len() != out_shapes.len() => Error::Invalid(format!(
                    "awhile: the body returned {} arrays for a state of {} (it must return the \
                     new state, one array per state array)",
                    out_shapes.len(),
                    shapes.len()
                )),
                Some((a, b)) => Error::ShapeMismatch {
                    combinator: "awhile (body must keep the state's shapes)",
                    left: a.to_vec(),
                    right: b.to_vec(),
                },
                None => unreachable!("equal counts and shapes"),
            };
            self.fail(e, vec![]);
            return placeholders(self);
        }
        let types: Vec<DType> = init.iter().map(|a| a.dtype()).collect();
        if let Some((&l, &r)) = types.iter().zip(&out_types).find(|(l, r)| l != r) {
            self.record(Error::DTypeMismatch {
                combinator: "awhile (body must keep the state's element types)",
                left: l,
                right: r,
            });
            return placeholders(self);
        }
        let lp = Arc::new(Loop {
            cond: cg,
            body: bg,
            nstate: init.len(),
        });
        let w = self.push(
            ANode::Awhile {
                lp,
                init: init.iter().map(|a| a.id).collect(),
                inv: inv.iter().map(|a| a.id).collect(),
            },
            vec![],
        );
        shapes
            .iter()
            .zip(types)
            .enumerate()
            .map(|(k, (sh, t))| self.push_t(ANode::Proj { src: w.id, k }, sh.clone(), t))
            .collect()
    }

    /// Finish the program with these outputs: checks, optimises (fusion) and returns the
    /// runnable [`Program`], or the first error recorded while building.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let sq = x.map(|v| v * v);
    /// let rows = sq.sum(); // Σⱼ x[i, j]², shape [2]
    /// let p = b.build(&[&sq, &rows]).unwrap();
    /// let out = p.run(&[&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]).unwrap();
    /// assert_eq!(out[0].shape(), [2, 3]);
    /// assert_eq!(out[1].data(), [1.0 + 4.0 + 9.0, 16.0 + 25.0 + 36.0]);
    /// // a mistake made while building is returned here
    /// let bad = x.zip_with(&rows, |a, r| a + r);
    /// assert!(b.build(&[&bad]).is_err());
    /// ```
    pub fn build(&self, outputs: &[&Acc]) -> Result<Program> {
        let g = self.finish(outputs, false)?;
        Ok(Program { g: Arc::new(g) })
    }

    /// [`Builder::build`] for a program to differentiate with [`Program::gradient_a`]: also
    /// checks that there is exactly one output and that it is a scalar.
    ///
    /// ```
    /// use adjoint_array::{Builder, Error};
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// assert!(matches!(b.build_scalar(&x), Err(Error::NonScalarOutput(_))));
    /// let p = b.build_scalar(&x.map(|v| v.exp()).sum()).unwrap();
    /// let xs = [0.0, 1.0, -1.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// for (d, v) in g.grads[0].iter().zip(&xs) {
    ///     assert!((d - v.exp()).abs() < 1e-15);
    /// }
    /// ```
    pub fn build_scalar(&self, output: &Acc) -> Result<Program> {
        if !output.shape.is_empty() {
            return Err(Error::NonScalarOutput(vec![output.shape.to_vec()]));
        }
        self.build(&[output])
    }

    fn finish(&self, outputs: &[&Acc], all_diff: bool) -> Result<Graph> {
        for o in outputs {
            if !self.check(o) {
                break;
            }
        }
        let gb = self.g.borrow();
        if let Some(e) = &gb.error {
            return Err(e.clone());
        }
        let mut nodes = gb.nodes.clone();
        let outs: Vec<NodeId> = outputs.iter().map(|o| o.id).collect();
        if all_diff {
            for n in nodes.iter_mut() {
                if let ANode::Input { diff, .. } = &mut n.kind {
                    *diff = true;
                }
            }
        }
        fuse(&mut nodes, &outs, gb.recompute);
        let active = activity(&nodes);
        let n = nodes.len();
        Ok(Graph {
            nodes,
            inputs: gb.inputs.clone(),
            outputs: outs,
            active,
            primal: (0..n).map(|_| OnceLock::new()).collect(),
            adjoint: (0..n).map(|_| Mutex::new(HashMap::new())).collect(),
            jit: gb.jit,
            scan_store: gb.scan_store,
            device: DeviceCache::default(),
        })
    }
}

fn activity(nodes: &[NodeInfo]) -> Vec<bool> {
    let mut act = vec![false; nodes.len()];
    for i in 0..nodes.len() {
        let k = &nodes[i].kind;
        act[i] = match k {
            ANode::Input { diff, .. } => *diff,
            ANode::Use(_) | ANode::StopGrad { .. } => false,
            _ => {
                k.operands().iter().any(|&o| act[o as usize])
                    || k.reads().iter().any(|&o| act[o as usize])
            }
        };
    }
    act
}

/// Fusion: element-wise producers used once (or cheap ones) are inlined into element-wise
/// consumers, and a sum over a generate/map becomes one reduction kernel.
fn fuse(nodes: &mut [NodeInfo], outputs: &[NodeId], recompute: usize) {
    let n = nodes.len();
    let mut uses = vec![0usize; n];
    for nd in nodes.iter() {
        for o in nd.kind.operands() {
            uses[o as usize] += 1;
        }
        for o in nd.kind.reads() {
            uses[o as usize] += 1;
        }
    }
    for &o in outputs {
        uses[o as usize] += 1;
    }
    let is_out = |i: NodeId| outputs.contains(&i);
    for i in 0..n {
        // Inline producers into a Gen.
        if let ANode::Gen { .. } = nodes[i].kind {
            loop {
                let ANode::Gen { lam, args, space } = &nodes[i].kind else {
                    unreachable!()
                };
                let pick = args.iter().enumerate().find_map(|(k, &p)| {
                    let pn = &nodes[p as usize];
                    match &pn.kind {
                        ANode::Gen {
                            lam: pl, space: ps, ..
                        } if pl.outs.len() == 1
                            && *ps == pn.shape
                            && !pn.store
                            && !is_out(p)
                            && (uses[p as usize] == 1 || pl.cost() <= recompute) =>
                        {
                            Some((k, p))
                        }
                        _ => None,
                    }
                });
                let Some((k, p)) = pick else { break };
                let space = space.clone();
                uses[p as usize] -= 1;
                // A producer inlined into its last user is dead: its lambda moves into the
                // user's (and the node keeps nothing), so that a chain of N fused maps takes
                // O(N) time and nodes, not O(N²) (copying the producer, which holds everything
                // upstream of it, at every link).
                let (nl, na, pa, reads) = if uses[p as usize] == 0 {
                    let dead = ANode::Use(Arc::new(Vec::new()));
                    let ANode::Gen {
                        lam: pl, args: pa, ..
                    } = std::mem::replace(&mut nodes[p as usize].kind, dead)
                    else {
                        unreachable!()
                    };
                    let reads = pl.reads().to_vec();
                    let ANode::Gen { lam, args, .. } = &nodes[i].kind else {
                        unreachable!()
                    };
                    let (nl, na) = inline_moving(lam, args, k, pl, &pa);
                    (nl, na, pa, reads)
                } else {
                    let ANode::Gen {
                        lam: pl, args: pa, ..
                    } = &nodes[p as usize].kind
                    else {
                        unreachable!()
                    };
                    let (nl, na) = inline(lam, args, k, pl, pa);
                    (nl, na, pa.clone(), pl.reads().to_vec())
                };
                // (The dead producer's operands keep their counts: fusion decisions are those
                // of copying inlining.)
                for &a in &pa {
                    uses[a as usize] += 1;
                }
                for &r in &reads {
                    uses[r as usize] += 1;
                }
                nodes[i].kind = ANode::Gen {
                    lam: nl,
                    args: na,
                    space,
                };
            }
        }
        // A sum over a Gen used once.
        if let ANode::Sum { src } = nodes[i].kind {
            let pn = &nodes[src as usize];
            if let ANode::Gen { lam, args, space } = &pn.kind {
                if lam.outs.len() == 1
                    && *space == pn.shape
                    && !pn.store
                    && !is_out(src)
                    && uses[src as usize] == 1
                {
                    let kind = ANode::SumGen {
                        lam: lam.clone(),
                        args: args.clone(),
                        space: space.clone(),
                    };
                    uses[src as usize] -= 1;
                    for &a in args {
                        uses[a as usize] += 1;
                    }
                    nodes[i].kind = kind;
                }
            }
        }
    }
}

/// [`inline`] for a producer that dies with it: the result is built in `p`'s own arena (no
/// copy of it), its parameters first, then `c`'s other ones, and `c`'s nodes are added. Where
/// `c` reads parameter `k`, every node of `p` it reaches stays reachable, so the result's
/// reads are `p`'s and `c`'s (not recomputed over the whole arena); else `inline` (which
/// copies only what is reachable).
fn inline_moving(
    c: &Lambda,
    ca: &[NodeId],
    k: usize,
    p: Lambda,
    pa: &[NodeId],
) -> (Lambda, Vec<NodeId>) {
    let Some(param_k) = c.ar.nodes.iter().position(|n| *n == Node::Param(k as u32)) else {
        return inline(c, ca, k, &p, pa);
    };
    if !c.ar.reachable(&c.outs)[param_k] {
        return inline(c, ca, k, &p, pa);
    }
    let mut reads: Vec<u32> = p.reads().iter().chain(c.reads()).copied().collect();
    reads.sort_unstable();
    reads.dedup();
    let np = p.nparams as usize;
    let (pout, mut ar) = (p.outs[0], p.ar);
    let params: Vec<Id> = (0..c.nparams as usize)
        .map(|j| match j.cmp(&k) {
            std::cmp::Ordering::Equal => pout,
            std::cmp::Ordering::Less => ar.push(Node::Param((np + j) as u32)),
            std::cmp::Ordering::Greater => ar.push(Node::Param((np + j - 1) as u32)),
        })
        .collect();
    let outs = c.ar.copy_into(&mut ar, &c.outs, &mut HashMap::new(), &|j| {
        Some(params[j as usize])
    });
    let mut args = pa.to_vec();
    args.extend(
        ca.iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, &a)| a),
    );
    let lam = Lambda::new(ar, outs, (np + ca.len() - 1) as u32);
    lam.reads.set(reads).expect("a new lambda");
    (lam, args)
}

/// Substitute producer `p` (params `pa`) for parameter `k` of consumer `c` (params `ca`).
fn inline(c: &Lambda, ca: &[NodeId], k: usize, p: &Lambda, pa: &[NodeId]) -> (Lambda, Vec<NodeId>) {
    let mut ar = crate::expr::Arena::default();
    let nc = c.nparams as usize - 1;
    let mut args: Vec<NodeId> = ca
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != k)
        .map(|(_, &a)| a)
        .collect();
    args.extend_from_slice(pa);
    let new_params: Vec<u32> = (0..(nc + pa.len()) as u32)
        .map(|j| ar.push(Node::Param(j)))
        .collect();
    let pout = {
        let mut subst = HashMap::new();
        let np = new_params.clone();
        p.ar.copy_into(&mut ar, &p.outs, &mut subst, &|j| Some(np[nc + j as usize]))[0]
    };
    let outs = {
        let mut subst = HashMap::new();
        let np = new_params.clone();
        let map = move |j: u32| -> Option<u32> {
            let j = j as usize;
            Some(match j.cmp(&k) {
                std::cmp::Ordering::Equal => pout,
                std::cmp::Ordering::Less => np[j],
                std::cmp::Ordering::Greater => np[j - 1],
            })
        };
        c.ar.copy_into(&mut ar, &c.outs, &mut subst, &map)
    };
    (Lambda::new(ar, outs, (nc + pa.len()) as u32), args)
}

impl Acc {
    /// The array's shape (fixed when the program is built).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn b(&self) -> Builder {
        Builder { g: self.g.clone() }
    }

    /// The element type ([`DType::F64`] unless the array derives from an `f32` input or a
    /// cast).
    pub fn dtype(&self) -> DType {
        self.b().dtype_of(self.id)
    }

    /// This array converted to `f32` (rounded to nearest; no-op when it already is `f32`).
    /// Differentiable: the adjoint of a cast is the reverse cast (the `f32` adjoint widened).
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder, DType, Input};
    /// let b = Builder::new();
    /// let x = b.input(&[2]); // f64
    /// let y = x.cast_f32().map(|v| v * 3.0).sum();
    /// assert_eq!(y.dtype(), DType::F32);
    /// let p = b.build_scalar(&y).unwrap();
    /// let g = p.gradient_typed(&[Input::F64(&[0.1, 0.2])]).unwrap();
    /// assert_eq!(g.value, Buffer::F32(vec![0.1f32 * 3.0 + 0.2f32 * 3.0]));
    /// assert_eq!(g.grads[0], Buffer::F64(vec![3.0, 3.0])); // f64 gradient of an f64 input
    /// ```
    pub fn cast_f32(&self) -> Acc {
        self.cast(DType::F32)
    }

    /// This array converted to `f64` (exact). The adjoint rounds the `f64` adjoint to `f32`.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[2]);
    /// assert_eq!(x.cast_f64().dtype(), DType::F64);
    /// ```
    pub fn cast_f64(&self) -> Acc {
        self.cast(DType::F64)
    }

    /// This array converted to `dtype` ([`Acc::cast_f32`], [`Acc::cast_f64`]).
    pub fn cast(&self, dtype: DType) -> Acc {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.b().zip_named("cast", &[self], |p| match dtype {
            DType::F32 => p[0].cast_f32(),
            DType::F64 => p[0].cast_f64(),
        })
    }

    /// `map f a`.
    pub fn map(&self, f: impl FnOnce(Exp) -> Exp) -> Acc {
        self.b().zip_named("map", &[self], |p| f(p[0]))
    }

    /// `zipWith f a b` (shapes must be equal).
    pub fn zip_with(&self, other: &Acc, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        self.b()
            .zip_named("zip_with", &[self, other], |p| f(p[0], p[1]))
    }

    /// `a ! idx` inside a closure: read this array at an index (one `Exp` per axis; whole
    /// numbers: a fraction is truncated toward zero, after the range check, so −0.5 is out of
    /// range and 2.5 reads element 2). An index outside the array is an
    /// [`Error::OutOfBounds`]: from `build` where the index is a constant, else when the program
    /// runs (reads in a `select` branch not taken are not performed). Its gradient is a deterministic scatter-add into this array's adjoint.
    ///
    /// ```
    /// use adjoint_array::{Builder, Error};
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// // neighbour differences d[i] = x[i + 1] − x[i]
    /// let d = b.generate(&[2], |i| x.at(&[i[0] + 1.0]) - x.at(&[i[0]]));
    /// let p = b.build_scalar(&d.map(|v| v * v).sum()).unwrap();
    /// let xs = [1.0, 4.0, 2.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// let (d0, d1) = (xs[1] - xs[0], xs[2] - xs[1]);
    /// assert_eq!(g.value, d0 * d0 + d1 * d1);
    /// assert_eq!(g.grads[0], [-2.0 * d0, 2.0 * d0 - 2.0 * d1, 2.0 * d1]);
    /// // reading past the end is an error when the program runs
    /// let past = b.build(&[&b.generate(&[1], |i| x.at(&[i[0] + 3.0]))]).unwrap();
    /// assert!(matches!(past.run(&[&xs]), Err(Error::OutOfBounds { .. })));
    /// ```
    pub fn at(&self, idx: &[Exp]) -> Exp {
        read_exp(self.owner, self.id, &self.shape, idx)
    }

    /// The single element of a rank-0 array (Accelerate's `the`), inside a closure.
    pub fn the(&self) -> Exp {
        self.at(&[])
    }

    /// Size of an axis as a constant expression (shapes are static). An axis beyond the
    /// array's rank is an [`Error::Invalid`] naming the shape when the program is built.
    pub fn dim(&self, axis: usize) -> Exp {
        match self.shape.get(axis) {
            Some(&d) => crate::expr::lit(d as f64),
            None => {
                crate::expr::record_error(Error::Invalid(format!(
                    "dim({axis}) of an array of shape {:?}: it has {} axes",
                    self.shape,
                    self.shape.len()
                )));
                crate::expr::lit(f64::NAN)
            }
        }
    }

    /// Sum along the innermost axis (rank − 1 result).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let rows = x.sum(); // [2]: Σⱼ x[i, j]
    /// let total = rows.sum(); // []: a scalar
    /// let p = b.build(&[&rows, &total]).unwrap();
    /// let out = p.run(&[&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]).unwrap();
    /// assert_eq!(out[0].data(), [1.0 + 2.0 + 3.0, 4.0 + 5.0 + 6.0]);
    /// assert_eq!(out[1].data(), [21.0]);
    /// let g = b.build_scalar(&total).unwrap().gradient_a(&[&[0.0; 6]]).unwrap();
    /// assert_eq!(g.grads[0], [1.0; 6]);
    /// ```
    pub fn sum(&self) -> Acc {
        let b = self.b();
        if self.shape.is_empty() {
            return b.fail(Error::Invalid("sum of a rank-0 array".into()), vec![]);
        }
        let shape = self.shape[..self.shape.len() - 1].to_vec();
        b.push(ANode::Sum { src: self.id }, shape)
    }

    /// `fold f init` along the innermost axis; `f` must be associative (as in Accelerate).
    /// It runs sequentially along each row (`+` with four interleaved accumulators), in the
    /// array's element type: over `f32`, `init` is rounded to `f32` and `f(acc, x)` gets and
    /// returns `f32` values.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 2]);
    /// // the norm of each row: hypot is associative, with 0 as identity
    /// let norms = x.fold(0.0, |a, v| (a * a + v * v).sqrt());
    /// let p = b.build_scalar(&norms.sum()).unwrap();
    /// let g = p.gradient_a(&[&[3.0, 4.0, 5.0, 12.0]]).unwrap();
    /// assert_eq!(g.value, 5.0 + 13.0);
    /// // ∂‖r‖/∂rⱼ = rⱼ / ‖r‖
    /// let want = [3.0 / 5.0, 4.0 / 5.0, 5.0 / 13.0, 12.0 / 13.0];
    /// for (d, w) in g.grads[0].iter().zip(&want) {
    ///     assert!((d - w).abs() < 1e-15);
    /// }
    /// ```
    pub fn fold(&self, init: f64, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        self.fold_impl(Some(init), f)
    }

    /// `fold1 f` along the innermost axis (no initial value; the axis must be non-empty).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let m = x.fold1(|a, v| a.max(v)); // row maxima: no initial value to choose
    /// let xs = [1.0, -4.0, 2.5, -3.0, -1.5, -7.0];
    /// let out = b.build(&[&m]).unwrap().run(&[&xs]).unwrap();
    /// let max = |r: &[f64]| r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    /// let want: Vec<f64> = xs.chunks(3).map(max).collect();
    /// assert_eq!(out[0].data(), want);
    /// // the gradient goes to each row's maximum
    /// let g = b.build_scalar(&m.sum()).unwrap().gradient_a(&[&xs]).unwrap();
    /// assert_eq!(g.grads[0], [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    /// ```
    pub fn fold1(&self, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        self.fold1_named("fold1", f)
    }

    fn fold1_named(&self, name: &str, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        if self.shape.last() == Some(&0) {
            return self.b().fail(
                Error::Invalid(format!(
                    "{name} over an empty axis: the array has shape {:?}, and an empty row has \
                     no {}",
                    self.shape,
                    if name == "fold1" {
                        "first element to start from (fold with an initial value instead)"
                    } else {
                        "element to take (fold with an initial value, ±∞, instead)"
                    }
                )),
                self.shape[..self.shape.len() - 1].to_vec(),
            );
        }
        self.fold_impl(None, f)
    }

    /// Maximum along the innermost axis (which must be non-empty).
    ///
    /// Its derivative is the fold's, step by step: `max` gives ½ to each side at a tie, so a
    /// row `[5, 5, 5, 5]` sends `[⅛, ⅛, ¼, ½]` of its adjoint to its elements (a subgradient,
    /// summing to 1, weighted toward the later elements). The same for [`Acc::minimum`].
    pub fn maximum(&self) -> Acc {
        self.fold1_named("maximum", |a, b| a.max(b))
    }

    /// Minimum along the innermost axis (which must be non-empty).
    pub fn minimum(&self) -> Acc {
        self.fold1_named("minimum", |a, b| a.min(b))
    }

    /// Product along the innermost axis.
    pub fn product(&self) -> Acc {
        self.fold(1.0, |a, b| a * b)
    }

    fn fold_impl(&self, init: Option<f64>, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        let b = self.b();
        if self.shape.is_empty() {
            return b.fail(Error::Invalid("fold of a rank-0 array".into()), vec![]);
        }
        let shape = self.shape[..self.shape.len() - 1].to_vec();
        let dtype = self.dtype();
        let Some(fl) = b
            .lambda(2, |p| vec![f(p[0], p[1])])
            .and_then(|fl| b.type_step("fold", fl, dtype))
        else {
            return b.fail(Error::Invalid("fold".into()), shape);
        };
        let init = init.map(|v| b.init_lambda(v, dtype));
        b.push(
            ANode::Fold {
                f: fl,
                init,
                src: self.id,
            },
            shape,
        )
    }

    /// `scanl f init` along the innermost axis: length n + 1, element 0 is `init`, element
    /// `j + 1` is `f(element j, a[j])`. In the array's element type (as [`Acc::fold`]).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let c = x.scanl(0.0, |acc, v| acc + v); // prefix sums, length 5
    /// let xs = [1.0, 2.0, 3.0, 4.0];
    /// let out = b.build(&[&c]).unwrap().run(&[&xs]).unwrap();
    /// let mut want = vec![0.0];
    /// for v in xs {
    ///     want.push(want.last().unwrap() + v);
    /// }
    /// assert_eq!(out[0].data(), want);
    /// // Σ of the prefix sums: xⱼ is in 4 − j of them
    /// let g = b.build_scalar(&c.sum()).unwrap().gradient_a(&[&xs]).unwrap();
    /// assert_eq!(g.grads[0], [4.0, 3.0, 2.0, 1.0]);
    /// ```
    pub fn scanl(&self, init: f64, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        self.scan_impl(init, f, false)
    }

    /// `scanr f init`: length n + 1, element n is `init`, element `j` is
    /// `f(a[j], element j + 1)`.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let c = x.scanr(1.0, |v, acc| v * acc); // suffix products [x0x1x2, x1x2, x2, 1]
    /// let xs = [2.0, 3.0, 5.0];
    /// let out = b.build(&[&c]).unwrap().run(&[&xs]).unwrap();
    /// assert_eq!(out[0].data(), [2.0 * 3.0 * 5.0, 3.0 * 5.0, 5.0, 1.0]);
    /// // ∂/∂x of x0x1x2 + x1x2 + x2 + 1
    /// let g = b.build_scalar(&c.sum()).unwrap().gradient_a(&[&xs]).unwrap();
    /// let (x0, x1, x2) = (xs[0], xs[1], xs[2]);
    /// assert_eq!(g.grads[0], [x1 * x2, x0 * x2 + x2, x0 * x1 + x1 + 1.0]);
    /// ```
    pub fn scanr(&self, init: f64, f: impl FnOnce(Exp, Exp) -> Exp) -> Acc {
        self.scan_impl(init, f, true)
    }

    fn scan_impl(&self, init: f64, f: impl FnOnce(Exp, Exp) -> Exp, right: bool) -> Acc {
        let b = self.b();
        if self.shape.is_empty() {
            return b.fail(Error::Invalid("scan of a rank-0 array".into()), vec![]);
        }
        let mut shape = self.shape.to_vec();
        *shape.last_mut().expect("rank ≥ 1") += 1;
        let dtype = self.dtype();
        let Some(fl) = b
            .lambda(2, |p| vec![f(p[0], p[1])])
            .and_then(|fl| b.type_step("scan", fl, dtype))
        else {
            return b.fail(Error::Invalid("scan".into()), shape);
        };
        let init = b.init_lambda(init, dtype);
        b.push(
            ANode::Scan {
                f: fl,
                init,
                src: self.id,
                right,
            },
            shape,
        )
    }

    /// `permute comb default f a`: start from `default`; each element `a[i]` for which
    /// `f(i) = (keep, target)` has `keep` true is combined into `target`, in index order of
    /// `i`, in the arrays' element type (`default` must have `a`'s).
    ///
    /// ```
    /// use adjoint_array::{Builder, Combine};
    /// let b = Builder::new();
    /// let x = b.input(&[4]);
    /// let zeros = b.use_array(&[2], vec![0.0; 2]);
    /// // add xᵢ into bin i mod 2, dropping x₃
    /// let bins = x.permute(Combine::Add, &zeros, |i| (i[0].lt(3.0), vec![i[0].imod(2.0)]));
    /// let p = b.build_scalar(&bins.map(|v| v * v).sum()).unwrap();
    /// let xs = [1.0, 2.0, 3.0, 4.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// let (b0, b1) = (xs[0] + xs[2], xs[1]);
    /// assert_eq!(g.value, b0 * b0 + b1 * b1);
    /// assert_eq!(g.grads[0], [2.0 * b0, 2.0 * b1, 2.0 * b0, 0.0]);
    /// ```
    pub fn permute(
        &self,
        comb: Combine,
        default: &Acc,
        f: impl FnOnce(&[Exp]) -> (Exp, Vec<Exp>),
    ) -> Acc {
        let b = self.b();
        let shape = default.shape.to_vec();
        if !b.check(default) {
            return b.fail(Error::Invalid("foreign array".into()), shape);
        }
        let rank = self.shape.len() as u32;
        let mut bad = None;
        let lam = b.lambda(0, |_| {
            let idx: Vec<Exp> = (0..rank).map(idx_exp).collect();
            let (keep, t) = f(&idx);
            if t.len() != shape.len() {
                bad = Some(t.len());
            }
            // The target under `keep`: an element that is dropped does not perform its target's
            // reads (they were performed, and reported out of bounds, for every element).
            let mut v = vec![keep];
            v.extend(t.into_iter().map(|tj| keep.select(tj, 0.0)));
            v
        });
        if let Some(got) = bad {
            return b.fail(
                Error::Invalid(format!(
                    "permute: the index function returned {got} components for a target of \
                     shape {shape:?}"
                )),
                shape,
            );
        }
        let Some(idx) = lam else {
            return b.fail(Error::Invalid("permute".into()), shape);
        };
        if default.dtype() != self.dtype() {
            return b.fail(
                Error::DTypeMismatch {
                    combinator: "permute",
                    left: self.dtype(),
                    right: default.dtype(),
                },
                shape,
            );
        }
        // The index function's reads may be of either type, but not mixed.
        if b.type_lambda("permute", &idx, &[]).is_none() {
            return b.fail(Error::Invalid("permute".into()), shape);
        }
        b.push(
            ANode::Permute {
                comb,
                default: default.id,
                idx,
                src: self.id,
            },
            shape,
        )
    }

    /// `backpermute shape f a`: element `i` of the result is `a[f(i)]` (a gather).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let t = x.backpermute(&[3, 2], |i| vec![i[1], i[0]]); // the transpose
    /// let xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let out = b.build(&[&t]).unwrap().run(&[&xs]).unwrap();
    /// let want: Vec<f64> = (0..6).map(|k| xs[(k % 2) * 3 + k / 2]).collect();
    /// assert_eq!(out[0].data(), want);
    /// // a gather reading x[0, 0] twice: its gradient adds up
    /// let y = x.backpermute(&[2], |i| vec![i[0] * 0.0, i[0] * 0.0]);
    /// let g = b.build_scalar(&y.sum()).unwrap().gradient_a(&[&xs]).unwrap();
    /// assert_eq!(g.grads[0], [2.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    /// ```
    pub fn backpermute(&self, shape: &[usize], f: impl FnOnce(&[Exp]) -> Vec<Exp>) -> Acc {
        let me = self.clone();
        self.b().generate(shape, move |i| {
            let ix = f(i);
            if ix.len() != me.shape.len() {
                // (named here: `at`'s message said "indexing", which the user did not write)
                crate::expr::record_error(Error::Invalid(format!(
                    "backpermute: the index function gives an index of length {} for a \
                     source of shape {:?}, which needs {}",
                    ix.len(),
                    me.shape,
                    me.shape.len()
                )));
                return crate::expr::lit(f64::NAN);
            }
            me.at(&ix)
        })
    }

    /// `replicate`: `spec` lists the result's axes, `Rep::All` for each axis of this array (in
    /// order) and `Rep::New(n)` for a new axis of `n` copies.
    ///
    /// ```
    /// use adjoint_array::{Builder, Rep};
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let rows = x.replicate(&[Rep::New(2), Rep::All]); // [2, 3]: x twice, as rows
    /// let cols = x.replicate(&[Rep::All, Rep::New(2)]); // [3, 2]: each xᵢ twice
    /// let out = b.build(&[&rows, &cols]).unwrap().run(&[&[1.0, 2.0, 3.0]]).unwrap();
    /// assert_eq!(out[0].data(), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    /// assert_eq!(out[1].data(), [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
    /// // the gradient sums over the copies
    /// let p = b.build_scalar(&rows.map(|v| v * v).sum().sum()).unwrap();
    /// assert_eq!(p.gradient_a(&[&[1.0, 2.0, 3.0]]).unwrap().grads[0], [4.0, 8.0, 12.0]);
    /// ```
    pub fn replicate(&self, spec: &[Rep]) -> Acc {
        let b = self.b();
        let shape: Vec<usize> = spec
            .iter()
            .scan(0usize, |k, r| {
                Some(match r {
                    Rep::All => {
                        *k += 1;
                        self.shape.get(*k - 1).copied().unwrap_or(0)
                    }
                    Rep::New(n) => *n,
                })
            })
            .collect();
        let alls: Vec<usize> = (0..spec.len()).filter(|&j| spec[j] == Rep::All).collect();
        if alls.len() != self.shape.len() {
            return b.fail(
                Error::Invalid(format!(
                    "replicate: the spec has {} `All` axes for an array of shape {:?}",
                    alls.len(),
                    self.shape
                )),
                shape,
            );
        }
        let me = self.clone();
        b.generate(&shape, move |i| {
            let ix: Vec<Exp> = alls.iter().map(|&j| i[j]).collect();
            me.at(&ix)
        })
    }

    /// `slice`: `spec` has one entry per axis; `Sl::At(k)` removes the axis at index `k`.
    ///
    /// ```
    /// use adjoint_array::{Builder, Sl};
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let row1 = x.slice(&[Sl::At(1), Sl::All]); // [3]
    /// let col2 = x.slice(&[Sl::All, Sl::At(2)]); // [2]
    /// let xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let out = b.build(&[&row1, &col2]).unwrap().run(&[&xs]).unwrap();
    /// assert_eq!(out[0].data(), &xs[3..6]);
    /// assert_eq!(out[1].data(), [xs[2], xs[5]]);
    /// let g = b.build_scalar(&row1.sum()).unwrap().gradient_a(&[&xs]).unwrap();
    /// assert_eq!(g.grads[0], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    /// ```
    pub fn slice(&self, spec: &[Sl]) -> Acc {
        let b = self.b();
        let shape: Vec<usize> = spec
            .iter()
            .zip(self.shape.iter())
            .filter(|(s, _)| **s == Sl::All)
            .map(|(_, &n)| n)
            .collect();
        if spec.len() != self.shape.len() {
            return b.fail(
                Error::Invalid(format!(
                    "slice: the spec has {} entries for an array of shape {:?}",
                    spec.len(),
                    self.shape
                )),
                shape,
            );
        }
        for (s, &n) in spec.iter().zip(self.shape.iter()) {
            if let Sl::At(k) = s {
                if *k >= n {
                    return b.fail(
                        Error::OutOfBounds {
                            index: spec
                                .iter()
                                .map(|s| match s {
                                    Sl::All => f64::NAN,
                                    Sl::At(k) => *k as f64,
                                })
                                .collect(),
                            shape: self.shape.to_vec(),
                            context: "slice",
                        },
                        shape,
                    );
                }
            }
        }
        let me = self.clone();
        let spec = spec.to_vec();
        b.generate(&shape, move |i| {
            let mut k = 0;
            let ix: Vec<Exp> = spec
                .iter()
                .map(|s| match s {
                    Sl::All => {
                        k += 1;
                        i[k - 1]
                    }
                    Sl::At(v) => crate::expr::lit(*v as f64),
                })
                .collect();
            me.at(&ix)
        })
    }

    /// `reshape`: the same elements (row-major) in a new shape of the same size.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[6]);
    /// let m = x.reshape(&[2, 3]); // row-major: rows [x0 x1 x2], [x3 x4 x5]
    /// let xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let out = b.build(&[&m, &m.sum()]).unwrap().run(&[&xs]).unwrap();
    /// assert_eq!(out[0].shape(), [2, 3]);
    /// assert_eq!(out[1].data(), [1.0 + 2.0 + 3.0, 4.0 + 5.0 + 6.0]);
    /// // the sizes must agree
    /// let bad = x.reshape(&[4]);
    /// assert!(b.build(&[&bad]).is_err());
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Acc {
        let b = self.b();
        if element_count(shape).ok() != element_count(&self.shape).ok() {
            return b.fail(
                Error::ShapeMismatch {
                    combinator: "reshape",
                    left: self.shape.to_vec(),
                    right: shape.to_vec(),
                },
                shape.to_vec(),
            );
        }
        b.push(ANode::Reshape { src: self.id }, shape.to_vec())
    }

    /// The matrix product `self [m, p] × other [p, q] → [m, q]` (`Σⱼ self[i, j] · other[j, k]`),
    /// run as one blocked, vectorised kernel over whole arrays on all cores, not as a fused
    /// scalar kernel per element: the array-at-a-time primitive for contractions, which
    /// `generate` + `sum` would spell `b.generate(&[m, q, p], |i| x.at(&[i[0], i[2]]) *
    /// y.at(&[i[2], i[1]])).sum()` at several times the cost. Its adjoint is two more products,
    /// `C̄ otherᵀ` and `selfᵀ C̄` (transposes are strides, not copies). Both operands are rank 2
    /// (a vector is a `[1, n]` or `[n, 1]` [`Acc::reshape`]) of one element type; over `f32`
    /// the products and sums are `f32`. Results are bit-identical for any thread count, but a
    /// sum of products here may round differently from the same sum written as a `fold`. A
    /// zero adjoint sends nothing back against an operand's ∞ or NaN, as everywhere in the
    /// engine (a plain gated product then; the CUDA backend's adjoint products are dense and
    /// give `0 · ∞ = NaN` there).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2, 3]);
    /// let w = b.input(&[3, 1]);
    /// let loss = x.matmul(&w).map(|v| v * v).sum().sum(); // ‖x w‖²
    /// let p = b.build_scalar(&loss).unwrap();
    /// let (xv, wv) = ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.5, -1.0, 2.0]);
    /// let g = p.gradient_a(&[&xv, &wv]).unwrap();
    /// let y = [4.5, 9.0]; // x w
    /// assert_eq!(g.value, y[0] * y[0] + y[1] * y[1]);
    /// // ∂/∂w = 2 xᵀ (x w)
    /// assert_eq!(g.grads[1], vec![2.0 * (1.0 * 4.5 + 4.0 * 9.0), 2.0 * (2.0 * 4.5 + 5.0 * 9.0),
    ///                             2.0 * (3.0 * 4.5 + 6.0 * 9.0)]);
    /// ```
    pub fn matmul(&self, other: &Acc) -> Acc {
        let b = self.b();
        let (l, r) = (self.shape.to_vec(), other.shape.to_vec());
        let out = match (l.as_slice(), r.as_slice()) {
            (&[m, _], &[_, q]) => vec![m, q],
            _ => vec![0, 0],
        };
        if !b.check(other) {
            return b.fail(Error::Invalid("foreign array".into()), out);
        }
        if l.len() != 2 || r.len() != 2 || l[1] != r[0] {
            // (`[3]` vs `[3]` said nothing about what was wrong)
            let combinator = if l.len() != 2 || r.len() != 2 {
                "matmul (of matrices, rank 2: reshape a vector to [n, 1] or [1, n])"
            } else {
                "matmul (the left's columns must be the right's rows)"
            };
            return b.fail(
                Error::ShapeMismatch {
                    combinator,
                    left: l,
                    right: r,
                },
                out,
            );
        }
        let (dl, dr) = (self.dtype(), other.dtype());
        if dl != dr {
            return b.fail(
                Error::DTypeMismatch {
                    combinator: "matmul",
                    left: dl,
                    right: dr,
                },
                out,
            );
        }
        b.push(
            ANode::MatMul {
                a: self.id,
                b: other.id,
            },
            out,
        )
    }

    /// The same values with no gradient flowing back through them.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// // Σ x · stop(x): the value of Σ x², but only one factor is differentiated
    /// let y = x.zip_with(&x.stop_gradient(), |a, c| a * c).sum();
    /// let g = b.build_scalar(&y).unwrap().gradient_a(&[&[3.0, -1.0]]).unwrap();
    /// assert_eq!(g.value, 9.0 + 1.0);
    /// assert_eq!(g.grads[0], [3.0, -1.0]); // x, not 2x
    /// ```
    pub fn stop_gradient(&self) -> Acc {
        self.b()
            .push(ANode::StopGrad { src: self.id }, self.shape.to_vec())
    }

    /// Always store this array (never recompute or fuse it into its consumers).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let e = x.map(|v| v.exp()).materialize(); // stored, not recomputed in each consumer
    /// // tanh(x/2) = (eˣ − 1)/(eˣ + 1)
    /// let y = e.map(|v| v - 1.0).zip_with(&e.map(|v| v + 1.0), |a, c| a / c).sum();
    /// let p = b.build_scalar(&y).unwrap();
    /// assert!(p.describe().contains("[3] gen")); // eˣ is a kernel of its own
    /// let xs = [-1.0, 0.0, 2.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// for (d, &v) in g.grads[0].iter().zip(&xs) {
    ///     assert!((d - 0.5 * (1.0 - (v / 2.0).tanh().powi(2))).abs() < 1e-15);
    /// }
    /// ```
    pub fn materialize(&self) -> Acc {
        self.g.borrow_mut().nodes[self.id as usize].store = true;
        self.clone()
    }
}

/// A dense array: shape and row-major data.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Array {
    /// An array from its shape and row-major data.
    ///
    /// ```
    /// use adjoint_array::Array;
    /// let a = Array::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert_eq!(a.shape(), [2, 3]);
    /// ```
    ///
    /// # Panics
    /// If the shape's element count is not the data's length (the message names both).
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        let n: usize = shape.iter().product();
        assert!(
            n == data.len(),
            "Array::new: shape {shape:?} holds {n} elements, but the data has {}",
            data.len()
        );
        Array { shape, data }
    }
    /// The shape.
    ///
    /// ```
    /// use adjoint_array::Array;
    /// assert_eq!(Array::new(vec![3, 1], vec![0.0; 3]).shape(), [3, 1]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The elements, row-major.
    ///
    /// ```
    /// use adjoint_array::Array;
    /// let a = Array::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    /// assert_eq!(a.data()[1 * 2 + 0], 3.0); // row 1, column 0
    /// ```
    pub fn data(&self) -> &[f64] {
        &self.data
    }
    /// Take the elements.
    ///
    /// ```
    /// use adjoint_array::Array;
    /// let v: Vec<f64> = Array::new(vec![2], vec![1.0, 2.0]).into_data();
    /// assert_eq!(v, [1.0, 2.0]);
    /// ```
    pub fn into_data(self) -> Vec<f64> {
        self.data
    }
}

/// The data of one input for [`Program::run_typed`] / [`Program::gradient_typed`]: `f64` or
/// `f32`, matching the input's declared [`DType`]. `&[f32]`, `&Vec<f32>`, `&[f32; N]` (and
/// the `f64` ones) convert with `.into()`.
///
/// ```
/// use adjoint_array::{DType, Input};
/// let x = vec![1.0f32, 2.0];
/// let i: Input = (&x).into();
/// assert_eq!(i.dtype(), DType::F32);
/// assert_eq!(Input::from(&[1.0f64][..]).dtype(), DType::F64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Input<'a> {
    /// `f64` data
    F64(&'a [f64]),
    /// `f32` data
    F32(&'a [f32]),
}

impl Input<'_> {
    /// The element type of the data.
    pub fn dtype(&self) -> DType {
        match self {
            Input::F64(_) => DType::F64,
            Input::F32(_) => DType::F32,
        }
    }
    fn len(&self) -> usize {
        match self {
            Input::F64(x) => x.len(),
            Input::F32(x) => x.len(),
        }
    }
}

macro_rules! input_from {
    ($t:ty, $v:ident) => {
        impl<'a> From<&'a [$t]> for Input<'a> {
            fn from(x: &'a [$t]) -> Self {
                Input::$v(x)
            }
        }
        impl<'a> From<&'a Vec<$t>> for Input<'a> {
            fn from(x: &'a Vec<$t>) -> Self {
                Input::$v(x)
            }
        }
        impl<'a, const N: usize> From<&'a [$t; N]> for Input<'a> {
            fn from(x: &'a [$t; N]) -> Self {
                Input::$v(x)
            }
        }
    };
}
input_from!(f64, F64);
input_from!(f32, F32);

/// Typed data of an output or a gradient: `f32` for `f32` arrays, `f64` otherwise.
///
/// ```
/// use adjoint_array::{Buffer, DType};
/// let b = Buffer::F32(vec![0.5, 1.5]);
/// assert_eq!(b.dtype(), DType::F32);
/// assert_eq!(b.as_f32(), Some(&[0.5f32, 1.5][..]));
/// assert_eq!(b.as_f64(), None);
/// assert_eq!(b.to_f64_vec(), vec![0.5, 1.5]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    /// `f64` elements
    F64(Vec<f64>),
    /// `f32` elements
    F32(Vec<f32>),
}

impl Buffer {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::F64(_) => DType::F64,
            Buffer::F32(_) => DType::F32,
        }
    }
    /// The `f64` elements, or `None` for an `f32` buffer.
    pub fn as_f64(&self) -> Option<&[f64]> {
        match self {
            Buffer::F64(v) => Some(v),
            Buffer::F32(_) => None,
        }
    }
    /// The `f32` elements, or `None` for an `f64` buffer.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Buffer::F32(v) => Some(v),
            Buffer::F64(_) => None,
        }
    }
    /// The elements as `f64` (exact for `f32`).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Buffer::F64(v) => v.clone(),
            Buffer::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        }
    }
    fn of(dtype: DType, v: Vec<f64>) -> Buffer {
        match dtype {
            DType::F64 => Buffer::F64(v),
            DType::F32 => Buffer::F32(v.into_iter().map(|x| x as f32).collect()),
        }
    }
}

/// Value and gradient of a scalar program with typed data ([`Program::gradient_typed`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TypedGradient {
    /// The program's scalar output, in its element type.
    pub value: Buffer,
    /// One gradient per input, in the input's element type (zeros for constant inputs).
    pub grads: Vec<Buffer>,
}

/// A built array program: run it on new inputs many times, or differentiate it.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) g: Arc<Graph>,
}

/// Value and gradient of a scalar program.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient {
    /// The program's (scalar) output.
    pub value: f64,
    /// One gradient per input, in declaration order (zeros for constant inputs).
    pub grads: Vec<Vec<f64>>,
}

impl Program {
    /// The declared input shapes.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (m, v) = (b.input(&[2, 3]), b.input(&[3]));
    /// let p = b.build(&[&m.map(|x| x * 2.0), &v]).unwrap();
    /// assert_eq!(p.input_shapes(), [vec![2, 3], vec![3]]);
    /// ```
    pub fn input_shapes(&self) -> Vec<Vec<usize>> {
        self.g
            .inputs
            .iter()
            .map(|&i| self.g.nodes[i as usize].shape.clone())
            .collect()
    }

    /// The output shapes.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let m = b.input(&[2, 3]);
    /// let p = b.build(&[&m.sum(), &m.map(|x| x.exp())]).unwrap();
    /// assert_eq!(p.output_shapes(), [vec![2], vec![2, 3]]); // the rows' sums, then a matrix
    /// ```
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        self.g
            .outputs
            .iter()
            .map(|&i| self.g.nodes[i as usize].shape.clone())
            .collect()
    }

    /// The declared inputs' element types.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let (x, w) = (b.input(&[3]), b.input_f32(&[3]));
    /// let p = b.build(&[&x.zip_with(&w, |a, c| a * c.cast_f64())]).unwrap();
    /// assert_eq!(p.input_dtypes(), [DType::F64, DType::F32]);
    /// ```
    pub fn input_dtypes(&self) -> Vec<DType> {
        self.g
            .inputs
            .iter()
            .map(|&i| self.g.nodes[i as usize].dtype)
            .collect()
    }

    /// The outputs' element types.
    ///
    /// ```
    /// use adjoint_array::{Builder, DType};
    /// let b = Builder::new();
    /// let w = b.input_f32(&[3]);
    /// let p = b.build(&[&w.map(|c| c * 2.0), &w.map(|c| c.cast_f64())]).unwrap();
    /// assert_eq!(p.output_dtypes(), [DType::F32, DType::F64]);
    /// ```
    pub fn output_dtypes(&self) -> Vec<DType> {
        self.g
            .outputs
            .iter()
            .map(|&i| self.g.nodes[i as usize].dtype)
            .collect()
    }

    /// Run the program on typed inputs (one per declared input, of its [`DType`]); each output
    /// comes back in its element type.
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder, Input};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[2]);
    /// let w = b.input(&[2]);
    /// let y = x.map(|v| v.exp());
    /// let z = w.zip_with(&x.cast_f64(), |a, c| a * c);
    /// let p = b.build(&[&y, &z]).unwrap();
    /// let out = p.run_typed(&[Input::F32(&[0.5, 1.0]), Input::F64(&[2.0, 3.0])]).unwrap();
    /// assert_eq!(out[0], Buffer::F32(vec![0.5f32.exp(), 1f32.exp()]));
    /// assert_eq!(out[1], Buffer::F64(vec![1.0, 3.0]));
    /// ```
    pub fn run_typed(&self, inputs: &[Input]) -> Result<Vec<Buffer>> {
        let ins = self.check_typed(inputs)?;
        self.run_vals(ins, |n, data| Buffer::of(n.dtype, data))
    }

    /// Run on checked inputs (on the pool: [`crate::exec::on_pool`]); `out` makes each output
    /// from its node and values.
    fn run_vals<T: Send>(
        &self,
        ins: Vec<crate::exec::Val>,
        out: impl Fn(&NodeInfo, Vec<f64>) -> T + Sync,
    ) -> Result<Vec<T>> {
        crate::exec::on_pool(&self.g, || {
            let mut ex = crate::exec::Exec::new(&self.g, ins, false);
            ex.run_outputs()?;
            Ok(self
                .g
                .outputs
                .iter()
                .map(|&o| out(&self.g.nodes[o as usize], ex.take_value(o)))
                .collect())
        })
    }

    /// Value and gradient of a program with one scalar output, on typed inputs: each gradient
    /// is in its input's element type (`f32` for an `f32` input).
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder, Input};
    /// let b = Builder::new();
    /// let w = b.input_f32(&[2]);
    /// let x = b.constant_input(&[2]); // f64 data
    /// let s = w.zip_with(&x.cast_f32(), |a, c| a * c).sum();
    /// let p = b.build_scalar(&s).unwrap();
    /// let g = p.gradient_typed(&[Input::F32(&[2.0, 3.0]), Input::F64(&[0.5, 0.25])]).unwrap();
    /// assert_eq!(g.value, Buffer::F32(vec![1.75]));
    /// assert_eq!(g.grads[0], Buffer::F32(vec![0.5, 0.25]));
    /// assert_eq!(g.grads[1], Buffer::F64(vec![0.0, 0.0])); // a constant input
    /// ```
    pub fn gradient_typed(&self, inputs: &[Input]) -> Result<TypedGradient> {
        let shapes = self.output_shapes();
        if shapes.len() != 1 || !shapes[0].is_empty() {
            return Err(Error::NonScalarOutput(shapes));
        }
        let (mut outs, grads) = self.vjp_typed(inputs, &[Input::F64(&[1.0])])?;
        Ok(TypedGradient {
            value: outs.pop().expect("one output"),
            grads,
        })
    }

    /// Vector–Jacobian product on typed inputs: outputs and `Σ_o seeds[o] · ∂output_o/∂input`
    /// per input, each in its array's element type (seeds of either type; a seed of an `f32`
    /// output is rounded to `f32`).
    ///
    /// ```
    /// use adjoint_array::{Buffer, Builder, Input};
    /// let b = Builder::new();
    /// let x = b.input_f32(&[2]);
    /// let y = x.map(|v| v * v);
    /// let p = b.build(&[&y]).unwrap();
    /// let (out, g) = p
    ///     .vjp_typed(&[Input::F32(&[3.0, 4.0])], &[Input::F32(&[1.0, 0.5])])
    ///     .unwrap();
    /// assert_eq!(out[0], Buffer::F32(vec![9.0, 16.0]));
    /// assert_eq!(g[0], Buffer::F32(vec![6.0, 4.0]));
    /// ```
    pub fn vjp_typed(
        &self,
        inputs: &[Input],
        seeds: &[Input],
    ) -> Result<(Vec<Buffer>, Vec<Buffer>)> {
        let ins = self.check_typed(inputs)?;
        let seeds: Vec<Vec<f64>> = seeds
            .iter()
            .map(|s| match s {
                Input::F64(x) => x.to_vec(),
                Input::F32(x) => x.iter().map(|&v| f64::from(v)).collect(),
            })
            .collect();
        let (outs, grads) = self.vjp_vals(ins, seeds)?;
        let outs = outs
            .into_iter()
            .zip(self.output_dtypes())
            .map(|(a, d)| Buffer::of(d, a.data))
            .collect();
        let grads = grads
            .into_iter()
            .zip(self.input_dtypes())
            .map(|(g, d)| Buffer::of(d, g))
            .collect();
        Ok((outs, grads))
    }

    fn check_typed<'a>(&self, inputs: &[Input<'a>]) -> Result<Vec<crate::exec::Val<'a>>> {
        let shapes = self.input_shapes();
        if inputs.len() != shapes.len() {
            return Err(Error::InputCount {
                expected: shapes.len(),
                got: inputs.len(),
            });
        }
        inputs
            .iter()
            .zip(shapes)
            .zip(self.input_dtypes())
            .enumerate()
            .map(|(i, ((x, sh), dt))| {
                let n: usize = sh.iter().product();
                if x.len() != n {
                    return Err(Error::InputSize {
                        index: i,
                        shape: sh,
                        expected: n,
                        got: x.len(),
                    });
                }
                if x.dtype() != dt {
                    return Err(Error::InputType {
                        index: i,
                        expected: dt,
                        got: x.dtype(),
                    });
                }
                Ok(match x {
                    Input::F64(x) => crate::exec::Val::B(x),
                    // stored widened (exactly); f32 arithmetic rounds every operation
                    Input::F32(x) => {
                        crate::exec::Val::O(Arc::new(x.iter().map(|&v| f64::from(v)).collect()))
                    }
                })
            })
            .collect()
    }

    /// A one-line-per-node description of the optimised program: the nodes that run (after
    /// fusion) and the size of each kernel's expression DAG.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[1000]);
    /// // a chain of maps and the sum over it fuse into one kernel
    /// let y = x.map(|v| v * 2.0).map(|v| v.sin()).sum();
    /// let d = b.build_scalar(&y).unwrap().describe();
    /// println!("{d}"); // e.g. "0: [1000] input 0" and "3: [] sum∘gen (…)"
    /// assert_eq!(d.lines().count(), 2);
    /// assert!(d.contains("input 0") && d.contains("sum∘gen"));
    /// ```
    pub fn describe(&self) -> String {
        let g = &self.g;
        let mut live = vec![false; g.nodes.len()];
        let mut stack: Vec<NodeId> = g.outputs.clone();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut live[i as usize], true) {
                continue;
            }
            let k = &g.nodes[i as usize].kind;
            stack.extend(k.operands());
            stack.extend(k.reads());
        }
        let mut out = String::new();
        for (i, n) in g.nodes.iter().enumerate().filter(|(i, _)| live[*i]) {
            let what = match &n.kind {
                ANode::Input { index, .. } => format!("input {index}"),
                ANode::Use(_) => "use".into(),
                ANode::Gen { lam, args, .. } => {
                    format!("gen ({} nodes, args {:?})", lam.ar.nodes.len(), args)
                }
                ANode::SumGen { lam, args, .. } => {
                    format!("sum∘gen ({} nodes, args {:?})", lam.ar.nodes.len(), args)
                }
                ANode::Sum { src } => format!("sum {src}"),
                ANode::Fold { src, .. } => format!("fold {src}"),
                ANode::Scan { src, .. } => format!("scan {src}"),
                ANode::ScanN { step, steps, .. } => format!(
                    "scan_n ({} nodes, {} state, {steps} steps)",
                    step.ar.nodes.len(),
                    step.outs.len()
                ),
                ANode::Permute { default, src, .. } => format!("permute {src} into {default}"),
                ANode::Reshape { src } => format!("reshape {src}"),
                ANode::StopGrad { src } => format!("stop_gradient {src}"),
                ANode::Acond { t, e, .. } => format!("acond {t} {e}"),
                ANode::Awhile { init, inv, .. } => format!("awhile {init:?} {inv:?}"),
                ANode::Proj { src, k } => format!("proj {src}.{k}"),
                ANode::MatMul { a, b } => format!("matmul {a} {b}"),
            };
            out.push_str(&format!("{i}: {:?} {what}\n", n.shape));
        }
        out
    }

    /// Run the program on `inputs` (one row-major slice per declared input).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let (x, y) = (b.input(&[2]), b.input(&[2]));
    /// let h = x.zip_with(&y, |a, c| (a * a + c * c).sqrt());
    /// let p = b.build(&[&h, &x.sum()]).unwrap();
    /// let out = p.run(&[&[3.0, 5.0], &[4.0, 12.0]]).unwrap();
    /// assert_eq!(out[0].shape(), [2]);
    /// assert_eq!(out[0].data(), [5.0, 13.0]);
    /// assert_eq!(out[1].data(), [3.0 + 5.0]);
    /// // one slice per input, of the input's size
    /// assert!(p.run(&[&[3.0, 5.0]]).is_err());
    /// assert!(p.run(&[&[3.0], &[4.0, 12.0]]).is_err());
    /// ```
    pub fn run(&self, inputs: &[&[f64]]) -> Result<Vec<Array>> {
        let ins = self.check_inputs(inputs)?;
        self.run_vals(ins, |n, data| Array {
            shape: n.shape.clone(),
            data,
        })
    }

    /// [`run`](Program::run) into the caller's buffers, one per output (resized as needed):
    /// a program run many times reuses its output memory, so a steady-state run of an
    /// element-wise program (a fused map chain) allocates no output array.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let y = x.map(|v| v * 2.0).map(|v| v + 1.0);
    /// let p = b.build(&[&y]).unwrap();
    /// let mut out = vec![Vec::new()];
    /// for k in 0..3 {
    ///     p.run_into(&[&[1.0, 2.0, k as f64]], &mut out).unwrap();
    /// }
    /// assert_eq!(out[0], vec![3.0, 5.0, 5.0]);
    /// ```
    pub fn run_into(&self, inputs: &[&[f64]], outputs: &mut [Vec<f64>]) -> Result<()> {
        let ins = self.check_inputs(inputs)?;
        if outputs.len() != self.g.outputs.len() {
            return Err(Error::Invalid(format!(
                "run_into: the program has {} outputs, {} buffers were given",
                self.g.outputs.len(),
                outputs.len()
            )));
        }
        crate::exec::on_pool(&self.g, || {
            let mut ex = crate::exec::Exec::new(&self.g, ins, false);
            for (&o, buf) in self.g.outputs.iter().zip(outputs.iter_mut()) {
                ex.give_buffer(o, std::mem::take(buf));
            }
            ex.run_outputs()?;
            for (&o, buf) in self.g.outputs.iter().zip(outputs.iter_mut()) {
                *buf = ex.take_value(o);
            }
            Ok(())
        })
    }

    /// Value and gradient of a program with one scalar output (`_a`: of an array program, the
    /// seed's `gradientA`; [`gradient_e`](crate::gradient_e) differentiates a scalar
    /// expression).
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[3]);
    /// let p = b.build_scalar(&x.map(|v| v.sin() * v).sum()).unwrap();
    /// let xs = [0.5, 1.0, 2.0];
    /// let g = p.gradient_a(&[&xs]).unwrap();
    /// assert!((g.value - xs.iter().map(|v| v.sin() * v).sum::<f64>()).abs() < 1e-15);
    /// // ∂/∂x (x sin x) = sin x + x cos x
    /// for (d, v) in g.grads[0].iter().zip(&xs) {
    ///     assert!((d - (v.sin() + v * v.cos())).abs() < 1e-15);
    /// }
    /// ```
    pub fn gradient_a(&self, inputs: &[&[f64]]) -> Result<Gradient> {
        let shapes = self.output_shapes();
        if shapes.len() != 1 || !shapes[0].is_empty() {
            return Err(Error::NonScalarOutput(shapes));
        }
        let (outs, grads) = self.vjp(inputs, &[&[1.0]])?;
        Ok(Gradient {
            value: outs[0].data[0],
            grads,
        })
    }

    /// Vector–Jacobian product: outputs and `Σ_o seeds[o] · ∂output_o/∂input` per input.
    ///
    /// ```
    /// use adjoint_array::Builder;
    /// let b = Builder::new();
    /// let x = b.input(&[2]);
    /// let y = x.map(|v| v * v); // [2]
    /// let s = x.map(|v| v.exp()).sum(); // []
    /// let p = b.build(&[&y, &s]).unwrap();
    /// let xs = [1.0, 2.0];
    /// let (out, g) = p.vjp(&[&xs], &[&[10.0, 1.0], &[0.5]]).unwrap();
    /// assert_eq!(out[0].data(), [1.0, 4.0]);
    /// // 10·∂y₀ + 1·∂y₁ + 0.5·∂s: (20x₀ + 0.5eˣ⁰, 2x₁ + 0.5eˣ¹)
    /// let want = [20.0 * xs[0] + 0.5 * xs[0].exp(), 2.0 * xs[1] + 0.5 * xs[1].exp()];
    /// for (d, w) in g[0].iter().zip(&want) {
    ///     assert!((d - w).abs() < 1e-14);
    /// }
    /// ```
    pub fn vjp(&self, inputs: &[&[f64]], seeds: &[&[f64]]) -> Result<(Vec<Array>, Vec<Vec<f64>>)> {
        let ins = self.check_inputs(inputs)?;
        self.vjp_vals(ins, seeds.iter().map(|s| s.to_vec()).collect())
    }

    fn vjp_vals(
        &self,
        ins: Vec<crate::exec::Val>,
        seeds: Vec<Vec<f64>>,
    ) -> Result<(Vec<Array>, Vec<Vec<f64>>)> {
        let refs: Vec<&[f64]> = seeds.iter().map(|s| &s[..]).collect();
        self.check_seeds(&refs)?;
        crate::exec::on_pool(&self.g, || self.vjp_on_pool(ins, seeds))
    }

    fn vjp_on_pool(
        &self,
        ins: Vec<crate::exec::Val>,
        seeds: Vec<Vec<f64>>,
    ) -> Result<(Vec<Array>, Vec<Vec<f64>>)> {
        let mut ex = crate::exec::Exec::new(&self.g, ins, true);
        ex.run_outputs()?;
        let outs: Vec<Array> = self
            .g
            .outputs
            .iter()
            .map(|&o| Array {
                shape: self.g.nodes[o as usize].shape.clone(),
                data: ex.value(o).to_vec(),
            })
            .collect();
        let seeds: Vec<(NodeId, Vec<f64>)> = self.g.outputs.iter().copied().zip(seeds).collect();
        let grads = crate::exec::backward(&ex, seeds)?;
        Ok((outs, self.zero_filled(grads)))
    }

    /// One gradient per input: the computed ones, zeros for inputs the outputs do not depend
    /// on.
    pub(crate) fn zero_filled(&self, grads: Vec<Option<Vec<f64>>>) -> Vec<Vec<f64>> {
        grads
            .into_iter()
            .zip(self.input_shapes())
            .map(|(g, sh)| g.unwrap_or_else(|| vec![0.0; sh.iter().product()]))
            .collect()
    }

    /// One seed per output, of the output's size.
    pub(crate) fn check_seeds(&self, seeds: &[&[f64]]) -> Result<()> {
        let shapes = self.output_shapes();
        if seeds.len() != shapes.len() {
            return Err(Error::SeedCount {
                expected: shapes.len(),
                got: seeds.len(),
            });
        }
        for (i, (s, sh)) in seeds.iter().zip(&shapes).enumerate() {
            let n: usize = sh.iter().product();
            if s.len() != n {
                return Err(Error::SeedSize {
                    index: i,
                    shape: sh.clone(),
                    expected: n,
                    got: s.len(),
                });
            }
        }
        Ok(())
    }

    pub(crate) fn check_inputs<'a>(
        &self,
        inputs: &[&'a [f64]],
    ) -> Result<Vec<crate::exec::Val<'a>>> {
        let typed: Vec<Input<'a>> = inputs.iter().map(|&x| Input::F64(x)).collect();
        self.check_typed(&typed)
    }
}

// `a + b`, `a - b`, `a * b`, `a / b` of arrays: see `Acc`'s docs.
macro_rules! acc_ops {
    ($($tr:ident $m:ident $op:tt $name:literal),*) => {$(
        impl std::ops::$tr<&Acc> for &Acc {
            type Output = Acc;
            fn $m(self, other: &Acc) -> Acc {
                self.b().zip_named($name, &[self, other], |p| p[0] $op p[1])
            }
        }
        impl std::ops::$tr<Acc> for Acc {
            type Output = Acc;
            fn $m(self, other: Acc) -> Acc {
                &self $op &other
            }
        }
        impl std::ops::$tr<&Acc> for Acc {
            type Output = Acc;
            fn $m(self, other: &Acc) -> Acc {
                &self $op other
            }
        }
        impl std::ops::$tr<Acc> for &Acc {
            type Output = Acc;
            fn $m(self, other: Acc) -> Acc {
                self $op &other
            }
        }
    )*};
}
acc_ops!(Add add + "`+`", Sub sub - "`-`", Mul mul * "`*`", Div div / "`/`");

// `a * 2.0`, `1.0 - a`: an array and a number, element by element (a `map`).
macro_rules! acc_scalar_ops {
    ($($tr:ident $m:ident $op:tt),*) => {$(
        impl std::ops::$tr<f64> for &Acc {
            type Output = Acc;
            fn $m(self, c: f64) -> Acc {
                self.map(|v| v $op c)
            }
        }
        impl std::ops::$tr<f64> for Acc {
            type Output = Acc;
            fn $m(self, c: f64) -> Acc {
                &self $op c
            }
        }
        impl std::ops::$tr<&Acc> for f64 {
            type Output = Acc;
            fn $m(self, a: &Acc) -> Acc {
                a.map(|v| self $op v)
            }
        }
        impl std::ops::$tr<Acc> for f64 {
            type Output = Acc;
            fn $m(self, a: Acc) -> Acc {
                self $op &a
            }
        }
    )*};
}
acc_scalar_ops!(Add add +, Sub sub -, Mul mul *, Div div /);

/// `-&a`: every element negated.
impl std::ops::Neg for &Acc {
    type Output = Acc;
    fn neg(self) -> Acc {
        self.map(|v| -v)
    }
}
impl std::ops::Neg for Acc {
    type Output = Acc;
    fn neg(self) -> Acc {
        -&self
    }
}

/// The number of elements of an array of this shape, or the build error for one with more than
/// 2⁵³ (indices are `f64`, exact up to there) or more than `usize` counts.
fn element_count(shape: &[usize]) -> Result<usize> {
    const MAX: usize = 1 << 53;
    if shape.contains(&0) {
        return Ok(0); // (`[2³², 2³², 0]` is empty, however its other axes multiply)
    }
    match shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        Some(n) if n <= MAX => Ok(n),
        Some(n) => Err(Error::Invalid(format!(
            "shape {shape:?} has {n} elements, more than the 2^53 an array can index (indices \
             are f64)"
        ))),
        None => Err(Error::Invalid(format!(
            "shape {shape:?}: its element count overflows usize"
        ))),
    }
}
