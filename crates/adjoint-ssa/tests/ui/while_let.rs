use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> f64 {
    let mut s = x;
    while let Some(_) = Some(1) {
        s += 1.0;
    }
    s
}

fn main() {}
