use adjoint_ssa::{differentiable, Real};

fn bess(n: i32, x: f64) -> f64 {
    x.powi(n)
}

fn bess_rule<T: Real>(n: T, x: T) -> (T, [T; 2]) {
    (x.powf(n), [T::zero(), n * x.powf(n - 1.0)])
}

// An integer that varies cannot be an argument of a function with a rule.
#[differentiable(rule(bess = bess_rule))]
fn f(x: f64, k: i32) -> f64 {
    bess(k, x)
}

fn main() {}
