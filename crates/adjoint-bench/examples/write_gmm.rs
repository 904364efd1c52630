//! Write a generated GMM instance in ADBench's format: `write_gmm D K N SEED > file`.
fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("integer arguments: D K N SEED"))
        .collect();
    let g = adjoint_bench::adbench::io::generate_gmm(a[0], a[1], a[2], a[3] as u64);
    print!("{}", adjoint_bench::adbench::io::write_gmm(&g));
}
