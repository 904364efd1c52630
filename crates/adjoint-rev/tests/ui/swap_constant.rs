adjoint_rev::reversible! {
    fn f(y: &mut f64) {
        SWAP(y, 1.0);
    }
}
fn main() {}
