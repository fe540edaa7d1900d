//! Approximate dense search (`rag index --ann hnsw[:M]`): per stored depth, a faiss
//! `IndexHNSWFlat` built from the same unit vectors as the flat file, saved beside it as
//! `dense/L6-d384.hnsw.faiss`. The flat file stays: it is the exact reference, what `--verify`
//! checks vector by vector and measures the graph's recall against, and what smaller query
//! sizes are derived from (a graph is built for one metric space, so only the stored width is
//! searched through it). Distances are squared L2 on unit vectors, as flat's, so scores are the
//! same cosine `1 - d^2 / 2`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use faiss::index::IndexImpl;
use faiss::{Index, MetricType};
use serde::{Deserialize, Serialize};

use super::dense::{to_hits, DenseIndex};
use super::flat_file::{first_not_finite, Residence};
use super::{ann_ffi, flat_file, page_cache};

/// efSearch when a query names none: 99.2% of flat's top 10 on the 19k sample at M 32
/// (eval/scale/results/ann/ann_recall.md).
pub const DEFAULT_EF_SEARCH: usize = 64;
/// The graph's links per node when `--ann hnsw` names none.
pub const DEFAULT_M: usize = 32;
/// faiss's own fourcc for an `IndexHNSWFlat` file.
const FOURCC: &[u8; 4] = b"IHNf";

/// Which dense index a build stores beside the flat one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AnnSpec {
    /// Flat only: exact search.
    #[default]
    Flat,
    /// Also an HNSW graph with `m` links per node.
    Hnsw { m: usize },
}

impl std::str::FromStr for AnnSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let (kind, m) = match s.split_once(':') {
            Some((kind, m)) => (kind, Some(m)),
            None => (s, None),
        };
        match (kind, m) {
            ("flat", None) => Ok(Self::Flat),
            ("hnsw", None) => Ok(Self::Hnsw { m: DEFAULT_M }),
            ("hnsw", Some(m)) => match m.parse::<usize>() {
                Ok(m) if (2..=512).contains(&m) => Ok(Self::Hnsw { m }),
                _ => bail!("--ann hnsw:M needs M between 2 and 512 (got {m:?})"),
            },
            _ => bail!("--ann takes flat, hnsw or hnsw:M (got {s:?})"),
        }
    }
}

impl std::fmt::Display for AnnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Flat => write!(f, "flat"),
            Self::Hnsw { m } => write!(f, "hnsw:{m}"),
        }
    }
}

impl Serialize for AnnSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AnnSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl AnnSpec {
    pub fn is_flat(&self) -> bool {
        *self == Self::Flat
    }
}

/// Where a depth's HNSW graph lives.
pub fn hnsw_file(dir: &Path, depth: usize, dim: usize) -> PathBuf {
    dir.join("dense")
        .join(format!("L{depth}-d{dim}.hnsw.faiss"))
}

fn faiss_error(e: faiss::error::Error) -> anyhow::Error {
    anyhow!("faiss: {e}")
}

/// Refuses vectors going into a graph that are not all finite.
fn check_input(vectors: &[f32], dim: usize) -> Result<()> {
    match first_not_finite(vectors, dim) {
        Some(row) => bail!("vector {row} given to the HNSW graph is not finite"),
        None => Ok(()),
    }
}

/// An HNSW graph over one depth's stored vectors. Searches only read it (efSearch is given
/// per call), so any number run at once.
pub struct HnswIndex {
    index: IndexImpl,
    dim: usize,
    len: usize,
}

impl HnswIndex {
    /// A graph with `m` links per node over `flat`'s vectors (faiss's efConstruction, 40).
    pub fn build(flat: &DenseIndex, m: usize) -> Result<Self> {
        let dim = flat.dim();
        // A sealed graph is served without scanning its vectors: they are checked going in.
        check_input(flat.vectors(), dim)?;
        let mut index = faiss::index_factory(dim as u32, format!("HNSW{m},Flat"), MetricType::L2)
            .map_err(faiss_error)?;
        // In slices, so that faiss's insertion buffers stay small on a large corpus.
        for block in flat.vectors().chunks(dim * 65_536) {
            index.add(block).map_err(faiss_error)?;
        }
        Ok(Self {
            index,
            dim,
            len: flat.len(),
        })
    }

    /// Inserts rows (unit length) after the graph's last, with the next ids: what an update
    /// adds to a graph instead of building it again.
    pub fn add(&mut self, vectors: &[f32]) -> Result<()> {
        check_input(vectors, self.dim)?;
        let index = &mut self.index;
        for block in vectors.chunks(self.dim * 65_536) {
            index.add(block).map_err(faiss_error)?;
        }
        self.len = index.ntotal() as usize;
        Ok(())
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("faiss.tmp");
        let tmp_str = tmp.to_str().context("index path is not UTF-8")?;
        faiss::write_index(&self.index, tmp_str)
            .map_err(faiss_error)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }

