// A float literal cannot be a `ULog` factor: the error is at the literal (it was at the whole
// macro call), where the fix is (`let two = ULog::from_f64(2.0)` passed as an argument).
use adjoint_rev::ULog;
adjoint_rev::reversible! {
    fn f(y: &mut ULog<f64>) {
        y *= 2.0;
    }
}
fn main() {}
