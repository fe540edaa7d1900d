//! `manifest.json`: what an index was built from, so that a query with another model, a depth
//! the index lacks or a dimension larger than stored is refused instead of answered wrongly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::corpus::{CorpusFile, StreamStats};
use crate::encoder::{Encoder, Pooling, Precision};
use crate::index::cell::{Cell, CellRefusal};
use crate::index::integrity::{self, FileRecord, Seal};
use crate::index::sharded::ShardSpec;
use crate::index::{AnnSpec, PcaSpec};

pub const MANIFEST_FILE: &str = "manifest.json";
/// Written by builds from before checksums, which may or may not have them.
pub const FORMAT_VERSION: u32 = 1;
/// Written by indexes built with `--reduce` before checksums, so that a rag from before it
/// refuses them rather than searching reduced vectors with unreduced queries.
pub const REDUCED_FORMAT_VERSION: u32 = 2;
/// Written by every build now, reduced or not (`reduce` says which): the manifest must list
/// every file with its checksum. One that lost the list is damaged, not "from before
/// checksums", so that removing it cannot switch the checks off.
pub const CHECKSUMS_FORMAT_VERSION: u32 = 3;
/// Written by an index with removed documents (`removed.u64`): a `rag` from before updates,
/// which would return them, refuses it. Otherwise format 3.
pub const REMOVALS_FORMAT_VERSION: u32 = 4;
const READABLE_FORMATS: [u32; 4] = [
    FORMAT_VERSION,
    REDUCED_FORMAT_VERSION,
    CHECKSUMS_FORMAT_VERSION,
    REMOVALS_FORMAT_VERSION,
];

/// Identity of the encoder: its weights by sha256, and the choices that change its vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    pub name: String,
    pub path: PathBuf,
    pub weights_sha256: String,
    pub weights_bytes: u64,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub pooling: Pooling,
    pub max_length: usize,
    pub query_prefix: String,
    /// What the documents were encoded at. Not checked against the querying encoder: int8
    /// questions against f32 documents is a speed choice, not a mismatch.
    #[serde(default)]
    pub precision: Precision,
    /// The weights file as the build hashed it, so that opening the index need not hash it
    /// again (90 MB for MiniLM, 440 for bge-base: up to 0.6 s of a cold search here).
    #[serde(default, skip_serializing_if = "WeightsSeal::is_none")]
    pub weights_seal: WeightsSeal,
}

/// The [`Seal`] of the weights file at the build, if it had settled: a shortcut, not part of
/// the model's identity (the same weights elsewhere, another inode, are the same model), so
/// any two compare equal.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WeightsSeal(pub Option<Seal>);

