//! The benchmarks of seed 003 §13 (Smeding & Vákár), run by adjoint's engines and by the Rust
//! reverse-mode crates `echidna`, `ad_trait` and `reverse` in the same process.
//!
//! Each program is written once over [`Num13`], a deliberately small numeric trait that every
//! tool's scalar implements in a few lines, so all tools run the identical source program.
//!
//! | program | inputs | definition |
//! |---|---|---|
//! | scalar mul | 2 | x·y |
//! | dot | 2·10⁶ | Σ xᵢyᵢ, n = 10⁶ |
//! | matvec | 10⁶ + 10³ | Σᵢ (M v)ᵢ, M 1000 × 1000 |
//! | rotate_vec_by_quat | 3 + 4, 3 outputs | v(r² − u·u) + 2u(u·v) + 2r(u×v), q = (r, u) (Krawiec et al. 2022); full Jacobian |
//! | network | 10 200 | 50 → 100 → 50, ReLU, W\[i\]\[j\] = sin(i+j), b\[i\] = sin(0.41 i), safe softmax, summed |
//! | particles | 16 | 4 particles, p₀ = (0.5 i, 0.1), v₀ = (1, 1), a = −0.5 p − 0.2 v, dt 0.05, 1000 steps (v += a dt; p += v dt), Σ x·y; particles in parallel with `join` |

use crate::harness::{Column, Problem};
use crate::problems::uniform;
use adjoint::forward::Dual64;
use adjoint_tape::{Tape, Var};
use reverse::Gradient;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// The operations the §13 programs use.
pub trait Num13:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// `self + c`
    fn add_c(self, c: f64) -> Self;
    /// `self · c`
    fn mul_c(self, c: f64) -> Self;
    /// `eˢᵉˡᶠ`
    fn exp(self) -> Self;
    /// The primal value.
    fn val(&self) -> f64;
}

macro_rules! num13_via_ops {
    ($($ty:ty),*) => {$(
        impl Num13 for $ty {
            #[inline(always)]
            fn add_c(self, c: f64) -> Self { self + c }
            #[inline(always)]
            fn mul_c(self, c: f64) -> Self { self * c }
            #[inline(always)]
            fn exp(self) -> Self { num_traits::Float::exp(self) }
            #[inline(always)]
            fn val(&self) -> f64 { adjoint::Real::value(self) }
        }
    )*};
}
num13_via_ops!(f64, Var, Dual64);

impl Num13 for echidna::Reverse<f64> {
    #[inline(always)]
    fn add_c(self, c: f64) -> Self {
        self + c
    }
    #[inline(always)]
    fn mul_c(self, c: f64) -> Self {
        self * c
    }
    #[inline(always)]
    fn exp(self) -> Self {
        num_traits::Float::exp(self)
    }
    #[inline(always)]
    fn val(&self) -> f64 {
        echidna::scalar::Scalar::value(self)
    }
}

impl Num13 for ad_trait::reverse_ad::adr::adr {
    #[inline(always)]
    fn add_c(self, c: f64) -> Self {
        self + <Self as ad_trait::AD>::constant(c)
    }
    #[inline(always)]
    fn mul_c(self, c: f64) -> Self {
        self * <Self as ad_trait::AD>::constant(c)
    }
    #[inline(always)]
    fn exp(self) -> Self {
        fn exp_ad<T: ad_trait::AD>(x: T) -> T {
            x.exp()
        }
        exp_ad(self)
    }
    #[inline(always)]
    fn val(&self) -> f64 {
        self.value()
    }
}

impl<'a> Num13 for reverse::Var<'a> {
    #[inline(always)]
    fn add_c(self, c: f64) -> Self {
        self + c
    }
    #[inline(always)]
    fn mul_c(self, c: f64) -> Self {
        self * c
    }
    #[inline(always)]
    fn exp(self) -> Self {
        reverse::Var::exp(&self)
    }
    #[inline(always)]
    fn val(&self) -> f64 {
        self.val
    }
}

