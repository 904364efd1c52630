adjoint_rev::reversible! {
    fn f(v: &mut Vec<i64>, n: &mut usize) {
        for i in 0..n {
            v[i] += i;
        }
    }
}
fn main() {}
