//! What the report writes across runs, once every run is summarised and drawn: the answer
//! (`headline.png`), the comparison, the pictures per path, the tables, the
//! recommendation and the page, each picture recorded for the manifest.

use crate::charts::overlay_chart::{path_overlay, Alignment, PathRuns};
use crate::charts::record::FigureRecord;
use crate::charts::{comparison, draw, groups_chart, headline, interval_draw, mesh, path_chart};
use crate::error::ReportError;
use crate::figures::groups::{self, ConfigGroups};
use crate::load::configs::{self, Configuration};
use crate::load::input::Inputs;
use crate::load::run_series::RunSeries;
use crate::load::summary::RunSummary;
use crate::options::ReportConfig;
use crate::verdicts::groups as group_verdicts;
use crate::verdicts::recommend::{self, PathChoice};
use crate::verdicts::recommendation_text;
use crate::verdicts::verdict::{self, Cell, Intervals};
use crate::write::out_dir::write;
use crate::write::summary_md::Summary;
use crate::write::{config_table, groups_table, html, table};

/// The goodput tolerance of the headline's recommendation when `--recommend` gave none.
const DEFAULT_TOLERANCE: f64 = 0.01;

pub(crate) struct Across<'a> {
    pub config: &'a ReportConfig,
    pub summaries: &'a [RunSummary],
    pub configs: &'a [Configuration],
    pub series: &'a [RunSeries],
    pub pngs: &'a [String],
    /// Runs' further pictures, already drawn (BBR's state, traced runs' time sequences):
    /// listed with the charts.
    pub run_extras: &'a [String],
    pub inputs: &'a Inputs,
}

