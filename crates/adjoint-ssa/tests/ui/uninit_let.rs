use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> f64 {
    let y;
    y = x;
    y
}

fn main() {}
