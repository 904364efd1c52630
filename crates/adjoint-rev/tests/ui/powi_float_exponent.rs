adjoint_rev::reversible! {
    fn f(y: &mut f64, x: &mut f64) {
        y += x.powi(2.5);
    }
}
fn main() {}
