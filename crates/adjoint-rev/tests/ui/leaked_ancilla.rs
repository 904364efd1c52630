adjoint_rev::reversible! {
    fn f(y: &mut f64) {
        let t = 0.0;
        t += y.exp();
    }
}
fn main() {}
