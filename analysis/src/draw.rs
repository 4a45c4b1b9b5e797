//! Renders figures to PNG with plotters and the bundled DejaVu font (no system fonts).

use std::path::Path;
use std::sync::Once;

use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::chart::{Axis, Figure, Line, Panel, Scale};
use crate::comparison::{IntervalFigure, IntervalPanel, IntervalRow};

/// Width of every picture, in pixels.
pub const WIDTH_PX: u32 = 1600;
/// Height of one time-series panel.
pub const PANEL_HEIGHT_PX: u32 = 380;
const LINE_HEIGHT_PX: u32 = 30;
const FONT: &str = "sans-serif";

#[derive(Debug, thiserror::Error)]
#[error("{path}: drawing failed: {message}")]
pub struct DrawError {
    path: String,
    message: String,
}

type Result<T> = std::result::Result<T, String>;

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are the crate's own font files, so registering cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

fn rgb(c: (u8, u8, u8)) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// The header as drawn: the first line as a title, the rest as text, a warning in red,
/// each broken into as many lines as the picture's width needs.
fn header_lines(header: &[String], warning: Option<&str>) -> Vec<(String, TextStyle<'static>)> {
    register_fonts();
    let title = (FONT, 24).into_font().style(FontStyle::Bold).color(&BLACK);
    let text = (FONT, 18).into_font().color(&BLACK);
    let red = (FONT, 22)
        .into_font()
        .style(FontStyle::Bold)
        .color(&RGBColor(200, 0, 0));
    let styled = header
        .iter()
        .enumerate()
        .map(|(i, line)| (line.as_str(), if i == 0 { &title } else { &text }))
        .chain(warning.map(|w| (w, &red)));
    styled
        .flat_map(|(line, style)| {
            wrap(line, WIDTH_PX - 40, |s| {
                style.font.box_size(s).map_or(u32::MAX, |(w, _)| w)
            })
            .into_iter()
            .map(|l| (l, style.clone()))
        })
        .collect()
}

fn header_height(lines: &[(String, TextStyle)]) -> u32 {
    lines.len() as u32 * LINE_HEIGHT_PX + 20
}

/// Breaks text into lines no wider than `max_px`, after a space, comma, semicolon or
/// underscore where there is one (long lab labels have no spaces), else anywhere; never
/// between a number and its unit.
fn wrap(text: &str, max_px: u32, width_px: impl Fn(&str) -> u32) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    for piece in text.split_inclusive([' ', ',', ';', '_']) {
        let after_number = pieces.last().is_some_and(|last| {
            let mut tail = last.chars().rev();
            tail.next() == Some(' ') && tail.next().is_some_and(|c| c.is_ascii_digit())
        });
        match pieces.last_mut() {
            Some(last) if after_number && piece.starts_with(char::is_alphabetic) => {
                last.push_str(piece)
            }
            _ => pieces.push(piece.to_string()),
        }
    }
    let mut lines = Vec::new();
    let mut line = String::new();
    for piece in &pieces {
        let candidate = format!("{line}{piece}");
        if line.is_empty() || width_px(candidate.trim_end()) <= max_px {
            line = candidate;
        } else {
            lines.push(line.trim_end().to_string());
            line = piece.to_string();
        }
        // A piece wider than a whole line is cut where the line is full.
        while width_px(line.trim_end()) > max_px {
            let mut head = String::new();
            for c in line.chars() {
                head.push(c);
                if width_px(&head) > max_px {
                    head.pop();
                    break;
                }
            }
            if head.is_empty() {
                break;
            }
            line = line[head.len()..].to_string();
            lines.push(head);
        }
    }
    lines.push(line.trim_end().to_string());
    lines
}

/// The size a figure is drawn at: full width, a header, then its panels stacked.
pub fn figure_size(figure: &Figure) -> (u32, u32) {
    (
        WIDTH_PX,
        header_height(&header_lines(&figure.header, figure.warning.as_deref()))
            + figure.panels.len() as u32 * PANEL_HEIGHT_PX,
    )
}

pub fn interval_figure_size(figure: &IntervalFigure) -> (u32, u32) {
    let rows = figure.panels.first().map_or(1, |p| p.rows.len()) as u32;
    (
        WIDTH_PX,
        header_height(&header_lines(&figure.header, None))
            + figure.panels.len() as u32 * interval_panel_height(rows),
    )
}

fn interval_panel_height(rows: u32) -> u32 {
    100 + rows.max(2) * 36
}

/// Writes a figure of time-series panels to `path`.
pub fn draw_figure(figure: &Figure, path: &Path) -> std::result::Result<(), DrawError> {
    render(path, figure_size(figure), |root| {
        let header = header_lines(&figure.header, figure.warning.as_deref());
        let (head, body) = root.split_vertically(header_height(&header));
        draw_header(&head, &header)?;
        let areas = body.split_evenly((figure.panels.len().max(1), 1));
        for (panel, area) in figure.panels.iter().zip(&areas) {
            draw_panel(area, panel)?;
        }
        Ok(())
    })
}

