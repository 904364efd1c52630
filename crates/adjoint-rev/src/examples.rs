//! The seeds' examples, in Rust: each is tested in `tests/seeds.rs` against the numbers the papers
//! and NiLang's test suite quote, and against independent references.
//!
//! ```
//! use adjoint_rev::examples::iexp;
//! let (mut out, mut x) = (0.0f64, 1.6f64);
//! iexp(&mut out, &mut x)?;
//! assert!((out - 1.6f64.exp()).abs() < 1e-13);
//! // Seed 000 Section V.B: the gradient of x is e^1.6 (the seed prints 4.9530324244260555).
//! let (_, gx) = adjoint_rev::grad(iexp {}, (0.0f64, 1.6f64), 0)?;
//! assert!((gx - 1.6f64.exp()).abs() < 1e-13);
//! # Ok::<(), adjoint_rev::InvertibilityError>(())
//! ```

use crate::library::{i_mean, i_relu, i_var};
use crate::{reversible, Arith, RevReal, ULog};

/// `n!` as `f64` (for initialising ancillas).
pub fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

/// The plain Fibonacci numbers `fib(1) = fib(2) = 1` (for conditions and tests).
pub fn fib(n: f64) -> f64 {
    if n <= 2.0 {
        1.0
    } else {
        fib(n - 1.0) + fib(n - 2.0)
    }
}

