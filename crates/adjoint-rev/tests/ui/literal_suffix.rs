adjoint_rev::reversible! {
    fn f(y: &mut f64, x: &mut f64) {
        y += x * 2u64;
    }
}
fn main() {}
