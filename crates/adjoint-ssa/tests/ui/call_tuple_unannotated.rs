use adjoint_ssa::differentiable;

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    (r * t.cos(), r * t.sin())
}

#[differentiable]
fn f(r: f64, t: f64) -> f64 {
    let p = polar(r, t);
    p.0 * p.1
}

fn main() {}
