//! `index.html`: one page that holds the whole report and loads nothing from the network:
//! the verdicts, the configurations table (sortable by a few lines of inline script), every
//! chart (relative links to the PNGs beside it), the recommendation, and links to each
//! run's files. Once loaded, its script writes how many images loaded into
//! `body[data-images]`, so a headless browser can check the page.

use std::fmt::Write as _;
use std::path::Path;

use crate::configs::Configuration;
use crate::input::relative;
use crate::metrics::{compared, METRICS};
use crate::summary::{RunSummary, Scope};
use crate::verdict::{estimate_text, verdict_text, Cell};

/// What the page shows, all already computed.
pub struct Page<'a> {
    pub summaries: &'a [RunSummary],
    pub configs: &'a [Configuration],
    pub cells: &'a [Vec<Cell>],
    pub scope: Scope,
    /// File names of the charts beside the page, in order.
    pub charts: &'a [String],
    /// The PNG of each run, by summary index.
    pub run_pngs: &'a [String],
    pub recommendation: Option<&'a str>,
    /// Runs of a campaign that were not complete, and why.
    pub skipped: &'a [String],
    /// The directory the page is written to (links to runs are relative to it).
    pub out_dir: &'a Path,
}

/// Text made safe for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1700px;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #bbb;padding:3px 7px;font-size:13px;vertical-align:top}\
th{background:#eef;cursor:pointer}th.nosort{cursor:default}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}\
.clear{color:#064}.worse{color:#a00}pre{background:#f6f6f6;padding:1em;overflow-x:auto;white-space:pre-wrap}";

/// Sorts a table by the clicked column (numbers by `data-sort`, else text), and marks how
/// many images loaded.
const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.dataset.dir !== 'up';
    th.dataset.dir = up ? 'up' : 'down';
    var key = function (row) {
      var cell = row.cells[col];
      var n = parseFloat(cell.dataset.sort);
      return isNaN(n) ? cell.textContent : n;
    };
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
window.addEventListener('load', function () {
  var images = document.images, ok = 0;
  for (var i = 0; i < images.length; i++) {
    if (images[i].complete && images[i].naturalWidth > 0) ok++;
  }
  document.body.dataset.images = ok + '/' + images.length;
});
"#;

/// The page.
pub fn page(p: &Page) -> String {
    let cycles = p
        .summaries
        .iter()
        .map(RunSummary::cycles)
        .max()
        .unwrap_or(0);
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>oscil report</title><style>{STYLE}</style></head><body>\n<h1>oscil report</h1>\n<p>{} runs in {} configurations; verdicts and intervals over figures {}; 95% intervals (Student's t; changes: Fieller's interval for the ratio of means, Welch's degrees of freedom).</p>\n",
        p.summaries.len(),
        p.configs.len(),
        escape(&p.scope.text(cycles))
    );
    for skipped in p.skipped {
        let _ = writeln!(
            html,
            "<p class=\"worse\">Not reported: {}</p>",
            escape(skipped)
        );
    }
    verdicts(&mut html, p);
    configurations(&mut html, p);
    if let Some(md) = p.recommendation {
        html.push_str("<h2 id=\"recommendation\">Recommendation</h2>\n");
        html.push_str(&markdown(md));
    }
    html.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for chart in p.charts.iter().chain(p.run_pngs) {
        let _ = writeln!(
            html,
            "<figure><img src=\"{0}\" alt=\"{0}\"><figcaption>{0}</figcaption></figure>",
            escape(chart)
        );
    }
    runs(&mut html, p);
    let _ = write!(html, "<script>{SCRIPT}</script>\n</body></html>\n");
    html
}

/// Text between each pair of `mark`s put in a `tag` element.
fn pairs(text: &str, mark: &str, tag: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split(mark).enumerate() {
        match i {
            0 => {}
            i if i % 2 == 1 => {
                let _ = write!(out, "<{tag}>");
            }
            _ => {
                let _ = write!(out, "</{tag}>");
            }
        }
        out.push_str(part);
    }
    out
}

/// The little markdown `recommendation.md` uses, as HTML: headings, tables, paragraphs,
/// `**bold**` and `` `code` ``; everything escaped first.
fn markdown(md: &str) -> String {
    let inline = |text: &str| pairs(&pairs(&escape(text), "**", "b"), "`", "code");
    let mut html = String::new();
    let mut in_table = false;
    for line in md.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let is_row = line.starts_with('|');
        if in_table && !is_row {
            html.push_str("</table>\n");
            in_table = false;
        }
        if is_row && cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
            continue;
        }
        if is_row {
            let tag = if in_table {
                "td"
            } else {
                "th class=\"nosort\""
            };
            let close = if in_table { "td" } else { "th" };
            if !in_table {
                html.push_str("<table class=\"recommendation\">");
                in_table = true;
            }
            html.push_str("<tr>");
            for cell in cells {
                let _ = write!(html, "<{tag}>{}</{close}>", inline(cell));
            }
            html.push_str("</tr>\n");
        } else if let Some(heading) = line.strip_prefix("## ") {
            let _ = writeln!(html, "<h3>{}</h3>", inline(heading));
        } else if line.starts_with("# ") || line.trim().is_empty() {
            continue;
        } else {
            let _ = writeln!(html, "<p>{}</p>", inline(line));
        }
    }
    if in_table {
        html.push_str("</table>\n");
    }
    html
}

