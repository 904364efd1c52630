//! Plot ADBench rows from a JSON file (e.g. adbench.json merged with a peer's separate run):
//! `plot_rows ROWS.json OUT_DIR`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let rows: Vec<adjoint_bench::adbench::Row> =
        serde_json::from_str(&std::fs::read_to_string(&a[0])?)?;
    for p in adjoint_bench::adbench::plot::plot(&rows, std::path::Path::new(&a[1]))? {
        println!("wrote {}", p.display());
    }
    Ok(())
}
