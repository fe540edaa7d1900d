//! The on-disk index: per depth, a faiss `IndexFlatL2` of full-width unit vectors (smaller sizes
//! are derived from it and cached); a tantivy BM25 index; the document store; and the manifest.
//! Built with `--reduce pca:K`, the stored vectors are instead the top K principal components of
//! each depth's vectors, with the PCA kept beside them for the queries.
//!
//! ```text
//! index/default/
//!   manifest.json
//!   docs.jsonl, docs.offsets
//!   bm25/
//!   dense/L6-d384.faiss   (stored width)   dense/L6-d64.faiss   (derived, cached)
//!   pca/L6.safetensors    (only with --reduce)
//! ```

pub mod bm25;
pub mod build;
pub mod dense;
pub mod docstore;
pub mod manifest;
pub mod pca;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

pub use build::{build, BuildOptions, BuildSummary};
pub use dense::DenseIndex;
pub use docstore::DocStore;
pub use manifest::Manifest;
pub use pca::{Pca, PcaSpec};

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

/// A built index, opened for queries. Dense indexes are loaded on first use per (depth, size).
pub struct Index {
    pub dir: PathBuf,
    pub manifest: Manifest,
    docs: DocStore,
    bm25: bm25::Bm25Index,
    /// Per depth, the PCA that reduced the stored vectors (`rag index --reduce`), if any.
    pca: HashMap<usize, Pca>,
    dense: Mutex<HashMap<(usize, usize), Arc<DenseIndex>>>,
}

impl Index {
    pub fn open(dir: &Path) -> Result<Self> {
        crate::util::recover_interrupted_install(dir)?;
        let manifest = Manifest::read(dir)?;
        let docs = DocStore::open(dir)?;
        if docs.len() as u64 != manifest.documents {
            anyhow::bail!(
                "{} is damaged: the manifest lists {} documents, the store has {}; rebuild it",
                dir.display(),
                manifest.documents,
                docs.len()
            );
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
                    Ok((depth, Pca::load(&dir.join(file))?))
                })
                .collect::<Result<_>>()?,
            None => HashMap::new(),
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            bm25: bm25::Bm25Index::open(&dir.join("bm25"))?,
            manifest,
            docs,
            pca,
            dense: Mutex::new(HashMap::new()),
        })
    }

    pub fn len(&self) -> u64 {
        self.manifest.documents
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn document(&self, id: u64) -> Result<Paragraph> {
        self.docs.get(id)
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

    /// The dense index for a depth and size (both already resolved against the manifest). A size
    /// not built yet is derived from the stored vectors once and cached on disk.
    pub fn dense(&self, depth: usize, dim: usize) -> Result<Arc<DenseIndex>> {
        let mut cache = self.dense.lock().expect("dense cache lock");
        if let Some(index) = cache.get(&(depth, dim)) {
            return Ok(Arc::clone(index));
        }
        let path = dense_file(&self.dir, depth, dim);
        let index = if path.exists() {
            DenseIndex::load(&path)?
        } else {
            let full = DenseIndex::load(&dense_file(&self.dir, depth, self.manifest.stored_dim))?;
            let derived = full.truncated(dim)?;
            // The cache is an optimisation: a read-only index still answers.
            let _ = derived.save(&path);
            derived
        };
        let index = Arc::new(index);
        cache.insert((depth, dim), Arc::clone(&index));
        Ok(index)
    }
}

pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}
