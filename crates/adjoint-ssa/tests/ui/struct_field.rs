use adjoint_ssa::differentiable;

struct P {
    a: f64,
}

#[differentiable]
fn f(x: f64) -> f64 {
    let mut p = P { a: x };
    p.a = 2.0 * x;
    p.a
}

fn main() {}
