//! Who may hold a connection before authenticating, after sshd's `MaxStartups` and
//! `PerSourceMaxStartups`: a cap in all and per source, with random early drop as the total
//! fills; and failed authentications, which make the next refusal to the same source slower.
//!
//! Unlike sshd, a connection the caps would refuse first takes the place of the oldest one
//! that has been unauthenticated for longer than its grace ([`Graces`]): a reader sends its
//! hello as it connects and authenticates within two round trips, so sockets held open go
//! stale, and a scanner holding them up to the caps cannot keep a reader out.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::gate::refusals::Why;

/// sshd's `start:rate:full`: from `start` unauthenticated connections on, refuse a new one
/// with probability `rate_percent`%, rising linearly to 100% at `full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupLimits {
    pub start: usize,
    pub rate_percent: u32,
    pub full: usize,
}

impl Default for StartupLimits {
    fn default() -> Self {
        StartupLimits {
            start: 10,
            rate_percent: 30,
            full: 100,
        }
    }
}

/// Why a `--max-startups` value is not [`StartupLimits`]; each quotes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupLimitsError {
    #[error("expected START:RATE:FULL (10:30:100), found {0:?}")]
    Form(String),
    #[error("{0:?}: need 0 < FULL, START <= FULL and RATE <= 100")]
    Range(String),
    /// START 0: connections dropped before any is pending, RATE% of them or (at 100) all.
    #[error("{0:?}: START 0 refuses connections before any is pending (every one at RATE 100): give START of at least 1")]
    StartZero(String),
}

impl std::str::FromStr for StartupLimits {
    type Err = StartupLimitsError;

    /// `START:RATE:FULL` (`10:30:100`), or `FULL` alone (no early drop).
    fn from_str(text: &str) -> Result<Self, StartupLimitsError> {
        let number = |part: &str| {
            part.parse::<usize>()
                .map_err(|_| StartupLimitsError::Form(text.to_owned()))
        };
        let parts: Vec<&str> = text.split(':').collect();
        let limits = match parts[..] {
            [full] => StartupLimits {
                start: number(full)?,
                rate_percent: 100,
                full: number(full)?,
            },
            [start, rate, full] => StartupLimits {
                start: number(start)?,
                rate_percent: u32::try_from(number(rate)?).unwrap_or(u32::MAX),
                full: number(full)?,
            },
            _ => return Err(StartupLimitsError::Form(text.to_owned())),
        };
        if limits.full == 0 || limits.start > limits.full || limits.rate_percent > 100 {
            return Err(StartupLimitsError::Range(text.to_owned()));
        }
        if limits.start == 0 {
            return Err(StartupLimitsError::StartZero(text.to_owned()));
        }
        Ok(limits)
    }
}

/// Whether random early drop refuses a new connection while `pending` are unauthenticated;
/// `roll` is uniform in [0, 1).
pub(crate) fn early_drop(limits: &StartupLimits, pending: usize, roll: f64) -> bool {
    if pending < limits.start {
        return false;
    }
    if pending >= limits.full {
        return true;
    }
    let rate = f64::from(limits.rate_percent) / 100.0;
    let climb = (pending - limits.start) as f64 / (limits.full - limits.start) as f64;
    roll < rate + (1.0 - rate) * climb
}

/// A peer's source: its IPv4 address, or the /64 of its IPv6 address (one host's share).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Source(u128);

impl Source {
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Source(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Source((u128::from(v6) >> 64) | 1 << 127),
        }
    }
}

/// Failed authentications of a source halve every minute.
const PENALTY_HALF_LIFE: Duration = Duration::from_secs(60);
/// The refusal after one failure waits this long, doubling with each further failure...
const PENALTY_BASE: Duration = Duration::from_millis(200);
/// ...up to this (a pre-auth deadline's worth).
const PENALTY_MAX: Duration = Duration::from_secs(3);
/// Sources remembered at most, so a spread-out attacker cannot grow the table without bound.
const MAX_TRACKED_SOURCES: usize = 10_000;

