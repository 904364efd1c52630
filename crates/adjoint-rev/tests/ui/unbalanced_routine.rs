adjoint_rev::reversible! {
    fn f(y: &mut f64) {
        ~@routine;
    }
}
fn main() {}
