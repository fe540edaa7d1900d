//! `heatmap.png` of a sweep: Recall@5 and exact match over layers x dims, one panel each, the
//! value printed in every cell.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::{CellSummary, Summary};

const PANEL: (u32, u32) = (480, 420);
const MARGIN: (i32, i32, i32, i32) = (80, 60, 20, 60); // left, top, right, bottom
const FONT: &str = "sans-serif";

/// plotters draws text only with a registered font, and none ships with it: use `$RAG_FONT` or
/// a common system copy of DejaVu Sans / Liberation Sans.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os("RAG_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(
                [
                    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/TTF/DejaVuSans.ttf",
                    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                ]
                .map(PathBuf::from),
            )
            .collect();
        candidates.iter().any(|path| {
            let Ok(bytes) = std::fs::read(path) else {
                return false;
            };
            // Registered once per process; the font lives as long as plotters needs it.
            plotters::style::register_font(
                FONT,
                FontStyle::Normal,
                Box::leak(bytes.into_boxed_slice()),
            )
            .is_ok()
        })
    })
}

fn plot<T, E: Display>(result: std::result::Result<T, E>) -> Result<T> {
    result.map_err(|e| anyhow!("drawing the heatmap: {e}"))
}

type Metric = (&'static str, fn(&CellSummary) -> Option<f64>);

/// Draws the grid's heatmap; without a font it says so on stderr and draws nothing.
pub fn draw(path: &Path, summary: &Summary) -> Result<()> {
    let mut layers: Vec<usize> = summary.cells.iter().filter_map(|c| c.cell.layers).collect();
    let mut dims: Vec<usize> = summary.cells.iter().filter_map(|c| c.cell.dim).collect();
    for axis in [&mut layers, &mut dims] {
        axis.sort();
        axis.dedup();
    }
    if layers.is_empty() || dims.is_empty() {
        return Ok(());
    }
    if !font_ready() {
        eprintln!(
            "note: no TrueType font found (set RAG_FONT to a .ttf file); {} not drawn",
            path.display()
        );
        return Ok(());
    }
    let mut metrics: Vec<Metric> = vec![("Recall@5 (%)", |c| c.recall.get(&5).copied())];
    if summary.cells.iter().any(|c| c.exact_match.is_some()) {
        metrics.push(("Exact match (%)", |c| c.exact_match));
    }
    // The image encoder picks the format from the extension, so the partial file keeps ".png".
    let partial = path.with_file_name(".heatmap-partial.png");
    {
        let size = (PANEL.0 * metrics.len() as u32, PANEL.1);
        let root = BitMapBackend::new(&partial, size).into_drawing_area();
        plot(root.fill(&WHITE))?;
        for (area, (title, metric)) in root.split_evenly((1, metrics.len())).iter().zip(&metrics) {
            let value = |layer: usize, dim: usize| {
                summary
                    .cells
                    .iter()
                    .find(|c| c.cell.layers == Some(layer) && c.cell.dim == Some(dim))
                    .and_then(metric)
            };
            panel(area, title, &layers, &dims, value)?;
        }
        plot(root.present())?;
    }
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    layers: &[usize],
    dims: &[usize],
    value: impl Fn(usize, usize) -> Option<f64>,
) -> Result<()> {
    let (left, top, right, bottom) = MARGIN;
    let (width, height) = (PANEL.0 as i32, PANEL.1 as i32);
    let cell_w = (width - left - right) / dims.len() as i32;
    let cell_h = (height - top - bottom) / layers.len() as i32;
    let centred = |size: f64| {
        (FONT, size)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    plot(area.draw(&Text::new(
        title.to_string(),
        (width / 2, top / 2),
        centred(22.0),
    )))?;
    for (row, &layer) in layers.iter().rev().enumerate() {
        let y = top + row as i32 * cell_h;
        let label = format!("L{layer}");
        plot(area.draw(&Text::new(label, (left / 2, y + cell_h / 2), centred(18.0))))?;
        for (col, &dim) in dims.iter().enumerate() {
            let x = left + col as i32 * cell_w;
            let v = value(layer, dim);
            let shade = v.unwrap_or(0.0).clamp(0.0, 1.0);
            let fill = RGBColor(
                (255.0 - 215.0 * shade) as u8,
                (255.0 - 150.0 * shade) as u8,
                (255.0 - 60.0 * shade) as u8,
            );
            let corners = [(x, y), (x + cell_w - 2, y + cell_h - 2)];
            plot(area.draw(&Rectangle::new(corners, fill.filled())))?;
            let text = v.map_or("-".to_string(), |v| format!("{:.1}", v * 100.0));
            let ink = if shade > 0.6 { WHITE } else { BLACK };
            let style = centred(18.0).color(&ink);
            plot(area.draw(&Text::new(text, (x + cell_w / 2, y + cell_h / 2), style)))?;
        }
    }
    for (col, &dim) in dims.iter().enumerate() {
        let x = left + col as i32 * cell_w + cell_w / 2;
        let label = format!("d{dim}");
        plot(area.draw(&Text::new(label, (x, height - bottom / 2), centred(18.0))))?;
    }
    Ok(())
}
