use adjoint_ssa::differentiable;

#[differentiable]
fn f<T: Copy>(x: T) -> T {
    x
}

fn main() {}
