//! What the daemon's end made of the options this reader asked, when it is not what was
//! asked: said on the terminal at the start (run.json keeps it too, in `sender_options`),
//! so that `--sndbuf 0` becoming 4608 bytes or a pacing rate capped by the daemon's
//! `--max-rate` is not found out from the figures.

use oscil_model::pattern::BitRate;
use oscil_model::socket::{OptionsInForce, SocketOptions};

/// One line each: the kernel's notes on the daemon's sockets, and the daemon's own cap.
pub fn adjustments(asked: &SocketOptions, in_force: &OptionsInForce) -> Vec<String> {
    let mut lines: Vec<String> = in_force
        .notes
        .iter()
        .map(|note| format!("the daemon's sockets: {note}"))
        .collect();
    // The kernel keeps whole bytes per second: less than a byte apart is the same rate.
    let capped = match (asked.max_pacing_rate_bps, in_force.max_pacing_rate_bps) {
        (Some(asked), Some(got)) if got + 8 <= asked => Some(format!(
            "--pacing-rate {} asked; the daemon paces each flow at {} (its --max-rate caps a session)",
            BitRate::from_bps(asked),
            BitRate::from_bps(got)
        )),
        (None, Some(got)) => Some(format!(
            "the daemon paces each flow at {} (its --max-rate caps a session)",
            BitRate::from_bps(got)
        )),
        _ => None,
    };
    lines.extend(capped);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_force(pacing: Option<u64>, notes: &[&str]) -> OptionsInForce {
        OptionsInForce {
            max_pacing_rate_bps: pacing,
            notes: notes.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_kernels_notes_and_the_daemons_cap_are_said() {
        let asked = SocketOptions {
            max_pacing_rate_bps: Some(1_000_000_000),
            ..Default::default()
        };
        let got = in_force(
            Some(100_000_000),
            &["SO_SNDBUF 0 requested, kernel set 4608"],
        );
        assert_eq!(
            adjustments(&asked, &got),
            [
                "the daemon's sockets: SO_SNDBUF 0 requested, kernel set 4608",
                "--pacing-rate 1gbit asked; the daemon paces each flow at 100mbit (its --max-rate caps a session)",
            ]
        );
        let unasked = SocketOptions::default();
        assert_eq!(
            adjustments(&unasked, &in_force(Some(2_500_000), &[])),
            ["the daemon paces each flow at 2500kbit (its --max-rate caps a session)"]
        );
        // What was asked, to the byte per second the kernel keeps: nothing to say.
        assert!(adjustments(&asked, &in_force(Some(999_999_993), &[])).is_empty());
        assert!(adjustments(&unasked, &in_force(None, &[])).is_empty());
    }
}
