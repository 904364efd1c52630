use adjoint_ssa::Differentiable;

#[derive(Differentiable)]
struct Inner<T = f64> {
    w: T,
}

#[derive(Differentiable)]
struct Outer<T = f64> {
    inner: Inner<T>,
    b: [T; 2],
}

fn main() {}
