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

use crate::corpus::StreamStats;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::ann::{hnsw_file, AnnSpec, HnswFile, HnswIndex};
use super::build::building_dir;
use super::docstore::{DocStoreMark, DocStoreWriter, DOCS_FILE};
use super::manifest::{CHECKSUMS_FORMAT_VERSION, REMOVALS_FORMAT_VERSION};
use super::removed::Removed;
use super::{
    bm25, compact, dense_file, links, lock, sharded, target, DenseIndex, Manifest, OpenDir,
};
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
    files::recover_interrupted_install(index_dir)?;
    if sharded::is_sharded(index_dir) {
        bail!(
            "{} is sharded: add or remove documents by rebuilding their shards (`rag index --shard i/n`, then --merge)",
            index_dir.display()
        );
    }
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
            "{} is one shard of a sharded index: rebuild the shard, then --merge",
            index_dir.display()
        );
    }
    let part = OpenDir::open(index_dir)?;
    let served = Served::read(&part)?;

    let mut changes = Changes::default();
    for title in &options.remove_titles {
        let local = served.by_title(title).with_context(|| {
            format!(
                "--remove {title:?}: no document of {} has this title",
                index_dir.display()
            )
        })?;
        changes.remove(local);
        changes.removed += 1;
    }
    for source in &options.remove_sources {
        let found = served.came_from(source);
        if found.is_empty() {
            bail!(
                "--remove-source {}: no document of {} came from it",
                source.display(),
                index_dir.display()
            );
        }
        changes.removed += found.len();
        found.into_iter().for_each(|local| changes.remove(local));
    }

    let encoder = match options.add.is_empty() && options.documents.is_empty() {
        true => None,
        false => Some(load_encoder(options, &manifest)?),
    };
    let mut given = Vec::new();
    let mut digests = Vec::new();
    let mut read = StreamStats::default();
    if let Some(encoder) = &encoder {
        (given, digests, read) = read_additions(encoder, options, &manifest.template)?;
    }
    given.extend(options.documents.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    for paragraph in given {
        // The first of a title wins, as in a build.
        if !seen.insert(paragraph.title.clone()) {
            read.duplicates += 1;
            continue;
        }
        match served.by_title(&paragraph.title) {
            Some(local) if part.document(local)? == paragraph => changes.unchanged += 1,
            Some(local) => {
                changes.remove(local);
                changes.changed += 1;
                changes.added.push(paragraph);
            }
            None => {
                changes.added.push(paragraph);
                changes.new += 1;
            }
        }
    }
    if options.sync {
        for (&local, title) in &served.titles {
            if !seen.contains(title) {
                changes.remove(local);
                changes.removed += 1;
            }
        }
    }
    if options.sync && changes.added.len() * 2 > seen.len() {
        return Ok(UpdateSummary {
            declined: true,
            ..Default::default()
        });
    }
    // A sync names the inputs as read now, with the checksums taken while reading them.
    let corpus = corpus.map(|inputs| {
        inputs
            .iter()
            .zip(&digests)
            .map(|(input, sha)| CorpusFile::new(input, sha.clone()))
            .collect::<Vec<_>>()
    });
    let corpus_changed = corpus.as_ref().is_some_and(|c| *c != manifest.corpus);
    let documents_changed = !changes.added.is_empty() || !changes.removing.is_empty();
    // An index from before stored title links gains them as an update with no other change.
    if !documents_changed && !corpus_changed && part.links().is_some() {
        return Ok(UpdateSummary {
            index_dir: index_dir.to_path_buf(),
            unchanged: changes.unchanged,
            documents: served.titles.len() as u64,
            removed_rows: manifest.removed,
            build_id: manifest.build_id(),
            total_seconds: started.elapsed().as_secs_f64(),
            up_to_date: true,
            read,
            ..Default::default()
        });
    }

    let work = building_dir(index_dir);
    if work.join(super::build::PROGRESS_FILE).exists() {
        bail!(
            "an interrupted build waits in {}: finish it (run the same `rag index`) or start over with `rag index --fresh`",
            work.display()
        );
    }
    files::remove_owned_dir(&work).context("removing a stale update")?;
    let adding = !changes.added.is_empty();
    copy_index(index_dir, &work, adding)?;
    files::mark_owned(&work)?;

    let first = manifest.documents;
    let mut manifest = manifest;
    let encode_started = Instant::now();
    let vectors = match &encoder {
        Some(encoder) if adding => encode(encoder, &manifest, &changes.added, options.progress)?,
        _ => Vec::new(),
    };
    let encode_seconds = encode_started.elapsed().as_secs_f64();
    drop(encoder);
    if adding {
        let docs_bytes = std::fs::metadata(work.join(DOCS_FILE))
            .with_context(|| format!("reading {}", work.join(DOCS_FILE).display()))?
            .len();
        let mut docs = DocStoreWriter::open_at(
            &work,
            DocStoreMark {
                documents: first,
                docs_bytes,
            },
        )?;
        for paragraph in &changes.added {
            docs.append(paragraph)?;
        }
        docs.sync()?;
        for (&depth, rows) in manifest.layers.iter().zip(&vectors) {
            append_vectors(&part, &work, depth, rows, manifest.ann)?;
        }
    }
    let new_removals = changes.removing.clone();
    let removed_documents = new_removals
        .iter()
        .map(|&local| Ok((local, part.document(local)?)))
        .collect::<Result<Vec<_>>>()?;
    let added_documents: Vec<(u64, Paragraph)> = changes
        .added
        .iter()
        .enumerate()
        .map(|(i, p)| (first + i as u64, p.clone()))
        .collect();
    let mut tokens = part.bm25().token_counts()?;
    bm25::update(
        &work.join("bm25"),
        &removed_documents,
        &added_documents,
        &mut tokens,
    )?;
    manifest.bm25_tokens = Some(tokens);
    let mut removed = part.removed().ids().to_vec();
    removed.extend(new_removals);
    let removed = Removed::from_ids(removed);
    manifest.documents = first + changes.added.len() as u64;
    let compacted = removed.len() as f64 > COMPACT_SHARE * manifest.documents as f64;
    let removed = match compacted {
        true => {
            compact::compact(&work, &manifest, &removed)?;
            manifest.documents -= removed.len() as u64;
            // BM25 built afresh: tantivy's token counts are exact again.
            manifest.bm25_tokens = None;
            Removed::default()
        }
        false => removed,
    };
    removed.write(&work)?;
    links::write_for_store(&work, None, &removed)?;
    manifest.removed = removed.len() as u64;
    // `updates` counts the changes since the corpus the manifest names was read whole: a sync
    // makes the index that corpus's again.
    manifest.updates = match corpus {
        Some(_) => 0,
        None if documents_changed => manifest.updates + 1,
        None => manifest.updates,
    };
    manifest.format_version = match removed.is_empty() {
        true => CHECKSUMS_FORMAT_VERSION,
        false => REMOVALS_FORMAT_VERSION,
    };
    if let Some(corpus) = corpus {
        manifest.corpus = corpus;
    }
    files::follow_umask(&work)?;
    manifest.seal(&work, &[])?;
    manifest.write(&work)?;
    drop(part);
    files::install_dir(&work, index_dir)?;
    Ok(UpdateSummary {
        index_dir: index_dir.to_path_buf(),
        added: changes.new,
        changed: changes.changed,
        unchanged: changes.unchanged,
        removed: changes.removed,
        documents: manifest.documents - manifest.removed,
        removed_rows: manifest.removed,
        build_id: manifest.build_id(),
        compacted,
        encode_seconds,
        total_seconds: started.elapsed().as_secs_f64(),
        up_to_date: false,
        declined: false,
        read,
    })
}

