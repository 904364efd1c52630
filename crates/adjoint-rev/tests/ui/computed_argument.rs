use adjoint_rev::prelude::*;

/// A plain function of a variable: no gradient could flow back through its result.
fn h<T: Copy>(x: T) -> T {
    x
}

reversible! {
    fn sumsq<T: RevReal>(y: &mut T, x: &mut [T; 2]) {
        y += x[0] * x[0];
        y += x[1] * x[1];
    }
    fn add<T: RevReal>(y: &mut T, x: &mut T) {
        y += x;
    }
    fn pair<T: RevReal>(y: &mut T, a: &mut T, b: &mut T) {
        sumsq(y, [a, b]);
        add(y, h(a));
    }
}

fn main() {}
