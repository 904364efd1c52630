use adjoint_ssa::differentiable;

#[differentiable]
fn f(a: f64, b: f64) -> f64 {
    let (x, y) = if a > b { (a, b) } else { (b, a) };
    x - y
}

fn main() {}