/// What an update does.
#[derive(Default)]
struct Changes {
    /// Documents to add, in the order given, ids following the index's last.
    added: Vec<Paragraph>,
    /// Local ids taken out by this update.
    removing: Vec<u64>,
    new: usize,
    changed: usize,
    unchanged: usize,
    removed: usize,
}

impl Changes {
    fn remove(&mut self, local: u64) {
        if !self.removing.contains(&local) {
            self.removing.push(local);
        }
    }
}

/// The served documents' titles (as stored, and decoded where that differs) and sources.
struct Served {
    titles: HashMap<u64, String>,
    by_title: HashMap<String, u64>,
    sources: Vec<(u64, PathBuf)>,
}

impl Served {
    fn read(part: &OpenDir) -> Result<Self> {
        let mut served = Self {
            titles: HashMap::new(),
            by_title: HashMap::new(),
            sources: Vec::new(),
        };
        for local in (0..part.documents()).filter(|&l| part.serves(l)) {
            let paragraph = part.document(local)?;
            if let Some(source) = &paragraph.source {
                served.sources.push((local, PathBuf::from(&source.path)));
            }
            let decoded = crate::corpus::decode_entities(paragraph.title.clone());
            served.by_title.entry(decoded).or_insert(local);
            served.by_title.insert(paragraph.title.clone(), local);
            served.titles.insert(local, paragraph.title);
        }
        Ok(served)
    }

