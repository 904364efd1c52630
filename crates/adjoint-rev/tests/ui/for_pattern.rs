use adjoint_rev::prelude::*;

reversible! {
    fn q<T: RevReal>(y: &mut T, x: &mut Vec<T>) {
        for (i, v) in x.iter().enumerate() {
            y += v;
        }
    }
}

fn main() {}
