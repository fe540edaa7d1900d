//! Removed documents: the local ids of the documents taken out of an index since it was built
//! or last compacted (`rag index --remove`, or a document replaced by a changed text), kept in
//! `removed.u64` (little-endian u64, ascending). Their rows stay in the document store, the
//! vector files and the HNSW graphs, so that every other id stays what it was and an update
//! rewrites nothing it does not change; every search asks each part for that many more hits
//! and drops theirs ([`Removed::filter`]), and BM25 no longer holds them at all. A compaction
//! ([`super::update`]) drops the rows once they pass a share of the index.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::flat_file;

pub const REMOVED_FILE: &str = "removed.u64";

/// The removed local ids of one part, ascending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed(Vec<u64>);

impl Removed {
    /// Reads `dir`'s list, which must hold `expected` ids below `documents` (none: no file).
    pub fn read(dir: &Path, expected: u64, documents: u64) -> Result<Self> {
        let path = dir.join(REMOVED_FILE);
        if expected == 0 {
            return Ok(Self::default());
        }
        let raw = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let ids: Vec<u64> = raw
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let ordered = ids.windows(2).all(|w| w[0] < w[1]);
        if raw.len() % 8 != 0
            || ids.len() as u64 != expected
            || !ordered
            || ids.last().is_some_and(|&last| last >= documents)
        {
            bail!(flat_file::damaged(
                &path,
                &format!("it does not list {expected} ascending ids below {documents}")
            ));
        }
        Ok(Self(ids))
    }

    /// The list of `ids` (any order, repeats allowed).
    pub fn from_ids(mut ids: Vec<u64>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        Self(ids)
    }

    /// Writes the list into `dir` (removing the file when it is empty).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(REMOVED_FILE);
        if self.0.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => Ok(()),
            };
        }
        let bytes: Vec<u8> = self.0.iter().flat_map(|id| id.to_le_bytes()).collect();
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, local: u64) -> bool {
        self.0.binary_search(&local).is_ok()
    }

    pub fn ids(&self) -> &[u64] {
        &self.0
    }

    /// How many hits to ask a part for so that `k` of them survive [`filter`](Self::filter).
    pub fn widened(&self, k: usize) -> usize {
        k.saturating_add(self.0.len())
    }

    /// Drops the removed documents' hits (local ids) and keeps the first `k` of the rest.
    pub fn filter(&self, hits: Vec<(u64, f32)>, k: usize) -> Vec<(u64, f32)> {
        if self.0.is_empty() {
            return hits;
        }
        hits.into_iter()
            .filter(|(local, _)| !self.contains(*local))
            .take(k)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_and_filters_hits() {
        let dir = tempfile::tempdir().unwrap();
        let removed = Removed::from_ids(vec![5, 1, 5]);
        removed.write(dir.path()).unwrap();
        let read = Removed::read(dir.path(), 2, 6).unwrap();
        assert_eq!(read, removed);
        let hits = vec![(0, 0.9), (1, 0.8), (2, 0.7), (5, 0.6), (3, 0.5)];
        assert_eq!(read.filter(hits, 2), vec![(0, 0.9), (2, 0.7)]);
        assert_eq!(read.widened(3), 5);
        // A list that does not match the manifest is damaged, named by its path.
        let err = format!("{:#}", Removed::read(dir.path(), 3, 6).unwrap_err());
        assert!(err.contains(REMOVED_FILE), "{err}");
        let err = format!("{:#}", Removed::read(dir.path(), 2, 5).unwrap_err());
        assert!(err.contains(REMOVED_FILE), "{err}");
        Removed::default().write(dir.path()).unwrap();
        assert!(!dir.path().join(REMOVED_FILE).exists());
    }
}
