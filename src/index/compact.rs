//! Compaction: an index's removed rows ([`super::removed`]) dropped from the document store and
//! the vector files, and the ids of the documents left renumbered `0..n` in the order they had
//! (a shard's keep their global ids, in the same order), so that rankings (ties by id) do not
//! change. BM25 is rebuilt with the new ids and each HNSW
//! graph is built again from the stored vectors, as a build builds them: nothing is encoded.
//! Done in an update's staging folder ([`super::update`]), before it is sealed and installed.

use std::path::Path;

use anyhow::{Context, Result};

use super::ann::{hnsw_file, AnnSpec, HnswIndex};
use super::docstore::{DocStore, DocStoreMark, DocStoreWriter, DOCS_FILE, OFFSETS_FILE};
use super::flat_file::{Checks, FlatFile, FlatFileWriter, Residence};
use super::removed::Removed;
use super::{bm25, dense_file, Manifest};

/// Rows of the old vector file filtered at a time.
const BLOCK_ROWS: usize = 65_536;

/// Drops `removed` (local ids below `manifest.documents`) from the index being staged in `work`;
/// `ids`, a shard's global ids by local id, gives those of the documents kept.
pub fn compact(
    work: &Path,
    manifest: &Manifest,
    removed: &Removed,
    ids: Option<&[u64]>,
) -> Result<Option<Vec<u64>>> {
    let keep = |local: u64| !removed.contains(local);
    let scratch = work.join("compacting");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("removing {}", scratch.display()))?;
    }
    super::create_dir(&scratch)?;
    {
        let store = DocStore::open(work)?;
        let mut out = DocStoreWriter::open_at(&scratch, DocStoreMark::default())?;
        for local in (0..manifest.documents).filter(|&l| keep(l)) {
            out.append(&store.get(local)?)?;
        }
        out.sync()?;
    }
    for name in [DOCS_FILE, OFFSETS_FILE] {
        std::fs::rename(scratch.join(name), work.join(name))
            .with_context(|| format!("replacing {}", work.join(name).display()))?;
    }
    std::fs::remove_dir_all(&scratch).with_context(|| format!("removing {}", scratch.display()))?;

    let dim = manifest.stored_dim;
    let kept_count = (0..manifest.documents).filter(|&l| keep(l)).count() as u64;
    for &depth in &manifest.layers {
        let path = dense_file(work, depth, dim);
        // Mapped and streamed into the new file (which replaces it by rename; the mapping keeps
        // the old one readable), so no more than a block of rows is ever in memory.
        let (all, _) = FlatFile::open(&path, manifest.documents, dim)?
            .load(Residence::Mapped, Checks::None)?;
        let mut out = FlatFileWriter::create(&path, dim, kept_count)?;
        for (block, rows) in all.vectors().chunks(dim * BLOCK_ROWS).enumerate() {
            let kept: Vec<f32> = rows
                .chunks_exact(dim)
                .enumerate()
                .filter(|(i, _)| keep((block * BLOCK_ROWS + i) as u64))
                .flat_map(|(_, row)| row.iter().copied())
                .collect();
            out.write_rows(&kept)?;
        }
        out.finish()?;
        drop(all);
        if let AnnSpec::Hnsw { m } = manifest.ann {
            let (kept, _) =
                FlatFile::open(&path, kept_count, dim)?.load(Residence::Mapped, Checks::None)?;
            HnswIndex::build(&kept, m)
                .with_context(|| format!("--ann {} on layer {depth}", manifest.ann))?
                .save(&hnsw_file(work, depth, dim))?;
        }
    }

    let kept = ids.map(|ids| {
        (0..manifest.documents)
            .filter(|&l| keep(l))
            .map(|l| ids[l as usize])
            .collect::<Vec<_>>()
    });
    let bm25_dir = work.join("bm25");
    std::fs::remove_dir_all(&bm25_dir)
        .with_context(|| format!("removing {}", bm25_dir.display()))?;
    let store = DocStore::open(work)?;
    bm25::build(
        &bm25_dir,
        store.iter().enumerate().map(|(local, paragraph)| {
            let id = kept.as_ref().map_or(local as u64, |ids| ids[local]);
            Ok((id, paragraph?))
        }),
        || {},
    )?;
    Ok(kept)
}
