//! Additions, changes and removals without a rebuild (`rag index --add/--remove/
//! --remove-source`, `POST /documents`, `DELETE /documents/{title}`, and a plain `rag index
//! --corpus` on an index of the same settings).
//!
//! A document is known by its title. One whose title the index does not serve is added: encoded
//! (only it), appended to the document store, the vector files and the HNSW graphs with the
//! next ids, and added to BM25. One whose title it serves is unchanged if the stored document
//! is the same (title, text, links and source: the store keeps the text, so the comparison is
//! exact and no separate hash is kept), else it is changed: the old one removed, the new one
//! added. A removed document keeps its row everywhere but BM25 and is listed in `removed.u64`
//! ([`super::removed`]); every other id stays what it was, so rankings (best first, ties by
//! id) are those of a fresh build of the resulting corpus. When removed rows pass
//! [`COMPACT_SHARE`] of the index, a compaction ([`super::compact`]) drops them and renumbers
//! the ids in the same order.
//!
//! An update is a new build, made as a build makes one: under the build lock, in
//! `<index>.building/` (a copy of the live index with the change applied), sealed, its manifest
//! written last and installed by two renames. Cut off anywhere (kill -9), the live index is
//! untouched and the same command starts over.

mod plan;
mod shards;

use plan::{Changes, Plan};
pub use shards::recover as recover_sharded;

use crate::corpus::StreamStats;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::ann::{hnsw_file, AnnSpec, HnswFile, HnswIndex};
use super::build::building_dir;
use super::docstore::{DocStoreMark, DocStoreWriter, DOCS_FILE};
use super::flat_file::{FlatFileWriter, Residence};
use super::manifest::{CHECKSUMS_FORMAT_VERSION, REMOVALS_FORMAT_VERSION};
use super::removed::Removed;
use super::{bm25, compact, dense_file, links, lock, sharded, target, Manifest, OpenDir};
use crate::corpus::{Chunker, CorpusFile, CorpusInput, Paragraph, ParagraphStream};
use crate::encoder::{Encoder, EncoderOptions};
use crate::files;
use crate::progress::{Progress, ProgressMode};

/// The share of an index's rows that may be removed documents before an update compacts it:
/// below it, searches ask each part for that many more hits and the files keep the rows (at a
/// fifth, a search reads a quarter more vectors than it needs); above it, the rows are dropped
/// and the ids renumbered, which rebuilds BM25 and any HNSW graph from the stored vectors
/// (no encoding).
pub const COMPACT_SHARE: f64 = 0.2;

/// Documents encoded per batch.
const ENCODE_BATCH: usize = 256;

