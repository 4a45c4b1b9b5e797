//! Renders figures of time-series panels to PNG with plotters and the bundled DejaVu font
//! (no system fonts). Every line of text drawn is returned (`text_layout::DrawnText`), so
//! the manifest lists what a picture says; titles and headers wrap rather than run off.

use std::path::Path;

use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};
use oscil_rundir::safe_fs::SafeFsError;
use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::charts::chart::{Axis, Figure, Line, Panel, Scale, Weight};
use crate::charts::shared_scale::natural_range;
use crate::charts::text_layout::{self, fit, font, single, DrawnText, FONT};

/// Width of every picture, in pixels.
pub const WIDTH_PX: u32 = 1600;
/// Height of one time-series panel, its title included.
pub const PANEL_HEIGHT_PX: u32 = 380;
pub(crate) const LINE_HEIGHT_PX: u32 = 30;
const TITLE_LINE_PX: u32 = 24;
/// Room beside a plot for the axis labels on either side.
const Y_LABEL_AREA_PX: u32 = 90;
/// Room under the time axis for its ticks and its name.
const X_LABEL_AREA_PX: u32 = 46;
/// Height of one legend entry: the legend sits under the plot, never on its data.
const LEGEND_ROW_PX: u32 = 18;

/// A picture that could not be drawn (which file, and what the drawing step said) or
/// written.
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    #[error("{path}: drawing failed: {source}")]
    Plot { path: String, source: PlotError },
    #[error(transparent)]
    Write(#[from] SafeFsError),
}

/// What plotters said when a drawing step failed. Its error type depends on the backend,
/// so only its words are kept.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlotError(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for PlotError {
    fn from(error: DrawingAreaErrorKind<E>) -> Self {
        PlotError(error.to_string())
    }
}

pub(crate) type Result<T> = std::result::Result<T, PlotError>;

pub(crate) fn rgb(c: (u8, u8, u8)) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// The header as drawn: the first line as a title, the rest as text, a warning in red,
/// each broken into as many lines as the picture's width needs.
pub(crate) fn header_lines(
    header: &[String],
    warning: Option<&str>,
) -> Vec<(DrawnText, TextStyle<'static>)> {
    let red = font(22, true).color(&RGBColor(200, 0, 0));
    let styled = header
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let emphasis = if i == 0 {
                Emphasis::Title
            } else {
                Emphasis::Text
            };
            (line.as_str(), emphasis.style())
        })
        .chain(warning.map(|w| (w, red)));
    styled
        .flat_map(|(line, style)| {
            fit(line, &style, WIDTH_PX - 40)
                .into_iter()
                .map(move |l| (l, style.clone()))
        })
        .collect()
}

/// How a paragraph of a page of text is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emphasis {
    Title,
    Heading,
    Text,
    /// In red: what makes the rest unsafe to read as it stands.
    Warning,
}

impl Emphasis {
    fn style(self) -> TextStyle<'static> {
        match self {
            Emphasis::Title => font(24, true),
            Emphasis::Heading => font(20, true),
            Emphasis::Text => font(18, false),
            Emphasis::Warning => font(18, true).color(&RGBColor(200, 0, 0)),
        }
    }
}

/// A picture of text alone (the report's answer): each paragraph wrapped to the width;
/// returns every line drawn.
pub fn draw_text_page(
    paragraphs: &[(String, Emphasis)],
    path: &Path,
) -> std::result::Result<Vec<DrawnText>, DrawError> {
    let lines: Vec<(DrawnText, TextStyle)> = paragraphs
        .iter()
        .flat_map(|(text, emphasis)| {
            let style = emphasis.style();
            fit(text, &style, WIDTH_PX - 40)
                .into_iter()
                .map(move |l| (l, style.clone()))
        })
        .collect();
    render(path, (WIDTH_PX, header_height(&lines)), |root| {
        draw_header(root, &lines)
    })?;
    Ok(lines.into_iter().map(|(text, _)| text).collect())
}

pub(crate) fn header_height<T>(lines: &[T]) -> u32 {
    lines.len() as u32 * LINE_HEIGHT_PX + 20
}

