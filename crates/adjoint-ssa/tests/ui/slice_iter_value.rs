use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let it = x.iter();
    let mut s = 0.0;
    for v in it {
        s += v;
    }
    s
}

fn main() {}
