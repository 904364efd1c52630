//! Random programs of the supported Rust subset, for tests: straight-line code, branches,
//! `match` on integers, counted `for` loops over ranges and over `x.iter().enumerate()`, `while`
//! and `loop` with `break`/`continue`, early `return`s, compound assignments, in-place writes to
//! an output slice, and indices affine in loop counters (what ranged accesses index by). Every
//! program is `fn f(x: &[f64], out: &mut [f64], n: usize) -> f64` over 3-element slices with
//! `n = 2`. The interpreter's adjoint is checked against forward mode on them (unit tests), and
//! so is the code the macro generates for them (`adjoint-ssa`'s
//! `tests/random_programs/programs.rs`, written by `cargo run -p adjoint-ssa-syntax --example
//! random_programs`).

/// The source of random program `seed`.
///
/// ```
/// let src = adjoint_ssa_syntax::testgen::program(7);
/// assert!(src.starts_with("fn f(x: &[f64], out: &mut [f64], n: usize) -> f64"));
/// assert_eq!(src, adjoint_ssa_syntax::testgen::program(7)); // deterministic
/// ```
pub fn program(seed: u64) -> String {
    ProgGen {
        rng: Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1),
        vars: vec![],
        ro: vec![],
        loops: vec![],
        counter: 0,
        in_loop: 0,
    }
    .program()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct ProgGen {
    rng: Rng,
    vars: Vec<Vec<String>>,    // float variables per scope
    ro: Vec<Vec<String>>,      // read-only float bindings per scope (`for (j, &v) in …`)
    loops: Vec<(String, u64)>, // loop index variables in scope, with their largest value
    counter: usize,
    in_loop: usize,
}

