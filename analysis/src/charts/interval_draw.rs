//! Renders `comparison.png`: one panel per figure, one row per configuration with its runs
//! as dots, the mean as a bar, the 95% interval, and the estimate and verdict in words
//! beside it. Labels and words wrap to as many lines as they need; a row is as tall as
//! its longest text, so nothing is cut.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::charts::comparison::{IntervalFigure, IntervalPanel, IntervalRow};
use crate::charts::draw::{
    self, header_height, header_lines, render, rgb, tick, DrawError, PlotError, WIDTH_PX,
};
use crate::charts::text_layout::{fit, font, single, DrawnText, FONT};

const LABEL_COLUMN_PX: u32 = 330;
const PLOT_COLUMN_PX: u32 = 560;
const TEXT_LINE_PX: u32 = 18;
const TITLE_LINE_PX: u32 = 22;
const AXIS_PX: u32 = 40;

/// A panel's text broken into lines, and the heights that follow from it.
struct PanelLayout {
    title: Vec<DrawnText>,
    labels: Vec<Vec<DrawnText>>,
    words: Vec<Vec<DrawnText>>,
    row_px: u32,
}

impl PanelLayout {
    fn of(panel: &IntervalPanel) -> PanelLayout {
        let text = font(14, false);
        let text_room = WIDTH_PX - LABEL_COLUMN_PX - PLOT_COLUMN_PX - 40;
        let labels: Vec<Vec<DrawnText>> = panel
            .rows
            .iter()
            .map(|r| fit(&r.label, &text, LABEL_COLUMN_PX - 30))
            .collect();
        let words: Vec<Vec<DrawnText>> = panel
            .rows
            .iter()
            .map(|r| fit(&r.text, &text, text_room))
            .collect();
        let most_lines = labels.iter().chain(&words).map(Vec::len).max().unwrap_or(1);
        PanelLayout {
            title: fit(&panel.title, &font(17, true), WIDTH_PX - 40),
            labels,
            words,
            row_px: (most_lines as u32 * TEXT_LINE_PX + 14).max(36),
        }
    }

    fn title_px(&self) -> u32 {
        self.title.len() as u32 * TITLE_LINE_PX + 10
    }

    fn height_px(&self) -> u32 {
        self.title_px() + self.labels.len().max(1) as u32 * self.row_px + AXIS_PX + 16
    }
}

pub fn interval_figure_size(figure: &IntervalFigure) -> (u32, u32) {
    let panels: u32 = figure
        .panels
        .iter()
        .map(|p| PanelLayout::of(p).height_px())
        .sum();
    (
        WIDTH_PX,
        header_height(&header_lines(&figure.header, None)) + panels,
    )
}

/// Writes a figure of interval panels, one under the other; returns every text drawn.
pub fn draw_interval_figure(
    figure: &IntervalFigure,
    path: &Path,
) -> Result<Vec<DrawnText>, DrawError> {
    let mut drawn = Vec::new();
    render(path, interval_figure_size(figure), |root| {
        let header = header_lines(&figure.header, None);
        let (head, mut body) = root.split_vertically(header_height(&header));
        draw::draw_header(&head, &header)?;
        drawn.extend(header.into_iter().map(|(text, _)| text));
        for panel in &figure.panels {
            let layout = PanelLayout::of(panel);
            let (area, rest) = body.split_vertically(layout.height_px());
            draw_intervals(&area, panel, &layout)?;
            drawn.extend(layout.title);
            drawn.push(single(&panel.unit, &font(15, false), PLOT_COLUMN_PX));
            for (label, words) in layout.labels.into_iter().zip(layout.words) {
                drawn.extend(label);
                drawn.extend(words);
            }
            body = rest;
        }
        Ok(())
    })?;
    Ok(drawn)
}

/// Lines of text centred on `y` (pixels within `area`), starting at `x`.
fn draw_block<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[DrawnText],
    x: i32,
    y: i32,
) -> draw::Result<()> {
    let style = font(14, false);
    let top = y - (lines.len() as i32 * TEXT_LINE_PX as i32) / 2;
    for (i, line) in lines.iter().enumerate() {
        area.draw_text(
            &line.text,
            &style,
            (x, top + i as i32 * TEXT_LINE_PX as i32),
        )?;
    }
    Ok(())
}

/// One panel: the title, then per row the label on the left, the dots, bar and interval
/// in the middle, and the words on the right.
fn draw_intervals<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &IntervalPanel,
    layout: &PanelLayout,
) -> draw::Result<()> {
    let (title_area, rows_area) = area.split_vertically(layout.title_px());
    let title_style = font(17, true);
    for (i, line) in layout.title.iter().enumerate() {
        title_area
            .draw_text(
                &line.text,
                &title_style,
                (20, 6 + i as i32 * TITLE_LINE_PX as i32),
            )
            .map_err(PlotError::from)?;
    }
    let (label_area, rest) = rows_area.split_horizontally(LABEL_COLUMN_PX);
    let (plot_area, text_area) = rest.split_horizontally(PLOT_COLUMN_PX);
    let n = panel.rows.len();
    let max = panel
        .rows
        .iter()
        .flat_map(|r| r.points.iter().copied().chain(r.ci.map(|c| c.1)))
        .fold(0.0, f64::max);
    let right = axis_end(max, &panel.unit);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin_right(10)
        .x_label_area_size(AXIS_PX)
        .build_cartesian_2d(0.0..right, -0.5..(n.max(1) as f64 - 0.5))
        .map_err(PlotError::from)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(panel.unit.as_str())
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_labels(6)
        .x_label_formatter(&|x| tick(*x, right))
        .light_line_style(WHITE)
        .draw()
        .map_err(PlotError::from)?;
    for (i, row) in panel.rows.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        draw_interval_row(&mut chart, row, y)?;
        let centre = (layout.row_px * i as u32 + layout.row_px / 2) as i32;
        draw_block(&label_area, &layout.labels[i], 20, centre)?;
        draw_block(&text_area, &layout.words[i], 10, centre)?;
    }
    Ok(())
}

type Cartesian =
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>;

/// One configuration's row at height `y`: mean bar, interval, runs.
fn draw_interval_row<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian>,
    row: &IntervalRow,
    y: f64,
) -> draw::Result<()> {
    let color = rgb(row.color);
    if let Some(mean) = row.mean {
        let style = color.mix(if row.baseline { 0.35 } else { 0.6 }).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y - 0.22), (mean, y + 0.22)],
                style,
            )))
            .map_err(PlotError::from)?;
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
            .map_err(PlotError::from)?;
    }
    chart
        .draw_series(
            row.points
                .iter()
                .map(|&v| Circle::new((v, y), 5, color.filled().stroke_width(1))),
        )
        .map_err(PlotError::from)?;
    Ok(())
}

/// Where a panel's axis ends: a little past its largest value, so the dot is not on the
/// edge; a share never past 100%, and a share that is 0 everywhere on the 0-100% scale
/// it is read on (not 0 to 1 labelled %).
fn axis_end(max: f64, unit: &str) -> f64 {
    match (unit, max > 0.0) {
        ("%", true) => (max * 1.08).min(100.0),
        ("%", false) => 100.0,
        (_, true) => max * 1.08,
        (_, false) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::axis_end;

    #[test]
    fn a_share_axis_ends_at_100_percent_at_most() {
        assert_eq!(axis_end(0.0, "%"), 100.0);
        assert_eq!(axis_end(99.0, "%"), 100.0);
        assert!(axis_end(40.0, "%") > 40.0 && axis_end(40.0, "%") < 50.0);
        assert!(axis_end(900.0, "ms") > 900.0);
    }
}
