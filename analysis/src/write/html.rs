//! `index.html`: one page that holds the whole report and loads nothing from the network:
//! the answer first (each path's verdict in words and the recommendation), the verdicts
//! and the configurations in words (figures as rows, configurations as columns, so the
//! page fits a 1280-pixel window however many figures there are), every chart (relative
//! links to the PNGs beside it), the recommendation, and links to each run's files. Each
//! caveat is said once. Once loaded, its script writes how many images loaded into
//! `body[data-images]` and the page's width into `body[data-scroll-width]`, so a headless
//! browser can check the page.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::charts::headline::PathHeadline;
use crate::figures::metrics::{Better, Metric, METRICS};
use crate::figures::stats::Change;
use crate::load::configs::Configuration;
use crate::load::input::relative;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::shown_figures::shown;
use crate::verdicts::verdict::{self, brief_change, Cell, Intervals};

/// What the page shows, all already computed.
pub struct Page<'a> {
    pub summaries: &'a [RunSummary],
    pub configs: &'a [Configuration],
    pub cells: &'a [Vec<Cell>],
    pub scope: Scope,
    /// The answer, per path.
    pub headlines: &'a [PathHeadline],
    /// What the report says about groups of flows; none without them.
    pub groups: &'a [String],
    /// File names of the charts beside the page, in order.
    pub charts: &'a [String],
    /// The PNG of each run, by summary index.
    pub run_pngs: &'a [String],
    pub recommendation: Option<&'a str>,
    /// Runs of a campaign that were not complete, and why.
    pub skipped: &'a [String],
    /// Said once (a run given twice).
    pub warnings: &'a [String],
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

