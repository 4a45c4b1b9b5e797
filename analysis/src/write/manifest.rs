//! `report.json`: every file the report wrote, and for each picture its panels (what each
//! answers, its legend, the configurations drawn in it) and every line of text drawn with
//! its width and the room it had, so a test or a user's script can check what a picture
//! shows, and that no text was cut, without reading pixels.

use serde_json::{json, Value};

use crate::charts::chart::Figure;
use crate::charts::comparison::IntervalFigure;
use crate::charts::shared_scale::natural_range;
use crate::charts::text_layout::DrawnText;

/// What one picture shows.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureRecord {
    pub file: String,
    /// `run`, `comparison`, `path`, `overlay`, `cycles`, `headline`.
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

    fn json(&self) -> Value {
        json!({
            "file": self.file,
            "kind": self.kind,
            "panels": self.panels.iter().map(|p| json!({
                "key": p.key,
                "title": p.title,
                "keys": p.keys,
                "configurations": p.configurations,
                "y_axis": p.y_axis.as_ref().map(|(label, (lo, hi))| json!({
                    "label": label,
                    "from": lo,
                    "to": hi,
                })),
                "largest_drawn": p.largest_drawn,
            })).collect::<Vec<_>>(),
            "texts": self.texts.iter().map(|t| json!({
                "text": t.text,
                "width_px": t.width_px,
                "room_px": t.room_px,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The manifest's text: `files` are names inside the report directory, `report.json`
/// itself included.
pub fn manifest(files: &[String], warnings: &[String], figures: &[FigureRecord]) -> String {
    let mut all: Vec<&str> = files.iter().map(String::as_str).collect();
    all.push("report.json");
    let value = json!({
        "files": all,
        "warnings": warnings,
        "figures": figures.iter().map(FigureRecord::json).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&value).expect("a JSON value prints") + "\n"
}