/// `x · y`
pub fn scalar_mul<T: Num13>(x: &[T]) -> T {
    x[0] * x[1]
}

/// `Σ xᵢ yᵢ` over the two halves of the input.
pub fn dot<T: Num13>(x: &[T]) -> T {
    let (a, b) = x.split_at(x.len() / 2);
    let mut acc = a[0] * b[0];
    for i in 1..a.len() {
        acc = acc + a[i] * b[i];
    }
    acc
}

/// `Σᵢ Σⱼ Mᵢⱼ vⱼ` with the input laid out as `[M (row-major, n × n), v (n)]`.
pub fn matvec_sum<T: Num13>(x: &[T], n: usize) -> T {
    let (m, v) = x.split_at(n * n);
    let mut total: Option<T> = None;
    for row in m.chunks_exact(n) {
        let mut acc = row[0] * v[0];
        for j in 1..n {
            acc = acc + row[j] * v[j];
        }
        total = Some(match total {
            None => acc,
            Some(t) => t + acc,
        });
    }
    total.expect("n > 0")
}

/// Rotate `v = x[0..3]` by the quaternion `q = x[3..7] = (r, u)`.
pub fn rotate_vec_by_quat<T: Num13>(x: &[T]) -> Vec<T> {
    let (v, r, u) = ([x[0], x[1], x[2]], x[3], [x[4], x[5], x[6]]);
    let dot3 = |a: [T; 3], b: [T; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let cross = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    let s = r * r - dot3(u, u);
    let uv2 = dot3(u, v).mul_c(2.0);
    let r2 = r.mul_c(2.0);
    (0..3)
        .map(|i| v[i] * s + u[i] * uv2 + cross[i] * r2)
        .collect()
}

/// Network widths: input, hidden 1, hidden 2.
pub const NET: (usize, usize, usize) = (50, 100, 50);

/// The network's parameters and input, laid out `[W₁ (100×50), b₁, W₂ (50×100), b₂, x (50)]`.
pub fn network_input() -> Vec<f64> {
    let (n0, n1, n2) = NET;
    let w = |rows: usize, cols: usize| -> Vec<f64> {
        (0..rows)
            .flat_map(|i| (0..cols).map(move |j| ((i + j) as f64).sin()))
            .collect()
    };
    let b = |n: usize| -> Vec<f64> { (0..n).map(|i| (0.41 * i as f64).sin()).collect() };
    let x: Vec<f64> = (0..n0).map(|j| 0.5 * (0.3 * j as f64).cos()).collect();
    [w(n1, n0), b(n1), w(n2, n1), b(n2), x].concat()
}

fn dense_relu<T: Num13>(w: &[T], b: &[T], x: &[T]) -> Vec<T> {
    w.chunks_exact(x.len())
        .zip(b)
        .map(|(row, &bi)| {
            let mut a = bi;
            for (&wij, &xj) in row.iter().zip(x) {
                a = a + wij * xj;
            }
            if a.val() > 0.0 {
                a
            } else {
                a.mul_c(0.0)
            }
        })
        .collect()
}

/// The network's softmax outputs.
pub fn network<T: Num13>(p: &[T]) -> Vec<T> {
    let (n0, n1, n2) = NET;
    let (w1, rest) = p.split_at(n1 * n0);
    let (b1, rest) = rest.split_at(n1);
    let (w2, rest) = rest.split_at(n2 * n1);
    let (b2, x) = rest.split_at(n2);
    let h1 = dense_relu(w1, b1, x);
    let h2 = dense_relu(w2, b2, &h1);
    // safe softmax: shift by the maximum
    let m = h2
        .iter()
        .copied()
        .reduce(|a, b| if b.val() > a.val() { b } else { a })
        .expect("non-empty");
    let e: Vec<T> = h2.iter().map(|&z| (z - m).exp()).collect();
    let s = e.iter().copied().reduce(|a, b| a + b).expect("non-empty");
    e.into_iter().map(|v| v / s).collect()
}

/// The network's outputs summed (the benchmark's scalar, as in the paper; it is ≡ 1).
pub fn network_sum<T: Num13>(p: &[T]) -> T {
    network(p)
        .into_iter()
        .reduce(|a, b| a + b)
        .expect("non-empty")
}

/// Particle count and steps.
pub const PARTICLES: (usize, usize) = (4, 1000);

/// Particle count of the large problem: enough work per job for the parallel reverse pass to
/// show how it scales (seed 003's 4 particles stop scaling at 2 threads).
pub const PARTICLES_LARGE: usize = 256;

/// Initial state `[x, y, vx, vy]` per particle, seed 003's 4 particles.
pub fn particles_input() -> Vec<f64> {
    particles_input_n(PARTICLES.0)
}

/// Initial state `[x, y, vx, vy]` of `n` particles (a power of two), p₀ = (0.5 i, 0.1).
pub fn particles_input_n(n: usize) -> Vec<f64> {
    assert!(
        n.is_power_of_two(),
        "particle count {n} is not a power of two"
    );
    (1..=n)
        .flat_map(|i| [0.5 * i as f64, 0.1, 1.0, 1.0])
        .collect()
}

/// Simulate one particle; returns `x · y` of its final position.
pub fn particle<T: Num13>(s: &[T]) -> T {
    let (mut x, mut y, mut vx, mut vy) = (s[0], s[1], s[2], s[3]);
    let dt = 0.05;
    for _ in 0..PARTICLES.1 {
        let ax = x.mul_c(-0.5) - vx.mul_c(0.2);
        let ay = y.mul_c(-0.5) - vy.mul_c(0.2);
        vx = vx + ax.mul_c(dt);
        vy = vy + ay.mul_c(dt);
        x = x + vx.mul_c(dt);
        y = y + vy.mul_c(dt);
    }
    x * y
}

/// One side of a fork.
pub type Side<'a, T> = &'a (dyn Fn() -> T + Sync);

/// A fork-join combinator (`rayon::join`, `adjoint_tape::join`, …).
pub type Join<'a, T> = &'a (dyn Fn(Side<'_, T>, Side<'_, T>) -> (T, T) + Sync);

/// All particles, the pairs in parallel through `join` (a balanced tree of joins).
pub fn particles<T: Num13 + Send + Sync>(s: &[T], join: Join<'_, T>) -> T {
    if s.len() == 4 {
        return particle(s);
    }
    let (l, r) = s.split_at(s.len() / 2);
    let (a, b) = join(&|| particles(l, join), &|| particles(r, join));
    a + b
}

/// All particles sequentially, summed in the same tree order as [`particles`].
pub fn particles_seq<T: Num13>(s: &[T]) -> T {
    if s.len() == 4 {
        return particle(s);
    }
    let (l, r) = s.split_at(s.len() / 2);
    particles_seq(l) + particles_seq(r)
}

/// `join` for the tape engine.
pub fn tape_join<T: Send>(a: &(dyn Fn() -> T + Sync), b: &(dyn Fn() -> T + Sync)) -> (T, T) {
    adjoint_tape::join(a, b)
}

/// `join` for the plain program: rayon.
pub fn rayon_join<T: Send>(a: Side<'_, T>, b: Side<'_, T>) -> (T, T) {
    rayon::join(a, b)
}

// ---------------------------------------------------------------------------------------------
// Gradient columns per tool

fn echidna_grad(
    f: fn(&[echidna::Reverse<f64>]) -> echidna::Reverse<f64>,
) -> crate::harness::GradFn {
    Box::new(move |x, g| g.copy_from_slice(&echidna::grad(|v| f(v), x)))
}

fn ad_trait_grad(
    f: fn(&[ad_trait::reverse_ad::adr::adr]) -> ad_trait::reverse_ad::adr::adr,
) -> crate::harness::GradFn {
    use ad_trait::reverse_ad::adr::adr;
    Box::new(move |x, g| {
        let vars: Vec<adr> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| adr::new_variable(v, i == 0))
            .collect();
        let y = f(&vars);
        let grads = y.get_backwards_mode_grad();
        for (gi, v) in g.iter_mut().zip(&vars) {
            *gi = grads.wrt(v);
        }
    })
}

