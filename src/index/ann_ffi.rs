//! The IndexHNSW calls faiss's C API lacks, compiled from `faiss_hnsw.cpp` by `build.rs`: the
//! graph's own flat storage (so exact search reads the vectors the graph already holds, not a
//! second copy), whether the graph is memory-mapped, and a search with efSearch given per call
//! (so searches need no lock).

use std::ffi::{c_char, c_int, CStr};

use anyhow::{bail, Result};
use faiss::Idx;
use faiss_sys::FaissIndex;

extern "C" {
    fn rag_faiss_last_error() -> *const c_char;
    fn rag_hnsw_flat_storage(index: *mut FaissIndex) -> *mut FaissIndex;
    fn rag_hnsw_is_mapped(index: *const FaissIndex) -> c_int;
    fn rag_faiss_io_flag_mmap() -> c_int;
    fn rag_hnsw_search(
        index: *const FaissIndex,
        n: i64,
        x: *const f32,
        k: i64,
        ef_search: c_int,
        distances: *mut f32,
        labels: *mut i64,
    ) -> c_int;
}

/// The `IndexFlat` an `IndexHNSW` stores its vectors in, owned by the graph; `None` if `index`
/// is not an HNSW graph over a flat storage.
///
/// # Safety
/// `index` must point to a live faiss index; the result lives as long as it does.
pub unsafe fn flat_storage(index: *mut FaissIndex) -> Option<*mut FaissIndex> {
    let storage = rag_hnsw_flat_storage(index);
    (!storage.is_null()).then_some(storage)
}

/// The `read_index` flag that memory-maps an `IndexHNSWFlat` (faiss's `IO_FLAG_MMAP_IFC`).
pub fn io_flag_mmap() -> i32 {
    // SAFETY: returns a constant.
    unsafe { rag_faiss_io_flag_mmap() }
}

/// Whether the graph's links are a view of its memory-mapped file (`Some(true)`), owned in
/// memory (`Some(false)`); `None` if `index` is not an HNSW graph.
///
/// # Safety
/// `index` must point to a live faiss index.
pub unsafe fn is_mapped(index: *const FaissIndex) -> Option<bool> {
    match rag_hnsw_is_mapped(index) {
        1 => Some(true),
        0 => Some(false),
        _ => None,
    }
}

/// faiss's `k` labels and squared distances for each of the row-major `queries` (of width
/// `dim`), visiting `ef_search` candidates.
///
/// # Safety
/// `index` must point to a live faiss `IndexHNSW` of width `dim`.
pub unsafe fn search(
    index: *const FaissIndex,
    dim: usize,
    queries: &[f32],
    k: usize,
    ef_search: usize,
) -> Result<(Vec<Idx>, Vec<f32>)> {
    let rows = queries.len() / dim;
    let mut distances = vec![0f32; rows * k];
    let mut labels = vec![-1i64; rows * k];
    let ef_search = c_int::try_from(ef_search).unwrap_or(c_int::MAX);
    let status = rag_hnsw_search(
        index,
        rows as i64,
        queries.as_ptr(),
        k as i64,
        ef_search,
        distances.as_mut_ptr(),
        labels.as_mut_ptr(),
    );
    if status != 0 {
        let message = CStr::from_ptr(rag_faiss_last_error()).to_string_lossy();
        bail!("faiss: {message}");
    }
    Ok((labels.into_iter().map(Idx::from).collect(), distances))
}
