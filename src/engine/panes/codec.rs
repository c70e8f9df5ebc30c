//! How a remote pane's bytes travel: deflate when it pays, plain otherwise.

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use std::io::{Read, Write};

/// Smaller pieces are sent as they are: compressing them saves nothing.
const COMPRESS_FROM: usize = 256;
/// A chunk never inflates beyond this (a corrupt or hostile row cannot eat the viewer's memory).
pub(super) const MAX_INFLATED: u64 = 16 * 1024 * 1024;

/// `(compressed, data)` for `bytes`.
pub(super) fn encode(bytes: &[u8]) -> (bool, Vec<u8>) {
    if bytes.len() < COMPRESS_FROM {
        return (false, bytes.to_vec());
    }
    let mut enc = DeflateEncoder::new(Vec::with_capacity(bytes.len() / 3), Compression::fast());
    match enc.write_all(bytes).and_then(|()| enc.finish()) {
        Ok(z) if z.len() < bytes.len() => (true, z),
        _ => (false, bytes.to_vec()),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a remote pane chunk does not inflate: {0}")]
pub(super) struct DecodeError(String);

/// The bytes of a chunk as the publisher read them.
pub(super) fn decode(compressed: bool, data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    if !compressed {
        return Ok(data.to_vec());
    }
    let mut out = Vec::with_capacity(data.len() * 3);
    DeflateDecoder::new(data)
        .take(MAX_INFLATED)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_compresses_only_when_it_pays() {
        let small = b"\x1b[1mhi\x1b[m".to_vec();
        assert_eq!(encode(&small), (false, small.clone()));
        let screen: Vec<u8> = b"\x1b[32mok\x1b[m line of output\r\n".repeat(200);
        let (z, data) = encode(&screen);
        assert!(z && data.len() < screen.len() / 4, "{}", data.len());
        assert_eq!(decode(z, &data).expect("inflate"), screen);
        assert_eq!(decode(false, &small).expect("plain"), small);
        assert!(decode(true, b"not deflate at all").is_err());
    }
}
