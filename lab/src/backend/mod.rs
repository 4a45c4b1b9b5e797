//! Where runs happen: the namespace lab, two real hosts, or a fleet of pairs of them. Each
//! sets up its own hosts and puts them back, so the campaign's loop does not care which.

pub(crate) mod fleet;
pub(crate) mod hosts;
pub(crate) mod netns;
