adjoint_rev::reversible! {
    fn f(z: &mut f64, x: &mut f64) {
        z += sin(cos(x));
    }
}
fn main() {}