/// A panel's title, wrapped to the panel's width.
fn title_lines(panel: &Panel) -> Vec<DrawnText> {
    fit(&panel.title, &font(19, true), WIDTH_PX - 60)
}

fn panel_height(panel: &Panel) -> u32 {
    PANEL_HEIGHT_PX
        + legend_height(panel)
        + (title_lines(panel).len() as u32).saturating_sub(1) * TITLE_LINE_PX
}

/// The size a figure is drawn at: full width, a header, then its panels stacked.
pub fn figure_size(figure: &Figure) -> (u32, u32) {
    (
        WIDTH_PX,
        header_height(&header_lines(&figure.header, figure.warning.as_deref()))
            + figure.panels.iter().map(panel_height).sum::<u32>(),
    )
}

/// Writes a figure of time-series panels to `path`; returns every line of text drawn.
pub fn draw_figure(figure: &Figure, path: &Path) -> std::result::Result<Vec<DrawnText>, DrawError> {
    let mut drawn = Vec::new();
    render(path, figure_size(figure), |root| {
        let header = header_lines(&figure.header, figure.warning.as_deref());
        let (head, mut body) = root.split_vertically(header_height(&header));
        draw_header(&head, &header)?;
        drawn.extend(header.into_iter().map(|(text, _)| text));
        for panel in &figure.panels {
            let (area, rest) = body.split_vertically(panel_height(panel));
            drawn.extend(draw_panel(&area, panel)?);
            body = rest;
        }
        Ok(())
    })?;
    Ok(drawn)
}

/// Draws a picture of `size` pixels into memory and writes it as a PNG into the report's
/// directory (checked again, written atomically): the drawing library never opens a path.
pub(crate) fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
) -> std::result::Result<(), DrawError> {
    text_layout::register_fonts();
    let fail = |source: PlotError| DrawError::Plot {
        path: path.display().to_string(),
        source,
    };
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.into()))?;
        draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(e.into()))?;
    }
    let mut png = Vec::new();
    PngEncoder::new(&mut png)
        .write_image(&pixels, size.0, size.1, ColorType::Rgb8)
        .map_err(|e| fail(PlotError(e.to_string())))?;
    Ok(oscil_rundir::safe_fs::write_trusted(path, &png, 0o644)?)
}

pub(crate) fn draw_header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[(DrawnText, TextStyle)],
) -> Result<()> {
    for (i, (line, style)) in lines.iter().enumerate() {
        let y = 12 + i as i32 * LINE_HEIGHT_PX as i32;
        area.draw_text(&line.text, style, (20, y))?;
    }
    Ok(())
}