    /// Reads the graph from `file` (opened, header checked, with the rest of the index), not
    /// from its path, which a later build may have replaced. `Mapped`, faiss maps the file and
    /// the graph's links and vectors stay on disk until a search visits them, so the first
    /// search of a cold process reads the few pages it visits, not the whole graph (2.6 GB
    /// at 5.2M x 64 dims); `InMemory` reads it whole, for a graph that is to be changed.
    /// `check_values`: scan every vector for NaN and infinity; the caller skips it for a file
    /// whose seal matches (its bytes are the build's, whose vectors were checked going in:
    /// scanning them would read the whole mapped file again).
    pub fn load(file: &HnswFile, residence: Residence, check_values: bool) -> Result<Self> {
        if residence == Residence::Mapped {
            file.warm_node_tables()?;
        }
        let index = flat_file::read_open(&file.file, &file.path, residence)?;
        if index.d() as usize != file.dim || index.ntotal() != file.count {
            bail!(flat_file::damaged(&file.path, "faiss read another index"));
        }
        let graph = Self {
            index,
            dim: file.dim,
            len: file.count as usize,
        };
        if check_values {
            if let Some(row) = first_not_finite(graph.flat_vectors()?, file.dim) {
                bail!(flat_file::damaged(
                    &file.path,
                    &format!("vector {row} is not finite")
                ));
            }
        }
        Ok(graph)
    }

