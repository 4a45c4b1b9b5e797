//! One TCP socket as the kernel sees it: `TCP_INFO`, `SO_MEMINFO`, sock_diag for many at
//! once, the congestion control's own state (`TCP_CC_INFO`), the options oscil sets, the
//! congestion controls on offer, TX timestamps, sendfile.

pub mod cc_info;
pub mod congestion;
pub mod diag;
pub mod meminfo;
pub mod sendfile;
pub mod sockopt;
pub mod tcp_info;
pub mod timestamping;
