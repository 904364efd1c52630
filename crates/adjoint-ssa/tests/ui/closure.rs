use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut add = |v: f64| s += v * v;
    add(x[0]);
    add(x[1]);
    s
}

fn main() {}
