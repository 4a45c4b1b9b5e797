//! What one picture shows, taken as it is drawn: its panels (what each answers, its
//! legend, the configurations in it) and every line of text with its width and room. The
//! write stage lists these in `report.json`.

use crate::charts::chart::Figure;
use crate::charts::comparison::IntervalFigure;
use crate::charts::shared_scale::natural_range;
use crate::charts::text_layout::DrawnText;

/// What one picture shows.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureRecord {
    pub file: String,
    /// `run`, `bbr`, `comparison`, `path`, `overlay`, `cycles`, `headline`.
    pub kind: &'static str,
    pub panels: Vec<PanelRecord>,
    pub texts: Vec<DrawnText>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PanelRecord {
    pub key: String,
    pub title: String,
    /// The names in its legend (or its rows, in the comparison).
    pub keys: Vec<String>,
    pub configurations: Vec<String>,
    /// The left axis's name and the range drawn, in its unit (none in the comparison).
    pub y_axis: Option<(String, (f64, f64))>,
    /// The largest value drawn against the left axis, clipped ones at the top, so a check
    /// can hold the range against what it shows.
    pub largest_drawn: Option<f64>,
}

impl FigureRecord {
    /// A figure of time-series panels; a panel that names no configuration of its own
    /// holds `configurations`.
    pub fn of_figure(
        file: &str,
        kind: &'static str,
        figure: &Figure,
        configurations: &[String],
        texts: Vec<DrawnText>,
    ) -> FigureRecord {
        let panels = figure
            .panels
            .iter()
            .map(|p| {
                let axes = [Some(&p.left), p.right.as_ref()];
                let keys = axes
                    .into_iter()
                    .flatten()
                    .flat_map(|a| {
                        let lines = a.lines.iter().map(|l| l.label.clone());
                        lines.chain(a.bands.iter().map(|b| b.label.clone()))
                    })
                    .filter(|label| !label.is_empty())
                    .collect();
                let range = natural_range(&p.left);
                PanelRecord {
                    key: p.key.clone(),
                    title: p.title.clone(),
                    y_axis: Some((p.left.label.clone(), range)),
                    largest_drawn: Some(p.left.max()),
                    keys,
                    configurations: if p.configurations.is_empty() {
                        configurations.to_vec()
                    } else {
                        p.configurations.clone()
                    },
                }
            })
            .collect();
        FigureRecord {
            file: file.into(),
            kind,
            panels,
            texts,
        }
    }

    /// `comparison.png`: one panel per figure, one row per configuration.
    pub fn of_intervals(file: &str, figure: &IntervalFigure, texts: Vec<DrawnText>) -> Self {
        let panels = figure
            .panels
            .iter()
            .map(|p| {
                let rows: Vec<String> = p.rows.iter().map(|r| r.label.clone()).collect();
                PanelRecord {
                    key: p.key.clone(),
                    title: p.title.clone(),
                    keys: vec![p.key.clone()],
                    configurations: rows,
                    y_axis: None,
                    largest_drawn: None,
                }
            })
            .collect();
        FigureRecord {
            file: file.into(),
            kind: "comparison",
            panels,
            texts,
        }
    }
}