/// The decayed failure count of a source at `now`.
fn decayed(score: f64, since: Instant, now: Instant) -> f64 {
    let halves =
        now.saturating_duration_since(since).as_secs_f64() / PENALTY_HALF_LIFE.as_secs_f64();
    score * 0.5f64.powf(halves)
}

/// How long the refusal after a failure waits when the source has `failures` (decayed).
pub(crate) fn penalty(failures: f64) -> Duration {
    let doublings = (failures - 1.0).round().clamp(0.0, 16.0);
    PENALTY_BASE.mul_f64(2f64.powf(doublings)).min(PENALTY_MAX)
}

/// How long an unauthenticated connection keeps its place against newer ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Graces {
    /// While it has sent nothing: a reader's hello follows its connect at once.
    pub(crate) silent: Duration,
    /// Once it has sent something: time for the rest of the handshake.
    pub(crate) speaking: Duration,
}

impl Graces {
    /// A twelfth and a third of the pre-authentication deadline (250 ms and 1 s of 3 s).
    pub(crate) fn of(preauth_timeout: Duration) -> Self {
        Graces {
            silent: preauth_timeout / 12,
            speaking: preauth_timeout / 3,
        }
    }

    fn stale(&self, waiting: &Waiting, now: Instant) -> bool {
        let grace = if waiting.spoke {
            self.speaking
        } else {
            self.silent
        };
        now.saturating_duration_since(waiting.since) >= grace
    }
}

/// An unauthenticated connection that may be asked to make way.
struct Waiting {
    source: Source,
    since: Instant,
    /// It has sent its first bytes.
    spoke: bool,
    evict: Arc<Notify>,
}

#[derive(Default)]
struct State {
    pending: usize,
    /// Connections that may make way, oldest first (by ticket number); vouched-for data
    /// connections are not among them.
    waiting: BTreeMap<u64, Waiting>,
    next_ticket: u64,
    by_source: HashMap<Source, usize>,
    /// Failures per source: (score, when it was last updated).
    failures: HashMap<Source, (f64, Instant)>,
    /// Data connections that authenticated sessions in setup still await, per source: a
    /// reader opening many flows at once must not meet the caps meant for strangers.
    expected: HashMap<Source, usize>,
}

/// The pre-authentication gate shared by every connection.
pub(crate) struct Admission {
    limits: StartupLimits,
    per_source: usize,
    graces: Graces,
    state: Mutex<State>,
}

/// A session's claim on the gate for its own data connections; withdrawn when dropped.
/// Another session from the same source shares the count, so a withdrawal may end its
/// claim early: its remaining connections then meet the ordinary caps, never more.
pub(crate) struct Expected {
    admission: Arc<Admission>,
    source: Source,
    flows: usize,
}

impl Drop for Expected {
    fn drop(&mut self) {
        let mut state = self.admission.state();
        if let Some(left) = state.expected.get_mut(&self.source) {
            *left = left.saturating_sub(self.flows);
            if *left == 0 {
                state.expected.remove(&self.source);
            }
        }
    }
}

/// A connection's place among the unauthenticated; given back when dropped.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    source: Source,
    id: u64,
    /// Notified when a newer connection takes this one's place; `None` when vouched for.
    evict: Option<Arc<Notify>>,
}

impl Ticket {
    /// Notes that the connection has sent its first bytes: it keeps its place longer.
    pub(crate) fn spoke(&self) {
        if let Some(waiting) = self.admission.state().waiting.get_mut(&self.id) {
            waiting.spoke = true;
        }
    }

