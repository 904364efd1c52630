use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64, n: usize) -> f64 {
    if n == 0 { x } else { f(x * 0.5, n - 1) }
}

fn main() {}
