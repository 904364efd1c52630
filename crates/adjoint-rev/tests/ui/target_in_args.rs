adjoint_rev::reversible! {
    fn f(y: &mut f64, x: &mut f64) {
        y += y * x;
    }
}
fn main() {}