    /// Completes when the connection must make way for a newer one (never, when vouched).
    pub(crate) async fn evicted(&self) {
        match &self.evict {
            Some(evict) => evict.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl State {
    /// Asks the oldest connection past its grace at `now` (of `only` source, when given) to
    /// make way; false when there is none. Its ticket still counts until its task drops it,
    /// at once.
    fn evict_oldest(&mut self, graces: &Graces, now: Instant, only: Option<Source>) -> bool {
        let shortest = graces.silent.min(graces.speaking);
        let found = self
            .waiting
            .iter()
            .take_while(|(_, w)| now.saturating_duration_since(w.since) >= shortest)
            .find(|(_, w)| graces.stale(w, now) && only.is_none_or(|source| w.source == source))
            .map(|(id, _)| *id);
        let Some(waiting) = found.and_then(|id| self.waiting.remove(&id)) else {
            return false;
        };
        waiting.evict.notify_one();
        true
    }
}

impl Admission {
    pub(crate) fn new(limits: StartupLimits, per_source: usize, graces: Graces) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            per_source,
            graces,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ticket for a new connection from `ip` at `now`, or why it is refused; `roll` is
    /// uniform in [0, 1) and decides random early drop. Where a cap would refuse it, it
    /// takes the place of the oldest stale connection (of its source, for the per-source
    /// cap) if there is one.
    pub(crate) fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        roll: f64,
        now: Instant,
    ) -> Result<Ticket, Why> {
        let source = Source::of(ip);
        let mut state = self.state();
        let vouched = match state.expected.get_mut(&source) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        };
        if !vouched {
            let source_full = state.by_source.get(&source).copied().unwrap_or(0) >= self.per_source;
            if source_full && !state.evict_oldest(&self.graces, now, Some(source)) {
                return Err(Why::SourceFull);
            }
            let dropped = !source_full && early_drop(&self.limits, state.pending, roll);
            if dropped && !state.evict_oldest(&self.graces, now, None) {
                return Err(Why::Full);
            }
        }
        state.pending += 1;
        *state.by_source.entry(source).or_default() += 1;
        let id = state.next_ticket;
        state.next_ticket += 1;
        let evict = (!vouched).then(|| {
            let evict = Arc::new(Notify::new());
            let waiting = Waiting {
                source,
                since: now,
                spoke: false,
                evict: evict.clone(),
            };
            state.waiting.insert(id, waiting);
            evict
        });
        Ok(Ticket {
            admission: self.clone(),
            source,
            id,
            evict,
        })
    }

    /// An authenticated session from `ip` awaits `flows` data connections: that many pass
    /// the caps until the returned guard is dropped (the session has them, or gave up).
    pub(crate) fn expect(self: &Arc<Self>, ip: IpAddr, flows: usize) -> Expected {
        let source = Source::of(ip);
        *self.state().expected.entry(source).or_default() += flows;
        Expected {
            admission: self.clone(),
            source,
            flows,
        }
    }

    /// Records a failed authentication from `ip`; returns how long to wait before saying so.
    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) -> Duration {
        let source = Source::of(ip);
        let mut state = self.state();
        if state.failures.len() >= MAX_TRACKED_SOURCES {
            state
                .failures
                .retain(|_, (score, at)| decayed(*score, *at, now) >= 0.5);
        }
        let before = state
            .failures
            .get(&source)
            .map_or(0.0, |&(s, at)| decayed(s, at, now));
        if state.failures.len() < MAX_TRACKED_SOURCES || before > 0.0 {
            state.failures.insert(source, (before + 1.0, now));
        }
        penalty(before + 1.0)
    }

    /// Unauthenticated connections held now.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.state().pending
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.state();
        state.pending -= 1;
        state.waiting.remove(&self.id);
        if let Some(n) = state.by_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                state.by_source.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;

    const GRACE: Graces = Graces {
        silent: Duration::from_millis(250),
        speaking: Duration::from_secs(1),
    };

    const SSHD: StartupLimits = StartupLimits {
        start: 10,
        rate_percent: 30,
        full: 60,
    };