/// Writes a figure of interval panels, one to a row.
pub fn draw_interval_figure(
    figure: &IntervalFigure,
    path: &Path,
) -> std::result::Result<(), DrawError> {
    render(path, interval_figure_size(figure), |root| {
        let header = header_lines(&figure.header, None);
        let (head, body) = root.split_vertically(header_height(&header));
        draw_header(&head, &header)?;
        let areas = body.split_evenly((figure.panels.len().max(1), 1));
        for (panel, area) in figure.panels.iter().zip(&areas) {
            draw_intervals(area, panel)?;
        }
        Ok(())
    })
}

fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
) -> std::result::Result<(), DrawError> {
    register_fonts();
    let fail = |message: String| DrawError {
        path: path.display().to_string(),
        message,
    };
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    draw(&root).map_err(fail)?;
    root.present().map_err(|e| fail(e.to_string()))
}

fn draw_header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[(String, TextStyle)],
) -> Result<()> {
    for (i, (line, style)) in lines.iter().enumerate() {
        let y = 12 + i as i32 * LINE_HEIGHT_PX as i32;
        area.draw_text(line, style, (20, y))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The top of an axis: room above the highest value for the legend (which sits in the top
/// left corner, one row per entry), never an empty range.
fn axis_top(axis: &Axis, legend_rows: usize) -> f64 {
    let max = axis.max();
    if max > 0.0 {
        max * (1.1 + 0.085 * legend_rows as f64)
    } else {
        1.0
    }
}

/// A log axis's range: from a little below the smallest value to the same share of room
/// above the highest as `axis_top` leaves, in decades instead of units.
fn log_range(axis: &Axis, legend_rows: usize) -> (f64, f64) {
    let max = axis.max();
    let Some(min) = axis.min_positive().filter(|_| max > 0.0) else {
        return (0.1, 1.0);
    };
    let min = min.min(max);
    let decades = (max / min).log10().max(1.0);
    let bottom = min / 10f64.powf(0.05 * decades);
    (
        bottom,
        max * 10f64.powf(decades * (0.1 + 0.085 * legend_rows as f64)),
    )
}

/// Tick labels with as many decimals as the axis needs.
fn tick(value: f64, top: f64) -> String {
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

fn legend_rows(panel: &Panel) -> usize {
    [Some(&panel.left), panel.right.as_ref()]
        .into_iter()
        .flatten()
        .map(|a| a.lines.len() + a.bands.len())
        .sum::<usize>()
        + usize::from(!panel.shade.is_empty())
}

/// The panel's frame on `area`, with its left axis linear or log as it asks.
fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (x0, x1) = panel.x_range;
    let legend_rows = legend_rows(panel);
    let right_top = panel
        .right
        .as_ref()
        .map_or(1.0, |axis| axis_top(axis, legend_rows));
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.title, (FONT, 19).into_font().style(FontStyle::Bold))
        .margin(12)
        .margin_right(20)
        .x_label_area_size(46)
        .y_label_area_size(90)
        // Always, so stacked panels share the same time axis pixel for pixel.
        .right_y_label_area_size(90);
    match panel.left.scale {
        Scale::Linear => {
            let top = axis_top(&panel.left, legend_rows);
            let chart = builder
                .build_cartesian_2d(x0..x1, 0.0..top)
                .map_err(err)?
                .set_secondary_coord(x0..x1, 0.0..right_top);
            fill_panel(chart, panel, (0.0, top, right_top), &|y| tick(*y, top))
        }
        Scale::Log => {
            let (bottom, top) = log_range(&panel.left, legend_rows);
            let chart = builder
                .build_cartesian_2d(x0..x1, (bottom..top).log_scale())
                .map_err(err)?
                .set_secondary_coord(x0..x1, 0.0..right_top);
            fill_panel(chart, panel, (bottom, top, right_top), &|y| log_tick(*y))
        }
    }
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
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
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
        .map_err(err)?;
    if let Some(right) = &panel.right {
        chart
            .configure_secondary_axes()
            .y_desc(right.label.as_str())
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .y_label_formatter(&|y| tick(*y, right_top))
            .draw()
            .map_err(err)?;
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
            .map_err(err)?
            .label("slow phase")
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], shade.filled()));
    }
    for (axis, secondary) in [(Some(&panel.left), false), (panel.right.as_ref(), true)] {
        if let Some(axis) = axis {
            draw_axis_series(&mut chart, axis, secondary)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .margin(8)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()
        .map_err(err)
}

/// An axis's bands, then its lines (with their markers and intervals), on the primary or
/// the secondary coordinates.
fn draw_axis_series<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Dual<'_, DB, Y>,
    axis: &Axis,
    secondary: bool,
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
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
        let anno = if secondary {
            chart.draw_secondary_series(polygons)
        } else {
            chart.draw_series(polygons)
        }
        .map_err(err)?;
        anno.label(band.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], color.filled()));
    }
    for line in &axis.lines {
        let color = rgb(line.color);
        let style = color.stroke_width(2);
        // One series per unbroken stretch; only the first is named in the legend.
        for (i, part) in unbroken(&line.points, |p| p.1.is_nan()).enumerate() {
            let points = || part.iter().copied();
            let anno = match (line.dashed, secondary) {
                (true, false) => chart.draw_series(DashedLineSeries::new(points(), 8, 5, style)),
                (true, true) => {
                    chart.draw_secondary_series(DashedLineSeries::new(points(), 8, 5, style))
                }
                (false, false) => chart.draw_series(LineSeries::new(points(), style)),
                (false, true) => chart.draw_secondary_series(LineSeries::new(points(), style)),
            }
            .map_err(err)?;
            if i == 0 {
                anno.label(line.label.as_str()).legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(3))
                });
            }
        }
        draw_marks(chart, line)?;
    }
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
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
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
            .map_err(err)?;
    }
    chart
        .draw_series(line.intervals.iter().map(|&(x, lo, hi)| {
            ErrorBar::new_vertical(x, lo, (lo + hi) / 2.0, hi, color.stroke_width(2), 10)
        }))
        .map_err(err)?;
    Ok(())
}

