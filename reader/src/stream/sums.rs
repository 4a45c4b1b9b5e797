//! One side's sample summed over flows, for the whole session and for each group: the
//! figures of an interval line.

use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};

use super::lines::{HostFigures, ReaderFigures, SenderFigures};

/// One side's sample: the session's figures and each group's (by group number, `None`
/// where a group has no row).
#[derive(Debug, Clone, PartialEq)]
pub struct Part<F> {
    pub total: F,
    pub groups: Vec<Option<F>>,
}

/// A sum over the rows that have the value; `None` when none has it.
fn sum_some(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.flatten().reduce(u64::saturating_add)
}

/// Bytes over a span as bits per second; 0 over an empty span.
fn bps(bytes: u64, span_s: f64) -> f64 {
    match span_s > 0.0 {
        true => bytes as f64 * 8.0 / span_s,
        false => 0.0,
    }
}

fn host_figures(host: &HostSample, page_size_bytes: u64) -> HostFigures {
    HostFigures {
        tcp_mem_bytes: host.tcp_mem_pages.saturating_mul(page_size_bytes),
        tcp_mem_ns_bytes: host.tcp_mem_ns_bytes,
    }
}

/// Each group's rows (groups counted from 0, a row without one in group 0).
fn by_group<R>(rows: &[R], groups: u32, group_of: fn(&R) -> Option<u32>) -> Vec<Vec<&R>> {
    let mut by_group: Vec<Vec<&R>> = vec![Vec::new(); groups.max(1) as usize];
    for row in rows {
        let group = group_of(row).unwrap_or(0) as usize;
        if let Some(rows) = by_group.get_mut(group) {
            rows.push(row);
        }
    }
    by_group
}

fn reader_sum(rows: &[&ReaderSample]) -> Option<ReaderFigures> {
    let first = rows.first()?;
    let bytes = rows.iter().map(|r| r.bytes).fold(0, u64::saturating_add);
    let delivered_bytes = sum_some(rows.iter().map(|r| r.delivered_bytes));
    let sum_u32 = |field: fn(&ReaderSample) -> u32| rows.iter().map(|r| u64::from(field(r))).sum();
    Some(ReaderFigures {
        t_s: first.t_s,
        span_s: first.span_s,
        flows: rows.len() as u32,
        bytes,
        read_bps: bps(bytes, first.span_s),
        delivered_bytes,
        net_goodput_bps: delivered_bytes.map(|b| bps(b, first.span_s)),
        rmem_alloc_bytes: sum_u32(|r| r.rmem_alloc),
        rcvbuf_bytes: sum_u32(|r| r.rcvbuf),
        budget_bytes: rows
            .iter()
            .map(|r| r.budget_bytes)
            .fold(0, u64::saturating_add),
        host: None,
    })
}

fn sender_sum(rows: &[&SenderSample]) -> Option<SenderFigures> {
    let first = rows.first()?;
    let acked_bytes = sum_some(rows.iter().map(|r| r.acked_bytes));
    let sum_u32 = |field: fn(&SenderSample) -> u32| rows.iter().map(|r| u64::from(field(r))).sum();
    let rtts: Vec<f64> = rows
        .iter()
        .filter(|r| r.rtt_us > 0)
        .map(|r| f64::from(r.rtt_us))
        .collect();
    Some(SenderFigures {
        t_s: first.t_s,
        span_s: first.span_s,
        flows: rows.len() as u32,
        bytes: rows.iter().map(|r| r.bytes).fold(0, u64::saturating_add),
        acked_bytes,
        acked_bps: acked_bytes.map(|b| bps(b, first.span_s)),
        notsent_bytes: sum_some(rows.iter().map(|r| r.notsent_bytes.map(u64::from))),
        wmem_queued_bytes: sum_u32(|r| r.wmem_queued),
        sndbuf_bytes: sum_u32(|r| r.sndbuf),
        inflight_bytes: rows
            .iter()
            .map(|r| r.inflight_bytes)
            .fold(0, u64::saturating_add),
        cwnd_segs: sum_u32(|r| r.cwnd),
        rtt_mean_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
        min_rtt_us: rows.iter().filter_map(|r| r.min_rtt_us).min(),
        total_retrans: sum_u32(|r| r.total_retrans),
        wakeups: sum_some(rows.iter().map(|r| r.wakeups)),
        host: None,
    })
}

/// The reader's sample of `groups` groups; `None` for a sample without rows.
pub fn reader(
    rows: &[ReaderSample],
    host: &HostSample,
    groups: u32,
    page_size_bytes: u64,
) -> Option<Part<ReaderFigures>> {
    let all: Vec<&ReaderSample> = rows.iter().collect();
    let total = ReaderFigures {
        host: Some(host_figures(host, page_size_bytes)),
        ..reader_sum(&all)?
    };
    let groups = by_group(rows, groups, |r| r.group);
    Some(Part {
        total,
        groups: groups.iter().map(|rows| reader_sum(rows)).collect(),
    })
}

/// The daemon's sample of `groups` groups; `None` for a sample without rows.
pub fn sender(
    rows: &[SenderSample],
    host: &HostSample,
    groups: u32,
    page_size_bytes: u64,
) -> Option<Part<SenderFigures>> {
    let all: Vec<&SenderSample> = rows.iter().collect();
    let total = SenderFigures {
        host: Some(host_figures(host, page_size_bytes)),
        ..sender_sum(&all)?
    };
    let groups = by_group(rows, groups, |r| r.group);
    Some(Part {
        total,
        groups: groups.iter().map(|rows| sender_sum(rows)).collect(),
    })
}
