//! `rag index --merge`: checks that a directory's shards make one whole index and writes its top
//! manifest, `shards.json`. Readers open a sharded index through the top manifest only, and
//! check each shard against it, so a shard missing, damaged, from another build or rebuilt since
//! the merge is refused by name, never searched as a silently partial corpus.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ShardSpec;
use crate::index::manifest::{Manifest, ModelIdentity, MANIFEST_FILE};
use crate::index::{integrity, OpenDir};

pub const SHARDS_FILE: &str = "shards.json";
pub const SHARDS_FORMAT_VERSION: u32 = 1;

/// The top manifest of a sharded index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardsManifest {
    pub format_version: u32,
    pub model: ModelIdentity,
    pub layers: Vec<usize>,
    pub stored_dim: usize,
    pub default_dim: usize,
    pub template: String,
    /// Documents of the whole corpus, ids `0..documents`.
    pub documents: u64,
    pub shards: Vec<ShardEntry>,
    /// The digest of the shards' build ids: names what the sharded index holds. Written as
    /// `generation`, the name sharded indexes on disk have.
    #[serde(rename = "generation")]
    pub build_id: String,
}

/// One shard as the merge found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Relative to the sharded index's directory.
    pub dir: String,
    pub documents: u64,
    #[serde(rename = "generation")]
    pub build_id: String,
    /// The sha256 of the shard's `manifest.json`, which lists its files' checksums.
    pub manifest_sha256: String,
}

/// What `rag index --merge` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Merged {
    pub index_dir: PathBuf,
    pub shards: usize,
    pub documents: u64,
    /// Printed as `generation` by `--json`, as before builds had that name.
    #[serde(rename = "generation")]
    pub build_id: String,
}

impl ShardsManifest {
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(SHARDS_FILE);
        if !path.exists() {
            bail!(
                "{} holds shards but no {SHARDS_FILE}; when every shard is built, run `rag index --merge --index {}`",
                dir.display(),
                dir.display()
            );
        }
        let top: Self = crate::files::read_json(&path).map_err(|e| {
            anyhow::anyhow!(crate::index::flat_file::damaged(
                &path,
                &format!("not a readable top manifest: {e:#}")
            ))
        })?;
        if top.format_version != SHARDS_FORMAT_VERSION {
            bail!(
                "{} has sharded format {}, this rag reads {SHARDS_FORMAT_VERSION}",
                path.display(),
                top.format_version
            );
        }
        Ok(top)
    }

    /// The manifest a sharded index reports: its first shard's, with the whole corpus's document
    /// count and this manifest's build id.
    pub fn combined(&self, first: &Manifest) -> Manifest {
        let mut manifest = first.clone();
        manifest.documents = self.documents;
        manifest.files.clear();
        manifest.build_id = self.build_id.clone();
        manifest.shard = None;
        manifest
    }

    /// Opens every shard, each checked against its own manifest and against this one.
    pub fn open_shards(&self, dir: &Path) -> Result<Vec<OpenDir>> {
        self.shards
            .iter()
            .map(|entry| {
                let shard_dir = dir.join(&entry.dir);
                let part = OpenDir::open(&shard_dir)
                    .with_context(|| format!("shard {}", entry.dir))?;
                if part.manifest.build_id() != entry.build_id
                    || part.manifest.documents != entry.documents
                {
                    bail!(
                        "shard {} ({}) is build {} with {} documents, {SHARDS_FILE} records {} with {}: it was rebuilt since the merge; re-run `rag index --merge --index {}`",
                        entry.dir,
                        shard_dir.display(),
                        part.manifest.build_id(),
                        part.manifest.documents,
                        entry.build_id,
                        entry.documents,
                        dir.display()
                    );
                }
                Ok(part)
            })
            .collect()
    }
}

/// The shard directories in `dir` (not builds in progress), by spec.
fn shard_dirs(dir: &Path) -> Result<Vec<ShardSpec>> {
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("shard-")) else {
            continue;
        };
        let spec = rest
            .split_once("-of-")
            .and_then(|(i, n)| format!("{i}/{n}").parse::<ShardSpec>().ok());
        if let Some(spec) = spec {
            specs.push(spec);
        }
    }
    specs.sort_by_key(|s| (s.count, s.index));
    Ok(specs)
}

