//! What makes an index provably whole: the manifest records every file's size and sha256 (and,
//! through its document count and widths, what each vector file must hold), written last, so a
//! finished build is exactly the files it lists. It also seals each file as the build left it:
//! its inode and change time (ctime), which any write, truncation, rename over it, copy or
//! `chmod` changes and no user can set back. Opening an index checks every size and header and
//! each file's seal, one `stat` per file whatever its size; a file whose seal does not match is
//! hashed whole (before it is read, or as its vectors load) and refused if its checksum differs.
//! So an index opens in time that does not grow with the corpus, and a file changed since the
//! build is never served unchecked. `rag index --verify` hashes every file regardless, and checks
//! every vector and document.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::flat_file::damaged;

/// Size and checksum of one file of an index, as the build left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub bytes: u64,
    pub sha256: String,
    /// The file as the build left it (absent in indexes from before seals, and for a file
    /// changed too shortly before the seal to tell apart from a later change): without it the
    /// file is hashed whenever it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

/// What a file's inode says about it that only a change to the file changes: the inode number
/// and its change time (set by the kernel on every write, truncation, `chmod`, link or rename of
/// the file; a copy is a new inode). Equal seals mean the bytes are the ones the build hashed,
/// short of writing to the disk beneath the file system (that, `--verify` catches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    pub inode: u64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

impl Seal {
    pub fn of(meta: &Metadata) -> Self {
        Self {
            inode: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }

    /// The seal of a file last changed at least [`SEAL_MARGIN`] before `now`; None for one
    /// changed since, whose change time a later change in the same clock tick could leave equal.
    pub fn settled(meta: &Metadata, now: SystemTime) -> Option<Self> {
        let changed =
            UNIX_EPOCH + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec() as u32);
        (changed < now - SEAL_MARGIN).then(|| Self::of(meta))
    }
}

/// How long before the seal a file must have last changed for its seal to be recorded. The
/// kernel's file times advance in clock ticks (a few milliseconds): a change made in the same
/// tick as the last one before the seal would leave the change time equal. The build waits this
/// long before sealing, so that every file it wrote is sealed.
const SEAL_MARGIN: Duration = Duration::from_millis(25);

/// `path`'s metadata once its last change is at least [`SEAL_MARGIN`] old (waiting that long
/// once where it is newer: weights written just before a build), and when it was read. A hash
/// started after that may be sealed against this time ([`Seal::settled`]).
pub fn settled_metadata(path: &Path) -> Result<(Metadata, SystemTime)> {
    let stat = || std::fs::metadata(path).with_context(|| format!("reading {}", path.display()));
    let meta = stat()?;
    let now = SystemTime::now();
    if Seal::settled(&meta, now).is_some() {
        return Ok((meta, now));
    }
    std::thread::sleep(SEAL_MARGIN);
    Ok((stat()?, SystemTime::now()))
}

impl FileRecord {
    /// Whether the file described by `meta` is, by its seal, the one the build hashed.
    pub fn sealed(&self, meta: &Metadata) -> bool {
        self.seal == Some(Seal::of(meta)) && meta.len() == self.bytes
    }
}

thread_local! {
    static BYTES_HASHED: Cell<u64> = const { Cell::new(0) };
}

/// Bytes of index files and model weights this thread has hashed to check them (the tests of
/// "opening does not hash" read it).
pub fn bytes_hashed() -> u64 {
    BYTES_HASHED.with(Cell::get)
}

/// Counts `bytes` hashed by this thread.
pub(super) fn count_hashed(bytes: u64) {
    BYTES_HASHED.with(|c| c.set(c.get() + bytes));
}

