//! Building an index: stream the corpus, encode it once to the deepest requested layer, keep
//! every requested depth, then build BM25 and faiss and swap the result in.
//!
//! Crash safety: everything is written in `<index>.building/`, beside the live index, which is
//! only replaced by renames once the new one is complete. Encoding checkpoints every
//! `chunk_size` documents (docstore and vector files fsynced, then `progress.json` replaced
//! atomically), so an interrupted build resumes from its last checkpoint. After encoding, BM25
//! and each depth's faiss files (an HNSW graph of millions of vectors takes an hour) are
//! recorded as finished as they complete, and a resumed build keeps them.
//!
//! With `--dim K` the vectors are cut to their first K dimensions and renormalised as they are
//! encoded, so the checkpoint, the faiss files and memory all hold K per depth; encoding stops at
//! the deepest stored layer.
//!
//! With `--reduce pca:K` each depth's PCA is fitted once every document is encoded, on the
//! checkpointed full-width vectors (a bounded, evenly spaced sample of them), and redone from
//! them if the build is interrupted after encoding: the reduction is not part of what a
//! checkpoint is resumed for, only of what the finished index is.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::ann::{hnsw_file, AnnSpec, HnswIndex};
use super::docstore::{open_truncated, DocStore, DocStoreMark, DocStoreWriter};
use super::given_vectors::GivenVectors;
use super::manifest::{CorpusCounts, Manifest, ModelIdentity, Versions};
use super::manifest::{ShardRecord, StoredReduction, CHECKSUMS_FORMAT_VERSION};
use super::removed::Removed;
use super::sharded::{self, ShardSpec};
use super::{bm25, create_dir, dense_file, links, lock, pca_file, target, OpenDir, Pca, PcaSpec};
use crate::corpus::{self, Chunker, CorpusFile, CorpusInput, Paragraph, ParagraphStream};
use crate::encoder::{Encoder, EncoderOptions};
use crate::files;
use crate::progress::{Progress, ProgressMode};
use crate::vectors::Matrix;

mod checkpoint;
mod encode;
mod stages;

use checkpoint::{
    stage_bm25, stage_dense, stage_links, start_or_resume, Checkpoint, Plan, PlannedInput,
};
use encode::encode_corpus;
use stages::{build_lexical, build_vectors};

pub const DEFAULT_CHUNK_SIZE: usize = 2048;
pub(super) const PROGRESS_FILE: &str = "progress.json";
/// The checkpointed full-width vectors, one file per depth.
const VECTORS_DIR: &str = "vectors";
/// Most vectors a PCA is fitted on, so that memory stays bounded on a corpus of millions.
pub const PCA_SAMPLE_LIMIT: usize = 100_000;
/// Rows read from a vectors file at a time.
const ROWS_PER_BLOCK: usize = 65_536;

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub index_dir: PathBuf,
    pub corpus: Vec<PathBuf>,
    pub model_dir: PathBuf,
    pub encoder: EncoderOptions,
    /// Depths to store; `None` is the model's full depth.
    pub layers: Option<Vec<usize>>,
    /// Store the first K dimensions of each depth's vectors, renormalised (`--dim K`); `None`
    /// is the full width (K with `reduce`). Queries may ask for any size up to it.
    pub dim: Option<usize>,
    /// Store the top K principal components of each depth's vectors instead of the vectors.
    pub reduce: Option<PcaSpec>,
    /// An approximate index to store beside each depth's flat one (`--ann hnsw[:M]`).
    pub ann: AnnSpec,
    pub template: String,
    /// Documents per checkpoint.
    pub chunk_size: usize,
    pub skip_bad: bool,
    /// Discard an interrupted build instead of resuming it.
    pub fresh: bool,
    /// Build only this shard of the corpus, into `<index_dir>/shard-<i>-of-<n>/`.
    pub shard: Option<ShardSpec>,
    pub progress: ProgressMode,
    /// Take each document's vectors from this folder's row files instead of the encoder
    /// ([`given_vectors`]: a scale harness's synthetic documents).
    pub vectors_from: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildSummary {
    pub index_dir: PathBuf,
    pub documents: u64,
    pub layers: Vec<usize>,
    pub dim: usize,
    pub stored_dim: usize,
    pub reduce: Option<StoredReduction>,
    pub resumed_from: u64,
    pub encode_seconds: f64,
    pub paragraphs_per_second: f64,
    pub total_seconds: f64,
    pub duplicates: usize,
    pub skipped_records: usize,
    /// Corpus files read, by kind (json, text, markdown, html).
    pub files: BTreeMap<String, usize>,
    /// Bad files skipped whole (`--skip-bad`).
    pub skipped_files: usize,
    /// Files in corpus folders of no kind that is read.
    pub ignored_files: usize,
    /// The index already held exactly this build; nothing was done.
    pub up_to_date: bool,
    /// The live index, built alike from another corpus, was updated to this one instead of
    /// rebuilt: what changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<super::update::UpdateSummary>,
}

