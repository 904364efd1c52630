use adjoint_ssa::differentiable;

struct P { a: f64 }

#[differentiable]
fn f(x: f64) -> f64 {
    let p = P { a: x };
    p.a
}

fn main() {}
