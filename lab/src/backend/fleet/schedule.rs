//! The fleet's schedule: every pair's runs packed into rounds in which no host is in two
//! runs (a sender or a receiver is busy for its whole run), as many pairs per round as a
//! greedy matching finds: the pairs whose hosts have the most runs left go first, a pair
//! joins when neither of its hosts is taken yet, and the greedy pass is tried from each
//! pair as the first pick. Not guaranteed the fewest rounds (that is edge colouring), but
//! on full meshes of 4 to 8 hosts and on hubs it meets the lower bound (the tests check).
//! Pure: the runs and their pairs in, rounds of run indices out.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::pairs::Pair;

/// Rounds of indices into `runs`: within a round no host twice, each pair's runs in the
/// order given (so a shuffled plan stays shuffled per pair).
pub fn rounds(runs: &[(usize, &Pair)]) -> Vec<Vec<usize>> {
    let mut pairs: Vec<&Pair> = Vec::new();
    let mut queues: Vec<VecDeque<usize>> = Vec::new();
    for &(run, pair) in runs {
        match pairs.iter().position(|p| *p == pair) {
            Some(i) => queues[i].push_back(run),
            None => {
                pairs.push(pair);
                queues.push(VecDeque::from([run]));
            }
        }
    }
    let mut out = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        let lengths: Vec<usize> = queues.iter().map(VecDeque::len).collect();
        let chosen = one_round(&pairs, &lengths);
        let mut round: Vec<usize> = chosen
            .iter()
            .map(|&i| queues[i].pop_front().expect("chosen pairs have runs left"))
            .collect();
        round.sort_unstable();
        out.push(round);
    }
    out
}

/// The pairs of one round: a greedy matching over the pairs with runs left, heaviest first
/// (weight: the runs left of both hosts, then of the pair), tried once from each pair as
/// the first pick; the largest (then heaviest) wins.
fn one_round(pairs: &[&Pair], left: &[usize]) -> Vec<usize> {
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for (p, &n) in pairs.iter().zip(left) {
        *load.entry(&p.sender).or_default() += n;
        *load.entry(&p.receiver).or_default() += n;
    }
    let weight = |i: usize| load[pairs[i].sender.as_str()] + load[pairs[i].receiver.as_str()];
    let mut order: Vec<usize> = (0..pairs.len()).filter(|&i| left[i] > 0).collect();
    // Stable: equal weights keep the pairs' order.
    order.sort_by_key(|&i| Reverse((weight(i), left[i])));
    let mut best: Option<(usize, usize, Vec<usize>)> = None;
    for first in 0..order.len() {
        let mut busy: BTreeSet<&str> = BTreeSet::new();
        let mut chosen = Vec::new();
        for &i in order[first..].iter().chain(&order[..first]) {
            let (s, r) = (pairs[i].sender.as_str(), pairs[i].receiver.as_str());
            if !busy.contains(s) && !busy.contains(r) {
                busy.extend([s, r]);
                chosen.push(i);
            }
        }
        let total: usize = chosen.iter().map(|&i| weight(i)).sum();
        if best
            .as_ref()
            .is_none_or(|(n, w, _)| (chosen.len(), total) > (*n, *w))
        {
            best = Some((chosen.len(), total, chosen));
        }
    }
    best.map(|(_, _, chosen)| chosen).unwrap_or_default()
}

/// The fewest rounds any schedule needs: the runs of the busiest host.
pub fn lower_bound(runs: &[(usize, &Pair)]) -> usize {
    let mut count: BTreeMap<&str, usize> = Default::default();
    for (_, pair) in runs {
        *count.entry(&pair.sender).or_default() += 1;
        *count.entry(&pair.receiver).or_default() += 1;
    }
    count.values().copied().max().unwrap_or(0)
}

