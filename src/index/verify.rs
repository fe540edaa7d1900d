//! `rag index --verify`: every check an index can be put through, for an operator who wants to
//! know it is whole before serving it (opening checks sizes, headers and seals; this hashes
//! every file whatever its seal, and checks every vector and every document). With an HNSW
//! graph it also measures the graph's recall@10 against exact search.

use std::path::Path;

use anyhow::{bail, Result};
use serde::Serialize;

use super::ann::{hnsw_file, recall_against_flat, DEFAULT_EF_SEARCH};
use super::flat_file::{damaged, Residence};
use super::{dense_file, integrity, Index, OpenDir};

#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// Written as `generation`, as before the index's builds had that name.
    #[serde(rename = "generation")]
    pub build_id: String,
    pub documents: u64,
    pub files: usize,
    /// False for an index from before checksums: its bytes could not be checked.
    pub checksums: bool,
    /// Per part and depth with an HNSW graph, its recall@10 against exact search.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ann_recall: Vec<AnnRecall>,
}

/// How much of exact search's top 10 an HNSW graph finds, for stored vectors as queries.
#[derive(Debug, Clone, Serialize)]
pub struct AnnRecall {
    /// The index directory (a shard's, in a sharded index).
    pub dir: String,
    pub layer: usize,
    pub ef_search: usize,
    pub queries: usize,
    pub recall_at_10: f64,
}

/// Stored vectors, evenly spaced, asked of each graph by `--verify`.
const RECALL_QUERIES: usize = 1000;

/// [`verify_at`] the default efSearch.
pub fn verify(dir: &Path) -> Result<Verified> {
    verify_at(dir, DEFAULT_EF_SEARCH)
}

/// Verifies the index in `dir`; a sharded one shard by shard, after opening it whole (which
/// checks the shards against the top manifest). An HNSW graph's recall is measured at
/// `ef_search`.
pub fn verify_at(dir: &Path, ef_search: usize) -> Result<Verified> {
    let index = Index::open(dir)?;
    let mut files = 0;
    let mut checksums = true;
    let mut ann_recall = Vec::new();
    for part in index.parts() {
        let verified = verify_part(part)?;
        files += verified.files;
        checksums &= verified.checksums;
        for &depth in &part.manifest.layers {
            if let Some(graph) = part.graph(depth)? {
                let flat = part.dense(depth, part.manifest.stored_dim)?;
                ann_recall.push(AnnRecall {
                    dir: part.dir.display().to_string(),
                    layer: depth,
                    ef_search,
                    queries: RECALL_QUERIES.min(flat.len()),
                    recall_at_10: recall_against_flat(
                        &flat,
                        &graph,
                        ef_search,
                        RECALL_QUERIES,
                        10,
                    )?,
                });
            }
        }
    }
    Ok(Verified {
        build_id: index.build_id(),
        documents: index.len(),
        files,
        checksums,
        ann_recall,
    })
}

fn verify_part(index: &OpenDir) -> Result<Verified> {
    let dir = &index.dir;
    integrity::check_recorded(dir, &index.manifest.files, integrity::Hashing::All)?;
    let manifest = &index.manifest;
    for &depth in &manifest.layers {
        let vectors = index.load_stored(depth, Residence::Mapped)?;
        for (row, values) in vectors.vectors().chunks(vectors.dim()).enumerate() {
            if !integrity::is_unit(values) {
                bail!(damaged(
                    &dense_file(dir, depth, manifest.stored_dim),
                    &format!("vector {row} is not of unit length")
                ));
            }
        }
        // Exact searches read the graph's copy of the vectors where there is a graph: it must
        // be the flat file's, value for value.
        if index.graph(depth)?.is_some() {
            let served = index.dense(depth, manifest.stored_dim)?;
            if served.vectors() != vectors.vectors() {
                bail!(damaged(
                    &hnsw_file(dir, depth, manifest.stored_dim),
                    "its vectors differ from the flat file's"
                ));
            }
        }
    }
    for id in 0..index.documents() {
        index.document(id)?;
    }
    Ok(Verified {
        build_id: manifest.build_id(),
        // Served: the removed rows were read back above, but are not documents of the index.
        documents: index.documents() - index.removed().len() as u64,
        files: manifest.files.len(),
        checksums: !manifest.files.is_empty(),
        ann_recall: Vec::new(),
    })
}