impl WeightsSeal {
    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl PartialEq for WeightsSeal {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for WeightsSeal {}

impl ModelIdentity {
    pub fn of(encoder: &Encoder) -> Result<Self> {
        let weights = encoder.weights_path();
        let (before, hashing) = integrity::settled_metadata(weights)?;
        let weights_sha256 = crate::files::sha256_file(weights)?;
        let after =
            std::fs::metadata(weights).with_context(|| format!("reading {}", weights.display()))?;
        // Sealed only if nothing changed it while it was hashed, nor in the clock tick before.
        let unchanged = Seal::of(&before) == Seal::of(&after) && before.len() == after.len();
        Ok(Self {
            name: crate::files::model_name(&encoder.model_dir),
            path: encoder.model_dir.clone(),
            weights_sha256,
            weights_bytes: after.len(),
            hidden_size: encoder.hidden_size(),
            num_layers: encoder.config().num_hidden_layers,
            pooling: encoder.pooling,
            max_length: encoder.max_length,
            query_prefix: encoder.query_prefix.clone(),
            precision: encoder.precision,
            weights_seal: WeightsSeal(unchanged.then(|| Seal::settled(&before, hashing)).flatten()),
        })
    }

    /// Refuses an encoder whose weights or settings differ from the ones the index was built
    /// with. The size check comes first so a different model is caught without hashing it, and
    /// weights whose seal is the build's are its bytes (the seal changes with any write, copy or
    /// rename over them: [`integrity`]'s reasoning), so they are not hashed either.
    pub fn check_matches(&self, encoder: &Encoder) -> Result<()> {
        let weights = encoder.weights_path();
        let meta =
            std::fs::metadata(weights).with_context(|| format!("reading {}", weights.display()))?;
        let differs = || -> Result<bool> {
            if self.weights_seal.0 == Some(Seal::of(&meta)) {
                return Ok(false);
            }
            integrity::count_hashed(meta.len());
            Ok(crate::files::sha256_file(weights)? != self.weights_sha256)
        };
        if meta.len() != self.weights_bytes || differs()? {
            bail!(
                "model {} does not match the index, which was built with {} (sha256 {}); rebuild the index or pass that model",
                encoder.model_dir.display(),
                self.path.display(),
                &self.weights_sha256[..12]
            );
        }
        if encoder.pooling != self.pooling || encoder.max_length != self.max_length {
            bail!(
                "encoder settings (pooling {}, max length {}) differ from the index's (pooling {}, max length {})",
                encoder.pooling,
                encoder.max_length,
                self.pooling,
                self.max_length
            );
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub rag_version: String,
    pub model: ModelIdentity,
    /// Depths with a stored dense index, ascending.
    pub layers: Vec<usize>,
    /// Width of the stored vectors: the model's hidden size, or K with `--dim K` (the first K
    /// dimensions, renormalised) or `--reduce pca:K`. Every query size up to it is served.
    pub stored_dim: usize,
    /// The size served when a query names none: the stored width (an index from before `--dim`
    /// stored the full width, this may be smaller there).
    pub default_dim: usize,
    pub template: String,
    pub corpus: Vec<CorpusFile>,
    pub documents: u64,
    pub stats: CorpusCounts,
    pub versions: Versions,
    pub created_unix: u64,
    /// How the stored vectors were reduced after encoding (`rag index --reduce`); queries are
    /// reduced the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce: Option<StoredReduction>,
    /// Every file of the index but this one, by relative path: size and sha256. Empty in an
    /// index from before checksums.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, FileRecord>,
    /// The digest of `files` (see [`integrity::build_id`]). Written as `generation`, the name
    /// indexes on disk have.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        rename = "generation"
    )]
    pub build_id: String,
    /// Which shard of a sharded index this is (`rag index --shard`), if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
    /// The approximate index stored beside each depth's flat one (`rag index --ann`); flat
    /// (none) in every index from before it. A `rag` from before ignores the graph files and
    /// searches the flat ones, which is still right.
    #[serde(default, skip_serializing_if = "AnnSpec::is_flat")]
    pub ann: AnnSpec,
    /// Documents taken out since the last build or compaction (`rag index --remove`, or
    /// replaced by a changed text): their ids are listed in `removed.u64` and never returned;
    /// `documents` counts them still (every file holds a row for each).
    #[serde(default, skip_serializing_if = "no_updates")]
    pub removed: u64,
    /// Updates (`rag index --add/--remove`) applied since the index last held exactly `corpus`
    /// (a build, or a `rag index --corpus` that updated it to that corpus): while there are
    /// some, the index is never called up to date with `corpus`.
    #[serde(default, skip_serializing_if = "no_updates")]
    pub updates: u64,
    /// BM25's exact token counts per field once an update merged removed documents out of it
    /// (tantivy's own are then estimates from quantised lengths, and average lengths would
    /// drift from a fresh build's); absent: tantivy's are exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bm25_tokens: Option<crate::index::bm25::TokenCounts>,
}

fn no_updates(n: &u64) -> bool {
    *n == 0
}

/// A shard's place in its sharded index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub spec: ShardSpec,
    /// Documents in the whole deduplicated corpus: the shards' ids cover `0..corpus_documents`.
    pub corpus_documents: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReduction {
    pub method: PcaSpec,
    /// How many vectors each depth's PCA was fitted on: all of the corpus, or an evenly spaced
    /// sample of it when larger.
    pub fitted_on: u64,
    /// Each stored depth's PCA, relative to the index directory.
    pub transforms: BTreeMap<usize, PathBuf>,
}

/// What ingestion saw, kept for the record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusCounts {
    pub records: usize,
    pub duplicates: usize,
    pub skipped_records: usize,
    /// Files read by kind, bad files skipped and files of no kind read (absent before
    /// document folders).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, usize>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_files: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ignored_files: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl From<&StreamStats> for CorpusCounts {
    fn from(s: &StreamStats) -> Self {
        Self {
            records: s.records,
            duplicates: s.duplicates,
            skipped_records: s.skipped_records,
            files: s.files.clone(),
            skipped_files: s.skipped_files,
            ignored_files: s.ignored_files,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    pub candle: String,
    pub faiss: String,
    pub tantivy: String,
}

impl Default for Versions {
    fn default() -> Self {
        Self {
            candle: "0.11".into(),
            faiss: "0.13 (faiss-sys static)".into(),
            tantivy: "0.25".into(),
        }
    }
}

impl Manifest {
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            let old = crate::files::sibling(dir, "old");
            if old.join(MANIFEST_FILE).exists() {
                format!(
                    "no index at {}, but {} holds the previous one (a build was cut off while installing the new one); re-run `rag index` to finish",
                    dir.display(),
                    old.display()
                )
            } else {
                format!("no index at {} (build one with `rag index`)", dir.display())
            }
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(super::flat_file::damaged(
                &path,
                &format!("not a readable manifest: {e}")
            ))
        })?;
        if !READABLE_FORMATS.contains(&manifest.format_version) {
            bail!(
                "{} has index format {}, this rag reads formats {FORMAT_VERSION} to {REMOVALS_FORMAT_VERSION}; rebuild it",
                dir.display(),
                manifest.format_version
            );
        }
        // A build id is the digest of the file list: a manifest naming one had the list.
        let had_checksums =
            manifest.format_version >= CHECKSUMS_FORMAT_VERSION || !manifest.build_id.is_empty();
        if had_checksums && manifest.files.is_empty() {
            bail!(super::flat_file::damaged(
                &path,
                "it has lost its list of files and their checksums"
            ));
        }
        Ok(manifest)
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        crate::files::write_json_atomic(&dir.join(MANIFEST_FILE), self)
    }

