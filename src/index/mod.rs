//! The on-disk index: per depth, a faiss `IndexFlatL2` of unit vectors at the stored width (the
//! full width, or the first K dimensions renormalised with `--dim K`; smaller sizes are derived
//! from it in memory); a tantivy BM25 index; the document store; and the manifest, which records
//! every file's size and checksum. Built with `--reduce pca:K`, the stored vectors are instead
//! the top K principal components of each depth's vectors, with the PCA kept beside them for the
//! queries.
//!
//! ```text
//! index/default/
//!   manifest.json
//!   docs.jsonl, docs.offsets
//!   bm25/
//!   dense/L6-d384.faiss   (stored width)
//!   pca/L6.safetensors    (only with --reduce)
//! ```
//!
//! A sharded index is a directory of such indexes, one per shard, under a top manifest
//! ([`sharded`]).
//!
//! An open [`Index`] is one build of the directory: every file it reads is opened (or read
//! whole) when it opens, so a build that replaces the directory meanwhile changes nothing it
//! answers. Opening never writes.

pub mod ann;
mod ann_ffi;
pub mod bm25;
pub mod build;
pub mod cell;
mod compact;
pub mod dense;
pub mod docstore;
mod flat_file;
pub mod given_vectors;
pub mod integrity;
pub mod links;
pub mod lock;
pub mod manifest;
mod open_dir;
mod page_cache;
pub mod pca;
pub mod removed;
pub mod sharded;
pub mod target;
pub mod update;
mod verify;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use ann::{AnnSpec, DEFAULT_EF_SEARCH};
pub use build::{build, BuildOptions, BuildSummary};
pub use cell::{Cell, CellRefusal};
pub use dense::DenseIndex;
pub use docstore::DocStore;
pub use manifest::Manifest;
pub use open_dir::OpenDir;
pub use pca::{Pca, PcaSpec};
pub use sharded::{ShardSpec, ShardsManifest};
pub use verify::{verify, verify_at, AnnRecall, Verified};

use crate::corpus::Paragraph;
use crate::vectors::Matrix;

pub const DEFAULT_INDEX_DIR: &str = "index/default";

pub fn dense_file(dir: &Path, depth: usize, dim: usize) -> PathBuf {
    dir.join("dense").join(format!("L{depth}-d{dim}.faiss"))
}

/// Where a reduced index keeps the PCA of one depth, relative to the index directory.
pub fn pca_file(depth: usize) -> PathBuf {
    Path::new("pca").join(format!("L{depth}.safetensors"))
}

/// Opens of a directory that changed under them before [`Index::open`] gives up.
const OPEN_ATTEMPTS: usize = 3;

/// A built index, opened for queries: one directory, or the shards of a sharded one searched
/// together. Every document has its global id (its position in the deduplicated corpus), and
/// every search returns the whole corpus's best, ranked best first with ties by id, exactly as
/// one index of the whole corpus would (see [`sharded`]).
pub struct Index {
    pub dir: PathBuf,
    /// The index's manifest; for a sharded index, the first shard's with the whole corpus's
    /// document count and the top manifest's build id.
    pub manifest: Manifest,
    parts: Vec<OpenDir>,
    /// Set by [`Index::only_shard`]: the one part ranked.
    searched: Option<usize>,
}

impl Index {
    /// Opens the index in `dir`, checking every file against the manifest (see [`integrity`]);
    /// a sharded index also has its shards checked against its top manifest. A build that
    /// installs a new one while this runs makes it start over, so that the files opened
    /// are all of one build.
    pub fn open(dir: &Path) -> Result<Self> {
        for _ in 0..OPEN_ATTEMPTS {
            let index = Self::open_once(dir)?;
            if build_on_disk(dir).as_deref() == Some(index.build_id().as_str()) {
                return Ok(index);
            }
        }
        anyhow::bail!(
            "{} kept changing while it was being opened (builds installing one after another?); try again",
            dir.display()
        )
    }

