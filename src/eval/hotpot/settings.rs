//! From what `rag eval` was asked to what its run does, the way ripgrep's `hiargs` owns the
//! translation from flags to settings: the index the grid needs (built when the given one lacks
//! a depth), what a run records of its settings (a run that does not answer records no answer
//! settings, so that it matches, and resumes, any other retrieval-only run), where its rankings
//! come from, and a distributed worker's part. The command line only resolves its flags into
//! these types and prints.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::plan;
use super::rankings_from;
use super::record::{RunCell, RunConfig};
use super::run::ranking_depth;
use super::shard_hits::{self, Rankings};
use crate::ask::context::SentenceWeights;
use crate::corpus::{Question, DEFAULT_TEMPLATE};
use crate::encoder::EncoderOptions;
use crate::index::build::DEFAULT_CHUNK_SIZE;
use crate::index::{BuildOptions, ShardSpec};
use crate::progress::ProgressMode;
use crate::retrieve::{Retriever, Strategy, Tuning};

/// The depths x sizes asked for, and the index and encoder they are read from.
pub struct GridAsked<'a> {
    pub index_dir: &'a Path,
    /// The encoder asked for (none: the index's, else `default_model`).
    pub model: Option<&'a Path>,
    pub default_model: &'a Path,
    /// The corpus an index built for the evaluation holds.
    pub corpus: Vec<PathBuf>,
    pub encoder: EncoderOptions,
    pub sweep: bool,
    pub layers: Option<Vec<usize>>,
    pub dims: Option<Vec<usize>>,
}

/// The grid's index, built first (all depths in one pass, kept under the given index's folder)
/// where the given one lacks a depth; and the grid's depths and sizes (`None`: the index's).
pub fn grid_index(asked: GridAsked) -> Result<(PathBuf, Vec<usize>, Option<Vec<usize>>)> {
    let model_dir = plan::model_dir(asked.model, asked.index_dir, asked.default_model);
    let (layers, dims) = plan::grid(
        asked.index_dir,
        &model_dir,
        asked.sweep,
        asked.layers,
        asked.dims,
    )?;
    let build = BuildOptions {
        index_dir: asked.index_dir.to_path_buf(),
        corpus: asked.corpus,
        model_dir,
        encoder: asked.encoder,
        layers: None,
        dim: None,
        reduce: None,
        ann: Default::default(),
        template: DEFAULT_TEMPLATE.to_string(),
        chunk_size: DEFAULT_CHUNK_SIZE,
        skip_bad: false,
        fresh: false,
        shard: None,
        progress: ProgressMode::for_stderr(),
        vectors_from: None,
    };
    let dir = super::index_with_depths(&build, &layers)?;
    Ok((dir, layers, dims))
}

/// The grid's cells as `retriever`'s index resolves them, and the retriever narrowed to one
/// shard's documents where `shard` says so.
pub fn cells_and_shard(
    retriever: Retriever,
    layers: &[usize],
    dims: Option<&[usize]>,
    shard: Option<ShardSpec>,
) -> Result<(Retriever, Vec<RunCell>)> {
    let cells = plan::cells(&retriever.index.manifest, layers, dims)?;
    let retriever = match shard {
        Some(shard) => retriever.only_shard(shard)?,
        None => retriever,
    };
    Ok((retriever, cells))
}

/// How answers are generated, for a run that answers.
pub struct Answering {
    /// The generator's name.
    pub generator: String,
    pub prompt_style: String,
    pub max_tokens: usize,
    pub yes_no_bias: f32,
    pub option_bias: Option<f32>,
    pub option_facts: bool,
    pub full_dates: bool,
    pub option_dates: bool,
    pub option_counts: bool,
    pub option_measures: bool,
    pub shared_place: bool,
    pub number_words: bool,
    pub answer_again: bool,
    pub extractive: bool,
    pub yes_no_facts: bool,
}

/// What a run was asked to do.
pub struct RunAsked {
    pub questions_file: PathBuf,
    pub questions: usize,
    pub cells: Vec<RunCell>,
    pub strategy: Strategy,
    pub tuning: Tuning,
    pub top_k: usize,
    pub context_tokens: usize,
    pub context_only: bool,
    pub sentence_weights: SentenceWeights,
    pub context_floor: usize,
    pub widen_tokens: usize,
    pub oracle: bool,
    /// None: retrieval only.
    pub answering: Option<Answering>,
    pub rankings_from: Option<PathBuf>,
}