    #[test]
    fn early_drop_follows_sshd() {
        // Below start nothing is dropped, at start 30%, halfway 65%, at full everything.
        assert!(!early_drop(&SSHD, 9, 0.0));
        assert!(early_drop(&SSHD, 10, 0.29) && !early_drop(&SSHD, 10, 0.31));
        assert!(early_drop(&SSHD, 35, 0.64) && !early_drop(&SSHD, 35, 0.66));
        assert!(early_drop(&SSHD, 60, 0.999));
    }

    #[test]
    fn limits_parse_like_sshd() {
        assert_eq!("10:30:60".parse::<StartupLimits>().unwrap(), SSHD);
        let full_only: StartupLimits = "50".parse().unwrap();
        assert!(!early_drop(&full_only, 49, 0.0) && early_drop(&full_only, 50, 0.99));
        for bad in ["", "10:30", "a:b:c", "70:30:60", "10:130:60", "0"] {
            assert!(bad.parse::<StartupLimits>().is_err(), "{bad}");
        }
        assert_eq!(
            "10:30".parse::<StartupLimits>().unwrap_err().to_string(),
            "expected START:RATE:FULL (10:30:100), found \"10:30\""
        );
        assert_eq!(
            "70:30:60".parse::<StartupLimits>().unwrap_err().to_string(),
            "\"70:30:60\": need 0 < FULL, START <= FULL and RATE <= 100"
        );
    }

    #[test]
    fn a_session_in_setup_vouches_for_its_own_flows() {
        let gate = Admission::new(
            StartupLimits {
                start: 2,
                rate_percent: 100,
                full: 2,
            },
            2,
            GRACE,
        );
        let reader: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<_> = (0..2)
            .map(|_| gate.admit(reader, 0.5, Instant::now()).unwrap())
            .collect();
        assert_eq!(
            gate.admit(reader, 0.5, Instant::now()).err(),
            Some(Why::SourceFull)
        );
        let expected = gate.expect(reader, 3);
        let flows: Vec<_> = (0..3)
            .map(|_| gate.admit(reader, 0.5, Instant::now()).unwrap())
            .collect();
        // Three vouched for, no more; and a stranger still meets the full gate.
        assert_eq!(
            gate.admit(reader, 0.5, Instant::now()).err(),
            Some(Why::SourceFull)
        );
        assert_eq!(
            gate.admit("192.0.2.9".parse().unwrap(), 0.5, Instant::now())
                .err(),
            Some(Why::Full)
        );
        drop(expected);
        drop((held, flows));
        assert_eq!(gate.pending(), 0);
        let _again = gate.expect(reader, 1);
        drop(_again);
        assert!(gate.state().expected.is_empty());
    }

    #[test]
    fn tickets_count_per_source_and_in_all_and_come_back() {
        let gate = Admission::new(
            StartupLimits {
                start: 3,
                rate_percent: 100,
                full: 3,
            },
            2,
            GRACE,
        );
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "::ffff:192.0.2.2".parse().unwrap();
        let first = gate.admit(a, 0.5, Instant::now()).unwrap();
        let _second = gate.admit(a, 0.5, Instant::now()).unwrap();
        assert_eq!(
            gate.admit(a, 0.5, Instant::now()).err(),
            Some(Why::SourceFull)
        );
        let _third = gate.admit(b, 0.5, Instant::now()).unwrap();
        assert_eq!(
            gate.admit("192.0.2.3".parse().unwrap(), 0.5, Instant::now())
                .err(),
            Some(Why::Full)
        );
        drop(first);
        assert_eq!(gate.pending(), 2);
        assert!(gate.admit(a, 0.5, Instant::now()).is_ok());
    }

    #[test]
    fn ipv6_sources_are_counted_per_64() {
        let one: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let same: IpAddr = "2001:db8:0:1:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        assert_eq!(Source::of(one), Source::of(same));
        assert_ne!(Source::of(one), Source::of(other));
        assert_ne!(
            Source::of("0.0.0.1".parse().unwrap()),
            Source::of("::1".parse().unwrap())
        );
    }