    fn open_once(dir: &Path) -> Result<Self> {
        if !sharded::is_sharded(dir) {
            let part = OpenDir::open(dir)?;
            return Ok(Self {
                dir: dir.to_path_buf(),
                manifest: part.manifest.clone(),
                parts: vec![part],
                searched: None,
            });
        }
        let top = ShardsManifest::read(dir)?;
        let parts = top.open_shards(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest: top.combined(&parts[0].manifest),
            parts,
            searched: None,
        })
    }

    /// The same index, ranking only shard `shard`'s documents (BM25 still scored with the
    /// whole corpus's statistics): what one worker of a distributed evaluation searches, its
    /// lists merged with the other shards' afterwards.
    pub fn only_shard(mut self, shard: ShardSpec) -> Result<Self> {
        if self.parts.len() != shard.count {
            anyhow::bail!(
                "{} has {} shard(s), not {}",
                self.dir.display(),
                self.parts.len(),
                shard.count
            );
        }
        self.searched = Some(shard.index);
        Ok(self)
    }

    /// The parts whose documents are ranked.
    fn searched(&self) -> &[OpenDir] {
        match self.searched {
            Some(i) => std::slice::from_ref(&self.parts[i]),
            None => &self.parts,
        }
    }

    /// Names what this index holds: the digest of its files (see [`integrity::build_id`]),
    /// or of its shards' build ids.
    pub fn build_id(&self) -> String {
        self.manifest.build_id()
    }

    /// Documents served: those stored less those removed since the build.
    pub fn len(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| p.documents() - p.removed().len() as u64)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The directories searched together: the index itself, or each of its shards.
    pub fn parts(&self) -> &[OpenDir] {
        &self.parts
    }

    /// Document `id` (global), HTML entities decoded ([`Paragraph::decoded`]); a removed one
    /// is not in the index.
    pub fn document(&self, id: u64) -> Result<Paragraph> {
        for part in &self.parts {
            if let Some(local) = part.local(id).filter(|&l| part.serves(l)) {
                return Ok(part.document(local)?.decoded());
            }
        }
        anyhow::bail!("document {id} is not in {}", self.dir.display())
    }

    /// The title links of every served document: each part's stored ones, memory-mapped, or
    /// for an index from before them, built in memory from its titles.
    pub fn links(&self) -> Result<links::Links> {
        let stored: Option<Vec<links::Links>> = self
            .parts
            .iter()
            .map(|part| part.links().cloned())
            .collect();
        match stored {
            Some(parts) => Ok(links::Links::join(parts)),
            None => links::Links::new(self.titles()?),
        }
    }

    /// Every served document's (id, title), in id order.
    pub fn titles(&self) -> Result<Vec<(u64, String)>> {
        let mut titles = self
            .parts
            .iter()
            .flat_map(|part| {
                (0..part.documents())
                    .filter(|&local| part.serves(local))
                    .map(move |local| {
                        Ok((part.global(local), part.document(local)?.decoded().title))
                    })
            })
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("reading the titles of {}", self.dir.display()))?;
        titles.sort_by_key(|(id, _)| *id);
        Ok(titles)
    }

    /// Query vectors comparable with the stored ones at a resolved depth and size, from the
    /// encoder's full-width output: through the index's PCA when it has one (a sharded index
    /// never has: `--reduce` is refused with `--shard`), then cut to `cell.dim`.
    pub fn query_vectors(&self, cell: Cell, full: &Matrix) -> Result<Matrix> {
        self.parts[0].query_vectors(cell, full)
    }

    /// Loads every depth's vectors now rather than on first use, so that a damaged file is
    /// refused when the index opens (a server does this before it reports ready).
    pub fn preload(&self) -> Result<()> {
        self.parts.iter().try_for_each(OpenDir::preload)
    }

    /// The `k` nearest documents to each row-major query at a resolved depth and size, as
    /// (global id, cosine), over every part: through each part's HNSW graph (visiting
    /// `ef_search` candidates, [`DEFAULT_EF_SEARCH`] when `None`) where the index has one,
    /// `cell.dim` is the stored width and `ef_search` is not 0, else exactly.
    pub fn search_dense(
        &self,
        Cell { layers: depth, dim }: Cell,
        queries: &[f32],
        k: usize,
        ef_search: Option<usize>,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        // efSearch 0 asks for exact search: the same index then gives both.
        let exact = ef_search == Some(0);
        let graphs = !self.manifest.ann.is_flat() && dim == self.manifest.stored_dim && !exact;
        if !graphs && !exact && (ef_search.is_some() || !self.manifest.ann.is_flat()) {
            note_exact_search(&self.manifest, dim);
        }
        let per_part = self
            .searched()
            .iter()
            .map(|part| {
                // Removed documents are still in the vectors: ask for enough more to drop them.
                let wide = part.removed().widened(k);
                let hits = match graphs.then(|| part.graph(depth)).transpose()?.flatten() {
                    Some(graph) => {
                        graph.search_many(queries, wide, ef_search.unwrap_or(DEFAULT_EF_SEARCH))?
                    }
                    None => part.dense(depth, dim)?.search_many(queries, wide)?,
                };
                Ok(hits
                    .into_iter()
                    .map(|list| {
                        part.removed()
                            .filter(list, k)
                            .into_iter()
                            .map(|(local, score)| (part.global(local), score))
                            .collect()
                    })
                    .collect::<Vec<Vec<_>>>())
            })
            .collect::<Result<Vec<_>>>()?;
        let rows = queries.len() / dim.max(1);
        Ok((0..rows)
            .map(|row| sharded::merge_top_k(per_part.iter().map(|p| p[row].clone()), k))
            .collect())
    }

    /// The `k` best documents for a question by BM25, as (global id, score), scored with the
    /// statistics of the whole corpus ([`bm25::search_all`]).
    pub fn search_bm25(
        &self,
        question: &str,
        syntax: bm25::QuerySyntax,
        k: usize,
    ) -> Result<Vec<(u64, f32)>> {
        let indexes: Vec<&bm25::Bm25Index> = self.parts.iter().map(OpenDir::bm25).collect();
        let mut lists = bm25::search_all(&indexes, question, syntax, k)?;
        if let Some(i) = self.searched {
            lists = vec![lists.swap_remove(i)];
        }
        Ok(sharded::merge_top_k(lists, k))
    }
}

