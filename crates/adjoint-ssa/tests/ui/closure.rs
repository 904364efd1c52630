use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let sq = |v: f64| v * v;
    sq(x[0])
}

fn main() {}