    #[test]
    fn failures_slow_down_and_decay() {
        let gate = Admission::new(StartupLimits::default(), 10, GRACE);
        let ip: IpAddr = "198.51.100.7".parse().unwrap();
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..6).map(|_| gate.failed(ip, t0)).collect();
        assert_eq!(waits[0], Duration::from_millis(200));
        assert_eq!(waits[1], Duration::from_millis(400));
        assert_eq!(waits[3], Duration::from_millis(1600));
        assert_eq!(waits[5], Duration::from_secs(3));
        // Ten minutes later six failures have halved ten times: the next is a first again.
        assert_eq!(
            gate.failed(ip, t0 + Duration::from_secs(600)),
            Duration::from_millis(200)
        );
        // Another source is not slowed by this one's failures.
        assert_eq!(
            gate.failed("198.51.100.8".parse().unwrap(), t0),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn stale_connections_make_way_and_fresh_ones_do_not() {
        let limits = StartupLimits {
            start: 3,
            rate_percent: 100,
            full: 3,
        };
        let gate = Admission::new(limits, 2, GRACE);
        let t0 = Instant::now();
        let scanner: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let reader: IpAddr = "198.51.100.1".parse().unwrap();
        let held = [
            gate.admit(scanner, 0.5, t0).unwrap(),
            gate.admit(scanner, 0.5, t0).unwrap(),
            gate.admit(other, 0.5, t0).unwrap(),
        ];
        // All but the oldest have spoken: they keep their places for the longer grace.
        held[1].spoke();
        held[2].spoke();
        // Within the silent grace, the caps refuse as before.
        let soon = t0 + GRACE.silent / 2;
        assert_eq!(gate.admit(scanner, 0.5, soon).err(), Some(Why::SourceFull));
        assert_eq!(gate.admit(reader, 0.5, soon).err(), Some(Why::Full));
        // After it, a newcomer from the scanner's source takes the place of its oldest
        // silent one; a second finds none past its grace.
        let later = t0 + GRACE.silent;
        let newcomer = gate.admit(scanner, 0.5, later).unwrap();
        assert!(is_told(&held[0]) && !is_told(&held[1]) && !is_told(&held[2]));
        assert_eq!(gate.admit(scanner, 0.5, later).err(), Some(Why::SourceFull));
        drop(held);
        drop(newcomer);
        assert_eq!(gate.pending(), 0);
        assert!(gate.state().waiting.is_empty());
        // The global cap: the reader takes the oldest place past its grace, of any source;
        // a speaking one only once the longer grace has passed.
        let old = [
            gate.admit(scanner, 0.5, t0).unwrap(),
            gate.admit(other, 0.5, t0).unwrap(),
            gate.admit(other, 0.5, t0).unwrap(),
        ];
        old[0].spoke();
        old[2].spoke();
        let reader_in = gate.admit(reader, 0.5, later).unwrap();
        reader_in.spoke();
        assert!(!is_told(&old[0]) && is_told(&old[1]) && !is_told(&old[2]));
        let then = t0 + GRACE.speaking;
        let _next = gate.admit(reader, 0.5, then).unwrap();
        assert!(is_told(&old[0]) && !is_told(&old[2]));
        let third: IpAddr = "198.51.100.3".parse().unwrap();
        let _last = gate.admit(third, 0.5, then).unwrap();
        assert!(is_told(&old[2]));
        // Nothing past its grace is left: refused.
        assert_eq!(
            gate.admit("198.51.100.4".parse().unwrap(), 0.5, then).err(),
            Some(Why::Full)
        );
    }

    /// True when the ticket's connection was asked to make way.
    fn is_told(ticket: &Ticket) -> bool {
        let evicted = std::pin::pin!(ticket.evicted());
        let waker = std::task::Waker::noop();
        evicted
            .poll(&mut std::task::Context::from_waker(waker))
            .is_ready()
    }
}