/// Text from a run directory or a peer (a label, a congestion name, a reason) made inert
/// in Markdown that a viewer may render as HTML: HTML's specials become entities (no tag, no
/// comment), Markdown's inline punctuation is backslash-escaped (no link, image, code,
/// emphasis or table cell break) and a line break becomes a space (no new block).
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' | '<' | '>' | '"' | '\'' => out.push_str(&escape(c.encode_utf8(&mut [0; 4]))),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// What a name keeps as it is in a link: letters, digits and `-._~` (RFC 3986's
/// unreserved); `:`, `?`, `#`, `%` and everything else are percent-encoded.
const KEPT_IN_LINKS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `path`, relative to the page, as the value of an `href` or `src`: `./` and each name
/// percent-encoded, so no file name reads as a scheme (`javascript:`), a query or a
/// fragment. (The report's paths are relative; a root or prefix would be dropped.)
fn link(path: &Path) -> String {
    let mut out = String::from(".");
    for part in path.components() {
        match part {
            Component::Normal(name) => {
                out.push('/');
                out.extend(percent_encode(name.as_bytes(), KEPT_IN_LINKS));
            }
            Component::ParentDir => out.push_str("/.."),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

const STYLE: &str =
    "body{font-family:sans-serif;margin:1em;color:#222;max-width:100%;overflow-wrap:anywhere}\
table{border-collapse:collapse;margin:0.5em 0 1.5em;width:100%;table-layout:fixed}\
td,th{border:1px solid #bbb;padding:3px 6px;font-size:13px;vertical-align:top;text-align:left}\
th{background:#eef}img{max-width:100%;height:auto;border:1px solid #ddd;margin:0.5em 0}\
.answer{font-size:16px;line-height:1.45}.answer p{margin:0.3em 0}\
.clear{color:#064}.worse{color:#a00}.note{color:#555;font-size:13px}\
pre{background:#f6f6f6;padding:1em;white-space:pre-wrap}";

/// Marks how many images loaded and how wide the page is once laid out.
const SCRIPT: &str = r#"
window.addEventListener('load', function () {
  var images = document.images, ok = 0;
  for (var i = 0; i < images.length; i++) {
    if (images[i].complete && images[i].naturalWidth > 0) ok++;
  }
  document.body.dataset.images = ok + '/' + images.length;
  document.body.dataset.scrollWidth = document.documentElement.scrollWidth;
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
    // A caveat of every figure, said once beside the run count.
    let once = Intervals::of(p.configs)
        .once()
        .map_or(String::new(), |once| format!(", {once}"));
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>oscil report</title><style>{STYLE}</style></head><body>\n<h1>oscil report</h1>\n<p>{} runs in {} configurations{}; figures {}.</p>\n",
        p.summaries.len(),
        p.configs.len(),
        escape(&once),
        escape(&p.scope.text(cycles))
    );
    for line in p.warnings {
        let _ = writeln!(html, "<p class=\"worse\">Warning: {}</p>", escape(line));
    }
    for skipped in p.skipped {
        let _ = writeln!(
            html,
            "<p class=\"worse\">Not reported: {}</p>",
            escape(skipped)
        );
    }
    answer(&mut html, p);
    if !p.groups.is_empty() {
        html.push_str("<h2 id=\"groups\">Groups of flows</h2>\n");
        for line in p.groups {
            let _ = writeln!(html, "<p>{}</p>", escape(line));
        }
        let _ = writeln!(
            html,
            "<p class=\"note\">Each group's figures: <a href=\"{}\">groups.csv</a>.</p>",
            link(Path::new("groups.csv"))
        );
    }
    verdicts(&mut html, p);
    charts(&mut html, p);
    configurations(&mut html, p);
    if let Some(md) = p.recommendation {
        html.push_str("<h2 id=\"recommendation\">Recommendation</h2>\n");
        html.push_str(&markdown(md));
    }
    runs(&mut html, p);
    let _ = write!(html, "<script>{SCRIPT}</script>\n</body></html>\n");
    html
}

/// Each path's verdict in words and its recommendation, with how to read the intervals
/// (said here once for the whole page).
fn answer(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"answer\">The answer</h2>\n<div class=\"answer\">\n");
    for h in p.headlines {
        let _ = writeln!(html, "<h3>Path: {}</h3>", escape(&h.path));
        if let Some(warning) = &h.warning {
            let _ = writeln!(html, "<p class=\"worse\"><b>{}</b></p>", escape(warning));
        }
        for sentence in &h.sentences {
            let _ = writeln!(html, "<p>{}</p>", escape(sentence));
        }
        let _ = writeln!(html, "<p><b>{}</b></p>", escape(&h.recommendation));
    }
    let reading = match Intervals::of(p.configs) {
        Intervals::NoneOneRunEach => "a change is one run's figure against the baseline's run.".to_string(),
        Intervals::PerFigure => format!("a change is the ratio of the means against the baseline, a figure alone a mean over the runs, each with its interval. {} A change is clear when its interval leaves out zero; \"no clear change\" means the interval holds zero, and more runs would tell. \"No interval\": a baseline whose runs are too far apart to tell its mean from zero; more runs give one.", crate::figures::stats::METHOD),
    };
    // The page shows every figure (its configurations table).
    let all: Vec<&Metric> = METRICS.iter().collect();
    let _ = write!(
        html,
        "</div>\n<p class=\"note\">How to read the figures: {} {} The same answer as a picture: <a href=\"{}\">headline.png</a>.</p>\n",
        escape(&reading),
        escape(&verdict::lower_bound_note(p.summaries, p.configs, &all, p.scope).unwrap_or_default()),
        link(Path::new("headline.png"))
    );
}

/// Charts across runs first, then each run's picture.
fn charts(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"charts\">Charts</h2>\n");
    let across = p.charts.iter().filter(|c| c.as_str() != "headline.png");
    for chart in across.chain(p.run_pngs) {
        let _ = writeln!(
            html,
            "<figure><img src=\"{}\" alt=\"{1}\"><figcaption>{1}</figcaption></figure>",
            link(Path::new(chart)),
            escape(chart)
        );
    }
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

/// A header row naming each configuration, after a first column of `first`.
fn config_header(html: &mut String, first: &str, configs: &[&Configuration]) {
    let _ = write!(html, "<thead><tr><th>{}</th>", escape(first));
    for c in configs {
        let _ = write!(html, "<th>{}</th>", escape(&c.name));
    }
    html.push_str("</tr></thead><tbody>\n");
}

/// The figures shown, one row each, against the configurations compared with a baseline:
/// the change in a few words; then a line for each figure left out.
fn verdicts(html: &mut String, p: &Page) {
    let compared: Vec<(usize, &Configuration)> = p
        .configs
        .iter()
        .enumerate()
        .filter(|(i, c)| c.baseline.is_some_and(|b| b != *i))
        .collect();
    html.push_str("<h2 id=\"verdicts\">Verdicts: each configuration against its baseline</h2>\n");
    let shown = shown(p.cells);
    let intervals = Intervals::of(p.configs);
    if compared.is_empty() {
        html.push_str("<p>No configuration has a baseline to compare with (none has the kernel's default lowat; pass --baseline NAME).</p>\n");
    } else {
        html.push_str("<table id=\"verdicts-table\"><thead><tr><th>figure</th>");
        for (_, c) in &compared {
            let base = c.baseline.map_or("", |b| p.configs[b].name.as_str());
            let _ = write!(
                html,
                "<th>{} against {}</th>",
                escape(&c.name),
                escape(base)
            );
        }
        html.push_str("</tr></thead><tbody>\n");
        for &m in &shown.metrics {
            let _ = write!(html, "<tr><td>{}</td>", escape(METRICS[m].title));
            for (i, _) in &compared {
                let (words, class) = match &p.cells[*i][m].change {
                    Some(change) => (
                        brief_change(change, intervals),
                        class_of(&METRICS[m], change),
                    ),
                    None => ("no figure on both sides".to_string(), ""),
                };
                let _ = write!(html, "<td class=\"{class}\">{}</td>", escape(&words));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</tbody></table>\n");
    }
    for line in &shown.left_out {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(line));
    }
}

/// `clear` for a clear change for the better, `worse` for one for the worse.
fn class_of(metric: &Metric, change: &Change) -> &'static str {
    if !change.is_clear() {
        return "";
    }
    match (metric.better, change.percent > 0.0) {
        (Better::Higher, true) | (Better::Lower, false) => "clear",
        (Better::Neither, _) => "",
        _ => "worse",
    }
}

/// Every figure's mean and interval, one row per figure, one column per configuration.
fn configurations(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"configurations\">Configurations: every figure</h2>\n<table id=\"configurations-table\">");
    let all: Vec<&Configuration> = p.configs.iter().collect();
    config_header(html, "figure", &all);
    let row = |html: &mut String, name: &str, cells: Vec<String>| {
        let _ = write!(html, "<tr><td>{}</td>", escape(name));
        for cell in cells {
            let _ = write!(html, "<td>{}</td>", escape(&cell));
        }
        html.push_str("</tr>\n");
    };
    row(
        html,
        "runs",
        all.iter().map(|c| c.runs.len().to_string()).collect(),
    );
    let path = |c: &&Configuration| {
        p.summaries[c.runs[0]]
            .settings
            .path_text()
            .unwrap_or_else(|| "measured".into())
    };
    row(html, "path", all.iter().map(path).collect());
    let mut unmeasured = Vec::new();
    let intervals = Intervals::of(p.configs);
    for (m, metric) in METRICS.iter().enumerate() {
        if p.cells.iter().all(|row| row[m].estimate.is_none()) {
            unmeasured.push(metric.title);
            continue;
        }
        let cells = (0..p.configs.len())
            .map(|i| {
                let cell = &p.cells[i][m];
                let of = (metric, cell);
                verdict::estimate_text_of(p.summaries, &p.configs[i], of, p.scope, intervals)
            })
            .collect();
        row(html, metric.title, cells);
    }
    html.push_str("</tbody></table>\n");
    if !unmeasured.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"note\">Not measured in any of these runs: {}.</p>",
            escape(&unmeasured.join("; "))
        );
    }
    html.push_str("<p class=\"note\">n/a: not measured in that configuration's runs. Every figure by its column name: configurations.csv, summary.csv, cycles.csv.</p>\n");
}

