adjoint_rev::reversible! {
    fn grow(x: &mut f64) {
        while (x < 100.0, ~) {
            x *= 2.0;
        }
    }
}

fn main() {}
