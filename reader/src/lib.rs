//! The receiver: runs the oscillating reading pattern, samples its side, collects the daemon's samples, writes a run directory
