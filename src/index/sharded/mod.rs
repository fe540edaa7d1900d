//! Sharded indexes: a corpus split by document over `n` ordinary indexes, built one at a time
//! (on as many machines) and searched together exactly.
//!
//! ```text
//! index/big/
//!   shards.json              the top manifest (rag index --merge): shards, counts, checksums
//!   shard-0-of-4/            an ordinary index (manifest.json, docs, bm25/, dense/) plus
//!     ids.u64                the global id of each of its documents, ascending
//!   shard-1-of-4/ ...
//! ```
//!
//! A document goes to the shard its title hashes to ([`ShardSpec::owns`]): the title is the
//! corpus's key after deduplication, so the assignment depends on neither file order nor the
//! other documents, and each shard can be rebuilt alone, identically. Its global id is its
//! position in the deduplicated corpus, which every shard computes while it streams the whole
//! corpus (it has to read all of it to find its own documents), so merged rankings break ties
//! by the same ids as the single index does.

pub mod merge;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use merge::{merge, Merged, ShardEntry, ShardsManifest, SHARDS_FILE};

/// The file of a shard that lists its documents' global ids (little-endian u64, ascending).
pub const IDS_FILE: &str = "ids.u64";

/// Shard `index` of `count` (0-based: `0/4` to `3/4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl FromStr for ShardSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let parsed = s.split_once('/').and_then(|(i, n)| {
            Some(ShardSpec {
                index: i.trim().parse().ok()?,
                count: n.trim().parse().ok()?,
            })
        });
        match parsed {
            Some(spec) if spec.count >= 1 && spec.index < spec.count => Ok(spec),
            _ => bail!("--shard takes i/n with 0 <= i < n, e.g. 0/4 (got {s:?})"),
        }
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardSpec {
    /// The shard's directory name inside the sharded index.
    pub fn dir_name(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }

    pub fn dir(&self, index_dir: &Path) -> PathBuf {
        index_dir.join(self.dir_name())
    }

    /// Whether the document titled `title` belongs to this shard: the first 8 bytes of the
    /// title's sha256, modulo the shard count. A cryptographic hash spreads any titles evenly
    /// and is the same on every machine and in every language (the Python driver needs none of
    /// it, but an operator can recompute it anywhere).
    pub fn owns(&self, title: &str) -> bool {
        shard_of(title, self.count) == self.index
    }
}

/// The shard of `count` a title belongs to.
pub fn shard_of(title: &str, count: usize) -> usize {
    let digest = Sha256::digest(title.as_bytes());
    let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (head % count as u64) as usize
}

/// Writes a shard's id column (`ids`, ascending) to `path`, replacing what is there.
pub fn write_ids(path: &Path, ids: &[u64]) -> Result<()> {
    let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Reads a shard's id column, checking that it is ascending (every shard keeps corpus order).
pub fn read_ids(path: &Path) -> Result<Vec<u64>> {
    let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if raw.len() % 8 != 0 {
        bail!(super::flat_file::damaged(
            path,
            "its length is not a multiple of 8"
        ));
    }
    let ids: Vec<u64> = raw
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    if ids.windows(2).any(|w| w[0] >= w[1]) {
        bail!(super::flat_file::damaged(path, "its ids are not ascending"));
    }
    Ok(ids)
}

/// The `k` best of several rankings of (global id, score): best score first, ties by id, the
/// order an index of the whole corpus gives.
pub fn merge_top_k(lists: impl IntoIterator<Item = Vec<(u64, f32)>>, k: usize) -> Vec<(u64, f32)> {
    top_k(lists.into_iter().flatten().collect(), k)
}

/// The `k` best of (id, score) pairs in that order, without sorting the rest.
pub fn top_k(mut all: Vec<(u64, f32)>, k: usize) -> Vec<(u64, f32)> {
    if k < all.len() {
        all.select_nth_unstable_by(k, ranking);
        all.truncate(k);
    }
    all.sort_by(ranking);
    all
}

/// The order of every ranking of (id, score): the better first, a higher score, then a lower id.
pub fn ranking(a: &(u64, f32), b: &(u64, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Whether `dir` is a sharded index (its top manifest, or at least one shard, is there).
pub fn is_sharded(dir: &Path) -> bool {
    if dir.join(SHARDS_FILE).exists() {
        return true;
    }
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|name| name.starts_with("shard-") && !name.contains('.'))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_every_title_has_exactly_one_shard() {
        assert_eq!(
            "1/4".parse::<ShardSpec>().unwrap(),
            ShardSpec { index: 1, count: 4 }
        );
        for bad in ["4/4", "0/0", "1", "a/b", "-1/2"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
        let counts = (0..1000).fold([0usize; 4], |mut counts, n| {
            let title = format!("topic {n}");
            let owners: Vec<usize> = (0..4)
                .filter(|&i| ShardSpec { index: i, count: 4 }.owns(&title))
                .collect();
            assert_eq!(owners.len(), 1);
            counts[owners[0]] += 1;
            counts
        });
        // An even spread: each shard within 20% of a quarter.
        assert!(
            counts.iter().all(|&c| (200..=300).contains(&c)),
            "{counts:?}"
        );
    }
}