impl ProgGen {
    fn var(&mut self) -> Option<String> {
        let all: Vec<&String> = self.vars.iter().flatten().collect();
        if all.is_empty() {
            None
        } else {
            Some(all[self.rng.below(all.len() as u64) as usize].clone())
        }
    }
    /// An index into the 3-element slices: a constant, `l % 3`, or an affine form of loop
    /// indices that stays below 3 (`l`, `l + 1`, `i * 2 + j`: what ranged accesses index by).
    fn idx(&mut self) -> String {
        if self.loops.is_empty() || self.rng.below(2) == 0 {
            return format!("{}", self.rng.below(3));
        }
        let pick = |g: &mut Self| g.loops[g.rng.below(g.loops.len() as u64) as usize].clone();
        let (l, ml) = pick(self);
        let (l2, ml2) = pick(self);
        match self.rng.below(4) {
            0 => format!("({l} % 3)"),
            1 => l,
            2 => {
                let k = self.rng.below(3 - ml);
                format!("({l} + {k})")
            }
            _ => {
                let c = 1 + self.rng.below(2);
                if l != l2 && c * ml + ml2 <= 2 {
                    format!("({l} * {c} + {l2})")
                } else {
                    format!("({k} + {l})", k = self.rng.below(3 - ml))
                }
            }
        }
    }
    fn atom(&mut self) -> String {
        match self.rng.below(6) {
            0 => format!("x[{}]", self.idx()),
            1 => format!("out[{}]", self.idx()),
            2 => format!("{}.{}f64", self.rng.below(3), 1 + self.rng.below(9)),
            3 => {
                let ro: Vec<&String> = self.ro.iter().flatten().collect();
                if ro.is_empty() {
                    self.var().unwrap_or_else(|| "x[0]".into())
                } else {
                    ro[self.rng.below(ro.len() as u64) as usize].clone()
                }
            }
            _ => self.var().unwrap_or_else(|| "x[0]".into()),
        }
    }
    fn expr(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self.atom();
        }
        let a = self.expr(depth - 1);
        let b = self.expr(depth - 1);
        match self.rng.below(15) {
            10 => format!("({a}).abs()"),
            11 => format!("(({a}) * ({a}) + 1.0).ln()"),
            12 => format!("({a}).powi(2) * {b}"),
            13 => format!("({a}).atan().min({b})"),
            14 => format!("({a}).hypot({b})"),
            0 => format!("({a} + {b})"),
            1 => format!("({a} - {b})"),
            2 => format!("({a} * {b})"),
            3 => format!("({a}).sin()"),
            4 => format!("({a}).tanh()"),
            5 => format!("({a}).max({b})"),
            6 => format!("(({a}) * ({a}) + 1.0).sqrt()"),
            7 => format!("({a} / (({b}) * ({b}) + 1.5))"),
            8 => format!("(0.5 * ({a})).exp()"),
            _ => format!("({a}).cos() * {b}"),
        }
    }
    fn cond(&mut self) -> String {
        if !self.loops.is_empty() && self.rng.below(3) == 0 {
            let l = &self.loops[self.rng.below(self.loops.len() as u64) as usize].0;
            return format!("{l} % 2 == 0");
        }
        let (a, b) = (self.expr(1), self.expr(1));
        format!("{a} > {b}")
    }
    fn stmts(&mut self, depth: u32, n: usize) -> String {
        self.vars.push(vec![]);
        self.ro.push(vec![]);
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(&self.stmt(depth));
        }
        self.ro.pop();
        self.vars.pop();
        s
    }
    /// A loop body: loop variable `l` (largest value `max`) in scope, `ro` bound read-only.
    fn body(&mut self, l: &str, max: u64, ro: Option<&str>, depth: u32, n: usize) -> String {
        self.loops.push((l.to_string(), max));
        self.ro.push(ro.into_iter().map(String::from).collect());
        self.in_loop += 1;
        let body = self.stmts(depth - 1, n);
        self.in_loop -= 1;
        self.ro.pop();
        self.loops.pop();
        body
    }
    fn stmt(&mut self, depth: u32) -> String {
        let k = self.rng.below(if depth == 0 { 5 } else { 13 });
        match k {
            9 if self.rng.below(3) == 0 => {
                // an early return, from a loop or not
                let (c, e) = (self.cond(), self.expr(1));
                format!("if {c} {{\nreturn {e} + out[1];\n}}\n")
            }
            9 => match self.var() {
                Some(v) => {
                    let e = self.expr(1);
                    let op = ["/=", "*="][self.rng.below(2) as usize];
                    format!("{v} {op} ({e}) * ({e}) + 1.5;\n")
                }
                None => String::new(),
            },
            10 => {
                let scrut = match self.loops.last() {
                    Some((l, _)) => format!("{l} % 3"),
                    None => "n % 3".to_string(),
                };
                let a = self.stmts(depth - 1, 2);
                let b = self.stmts(depth - 1, 1);
                let c = self.stmts(depth - 1, 1);
                format!("match {scrut} {{\n0 => {{\n{a}}}\n1 => {{\n{b}}}\n_ => {{\n{c}}}\n}}\n")
            }
            11 => {
                self.counter += 1;
                let (j, v) = (format!("j{}", self.counter), format!("w{}", self.counter));
                let body = self.body(&j, 2, Some(&v), depth, 2);
                format!("for ({j}, &{v}) in x.iter().enumerate() {{\n{body}}}\n")
            }
            12 => {
                self.counter += 1;
                let c = format!("c{}", self.counter);
                let stop = self.cond();
                let body = self.body(&c, 2, None, depth, 2);
                // the exit test first: a `continue` in the body comes back to it
                format!(
                    "let mut {c} = 0;\nloop {{\nif {c} >= 2 || {stop} {{\nbreak;\n}}\n{c} += 1;\n{body}}}\n"
                )
            }
            0 | 1 => {
                self.counter += 1;
                let v = format!("v{}", self.counter);
                let e = self.expr(2);
                self.vars.last_mut().unwrap().push(v.clone());
                format!("let mut {v} = {e};\n")
            }
            2 => match self.var() {
                Some(v) => {
                    let e = self.expr(2);
                    let op = ["=", "+=", "*=", "-="][self.rng.below(4) as usize];
                    format!("{v} {op} {e};\n")
                }
                None => String::new(),
            },
            3 | 4 => {
                let i = self.idx();
                let e = self.expr(2);
                let op = ["=", "+="][self.rng.below(2) as usize];
                format!("out[{i}] {op} {e};\n")
            }
            5 | 6 => {
                let c = self.cond();
                let a = self.stmts(depth - 1, 2);
                let b = self.stmts(depth - 1, 2);
                format!("if {c} {{\n{a}}} else {{\n{b}}}\n")
            }
            7 => {
                self.counter += 1;
                let l = format!("i{}", self.counter);
                let (bound, max) = if self.rng.below(2) == 0 {
                    ("n".to_string(), 1) // n = 2
                } else {
                    let b = 1 + self.rng.below(3);
                    (format!("{b}"), b - 1)
                };
                let body = self.body(&l, max, None, depth, 3);
                format!("for {l} in 0..{bound} {{\n{body}}}\n")
            }
            _ => {
                if self.in_loop > 0 && self.rng.below(2) == 0 {
                    let c = self.cond();
                    let kw = ["break", "continue"][self.rng.below(2) as usize];
                    return format!("if {c} {{ {kw}; }}\n");
                }
                self.counter += 1;
                let c = format!("c{}", self.counter);
                let body = self.body(&c, 2, None, depth, 2);
                format!("let mut {c} = 0;\nwhile {c} < 2 {{\n{c} += 1;\n{body}}}\n")
            }
        }
    }
    fn program(&mut self) -> String {
        self.vars = vec![vec!["acc".into()]];
        let body = self.stmts(3, 6);
        // Half the programs end in an accumulation loop that reads only the slices and its
        // counter: the shape the transform fuses (its adjoint runs inside the forward sweep).
        let tail = if self.rng.below(2) == 0 {
            let vars = std::mem::take(&mut self.vars);
            self.counter += 1;
            let l = format!("i{}", self.counter);
            let bound = ["n", "3"][self.rng.below(2) as usize];
            self.loops
                .push((l.clone(), if bound == "n" { 1 } else { 2 }));
            let e = self.expr(2);
            self.loops.pop();
            self.vars = vars;
            format!("for {l} in 0..{bound} {{\nacc += {e};\n}}\n")
        } else {
            String::new()
        };
        format!(
            "fn f(x: &[f64], out: &mut [f64], n: usize) -> f64 {{\nlet mut acc = x[1] * 0.5;\n{body}{tail}acc + out[0] * 0.25 + out[2]\n}}"
        )
    }
}

