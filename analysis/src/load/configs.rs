//! Runs grouped into configurations (repetitions of the same settings, path and pattern),
//! each with a name and the configuration it is compared with.

use crate::load::settings::Settings;
use crate::load::summary::RunSummary;

/// Runs with identical settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    /// The campaign's label, else the settings that set it apart from the others.
    pub name: String,
    /// Indices into the summaries, in input order.
    pub runs: Vec<usize>,
    pub path_key: String,
    /// The index of the configuration this one is compared with (itself for a baseline).
    pub baseline: Option<usize>,
}

impl Configuration {
    /// The settings all its runs share.
    pub fn settings<'a>(&self, summaries: &'a [RunSummary]) -> &'a Settings {
        &summaries[self.runs[0]].settings
    }

    pub fn is_baseline(&self, index: usize) -> bool {
        self.baseline == Some(index)
    }
}

/// `--baseline` names no configuration or run; the message lists what it could name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--baseline {name:?}: no configuration or run has that name (configurations: {configurations}; runs: {runs})")]
pub struct BaselineError {
    name: String,
    configurations: String,
    runs: String,
}

/// Groups the runs by `config_key` and `path_key`, in order of first appearance, names
/// each group and gives it a baseline on its own path, never another's: with `baseline`,
/// the configuration of that name (or holding the run of that label) for those on its
/// path; else (and on the other paths) the first configuration on the path with the
/// kernel's default lowat, or none. A run the link spoiled is in
/// no configuration (see [`left_out`]): the one place runs are kept from the figures every
/// table, verdict and recommendation reads.
pub fn group(
    summaries: &[RunSummary],
    baseline: Option<&str>,
) -> Result<Vec<Configuration>, BaselineError> {
    let mut configs: Vec<Configuration> = Vec::new();
    for (i, s) in summaries.iter().enumerate() {
        if s.link_spoiled.is_some() {
            continue;
        }
        // Runs of one setting on two paths are two configurations.
        match configs.iter_mut().find(|c| {
            let first = &summaries[c.runs[0]];
            first.config_key == s.config_key && first.path_key == s.path_key
        }) {
            Some(c) => c.runs.push(i),
            None => configs.push(Configuration {
                name: String::new(),
                runs: vec![i],
                path_key: s.path_key.clone(),
                baseline: None,
            }),
        }
    }
    let firsts: Vec<&RunSummary> = configs.iter().map(|c| &summaries[c.runs[0]]).collect();
    let words = distinguishing(&firsts);
    // The campaign's label, else the runs' label where they share one (the lab labels each
    // repetition of a setting alike; a lone run keeps its own), else the words.
    let names: Vec<String> = configs
        .iter()
        .zip(words)
        .map(|(c, words)| {
            let labels: Vec<&String> = c
                .runs
                .iter()
                .map(|&i| {
                    let s = &summaries[i];
                    s.campaign_label.as_ref().unwrap_or(&s.label)
                })
                .collect();
            if labels.iter().all(|l| *l == labels[0]) {
                labels[0].clone()
            } else {
                words
            }
        })
        .collect();
    for (c, name) in configs
        .iter_mut()
        .zip(unique(names, |name, n| format!("{name} ({n})")))
    {
        c.name = name;
    }
    let baselines = baselines(summaries, &configs, baseline)?;
    for (c, b) in configs.iter_mut().zip(baselines) {
        c.baseline = b;
    }
    Ok(configs)
}

/// One line per run [`group`] leaves out, saying why, for the report and the end table.
pub fn left_out(summaries: &[RunSummary]) -> Vec<String> {
    summaries
        .iter()
        .filter_map(|s| {
            let why = s.link_spoiled.as_ref()?;
            Some(format!("{}: left out of the verdicts: {why}", s.name()))
        })
        .collect()
}

