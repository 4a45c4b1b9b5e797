//! The end of a campaign, on either backend: the measured path recorded, the report run as
//! a bounded child over every complete run, and the end table.

use std::path::{Path, PathBuf};

use super::dir::CampaignDir;
use super::error::LabError;
use super::{bounded, ui};

/// Where a campaign's figures for Prometheus go (`oscil-report --metrics`).
const METRICS_DIR: &str = "metrics";

/// The report over every complete run (a bounded child), the measured path, and the end
/// table.
pub fn finish_campaign(cdir: &mut CampaignDir, bin: &Path) -> Result<(), LabError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (run, dir) in oscil_rundir::campaign::complete_runs(&cdir.campaign, &cdir.dir) {
        match dir {
            Ok(dir) => dirs.push(dir),
            Err(e) => ui::say(&format!(
                "oscil-lab: warning: {} rep {} left out: {e}",
                run.label, run.repetition
            )),
        }
    }
    if let Some(min_rtt_us) = dirs
        .iter()
        .filter_map(|d| oscil_rundir::load_rows::<oscil_model::files::rows::SenderSample>(d).ok())
        .flatten()
        .map(|r| r.rtt_us)
        .filter(|&r| r > 0)
        .min()
    {
        if let Some(hosts) = cdir.campaign.hosts.as_mut() {
            hosts["measured_min_rtt_us"] = min_rtt_us.into();
        }
        cdir.save()?;
    }
    if !dirs.is_empty() && bin.join("oscil-report").is_file() {
        // The campaign itself, so the report groups repetitions by configuration; the
        // recommendation declines by itself when the evidence is thin.
        // Bounded in time and memory: the runs may hold what a remote host sent.
        let mut report = std::process::Command::new(bin.join("oscil-report"));
        report
            .arg(&cdir.dir)
            .arg("--out")
            .arg(cdir.dir.join("report"))
            .args(["--force", "--recommend"])
            .arg("--metrics")
            .arg(cdir.dir.join(METRICS_DIR));
        let (time, memory) = (bounded::REPORT_TIME, bounded::REPORT_MEMORY_BYTES);
        let ran = bounded::Bounds::lower_of(time, memory)
            .map_err(|e| e.to_string())
            .and_then(|bounds| {
                for note in bounds.notes(time, memory) {
                    ui::say(&format!("oscil-lab: the report's {note}"));
                }
                bounds.apply_to_report(&mut report);
                bounded::run_bounded(report, bounds.time.value, bounds.memory.value)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = ran {
            ui::say(&format!(
                "oscil-lab: warning: the report failed ({e}); the runs are all in {}",
                cdir.dir.display()
            ));
        }
    }
    oscil_cli::out!("{}", ui::table(&cdir.dir, bin));
    ui::say(&format!(
        "oscil-lab: {} of {} run(s) complete in {}",
        dirs.len(),
        cdir.campaign.runs.len(),
        cdir.dir.display()
    ));
    Ok(())
}