/// Tick labels with as many decimals as the axis needs.
pub(crate) fn tick(value: f64, top: f64) -> String {
    if top >= 20.0 {
        format!("{value:.0}")
    } else if top >= 2.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Tick labels on a log axis, where each label needs its own decimals: 0.05, 2, 300.
fn log_tick(value: f64) -> String {
    let decimals = (-value.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{value:.decimals$}")
}

type Cartesian<Y = RangedCoordf64> = Cartesian2d<RangedCoordf64, Y>;
type Dual<'a, DB, Y = RangedCoordf64> = DualCoordChartContext<'a, DB, Cartesian<Y>, Cartesian>;

/// How a legend entry shows its series.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    /// A shaded range or phase.
    Block(RGBAColor),
    /// A line, dashed or not.
    Stroke(RGBAColor, bool),
    /// Dots: filled, or hollow for lower bounds.
    Dot(RGBAColor, bool),
    /// Triangles: values clipped to the axis's top.
    Triangle(RGBAColor),
}

/// The panel's legend: the shaded phases, then every named band and line of both axes, each
/// shown as it is drawn.
fn legend_entries(panel: &Panel) -> Vec<(&str, Swatch)> {
    let mut entries = Vec::new();
    if !panel.shade.is_empty() {
        entries.push((
            "slow phase",
            Swatch::Block(RGBColor(200, 215, 240).mix(0.45)),
        ));
    }
    for axis in [Some(&panel.left), panel.right.as_ref()]
        .into_iter()
        .flatten()
    {
        for band in axis.bands.iter().filter(|b| !b.label.is_empty()) {
            entries.push((
                band.label.as_str(),
                Swatch::Block(rgb(band.color).mix(0.22)),
            ));
        }
        for line in axis.lines.iter().filter(|l| !l.label.is_empty()) {
            let color = rgb(line.color).mix(1.0);
            let swatch = match line.weight {
                Weight::Points => Swatch::Dot(color, true),
                Weight::Hollow => Swatch::Dot(color, false),
                Weight::Clipped => Swatch::Triangle(color),
                _ => Swatch::Stroke(color, line.dashed),
            };
            entries.push((line.label.as_str(), swatch));
        }
    }
    entries
}

/// Entries in a panel's legend: every named line and band, and the shaded phases.
pub fn legend_rows(panel: &Panel) -> usize {
    legend_entries(panel).len()
}

/// The legend on `area`, under the plot: one entry a row, never on the data.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<()> {
    let style = font(14, false);
    let x = Y_LABEL_AREA_PX as i32 + 12;
    for (i, (label, swatch)) in legend_entries(panel).into_iter().enumerate() {
        let y = 8 + i as i32 * LEGEND_ROW_PX as i32 + LEGEND_ROW_PX as i32 / 2;
        match swatch {
            Swatch::Block(c) => {
                area.draw(&Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()))
            }
            Swatch::Stroke(c, false) => {
                area.draw(&PathElement::new([(x, y), (x + 18, y)], c.stroke_width(3)))
            }
            Swatch::Stroke(c, true) => area
                .draw(&PathElement::new([(x, y), (x + 7, y)], c.stroke_width(3)))
                .and_then(|_| {
                    area.draw(&PathElement::new(
                        [(x + 11, y), (x + 18, y)],
                        c.stroke_width(3),
                    ))
                }),
            Swatch::Dot(c, true) => area.draw(&Circle::new((x + 9, y), 3, c.filled())),
            Swatch::Dot(c, false) => area.draw(&Circle::new((x + 9, y), 4, c.stroke_width(2))),
            Swatch::Triangle(c) => area.draw(&TriangleMarker::new((x + 9, y), 6, c.filled())),
        }
        .map_err(PlotError::from)?;
        area.draw_text(label, &style, (x + 28, y - 8))
            .map_err(PlotError::from)?;
    }
    Ok(())
}

/// The room a panel's legend takes under its plot (none without entries).
fn legend_height(panel: &Panel) -> u32 {
    match legend_rows(panel) as u32 {
        0 => 0,
        // A multiple of 6 like every height of a picture, with a row of room below.
        rows => (rows + 1) * LEGEND_ROW_PX,
    }
}

/// The texts a panel holds besides its title: its legend entries and axis names.
fn panel_texts(panel: &Panel, height_px: u32) -> Vec<DrawnText> {
    let legend = font(14, false);
    let axis_name = font(16, false);
    let plot_width = WIDTH_PX - 2 * Y_LABEL_AREA_PX - 40;
    let plot_height = height_px.saturating_sub(X_LABEL_AREA_PX + legend_height(panel) + 24);
    let mut texts = vec![single(&panel.x_label, &axis_name, plot_width)];
    for axis in [Some(&panel.left), panel.right.as_ref()]
        .into_iter()
        .flatten()
    {
        texts.push(single(&axis.label, &axis_name, plot_height));
        let named = axis
            .lines
            .iter()
            .map(|l| &l.label)
            .chain(axis.bands.iter().map(|b| &b.label));
        texts.extend(
            named
                .filter(|l| !l.is_empty())
                .map(|l| single(l, &legend, plot_width - 40)),
        );
    }
    if !panel.shade.is_empty() {
        texts.push(single("slow phase", &legend, plot_width - 40));
    }
    texts
}