/// For every configuration and compared figure, the change against the baseline in words.
fn verdicts(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"verdicts\">Verdicts</h2>\n<table id=\"verdicts-table\"><thead><tr><th class=\"nosort\">configuration</th>");
    for m in compared() {
        let _ = write!(html, "<th class=\"nosort\">{}</th>", escape(m.title));
    }
    html.push_str("</tr></thead><tbody>\n");
    for (i, c) in p.configs.iter().enumerate() {
        let _ = write!(html, "<tr><td>{}</td>", escape(&c.name));
        for (m, cell) in METRICS.iter().zip(&p.cells[i]).filter(|(m, _)| m.compared) {
            let words = verdict_text(m, cell, c.is_baseline(i), c.baseline.is_some());
            let class = if words.contains("(worse)") {
                "worse"
            } else if words.contains("clearly") {
                "clear"
            } else {
                ""
            };
            let _ = write!(html, "<td class=\"{class}\">{}</td>", escape(&words));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table>\n");
}

/// The configurations with every figure's mean and interval; click a header to sort.
fn configurations(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"configurations\">Configurations</h2>\n<div style=\"overflow-x:auto\"><table class=\"sortable\" id=\"configurations-table\"><thead><tr><th>configuration</th><th>runs</th><th>path</th>");
    for m in METRICS {
        let _ = write!(
            html,
            "<th>{} ({})</th>",
            escape(m.column),
            escape(m.unit.name)
        );
    }
    html.push_str("</tr></thead><tbody>\n");
    for (i, c) in p.configs.iter().enumerate() {
        let path = p.summaries[c.runs[0]]
            .settings
            .path_text()
            .unwrap_or_default();
        let _ = write!(
            html,
            "<tr><td>{}</td><td data-sort=\"{}\">{}</td><td>{}</td>",
            escape(&c.name),
            c.runs.len(),
            c.runs.len(),
            escape(&path)
        );
        for (m, cell) in METRICS.iter().zip(&p.cells[i]) {
            let sort = cell.estimate.map_or(String::new(), |e| e.mean.to_string());
            let _ = write!(
                html,
                "<td data-sort=\"{sort}\">{}</td>",
                escape(&estimate_text(m, cell.estimate.as_ref()))
            );
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
}

/// Every run with links to its files.
fn runs(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"runs\">Runs</h2>\n<table id=\"runs-table\"><thead><tr><th class=\"nosort\">run</th><th class=\"nosort\">configuration</th><th class=\"nosort\">status</th><th class=\"nosort\">files</th></tr></thead><tbody>\n");
    for c in p.configs {
        for &r in &c.runs {
            let s = &p.summaries[r];
            let dir = relative(&s.dir, p.out_dir);
            let links: Vec<String> = ["run.json", "reader.csv", "sender.csv", "host.csv"]
                .iter()
                .map(|f| {
                    let href = dir.join(f).display().to_string();
                    format!("<a href=\"{}\">{f}</a>", escape(&href))
                })
                .chain(std::iter::once(format!(
                    "<a href=\"{0}\">{0}</a>",
                    escape(&p.run_pngs[r])
                )))
                .collect();
            let status = s
                .partial
                .as_ref()
                .map_or("complete".to_string(), |why| format!("partial: {why}"));
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&s.label),
                escape(&c.name),
                escape(&status),
                links.join(" ")
            );
        }
    }
    html.push_str("</tbody></table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recommendations_markdown_becomes_escaped_html() {
        let md = "# t\n\n## Path: <a>\n\n**Choice: x** sets `lowat`.\n\n| a | b |\n|---|---|\n| 1 | **2** |\n\nend";
        assert_eq!(
            markdown(md),
            "<h3>Path: &lt;a&gt;</h3>\n<p><b>Choice: x</b> sets <code>lowat</code>.</p>\n\
             <table class=\"recommendation\"><tr><th class=\"nosort\">a</th><th class=\"nosort\">b</th></tr>\n\
             <tr><td>1</td><td><b>2</b></td></tr>\n</table>\n<p>end</p>\n"
        );
    }
}
