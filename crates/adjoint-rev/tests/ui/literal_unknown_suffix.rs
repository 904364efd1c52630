adjoint_rev::reversible! {
    fn f(y: &mut u64) {
        y += 3u7;
    }
}
fn main() {}
