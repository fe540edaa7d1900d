//! What a build is making and how far it got: the plan a checkpoint is resumed for, the
//! checkpoint (`progress.json`), and the stages after encoding it records as finished.

use super::*;

/// What a build is making; a checkpoint is resumed only by a build with the same plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Plan {
    pub(super) model: ModelIdentity,
    pub(super) layers: Vec<usize>,
    pub(super) template: String,
    pub(super) corpus: Vec<PlannedInput>,
    pub(super) skip_bad: bool,
    #[serde(default)]
    pub(super) shard: Option<ShardSpec>,
    /// Width of the checkpointed vectors when less than the model's (`--dim K`); `None`, the
    /// full width, is what a checkpoint from before `--dim` stored.
    #[serde(default)]
    pub(super) encoded_width: Option<usize>,
    /// The folder the vectors were read from instead of encoded (`--vectors-from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) vectors_from: Option<PathBuf>,
}

/// A corpus input as a plan names it: its checksum is known only once it has been read, while
/// the build streams it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PlannedInput {
    pub(super) path: PathBuf,
    pub(super) bytes: u64,
    pub(super) fingerprint: String,
}

impl From<&CorpusInput> for PlannedInput {
    fn from(input: &CorpusInput) -> Self {
        Self {
            path: input.path.clone(),
            bytes: input.bytes,
            fingerprint: input.fingerprint.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Checkpoint {
    pub(super) plan: Plan,
    pub(super) docstore: DocStoreMark,
    /// Set once every document is encoded.
    pub(super) encoded: Option<CorpusCounts>,
    /// Documents in the whole deduplicated corpus, set with `encoded`.
    #[serde(default)]
    pub(super) corpus_documents: u64,
    /// The corpus inputs with the checksums taken while encoding read them, set with `encoded`.
    #[serde(default)]
    pub(super) corpus: Vec<CorpusFile>,
    /// The stages after encoding already done ([`Stage`]), kept by a resumed build.
    #[serde(default)]
    pub(super) finished: BTreeSet<String>,
}

/// A step after encoding whose output a resumed build keeps: BM25, or one depth's faiss files
/// made with these options (a resumed build may ask for another reduction or graph).
pub(super) fn stage_bm25() -> String {
    "bm25".into()
}

pub(super) fn stage_links() -> String {
    "links".into()
}

pub(super) fn stage_dense(depth: usize, options: &BuildOptions) -> String {
    let reduce = options.reduce.map_or("none".into(), |r| r.to_string());
    format!("dense L{depth} reduce {reduce} ann {}", options.ann)
}

impl Plan {
    /// The manifest of the index this plan builds, its files not yet recorded.
    pub(super) fn manifest(
        &self,
        checkpoint: &Checkpoint,
        counts: &CorpusCounts,
        stored_dim: usize,
        reduce: Option<StoredReduction>,
        ann: AnnSpec,
    ) -> Manifest {
        Manifest {
            format_version: CHECKSUMS_FORMAT_VERSION,
            rag_version: env!("CARGO_PKG_VERSION").into(),
            model: self.model.clone(),
            layers: self.layers.clone(),
            stored_dim,
            default_dim: stored_dim,
            template: self.template.clone(),
            corpus: checkpoint.corpus.clone(),
            documents: checkpoint.docstore.documents,
            stats: counts.clone(),
            versions: Versions::default(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            reduce,
            files: BTreeMap::new(),
            build_id: String::new(),
            shard: self.shard.map(|spec| ShardRecord {
                spec,
                corpus_documents: checkpoint.corpus_documents,
            }),
            ann,
            removed: 0,
            updates: 0,
            bm25_tokens: None,
        }
    }
}

impl Checkpoint {
    /// Records `stage` as done, atomically, once its files are written.
    pub(super) fn finish(&mut self, work: &Path, stage: String) -> Result<()> {
        self.finished.insert(stage);
        files::write_json_atomic(&work.join(PROGRESS_FILE), self)
    }
}

pub(super) fn start_or_resume(
    work: &Path,
    plan: &Plan,
    inputs: &[CorpusInput],
    fresh: bool,
) -> Result<Checkpoint> {
    let progress_path = work.join(PROGRESS_FILE);
    if !fresh && progress_path.exists() {
        if let Ok(mut checkpoint) = files::read_json::<Checkpoint>(&progress_path) {
            if &checkpoint.plan == plan {
                return Ok(checkpoint);
            }
            // A copy of the corpus, or one provisioned again, has new modification times: once
            // encoding is done the checkpoint knows each input's checksum, and the same bytes
            // resume it.
            let same_but_times = Plan {
                corpus: checkpoint.plan.corpus.clone(),
                ..plan.clone()
            } == checkpoint.plan;
            if same_but_times
                && checkpoint.encoded.is_some()
                && checkpoint.corpus.len() == inputs.len()
                && checkpoint
                    .corpus
                    .iter()
                    .zip(inputs)
                    .all(|(c, i)| c.describes(i))
            {
                checkpoint.plan = plan.clone();
                for (file, input) in checkpoint.corpus.iter_mut().zip(inputs) {
                    file.fingerprint = input.fingerprint.clone();
                }
                files::write_json_atomic(&progress_path, &checkpoint)?;
                return Ok(checkpoint);
            }
            eprintln!(
                "note: {} holds an interrupted build of another model, corpus or settings; starting over",
                work.display()
            );
        }
    }
    files::remove_owned_dir(work).context("removing a stale build")?;
    create_dir(&work.join(VECTORS_DIR))?;
    // Only a marked staging folder is ever resumed, replaced or installed.
    files::mark_owned(work)?;
    let checkpoint = Checkpoint {
        plan: plan.clone(),
        docstore: DocStoreMark::default(),
        encoded: None,
        corpus_documents: 0,
        corpus: Vec::new(),
        finished: BTreeSet::new(),
    };
    files::write_json_atomic(&progress_path, &checkpoint)?;
    Ok(checkpoint)
}