#[derive(Debug, Clone)]
pub struct UpdateOptions {
    pub index_dir: PathBuf,
    pub model_dir: PathBuf,
    /// How to run the encoder; its precision is the index's, whatever is asked.
    pub encoder: EncoderOptions,
    /// Files or folders whose documents are added (or replace the served ones of their titles).
    pub add: Vec<PathBuf>,
    /// Documents added as they are (`POST /documents`).
    pub documents: Vec<Paragraph>,
    /// Titles to take out; each must be served.
    pub remove_titles: Vec<String>,
    /// Source files (or folders) whose documents are taken out; each must match one.
    pub remove_sources: Vec<PathBuf>,
    /// Make the index hold exactly the documents of `add` (a plain `rag index --corpus`): the
    /// served documents not among them are removed too.
    pub sync: bool,
    pub skip_bad: bool,
    pub progress: ProgressMode,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct UpdateSummary {
    pub index_dir: PathBuf,
    /// New titles added.
    pub added: usize,
    /// Served titles whose document changed: replaced.
    pub changed: usize,
    /// Documents given that the index already served as they are.
    pub unchanged: usize,
    /// Documents taken out (not counting the changed ones' old versions).
    pub removed: usize,
    /// Documents served afterwards.
    pub documents: u64,
    /// Removed rows still in the files.
    pub removed_rows: u64,
    #[serde(rename = "generation")]
    pub build_id: String,
    /// The update dropped the removed rows and renumbered the ids.
    pub compacted: bool,
    pub encode_seconds: f64,
    pub total_seconds: f64,
    /// Nothing changed: no new build.
    pub up_to_date: bool,
    /// A sync that would encode more than half the corpus: nothing done, a build is cheaper.
    #[serde(skip)]
    pub declined: bool,
    /// What reading the given files saw (records, duplicate titles, files by kind), as a
    /// build reports it.
    pub read: StreamStats,
}

/// Applies `options` to the index, installing a new build unless nothing changes.
pub fn update(options: &UpdateOptions) -> Result<UpdateSummary> {
    let index_dir = target::resolve(&options.index_dir)?;
    let _lock = lock::BuildLock::acquire(&index_dir)?;
    update_locked(&index_dir, options, None)
}

/// [`update`] with the build lock already held; `corpus`, for a sync, the inputs the manifest
/// names afterwards.
pub(super) fn update_locked(
    index_dir: &Path,
    options: &UpdateOptions,
    corpus: Option<&[CorpusInput]>,
) -> Result<UpdateSummary> {
    let started = Instant::now();
    target::check_siblings(index_dir)?;
    if sharded::is_sharded(index_dir) {
        return shards::update(index_dir, options, started);
    }
    files::recover_interrupted_install(index_dir)?;
    let manifest = Manifest::read(index_dir)?;
    if let Some(reduce) = &manifest.reduce {
        bail!(
            "{} stores PCA-reduced vectors (--reduce {}), fitted on the corpus: a change of documents needs a rebuild",
            index_dir.display(),
            reduce.method
        );
    }
    if manifest.shard.is_some() {
        bail!(
            "{} is one shard of a sharded index: update the sharded index (the folder above it)",
            index_dir.display()
        );
    }
    let part = OpenDir::open(index_dir)?;
    let mut plan = Plan::make(std::slice::from_ref(&part), options, corpus)?;
    if plan.declined {
        return Ok(UpdateSummary {
            declined: true,
            ..Default::default()
        });
    }
    let corpus_changed = plan
        .corpus
        .as_ref()
        .is_some_and(|c| *c != part.manifest.corpus);
    let documents_changed = plan.documents_changed();
    // An index from before stored title links gains them as an update with no other change.
    if !documents_changed && !corpus_changed && part.links().is_some() {
        return Ok(plan.summary(index_dir, &part.manifest, started, false));
    }
    let work = building_dir(index_dir);
    if work.join(super::build::PROGRESS_FILE).exists() {
        bail!(
            "an interrupted build waits in {}: finish it (run the same `rag index`) or start over with `rag index --fresh`",
            work.display()
        );
    }
    let first = part.manifest.documents;
    let added_ids: Vec<u64> = plan.parts[0].order.iter().map(|o| first + o).collect();
    let vectors = plan.encode(options, &part.manifest)?;
    let manifest = stage(&part, &plan.parts[0], &vectors[0], &added_ids, &work, |m| {
        // `updates` counts the changes since the corpus the manifest names was read whole: a
        // sync makes the index that corpus's again.
        m.updates = match &plan.corpus {
            Some(_) => 0,
            None if documents_changed => m.updates + 1,
            None => m.updates,
        };
        if let Some(corpus) = &plan.corpus {
            m.corpus = corpus.clone();
        }
    })?;
    drop(part);
    files::install_dir(&work, index_dir)?;
    let mut summary = plan.summary(index_dir, &manifest, started, true);
    summary.compacted = manifest.documents < first + added_ids.len() as u64;
    Ok(summary)
}

/// Makes in `work` the new build of `part` with `changes`: the added documents (`vectors`, per
/// depth; global ids `added_ids`) appended, the removed ones taken out of BM25 and listed (or
/// dropped by a compaction), the title links written again; `finish` sets what else the
/// manifest says; then sealed with its manifest written, ready to install. Returns the
/// manifest.
fn stage(
    part: &OpenDir,
    changes: &Changes,
    vectors: &[Vec<f32>],
    added_ids: &[u64],
    work: &Path,
    finish: impl FnOnce(&mut Manifest),
) -> Result<Manifest> {
    files::remove_owned_dir(work).context("removing a stale update")?;
    let adding = !changes.added.is_empty();
    copy_index(&part.dir, work, adding)?;
    files::mark_owned(work)?;
    let mut manifest = part.manifest.clone();
    let first = manifest.documents;
    if adding {
        let docs_bytes = std::fs::metadata(work.join(DOCS_FILE))
            .with_context(|| format!("reading {}", work.join(DOCS_FILE).display()))?
            .len();
        let mut docs = DocStoreWriter::open_at(
            work,
            DocStoreMark {
                documents: first,
                docs_bytes,
            },
        )?;
        for paragraph in &changes.added {
            docs.append(paragraph)?;
        }
        docs.sync()?;
        for (&depth, rows) in manifest.layers.iter().zip(vectors) {
            append_vectors(part, work, depth, rows, manifest.ann)?;
        }
    }
    let removed_documents = changes
        .removing
        .iter()
        .map(|&local| Ok((part.global(local), part.document(local)?)))
        .collect::<Result<Vec<_>>>()?;
    let added_documents: Vec<(u64, Paragraph)> = added_ids
        .iter()
        .copied()
        .zip(changes.added.iter().cloned())
        .collect();
    let mut tokens = part.bm25().token_counts()?;
    bm25::update(
        &work.join("bm25"),
        &removed_documents,
        &added_documents,
        &mut tokens,
    )?;
    manifest.bm25_tokens = Some(tokens);
    // A shard's ids: the added documents' global ids after its own.
    let mut ids = match manifest.shard {
        Some(_) => {
            let mut ids: Vec<u64> = (0..first).map(|local| part.global(local)).collect();
            ids.extend_from_slice(added_ids);
            Some(ids)
        }
        None => None,
    };
    let mut removed = part.removed().ids().to_vec();
    removed.extend(changes.removing.iter().copied());
    let removed = Removed::from_ids(removed);
    manifest.documents = first + changes.added.len() as u64;
    let compacted = removed.len() as f64 > COMPACT_SHARE * manifest.documents as f64;
    let removed = match compacted {
        true => {
            ids = compact::compact(work, &manifest, &removed, ids.as_deref())?;
            manifest.documents -= removed.len() as u64;
            // BM25 built afresh: tantivy's token counts are exact again.
            manifest.bm25_tokens = None;
            Removed::default()
        }
        false => removed,
    };
    if let Some(ids) = &ids {
        sharded::write_ids(&work.join(sharded::IDS_FILE), ids)?;
    }
    removed.write(work)?;
    links::write_for_store(work, ids.as_deref(), &removed)?;
    manifest.removed = removed.len() as u64;
    manifest.format_version = match removed.is_empty() {
        true => CHECKSUMS_FORMAT_VERSION,
        false => REMOVALS_FORMAT_VERSION,
    };
    finish(&mut manifest);
    files::follow_umask(work)?;
    manifest.seal(work, &[])?;
    manifest.write(work)?;
    Ok(manifest)
}

/// Writes depth `depth`'s vectors into `work`: the live ones (checked as a search would load
/// them), then `rows`; and its graph with `rows` inserted.
fn append_vectors(
    part: &OpenDir,
    work: &Path,
    depth: usize,
    rows: &[f32],
    ann: AnnSpec,
) -> Result<()> {
    let dim = part.manifest.stored_dim;
    let live = part.dense(depth, dim)?;
    super::create_dir(&work.join("dense"))?;
    let added = (rows.len() / dim.max(1)) as u64;
    let mut file = FlatFileWriter::create(
        &dense_file(work, depth, dim),
        dim,
        live.len() as u64 + added,
    )?;
    file.write_rows(live.vectors())?;
    file.write_rows(rows)?;
    file.finish()?;
    if let AnnSpec::Hnsw { .. } = ann {
        // Loaded afresh: a server's graph in memory is never changed under its searches.
        let path = hnsw_file(&part.dir, depth, dim);
        let file = HnswFile::open(&path, part.documents(), dim)?;
        let mut graph = HnswIndex::load(&file, Residence::InMemory, true)?;
        graph.add(rows)?;
        graph.save(&hnsw_file(work, depth, dim))?;
    }
    Ok(())
}

/// Copies the live index into `work`, but its manifest (written last) and, when `adding`, the
/// vector files and graphs (written anew with the additions).
fn copy_index(live: &Path, work: &Path, adding: bool) -> Result<()> {
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let from = live.join(&relative);
        let to = work.join(&relative);
        super::create_dir(&to)?;
        for entry in
            std::fs::read_dir(&from).with_context(|| format!("listing {}", from.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", from.display()))?;
            let path = relative.join(entry.file_name());
            let top = relative.as_os_str().is_empty();
            let skipped = (top
                && (entry.file_name() == super::manifest::MANIFEST_FILE
                    || entry.file_name() == files::OWNED_MARKER))
                || (adding && relative == Path::new("dense"));
            if skipped {
                continue;
            }
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                std::fs::copy(live.join(&path), work.join(&path)).with_context(|| {
                    format!(
                        "copying {} into {}",
                        live.join(&path).display(),
                        work.display()
                    )
                })?;
            }
        }
    }
    Ok(())
}
