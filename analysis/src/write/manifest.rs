//! `report.json`: every file the report wrote, and for each picture its panels (what each
//! answers, its legend, the configurations drawn in it) and every line of text drawn with
//! its width and the room it had, so a test or a user's script can check what a picture
//! shows, and that no text was cut, without reading pixels.

use serde_json::{json, Value};

use crate::charts::record::FigureRecord;

/// One picture's entry in `report.json`.
fn figure_json(figure: &FigureRecord) -> Value {
    json!({
        "file": figure.file,
        "kind": figure.kind,
        "panels": figure.panels.iter().map(|p| json!({
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
        "texts": figure.texts.iter().map(|t| json!({
            "text": t.text,
            "width_px": t.width_px,
            "room_px": t.room_px,
        })).collect::<Vec<_>>(),
    })
}

/// The manifest's text: `files` are names inside the report directory, `report.json`
/// itself included.
pub fn manifest(files: &[String], warnings: &[String], figures: &[FigureRecord]) -> String {
    let mut all: Vec<&str> = files.iter().map(String::as_str).collect();
    all.push("report.json");
    let value = json!({
        "files": all,
        "warnings": warnings,
        "figures": figures.iter().map(figure_json).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&value).expect("a JSON value prints") + "\n"
}