    /// The build id: the digest of the files (an index from before checksums is named by
    /// when it was built).
    pub fn build_id(&self) -> String {
        if self.build_id.is_empty() {
            format!("unchecked-{}", self.created_unix)
        } else {
            self.build_id.clone()
        }
    }

    /// Records the files now in `dir` (but the top-level entries named in `skip`, which are
    /// not part of the index) and names the build they make; the manifest is then written
    /// last.
    pub fn seal(&mut self, dir: &Path, skip: &[&str]) -> Result<()> {
        let skip: Vec<&str> = skip.iter().copied().chain([MANIFEST_FILE]).collect();
        self.files = integrity::record_files(dir, &skip)?;
        self.build_id = integrity::build_id(&self.files);
        Ok(())
    }

    /// Resolves a query's depth and size against what is stored: `None` means the default (the
    /// deepest stored depth, the size given at build time). A refusal says what was refused
    /// and why, for the front end to word.
    pub fn resolve(&self, layers: Option<usize>, dim: Option<usize>) -> Result<Cell, CellRefusal> {
        let depth = layers.unwrap_or(*self.layers.last().expect("an index stores a depth"));
        if !self.layers.contains(&depth) {
            let stored = self.layers.clone();
            return Err(if depth == 0 || depth > self.model.num_layers {
                CellRefusal::LayersOutsideModel {
                    layers: depth,
                    model_layers: self.model.num_layers,
                    model: self.model.name.clone(),
                    stored,
                }
            } else {
                CellRefusal::LayersNotStored {
                    layers: depth,
                    stored,
                }
            });
        }
        let dim = dim.unwrap_or(self.default_dim);
        if dim == 0 || dim > self.stored_dim {
            return Err(CellRefusal::DimOutsideStored {
                dim,
                stored_dim: self.stored_dim,
                model_dim: self.model.hidden_size,
                reduced_with: self.reduce.as_ref().map(|r| r.method.to_string()),
            });
        }
        Ok(Cell::new(depth, dim))
    }

    /// The sizes offered to people picking one (any size up to `stored_dim` works): the powers
    /// of two from 16 below the stored width, the default size and the stored width, ascending.
    pub fn offered_dims(&self) -> Vec<usize> {
        let mut dims: Vec<usize> = std::iter::successors(Some(16), |d| Some(d * 2))
            .take_while(|&d| d < self.stored_dim)
            .collect();
        dims.extend([self.default_dim, self.stored_dim]);
        dims.sort_unstable();
        dims.dedup();
        dims
    }
}
