//! `rag eval`: HotpotQA recall and exact match over depth x size, into a resumable run folder.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use rag::ask::Pipeline;
use rag::corpus::DEFAULT_TEMPLATE;
use rag::eval::hotpot::run::ranking_depth;
use rag::eval::hotpot::{self, hits, plan, recorded, report, Cell, RunConfig, RunOptions};
use rag::index::{self, build::DEFAULT_CHUNK_SIZE, BuildOptions};
use rag::progress::ProgressMode;

use super::flags::{
    ContextArgs, DataArgs, EncoderArgs, GeneratorArgs, IndexArgs, NumberList, StrategyArgs,
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
    /// Depths to evaluate (default: full depth; with --sweep 1,3,6). An index lacking one is
    /// built first, all depths in one pass, and kept under the index's folder.
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Sizes to evaluate (default: the index's; with --sweep 32,64,128,384).
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

    let (retriever, cells) = if args.oracle {
        (None, vec![Cell::ORACLE])
    } else {
        let model_dir = plan::model_dir(
            args.encoder.model.as_deref(),
            &args.index,
            Path::new(DEFAULT_MODEL_DIR),
        );
        let (layers, dims) = plan::grid(
            &args.index,
            &model_dir,
            args.sweep,
            args.layers.clone().map(|l| l.0),
            args.dims.clone().map(|d| d.0),
        )?;
        let build = BuildOptions {
            index_dir: args.index.clone(),
            corpus: args.data.hotpot_files(),
            model_dir,
            encoder: args.encoder.options(),
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
        };
        let dir = hotpot::index_with_depths(&build, &layers)?;
        let retriever = args.strategy.open(&IndexArgs {
            index: dir,
            model: None,
            precision: args.encoder.precision,
        })?;
        let cells = plan::cells(&retriever.index.manifest, &layers, dims.as_deref())?;
        let retriever = match args.shard {
            Some(shard) => retriever.only_shard(shard)?,
            None => retriever,
        };
        (Some(retriever), cells)
    };
    if let (Some(shard), Some(hits_dir), Some(retriever)) = (args.shard, &args.hits_dir, &retriever)
    {
        rag::index::create_dir(hits_dir)?;
        let path = hits::hits_file(hits_dir, shard);
        let k = ranking_depth(args.context.top_k);
        let lines = hits::write_shard_hits(retriever, &questions, &cells, strategy, k, &path)?;
        println!(
            "shard {shard}: {lines} rankings ({} questions x {} cells, top {k}) -> {}",
            questions.len(),
            cells.len(),
            path.display()
        );
        return Ok(());
    }
    let config = RunConfig {
        questions_file: path.clone(),
        questions: questions.len(),
        cells: cells.clone(),
        mode: strategy.mode,
        hops: strategy.hops,
        tuning: Some(args.strategy.tuning()),
        top_k: args.context.top_k,
        // Retrieval alone reads no context.
        context_tokens: if spec.is_some() {
            args.context.context_tokens
        } else {
            0
        },
        context_only: args.context_only,
        sentence_weights: (spec.is_some() && args.context.context_tokens > 0)
            .then_some(args.context.sentence_weights),
        oracle: args.oracle,
        generator: generator.as_ref().map(|g| g.name.clone()),
        prompt_style: spec.as_ref().map(|s| s.style.to_string()),
        max_tokens: spec.as_ref().map(|_| args.generator.generation.max_tokens),
        yes_no_bias: spec
            .as_ref()
            .map(|_| args.generator.generation.yes_no_bias)
            .filter(|&bias| bias != 0.0),
        option_bias: spec
            .as_ref()
            .and_then(|_| args.generator.generation.option_bias.0),
        extractive: spec.is_some() && args.generator.generation.extractive,
        index: retriever.as_ref().map(|r| r.index.dir.clone()),
        rankings_from: args.rankings_from.clone(),
        // Recorded rankings are read, not searched: no vectors of this run's.
        precision: retriever
            .as_ref()
            .filter(|_| args.rankings_from.is_none())
            .and_then(|r| plan::precisions(r, strategy.mode)),
    };
    let rankings = match (&args.from_hits, &args.rankings_from, &retriever) {
        (Some(dir), _, Some(retriever)) => {
            hits::check_strategy(strategy)?;
            let shards = retriever.index.parts().len();
            let k = ranking_depth(args.context.top_k);
            Some(hits::read_merged(dir, shards, &questions, &cells, k)?)
        }
        (_, Some(run), Some(retriever)) => {
            Some(recorded::read(run, &config, &questions, &retriever.index)?)
        }
        _ => None,
    };
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