/// The sha256 of a file, counted.
fn hash_file(path: &Path) -> Result<String> {
    let sha = crate::files::sha256_file(path)?;
    count_hashed(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
    Ok(sha)
}

/// Whether the file at `relative` carries no data of the index: tantivy's empty lock files
/// (removed after a build, recorded by older ones) or the ownership marker. Never recorded,
/// never required.
fn carries_no_data(relative: &Path) -> bool {
    relative == Path::new(crate::files::OWNED_MARKER)
        || relative
            .file_name()
            .is_some_and(|name| super::bm25::LOCK_FILES.iter().any(|l| name == *l))
}

/// Every file under `dir` but the files that carry no data and the top-level entries in `skip`
/// (the manifest among them), by path relative to `dir` ('/'-separated).
pub fn record_files(dir: &Path, skip: &[&str]) -> Result<BTreeMap<String, FileRecord>> {
    std::thread::sleep(SEAL_MARGIN);
    let now = SystemTime::now();
    let mut files = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let full = dir.join(&relative);
        for entry in
            std::fs::read_dir(&full).with_context(|| format!("listing {}", full.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", full.display()))?;
            let path = relative.join(entry.file_name());
            if carries_no_data(&path) || skip.iter().any(|s| path == Path::new(s)) {
                continue;
            }
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                let full = dir.join(&path);
                let meta = entry.metadata()?;
                let record = FileRecord {
                    bytes: meta.len(),
                    sha256: crate::files::sha256_file(&full)?,
                    seal: Seal::settled(&meta, now),
                };
                files.insert(key(&path), record);
            }
        }
    }
    Ok(files)
}

fn key(relative: &Path) -> String {
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A build's id: a digest of its files' checksums, so it names exactly what is served.
pub fn build_id(files: &BTreeMap<String, FileRecord>) -> String {
    let mut hasher = Sha256::new();
    for (path, record) in files {
        hasher.update(format!("{path}\0{}\n", record.sha256));
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Which recorded files [`check_recorded`] hashes.
#[derive(Debug, Clone, Copy)]
pub enum Hashing<'a> {
    /// None: sizes (and seals) only.
    None,
    /// Those under these paths or directory prefixes whose seal does not match.
    Unsealed(&'a [&'a str]),
    /// Every file, sealed or not (`--verify`).
    All,
}

/// Checks the size of every recorded file (and that it exists), and the checksum of the files
/// `hashing` names. An index from before checksums is let through with a one-line note on
/// stderr, once per process.
pub fn check_recorded(
    dir: &Path,
    files: &BTreeMap<String, FileRecord>,
    hashing: Hashing,
) -> Result<()> {
    if files.is_empty() {
        static NOTED: AtomicBool = AtomicBool::new(false);
        if !NOTED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "note: {} predates checksums, so only its counts and sizes are checked; `rag index --fresh` adds them",
                dir.display()
            );
        }
        return Ok(());
    }
    for (relative, record) in files {
        if carries_no_data(Path::new(relative)) {
            continue;
        }
        let path = dir.join(relative);
        let meta = std::fs::metadata(&path)
            .map_err(|_| anyhow::anyhow!(damaged(&path, "the file is missing")))?;
        if meta.len() != record.bytes {
            bail!(damaged(
                &path,
                &format!(
                    "it has {} bytes, the manifest says {}",
                    meta.len(),
                    record.bytes
                )
            ));
        }
        let hash = match hashing {
            Hashing::None => false,
            Hashing::Unsealed(under) => {
                !record.sealed(&meta) && under.iter().any(|h| relative.starts_with(h))
            }
            Hashing::All => true,
        };
        if hash {
            check_sha(&path, record, &hash_file(&path)?)?;
        }
    }
    Ok(())
}

/// The sha256 of an open file (one opened with the index, whose path may since name another).
pub fn hash_open_file(file: &std::fs::File, path: &Path) -> Result<String> {
    use std::os::fd::AsRawFd;
    hash_file(Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())))
        .with_context(|| format!("reading {}", path.display()))
}

/// Refuses a file whose checksum is not the recorded one.
pub fn check_sha(path: &Path, record: &FileRecord, sha256: &str) -> Result<()> {
    if sha256 != record.sha256 {
        bail!(damaged(path, "its checksum differs from the manifest's"));
    }
    Ok(())
}

/// The recorded file at `relative` among a manifest's `files`, if the index records its files.
pub fn record<'a>(
    files: &'a BTreeMap<String, FileRecord>,
    relative: &Path,
) -> Option<&'a FileRecord> {
    files.get(&key(relative))
}

/// Whether a stored vector (finite: loading checks that) has unit length, as every stored
/// vector does.
pub fn is_unit(row: &[f32]) -> bool {
    let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
    (norm - 1.0).abs() <= 1e-3
}