reversible! {
    /// `y += a·b` (seed 001 Listing 1): `multiplier(2, 3, 5) == (17, 3, 5)`.
    pub fn multiplier<T: Arith>(y: &mut T, a: &mut T, b: &mut T) {
        y += a * b;
    }

    /// Fibonacci, recursively and reversibly, on integers (seed 001 Listing 4): `out` gains one
    /// per leaf of the recursion tree, so `rrfib(0, n)` is `fib(n + 1)`.
    pub fn rrfib(out: &mut i64, n: &mut i64) {
        @invcheckoff if (n >= 1, ~) {
            let counter = 0i64;
            counter += n;
            while (counter > 1, counter != n) {
                rrfib(out, counter - 1);
                counter -= 2;
            }
            let parity = n % 2;
            counter -= parity;
            unlet parity = n % 2;
            unlet counter = 0i64;
        }
        out += 1;
    }

    /// Fibonacci on floats with a named compute–uncompute routine, as seed 000 Section V.A writes it:
    /// `rfib(0, n) = fib(n)`.
    pub fn rfib<T: RevReal>(out: &mut T, n: &mut T) {
        @routine init {
            let n1 = T::zero();
            let n2 = T::zero();
            n1 += n;
            n1 -= 1.0;
            n2 += n;
            n2 -= 2.0;
        }
        if (n.value() <= 2.0, ~) {
            out += 1.0;
        } else {
            rfib(out, n1);
            rfib(out, n2);
        }
        ~@routine init;
    }

    /// The first `n` with `fib(n) ≥ 100`, by a reversible `while` (seed 000's `rfib100`).
    pub fn rfib100<T: RevReal>(n: &mut T) {
        @safe assert!(n.value() == 0.0, "rfib100 starts from n = 0");
        while (fib(n.value()) < 100.0, n.value() != 0.0) {
            n += 1.0;
        }
    }

    /// `out += exp(x)` by its Taylor series in constant memory (seed 000 Section V.B): the
    /// series of [`iexp_series()`] at `|x|`, and its reciprocal for negative `x` (the alternating
    /// series at `x < 0` cancels: its relative error grows like `ε·e^{2|x|}`, 3e-9 at −10 and
    /// 58 % at −19). `x = 0` is an error (`*=` by 0 cannot be undone), and so is `|x|` above
    /// about 16 in checked code: the series' terms reach `e^{|x|}`, and their rounding leaves
    /// more than the deallocation check's `1e-8` in the uncomputed sum. Unchecked, the value is
    /// right to about `−700`, but the gradient only down to about `−354`: below, the
    /// reciprocal's partial `−1/e²` (`e` the series at `|x|`) is subnormal, and from about
    /// `−373` zero (a hunter: ∂ at −370 was 1.4e-192 for 2.1e-161). Above `709` the series'
    /// term overflows before it is divided, an error though `e^x` is finite.
    pub fn iexp<T: RevReal>(out: &mut T, x: &mut T) {
        @routine {
            let ax = T::zero();
            if (x.value() < 0.0, ~) {
                ax -= x;
            } else {
                ax += x;
            }
            let e = T::zero();
            iexp_series(e, ax);
        }
        if (x.value() < 0.0, ~) {
            out += e.recip();
        } else {
            out += e;
        }
        ~@routine;
    }

    /// `out += exp(x)` by its Taylor series, as seed 000 Section V.B writes it. The term
    /// `s_n = s_{n−1}·x/n` is updated in place by the reversible pair `*=`/`/=` — the seed's
    /// observation that `*` and `/` undo each other, so `s_{n−1} = n·s_n/x` needs no storage.
    ///
    /// The seed's listing uncomputes through two extra ancillas instead (`anc1 -= anc2 / x`,
    /// `anc2 -= anc3 * iplus`); in `f64` their rounding residues are multiplied by `n` on every
    /// iteration and the series diverges after about 20 terms, so this version scales in place.
    /// For `x < 0` the series cancels; [`iexp()`] takes the reciprocal there.
    pub fn iexp_series<T: RevReal>(out: &mut T, x: &mut T) {
        let term = T::zero();
        let iplus = T::zero();
        let expout = T::zero();
        out += 1.0;
        @routine {
            term += 1.0;
            while (term.value().abs() > 1e-16, iplus.value() != 0.0) {
                iplus += 1.0;
                term *= x;
                term /= iplus;
                expout += term;
            }
        }
        out += expout;
        ~@routine;
        unlet expout = T::zero();
        unlet iplus = T::zero();
        unlet term = T::zero();
    }

    /// `out += xⁿ` through logarithmic numbers, where `*=` is reversible (seed 001 Listing 8).
    /// For `x > 0` only, as in the listing (a logarithm): elsewhere `out` is left unchanged.
    pub fn mypower<T: RevReal>(out: &mut T, x: &mut T, n: &mut usize) {
        if (x.value() > 0.0, ~) {
            @routine {
                let ly = ULog::new(T::zero());
                let lx = ULog::new(T::zero());
                lx.log += x.ln();
                for _i in 0..n {
                    ly *= lx;
                }
            }
            out += ly.log.exp();
            ~@routine;
        }
    }

    /// Gram–Schmidt QR of the `n × n` row-major matrix `a` into `q` and `r` (seed 000
    /// Section V.C): each column's working vector is computed, copied out and uncomputed.
    pub fn iqr<T: RevReal>(q: &mut Vec<T>, r: &mut Vec<T>, a: &mut Vec<T>, n: &mut usize) {
        @safe assert!(a.len() == n * n && q.len() == n * n && r.len() == n * n, "iqr: matrices must be {n}×{n}");
        for col in 0..n {
            @routine {
                let ri = vec![T::zero(); n];
                let dots = vec![T::zero(); n];
                for row in 0..n {
                    ri[row] += a[row * n + col];
                }
                for pre in 0..col {
                    for row in 0..n {
                        dots[pre] += q[row * n + pre] * ri[row];
                    }
                    for row in 0..n {
                        ri[row] -= dots[pre] * q[row * n + pre];
                    }
                }
                let sq = T::zero();
                for row in 0..n {
                    sq += ri[row].powi(2);
                }
                let nrm = T::zero();
                nrm += sq.sqrt();
            }
            for pre in 0..col {
                r[pre * n + col] += dots[pre];
            }
            r[col * n + col] += nrm;
            for row in 0..n {
                q[row * n + col] += ri[row] / nrm;
            }
            ~@routine;
        }
    }

    /// Multiply the columns of the `m`-row column-major matrix `x` by the unitary built from
    /// `m(m−1)/2` two-level rotations (seed 001's `i_umm!`, seed 000 Section V.D). No heap
    /// allocation in the call, the uncall or the gradient.
    pub fn i_umm<T: RevReal>(x: &mut Vec<T>, theta: &mut Vec<T>, m: &mut usize) {
        @safe assert!(theta.len() == m * (m - 1) / 2, "i_umm: {} angles for m = {}: need m(m-1)/2", theta.len(), m);
        for l in 0..x.len() / m {
            let k = 0usize;
            for j in 0..m {
                for i in (j..m - 1).rev() {
                    INC(k);
                    ROT(x[l * m + i], x[l * m + i + 1], theta[k - 1]);
                }
            }
            unlet k = theta.len();
        }
    }

    /// `out += J_ν(z)`, the Bessel function of the first kind by its series
    /// `Σₖ (−1)ᵏ (z/2)^{2k+ν} / (k! (k+ν)!)`, each term obtained from the previous by a
    /// reversible multiplication `term *= ratio` (NiLang's `ibesselj`). `z = 0` is an error
    /// (`*=` by a ratio of 0 cannot be undone; `J_ν(0)` is 1 for ν = 0 and 0 otherwise). So is
    /// a large `z` in checked code (from about 23 for ν = 0): the alternating series cancels
    /// terms of up to ~1e9 there, uncomputing its accumulator leaves more than the deallocation
    /// check's 1e-8, and its sum is that far off too (absolute errors from ~1e-8 at z = 23 to
    /// ~1e-5 at 30; unchecked code returns that value).
    pub fn ibesselj<T: RevReal>(out: &mut T, nu: &mut usize, z: &mut T) {
        let k = T::zero();
        @routine {
            let halfz = T::zero();
            let hz2 = T::zero();
            let term = T::zero();
            let acc = T::zero();
            let inv_fact = T::from_f64(1.0 / factorial(nu));
            halfz += z / 2.0;
            hz2 += halfz.powi(2);
            term += halfz.powi(nu);
            term *= inv_fact;
            acc += term;
            while (term.value().abs() > 1e-17 * acc.value().abs(), k.value() != 0.0) {
                INC(k);
                @routine {
                    let kn = T::from_f64(nu as f64);
                    kn += k;
                    let ratio = T::zero();
                    let den = T::zero();
                    den -= k * kn;
                    ratio += hz2 / den;
                }
                term *= ratio;
                acc += term;
                ~@routine;
            }
        }
        out += acc;
        ~@routine;
        unlet k = T::zero();
    }

    /// One step of a chain: `y += x + sin x`.
    pub fn chain_step<T: RevReal>(y: &mut T, x: &mut T) {
        y += x;
        y += x.sin();
    }

    /// Bennett's time–space trade-off: `out += xₙ` for the chain `x_{t+1} = x_t + sin x_t`, with
    /// `O(log n)` live states (one ancilla per recursion level) and `O(n^{log₂3})` steps: compute
    /// the midpoint, run the second half from it, uncompute the midpoint. `n = 0` adds `x₀`.
    pub fn bennett<T: RevReal>(out: &mut T, x: &mut T, n: &mut usize) {
        // (`n = 0` recursed without end, to a stack overflow; a hunter)
        if (n == 0, ~) {
            out += x;
        } else {
            if (n == 1, ~) {
                chain_step(out, x);
            } else {
                let h = n / 2;
                let rest = n - n / 2;
                let mid = T::zero();
                bennett(mid, x, h);
                bennett(out, mid, rest);
                ~bennett(mid, x, h);
                unlet mid = T::zero();
                unlet rest = n - n / 2;
                unlet h = n / 2;
            }
        }
    }

    /// Learn-by-consistency, seed 000 Section IV: `f(x, y) = e^{y+x} − e^x` with the input `x`
    /// left as is. Its inverse cannot move `y`: training fails.
    pub fn f1<T: RevReal>(out: &mut T, x: &mut T, y: &mut T) {
        y += x;
        out -= x.exp();
        out += y.exp();
    }

    /// The same function, uncomputing `x` arithmetically (`x -= log(−out)`), so the garbage no
    /// longer determines `y`: training converges.
    pub fn f2<T: RevReal>(out: &mut T, x: &mut T, y: &mut T) {
        y += x;
        out -= x.exp();
        NEG(out);
        x -= out.ln();
        NEG(out);
        out += y.exp();
    }

    /// `out += ‖x_a − x_b‖` for vertices `a`, `b` of a `k`-dimensional embedding `x` (row `v` of
    /// `x` is vertex `v`).
    pub fn i_dist<T: RevReal>(out: &mut T, x: &mut Vec<T>, a: &mut usize, b: &mut usize, k: &mut usize) {
        @routine {
            let s = T::zero();
            for d in 0..k {
                let t = T::zero();
                t += x[a * k + d] - x[b * k + d];
                s += t.powi(2);
                t -= x[a * k + d] - x[b * k + d];
                unlet t = T::zero();
            }
        }
        out += s.sqrt();
        ~@routine;
    }

    /// The Petersen-graph embedding loss (seed 001 Appendix): with `d₁` the 15 edge lengths and
    /// `d₂` the 30 other distances, `loss += var(d₁) + var(d₂) + exp(relu(mean d₁ − mean d₂ + 0.1)) − 1`.
    pub fn i_petersen<T: RevReal>(loss: &mut T, x: &mut Vec<T>, k: &mut usize) {
        @safe assert_eq!(x.len(), 10 * k, "i_petersen: x must hold 10 vertices of dimension k = {}", k);
        @routine {
            let d1 = [T::zero(); 15];
            let d2 = [T::zero(); 30];
            for e in 0..15 {
                i_dist(d1[e], x, PETERSEN_EDGES[e].0, PETERSEN_EDGES[e].1, k);
            }
            for e in 0..30 {
                i_dist(d2[e], x, PETERSEN_NON_EDGES[e].0, PETERSEN_NON_EDGES[e].1, k);
            }
            let v1 = T::zero();
            let v2 = T::zero();
            let m1 = T::zero();
            let m2 = T::zero();
            i_var(v1, d1);
            i_var(v2, d2);
            i_mean(m1, d1);
            i_mean(m2, d2);
            let gap = T::zero();
            gap += m1 - m2;
            gap += 0.1;
            let r = T::zero();
            i_relu(r, gap);
        }
        loss += v1;
        loss += v2;
        loss += r.exp();
        loss -= 1.0;
        ~@routine;
    }
}