impl Across<'_> {
    /// Writes everything; returns the names of the files written and adds each picture's
    /// record to `records`.
    pub fn write(&self, records: &mut Vec<FigureRecord>) -> Result<Vec<String>, ReportError> {
        let scope = self.config.scope;
        let cells = verdict::evaluate(self.summaries, self.configs, scope);
        let tolerance = self.config.recommend.unwrap_or(DEFAULT_TOLERANCE);
        let choices = recommend::recommend(self.summaries, self.configs, scope, tolerance);
        let headlines = headline::headlines(self.summaries, self.configs, &cells, &choices, scope);
        let groups = groups::of_configs(self.summaries, self.configs, scope);
        let group_lines = group_verdicts::lines(self.configs, &groups);
        let mut charts = vec![self.headline(&headlines, records)?];
        charts.extend(self.overlays(&choices, records)?);
        charts.extend(self.group_pictures(&groups, records)?);
        if self.summaries.len() > 1 {
            charts.push(self.comparison(&cells, records)?);
        }
        if configs::paths_differ(self.summaries) {
            let figure = path_chart::path_figure(self.summaries, self.configs, scope);
            let texts = draw::draw_figure(&figure, &self.out("path.png"))?;
            records.push(FigureRecord::of_figure(
                "path.png",
                "path",
                &figure,
                &[],
                texts,
            ));
            charts.push("path.png".into());
        }
        let mesh = mesh::mesh_paths(self.summaries, self.configs, &choices, scope);
        if let Some(figure) = mesh::mesh_figure(&mesh) {
            let texts = draw::draw_figure(&figure, &self.out("mesh.png"))?;
            records.push(FigureRecord::of_figure(
                "mesh.png",
                "mesh",
                &figure,
                &[],
                texts,
            ));
            charts.push("mesh.png".into());
        }
        charts.extend(self.run_extras.iter().cloned());
        let mut texts = self.tables(&cells, &headlines, &group_lines)?;
        if !groups.is_empty() {
            let csv = groups_table::csv(self.summaries, self.configs, &groups, scope)?;
            texts.push(("groups.csv".into(), csv));
        }
        if !mesh.is_empty() {
            texts.push(("mesh.csv".into(), mesh::mesh_csv(&mesh)));
        }
        if self.config.recommend.is_some() {
            texts.extend(self.recommendation_files(&choices, tolerance));
        }
        let recommendation = texts
            .iter()
            .find(|(name, _)| name == "recommendation.md")
            .map(|(_, md)| md.as_str());
        let page = html::page(&html::Page {
            summaries: self.summaries,
            configs: self.configs,
            cells: &cells,
            scope,
            headlines: &headlines,
            groups: &group_lines,
            charts: &charts,
            run_pngs: self.pngs,
            recommendation,
            skipped: &self.inputs.skipped,
            warnings: &self.inputs.warnings,
            out_dir: &self.config.out_dir,
        });
        texts.push(("index.html".into(), page));
        let mut names = charts;
        for (name, text) in texts {
            write(&self.out(&name), &text)?;
            names.push(name);
        }
        Ok(names)
    }

    /// The answer's title, the same on `headline.png` and in `summary.md`.
    fn answer_title(&self) -> String {
        let figures = self.config.scope.text(self.cycles());
        headline::title(&figures, Intervals::of(self.configs))
    }

    fn out(&self, name: &str) -> std::path::PathBuf {
        self.config.out_dir.join(name)
    }

    fn cycles(&self) -> u32 {
        self.summaries
            .iter()
            .map(RunSummary::cycles)
            .max()
            .unwrap_or(0)
    }

    fn headline(
        &self,
        headlines: &[headline::PathHeadline],
        records: &mut Vec<FigureRecord>,
    ) -> Result<String, ReportError> {
        let name = "headline.png";
        let paragraphs = headline::paragraphs(headlines, self.answer_title());
        let texts = draw::draw_text_page(&paragraphs, &self.out(name))?;
        records.push(FigureRecord {
            file: name.into(),
            kind: "headline",
            panels: Vec::new(),
            texts,
        });
        Ok(name.into())
    }

    fn comparison(
        &self,
        cells: &[Vec<Cell>],
        records: &mut Vec<FigureRecord>,
    ) -> Result<String, ReportError> {
        let name = "comparison.png";
        let figure = comparison::comparison(self.summaries, self.configs, cells, self.config.scope);
        let texts = interval_draw::draw_interval_figure(&figure, &self.out(name))?;
        records.push(FigureRecord::of_intervals(name, &figure, texts));
        Ok(name.into())
    }

    /// Per path: every configuration overlaid over the session, and over a cycle when the
    /// runs have more than one.
    fn overlays(
        &self,
        choices: &[PathChoice],
        records: &mut Vec<FigureRecord>,
    ) -> Result<Vec<String>, ReportError> {
        let mut names = Vec::new();
        for (n, choice) in choices.iter().enumerate() {
            let path = PathRuns {
                path: choice.path.clone(),
                summaries: self.summaries,
                series: self.series,
                configs: self
                    .configs
                    .iter()
                    .filter(|c| c.path_key == choice.path_key)
                    .collect(),
            };
            let suffix = if choices.len() > 1 {
                format!("-path{}", n + 1)
            } else {
                String::new()
            };
            let mut views = vec![("overlay", Alignment::Session)];
            if self.cycles() > 1 {
                views.push(("cycles", Alignment::Cycle));
            }
            for (kind, align) in views {
                let name = format!("{kind}{suffix}.png");
                let figure = path_overlay(&path, align);
                let texts = draw::draw_figure(&figure, &self.out(&name))?;
                records.push(FigureRecord::of_figure(&name, kind, &figure, &[], texts));
                names.push(name);
            }
        }
        Ok(names)
    }

    /// One picture per configuration with groups of flows: `groups.png`, or `groups-<n>.png`
    /// when several configurations have groups.
    fn group_pictures(
        &self,
        groups: &[ConfigGroups],
        records: &mut Vec<FigureRecord>,
    ) -> Result<Vec<String>, ReportError> {
        let mut names = Vec::new();
        for (n, config) in groups.iter().enumerate() {
            let name = match groups.len() {
                1 => "groups.png".to_string(),
                _ => format!("groups-{}.png", n + 1),
            };
            let figure =
                groups_chart::groups_figure(self.summaries, self.series, self.configs, config);
            let texts = draw::draw_figure(&figure, &self.out(&name))?;
            let drawn = [self.configs[config.config].name.clone()];
            records.push(FigureRecord::of_figure(
                &name, "groups", &figure, &drawn, texts,
            ));
            names.push(name);
        }
        Ok(names)
    }

    fn tables(
        &self,
        cells: &[Vec<Cell>],
        headlines: &[headline::PathHeadline],
        group_lines: &[String],
    ) -> Result<Vec<(String, String)>, ReportError> {
        let (summaries, configs) = (self.summaries, self.configs);
        let run_baselines = run_baselines(summaries, configs);
        let summary_md = Summary {
            summaries,
            configs,
            cells,
            scope: self.config.scope,
            headlines,
            title: self.answer_title(),
            groups: group_lines,
            run_baselines: &run_baselines,
        };
        Ok(vec![
            ("summary.csv".into(), table::csv(summaries, &run_baselines)?),
            ("summary.md".into(), summary_md.markdown()),
            (
                "configurations.csv".into(),
                config_table::configurations_csv(summaries, configs, cells, self.config.scope)?,
            ),
            (
                "cycles.csv".into(),
                config_table::cycles_csv(summaries, configs)?,
            ),
        ])
    }

    /// `recommendation.md` first, then a sysctl file per path with a choice.
    fn recommendation_files(
        &self,
        choices: &[PathChoice],
        tolerance: f64,
    ) -> Vec<(String, String)> {
        let (summaries, configs, scope) = (self.summaries, self.configs, self.config.scope);
        let md = recommendation_text::markdown(summaries, configs, choices, scope, tolerance);
        let mut files = vec![("recommendation.md".to_string(), md)];
        for (choice, name) in choices.iter().zip(recommendation_text::conf_names(choices)) {
            let conf = recommendation_text::sysctl_conf(summaries, configs, choice, scope);
            if let (Some(name), Some(conf)) = (name, conf) {
                files.push((name, conf));
            }
        }
        files
    }
}

/// For each run, the run `summary.csv` compares it with: the first run of its
/// configuration's baseline.
fn run_baselines(summaries: &[RunSummary], configs: &[Configuration]) -> Vec<Option<usize>> {
    let mut baselines = vec![None; summaries.len()];
    for c in configs {
        for &r in &c.runs {
            baselines[r] = c.baseline.map(|b| configs[b].runs[0]);
        }
    }
    baselines
}