/// A round lasts as long as its longest run.
pub fn wall_time(rounds: &[Vec<usize>], duration: impl Fn(usize) -> Duration) -> Duration {
    rounds
        .iter()
        .map(|round| round.iter().map(|&i| duration(i)).max().unwrap_or_default())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(s: &str, r: &str) -> Pair {
        Pair {
            sender: s.into(),
            receiver: r.into(),
        }
    }

    /// `per_pair` runs for each pair, pair-major (as the fleet plans them).
    fn runs(pairs: &[Pair], per_pair: usize) -> Vec<(usize, &Pair)> {
        pairs
            .iter()
            .flat_map(|p| std::iter::repeat_n(p, per_pair))
            .enumerate()
            .collect()
    }

    /// Every run once, no host twice in a round, each pair's runs in order.
    fn check(runs: &[(usize, &Pair)], rounds: &[Vec<usize>]) {
        let mut seen: Vec<usize> = rounds.concat();
        seen.sort_unstable();
        assert_eq!(seen, (0..runs.len()).collect::<Vec<_>>());
        for round in rounds {
            let mut hosts: Vec<&str> = round
                .iter()
                .flat_map(|&i| [runs[i].1.sender.as_str(), runs[i].1.receiver.as_str()])
                .collect();
            let n = hosts.len();
            hosts.sort_unstable();
            hosts.dedup();
            assert_eq!(hosts.len(), n, "a host twice in {round:?}");
        }
        let flat: Vec<usize> = rounds.concat();
        for (_, p) in runs {
            let mine: Vec<usize> = flat.iter().copied().filter(|&i| runs[i].1 == *p).collect();
            let mut sorted = mine.clone();
            sorted.sort_unstable();
            assert_eq!(mine, sorted, "{p}'s runs out of order");
        }
    }

    fn all_pairs(names: &[&str]) -> Vec<Pair> {
        names
            .iter()
            .flat_map(|s| {
                names
                    .iter()
                    .filter(move |r| r != &s)
                    .map(move |r| pair(s, r))
            })
            .collect()
    }

    #[test]
    fn a_four_host_mesh_runs_two_pairs_a_round_in_the_fewest_rounds() {
        let pairs = all_pairs(&["a", "b", "c", "d"]);
        let runs = runs(&pairs, 2);
        let rounds = rounds(&runs);
        check(&runs, &rounds);
        // Each host is in 6 pairs x 2 runs = 12 runs: 12 rounds at least, 2 runs each.
        assert_eq!(lower_bound(&runs), 12);
        assert_eq!(rounds.len(), 12);
        assert!(rounds.iter().all(|r| r.len() == 2), "{rounds:?}");
    }

    #[test]
    fn a_hub_runs_one_pair_at_a_time_and_disjoint_pairs_all_at_once() {
        let hub: Vec<Pair> = ["b", "c", "d"]
            .iter()
            .flat_map(|h| [pair("a", h), pair(h, "a")])
            .collect();
        let runs_hub = runs(&hub, 3);
        let r = rounds(&runs_hub);
        check(&runs_hub, &r);
        assert_eq!(r.len(), 18);
        let disjoint = [pair("a", "b"), pair("c", "d"), pair("e", "f")];
        let runs_d = runs(&disjoint, 4);
        let r = rounds(&runs_d);
        check(&runs_d, &r);
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|round| round.len() == 3));
    }

    #[test]
    fn meshes_of_five_six_and_eight_hosts_take_the_fewest_rounds() {
        for names in [
            &["a", "b", "c", "d", "e", "f", "g", "h"][..],
            &["a", "b", "c", "d", "e"][..],
            &["a", "b", "c", "d", "e", "f"][..],
        ] {
            let pairs = all_pairs(names);
            let runs = runs(&pairs, 2);
            let rounds = rounds(&runs);
            check(&runs, &rounds);
            // Five hosts: at most two pairs at once, so 40 runs take 20 rounds although no
            // host is in more than 16 runs.
            let best = lower_bound(&runs).max(runs.len().div_ceil(names.len() / 2));
            assert_eq!(rounds.len(), best, "{} hosts", names.len());
        }
    }

    #[test]
    fn the_wall_time_is_the_longest_run_of_each_round() {
        let rounds = vec![vec![0, 1], vec![2]];
        let secs = [3, 5, 2];
        let total = wall_time(&rounds, |i| Duration::from_secs(secs[i]));
        assert_eq!(total, Duration::from_secs(7));
    }
}
