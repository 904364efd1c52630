use adjoint_ssa::Differentiable;

#[derive(Differentiable)]
struct Params {
    w: f64,
}

fn main() {}
