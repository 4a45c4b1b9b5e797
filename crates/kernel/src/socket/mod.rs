//! One TCP socket as the kernel sees it: `TCP_INFO`, `SO_MEMINFO`, sock_diag for many at
//! once, the options oscil sets, the congestion controls on offer, TX timestamps, sendfile.

pub mod congestion;
pub mod diag;
pub mod meminfo;
pub mod sendfile;
pub mod sockopt;
pub mod tcp_info;
pub mod timestamping;
