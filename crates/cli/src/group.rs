//! `--group SPEC` of the reader and the lab: a comma list of `flows=N` and the reader's
//! per-flow settings, each value read by the parser of the reader's flag of that name, so
//! there is one grammar. A group's unset keys take the run's own flags
//! ([`resolve`]); [`spec_of`] writes a group back as a SPEC that reads back the same.

use oscil_model::group::{share_bps, FlowGroup, Reading, UnknownReading};
use oscil_model::pattern::{BitRate, Fraction};
use oscil_model::socket::{UnknownWriteMode, WriteMode};
use oscil_protocol::request::{
    check_congestion_name, RequestError, MAX_FLOWS, MIN_PACING_RATE_BPS,
};

use crate::request_args::{
    parse_pacing_rate, parse_slow_rate_arg, parse_write_size, ArgError, SlowRateArg,
};
use crate::units::{parse_bytes_u32, parse_fraction, whole, UnitError};

/// The keys a SPEC takes, as the help and the errors list them.
pub const KEYS: &str = "flows, notsent-lowat, sndbuf, congestion, pacing-rate, write-mode, \
                        write-size, pattern, fraction, slow-rate";

/// One `KEY=VALUE` of a SPEC, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupSetting {
    Flows(u32),
    NotsentLowat(u32),
    Sndbuf(u32),
    Congestion(String),
    PacingRate(u64),
    WriteMode(WriteMode),
    WriteSize(u32),
    Pattern(Reading),
    Fraction(Fraction),
    SlowRate(SlowRateArg),
}

/// A parsed `--group` SPEC: its settings in the order typed, `flows` among them (and
/// apart, since every group has it).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpec {
    flows: u32,
    settings: Vec<GroupSetting>,
}

/// Why a value of one key is not valid: the same words as the flag of that name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    WriteMode(#[from] UnknownWriteMode),
    #[error(transparent)]
    Reading(#[from] UnknownReading),
}

/// A SPEC that is not a group.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroupSpecError {
    #[error("{part:?} is not KEY=VALUE (keys: {KEYS})")]
    NotKeyValue { part: String },
    #[error("unknown key {key:?} (keys: {KEYS})")]
    UnknownKey { key: String },
    #[error("{key}= given twice")]
    Twice { key: String },
    #[error("{key}={value:?}: {source}")]
    Value {
        key: String,
        value: String,
        source: ValueError,
    },
    #[error("no flows=N: every group says how many flows it holds")]
    NoFlows,
}

/// `--group SPEC`, as clap's value parser.
pub fn parse_group(input: &str) -> Result<GroupSpec, GroupSpecError> {
    let mut flows = None;
    let mut settings = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for part in input.split(',').map(str::trim) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(GroupSpecError::NotKeyValue {
                part: oscil_model::text::escape_peer(part),
            });
        };
        let key = key.trim();
        if seen.contains(&key) {
            return Err(GroupSpecError::Twice { key: key.into() });
        }
        seen.push(key);
        let setting = parse_setting(key, value.trim()).map_err(|e| match e {
            Some(source) => GroupSpecError::Value {
                key: key.into(),
                value: oscil_model::text::escape_peer(value),
                source,
            },
            None => GroupSpecError::UnknownKey {
                key: oscil_model::text::escape_peer(key),
            },
        })?;
        if let GroupSetting::Flows(n) = setting {
            flows = Some(n);
        }
        settings.push(setting);
    }
    let flows = flows.ok_or(GroupSpecError::NoFlows)?;
    Ok(GroupSpec { flows, settings })
}