impl RunConfig {
    /// What the run records of `asked`: settings that do not apply to it (the context of a run
    /// that does not answer, a yes/no bias of 0, the precision of rankings read rather than
    /// searched) are not recorded.
    pub fn of(asked: RunAsked, retriever: Option<&Retriever>) -> Self {
        let answering = asked.answering.as_ref();
        let answers = answering.is_some();
        Self {
            questions_file: asked.questions_file,
            questions: asked.questions,
            cells: asked.cells,
            mode: asked.strategy.mode,
            hops: asked.strategy.hops,
            tuning: Some(asked.tuning),
            top_k: asked.top_k,
            // Retrieval alone reads no context.
            context_tokens: if answers { asked.context_tokens } else { 0 },
            context_only: asked.context_only,
            sentence_weights: (answers && asked.context_tokens > 0)
                .then_some(asked.sentence_weights),
            context_floor: if answers && asked.context_tokens > 0 {
                asked.context_floor
            } else {
                0
            },
            widen_tokens: if answers
                && !asked.context_only
                && crate::ask::widens(asked.context_tokens, asked.widen_tokens)
            {
                asked.widen_tokens
            } else {
                0
            },
            oracle: asked.oracle,
            generator: answering.map(|a| a.generator.clone()),
            prompt_style: answering.map(|a| a.prompt_style.clone()),
            max_tokens: answering.map(|a| a.max_tokens),
            yes_no_bias: answering.map(|a| a.yes_no_bias).filter(|&bias| bias != 0.0),
            option_bias: answering.and_then(|a| a.option_bias),
            option_facts: answering.is_some_and(|a| a.option_facts),
            full_dates: answering.is_some_and(|a| a.full_dates),
            option_dates: answering.is_some_and(|a| a.option_dates),
            option_counts: answering.is_some_and(|a| a.option_counts),
            option_measures: answering.is_some_and(|a| a.option_measures),
            shared_place: answering.is_some_and(|a| a.shared_place),
            number_words: answering.is_some_and(|a| a.number_words),
            answer_again: answering.is_some_and(|a| a.answer_again),
            extractive: answering.is_some_and(|a| a.extractive),
            yes_no_facts: answering.is_some_and(|a| a.yes_no_facts),
            index: retriever.map(|r| r.index.dir.clone()),
            // Recorded rankings are read, not searched: no vectors of this run's.
            precision: retriever
                .filter(|_| asked.rankings_from.is_none())
                .and_then(|r| plan::precisions(r, asked.strategy.mode)),
            rankings_from: asked.rankings_from,
        }
    }
}

/// Where a run's rankings come from instead of searching: the shards' merged hits in
/// `from_hits`, else the run folder `rankings_from`; none (search) without a retriever.
pub fn rankings(
    from_hits: Option<&Path>,
    rankings_from: Option<&Path>,
    retriever: Option<&Retriever>,
    config: &RunConfig,
    questions: &[Question],
) -> Result<Option<Rankings>> {
    Ok(match (from_hits, rankings_from, retriever) {
        (Some(dir), _, Some(retriever)) => {
            shard_hits::check_strategy(config.strategy()?)?;
            let shards = retriever.index.parts().len();
            let k = ranking_depth(config.top_k);
            Some(shard_hits::read_merged(
                dir,
                shards,
                questions,
                &config.cells,
                k,
            )?)
        }
        (_, Some(run), Some(retriever)) => Some(rankings_from::read(
            run,
            config,
            questions,
            &retriever.index,
        )?),
        _ => None,
    })
}

/// What a distributed worker wrote ([`write_shard`]).
pub struct ShardWritten {
    pub rankings: usize,
    pub depth: usize,
    pub path: PathBuf,
}

/// One distributed worker's part: every question ranked at every cell against `retriever`'s
/// shard, as deep as a run reading `top_k` paragraphs needs, into its file in `hits_dir`.
pub fn write_shard(
    retriever: &Retriever,
    shard: ShardSpec,
    hits_dir: &Path,
    questions: &[Question],
    cells: &[RunCell],
    strategy: Strategy,
    top_k: usize,
) -> Result<ShardWritten> {
    crate::index::create_dir(hits_dir)?;
    let path = shard_hits::hits_file(hits_dir, shard);
    let depth = ranking_depth(top_k);
    let rankings =
        shard_hits::write_shard_hits(retriever, questions, cells, strategy, depth, &path)?;
    Ok(ShardWritten {
        rankings,
        depth,
        path,
    })
}
