//! The dense side: a faiss `IndexFlatL2` over L2-normalised vectors. On unit vectors the squared
//! L2 distance ranks exactly like cosine similarity (`cos = 1 - d^2 / 2`), which is the score
//! reported.

use std::any::Any;
use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use faiss::index::flat::FlatIndexImpl;
use faiss::index::{FromInnerPtr, SearchWithParams};
use faiss::search_params::SearchParameters;
use faiss::selector::IdSelector;
use faiss::{ConcurrentIndex, Idx, Index};
use rayon::prelude::*;

use crate::vectors::Matrix;

pub struct DenseIndex {
    /// Dropped (freed) only when `owner` is `None`: a borrowed index belongs to its owner.
    index: ManuallyDrop<FlatIndexImpl>,
    /// What a borrowed index lives in (an HNSW graph's own flat storage), kept alive with it.
    owner: Option<Arc<dyn Any + Send + Sync>>,
}

impl Drop for DenseIndex {
    fn drop(&mut self) {
        if self.owner.is_none() {
            // SAFETY: owned, and dropped only here.
            unsafe { ManuallyDrop::drop(&mut self.index) };
        }
    }
}

fn faiss_error(e: faiss::error::Error) -> anyhow::Error {
    anyhow!("faiss: {e}")
}

impl DenseIndex {
    pub fn new(dim: usize) -> Result<Self> {
        Ok(Self::owning(
            FlatIndexImpl::new_l2(dim as u32).map_err(faiss_error)?,
        ))
    }

    /// An index of its own over `index` (one faiss read: a mapped one is read-only).
    pub(super) fn owning(index: FlatIndexImpl) -> Self {
        Self {
            index: ManuallyDrop::new(index),
            owner: None,
        }
    }

    /// The flat index at `inner`, which `owner` holds and frees: searched, never freed here.
    ///
    /// # Safety
    /// `inner` must point to a faiss `IndexFlat` that stays alive and unchanged while `owner`
    /// does.
    pub(super) unsafe fn borrowed(
        inner: *mut faiss_sys::FaissIndex,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Self {
            index: ManuallyDrop::new(FlatIndexImpl::from_inner_ptr(inner)),
            owner: Some(owner),
        }
    }

    /// Adds rows that are already unit length (to an index of its own, read whole or built:
    /// one borrowed from a graph or memory-mapped is read-only).
    pub fn add(&mut self, vectors: &[f32]) -> Result<()> {
        if self.owner.is_some() {
            anyhow::bail!("a graph's vectors are read-only");
        }
        self.index.add(vectors).map_err(faiss_error)
    }

    pub fn from_matrix(matrix: &Matrix) -> Result<Self> {
        let mut index = Self::new(matrix.cols)?;
        index.add(&matrix.data)?;
        Ok(index)
    }

    pub fn dim(&self) -> usize {
        self.index.d() as usize
    }

    pub fn len(&self) -> usize {
        self.index.ntotal() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored vectors, row-major.
    pub fn vectors(&self) -> &[f32] {
        self.index.xb()
    }

    /// A new index over the first `dim` dimensions of these vectors, re-normalised: the ESE
    /// way of serving a smaller size without re-encoding anything.
    pub fn truncated(&self, dim: usize) -> Result<Self> {
        let mut out = Self::new(dim)?;
        // Slice in blocks so a multi-gigabyte index is not copied whole a second time.
        let full = self.dim();
        for block in self.vectors().chunks(full * 65_536) {
            let rows = block.len() / full;
            let matrix = Matrix::from_vec(rows, full, block.to_vec()).truncated(dim);
            out.add(&matrix.data)?;
        }
        Ok(out)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("faiss.tmp");
        let tmp_str = tmp.to_str().context("index path is not UTF-8")?;
        faiss::write_index(&*self.index, tmp_str)
            .map_err(faiss_error)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }

    /// The `k` nearest rows to a unit-length `query` as (id, cosine similarity).
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        Ok(self.search_many(query, k)?.pop().unwrap_or_default())
    }