impl BuildSummary {
    /// An index that already held exactly what was asked for: nothing was done.
    fn up_to_date(index_dir: PathBuf, manifest: Manifest) -> Self {
        Self {
            index_dir,
            documents: manifest.documents,
            layers: manifest.layers,
            dim: manifest.stored_dim,
            stored_dim: manifest.stored_dim,
            reduce: manifest.reduce,
            resumed_from: 0,
            encode_seconds: 0.0,
            paragraphs_per_second: 0.0,
            total_seconds: 0.0,
            duplicates: manifest.stats.duplicates,
            skipped_records: manifest.stats.skipped_records,
            files: manifest.stats.files,
            skipped_files: manifest.stats.skipped_files,
            ignored_files: manifest.stats.ignored_files,
            up_to_date: true,
            updated: None,
        }
    }

    /// The same, taking `started` as the start of the build.
    fn timed(mut self, started: Instant) -> Self {
        self.total_seconds = started.elapsed().as_secs_f64();
        self
    }
}

/// `index/default` -> `index/default.building`.
pub fn building_dir(index_dir: &Path) -> PathBuf {
    files::sibling(index_dir, "building")
}

fn vectors_file(dir: &Path, depth: usize) -> PathBuf {
    dir.join(VECTORS_DIR).join(format!("L{depth}.f32"))
}

/// Refuses options that cannot make an index, before anything is read or touched.
fn check_options(options: &BuildOptions) -> Result<()> {
    corpus::validate_template(&options.template)?;
    if options.corpus.is_empty() {
        bail!("no corpus files given");
    }
    if let (Some(shard), Some(spec)) = (options.shard, options.reduce) {
        // Each shard would fit its own PCA, and the shards' vectors would not be comparable.
        bail!("--reduce {spec} cannot be combined with --shard {shard}: each shard would fit a PCA of its own");
    }
    Ok(())
}

