use adjoint_ssa::Differentiable;

#[derive(Differentiable)]
struct Params<'a, T = f64> {
    x: &'a [T],
}

fn main() {}
