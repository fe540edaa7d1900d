//! Reading a file's bytes into the page cache ahead of a memory-mapped use, in large requests.
//! `posix_fadvise(WILLNEED)` and `readahead(2)` do not do it: Linux caps them at the device's
//! readahead window (128 KiB here), and a mapping faiss marks MADV_RANDOM then reads the rest
//! one 4 KiB page per disk request.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Bytes per read: large enough for the disk to stream, small enough to stay in cache.
const CHUNK: u64 = 8 << 20;

/// Reads `[start, start + len)` of `file` (up to its end) and discards it, leaving it cached.
/// Chunks whose pages are all cached already are not read again (a search of a file the last
/// one left cached copied 1.5 GB for nothing at 1M x 384). Returns the bytes it read.
pub fn warm(file: &File, path: &Path, start: u64, len: u64) -> Result<u64> {
    let size = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let end = start.saturating_add(len).min(size);
    if start >= end {
        return Ok(0);
    }
    let cached = Residency::of(file, start, end)
        .with_context(|| format!("checking which pages of {} are cached", path.display()))?;
    let mut buf = Vec::new();
    let mut read = 0;
    let mut at = start;
    while at < end {
        let chunk_end = (at + CHUNK).min(end);
        if !cached.all(at, chunk_end) {
            buf.resize((chunk_end - at) as usize, 0);
            let got = read_up_to(file, &mut buf, at)
                .with_context(|| format!("reading {}", path.display()))?;
            read += got as u64;
            if got < buf.len() {
                break; // the file shrank meanwhile: nothing more to read
            }
        }
        at = chunk_end;
    }
    Ok(read)
}

/// Fills `buf` from `at` as far as the file goes; returns the bytes read.
fn read_up_to(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], at + done as u64)? {
            0 => break,
            got => done += got,
        }
    }
    Ok(done)
}

/// Which pages of a range of a file are in the page cache, by `mincore(2)`, at one moment.
struct Residency {
    /// File offset of the first page.
    base: u64,
    page: u64,
    /// One byte per page; bit 0 set where it is cached.
    pages: Vec<u8>,
}

impl Residency {
    fn of(file: &File, start: u64, end: u64) -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let base = start / page * page;
        // SAFETY: the mapping is only handed to mincore, never read, so a change to the file
        // meanwhile cannot be observed through it.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(base)
                .len((end - base) as usize)
                .map(file)?
        };
        let mut pages = vec![0u8; (end - base).div_ceil(page) as usize];
        // SAFETY: `map` is a live page-aligned mapping (its offset is a page multiple) of
        // `map.len()` bytes, and `pages` has one byte per page of it.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr() as *mut libc::c_void,
                map.len(),
                pages.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { base, page, pages })
    }

    /// Whether every page of `[from, to)` was cached.
    fn all(&self, from: u64, to: u64) -> bool {
        let first = ((from - self.base) / self.page) as usize;
        let last = (to - self.base).div_ceil(self.page) as usize;
        self.pages[first..last].iter().all(|p| p & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Drops `[start, start + len)` of a synced file from the page cache.
    fn evict(file: &File, start: u64, len: u64) {
        // SAFETY: a valid descriptor; the call only advises the kernel.
        let rc = unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                start as i64,
                len as i64,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0);
    }

    fn cached_bytes(file: &File, len: u64) -> u64 {
        let r = Residency::of(file, 0, len).unwrap();
        r.pages.iter().filter(|p| *p & 1 == 1).count() as u64 * r.page
    }

    #[test]
    fn reads_only_the_chunks_not_already_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let len = 2 * CHUNK + 12_345;
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; len as usize]).unwrap();
        file.sync_all().unwrap();
        let file = File::open(&path).unwrap();

        evict(&file, 0, 0);
        // A file system that keeps its pages regardless (tmpfs) cannot show the difference.
        assert!(
            cached_bytes(&file, len) < CHUNK,
            "{} was not evicted: put the test's temp dir on a disk",
            path.display()
        );
        assert_eq!(warm(&file, &path, 0, len).unwrap(), len);
        assert!(cached_bytes(&file, len) >= len);
        assert_eq!(
            warm(&file, &path, 0, len).unwrap(),
            0,
            "a cached file is read again"
        );

        // Only the middle chunk gone: only it is read; a range past the end stops at the end.
        evict(&file, CHUNK, CHUNK);
        assert_eq!(warm(&file, &path, 0, u64::MAX).unwrap(), CHUNK);
        evict(&file, 0, 0);
        assert_eq!(warm(&file, &path, CHUNK + 1, len).unwrap(), len - CHUNK - 1);
        assert_eq!(warm(&file, &path, len, 10).unwrap(), 0);
    }
}
