//! Files every stage writes and reads: checksums, JSON, and crash-safe writes (a file replaced
//! whole by a rename; a directory installed whole by two, with the recovery of an install cut
//! off between them).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

pub fn sha256_file(path: &Path) -> Result<String> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Writes `bytes` to a sibling temporary file, fsyncs it and renames it over `path`, so readers
/// see the old content or the new, never half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// `<dir>.<suffix>` beside `dir`: where work on `dir` is staged or its old copy waits.
pub fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}

/// Puts the finished directory `staged` in place of `target` with two renames. Between them
/// the old `target` exists only as `<target>.old`, which [`recover_interrupted_install`] puts
/// back.
pub fn install_dir(staged: &Path, target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    if target.exists() {
        std::fs::rename(target, &old)
            .with_context(|| format!("moving {} aside", target.display()))?;
    }
    std::fs::rename(staged, target).with_context(|| format!("installing {}", target.display()))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    Ok(())
}

/// Undoes an [`install_dir`] cut off between its two renames.
pub fn recover_interrupted_install(target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    if !target.exists() && old.exists() {
        std::fs::rename(&old, target)
            .with_context(|| format!("restoring {} from {}", target.display(), old.display()))?;
    }
    Ok(())
}

pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A model's name: its directory's name.
pub fn model_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        write_json_atomic(&path, &vec![1, 2]).unwrap();
        write_json_atomic(&path, &vec![3]).unwrap();
        assert_eq!(read_json::<Vec<i32>>(&path).unwrap(), vec![3]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(
            sha256_file(&path).unwrap(),
            hex::encode(Sha256::digest(std::fs::read(&path).unwrap()))
        );
    }
}
