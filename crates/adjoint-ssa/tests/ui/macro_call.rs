use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> f64 {
    println!("{}", x);
    x
}

fn main() {}
