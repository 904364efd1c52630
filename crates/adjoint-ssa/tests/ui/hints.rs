use adjoint_ssa::differentiable;

// An `enumerate()` item bound to one name (valid Rust): the parts are bound by name.
#[differentiable]
fn weighted(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for p in x.iter().enumerate() {
        s += p.1 * p.0 as f64;
    }
    s
}

// A sign test: compare instead (no rule applies to a test).
#[differentiable]
fn abs_by_sign(x: f64) -> f64 {
    if x.is_sign_negative() {
        -x
    } else {
        x
    }
}

// `swap` on a local array: a tuple assignment does it.
#[differentiable]
fn swapped(x: f64) -> f64 {
    let mut v = [x; 3];
    v.swap(0, 2);
    v[0]
}

fn main() {}
