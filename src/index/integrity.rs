//! What makes an index provably whole: the manifest records every file's size and sha256 (and,
//! through its document count and widths, what each vector file must hold), written last, so a
//! finished build is exactly the files it lists. Opening an index checks every size and header
//! and the checksums of what it reads whole (the document store, BM25, the PCAs); vector files
//! are hashed as they are loaded. `rag index --verify` checks everything, vectors included, row
//! by row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::flat_file::damaged;
use super::manifest::{Manifest, MANIFEST_FILE};

/// Size and checksum of one file of an index, as the build left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub bytes: u64,
    pub sha256: String,
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

/// Every file under `dir` but the manifest, the files that carry no data and the top-level
/// entries in `skip`, by path relative to `dir` ('/'-separated).
pub fn record_files(dir: &Path, skip: &[&str]) -> Result<BTreeMap<String, FileRecord>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let full = dir.join(&relative);
        for entry in
            std::fs::read_dir(&full).with_context(|| format!("listing {}", full.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", full.display()))?;
            let path = relative.join(entry.file_name());
            if path == Path::new(MANIFEST_FILE)
                || carries_no_data(&path)
                || skip.iter().any(|s| path == Path::new(s))
            {
                continue;
            }
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                let full = dir.join(&path);
                let record = FileRecord {
                    bytes: entry.metadata()?.len(),
                    sha256: crate::files::sha256_file(&full)?,
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

/// A generation's id: a digest of its files' checksums, so it names exactly what is served.
pub fn generation_id(files: &BTreeMap<String, FileRecord>) -> String {
    let mut hasher = Sha256::new();
    for (path, record) in files {
        hasher.update(format!("{path}\0{}\n", record.sha256));
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Checks the size of every recorded file (and that it exists), and the checksum of the files
/// under `hashed` (paths or directory prefixes). An index from before checksums is let through
/// with a one-line note on stderr, once per process.
pub fn check_recorded(dir: &Path, manifest: &Manifest, hashed: &[&str]) -> Result<()> {
    if manifest.files.is_empty() {
        static NOTED: AtomicBool = AtomicBool::new(false);
        if !NOTED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "note: {} predates checksums, so only its counts and sizes are checked; `rag index --fresh` adds them",
                dir.display()
            );
        }
        return Ok(());
    }
    for (relative, record) in &manifest.files {
        if carries_no_data(Path::new(relative)) {
            continue;
        }
        let path = dir.join(relative);
        let bytes = std::fs::metadata(&path)
            .map_err(|_| anyhow::anyhow!(damaged(&path, "the file is missing")))?
            .len();
        if bytes != record.bytes {
            bail!(damaged(
                &path,
                &format!("it has {bytes} bytes, the manifest says {}", record.bytes)
            ));
        }
        if hashed.iter().any(|h| relative.starts_with(h)) {
            check_sha(&path, record, &crate::files::sha256_file(&path)?)?;
        }
    }
    Ok(())
}

/// Refuses a file whose checksum is not the recorded one.
pub fn check_sha(path: &Path, record: &FileRecord, sha256: &str) -> Result<()> {
    if sha256 != record.sha256 {
        bail!(damaged(path, "its checksum differs from the manifest's"));
    }
    Ok(())
}

/// The recorded file at `relative`, if the index records its files.
pub fn record<'a>(manifest: &'a Manifest, relative: &Path) -> Option<&'a FileRecord> {
    manifest.files.get(&key(relative))
}

/// Whether a stored vector (finite: loading checks that) has unit length, as every stored
/// vector does.
pub fn is_unit(row: &[f32]) -> bool {
    let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
    (norm - 1.0).abs() <= 1e-3
}
