use adjoint_ssa::differentiable;

#[differentiable]
fn f(p: (f64, usize)) -> f64 {
    p.0 * p.1 as f64
}

fn main() {}
