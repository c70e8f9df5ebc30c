//! pty (being written).
