use adjoint_ssa::{differentiable, Differentiable};

#[derive(Differentiable)]
struct Params<T = f64> {
    w: T,
}

impl Params {
    fn norm(&self) -> f64 {
        self.w.abs()
    }
}

#[differentiable]
fn f(p: &Params) -> f64 {
    p.norm()
}

fn main() {}
