use adjoint_ssa::{differentiable, Differentiable};

#[derive(Differentiable)]
struct Params<T = f64> {
    w: T,
}

#[differentiable]
fn f(p: &mut Params, x: f64) -> f64 {
    p.w * x
}

fn main() {}
