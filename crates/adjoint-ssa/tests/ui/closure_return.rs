use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    x.iter()
        .map(|v| {
            if *v < 0.0 {
                return 0.0;
            }
            v.sqrt()
        })
        .sum()
}

fn main() {}