pub fn build(options: &BuildOptions) -> Result<BuildSummary> {
    let started = Instant::now();
    check_options(options)?;
    // Before anything is touched: a file or someone else's folder is refused, a link followed.
    let index_dir = target::resolve(&match options.shard {
        Some(shard) => shard.dir(&options.index_dir),
        None => options.index_dir.clone(),
    })?;
    let _lock = lock::BuildLock::acquire(&index_dir)?;
    target::check_siblings(&index_dir)?;
    let inputs = options
        .corpus
        .iter()
        .map(|p| CorpusInput::inspect(p))
        .collect::<Result<Vec<_>>>()?;

    let mut encoder_options = options.encoder.clone();
    encoder_options.max_layers = options
        .layers
        .as_ref()
        .and_then(|l| l.iter().max().copied());
    let encoder = Encoder::load(&options.model_dir, &encoder_options)?;
    let layers = options
        .layers
        .clone()
        .unwrap_or_else(|| vec![encoder.config().num_hidden_layers]);
    encoder.check_depths(&layers)?;
    let width = encoder.hidden_size();
    let stored_dim = stored_width(options, width, &encoder)?;
    // The width of the checkpointed vectors: what is stored, or the full width a PCA is fitted on.
    let encoded_width = if options.reduce.is_some() {
        width
    } else {
        stored_dim
    };

    let plan = Plan {
        model: ModelIdentity::of(&encoder)?,
        layers: layers.clone(),
        template: options.template.clone(),
        corpus: inputs.iter().map(PlannedInput::from).collect(),
        skip_bad: options.skip_bad,
        shard: options.shard,
        encoded_width: (encoded_width != width).then_some(encoded_width),
        vectors_from: options.vectors_from.clone(),
    };
    let work = building_dir(&index_dir);
    if !options.fresh {
        if let Some(summary) = reuse_live(&index_dir, &plan, &inputs, stored_dim, options)? {
            return Ok(summary.timed(started));
        }
    }
    let checkpoint = start_or_resume(&work, &plan, &inputs, options.fresh)?;
    let resumed_from = checkpoint.docstore.documents;

    let encode_started = Instant::now();
    let (mut checkpoint, counts) = match checkpoint.encoded.clone() {
        Some(counts) => (checkpoint, counts),
        None => encode_corpus(&encoder, &work, checkpoint, &inputs, options)?,
    };
    let encode_seconds = encode_started.elapsed().as_secs_f64();
    let encoded_now = checkpoint.docstore.documents - resumed_from;
    drop(encoder);

    let documents = checkpoint.docstore.documents;
    if documents == 0 {
        match options.shard {
            Some(shard) => {
                bail!("shard {shard} of this corpus holds no paragraphs; use fewer shards")
            }
            None => bail!("the corpus has no paragraphs"),
        }
    }
    build_lexical(&work, &mut checkpoint, documents, options.progress)?;
    let reduce = build_vectors(
        &work,
        &mut checkpoint,
        &layers,
        (width, encoded_width),
        documents,
        options,
    )?;
    let mut manifest = plan.manifest(
        &checkpoint,
        &counts,
        stored_dim,
        reduce.clone(),
        options.ann,
    );
    // Written last: a directory with a manifest is a whole index, and the manifest lists its
    // files. The checkpoint stays until then, so a build cut off before resumes from it.
    files::follow_umask(&work)?;
    manifest.seal(&work, &[VECTORS_DIR, PROGRESS_FILE])?;
    manifest.write(&work)?;
    // The raw vectors live on inside the faiss files; the checkpoint is no longer needed.
    std::fs::remove_dir_all(work.join(VECTORS_DIR)).context("removing raw vectors")?;
    std::fs::remove_file(work.join(PROGRESS_FILE)).context("removing progress file")?;
    files::install_dir(&work, &index_dir)?;

    Ok(BuildSummary {
        index_dir,
        documents,
        layers,
        dim: stored_dim,
        stored_dim,
        reduce,
        resumed_from,
        encode_seconds,
        paragraphs_per_second: encoded_now as f64 / encode_seconds.max(1e-9),
        total_seconds: started.elapsed().as_secs_f64(),
        duplicates: counts.duplicates,
        skipped_records: counts.skipped_records,
        files: counts.files.clone(),
        skipped_files: counts.skipped_files,
        ignored_files: counts.ignored_files,
        up_to_date: false,
        updated: None,
    })
}

/// What the live index already gives for this build, if anything: itself when it is up to date
/// (with the title links added when it is from before them), or itself updated to the corpus
/// when that encodes less than a build ([`super::update`]).
fn reuse_live(
    index_dir: &Path,
    plan: &Plan,
    inputs: &[CorpusInput],
    stored_dim: usize,
    options: &BuildOptions,
) -> Result<Option<BuildSummary>> {
    if let Some(manifest) = current_manifest(index_dir, plan, inputs, stored_dim, options) {
        // Built before the title links were stored: added without touching anything else.
        let manifest = match manifest.shard.is_none() && !index_dir.join(links::FST_FILE).exists() {
            true => {
                let mut add_links = sync_options(options);
                (add_links.add, add_links.sync) = (Vec::new(), false);
                super::update::update_locked(index_dir, &add_links, None)?;
                Manifest::read(index_dir)?
            }
            false => manifest,
        };
        return Ok(Some(BuildSummary::up_to_date(
            index_dir.to_path_buf(),
            manifest,
        )));
    }
    let work = building_dir(index_dir);
    if work.join(PROGRESS_FILE).exists() || !updatable(index_dir, plan, stored_dim, options) {
        return Ok(None);
    }
    let updated = super::update::update_locked(index_dir, &sync_options(options), Some(inputs))?;
    if updated.declined {
        return Ok(None);
    }
    Ok(Some(BuildSummary {
        index_dir: index_dir.to_path_buf(),
        documents: updated.documents,
        layers: plan.layers.clone(),
        dim: stored_dim,
        stored_dim,
        reduce: None,
        resumed_from: 0,
        encode_seconds: updated.encode_seconds,
        paragraphs_per_second: (updated.added + updated.changed) as f64
            / updated.encode_seconds.max(1e-9),
        total_seconds: 0.0,
        duplicates: updated.read.duplicates,
        skipped_records: updated.read.skipped_records,
        files: updated.read.files.clone(),
        skipped_files: updated.read.skipped_files,
        ignored_files: updated.read.ignored_files,
        up_to_date: updated.up_to_date,
        updated: Some(updated),
    }))
}