/// The Petersen graph's 15 edges (0-based): the outer 5-cycle, the spokes, the inner pentagram.
pub const PETERSEN_EDGES: [(usize, usize); 15] = [
    (0, 5),
    (1, 6),
    (2, 7),
    (3, 8),
    (4, 9),
    (0, 1),
    (1, 2),
    (2, 3),
    (3, 4),
    (0, 4),
    (5, 7),
    (7, 9),
    (6, 9),
    (6, 8),
    (5, 8),
];

/// The 30 vertex pairs that are not edges, in lexicographic order.
pub const PETERSEN_NON_EDGES: [(usize, usize); 30] = non_edges();

const fn non_edges() -> [(usize, usize); 30] {
    let mut out = [(0, 0); 30];
    let mut n = 0;
    let mut a = 0;
    while a < 10 {
        let mut b = a + 1;
        while b < 10 {
            let mut edge = false;
            let mut e = 0;
            while e < 15 {
                let (p, q) = PETERSEN_EDGES[e];
                if (p == a && q == b) || (p == b && q == a) {
                    edge = true;
                }
                e += 1;
            }
            if !edge {
                out[n] = (a, b);
                n += 1;
            }
            b += 1;
        }
        a += 1;
    }
    assert!(n == 30);
    out
}

/// The Petersen loss in plain Rust, generic over any [`adjoint_core::Real`] (the primal baseline
/// and the forward-mode and tape columns of the benchmark).
pub fn petersen<T: adjoint_core::Real>(x: &[T], k: usize) -> T {
    let dist = |a: usize, b: usize| {
        (0..k)
            .map(|d| (x[a * k + d] - x[b * k + d]).powi(2))
            .sum::<T>()
            .sqrt()
    };
    let d1: Vec<T> = PETERSEN_EDGES.iter().map(|&(a, b)| dist(a, b)).collect();
    let d2: Vec<T> = PETERSEN_NON_EDGES
        .iter()
        .map(|&(a, b)| dist(a, b))
        .collect();
    let mean = |d: &[T]| d.iter().copied().sum::<T>() / d.len() as f64;
    let var = |d: &[T]| {
        let m = mean(d);
        d.iter().map(|&v| (v - m).powi(2)).sum::<T>() / (d.len() as f64 - 1.0)
    };
    let gap = mean(&d1) - mean(&d2) + 0.1;
    let relu = if gap > 0.0 { gap } else { T::zero() };
    var(&d1) + var(&d2) + relu.exp() - 1.0
}

