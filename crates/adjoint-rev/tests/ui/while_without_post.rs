adjoint_rev::reversible! {
    fn f(y: &mut f64) {
        while y < 3.0 {
            y += 1.0;
        }
    }
}
fn main() {}
