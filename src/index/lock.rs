//! One build at a time per index: `rag index` holds an exclusive lock on `<index>.lock` (an
//! advisory `flock`, released by the kernel however the holder ends, `kill -9` included) for
//! the whole build. The file names its holder, so a second build says who has it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::files;

/// Holds the build lock of one index directory until dropped.
#[derive(Debug)]
pub struct BuildLock {
    path: PathBuf,
    // Kept open: closing it releases the lock.
    file: File,
}

/// `index/default` -> `index/default.lock`.
pub fn lock_file(index_dir: &Path) -> PathBuf {
    files::sibling(index_dir, "lock")
}

impl BuildLock {
    /// Takes the build lock of `index_dir`, or refuses in one line naming its holder.
    pub fn acquire(index_dir: &Path) -> Result<Self> {
        let path = lock_file(index_dir);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            super::create_dir(parent)?;
        }
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("opening the build lock {}", path.display()))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    bail!(
                        "{} is being built by another `rag index` ({}); wait for it to finish, or stop it",
                        index_dir.display(),
                        describe(&holder, &path)
                    );
                }
                Err(TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("locking {}", path.display()))
                }
            }
            // The previous holder removes the file as it lets go: a lock taken on a file no
            // longer at `path` locks nothing; take the one there now.
            let same = std::fs::metadata(&path).is_ok_and(|now| {
                file.metadata()
                    .is_ok_and(|held| (held.dev(), held.ino()) == (now.dev(), now.ino()))
            });
            if !same {
                continue;
            }
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let holder = format!(
                "pid {} on {} since unix time {started}\n",
                std::process::id(),
                hostname()
            );
            file.set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| file.write_all(holder.as_bytes()))
                .with_context(|| format!("writing {}", path.display()))?;
            return Ok(Self { path, file });
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        // Removed while still held (see `acquire`), so that no index is left with a lock file.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Who holds a lock, from its file's content.
fn describe(holder: &str, path: &Path) -> String {
    let holder = holder.trim();
    if holder.is_empty() {
        format!("its lock {} is held", path.display())
    } else {
        format!("{holder}, lock {}", path.display())
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index");
        let first = BuildLock::acquire(&index).unwrap();
        let err = format!("{:#}", BuildLock::acquire(&index).unwrap_err());
        assert!(
            err.contains(&format!("pid {}", std::process::id())) && err.contains("index.lock"),
            "{err}"
        );
        drop(first);
        assert!(!lock_file(&index).exists());
        drop(BuildLock::acquire(&index).unwrap());
    }
}
