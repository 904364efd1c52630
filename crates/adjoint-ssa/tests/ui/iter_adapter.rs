use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in x.iter().filter(|v| **v > 0.0) {
        s += v;
    }
    s
}

fn main() {}
