adjoint_rev::reversible! {
    fn f(s: &mut usize, n: &mut usize) {
        for i in 0..n {
            i += s;
        }
    }
}
fn main() {}