/// How many programs `adjoint-ssa`'s `tests/random_programs/programs.rs` compiles (each expands
/// to a few thousand lines: the file takes about two minutes to build in CI).
pub const COMPILED_PROGRAMS: usize = 48;

/// Whether the interpreter runs program `src` at the test point without a non-finite value
/// anywhere, and its adjoint agrees with forward mode there to 1e-10 (so every direction of the
/// compiled test is checked against forward mode; the rare ill-conditioned program where the two
/// round apart is left to the interpreter's test, which referees it with the tape engine).
fn clean(src: &str) -> bool {
    use crate::interp::{self, ArgVal};
    let Ok((f, p)) = crate::lower_str(src, "") else {
        return false;
    };
    let mut args = vec![
        ArgVal::Floats(TEST_X.to_vec()),
        ArgVal::Floats(TEST_OUT.to_vec()),
        ArgVal::Scalar(interp::V::I(2)),
    ];
    let mut adj = vec![
        ArgVal::Floats(vec![0.0; 3]),
        ArgVal::Floats(TEST_COT.to_vec()),
        ArgVal::Scalar(interp::V::I(0)),
    ];
    let (r, st) = interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
    let finite =
        |a: &ArgVal<f64>| matches!(a, ArgVal::Floats(v) if v.iter().all(|x| x.is_finite()));
    if !(r.is_some_and(f64::is_finite)
        && !st.nonfinite
        && finite(&args[1])
        && adj.iter().take(2).all(finite))
    {
        return false;
    }
    let (ArgVal::Floats(gx), ArgVal::Floats(gout)) = (&adj[0], &adj[1]) else {
        return false;
    };
    (0..6).all(|dir| {
        use adjoint_core::forward::Dual;
        let tan = |k: usize| if dir == k { 1.0 } else { 0.0 };
        let xd = (0..3).map(|i| Dual::new(TEST_X[i], tan(i))).collect();
        let od = (0..3).map(|i| Dual::new(TEST_OUT[i], tan(3 + i))).collect();
        let mut dargs = vec![
            ArgVal::Floats(xd),
            ArgVal::Floats(od),
            ArgVal::Scalar(interp::V::I(2)),
        ];
        let Some(rd) = interp::primal::<Dual<f64>>(&f, &mut dargs) else {
            return false;
        };
        let ArgVal::Floats(o) = &dargs[1] else {
            return false;
        };
        let want = rd.eps + (0..3).map(|j| TEST_COT[j] * o[j].eps).sum::<f64>();
        let got = if dir < 3 { gx[dir] } else { gout[dir - 3] };
        (got - want).abs() <= 1e-10 * (1.0 + want.abs())
    })
}

/// The test point of the random programs: `x`, the initial `out`, and the cotangent of `out`.
pub const TEST_X: [f64; 3] = [0.3, -0.6, 0.8];
/// See [`TEST_X`].
pub const TEST_OUT: [f64; 3] = [0.1, 0.2, -0.4];
/// See [`TEST_X`].
pub const TEST_COT: [f64; 3] = [0.7, -1.1, 0.4];

