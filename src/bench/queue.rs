//! `whilly bench queue` (being written).
