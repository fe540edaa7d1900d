//! `rag index --verify`: every check an index can be put through, for an operator who wants to
//! know it is whole before serving it (opening checks sizes, headers and most checksums; this
//! adds the vector files' checksums, every vector and every document).

use std::path::Path;

use anyhow::{bail, Result};
use serde::Serialize;

use super::flat_file::damaged;
use super::{dense_file, integrity, Index, Part};

#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub generation: String,
    pub documents: u64,
    pub files: usize,
    /// False for an index from before checksums: its bytes could not be checked.
    pub checksums: bool,
}

/// Verifies the index in `dir`; a sharded one shard by shard, after opening it whole (which
/// checks the shards against the top manifest).
pub fn verify(dir: &Path) -> Result<Verified> {
    let index = Index::open(dir)?;
    let mut files = 0;
    let mut checksums = true;
    for part in index.parts() {
        let verified = verify_part(part)?;
        files += verified.files;
        checksums &= verified.checksums;
    }
    Ok(Verified {
        generation: index.generation(),
        documents: index.len(),
        files,
        checksums,
    })
}

fn verify_part(index: &Part) -> Result<Verified> {
    let dir = &index.dir;
    integrity::check_recorded(dir, &index.manifest, &[""])?;
    let manifest = &index.manifest;
    for &depth in &manifest.layers {
        let vectors = index.dense(depth, manifest.stored_dim)?;
        for (row, values) in vectors.vectors().chunks(vectors.dim()).enumerate() {
            if !integrity::is_unit(values) {
                bail!(damaged(
                    &dense_file(dir, depth, manifest.stored_dim),
                    &format!("vector {row} is not of unit length")
                ));
            }
        }
    }
    for id in 0..index.documents() {
        index.document(id)?;
    }
    Ok(Verified {
        generation: manifest.generation(),
        documents: index.documents(),
        files: manifest.files.len(),
        checksums: !manifest.files.is_empty(),
    })
}