/// Learn-by-consistency training (seed 000 Algorithm 2): run `f` from `(out, x) = (0, 0.3)`,
/// overwrite the output with the target 1, run `f`'s inverse so the garbage `y` absorbs the
/// change, and repeat. Returns the output of every step.
pub fn train(
    f: fn(&mut f64, &mut f64, &mut f64) -> Result<(), crate::InvertibilityError>,
    finv: fn(&mut f64, &mut f64, &mut f64) -> Result<(), crate::InvertibilityError>,
    steps: usize,
) -> Result<Vec<f64>, crate::InvertibilityError> {
    let mut y = 1.6;
    let mut history = Vec::with_capacity(steps);
    for _ in 0..steps {
        let (mut out, mut x) = (0.0, 0.3);
        f(&mut out, &mut x, &mut y)?;
        history.push(out);
        out = 1.0;
        finv(&mut out, &mut x, &mut y)?;
    }
    Ok(history)
}

reversible! {
    /// A leapfrog (kick–drift–kick) integrator of the anharmonic oscillator
    /// `x'' = −k·x − 0.1·x³` with step `dt = 0.01`: `steps` steps, in place on `(x, v)`. The
    /// scheme is symplectic, hence exactly invertible in exact arithmetic: each kick adds to `v`
    /// a function of `x` alone (computed into ancillas and uncomputed), each drift adds to `x`
    /// a multiple of `v`. Its inverse runs the steps backwards (seed 000 Section V's point that
    /// time-reversible integrators need no tape).
    pub fn i_leapfrog<T: RevReal>(x: &mut T, v: &mut T, k: &mut T, steps: &mut usize) {
        for _s in 0..steps {
            i_kick(v, x, k);
            x += v * 0.01;
            i_kick(v, x, k);
        }
    }

    /// Half a step's kick of [`i_leapfrog`](fn@i_leapfrog): `v += (−k·x − 0.1·x³)·dt/2`, through ancillas
    /// that are uncomputed.
    pub fn i_kick<T: RevReal>(v: &mut T, x: &mut T, k: &mut T) {
        @routine {
            let kx = T::zero();
            let x3 = T::zero();
            kx += k * x;
            x3 += x.powi(3);
        }
        v -= kx * 0.005;
        v -= x3 * 0.0005;
        ~@routine;
    }
}

