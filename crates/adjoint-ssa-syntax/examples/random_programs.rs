//! Writes `adjoint-ssa`'s `tests/random_programs/programs.rs`: random programs of the supported subset
//! (see `adjoint_ssa_syntax::testgen`) through the real macro, each checked against forward
//! mode over its generated generic primal. Run from the workspace root:
//!
//! ```text
//! cargo run -p adjoint-ssa-syntax --example random_programs > crates/adjoint-ssa/tests/random_programs/programs.rs
//! ```
//!
//! A unit test of `adjoint-ssa-syntax` fails when the committed file and this output differ.

fn main() {
    print!("{}", adjoint_ssa_syntax::testgen::random_programs_test());
}
