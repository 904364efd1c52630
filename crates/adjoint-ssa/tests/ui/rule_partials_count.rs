use adjoint_ssa::{differentiable, Real};

fn hyp(a: f64, b: f64) -> f64 {
    a.hypot(b)
}

// two arguments, one partial
fn hyp_rule<T: Real>(a: T, b: T) -> (T, [T; 1]) {
    let h = a.hypot(b);
    (h, [a / h])
}

#[differentiable(rule(hyp = hyp_rule))]
fn f(x: f64, y: f64) -> f64 {
    hyp(x, y)
}

fn main() {}
