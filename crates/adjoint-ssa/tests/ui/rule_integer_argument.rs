use adjoint_ssa::{differentiable, Real};

fn bess(n: i32, x: f64) -> f64 {
    x.powi(n)
}

fn bess_rule<T: Real>(n: T, x: T) -> (T, [T; 2]) {
    (x.powf(n), [T::zero(), n * x.powf(n - 1.0)])
}

// A function with a rule takes numbers only: the integer argument is the error, with the
// wrapper to write instead.
#[differentiable(rule(bess = bess_rule))]
fn f(x: f64) -> f64 {
    bess(3, x)
}

fn main() {}