/// The panel on `area`: its wrapped title, then its frame with the left axis linear or
/// log as it asks. Returns the texts drawn.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> Result<Vec<DrawnText>> {
    let title = title_lines(panel);
    let title_style = font(19, true);
    let (title_area, chart_area) = area.split_vertically(title.len() as u32 * TITLE_LINE_PX + 10);
    for (i, line) in title.iter().enumerate() {
        title_area
            .draw_text(
                &line.text,
                &title_style,
                (30, 8 + i as i32 * TITLE_LINE_PX as i32),
            )
            .map_err(PlotError::from)?;
    }
    let mut drawn = title;
    drawn.extend(panel_texts(panel, chart_area.dim_in_pixel().1));
    let (x0, x1) = panel.x_range;
    let right_top = panel
        .right
        .as_ref()
        .map_or(1.0, |axis| natural_range(axis).1);
    let (plot_area, legend_area) =
        chart_area.split_vertically(chart_area.dim_in_pixel().1 - legend_height(panel));
    draw_legend(&legend_area, panel)?;
    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .margin(12)
        .margin_top(4)
        .margin_right(20)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(Y_LABEL_AREA_PX)
        // Always, so stacked panels share the same time axis pixel for pixel.
        .right_y_label_area_size(Y_LABEL_AREA_PX);
    match panel.left.scale {
        Scale::Linear => {
            let top = natural_range(&panel.left).1;
            let chart = builder
                .build_cartesian_2d(x0..x1, 0.0..top)
                .map_err(PlotError::from)?
                .set_secondary_coord(x0..x1, 0.0..right_top);
            fill_panel(chart, panel, (0.0, top, right_top), &|y| tick(*y, top))?;
        }
        Scale::Log => {
            let (bottom, top) = natural_range(&panel.left);
            let chart = builder
                .build_cartesian_2d(x0..x1, (bottom..top).log_scale())
                .map_err(PlotError::from)?
                .set_secondary_coord(x0..x1, 0.0..right_top);
            fill_panel(chart, panel, (bottom, top, right_top), &|y| log_tick(*y))?;
        }
    }
    Ok(drawn)
}

/// The mesh, the shaded slow phases, every series and the legend, on a frame whose left
/// axis runs from `bottom` to `top` (the right from 0 to `right_top`).
fn fill_panel<'a, DB, Y>(
    mut chart: Dual<'a, DB, Y>,
    panel: &Panel,
    (bottom, top, right_top): (f64, f64, f64),
    y_tick: &dyn Fn(&f64) -> String,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (x0, x1) = panel.x_range;
    chart
        .configure_mesh()
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.left.label.as_str())
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .x_label_formatter(&|x| tick(*x, x1 - x0))
        .y_label_formatter(y_tick)
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(PlotError::from)?;
    if let Some(right) = &panel.right {
        chart
            .configure_secondary_axes()
            .y_desc(right.label.as_str())
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .y_label_formatter(&|y| tick(*y, right_top))
            .draw()
            .map_err(PlotError::from)?;
    }
    let shade = RGBColor(200, 215, 240).mix(0.45);
    if !panel.shade.is_empty() {
        chart
            .draw_series(
                panel
                    .shade
                    .iter()
                    .map(|&(a, b)| Rectangle::new([(a, bottom), (b, top)], shade.filled())),
            )
            .map_err(PlotError::from)?;
    }
    for (axis, secondary) in [(Some(&panel.left), false), (panel.right.as_ref(), true)] {
        if let Some(axis) = axis {
            draw_axis_series(&mut chart, axis, secondary)?;
        }
    }
    Ok(())
}

