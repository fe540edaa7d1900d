//! The on-disk index: per depth, a faiss `IndexFlatL2` of full-width unit vectors (smaller sizes
//! are derived from it in memory); a tantivy BM25 index; the document store; and the manifest,
//! which records every file's size and checksum. Built with `--reduce pca:K`, the stored vectors
//! are instead the top K principal components of each depth's vectors, with the PCA kept beside
//! them for the queries.
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
//! An open [`Index`] is one generation of the directory: every file it reads is opened (or read
//! whole) when it opens, so a build that replaces the directory meanwhile changes nothing it
//! answers. Opening never writes.

pub mod bm25;
pub mod build;
pub mod dense;
pub mod docstore;
mod flat_file;
pub mod integrity;
pub mod manifest;
pub mod pca;
mod verify;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

pub use build::{build, BuildOptions, BuildSummary};
pub use dense::DenseIndex;
pub use docstore::DocStore;
pub use manifest::Manifest;
pub use pca::{Pca, PcaSpec};
pub use verify::{verify, Verified};

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

/// Smaller sizes derived from the stored vectors kept in memory at once; the least recently
/// used goes first, so that clients asking for many sizes cannot grow the server without bound.
const DERIVED_SIZES_KEPT: usize = 8;
/// Opens of a directory that changed under them before [`Index::open`] gives up.
const OPEN_ATTEMPTS: usize = 3;

/// A built index, opened for queries. Each depth's vectors are loaded on first use, from the file
/// opened with the index.
pub struct Index {
    pub dir: PathBuf,
    pub manifest: Manifest,
    docs: DocStore,
    bm25: bm25::Bm25Index,
    /// Per depth, the PCA that reduced the stored vectors (`rag index --reduce`), if any.
    pca: HashMap<usize, Pca>,
    /// Per depth, the stored vector file, header checked.
    files: HashMap<usize, flat_file::FlatFile>,
    dense: Mutex<DenseCache>,
}

#[derive(Default)]
struct DenseCache {
    stored: HashMap<usize, Arc<DenseIndex>>,
    /// Derived sizes, most recently used last.
    derived: Vec<((usize, usize), Arc<DenseIndex>)>,
}

impl Index {
    /// Opens the index in `dir`, checking every file against the manifest (see [`integrity`]).
    /// A build that installs a new generation while this runs makes it start over, so that the
    /// files opened are all of one generation.
    pub fn open(dir: &Path) -> Result<Self> {
        for _ in 0..OPEN_ATTEMPTS {
            let index = Self::open_once(dir)?;
            if Manifest::read(dir).is_ok_and(|m| m == index.manifest) {
                return Ok(index);
            }
        }
        anyhow::bail!(
            "{} kept changing while it was being opened (builds installing one after another?); try again",
            dir.display()
        )
    }