/// One row per configuration: its runs as dots, the mean as a bar, the 95% interval as a
/// line with end caps, and the estimate and verdict as text on the right.
fn draw_intervals<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &IntervalPanel,
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let n = panel.rows.len();
    let max = panel
        .rows
        .iter()
        .flat_map(|r| r.points.iter().copied().chain(r.ci.map(|c| c.1)))
        .fold(0.0, f64::max);
    // The right part of the panel holds the words.
    let right = if max > 0.0 { max * 2.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 17).into_font().style(FontStyle::Bold))
        .margin(10)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(360)
        .build_cartesian_2d(0.0..right, -0.5..(n as f64 - 0.5))
        .map_err(err)?;
    let labels: Vec<String> = panel.rows.iter().map(|r| shorten(&r.label, 50)).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_x_mesh()
        .x_desc(panel.unit.as_str())
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .y_labels(n.max(1))
        .x_labels(8)
        .x_label_formatter(&|x| {
            if *x <= max * 1.05 {
                tick(*x, max)
            } else {
                String::new()
            }
        })
        .light_line_style(WHITE)
        .y_label_formatter(&|y| {
            let index = y.round();
            if (y - index).abs() > 0.01 || index < 0.0 {
                return String::new();
            }
            labels
                .get(n - 1 - index as usize)
                .cloned()
                .unwrap_or_default()
        })
        .draw()
        .map_err(err)?;
    let text_x = if max > 0.0 { max * 1.08 } else { 0.0 };
    for (i, row) in panel.rows.iter().enumerate() {
        draw_interval_row(&mut chart, row, (n - 1 - i) as f64, text_x)?;
    }
    Ok(())
}

/// One configuration's row at height `y`: mean bar, interval, runs, words.
fn draw_interval_row<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian>,
    row: &IntervalRow,
    y: f64,
    text_x: f64,
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let color = rgb(row.color);
    if let Some(mean) = row.mean {
        let style = color.mix(if row.baseline { 0.35 } else { 0.6 }).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y - 0.22), (mean, y + 0.22)],
                style,
            )))
            .map_err(err)?;
    }
    if let Some((lo, hi)) = row.ci {
        let mid = row.mean.unwrap_or((lo + hi) / 2.0);
        chart
            .draw_series(std::iter::once(ErrorBar::new_horizontal(
                y,
                lo,
                mid,
                hi,
                BLACK.stroke_width(2),
                14,
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(
            row.points
                .iter()
                .map(|&v| Circle::new((v, y), 5, color.filled().stroke_width(1))),
        )
        .map_err(err)?;
    let text_style =
        (FONT, 14)
            .into_font()
            .color(&BLACK)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Center,
            ));
    chart
        .draw_series(std::iter::once(Text::new(
            shorten(&row.text, 95),
            (text_x, y),
            text_style,
        )))
        .map_err(err)?;
    Ok(())
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut short: String = text.chars().take(max_chars - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_wrap_at_separators() {
        let chars = |s: &str| s.chars().count() as u32;
        let label = "100mbit_20ms_cubic_lowat-default_wmem-4096-16384-536870912";
        assert_eq!(
            wrap(label, 30, chars),
            vec![
                "100mbit_20ms_cubic_",
                "lowat-default_",
                "wmem-4096-16384-536870912"
            ]
        );
        assert_eq!(wrap("a short line", 30, chars), vec!["a short line"]);
        assert_eq!(
            wrap("one, two, three", 9, chars),
            vec!["one, two,", "three"]
        );
        assert_eq!(wrap("abcdefgh", 3, chars), vec!["abc", "def", "gh"]);
        assert_eq!(
            wrap("RTT 466.0 ms, 1 Gbit/s", 10, chars),
            vec!["RTT", "466.0 ms,", "1 Gbit/s"]
        );
    }
}
