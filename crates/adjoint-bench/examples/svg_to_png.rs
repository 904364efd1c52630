//! Rasterise benchmark plots: `cargo run --release -p adjoint-bench --example svg_to_png -- a.svg b.svg`
//! writes `a.png`, `b.png` beside them.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    for arg in std::env::args().skip(1) {
        let svg = std::path::PathBuf::from(arg);
        let png = svg.with_extension("png");
        adjoint_bench::adbench::plot::svg_to_png(&svg, &png)?;
        eprintln!("wrote {}", png.display());
    }
    Ok(())
}
