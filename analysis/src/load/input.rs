//! What the report reads: run directories, and campaign directories (`campaign.json` and
//! its complete runs), each run with what its campaign says of it.

use std::path::{Path, PathBuf};

use oscil_model::campaign::{CampaignRun, CampaignRunStatus, Direction, RunSettings, REVERSE_DIR};
use oscil_rundir::campaign::{self, CampaignError};

/// One run directory to report on.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInput {
    pub dir: PathBuf,
    pub campaign: Option<CampaignEntry>,
}

/// What `campaign.json` says of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignEntry {
    /// The configuration's name (after its pair's, in a many-host campaign).
    pub label: String,
    pub repetition: u32,
    pub settings: RunSettings,
    /// The pair of hosts, in a many-host campaign: its own path.
    pub pair: Option<String>,
}

/// Every run of the inputs, in order: a campaign directory gives its complete runs in plan
/// order; runs that are not complete are listed in `skipped` with their status and reason.
#[derive(Debug, Default)]
pub struct Inputs {
    pub runs: Vec<RunInput>,
    pub skipped: Vec<String>,
    /// Said to the user once, on stderr and on the page (a run given twice).
    pub warnings: Vec<String>,
}

pub fn expand(dirs: &[PathBuf]) -> Result<Inputs, CampaignError> {
    let mut inputs = Inputs::default();
    for dir in dirs {
        if !campaign::is_campaign(dir) {
            inputs.runs.push(RunInput {
                dir: dir.clone(),
                campaign: None,
            });
            continue;
        }
        let plan = campaign::load(dir)?;
        for run in &plan.runs {
            if run.status != CampaignRunStatus::Complete {
                let status = format!("{:?}", run.status).to_lowercase();
                let reason = run.reason.as_deref().unwrap_or("no reason recorded");
                inputs.skipped.push(format!(
                    "{} rep {}: {status} ({reason})",
                    run.label, run.repetition
                ));
            }
        }
        for (run, path) in campaign::complete_runs(&plan, dir) {
            let path = match path {
                Ok(path) => path,
                Err(e) => {
                    inputs.skipped.push(format!(
                        "{} rep {}: left out: {e}",
                        run.label, run.repetition
                    ));
                    continue;
                }
            };
            inputs.runs.extend(directions(path, run));
        }
    }
    inputs.warnings = drop_repeats(&mut inputs.runs);
    Ok(inputs)
}

/// The configurations a campaign run counts in: a `--direction both` run's forward pair in
/// `LABEL_forward` and its reverse pair (`RUN/reverse`) in `LABEL_reverse`; any other run
/// in its own.
pub fn configuration_names(run: &CampaignRun) -> Vec<String> {
    let name = run.configuration_name();
    match run.settings.direction {
        Direction::Both => vec![format!("{name}_forward"), format!("{name}_reverse")],
        Direction::Forward | Direction::Reverse => vec![name],
    }
}

/// A run as the report counts it: a `--direction both` run is two (see
/// [`configuration_names`]), the reverse pair with its own settings; any other run is one.
fn directions(dir: PathBuf, run: &CampaignRun) -> Vec<RunInput> {
    let names = configuration_names(run);
    let both = names.len() == 2;
    names
        .into_iter()
        .enumerate()
        .map(|(i, label)| {
            let reverse = both && i == 1;
            RunInput {
                dir: if reverse {
                    dir.join(REVERSE_DIR)
                } else {
                    dir.clone()
                },
                campaign: Some(CampaignEntry {
                    label,
                    repetition: run.repetition,
                    settings: match reverse {
                        true => run.settings.reverse_pair(),
                        false => run.settings.clone(),
                    },
                    pair: run.pair.clone(),
                }),
            }
        })
        .collect()
}

/// Keeps the first of runs that are one directory (however the path was written: a
/// second name, `..`, a symbolic link), so a run given twice counts once; says which
/// were dropped.
fn drop_repeats(runs: &mut Vec<RunInput>) -> Vec<String> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut warnings = Vec::new();
    runs.retain(|run| {
        let identity = std::fs::canonicalize(&run.dir).unwrap_or_else(|_| run.dir.clone());
        if seen.contains(&identity) {
            warnings.push(format!(
                "{} was given more than once: counted once",
                run.dir.display()
            ));
            return false;
        }
        seen.push(identity);
        true
    });
    warnings
}

/// Where the report goes when `--out` is not given: `<campaign>/report` for one campaign
/// directory, else `report`.
pub fn default_out(dirs: &[PathBuf]) -> PathBuf {
    match dirs {
        [one] if campaign::is_campaign(one) => one.join("report"),
        _ => PathBuf::from("report"),
    }
}

/// `target` relative to `from` (both made absolute first), for links in the HTML page
/// that still work when the report and the runs move together.
pub fn relative(target: &Path, from: &Path) -> PathBuf {
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_owned())
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect::<Vec<_>>()
    };
    let (target, from) = (absolute(target), absolute(from));
    let common = target.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &target[common..] {
        path.push(part);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_both_ways_is_two_configurations_the_reverse_inside_the_forward() {
        let run = |direction| CampaignRun {
            label: "x".into(),
            repetition: 2,
            position: 1,
            dir: "runs/x/rep-2".into(),
            settings: RunSettings {
                direction,
                ..RunSettings::default()
            },
            status: CampaignRunStatus::Complete,
            reason: None,
            pair: None,
            link_spoiled: None,
        };
        let dir = PathBuf::from("/c/runs/x/rep-2");
        let both = directions(dir.clone(), &run(Direction::Both));
        let seen: Vec<(&Path, &str, Direction)> = both
            .iter()
            .map(|i| {
                let c = i.campaign.as_ref().unwrap();
                (i.dir.as_path(), c.label.as_str(), c.settings.direction)
            })
            .collect();
        assert_eq!(
            seen,
            [
                (dir.as_path(), "x_forward", Direction::Both),
                (
                    dir.join("reverse").as_path(),
                    "x_reverse",
                    Direction::Reverse
                ),
            ]
        );
        for direction in [Direction::Forward, Direction::Reverse] {
            let one = directions(dir.clone(), &run(direction));
            assert_eq!(one.len(), 1);
            assert_eq!(
                (
                    one[0].dir.as_path(),
                    one[0].campaign.as_ref().unwrap().label.as_str()
                ),
                (dir.as_path(), "x")
            );
        }
    }

    #[test]
    fn relative_paths_climb_to_the_common_ancestor() {
        assert_eq!(
            relative(Path::new("/c/runs/a/rep-1"), Path::new("/c/report")),
            PathBuf::from("../runs/a/rep-1")
        );
        assert_eq!(
            relative(Path::new("/x/run"), Path::new("/x")),
            PathBuf::from("run")
        );
    }
}
