//! Per-event evidence from tracefs: the instances oscil owns, and the tracer that turns
//! their ACK, retransmit and autotuning events into rows.

pub mod tracefs;
pub mod tracer;
