adjoint_rev::reversible! {
    fn f(x: &mut f64) {
        let a = 0.0;
        unlet a = 0.0;
        x += a;
    }
}
fn main() {}
