//! `rag eval`: HotpotQA recall and exact match over depth x size, into a resumable run folder.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use rag::ask::Pipeline;
use rag::eval::hotpot::settings::{self, Answering, GridAsked, RunAsked};
use rag::eval::hotpot::{self, plan, report, RunCell, RunConfig, RunOptions};
use rag::generate::{Generator, PromptSpec};
use rag::index;
use rag::progress::ProgressMode;
use rag::retrieve::Retriever;

use super::flags::{
    ContextArgs, DataArgs, EncoderArgs, GeneratorArgs, NumberList, OpenIndexArgs, StrategyArgs,
    DEFAULT_MODEL_DIR,
};
use super::print_json;

#[derive(Args, Debug)]
pub struct EvalArgs {
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// HotpotQA file with questions (default: the distractor sample).
    #[arg(long)]
    pub questions: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    /// Evaluate only the first N questions.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    pub limit: usize,
    /// Layers to evaluate at (default: all of the model's; with --sweep 1,3,6). An index lacking one is
    /// built first, all depths in one pass, and kept under the index's folder.
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Dimensions to evaluate at (default: the index's; with --sweep 32,64,128,384).
    #[arg(long, alias = "dim")]
    pub dims: Option<NumberList>,
    /// Evaluate every layers x dims pair (and draw a heatmap).
    #[arg(long)]
    pub sweep: bool,
    /// Default: the best measured (see eval/answers/).
    #[command(flatten)]
    pub strategy: StrategyArgs,
    #[command(flatten)]
    pub context: ContextArgs,
    /// Retrieval recall only.
    #[arg(long)]
    pub no_generate: bool,
    /// Build every prompt (the generator's tokenizer loaded) and measure it, answer in
    /// context and prompt tokens, without generating: a fast way to compare context settings.
    #[arg(long, conflicts_with = "no_generate")]
    pub context_only: bool,
    /// Answer from the gold paragraphs: the generator's ceiling.
    #[arg(long, conflicts_with_all = ["no_generate", "sweep", "layers", "dims"])]
    pub oracle: bool,
    /// Run name: results go to <runs-dir>/<name>/ (default: made from the settings).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, default_value = "eval/runs")]
    pub runs_dir: PathBuf,
    /// Start the run over instead of resuming it.
    #[arg(long)]
    pub fresh: bool,
    #[command(flatten)]
    pub generator: GeneratorArgs,
    /// Rank the questions against shard i/n of the sharded --index only (BM25 still with the
    /// whole corpus's statistics) and write the lists to --hits-dir: one worker's part of a
    /// distributed evaluation (cluster/rag-ray eval). One hop, dense or BM25.
    #[arg(long, value_name = "i/n", requires = "hits_dir", conflicts_with_all = ["from_hits", "oracle"])]
    pub shard: Option<rag::index::ShardSpec>,
    /// Where --shard writes its hits (<dir>/shard-<i>-of-<n>.jsonl).
    #[arg(long, value_name = "DIR", requires = "shard")]
    pub hits_dir: Option<PathBuf>,
    /// Rank with the merged hits that every shard of the sharded --index wrote to DIR (with
    /// --shard) instead of searching: the run folder is the one an in-process run writes.
    #[arg(long, value_name = "DIR", conflicts_with = "oracle")]
    pub from_hits: Option<PathBuf>,
    /// Rank with what the run in folder RUN retrieved (same --mode, --hops and weights),
    /// title by title, instead of searching: its retrieval read again with other generation or
    /// context settings, without its model. --index, any index of the same corpus, supplies
    /// the documents.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["oracle", "from_hits", "shard"])]
    pub rankings_from: Option<PathBuf>,
    /// Encoder for an index built for this evaluation.
    #[command(flatten)]
    pub encoder: EncoderArgs,
    #[arg(long)]
    pub json: bool,
}

/// The index the run searches (built for the cells asked if it lacks them) and the cells it
/// is asked at, this shard's only with `--shard`; none and the gold paragraphs with `--oracle`.
fn retriever_and_cells(args: &EvalArgs) -> Result<(Option<Retriever>, Vec<RunCell>)> {
    if args.oracle {
        return Ok((None, vec![RunCell::ORACLE]));
    }
    let (dir, layers, dims) = settings::grid_index(GridAsked {
        index_dir: &args.index,
        model: args.encoder.model.as_deref(),
        default_model: Path::new(DEFAULT_MODEL_DIR),
        corpus: args.data.hotpot_files(),
        encoder: args.encoder.options(),
        sweep: args.sweep,
        layers: args.layers.clone().map(|l| l.0),
        dims: args.dims.clone().map(|d| d.0),
    })?;
    let retriever = args.strategy.open(&OpenIndexArgs {
        index: dir,
        model: None,
        precision: args.encoder.precision,
    })?;
    let (retriever, cells) =
        settings::cells_and_shard(retriever, &layers, dims.as_deref(), args.shard)?;
    Ok((Some(retriever), cells))
}

/// How the run's answers are generated, as its settings record it.
fn answering(args: &EvalArgs, generator: &Generator, spec: &PromptSpec) -> Answering {
    let llm = &args.generator.settings;
    Answering {
        generator: generator.name.clone(),
        prompt_style: spec.label(),
        max_tokens: llm.max_tokens,
        yes_no_bias: llm.yes_no_bias,
        option_bias: llm.option_bias.0,
        option_facts: llm.option_facts,
        full_dates: llm.full_dates,
        option_dates: llm.option_dates,
        option_counts: llm.option_counts,
        option_measures: llm.option_measures,
        shared_place: llm.shared_place,
        number_words: llm.number_words,
        answer_again: llm.answer_again,
        extractive: llm.extractive,
        yes_no_facts: llm.yes_no_facts,
    }
}

pub fn run(args: EvalArgs) -> Result<()> {
    let path = args
        .questions
        .clone()
        .unwrap_or_else(|| args.data.distractor_questions());
    let questions = rag::corpus::read_questions(&path, args.limit)?;
    if questions.is_empty() {
        bail!("{} has no questions", path.display());
    }
    let strategy = args.strategy.strategy(rag::ask::DEFAULT_STRATEGY)?;
    let spec = (!args.no_generate)
        .then(|| args.generator.prompt())
        .transpose()?;
    // Before any index build, so that a bad model fails fast.
    let generator = spec.as_ref().map(|_| args.generator.load()).transpose()?;

    let (retriever, cells) = retriever_and_cells(&args)?;
    if let (Some(shard), Some(hits_dir), Some(retriever)) = (args.shard, &args.hits_dir, &retriever)
    {
        let written = settings::write_shard(
            retriever,
            shard,
            hits_dir,
            &questions,
            &cells,
            strategy,
            args.context.top_k,
        )?;
        println!(
            "shard {shard}: {} rankings ({} questions x {} cells, top {}) -> {}",
            written.rankings,
            questions.len(),
            cells.len(),
            written.depth,
            written.path.display()
        );
        return Ok(());
    }
    let answering = generator
        .as_ref()
        .zip(spec.as_ref())
        .map(|(generator, spec)| answering(&args, generator, spec));
    let config = RunConfig::of(
        RunAsked {
            questions_file: path.clone(),
            questions: questions.len(),
            cells,
            strategy,
            tuning: args.strategy.tuning(),
            top_k: args.context.top_k,
            context_tokens: args.context.context_tokens,
            context_only: args.context_only,
            sentence_weights: args.context.sentence_weights,
            context_floor: args.context.context_floor,
            widen_tokens: args.context.widen_tokens,
            oracle: args.oracle,
            answering,
            rankings_from: args.rankings_from.clone(),
        },
        retriever.as_ref(),
    );
    let rankings = settings::rankings(
        args.from_hits.as_deref(),
        args.rankings_from.as_deref(),
        retriever.as_ref(),
        &config,
        &questions,
    )?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| plan::run_name(&config, args.generator.llm.as_path()));
    let dir = args.runs_dir.join(&name);
    let pipeline = generator
        .as_ref()
        .zip(spec.as_ref())
        .map(|(generator, spec)| Pipeline {
            retriever: retriever.as_ref(),
            generator,
            spec,
        });
    let summary = hotpot::run(&RunOptions {
        dir: dir.clone(),
        config,
        questions: &questions,
        retriever: retriever.as_ref(),
        pipeline: pipeline.as_ref(),
        rankings: rankings.as_ref(),
        fresh: args.fresh,
        progress: ProgressMode::for_stderr(),
    })?;
    if args.json {
        return print_json(&summary);
    }
    print!("{}", report::markdown(&summary));
    println!(
        "\nwrote {}/ (predictions.jsonl, summary.json, summary.md{})",
        dir.display(),
        if summary.cells.len() > 1 {
            ", heatmap.png"
        } else {
            ""
        }
    );
    Ok(())
}