/// The same leapfrog as plain generic Rust (for the other engines and as a reference):
/// the final position after `steps` steps from `(x, v)` with stiffness `k`.
///
/// ```
/// use adjoint_rev::examples::{i_leapfrog, leapfrog};
/// let (mut x, mut v, mut k, mut n) = (1.0f64, 0.0f64, 2.0f64, 200usize);
/// i_leapfrog(&mut x, &mut v, &mut k, &mut n)?;
/// assert!((x - leapfrog(1.0, 0.0, 2.0, 200)).abs() < 1e-14);
/// // d x(T) / d(x₀, v₀, k), from the inverse on gradient-carrying values:
/// let (gx, gv, gk, _) = adjoint_rev::grad(i_leapfrog {}, (1.0f64, 0.0f64, 2.0f64, 200usize), 0)?;
/// let fd = adjoint_core::forward::gradient(|p| leapfrog(p[0], p[1], p[2], 200), &[1.0, 0.0, 2.0]);
/// assert!((gx - fd[0]).abs() < 1e-12 && (gv - fd[1]).abs() < 1e-12 && (gk - fd[2]).abs() < 1e-12);
/// # Ok::<(), adjoint_rev::InvertibilityError>(())
/// ```
pub fn leapfrog<T: adjoint_core::Real>(x: T, v: T, k: T, steps: usize) -> T {
    let (mut x, mut v) = (x, v);
    let accel = |x: T| -(k * x) - x.powi(3) * 0.1;
    for _ in 0..steps {
        v += accel(x) * 0.005;
        x += v * 0.01;
        v += accel(x) * 0.005;
    }
    x
}
