use adjoint_ssa::differentiable;

const D: usize = 3;

#[differentiable]
fn scaled(a: &[f64], s: f64) -> [f64; D] {
    [a[0] * s, a[1] * s, a[2] * s]
}

#[differentiable]
fn f(a: &[f64], s: f64) -> f64 {
    let v: [f64; D] = scaled(a, s);
    v[0] + v[2]
}

fn main() {}
