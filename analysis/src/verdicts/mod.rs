//! The verdicts on the figures: each configuration against the baseline, and the
//! recommendation per path with its words and sysctl files, and which figures are shown
//! (`shown_figures`, decided from the verdicts); the charts and the written files say them.

pub(crate) mod groups;
pub(crate) mod recommend;
pub(crate) mod recommendation_text;
pub(crate) mod shown_figures;
pub(crate) mod slow_start;
pub(crate) mod verdict;