fn baselines(
    summaries: &[RunSummary],
    configs: &[Configuration],
    name: Option<&str>,
) -> Result<Vec<Option<usize>>, BaselineError> {
    let mut named = None;
    if let Some(name) = name {
        let found = configs
            .iter()
            .position(|c| c.name == name || c.runs.iter().any(|&r| summaries[r].label == name));
        let Some(index) = found else {
            let runs: Vec<&str> = summaries.iter().map(|s| s.label.as_str()).collect();
            let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
            return Err(BaselineError {
                name: name.to_owned(),
                configurations: names.join(", "),
                runs: runs.join(", "),
            });
        };
        named = Some(index);
    }
    Ok(configs
        .iter()
        .map(|config| {
            let on_path = |i: &usize| configs[*i].path_key == config.path_key;
            named.filter(on_path).or_else(|| {
                (0..configs.len())
                    .filter(on_path)
                    .find(|&i| configs[i].settings(summaries).lowat.is_none())
            })
        })
        .collect())
}

/// Names made unique: a name already taken gets `numbered(name, n)` from n = 2 on.
pub fn unique(names: Vec<String>, numbered: impl Fn(&str, usize) -> String) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let mut candidate = name.clone();
        let mut n = 2;
        while out.contains(&candidate) {
            candidate = numbered(&name, n);
            n += 1;
        }
        out.push(candidate);
    }
    out
}

/// Each run's settings that are not the same in every run, in words (the path included),
/// so a chart across runs can name each run briefly. Where nothing differs, the lowat.
pub fn distinguishing(summaries: &[&RunSummary]) -> Vec<String> {
    let settings: Vec<&Settings> = summaries.iter().map(|s| &s.settings).collect();
    varying(&settings, true)
}

