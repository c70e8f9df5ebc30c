//! Benchmarks behind `whilly bench`: each measures its own baseline in the same run and reports the ratio.

pub mod console;
pub mod engine;
pub mod queue;