/// The width each depth's vectors are stored at: K with `--reduce pca:K` (the top K principal
/// components) or `--dim K` (the first K dimensions, renormalised), else the model's width.
fn stored_width(options: &BuildOptions, width: usize, encoder: &Encoder) -> Result<usize> {
    match (options.reduce, options.dim) {
        (Some(spec), Some(dim)) if dim != spec.dim => {
            bail!("--dim {dim} and --reduce {spec} both set the stored width; give one of them")
        }
        (Some(spec), _) if spec.dim > width => {
            bail!("--reduce {spec} keeps more dimensions than the model has ({width})")
        }
        (Some(spec), _) => Ok(spec.dim),
        (None, Some(dim)) if dim == 0 || dim > width => bail!(
            "--dim {dim} is outside 1..={width}, the widths of {}",
            crate::files::model_name(&encoder.model_dir)
        ),
        (None, Some(dim)) => Ok(dim),
        (None, None) => Ok(width),
    }
}

/// The live index's manifest if it was built from exactly this plan, size and reduction, and
/// opens (every size and header checks: "up to date" is never said of an index that cannot be
/// searched).
fn current_manifest(
    index_dir: &Path,
    plan: &Plan,
    inputs: &[CorpusInput],
    stored_dim: usize,
    options: &BuildOptions,
) -> Option<Manifest> {
    files::recover_interrupted_install(index_dir).ok()?;
    let manifest = Manifest::read(index_dir).ok()?;
    let same = manifest.model == plan.model
        && manifest.layers == plan.layers
        && manifest.template == plan.template
        && manifest.corpus.len() == inputs.len()
        && manifest
            .corpus
            .iter()
            .zip(inputs)
            .all(|(c, i)| c.describes(i))
        && manifest.stored_dim == stored_dim
        && manifest.default_dim == stored_dim
        && manifest.reduce.as_ref().map(|r| r.method) == options.reduce
        && manifest.ann == options.ann
        && manifest.shard.map(|s| s.spec) == plan.shard
        && manifest.updates == 0;
    if !same {
        return None;
    }
    if let Err(err) = OpenDir::check_opens(index_dir) {
        eprintln!(
            "note: {} was built from this corpus but does not open ({err:#}); rebuilding it",
            index_dir.display()
        );
        return None;
    }
    Some(manifest)
}

/// Whether the live index was built with this plan's model, depths, width and template from
/// another corpus, so that updating it to this one encodes only what changed
/// ([`super::update`]): not for a reduced index (its PCA was fitted on the old corpus), a
/// shard, or vectors read from files.
fn updatable(index_dir: &Path, plan: &Plan, stored_dim: usize, options: &BuildOptions) -> bool {
    let Ok(manifest) = Manifest::read(index_dir) else {
        return false;
    };
    manifest.model == plan.model
        && manifest.layers == plan.layers
        && manifest.template == plan.template
        && manifest.stored_dim == stored_dim
        && manifest.reduce.is_none()
        && options.reduce.is_none()
        && manifest.ann == options.ann
        && manifest.shard.is_none()
        && plan.shard.is_none()
        && plan.vectors_from.is_none()
        && OpenDir::check_opens(index_dir).is_ok()
}

/// The update that makes the live index hold exactly the build's corpus.
fn sync_options(options: &BuildOptions) -> super::update::UpdateOptions {
    super::update::UpdateOptions {
        index_dir: options.index_dir.clone(),
        model_dir: options.model_dir.clone(),
        encoder: options.encoder.clone(),
        add: options.corpus.clone(),
        documents: Vec::new(),
        remove_titles: Vec::new(),
        remove_sources: Vec::new(),
        sync: true,
        skip_bad: options.skip_bad,
        progress: options.progress,
    }
}
