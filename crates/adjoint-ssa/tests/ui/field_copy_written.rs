use adjoint_ssa::{differentiable, Differentiable};

#[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
struct Q<T = f64> {
    a: T,
    b: [T; 2],
}

// `*r` of a reference to an array field names the field itself (the macro does not know its
// length, so it cannot copy it as Rust does): the message says to write the type,
// `let mut c: [f64; 2] = *r;`.
#[differentiable]
fn f(q: &Q) -> f64 {
    let r = &q.b;
    let mut c = *r;
    c[1] *= q.a;
    c[0] + c[1]
}

fn main() {}