/// One key's value by its flag's parser; `Err(None)` for a key no flag has.
fn parse_setting(key: &str, value: &str) -> Result<GroupSetting, Option<ValueError>> {
    let bad = |e: ValueError| Some(e);
    Ok(match key {
        "flows" => {
            GroupSetting::Flows(whole("count", 1, MAX_FLOWS)(value).map_err(|e| bad(e.into()))?)
        }
        "notsent-lowat" => {
            GroupSetting::NotsentLowat(parse_bytes_u32(value).map_err(|e| bad(e.into()))?)
        }
        "sndbuf" => GroupSetting::Sndbuf(parse_bytes_u32(value).map_err(|e| bad(e.into()))?),
        "congestion" => {
            check_congestion_name(value).map_err(|e| bad(e.into()))?;
            GroupSetting::Congestion(value.into())
        }
        "pacing-rate" => {
            GroupSetting::PacingRate(parse_pacing_rate(value).map_err(|e| bad(e.into()))?)
        }
        "write-mode" => {
            GroupSetting::WriteMode(value.parse().map_err(|e: UnknownWriteMode| bad(e.into()))?)
        }
        "write-size" => {
            GroupSetting::WriteSize(parse_write_size(value).map_err(|e| bad(e.into()))?)
        }
        "pattern" => {
            GroupSetting::Pattern(value.parse().map_err(|e: UnknownReading| bad(e.into()))?)
        }
        "fraction" => GroupSetting::Fraction(parse_fraction(value).map_err(|e| bad(e.into()))?),
        "slow-rate" => {
            GroupSetting::SlowRate(parse_slow_rate_arg(value).map_err(|e| bad(e.into()))?)
        }
        _ => return Err(None),
    })
}

impl GroupSpec {
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// The group: `base`'s settings (the run's flags) with this SPEC's over them.
    fn over(&self, base: &FlowGroup) -> FlowGroup {
        let mut group = base.clone();
        for setting in &self.settings {
            match setting {
                GroupSetting::Flows(n) => group.flows = *n,
                GroupSetting::NotsentLowat(b) => group.sender.notsent_lowat_bytes = Some(*b),
                GroupSetting::Sndbuf(b) => group.sender.sndbuf_bytes = Some(*b),
                GroupSetting::Congestion(name) => group.sender.congestion = Some(name.clone()),
                GroupSetting::PacingRate(bps) => group.sender.max_pacing_rate_bps = Some(*bps),
                GroupSetting::WriteMode(mode) => group.write_mode = *mode,
                GroupSetting::WriteSize(b) => group.write_size_bytes = Some(*b),
                GroupSetting::Pattern(reading) => group.pattern = *reading,
                GroupSetting::Fraction(f) => group.fraction = *f,
                GroupSetting::SlowRate(rate) => group.slow_rate_bps = rate.bps().map(BitRate::bps),
            }
        }
        group
    }

    fn sets_slow_rate(&self) -> bool {
        self.settings
            .iter()
            .any(|s| matches!(s, GroupSetting::SlowRate(_)))
    }
}

/// The session's groups from the SPECs over the run's own settings (`base`, its `flows`
/// all the run's). The run's absolute slow rate is for all flows together: a group that
/// sets none reads its flows' share of it, so one group is the run as without `--group`.
pub fn resolve(specs: &[GroupSpec], base: &FlowGroup) -> Vec<FlowGroup> {
    let total: u64 = specs.iter().map(|s| u64::from(s.flows)).sum();
    specs
        .iter()
        .map(|spec| {
            let mut group = spec.over(base);
            if !spec.sets_slow_rate() {
                group.slow_rate_bps = base
                    .slow_rate_bps
                    .map(|bps| share_bps(bps, spec.flows, total, MIN_PACING_RATE_BPS));
            }
            group
        })
        .collect()
}

