use adjoint_ssa::differentiable;

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    (r * t.cos(), r * t.sin())
}

#[differentiable]
fn f(r: f64, t: f64) -> f64 {
    let (x, y) = polar(r, t);
    x * y
}

fn main() {}
