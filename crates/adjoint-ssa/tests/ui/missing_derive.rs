use adjoint_ssa::differentiable;

struct Params<T = f64> {
    w: T,
}

#[differentiable]
fn f(p: &Params) -> f64 {
    p.w * 2.0
}

fn main() {}