    /// [`search`](Self::search) for many row-major queries in one faiss call.
    pub fn search_many(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<(u64, f32)>>> {
        let dim = self.dim();
        if queries.is_empty() || !queries.len().is_multiple_of(dim) {
            anyhow::bail!(
                "queries have {} values, not a whole number of {dim}-dimensional vectors",
                queries.len()
            );
        }
        let k = k.min(self.len());
        let rows = queries.len() / dim;
        if k == 0 {
            return Ok(vec![Vec::new(); rows]);
        }
        let threads = rayon::current_num_threads();
        if threads == 1 || self.len() < threads * MIN_SPLIT_ROWS {
            let result = ConcurrentIndex::search(&*self.index, queries, k).map_err(faiss_error)?;
            return Ok(to_hits(&result.labels, &result.distances, k));
        }
        batched_faiss_searches();
        // faiss spreads a search over queries, so one question would scan the whole index on
        // one core, and a few would each scan all of it: give each core a range of the rows
        // instead (faiss then answers a range's questions together), and merge their top k.
        let total = self.len() as u64;
        let parts: Vec<_> = (0..threads as u64)
            .into_par_iter()
            .map(|part| {
                let range = IdSelector::range(
                    Idx::new(total * part / threads as u64),
                    Idx::new(total * (part + 1) / threads as u64),
                )
                .and_then(SearchParameters::new)
                .map_err(faiss_error)?;
                self.index
                    .search_with_params(queries, k, &range)
                    .map_err(faiss_error)
            })
            .collect::<Result<_>>()?;
        Ok((0..rows)
            .map(|row| {
                let mut hits: Vec<(u64, f32)> = parts
                    .iter()
                    .flat_map(|p| {
                        to_hits(&p.labels[row * k..][..k], &p.distances[row * k..][..k], k)
                    })
                    .flatten()
                    .collect();
                hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                hits.truncate(k);
                hits
            })
            .collect())
    }
}

/// Below this many rows per core, splitting a search costs more than it saves.
const MIN_SPLIT_ROWS: usize = 4096;

/// From this many questions in one call, faiss computes their distances as one matrix product
/// (BLAS), reading the vectors once for all of them, instead of scanning the vectors once per
/// question. Measured on 19k x 384 split over 2 cores: 8 questions took 0.51 ms each that way
/// against 0.65 ms scanned; 4 were about even (faiss's own threshold is 20).
const BLAS_MIN_QUESTIONS: i32 = 4;

/// Sets faiss's batched path up, once per process: BLAS from `BLAS_MIN_QUESTIONS` on, on one
/// BLAS thread per caller, since each core already searches its own range.
fn batched_faiss_searches() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sets a plain global int that faiss reads at the start of each search.
        unsafe { faiss_sys::faiss_set_distance_compute_blas_threshold(BLAS_MIN_QUESTIONS) };
        crate::runtime::single_threaded_blas();
    });
}

/// faiss's `k` labels and squared distances per query as (id, cosine), absent hits dropped.
pub(super) fn to_hits(labels: &[Idx], distances: &[f32], k: usize) -> Vec<Vec<(u64, f32)>> {
    labels
        .chunks(k)
        .zip(distances.chunks(k))
        .map(|(labels, distances)| {
            labels
                .iter()
                .zip(distances)
                .filter_map(|(label, &d)| label.get().map(|id| (id, 1.0 - d / 2.0)))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_neighbours_by_cosine_survive_save_load_and_truncation() {
        let mut m = Matrix::from_vec(
            3,
            4,
            vec![1.0, 0.0, 0.0, 0.0, 0.6, 0.8, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        );
        m.normalize_rows();
        let index = DenseIndex::from_matrix(&m).unwrap();
        let hits = index.search(&[1.0, 0.0, 0.0, 0.0], 2).unwrap();
        assert_eq!(hits[0].0, 0);
        assert!((hits[0].1 - 1.0).abs() < 1e-5);
        assert_eq!(hits[1].0, 1);
        assert!((hits[1].1 - 0.6).abs() < 1e-5);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.faiss");
        index.save(&path).unwrap();
        use crate::index::flat_file::{Checks, FlatFile, Residence};
        let (loaded, _) = FlatFile::open(&path, 3, 4)
            .unwrap()
            .load(Residence::Mapped, Checks::None)
            .unwrap();
        assert_eq!(loaded.vectors(), index.vectors());

        // First two dims only: row 2 becomes all-zero, rows 0 and 1 keep their order.
        let small = loaded.truncated(2).unwrap();
        assert_eq!(small.dim(), 2);
        assert_eq!(small.search(&[1.0, 0.0], 1).unwrap()[0].0, 0);
        assert!(small.search(&[1.0, 0.0, 0.0], 1).is_err());
    }

    /// One question (each core scans its range), a few (faiss's per-question scan in each
    /// range) and more (its BLAS product in each range) all rank like an exact scan.
    #[test]
    fn split_searches_match_an_exact_scan_for_any_number_of_questions() {
        let (rows, dim, k) = (3 * MIN_SPLIT_ROWS + 17, 8, 10);
        let mut rng = crate::rng::Rng::new(5);
        let data = (0..rows * dim)
            .map(|_| (rng.next_u64() % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let mut m = Matrix::from_vec(rows, dim, data);
        m.normalize_rows();
        let index = DenseIndex::from_matrix(&m).unwrap();
        for questions in [1, 3, BLAS_MIN_QUESTIONS as usize, 9] {
            let picked: Vec<usize> = (0..questions).map(|q| 42 + 1000 * q).collect();
            let queries: Vec<f32> = picked
                .iter()
                .flat_map(|&row| m.row(row).iter().copied())
                .collect();
            let got = index.search_many(&queries, k).unwrap();
            for (hits, &row) in got.iter().zip(&picked) {
                let mut exact: Vec<(u64, f32)> = (0..rows)
                    .map(|i| (i as u64, crate::vectors::cosine(m.row(row), m.row(i))))
                    .collect();
                exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                assert_eq!(hits[0].0, row as u64);
                assert_eq!(
                    hits.iter().map(|h| h.0).collect::<Vec<_>>(),
                    exact[..k].iter().map(|h| h.0).collect::<Vec<_>>(),
                    "{questions} questions, question {row}"
                );
                for (h, e) in hits.iter().zip(&exact) {
                    assert!((h.1 - e.1).abs() < 1e-4, "{h:?} vs {e:?}");
                }
            }
        }
    }
}
