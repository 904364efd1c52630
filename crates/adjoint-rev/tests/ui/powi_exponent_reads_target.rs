adjoint_rev::reversible! {
    fn f<T: RevReal>(y: &mut T, x: &mut T) {
        y += x.powi(y.value() as i32);
    }
}
fn main() {}
