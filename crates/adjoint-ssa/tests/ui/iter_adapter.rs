use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in x.iter().step_by(2).skip(1) {
        s += v;
    }
    s
}

fn main() {}