/// Says once per process why a search is exact although an approximate one was asked for or
/// built: a graph serves only the width it was built at.
fn note_exact_search(manifest: &Manifest, dim: usize) {
    static NOTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if NOTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    if manifest.ann.is_flat() {
        eprintln!("note: the index has no HNSW graph (`rag index --ann hnsw`), so --ef-search is unused: searches are exact");
    } else {
        eprintln!(
            "note: the HNSW graph serves only the stored size {}; size {dim} is searched exactly",
            manifest.stored_dim
        );
    }
}

/// The file a new build of the index in `dir` replaces last: its manifest, or the top
/// manifest of a sharded index.
pub fn top_manifest_file(dir: &Path) -> PathBuf {
    if sharded::is_sharded(dir) {
        dir.join(sharded::SHARDS_FILE)
    } else {
        dir.join(manifest::MANIFEST_FILE)
    }
}

/// The manifest of the index in `dir` as [`Index::open`] would report it, without opening it.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    if !sharded::is_sharded(dir) {
        return Manifest::read(dir);
    }
    let top = ShardsManifest::read(dir)?;
    let first = top
        .shards
        .first()
        .context("the top manifest lists no shards")?;
    Ok(top.combined(&Manifest::read(&dir.join(&first.dir))?))
}

/// The build the index in `dir` holds now, as [`Index::build_id`] names it, without
/// opening it (`None`: no readable manifest).
pub fn build_on_disk(dir: &Path) -> Option<String> {
    if sharded::is_sharded(dir) {
        ShardsManifest::read(dir).ok().map(|top| top.build_id)
    } else {
        Manifest::read(dir).ok().map(|m| m.build_id())
    }
}

pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}
