//! Unsupported constructs are compile errors at the offending tokens, saying what to write instead.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