/// The text of `adjoint-ssa`'s `tests/random_programs/programs.rs`: the first
/// [`COMPILED_PROGRAMS`] clean programs (see `clean`), each in its own module under
/// `#[differentiable]`, and one test over all of them.
pub fn random_programs_test() -> String {
    let mut seeds = vec![];
    let mut seed = 1;
    while seeds.len() < COMPILED_PROGRAMS {
        if clean(&program(seed)) {
            seeds.push(seed);
        }
        seed += 1;
    }
    let mut s = String::new();
    s.push_str(&format!(
        "//! Random programs through the real macro: {n} programs of `adjoint_ssa_syntax::testgen`
//! (straight-line code, branches, `match`, `for` over ranges and `x.iter().enumerate()`,
//! `while` and `loop` with `break`/`continue`, early returns, in-place writes, indices affine in
//! loop counters), compiled by rustc and LLVM. For each, the pullback's value and outputs equal
//! the function's bit for bit, its gradient (with respect to `x` and to the initial contents of
//! `out`, cotangent {cot:?} on `out`) equals forward mode over the generated generic `primal`
//! to 1e-10 relative, `pullback_vec` with two cotangent lanes gives in each lane what
//! `pullback` gives with that lane's cotangent, bit for bit, and `pullback` on dual numbers gives
//! Hessian-vector products equal to forward over forward (`primal` on nested duals) to 1e-8.
//! The interpreter's tests check the adjoint program; these check the Rust generated from it:
//! pushes and pops, replayed counters, fused loops and the accesses it indexes without bounds
//! checks, at `f64`, at two cotangent lanes and at dual numbers.
//!
//! Generated by `cargo run -p adjoint-ssa-syntax --example random_programs`; do not edit
//! (rustfmt leaves it as written: `#[rustfmt::skip]` on its `mod` item).
#![allow(
    unused_mut,
    unused_variables,
    unused_assignments,
    unused_parens,
    clippy::all
)]

use adjoint_core::forward::Dual;
use adjoint_ssa::{{Cotangents, Workspace}};
",
        n = COMPILED_PROGRAMS,
        cot = TEST_COT
    ));
    for &seed in &seeds {
        s.push_str(&format!(
            "\nmod p{seed} {{\n    use adjoint_ssa::differentiable;\n    #[differentiable]\n    pub {}\n}}\n",
            program(seed).replace('\n', "\n    ")
        ));
    }
    s.push_str(&format!(
        "
type Plain = fn(&[f64], &mut [f64], usize) -> f64;
type Pullback =
    fn(&mut Workspace<f64>, &[f64], &mut [f64], usize, &mut [f64], &mut [f64], f64) -> f64;
type Forward = fn(&[Dual<f64>], &mut [Dual<f64>], usize) -> Dual<f64>;
type C2 = Cotangents<f64, 2>;
type Lanes = fn(&mut Workspace<f64>, &[f64], &mut [f64], usize, &mut [C2], &mut [C2], C2) -> f64;
type D = Dual<f64>;
type Hvp = fn(&mut Workspace<D>, &[D], &mut [D], usize, &mut [D], &mut [D], D) -> D;
type Forward2 = fn(&[Dual<D>], &mut [Dual<D>], usize) -> Dual<D>;

const PROGRAMS: [(u64, Plain, Pullback, Forward, Lanes, Hvp, Forward2); {n}] = [
",
        n = seeds.len()
    ));
    for &seed in &seeds {
        s.push_str(&format!(
            "    (\n        {seed},\n        p{seed}::f,\n        p{seed}::f::pullback,\n        p{seed}::f::primal::<Dual<f64>>,\n        p{seed}::f::pullback_vec::<f64, C2>,\n        p{seed}::f::pullback::<D>,\n        p{seed}::f::primal::<Dual<D>>,\n    ),\n"
        ));
    }
    s.push_str(&format!(
        "];

#[test]
fn compiled_adjoints_of_random_programs_equal_forward_mode() {{
    let (x, out0, cot) = ({x:?}, {out:?}, {cot:?});
    let n = 2;
    for (seed, plain, pullback, forward, lanes, hvp, forward2) in PROGRAMS {{
        let mut out_plain = out0;
        let value = plain(&x, &mut out_plain, n);
        let (mut out, mut d_x, mut d_out) = (out0, [0.0; 3], cot);
        let v = pullback(&mut Workspace::new(), &x, &mut out, n, &mut d_x, &mut d_out, 1.0);
        assert_eq!(v.to_bits(), value.to_bits(), \"program {{seed}}: value\");
        assert_eq!(out.map(f64::to_bits), out_plain.map(f64::to_bits), \"program {{seed}}: out\");
        for dir in 0..6 {{
            let tan = |k: usize| if dir == k {{ 1.0 }} else {{ 0.0 }};
            let xd: Vec<Dual<f64>> = (0..3).map(|i| Dual::new(x[i], tan(i))).collect();
            let mut od: Vec<Dual<f64>> = (0..3).map(|i| Dual::new(out0[i], tan(3 + i))).collect();
            let r = forward(&xd, &mut od, n);
            assert_eq!(r.re.to_bits(), value.to_bits(), \"program {{seed}}: forward value\");
            let want = r.eps + (0..3).map(|j| cot[j] * od[j].eps).sum::<f64>();
            let got = if dir < 3 {{ d_x[dir] }} else {{ d_out[dir - 3] }};
            assert!(
                (got - want).abs() <= 1e-10 * (1.0 + want.abs()),
                \"program {{seed}}, direction {{dir}}: adjoint {{got}} against forward {{want}}\"
            );
        }}
        // lane 0: (1, cot); lane 1: (-0.5, cot reversed)
        let cot1 = [cot[2], cot[1], cot[0]];
        let (mut out2, mut d_x2, mut d_out2) = (out0, [0.0; 3], cot1);
        pullback(&mut Workspace::new(), &x, &mut out2, n, &mut d_x2, &mut d_out2, -0.5);
        let mut lx = [Cotangents([0.0; 2]); 3];
        let mut lo: Vec<C2> = (0..3).map(|j| Cotangents([cot[j], cot1[j]])).collect();
        let mut out3 = out0;
        let v = lanes(&mut Workspace::new(), &x, &mut out3, n, &mut lx, &mut lo, Cotangents([1.0, -0.5]));
        assert_eq!(v.to_bits(), value.to_bits(), \"program {{seed}}: lanes value\");
        for j in 0..3 {{
            let (l0, l1) = ((lx[j].0[0], lo[j].0[0]), (lx[j].0[1], lo[j].0[1]));
            assert_eq!((l0.0.to_bits(), l0.1.to_bits()), (d_x[j].to_bits(), d_out[j].to_bits()), \"program {{seed}}: lane 0\");
            assert_eq!((l1.0.to_bits(), l1.1.to_bits()), (d_x2[j].to_bits(), d_out2[j].to_bits()), \"program {{seed}}: lane 1\");
        }}
        // forward over reverse: the pullback on duals gives H·v (tangent v on x and the initial
        // out), against forward over forward (the second-order tangent of `primal` on nested duals)
        let v = [0.3, -0.5, 0.7, 0.2, -0.4, 0.6];
        let xd: Vec<D> = (0..3).map(|i| Dual::new(x[i], v[i])).collect();
        let mut od: Vec<D> = (0..3).map(|j| Dual::new(out0[j], v[3 + j])).collect();
        let (mut hx, mut ho): (Vec<D>, Vec<D>) = ((0..3).map(|_| Dual::new(0.0, 0.0)).collect(), (0..3).map(|j| Dual::new(cot[j], 0.0)).collect());
        let r = hvp(&mut Workspace::new(), &xd, &mut od, n, &mut hx, &mut ho, Dual::new(1.0, 0.0));
        assert_eq!(r.re.to_bits(), value.to_bits(), \"program {{seed}}: value on duals\");
        for dir in 0..6 {{
            let e = |k: usize| if dir == k {{ 1.0 }} else {{ 0.0 }};
            let x2: Vec<Dual<D>> = (0..3).map(|i| Dual::new(Dual::new(x[i], v[i]), Dual::new(e(i), 0.0))).collect();
            let mut o2: Vec<Dual<D>> = (0..3).map(|j| Dual::new(Dual::new(out0[j], v[3 + j]), Dual::new(e(3 + j), 0.0))).collect();
            let r2 = forward2(&x2, &mut o2, n);
            let want = r2.eps.eps + (0..3).map(|j| cot[j] * o2[j].eps.eps).sum::<f64>();
            let got = if dir < 3 {{ hx[dir].eps }} else {{ ho[dir - 3].eps }};
            assert!(
                (got - want).abs() <= 1e-8 * (1.0 + want.abs()),
                \"program {{seed}}, direction {{dir}}: H·v {{got}} against forward over forward {{want}}\"
            );
        }}
    }}
}}
",
        x = TEST_X,
        out = TEST_OUT,
        cot = TEST_COT
    ));
    s
}