fn reverse_grad(f: for<'a> fn(&[reverse::Var<'a>]) -> reverse::Var<'a>) -> crate::harness::GradFn {
    Box::new(move |x, g| {
        let tape = reverse::Tape::new();
        let vars = tape.add_vars(x);
        let y = f(&vars);
        g.copy_from_slice(&y.grad().wrt(&vars));
    })
}

fn tape_grad(f: fn(&[Var]) -> Var) -> crate::harness::GradFn {
    let mut tape = Tape::new();
    Box::new(move |x, g| {
        tape.grad_into(|v| f(v), x, g);
    })
}

fn forward_grad(f: fn(&[Dual64]) -> Dual64) -> crate::harness::GradFn {
    Box::new(move |x, g| g.copy_from_slice(&adjoint::forward::gradient(|v| f(v), x)))
}

fn col(engine: &'static str, run: crate::harness::GradFn) -> Column {
    Column {
        engine,
        run,
        skip: None,
    }
}

fn skipped(engine: &'static str, why: &str) -> Column {
    Column {
        engine,
        run: Box::new(|_, _| {}),
        skip: Some(why.to_string()),
    }
}

/// A scalar §13 problem with every tool's column.
macro_rules! scalar_problem {
    ($name:expr, $size:expr, $input:expr, $f:expr, forward: $fwd:expr) => {{
        let forward = if $fwd {
            col("forward", forward_grad(|v| $f(v)))
        } else {
            skipped("forward", "n forward sweeps over ≥ 10⁴ inputs: hours")
        };
        Problem {
            group: "sec13",
            name: $name,
            size: $size.to_string(),
            input: $input,
            primal: Box::new(|x| $f(x)),
            columns: vec![
                col("tape", tape_grad(|v| $f(v))),
                forward,
                col("echidna", echidna_grad(|v| $f(v))),
                col("ad_trait", ad_trait_grad(|v| $f(v))),
                col("reverse", reverse_grad(|v| $f(v))),
            ],
        }
    }};
}