    fn open_once(dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        integrity::check_recorded(
            dir,
            &manifest,
            &[docstore::DOCS_FILE, docstore::OFFSETS_FILE, "bm25/", "pca/"],
        )?;
        let docs = DocStore::open(dir)?;
        if docs.len() as u64 != manifest.documents {
            anyhow::bail!(flat_file::damaged(
                &dir.join(docstore::OFFSETS_FILE),
                &format!(
                    "it lists {} documents, the manifest {}",
                    docs.len(),
                    manifest.documents
                )
            ));
        }
        let pca = match &manifest.reduce {
            Some(reduce) => manifest
                .layers
                .iter()
                .map(|&depth| {
                    let file = reduce.transforms.get(&depth).with_context(|| {
                        format!(
                            "{} is damaged: no PCA for layer {depth}; rebuild it",
                            dir.display()
                        )
                    })?;
                    let pca = Pca::load(&dir.join(file))?;
                    if pca.output_dim() != manifest.stored_dim {
                        anyhow::bail!(flat_file::damaged(
                            &dir.join(file),
                            "its width differs from the manifest's"
                        ));
                    }
                    Ok((depth, pca))
                })
                .collect::<Result<_>>()?,
            None => HashMap::new(),
        };
        let files = manifest
            .layers
            .iter()
            .map(|&depth| {
                let path = dense_file(dir, depth, manifest.stored_dim);
                let file =
                    flat_file::FlatFile::open(&path, manifest.documents, manifest.stored_dim)?;
                Ok((depth, file))
            })
            .collect::<Result<_>>()?;
        let bm25 = bm25::Bm25Index::open(&dir.join("bm25"))?;
        if bm25.documents() != manifest.documents {
            anyhow::bail!(flat_file::damaged(
                &dir.join("bm25"),
                &format!(
                    "it holds {} documents, the manifest {}",
                    bm25.documents(),
                    manifest.documents
                )
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            bm25,
            manifest,
            docs,
            pca,
            files,
            dense: Mutex::new(DenseCache::default()),
        })
    }

    /// Names what this index holds: the digest of its files (see [`integrity::generation_id`]).
    pub fn generation(&self) -> String {
        self.manifest.generation()
    }

    pub fn len(&self) -> u64 {
        self.manifest.documents
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Document `id`, HTML entities decoded ([`Paragraph::decoded`]).
    pub fn document(&self, id: u64) -> Result<Paragraph> {
        Ok(self.docs.get(id)?.decoded())
    }

    pub fn bm25(&self) -> &bm25::Bm25Index {
        &self.bm25
    }

    /// Query vectors comparable with the stored ones at a resolved depth and size, from the
    /// encoder's full-width output: through the index's PCA when it has one, then cut to `dim`.
    pub fn query_vectors(&self, depth: usize, dim: usize, full: &Matrix) -> Result<Matrix> {
        Ok(match self.pca.get(&depth) {
            Some(pca) => pca.reduce(full)?.truncated(dim),
            None => full.truncated(dim),
        })
    }

    /// Loads every depth's vectors now rather than on first use, so that a damaged file is
    /// refused when the index opens (a server does this before it reports ready).
    pub fn preload(&self) -> Result<()> {
        for &depth in &self.manifest.layers {
            self.dense(depth, self.manifest.stored_dim)?;
        }
        Ok(())
    }

    /// The dense index for a depth and size (both already resolved against the manifest). The
    /// stored width is loaded once (its checksum checked); a smaller size is derived from it
    /// in memory, never written: reading an index does not change it.
    pub fn dense(&self, depth: usize, dim: usize) -> Result<Arc<DenseIndex>> {
        let mut cache = self.dense.lock().expect("dense cache lock");
        let stored = match cache.stored.get(&depth) {
            Some(index) => Arc::clone(index),
            None => {
                let index = Arc::new(self.load_stored(depth)?);
                cache.stored.insert(depth, Arc::clone(&index));
                index
            }
        };
        if dim == stored.dim() {
            return Ok(stored);
        }
        if let Some(i) = cache
            .derived
            .iter()
            .position(|(key, _)| *key == (depth, dim))
        {
            let entry = cache.derived.remove(i);
            let index = Arc::clone(&entry.1);
            cache.derived.push(entry);
            return Ok(index);
        }
        let derived = Arc::new(stored.truncated(dim)?);
        if cache.derived.len() == DERIVED_SIZES_KEPT {
            cache.derived.remove(0);
        }
        cache.derived.push(((depth, dim), Arc::clone(&derived)));
        Ok(derived)
    }

    fn load_stored(&self, depth: usize) -> Result<DenseIndex> {
        let file = self
            .files
            .get(&depth)
            .with_context(|| format!("the index stores no vectors for layer {depth}"))?;
        let (index, sha256) = file.load()?;
        let relative = file.path().strip_prefix(&self.dir).unwrap_or(file.path());
        if let Some(record) = integrity::record(&self.manifest, relative) {
            integrity::check_sha(file.path(), record, &sha256)?;
        }
        Ok(index)
    }
}

pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}
