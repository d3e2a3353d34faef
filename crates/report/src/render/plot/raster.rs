//! The PNG backend: plotters' bitmap backend draws the shapes; memprof draws the text. Plotters
//! 0.3.7 places each glyph of its ab_glyph text by the glyph's own box and drops its side
//! bearing, so `.` floated at mid-height, `,` looked like `.` and letters were unevenly spaced.
//! Here every glyph sits on one baseline at its advance, kerned, as the font lays it out.
use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use plotters::backend::BitMapBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

type BitmapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

/// A bitmap that draws text with `font`.
pub struct Raster<'a> {
    bitmap: BitMapBackend<'a>,
    font: FontRef<'static>,
}

impl<'a> Raster<'a> {
    pub fn new(bitmap: BitMapBackend<'a>, font: &'static [u8]) -> Option<Self> {
        Some(Raster {
            bitmap,
            font: FontRef::try_from_slice(font).ok()?,
        })
    }

    /// The text's advance width and line height at `size` pixels (the em as plotters sizes it).
    fn measure(&self, text: &str, size: f32) -> (f32, f32) {
        let font = self.font.as_scaled(PxScale::from(size));
        let mut width = 0.0;
        let mut previous = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                width += font.kern(p, id);
            }
            width += font.h_advance(id);
            previous = Some(id);
        }
        (width, font.ascent() - font.descent())
    }
}

impl DrawingBackend for Raster<'_> {
    type ErrorType = BitmapError;

    fn get_size(&self) -> (u32, u32) {
        self.bitmap.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, h) = self.measure(text, style.size() as f32);
        Ok((w.ceil() as u32, h.ceil() as u32))
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let (width, height) = self.measure(text, size);
        // Laid out around the anchor at (0, 0), then turned (axis titles are rotated) and moved
        // to `pos`, as plotters does it.
        let left = -match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => width / 2.0,
            HPos::Right => width,
        };
        let top = -match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => height / 2.0,
            VPos::Bottom => height,
        };
        let turn = style.transform();
        let scale = PxScale::from(size);
        let font = self.font.as_scaled(scale);
        let baseline = top + font.ascent();
        let (w, h) = self.bitmap.get_size();
        let mut x = left;
        let mut previous = None;
        let mut pixels = Vec::new();
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                x += font.kern(p, id);
            }
            previous = Some(id);
            let glyph = id.with_scale_and_position(scale, point(x, baseline));
            x += font.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue; // a space
            };
            let bounds = outline.px_bounds();
            outline.draw(|gx, gy, coverage| {
                let (tx, ty) = turn.transform(
                    bounds.min.x as i32 + gx as i32,
                    bounds.min.y as i32 + gy as i32,
                );
                let (px, py) = (pos.0 + tx, pos.1 + ty);
                if px >= 0 && py >= 0 && (px as u32) < w && (py as u32) < h && coverage > 0.0 {
                    pixels.push(((px, py), coverage));
                }
            });
        }
        for (at, coverage) in pixels {
            let shade = BackendColor {
                alpha: color.alpha * f64::from(coverage.min(1.0)),
                rgb: color.rgb,
            };
            self.bitmap.draw_pixel(at, shade)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;

    const FONT: &[u8] = super::super::FONT;

    /// Each glyph's ink as (left, right, top, bottom) pixels, `text` drawn at 40 px from (10, 10).
    fn ink(text: &str) -> Vec<(u32, u32, u32, u32)> {
        ink_turned(text, FontTransform::None, (10, 10))
    }

    /// `ink` for text turned by `turn`, anchored at `at`.
    fn ink_turned(text: &str, turn: FontTransform, at: (i32, i32)) -> Vec<(u32, u32, u32, u32)> {
        let (w, h) = (300u32, 300u32);
        let mut pixels = vec![255u8; (w * h * 3) as usize];
        {
            let bitmap = BitMapBackend::with_buffer(&mut pixels, (w, h));
            let root = Raster::new(bitmap, FONT).unwrap().into_drawing_area();
            root.draw(&Text::new(
                text.to_string(),
                at,
                ("sans-serif", 40).into_font().transform(turn).color(&BLACK),
            ))
            .unwrap();
            root.present().unwrap();
        }
        // Glyphs are the runs of columns with ink.
        let dark = |x: u32, y: u32| pixels[((y * w + x) * 3) as usize] < 128;
        let mut glyphs = Vec::new();
        let mut current: Option<(u32, u32, u32, u32)> = None;
        for x in 0..w {
            let rows: Vec<u32> = (0..h).filter(|&y| dark(x, y)).collect();
            match (rows.first(), rows.last(), current) {
                (Some(&t), Some(&b), Some((l, _, ct, cb))) => {
                    current = Some((l, x, ct.min(t), cb.max(b)))
                }
                (Some(&t), Some(&b), None) => current = Some((x, x, t, b)),
                (None, _, Some(c)) => {
                    glyphs.push(c);
                    current = None;
                }
                _ => {}
            }
        }
        glyphs
    }

    #[test]
    fn a_period_sits_on_the_baseline_and_a_comma_goes_below_it() {
        let g = ink("x.x,");
        assert_eq!(g.len(), 4, "{g:?}");
        let (x, dot, comma) = (g[0], g[1], g[3]);
        // The period ends on the baseline, where x ends (within a pixel of antialiasing)...
        assert!(dot.3.abs_diff(x.3) <= 1, "x {x:?}, . {dot:?}");
        // ... and starts in the lower quarter of x's height, not at mid-height.
        assert!(dot.2 > x.2 + (x.3 - x.2) * 3 / 4, "x {x:?}, . {dot:?}");
        // The comma reaches below the baseline.
        assert!(comma.3 > x.3 + 2, "x {x:?}, , {comma:?}");
    }

    #[test]
    fn each_letter_starts_where_the_font_places_it() {
        // Its pen position (advances and kerning so far) plus its left side bearing: plotters'
        // own text dropped the bearings, which spaced `al located` unevenly.
        let text = "allocated";
        let font = FontRef::try_from_slice(FONT).unwrap();
        let scaled = font.as_scaled(PxScale::from(40.0));
        let mut pen = 10.0f32;
        let mut previous = None;
        let mut expected = Vec::new();
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = previous {
                pen += scaled.kern(p, id);
            }
            expected.push(pen + scaled.h_side_bearing(id));
            pen += scaled.h_advance(id);
            previous = Some(id);
        }
        let g = ink(text);
        assert_eq!(g.len(), text.len(), "{g:?}");
        for ((c, want), got) in text.chars().zip(&expected).zip(&g) {
            assert!(
                (got.0 as f32 - want).abs() <= 1.5,
                "{c}: ink starts at {}, the font says {want:.1}",
                got.0
            );
        }
    }

    #[test]
    fn a_turned_axis_title_is_drawn_turned_and_whole() {
        // An axis title is turned a quarter (plotters' y_desc): it stands taller than wide, and
        // none of it falls off the picture's left edge.
        let glyphs = ink_turned("allocated", FontTransform::Rotate270, (40, 250));
        let left = glyphs.iter().map(|g| g.0).min().unwrap();
        let right = glyphs.iter().map(|g| g.1).max().unwrap();
        let top = glyphs.iter().map(|g| g.2).min().unwrap();
        let bottom = glyphs.iter().map(|g| g.3).max().unwrap();
        assert!(bottom - top > 3 * (right - left), "{glyphs:?}");
        assert!(left > 0, "{glyphs:?}");
    }
}
