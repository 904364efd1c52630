use adjoint_ssa::{differentiable, Differentiable};

#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct Q<T = f64> {
    a: T,
    b: [T; 2],
}

// A struct's array field copied without its type is read as a number (the macro does not see
// the field's type): the message says how to copy it, `let c: [f64; 2] = q.b;`.
#[differentiable]
fn f(q: &Q) -> f64 {
    let c = q.b;
    c[0] * q.a
}

fn main() {}
