//! Turns run directories into PNG charts and summary tables
