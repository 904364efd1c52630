adjoint_rev::reversible! {
    fn big64(y: &mut f64, x: &mut f64) {
        y += x * 1e400;
    }
}
fn main() {}
