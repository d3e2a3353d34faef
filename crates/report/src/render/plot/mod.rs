//! `memprof plot` and `run --plot`: a saved report's memory as pictures (SVG, PNG, or an HTML
//! page holding the SVG): the step over module calls, bytes saved for backward and parameter
//! bytes per module, and each targeted line's peak and Δ. Several reports (a job's ranks) give one
//! series per rank. Charts are drawn with plotters; the panels are in charts.rs.
mod draw;
mod plan;
mod raster;

use crate::error::{Error, Result};
use crate::model::profile::Profile;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// The picture's width in pixels; each panel's height depends on how much it shows.
const WIDTH: u32 = 1200;
static FONT: &[u8] = include_bytes!("DejaVuSans.ttf");

/// One report to draw, with the name its series get (`rank 1`, or the file's name).
pub struct Source<'a> {
    pub label: String,
    pub profile: &'a Profile,
}

/// What can be drawn from the reports: the panels, top to bottom, and the notes for sections
/// that had nothing to draw.
pub struct Plan {
    pub panels: Vec<plan::Panel>,
    /// How many of the panels draw data (the rest are the notes').
    pub with_data: usize,
    pub notes: Vec<String>,
}

/// The picture formats, by file name extension.
pub enum Kind {
    Svg,
    Png,
    Html,
}

/// The format a file name asks for; an error names the ones there are.
pub fn kind_of(path: &Path) -> Result<Kind> {
    match path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .as_deref()
    {
        Some("svg") => Ok(Kind::Svg),
        Some("png") => Ok(Kind::Png),
        Some("html") | Some("htm") => Ok(Kind::Html),
        _ => Err(Error::usage(format!(
            "cannot tell the picture's format from '{}'",
            path.display()
        ))
        .hint("name the file .svg, .png or .html")),
    }
}

/// The series' names: the ranks when the reports come from one job's ranks, else the files'.
pub fn sources<'a>(reports: &'a [(String, Profile)]) -> Vec<Source<'a>> {
    let ranks: Vec<u32> = reports
        .iter()
        .map(|(_, p)| p.metadata.process.rank)
        .collect();
    let distinct = ranks
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    reports
        .iter()
        .map(|(name, p)| Source {
            label: if reports.len() > 1 && distinct == reports.len() {
                format!("rank {}", p.metadata.process.rank)
            } else {
                name.clone()
            },
            profile: p,
        })
        .collect()
}

/// Draws the reports as `kind`: the file's bytes, and the notes on sections that had no data,
/// for the user.
pub fn draw(sources: &[Source<'_>], kind: Kind) -> Result<(Vec<u8>, Vec<String>)> {
    let plan = plan::plan(sources);
    if plan.with_data == 0 {
        return Err(Error::usage(format!(
            "nothing to plot in the report: {}",
            plan.notes.join("; ")
        ))
        .hint("profile some functions (-f) or modules (--modules) and save the report with -o"));
    }
    let height: u32 = plan.panels.iter().map(|p| p.height).sum();
    register_font();
    let bytes = match kind {
        Kind::Svg => svg(&plan, height)?.into_bytes(),
        Kind::Html => html(sources, &svg(&plan, height)?).into_bytes(),
        Kind::Png => png(&plan, height)?,
    };
    Ok((bytes, plan.notes))
}

fn drawing_error(e: impl std::fmt::Display) -> Error {
    Error::usage(format!("could not draw the plot: {e}"))
}

fn svg(plan: &Plan, height: u32) -> Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, height)).into_drawing_area();
        draw_panels(&root, plan)?;
        root.present().map_err(drawing_error)?;
    }
    Ok(text)
}

fn png(plan: &Plan, height: u32) -> Result<Vec<u8>> {
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    {
        let bitmap = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height));
        let root = raster::Raster::new(bitmap, FONT)
            .ok_or_else(|| drawing_error("the embedded font could not be read"))?
            .into_drawing_area();
        draw_panels(&root, plan)?;
        root.present().map_err(drawing_error)?;
    }
    let image = image::RgbImage::from_raw(WIDTH, height, pixels)
        .ok_or_else(|| drawing_error("the pixel buffer has the wrong size"))?;
    let mut out = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut out, image::ImageOutputFormat::Png)
        .map_err(drawing_error)?;
    Ok(out.into_inner())
}

fn html(sources: &[Source<'_>], svg: &str) -> String {
    let title = sources
        .first()
        .and_then(|s| s.profile.metadata.script.clone())
        .unwrap_or_else(|| "report".into());
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memprof: {}</title></head>\n\
         <body style=\"margin:0;background:#fff\">\n{svg}\n</body></html>\n",
        escape(&title)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    plan: &Plan,
) -> Result<()> {
    root.fill(&WHITE).map_err(drawing_error)?;
    let mut rest = root.clone();
    for panel in &plan.panels {
        let (area, below) = rest.split_vertically(panel.height);
        draw::draw(&area, panel).map_err(drawing_error)?;
        rest = below;
    }
    Ok(())
}

/// Text is measured (SVG, PNG) and drawn (PNG) with the embedded DejaVu Sans: plotters' ab_glyph
/// backend uses no system fonts. SVGs name the family and leave the glyphs to the viewer.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}