fn dot_n(quick: bool) -> usize {
    if quick {
        100_000
    } else {
        1_000_000
    }
}

fn matvec_f<T: Num13>(x: &[T]) -> T {
    matvec_sum(x, 1000)
}

/// The §13 problems (the quick run uses n = 10⁵ for dot).
pub fn problems(quick: bool) -> Vec<Problem> {
    let n = dot_n(quick);
    let mut v = vec![
        scalar_problem!("scalar_mul", "n=2", vec![1.5, -2.5], scalar_mul, forward: true),
        scalar_problem!("dot", format!("n={n}"), uniform(11, 2 * n), dot, forward: false),
        scalar_problem!(
            "matvec",
            "1000x1000",
            uniform(12, 1000 * 1000 + 1000),
            matvec_f,
            forward: false
        ),
        scalar_problem!("network", "50-100-50", network_input(), network_sum, forward: false),
        rotate_problem(),
    ];
    v.extend(particles_problems());
    v
}

fn rotate_problem() -> Problem {
    let input = vec![0.3, -1.2, 2.0, 0.9, 0.1, -0.3, 0.35];
    let jac_tape = {
        let mut tape = Tape::new();
        move |x: &[f64], g: &mut [f64]| {
            let j = tape.jacobian(|v| rotate_vec_by_quat(v), x);
            g.copy_from_slice(&j[0]);
        }
    };
    Problem {
        group: "sec13",
        name: "rotate_vec_by_quat",
        size: "3x7 Jacobian".into(),
        input,
        primal: Box::new(|x| rotate_vec_by_quat(x)[0]),
        columns: vec![
            col("tape", Box::new(jac_tape)),
            col(
                "forward",
                Box::new(|x, g| {
                    // 7 sweeps give all 3 rows
                    let mut e = [0.0; 7];
                    let mut rows = [[0.0; 7]; 3];
                    for (j, _) in x.iter().enumerate() {
                        e[j] = 1.0;
                        let (_, t) = adjoint::forward::jvp(|v| rotate_vec_by_quat(v), x, &e);
                        e[j] = 0.0;
                        for r in 0..3 {
                            rows[r][j] = t[r];
                        }
                    }
                    g.copy_from_slice(&rows[0]);
                }),
            ),
            col(
                "echidna",
                Box::new(|x, g| {
                    // echidna's `jacobian` is forward mode; its reverse-mode Jacobian is one
                    // vjp per output row (each re-records: its API has no record-once reuse).
                    let mut rows = [[0.0; 7]; 3];
                    for (r, row) in rows.iter_mut().enumerate() {
                        let mut w = [0.0; 3];
                        w[r] = 1.0;
                        let (_, gr) = echidna::vjp(|v| rotate_vec_by_quat(v), x, &w);
                        row.copy_from_slice(&gr);
                    }
                    g.copy_from_slice(&rows[0]);
                }),
            ),
            col(
                "ad_trait",
                Box::new(|x, g| {
                    use ad_trait::reverse_ad::adr::adr;
                    let vars: Vec<adr> = x
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| adr::new_variable(v, i == 0))
                        .collect();
                    let ys = rotate_vec_by_quat(&vars);
                    let mut rows = [[0.0; 7]; 3];
                    for (r, y) in ys.iter().enumerate() {
                        let gr = y.get_backwards_mode_grad();
                        for (c, v) in vars.iter().enumerate() {
                            rows[r][c] = gr.wrt(v);
                        }
                    }
                    g.copy_from_slice(&rows[0]);
                }),
            ),
            col(
                "reverse",
                Box::new(|x, g| {
                    let tape = reverse::Tape::new();
                    let vars = tape.add_vars(x);
                    let ys = rotate_vec_by_quat(&vars);
                    let rows: Vec<Vec<f64>> = ys.iter().map(|y| y.grad().wrt(&vars)).collect();
                    g.copy_from_slice(&rows[0]);
                }),
            ),
        ],
    }
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn particles_problems() -> Vec<Problem> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = particles_at(PARTICLES.0, &[1, 2]);
    let mut counts = vec![1, 2];
    if all > 2 {
        counts.push(all);
    }
    v.extend(particles_at(PARTICLES_LARGE, &counts));
    v
}

