//! The wire between oscil's reader and daemon, and only the wire: the framed control
//! messages and the data connections' hellos, the handshake (pure state machines), the
//! proof and the key, and the session request with its rules. What the messages carry
//! (rows, host facts, socket options, the pattern) is `oscil-model`'s.

pub mod auth;
pub mod control;
pub mod key;
pub mod proof;
pub mod request;
