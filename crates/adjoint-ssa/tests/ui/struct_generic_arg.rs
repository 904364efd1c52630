use adjoint_ssa::{differentiable, Differentiable};

#[derive(Differentiable)]
struct Params<T = f64> {
    w: T,
}

#[differentiable]
fn f(p: &Params<f32>) -> f64 {
    p.w as f64
}

fn main() {}
