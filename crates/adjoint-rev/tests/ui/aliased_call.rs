adjoint_rev::reversible! {
    fn g(a: &mut f64, b: &mut f64) {
        a += b;
    }
    fn f(y: &mut f64, x: &mut f64) {
        g(x, x);
    }
}
fn main() {}
