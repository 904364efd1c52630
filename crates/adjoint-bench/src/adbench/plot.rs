//! Log–log plots of derivative time against problem size, one line per tool, like ADBench's
//! figures (SVG, written with `plotters`, and a PNG of each rendered with `resvg`).

use super::Row;
use plotters::prelude::*;
use std::path::Path;

const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The plot a row belongs to: the task, and for GMM the point set (`gmm-1k`, `gmm-10k`).
fn series(r: &Row) -> String {
    match r.input.split_once('/') {
        Some((set, _)) => format!("{}-{set}", r.task),
        None => r.task.clone(),
    }
}

/// Write `{task}[-{set}].svg` and `.png` under `dir` for each task and point set in `rows`: parameters on x,
/// derivative seconds on y, log–log, one line per engine (rows with no timing are left out).
pub fn plot(
    rows: &[Row],
    dir: &Path,
) -> Result<Vec<std::path::PathBuf>, Box<dyn std::error::Error>> {
    let mut written = Vec::new();
    let mut tasks: Vec<String> = rows.iter().map(series).collect();
    tasks.sort();
    tasks.dedup();
    for task in tasks {
        let pts: Vec<&Row> = rows
            .iter()
            .filter(|r| series(r) == task && r.derivative_s > 0.0 && r.params > 0)
            .collect();
        if pts.is_empty() {
            continue;
        }
        let (xmin, xmax) = pts.iter().fold((f64::MAX, 0f64), |(a, b), r| {
            (a.min(r.params as f64), b.max(r.params as f64))
        });
        let (ymin, ymax) = pts.iter().fold((f64::MAX, 0f64), |(a, b), r| {
            (a.min(r.derivative_s), b.max(r.derivative_s))
        });
        let path = dir.join(format!("{task}.svg"));
        let root = SVGBackend::new(&path, (800, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("ADBench {}: derivative time", task.to_uppercase()),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (xmin * 0.8..xmax * 1.25).log_scale(),
                (ymin * 0.8..ymax * 1.25).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&|v| format!("{v:.0e}"))
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .x_desc("parameters")
            .y_desc("seconds")
            .draw()?;
        let mut engines: Vec<&str> = pts.iter().map(|r| r.engine.as_str()).collect();
        engines.sort();
        engines.dedup();
        for (i, engine) in engines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut line: Vec<(f64, f64)> = pts
                .iter()
                .filter(|r| r.engine == *engine)
                .map(|r| (r.params as f64, r.derivative_s))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(*engine)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        drop(chart);
        drop(root);
        let png = path.with_extension("png");
        svg_to_png(&path, &png)?;
        written.push(path);
        written.push(png);
    }
    Ok(written)
}

/// Rasterise an SVG to PNG with `resvg` (pure Rust). Text uses the system's fonts; on a machine
/// with none the labels are left out of the PNG (the SVG keeps them).
pub fn svg_to_png(svg: &Path, png: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // Plotters asks for "sans-serif": map it to an installed sans family (DejaVu on Debian).
    let sans = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .find(|name| name.contains("Sans") && !name.contains("Mono"));
    if let Some(name) = sans {
        db.set_sans_serif_family(name);
    }
    let tree = usvg::Tree::from_data(&std::fs::read(svg)?, &opt)?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty SVG")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.save_png(png)?;
    Ok(())
}
