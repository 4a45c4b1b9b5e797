//! Reaching a host, wherever it is (this machine, a namespace, over ssh): one place,
//! because every backend goes through it and it is where untrusted input comes back
//! (command output, another campaign's lock, a copied run directory).

pub(crate) mod capture;
pub(crate) mod host;
pub(crate) mod lock;
pub(crate) mod unpack;