/// Every run with links to its files: the configurations' runs, then those left out.
fn runs(html: &mut String, p: &Page) {
    html.push_str("<h2 id=\"runs\">Runs</h2>\n<table id=\"runs-table\"><thead><tr><th class=\"nosort\">run</th><th class=\"nosort\">configuration</th><th class=\"nosort\">status</th><th class=\"nosort\">files</th></tr></thead><tbody>\n");
    let left_out = p
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.link_spoiled.is_some())
        .map(|(r, _)| ("none (left out)", r));
    let counted = p
        .configs
        .iter()
        .flat_map(|c| c.runs.iter().map(move |&r| (c.name.as_str(), r)));
    for (config, r) in counted.chain(left_out) {
        let s = &p.summaries[r];
        let dir = relative(&s.dir, p.out_dir);
        let links: Vec<String> = ["run.json", "reader.csv", "sender.csv", "host.csv"]
            .iter()
            .map(|f| format!("<a href=\"{}\">{f}</a>", link(&dir.join(f))))
            .chain(std::iter::once(format!(
                "<a href=\"{}\">{}</a>",
                link(Path::new(&p.run_pngs[r])),
                escape(&p.run_pngs[r])
            )))
            .collect();
        let status = match (&s.partial, &s.link_spoiled, &s.holes) {
            (Some(why), _, _) => format!("partial: {why}"),
            (None, Some(why), _) => format!("link spoiled: {why}"),
            (None, None, Some(why)) => format!("holes: {why}"),
            (None, None, None) => "complete".to_string(),
        };
        let status = match &s.host_limited {
            Some(why) => format!("{status}; {why}"),
            None => status,
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.label),
            escape(config),
            escape(&status),
            links.join(" ")
        );
    }
    html.push_str("</tbody></table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_paths_that_no_name_turns_into_a_scheme() {
        let run = Path::new("javascript:alert(document.domain)/run.json");
        assert_eq!(
            link(run),
            "./javascript%3Aalert%28document.domain%29/run.json"
        );
        let climb = Path::new("../runs/a b/rep-1#x?y%/reader.csv");
        assert_eq!(link(climb), "./../runs/a%20b/rep-1%23x%3Fy%25/reader.csv");
        assert_eq!(link(Path::new("headline.png")), "./headline.png");
        let bytes = std::ffi::OsStr::from_bytes(b"\xff\"<x>");
        assert_eq!(link(Path::new(bytes)), "./%FF%22%3Cx%3E");
    }

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
