use adjoint_ssa::differentiable;

#[differentiable]
fn g(x: &[f64]) -> f64 {
    x[0]
}

#[differentiable]
fn f(out: &mut [f64]) {
    out[0] = g(out);
}

fn main() {}