    fn by_title(&self, title: &str) -> Option<u64> {
        self.by_title.get(title).copied()
    }

    /// The documents from `source`: that file, or any file under that folder.
    fn came_from(&self, source: &Path) -> Vec<u64> {
        let wanted = normalise(source);
        self.sources
            .iter()
            .filter(|(_, path)| normalise(path).starts_with(&wanted))
            .map(|(local, _)| *local)
            .collect()
    }
}

/// `path` without `.` components, so that `./notes/a.md` names `notes/a.md`.
fn normalise(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// The index's encoder, at the depth and precision its documents were encoded with.
fn load_encoder(options: &UpdateOptions, manifest: &Manifest) -> Result<Encoder> {
    let mut encoder_options = options.encoder.clone();
    encoder_options.max_layers = manifest.layers.iter().max().copied();
    encoder_options.precision = manifest.model.precision;
    let encoder = Encoder::load(&options.model_dir, &encoder_options)?;
    manifest.model.check_matches(&encoder)?;
    Ok(encoder)
}

/// The documents of `options.add`, cut as a build cuts them, and each input's sha256.
fn read_additions(
    encoder: &Encoder,
    options: &UpdateOptions,
    template: &str,
) -> Result<(Vec<Paragraph>, Vec<String>, StreamStats)> {
    if options.add.is_empty() {
        return Ok((Vec::new(), Vec::new(), StreamStats::default()));
    }
    let inputs = options
        .add
        .iter()
        .map(|p| CorpusInput::inspect(p))
        .collect::<Result<Vec<_>>>()?;
    let chunker = Chunker::new(encoder.tokenizer(), encoder.max_length, template)?;
    let mut stream = ParagraphStream::from_inputs(inputs, options.skip_bad, Some(chunker));
    let paragraphs = stream.by_ref().collect::<Result<Vec<_>>>()?;
    let read = stream.stats().cloned().unwrap_or_default();
    Ok((paragraphs, stream.digests().to_vec(), read))
}

/// Each depth's vectors of `added`, at the stored width, row-major.
fn encode(
    encoder: &Encoder,
    manifest: &Manifest,
    added: &[Paragraph],
    mode: ProgressMode,
) -> Result<Vec<Vec<f32>>> {
    let mut out = vec![Vec::new(); manifest.layers.len()];
    let mut bar = Progress::new(
        mode,
        "encoding",
        added.len() as u64,
        "encoding {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}]",
    );
    let mut done = 0;
    for batch in added.chunks(ENCODE_BATCH) {
        let texts: Vec<String> = batch.iter().map(|p| p.render(&manifest.template)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for (rows, matrix) in out.iter_mut().zip(encoder.encode(&refs, &manifest.layers)?) {
            let matrix = match manifest.stored_dim < matrix.cols {
                true => matrix.truncated(manifest.stored_dim),
                false => matrix,
            };
            rows.extend_from_slice(&matrix.data);
        }
        done += batch.len() as u64;
        bar.update(done, || format!("{done} documents"));
    }
    bar.finish();
    Ok(out)
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
    let mut dense = DenseIndex::new(dim)?;
    dense.add(live.vectors())?;
    dense.add(rows)?;
    super::create_dir(&work.join("dense"))?;
    dense.save(&dense_file(work, depth, dim))?;
    if let AnnSpec::Hnsw { .. } = ann {
        // Loaded afresh: a server's graph in memory is never changed under its searches.
        let path = hnsw_file(&part.dir, depth, dim);
        let file = HnswFile::open(&path, part.documents(), dim)?;
        let mut graph = HnswIndex::load(&file)?;
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