/// The settings (and, with `with_path`, the path) that are not the same in all of
/// `settings`, in words, for each; where nothing differs, the lowat.
pub fn varying(settings: &[&Settings], with_path: bool) -> Vec<String> {
    let parts: Vec<Vec<(String, String)>> = settings
        .iter()
        .map(|s| {
            let mut parts = s.parts();
            if with_path {
                parts.extend(s.path_parts());
            }
            parts
        })
        .collect();
    let text_of = |run: &[(String, String)], name: &str| {
        run.iter()
            .find(|(n, _)| n == name)
            .map_or(String::new(), |(_, text)| text.clone())
    };
    let mut names: Vec<&String> = Vec::new();
    for (name, _) in parts.iter().flatten() {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let varying: Vec<&String> = names
        .into_iter()
        .filter(|name| {
            parts
                .iter()
                .any(|run| text_of(run, name) != text_of(&parts[0], name))
        })
        .collect();
    parts
        .iter()
        .zip(settings)
        .map(|(run, settings)| {
            let texts: Vec<String> = varying
                .iter()
                .map(|name| text_of(run, name))
                .filter(|text| !text.is_empty())
                .collect();
            if texts.is_empty() {
                settings.lowat_text()
            } else {
                texts.join(", ")
            }
        })
        .collect()
}

/// Whether the runs were made on different paths, so figures against RTT say something:
/// the lab's path facts differ, or, with none recorded, the lowest measured RTTs differ by
/// more than half (and a millisecond).
pub fn paths_differ(summaries: &[RunSummary]) -> bool {
    let lab: Vec<(Option<f64>, Option<f64>)> = summaries
        .iter()
        .map(|s| (s.settings.path_rtt_ms, s.settings.path_rate_bps))
        .collect();
    if lab.iter().any(|&p| p != (None, None)) {
        return lab.windows(2).any(|w| w[0] != w[1]);
    }
    let rtts: Vec<f64> = summaries.iter().filter_map(|s| s.rtt_min_ms()).collect();
    let lo = rtts.iter().copied().reduce(f64::min);
    let hi = rtts.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => hi > lo * 1.5 && hi - lo > 1.0,
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::load::settings::LowatSource;
    use oscil_figures::RunPhases;

    /// A run of one flow, cubic, on a path of `rtt_ms`: its configuration by `lowat` and
    /// the RTT (also the figures' tests').
    pub(crate) fn run(label: &str, lowat: Option<u64>, rtt_ms: Option<f64>) -> RunSummary {
        RunSummary {
            label: label.into(),
            dir: label.into(),
            settings: Settings {
                flows: 1,
                lowat: lowat.map(|b| (b, LowatSource::Socket)),
                sndbuf_bytes: None,
                congestion: Some("cubic".into()),
                path_rtt_ms: rtt_ms,
                path_rate_bps: None,
                full_speed: false,
                write_mode: Default::default(),
                lab_settings: Vec::new(),
                sender_tcp_wmem: None,
                reader_tcp_rmem: None,
                groups: Vec::new(),
            },
            partial: None,
            holes: None,
            link_spoiled: None,
            host_limited: None,
            duration_s: 60.0,
            phases: RunPhases::default(),
            sender_page_bytes: 4096.0,
            reader_page_bytes: 4096.0,
            run_facts: Default::default(),
            config_key: format!("{lowat:?} {rtt_ms:?}"),
            path_key: format!("{rtt_ms:?}"),
            shared_namespace: false,
            campaign_label: None,
            repetition: None,
            not_given: Vec::new(),
            groups: Vec::new(),
        }
    }

    #[test]
    fn each_configuration_is_compared_with_the_default_lowat_one_on_its_path() {
        let runs = [
            run("a", Some(16384), Some(20.0)),
            run("b", None, Some(20.0)),
            run("c", None, Some(80.0)),
            run("d", Some(16384), Some(80.0)),
            run("e", Some(16384), None),
            run("a2", Some(16384), Some(20.0)),
        ];
        let configs = group(&runs, None).unwrap();
        let grouped: Vec<(&str, Vec<usize>, Option<usize>)> = configs
            .iter()
            .map(|c| (c.name.as_str(), c.runs.clone(), c.baseline))
            .collect();
        assert_eq!(
            grouped,
            vec![
                ("lowat 16 KiB, RTT 20.0 ms", vec![0, 5], Some(1)),
                ("b", vec![1], Some(1)),
                ("c", vec![2], Some(2)),
                ("d", vec![3], Some(2)),
                // No configuration with the default lowat on its path: none from another.
                ("e", vec![4], None),
            ]
        );
        // A named baseline serves its own path; the others keep their default.
        let all_d = group(&runs, Some("d")).unwrap();
        let baselines: Vec<Option<usize>> = all_d.iter().map(|c| c.baseline).collect();
        assert_eq!(baselines, vec![Some(1), Some(1), Some(3), Some(3), None]);
        let by_run = group(&runs, Some("a2")).unwrap();
        assert_eq!(by_run[1].baseline, Some(0));
        assert_eq!(by_run[2].baseline, Some(2));
        let err = group(&runs, Some("z")).unwrap_err();
        assert!(err.to_string().contains("a, b, c, d, e, a2"), "{err}");
        assert_eq!(group(&runs[..1], None).unwrap()[0].baseline, None);
        assert!(paths_differ(&runs));
        assert!(!paths_differ(&runs[..2]));
        // Repetitions labelled alike keep the label; two configurations never share a name.
        let alike = run("rep", Some(16384), Some(20.0));
        let twins = [alike.clone(), alike, run("rep", None, Some(20.0))];
        let names: Vec<String> = group(&twins, None)
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, vec!["rep", "rep (2)"]);
    }

    #[test]
    fn runs_are_named_by_the_settings_that_differ() {
        let runs = [
            run("a", Some(16384), Some(20.0)),
            run("b", None, Some(20.0)),
            run("c", None, Some(80.0)),
        ];
        let refs: Vec<&RunSummary> = runs.iter().collect();
        assert_eq!(
            distinguishing(&refs),
            vec![
                "lowat 16 KiB, RTT 20.0 ms",
                "lowat default, RTT 20.0 ms",
                "lowat default, RTT 80.0 ms"
            ]
        );
        assert_eq!(distinguishing(&refs[1..2]), vec!["lowat default"]);
    }
}
