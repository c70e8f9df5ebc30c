//! SQLite store (being written).
