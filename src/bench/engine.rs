//! `whilly bench engine` (being written).