/// A group as a SPEC with every setting it has, which [`parse_group`] and [`resolve`]
/// read back as the same group (what the lab passes). A socket option or write size the
/// group leaves to the kernel or the daemon has no key and no word for "unset": it reads
/// back so only where the flag of that name is unset too, as it is for every group
/// [`resolve`] made over those flags.
pub fn spec_of(group: &FlowGroup) -> String {
    let options = &group.sender;
    let mut parts = vec![format!("flows={}", group.flows)];
    let optional = [
        (
            "notsent-lowat",
            options.notsent_lowat_bytes.map(|b| b.to_string()),
        ),
        ("sndbuf", options.sndbuf_bytes.map(|b| b.to_string())),
        ("congestion", options.congestion.clone()),
        (
            "pacing-rate",
            options.max_pacing_rate_bps.map(|b| format!("{b}bit")),
        ),
        ("write-size", group.write_size_bytes.map(|b| b.to_string())),
    ];
    parts.extend(
        optional
            .into_iter()
            .filter_map(|(key, v)| Some(format!("{key}={}", v?))),
    );
    parts.push(format!("write-mode={}", group.write_mode));
    parts.push(format!("pattern={}", group.pattern));
    parts.push(format!("fraction={}", group.fraction));
    parts.push(match group.slow_rate_bps {
        Some(bps) => format!("slow-rate={bps}bit"),
        None => format!("slow-rate={}", crate::request_args::AUTO_PER_RUN),
    });
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::socket::SocketOptions;

    fn base() -> FlowGroup {
        FlowGroup {
            flows: 4,
            sender: SocketOptions {
                congestion: Some("reno".into()),
                ..SocketOptions::default()
            },
            write_size_bytes: None,
            write_mode: WriteMode::UntilEagain,
            pattern: Reading::Oscillating,
            fraction: Fraction::CLOUDFLARE,
            slow_rate_bps: Some(8_000_000),
        }
    }

    #[test]
    fn a_spec_overrides_the_flags_and_shares_the_slow_rate() {
        let specs = [
            parse_group("flows=2,notsent-lowat=128k").unwrap(),
            parse_group("flows=6, congestion=bbr, pattern=full-speed").unwrap(),
            parse_group("flows=1,slow-rate=1mbit,write-mode=per-wake,fraction=10%").unwrap(),
        ];
        let groups = resolve(&specs, &base());
        assert_eq!(groups[0].sender.notsent_lowat_bytes, Some(128 << 10));
        assert_eq!(groups[0].sender.congestion.as_deref(), Some("reno"));
        assert_eq!(groups[1].sender.congestion.as_deref(), Some("bbr"));
        assert_eq!(groups[1].pattern, Reading::FullSpeed);
        // The run's 8 Mbit/s is for its 9 flows: a group without its own reads its share.
        assert_eq!(groups[0].slow_rate_bps, Some(8_000_000 * 2 / 9));
        assert_eq!(groups[2].slow_rate_bps, Some(1_000_000));
        assert_eq!(groups[2].write_mode, WriteMode::PerWake);
        assert_eq!(groups[2].fraction, Fraction::new(0.1).unwrap());
        assert_eq!(
            groups.iter().map(|g| g.flows).collect::<Vec<_>>(),
            [2, 6, 1]
        );
    }

    #[test]
    fn a_group_written_back_reads_back_the_same() {
        let mut group = base();
        group.sender.notsent_lowat_bytes = Some(131072);
        group.sender.sndbuf_bytes = Some(65536);
        group.sender.max_pacing_rate_bps = Some(50_000_001);
        group.write_size_bytes = Some(16384);
        group.pattern = Reading::FullSpeed;
        let other_flags = FlowGroup {
            sender: SocketOptions::default(),
            slow_rate_bps: Some(5),
            ..base()
        };
        for group in [
            group,
            FlowGroup {
                slow_rate_bps: None,
                ..base()
            },
        ] {
            let spec = parse_group(&spec_of(&group)).unwrap();
            assert_eq!(resolve(&[spec], &other_flags), [group]);
        }
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let error = |spec: &str| parse_group(spec).unwrap_err().to_string();
        assert!(error("flows=2,lowat=1k").starts_with("unknown key \"lowat\""));
        let e = error("flows=2,notsent-lowat=lots");
        assert!(e.starts_with("notsent-lowat=\"lots\": "), "{e}");
        let e = error("flows=0");
        assert!(e.starts_with("flows=\"0\": "), "{e}");
        let e = error(&format!("flows={}", MAX_FLOWS + 1));
        assert!(e.starts_with("flows="), "{e}");
        assert!(error("flows=2,pattern=slow").contains("oscillating or full-speed"));
        assert!(error("flows=1,congestion=re\nno").starts_with("congestion="));
        assert_eq!(
            error("notsent-lowat=1k"),
            GroupSpecError::NoFlows.to_string()
        );
        assert!(error("flows=1,flows=2").contains("twice"));
        assert!(error("flows=1,bbr").contains("is not KEY=VALUE"));
        for e in [error("flows=1,x\n=1"), error("flows=1,sndbuf=\u{1b}[31m")] {
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e:?}");
        }
    }
}
