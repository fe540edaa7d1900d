//! Heatmaps over layers x dims, as in the ESE paper's Figure 3: one panel per measure, the value
//! printed in every cell. `rag eval` sweeps draw Recall@5 and exact match, `rag eval-sts` the
//! Spearman correlations.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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

/// One panel: a title and each (layer, dim) cell's value in percent, `None` where not measured.
pub struct Panel<'a> {
    pub title: String,
    pub value: Box<dyn Fn(usize, usize) -> Option<f64> + 'a>,
}

/// Draws `panels` in rows of `columns`, each over the same `layers` (deepest on top) and
/// `dims`, cells shaded from 0 to 100; without a font it says so on stderr and draws nothing.
pub fn draw(
    path: &Path,
    layers: &[usize],
    dims: &[usize],
    panels: &[Panel],
    columns: usize,
) -> Result<()> {
    if layers.is_empty() || dims.is_empty() || panels.is_empty() {
        return Ok(());
    }
    if !font_ready() {
        eprintln!(
            "note: no TrueType font found (set RAG_FONT to a .ttf file); {} not drawn",
            path.display()
        );
        return Ok(());
    }
    let columns = columns.clamp(1, panels.len());
    let rows = panels.len().div_ceil(columns);
    // The image encoder picks the format from the extension, so the partial file keeps ".png".
    let partial = path.with_file_name(".heatmap-partial.png");
    {
        let size = (PANEL.0 * columns as u32, PANEL.1 * rows as u32);
        let root = BitMapBackend::new(&partial, size).into_drawing_area();
        plot(root.fill(&WHITE))?;
        for (area, panel) in root.split_evenly((rows, columns)).iter().zip(panels) {
            draw_panel(area, panel, layers, dims)?;
        }
        plot(root.present())?;
    }
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    layers: &[usize],
    dims: &[usize],
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
        panel.title.clone(),
        (width / 2, top / 2),
        centred(22.0),
    )))?;
    for (row, &layer) in layers.iter().rev().enumerate() {
        let y = top + row as i32 * cell_h;
        let label = format!("L{layer}");
        plot(area.draw(&Text::new(label, (left / 2, y + cell_h / 2), centred(18.0))))?;
        for (col, &dim) in dims.iter().enumerate() {
            let x = left + col as i32 * cell_w;
            let v = (panel.value)(layer, dim);
            let shade = (v.unwrap_or(0.0) / 100.0).clamp(0.0, 1.0);
            let fill = RGBColor(
                (255.0 - 215.0 * shade) as u8,
                (255.0 - 150.0 * shade) as u8,
                (255.0 - 60.0 * shade) as u8,
            );
            let corners = [(x, y), (x + cell_w - 2, y + cell_h - 2)];
            plot(area.draw(&Rectangle::new(corners, fill.filled())))?;
            let text = v.map_or("-".to_string(), |v| format!("{v:.1}"));
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