/// An axis's bands, then its lines (with their markers and intervals), on the primary or
/// the secondary coordinates.
fn draw_axis_series<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    axis: &Axis,
    secondary: bool,
) -> Result<()> {
    for band in &axis.bands {
        let color = rgb(band.color).mix(0.22);
        let polygons = unbroken(&band.points, |p| p.1.is_nan() || p.2.is_nan()).map(|part| {
            let outline: Vec<(f64, f64)> = part
                .iter()
                .map(|p| (p.0, p.2))
                .chain(part.iter().rev().map(|p| (p.0, p.1)))
                .collect();
            Polygon::new(outline, color.filled())
        });
        if secondary {
            chart.draw_secondary_series(polygons)
        } else {
            chart.draw_series(polygons)
        }
        .map_err(PlotError::from)?;
    }
    for line in &axis.lines {
        match line.weight {
            Weight::Points | Weight::Hollow => draw_points(chart, line, secondary)?,
            Weight::Clipped => draw_clipped(chart, line, secondary)?,
            _ => draw_line(chart, line, secondary)?,
        }
        draw_marks(chart, line)?;
    }
    Ok(())
}

/// A line, broken at its gaps; only its first stretch is named in the legend.
fn draw_line<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    line: &Line,
    secondary: bool,
) -> Result<()> {
    let (color, width) = match line.weight {
        Weight::Faint => (rgb(line.color).mix(0.3), 1),
        Weight::Bold => (rgb(line.color).mix(1.0), 3),
        _ => (rgb(line.color).mix(1.0), 2),
    };
    let style = color.stroke_width(width);
    for part in unbroken(&line.points, |p| p.1.is_nan()) {
        let points = || part.iter().copied();
        match (line.dashed, secondary) {
            (true, false) => chart.draw_series(DashedLineSeries::new(points(), 8, 5, style)),
            (true, true) => {
                chart.draw_secondary_series(DashedLineSeries::new(points(), 8, 5, style))
            }
            (false, false) => chart.draw_series(LineSeries::new(points(), style)),
            (false, true) => chart.draw_secondary_series(LineSeries::new(points(), style)),
        }
        .map_err(PlotError::from)?;
    }
    Ok(())
}

/// A sparse series as filled dots, a series of lower bounds as hollow ones: no line
/// joins them, so nothing is drawn where nothing was measured.
fn draw_points<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    line: &Line,
    secondary: bool,
) -> Result<()> {
    let color = rgb(line.color);
    let style = match line.weight {
        Weight::Hollow => color.stroke_width(2),
        _ => color.filled(),
    };
    let radius = if line.weight == Weight::Hollow { 4 } else { 3 };
    let dots = line
        .points
        .iter()
        .filter(|p| p.1.is_finite())
        .map(move |&p| Circle::new(p, radius, style));
    if secondary {
        chart.draw_secondary_series(dots)
    } else {
        chart.draw_series(dots)
    }
    .map_err(PlotError::from)?;
    Ok(())
}

/// Values clipped to the axis's top, as triangles pointing up at the top.
fn draw_clipped<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    line: &Line,
    secondary: bool,
) -> Result<()> {
    let style = rgb(line.color).filled();
    let marks = line
        .points
        .iter()
        .map(move |&p| TriangleMarker::new(p, 6, style));
    if secondary {
        chart.draw_secondary_series(marks)
    } else {
        chart.draw_series(marks)
    }
    .map_err(PlotError::from)?;
    Ok(())
}

/// The stretches of `points` between gaps (points for which `is_gap`): a hole in the
/// record is drawn as a hole.
fn unbroken<P>(points: &[P], is_gap: impl Fn(&P) -> bool) -> impl Iterator<Item = &[P]> {
    points
        .split(move |p| is_gap(p))
        .filter(|part| !part.is_empty())
}

/// A line's dots and vertical intervals (primary coordinates: charts across runs).
fn draw_marks<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    line: &Line,
) -> Result<()> {
    let color = rgb(line.color);
    if line.markers {
        chart
            .draw_series(
                line.points
                    .iter()
                    // A gap is a point without a value: no dot (it would sit on the axis).
                    .filter(|p| p.1.is_finite())
                    .map(|&p| Circle::new(p, 5, color.filled())),
            )
            .map_err(PlotError::from)?;
    }
    chart
        .draw_series(line.intervals.iter().map(|&(x, lo, hi)| {
            ErrorBar::new_vertical(x, lo, (lo + hi) / 2.0, hi, color.stroke_width(2), 10)
        }))
        .map_err(PlotError::from)?;
    Ok(())
}