    /// Whether the graph's links and vectors are views of its memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        // SAFETY: the pointer is the live index this graph owns.
        unsafe { ann_ffi::is_mapped(self.index.inner_ptr()) }.unwrap_or(false)
    }

    /// The graph's own copy of the vectors, row-major.
    fn flat_vectors(&self) -> Result<&[f32]> {
        // SAFETY: the pointer is the live index this graph owns; the slice borrows self.
        let storage = unsafe { ann_ffi::flat_storage(self.index.inner_ptr()) }
            .context("the HNSW graph keeps its vectors in no flat index")?;
        let mut xb = std::ptr::null_mut();
        let mut len = 0;
        // SAFETY: `storage` is an IndexFlat owned by the graph, alive while self is.
        unsafe {
            faiss_sys::faiss_IndexFlat_xb(storage, &mut xb, &mut len);
            Ok(std::slice::from_raw_parts(xb, len))
        }
    }

    /// Exact search over the vectors the graph already holds: the same vectors as the flat
    /// file (the graph is built from it), so serving both needs them in memory once.
    pub fn exact(self: &Arc<Self>) -> Result<DenseIndex> {
        // SAFETY: the storage belongs to the graph, which the returned index keeps alive.
        let storage = unsafe { ann_ffi::flat_storage(self.index.inner_ptr()) }
            .context("the HNSW graph keeps its vectors in no flat index")?;
        Ok(unsafe { DenseIndex::borrowed(storage, Arc::clone(self) as _) })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The (about) `k` nearest rows to each row-major unit-length query, as (id, cosine), best
    /// first, visiting `ef_search` candidates per query (at least `k`).
    pub fn search_many(
        &self,
        queries: &[f32],
        k: usize,
        ef_search: usize,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let dim = self.dim;
        if queries.is_empty() || !queries.len().is_multiple_of(dim) {
            bail!(
                "queries have {} values, not a whole number of {dim}-dimensional vectors",
                queries.len()
            );
        }
        let k = k.min(self.len);
        let rows = queries.len() / dim;
        if k == 0 {
            return Ok(vec![Vec::new(); rows]);
        }
        // SAFETY: the index is this graph's, alive for the call, of width `dim`.
        let (labels, distances) =
            unsafe { ann_ffi::search(self.index.inner_ptr(), dim, queries, k, ef_search.max(k))? };
        let mut hits = to_hits(&labels, &distances, k);
        // The graph's candidates come out by distance; ties by id, as flat's merge orders them.
        for list in &mut hits {
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        Ok(hits)
    }
}

/// A stored HNSW file, opened and its header checked against the index.
pub struct HnswFile {
    file: File,
    path: PathBuf,
    dim: usize,
    count: u64,
}

impl HnswFile {
    pub fn open(path: &Path, count: u64, dim: usize) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        flat_file::check_header(&file, path, FOURCC, "IndexHNSWFlat", count, dim)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            dim,
            count,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the graph's per-node tables into the page cache, in large requests. faiss copies
    /// them (each node's level, 4 bytes, and offset into the links, 8) even from a mapped file,
    /// which it maps MADV_RANDOM, so each 4 KiB page of them would otherwise be its own disk
    /// request: at 5.2M nodes, 63 MB in 15,000 of them (1.5 s cold here, against 0.08 s read
    /// in order). They come first in the file, after a header and two tables of one entry per
    /// level; the links and the vectors after them are read only where a search goes.
    fn warm_node_tables(&self) -> Result<()> {
        const SLACK: u64 = 1 << 20;
        page_cache::warm(&self.file, &self.path, 0, 12 * (self.count + 1) + SLACK)?;
        Ok(())
    }

    /// Reads the graph's copy of the vectors (the end of the file) into the page cache, in
    /// order: an exact search reads them all, and from the mapping, page by page, each would
    /// be its own disk request (325,000 at 5.2M x 64 dims).
    pub fn warm_vectors(&self) -> Result<()> {
        let len = self
            .file
            .metadata()
            .with_context(|| format!("reading {}", self.path.display()))?
            .len();
        let vectors = self.count * self.dim as u64 * 4;
        page_cache::warm(&self.file, &self.path, len.saturating_sub(vectors), vectors)?;
        Ok(())
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Recall@`k` of `hnsw` against exact search on `flat`, with `samples` of the stored vectors
/// (evenly spaced) as the queries: the share of flat's top `k` the graph finds.
pub fn recall_against_flat(
    flat: &DenseIndex,
    hnsw: &HnswIndex,
    ef_search: usize,
    samples: usize,
    k: usize,
) -> Result<f64> {
    let (rows, dim) = (flat.len(), flat.dim());
    let samples = samples.min(rows);
    if samples == 0 {
        return Ok(1.0);
    }
    let queries: Vec<f32> = (0..samples)
        .flat_map(|i| {
            let row = i * rows / samples;
            flat.vectors()[row * dim..(row + 1) * dim].iter().copied()
        })
        .collect();
    let exact = flat.search_many(&queries, k)?;
    let approx = hnsw.search_many(&queries, k, ef_search)?;
    let (mut found, mut wanted) = (0usize, 0usize);
    for (exact, approx) in exact.iter().zip(&approx) {
        wanted += exact.len();
        found += exact
            .iter()
            .filter(|(id, _)| approx.iter().any(|(a, _)| a == id))
            .count();
    }
    Ok(found as f64 / wanted.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::Matrix;

    fn random_unit(rows: usize, dim: usize, seed: u64) -> Matrix {
        let mut rng = crate::rng::Rng::new(seed);
        let data = (0..rows * dim)
            .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let mut m = Matrix::from_vec(rows, dim, data);
        m.normalize_rows();
        m
    }

    #[test]
    fn specs_parse_and_print_as_written() {
        for (text, spec) in [
            ("flat", AnnSpec::Flat),
            ("hnsw", AnnSpec::Hnsw { m: DEFAULT_M }),
            ("hnsw:8", AnnSpec::Hnsw { m: 8 }),
        ] {
            assert_eq!(text.parse::<AnnSpec>().unwrap(), spec);
        }
        assert_eq!(AnnSpec::Hnsw { m: 8 }.to_string(), "hnsw:8");
        for bad in ["ivf", "hnsw:", "hnsw:1", "hnsw:x", "flat:3"] {
            assert!(bad.parse::<AnnSpec>().is_err(), "{bad}");
        }
    }

    /// Scores are flat's cosines; a wide search finds flat's top 10 exactly, a narrow one
    /// (efSearch 1 on a graph of 2 links) does not: efSearch reaches the search.
    #[test]
    fn a_graph_scores_like_flat_and_ef_search_changes_what_it_finds() {
        let m = random_unit(3000, 16, 7);
        let flat = DenseIndex::from_matrix(&m).unwrap();
        let hnsw = HnswIndex::build(&flat, 4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.hnsw.faiss");
        hnsw.save(&path).unwrap();
        let file = HnswFile::open(&path, 3000, 16).unwrap();
        let loaded = HnswIndex::load(&file, Residence::Mapped, true).unwrap();
        assert!(loaded.is_mapped());
        let in_memory = HnswIndex::load(&file, Residence::InMemory, true).unwrap();
        assert!(!in_memory.is_mapped());
        assert!(HnswFile::open(&path, 2999, 16).is_err());

        let query = m.row(42);
        let exact = flat.search(query, 10).unwrap();
        let approx = loaded.search_many(query, 10, 3000).unwrap().remove(0);
        assert_eq!(
            approx.iter().map(|h| h.0).collect::<Vec<_>>(),
            exact.iter().map(|h| h.0).collect::<Vec<_>>()
        );
        for (a, e) in approx.iter().zip(&exact) {
            assert!((a.1 - e.1).abs() < 1e-5, "{a:?} vs {e:?}");
        }
        let wide = recall_against_flat(&flat, &loaded, 3000, 200, 10).unwrap();
        let narrow = recall_against_flat(&flat, &loaded, 1, 200, 10).unwrap();
        assert!(wide > 0.99, "{wide}");
        assert!(narrow < wide, "{narrow} vs {wide}");
    }
}
