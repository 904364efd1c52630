use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64], flag: bool) -> f64 {
    match (x.len() % 2, flag) {
        (0, true) => x[0],
        _ => 0.0,
    }
}

fn main() {}
