//! Misuse of `reversible!` is a compile error at the offending tokens (trybuild snapshots).

#[test]
fn compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
