use adjoint_rev::prelude::*;

reversible! {
    fn rowdot<T: RevReal>(out: &mut T, a: &mut Vec<T>, b: &mut Vec<T>) {
        for k in 0..a.len() {
            out += a[k] * b[k];
        }
    }

    /// Rows that may be the same at run time are copied in and out: a `Vec` row is not `Copy`.
    fn gram<T: RevReal>(g: &mut Vec<T>, m: &mut Vec<Vec<T>>) {
        for i in 0..m.len() {
            for j in 0..m.len() {
                if (i != j, ~) {
                    rowdot(g[i * m.len() + j], m[i], m[j]);
                }
            }
        }
    }
}

fn main() {}
