//! plan (being written).
