//! Reading a file's bytes into the page cache ahead of a memory-mapped use, in large requests.
//! `posix_fadvise(WILLNEED)` and `readahead(2)` do not do it: Linux caps them at the device's
//! readahead window (128 KiB here), and a mapping faiss marks MADV_RANDOM then reads the rest
//! one 4 KiB page per disk request.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Bytes per read: large enough for the disk to stream, small enough to stay in cache.
const CHUNK: usize = 8 << 20;

/// Reads `[start, start + len)` of `file` (up to its end) and discards it, leaving it cached.
pub fn warm(file: &File, path: &Path, start: u64, len: u64) -> Result<()> {
    let mut buf = vec![0u8; CHUNK.min(len as usize)];
    let mut at = start;
    let end = start.saturating_add(len);
    while at < end {
        let want = ((end - at) as usize).min(buf.len());
        let got = file
            .read_at(&mut buf[..want], at)
            .with_context(|| format!("reading {}", path.display()))?;
        if got == 0 {
            break;
        }
        at += got as u64;
    }
    Ok(())
}
