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

/// The file that marks a directory as this tool's own: an index, a staging folder beside one,
/// or the previous index waiting as `<dir>.old`. Only marked directories are ever moved or
/// removed, so a folder of the same name that someone else put there is left alone.
pub const OWNED_MARKER: &str = ".rag-owned";

/// Marks `dir` as this tool's own ([`OWNED_MARKER`]).
pub fn mark_owned(dir: &Path) -> Result<()> {
    let path = dir.join(OWNED_MARKER);
    std::fs::write(
        &path,
        "made by rag: this folder, and its .building/.old siblings, are replaced and removed by it\n",
    )
    .with_context(|| format!("writing {}", path.display()))
}

/// Whether `dir` carries [`OWNED_MARKER`].
pub fn is_owned(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(OWNED_MARKER)).is_ok_and(|m| m.is_file())
}

/// The refusal to touch `path`, which is not this tool's.
pub fn left_alone(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} was not made by rag (it has no {OWNED_MARKER}), so it was left alone; move it away and run again",
        path.display()
    )
}

/// Removes the directory `dir` if there is one, refusing one this tool did not mark.
pub fn remove_owned_dir(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    if !is_owned(dir) {
        return Err(left_alone(dir));
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

/// Puts the finished directory `staged` in place of `target` with two renames. Between them
/// the old `target` exists only as `<target>.old`, which [`recover_interrupted_install`] puts
/// back. Both carry [`OWNED_MARKER`], so that an unrelated `<target>.old` is never taken for
/// one: it is refused, untouched.
pub fn install_dir(staged: &Path, target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    remove_owned_dir(&old)?;
    mark_owned(staged)?;
    if target.exists() {
        // The caller replaces `target`, so it is its own: marked before it becomes `.old`.
        mark_owned(target)?;
        std::fs::rename(target, &old)
            .with_context(|| format!("moving {} aside", target.display()))?;
    }
    std::fs::rename(staged, target).with_context(|| format!("installing {}", target.display()))?;
    remove_owned_dir(&old)
}

/// Undoes an [`install_dir`] cut off between its two renames; an unmarked `<target>.old` is
/// not one and is refused, untouched.
pub fn recover_interrupted_install(target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    if !target.exists() && old.exists() {
        if !is_owned(&old) {
            return Err(left_alone(&old));
        }
        std::fs::rename(&old, target)
            .with_context(|| format!("restoring {} from {}", target.display(), old.display()))?;
    }
    Ok(())
}

/// The process's umask, from `/proc/self/status` (reading it with `umask(2)` would set it,
/// racing threads that create files meanwhile); 022 where that is not available.
pub fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Gives every file under `dir` the mode a file created now gets (0666 less the umask): some
/// writers (tantivy's atomic writes, through temporary files) create theirs 0600, which would
/// keep other users, a service account among them, from reading what was built.
pub fn follow_umask(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = 0o666 & !umask();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let path = entry.path();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                    .with_context(|| format!("setting the mode of {}", path.display()))?;
            }
        }
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

    #[test]
    fn an_install_never_moves_or_removes_an_unmarked_old_folder() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("index");
        let old = sibling(&target, "old");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("notes.txt"), "mine").unwrap();
        let staged = dir.path().join("staged");
        std::fs::create_dir(&staged).unwrap();

        // An unrelated `.old` is not an interrupted install: not restored, not removed.
        let err = recover_interrupted_install(&target).unwrap_err();
        assert!(format!("{err:#}").contains("left alone"), "{err:#}");
        let err = install_dir(&staged, &target).unwrap_err();
        assert!(format!("{err:#}").contains("left alone"), "{err:#}");
        assert_eq!(
            std::fs::read_to_string(old.join("notes.txt")).unwrap(),
            "mine"
        );
        assert!(!target.exists());

        // Once it is gone, installs replace the target, and their own `.old` goes.
        std::fs::remove_dir_all(&old).unwrap();
        install_dir(&staged, &target).unwrap();
        let again = dir.path().join("again");
        std::fs::create_dir(&again).unwrap();
        install_dir(&again, &target).unwrap();
        assert!(is_owned(&target) && !old.exists() && !again.exists());
    }
}
