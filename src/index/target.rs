//! What `rag index --index DIR` may build into, decided before anything is touched: a new or
//! empty folder, or an index this tool wrote. A symlink is followed and the index built in its
//! target (the link stays a link); a file, or a folder of anything else, is refused. The
//! staging folders beside it (`DIR.building`, `DIR.old`) must be this tool's own too.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{manifest, sharded};
use crate::files;

/// Links followed before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The directory a build of `index_dir` replaces: `index_dir`, or where its symlink(s) point.
/// Refuses, touching nothing, a path that is a file or a non-empty folder that is not an index.
pub fn resolve(index_dir: &Path) -> Result<PathBuf> {
    let mut path = index_dir.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("reading the link {}", path.display()))?;
            path = match path.parent() {
                Some(parent) if target.is_relative() => parent.join(target),
                _ => target,
            };
            continue;
        }
        if !meta.is_dir() {
            bail!(
                "--index {} is a file, not a folder; name a new folder (or an index) for the index",
                index_dir.display()
            );
        }
        if !is_empty(&path)? && !holds_index(&path) {
            bail!(
                "--index {} holds files but no index built by rag, so it was left alone; name a new or empty folder",
                index_dir.display()
            );
        }
        return Ok(path);
    }
    bail!("--index {}: too many symlinks", index_dir.display())
}

/// Refuses a `<dir>.building` or `<dir>.old` beside `dir` that this tool did not make: a build
/// would remove or move them.
pub fn check_siblings(dir: &Path) -> Result<()> {
    for suffix in ["building", "old"] {
        let sibling = files::sibling(dir, suffix);
        if std::fs::symlink_metadata(&sibling).is_ok() && !files::is_owned(&sibling) {
            return Err(files::left_alone(&sibling));
        }
    }
    Ok(())
}

fn is_empty(dir: &Path) -> Result<bool> {
    Ok(std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .next()
        .is_none())
}

/// Whether `dir` is an index this tool wrote: marked, or (built before the marker) with a
/// manifest or a sharded index's top manifest.
fn holds_index(dir: &Path) -> bool {
    files::is_owned(dir)
        || dir.join(manifest::MANIFEST_FILE).is_file()
        || dir.join(sharded::SHARDS_FILE).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_foreign_folders_are_refused_links_followed_empty_folders_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(resolve(&dir.join("new")).unwrap(), dir.join("new"));
        std::fs::create_dir(dir.join("empty")).unwrap();
        assert_eq!(resolve(&dir.join("empty")).unwrap(), dir.join("empty"));

        std::fs::write(dir.join("file"), "x").unwrap();
        let err = format!("{:#}", resolve(&dir.join("file")).unwrap_err());
        assert!(err.contains("is a file"), "{err}");

        std::fs::create_dir(dir.join("notes")).unwrap();
        std::fs::write(dir.join("notes/a.txt"), "x").unwrap();
        let err = format!("{:#}", resolve(&dir.join("notes")).unwrap_err());
        assert!(err.contains("no index built by rag"), "{err}");
        files::mark_owned(&dir.join("notes")).unwrap();
        resolve(&dir.join("notes")).unwrap();

        std::os::unix::fs::symlink("empty", dir.join("link")).unwrap();
        assert_eq!(resolve(&dir.join("link")).unwrap(), dir.join("empty"));
        std::os::unix::fs::symlink("file", dir.join("to-file")).unwrap();
        assert!(resolve(&dir.join("to-file")).is_err());
    }
}
