//! Postgres store (being written).