/// Checks every shard in `dir` (all present, whole, built alike, ids disjoint and covering the
/// corpus) and writes the top manifest atomically.
pub fn merge(dir: &Path) -> Result<Merged> {
    crate::index::update::recover_sharded(dir)?;
    let specs = shard_dirs(dir)?;
    let Some(count) = specs.first().map(|s| s.count) else {
        bail!(
            "{} holds no shards (build them with `rag index --shard i/n --index {}`)",
            dir.display(),
            dir.display()
        );
    };
    if let Some(other) = specs.iter().find(|s| s.count != count) {
        bail!(
            "{} mixes shards of {count} and of {} ({}); remove the stale ones",
            dir.display(),
            other.count,
            other.dir_name()
        );
    }
    let mut shards = Vec::new();
    let mut parts: Vec<OpenDir> = Vec::new();
    for index in 0..count {
        let spec = ShardSpec { index, count };
        let shard_dir = spec.dir(dir);
        if !shard_dir.join(MANIFEST_FILE).exists() {
            bail!(
                "shard {} is missing ({} has no manifest); build it with `rag index --shard {spec} --index {}`",
                spec.dir_name(),
                shard_dir.display(),
                dir.display()
            );
        }
        let part =
            OpenDir::open(&shard_dir).with_context(|| format!("shard {}", spec.dir_name()))?;
        integrity::check_recorded(&shard_dir, &part.manifest.files, integrity::Hashing::All)
            .with_context(|| format!("shard {}", spec.dir_name()))?;
        check_alike(&spec, &part.manifest, parts.first().map(|p| &p.manifest))?;
        shards.push(ShardEntry {
            dir: spec.dir_name(),
            documents: part.manifest.documents,
            build_id: part.manifest.build_id(),
            manifest_sha256: crate::files::sha256_file(&shard_dir.join(MANIFEST_FILE))?,
        });
        parts.push(part);
    }
    let documents = check_ids_cover_corpus(&parts)?;
    let first = &parts[0].manifest;
    let top = ShardsManifest {
        format_version: SHARDS_FORMAT_VERSION,
        model: first.model.clone(),
        layers: first.layers.clone(),
        stored_dim: first.stored_dim,
        default_dim: first.default_dim,
        template: first.template.clone(),
        documents,
        build_id: build_id_of(&shards),
        shards,
    };
    crate::files::write_json_atomic(&dir.join(SHARDS_FILE), &top)?;
    Ok(Merged {
        index_dir: dir.to_path_buf(),
        shards: count,
        documents,
        build_id: top.build_id,
    })
}

/// The build id of a sharded index: the digest of its shards' directories and build ids.
pub fn build_id_of(shards: &[ShardEntry]) -> String {
    let mut hasher = Sha256::new();
    for entry in shards {
        hasher.update(format!("{}\0{}\n", entry.dir, entry.build_id));
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Refuses a shard that is not the one its directory names, or not built like the first.
fn check_alike(spec: &ShardSpec, manifest: &Manifest, first: Option<&Manifest>) -> Result<()> {
    let name = spec.dir_name();
    if manifest.shard.map(|s| s.spec) != Some(*spec) {
        bail!("shard {name}: its manifest does not say it is shard {spec}");
    }
    let Some(first) = first else {
        return Ok(());
    };
    let differs = [
        ("model", manifest.model != first.model),
        ("layers", manifest.layers != first.layers),
        ("stored size", manifest.stored_dim != first.stored_dim),
        ("default size", manifest.default_dim != first.default_dim),
        ("template", manifest.template != first.template),
        (
            "corpus",
            manifest.corpus.len() != first.corpus.len()
                || !manifest
                    .corpus
                    .iter()
                    .zip(&first.corpus)
                    .all(|(a, b)| a.same_content(b)),
        ),
        ("reduction", manifest.reduce != first.reduce),
        ("approximate index", manifest.ann != first.ann),
        // Shards updated since the build count a larger corpus than those left as built.
        (
            "corpus size",
            manifest.updates == 0
                && first.updates == 0
                && manifest.shard.map(|s| s.corpus_documents)
                    != first.shard.map(|s| s.corpus_documents),
        ),
    ];
    if let Some((what, _)) = differs.iter().find(|(_, differs)| *differs) {
        bail!("shard {name}: its {what} differs from shard 0's; rebuild it with the same flags");
    }
    Ok(())
}

/// Checks that the shards' ids are disjoint and cover `0..N`, N the corpus's document count
/// (the largest any shard counts: one updated since the build counts the documents added);
/// returns N. Updated shards may leave ids uncovered: a compaction drops removed rows.
fn check_ids_cover_corpus(parts: &[OpenDir]) -> Result<u64> {
    let total = parts
        .iter()
        .filter_map(|p| p.manifest.shard.map(|s| s.corpus_documents))
        .max()
        .unwrap_or(0);
    let updated = parts.iter().any(|p| p.manifest.updates > 0);
    let mut seen = vec![false; total as usize];
    for part in parts {
        for local in 0..part.documents() {
            let id = part.global(local);
            match seen.get_mut(id as usize) {
                Some(slot) if !*slot => *slot = true,
                _ => bail!(
                    "shard {}: document id {id} is outside 0..{total} or held by another shard too",
                    part.dir.display()
                ),
            }
        }
    }
    if let Some(id) = seen.iter().position(|s| !s).filter(|_| !updated) {
        bail!("no shard holds document {id} of {total}; rebuild the shards with the same corpus");
    }
    Ok(total)
}