/// The particles problem with `n` particles, one row per thread count.
fn particles_at(n: usize, thread_counts: &[usize]) -> Vec<Problem> {
    thread_counts
        .iter()
        .map(|&threads| {
            let primal_pool = pool(threads);
            let tape_pool = pool(threads);
            let mut tape = Tape::new();
            Problem {
                group: "sec13",
                name: if n == PARTICLES.0 {
                    "particles"
                } else {
                    "particles-large"
                },
                size: format!("{n} particles, {threads} thread(s)"),
                input: particles_input_n(n),
                primal: Box::new(move |x| {
                    primal_pool.install(|| particles(x, &|a, b| rayon_join(a, b)))
                }),
                columns: vec![
                    col(
                        "tape",
                        Box::new(move |x, g| {
                            tape_pool.install(|| {
                                tape.grad_into(|v| particles(v, &|a, b| tape_join(a, b)), x, g)
                            });
                        }),
                    ),
                    Column {
                        skip: (n > PARTICLES.0).then(|| {
                            format!("{} inputs: {} forward sweeps; not run", 4 * n, 4 * n)
                        }),
                        ..col("forward", forward_grad(|v| particles_seq(v)))
                    },
                    col("echidna", echidna_grad(|v| particles_seq(v))),
                    col("ad_trait", ad_trait_grad(|v| particles_seq(v))),
                    col("reverse", reverse_grad(|v| particles_seq(v))),
                ],
            }
        })
        .collect()
}
