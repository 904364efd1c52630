// A float literal in a condition on a fixed-point value: the error says why (only real types
// compare with a float literal) and what to write instead (an integer literal or a variable).
use fixed::types::I32F32;
adjoint_rev::reversible! {
    fn f(y: &mut I32F32, x: &mut I32F32) {
        if (x > 0.5, ~) {
            y += x;
        }
    }
}
fn main() {}
