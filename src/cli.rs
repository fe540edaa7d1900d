//! Command-line flags and the thin layer that turns them into library calls and prints results.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::bench;
use crate::corpus::DEFAULT_TEMPLATE;
use crate::encoder::{EncoderOptions, Pooling};
use crate::index::{self, build::DEFAULT_CHUNK_SIZE, BuildOptions};
use crate::progress::ProgressMode;
use crate::retrieve::{Mode, Retriever, SearchRequest, SearchResponse};
use crate::serve;
use crate::util::NumberList;

pub const DEFAULT_MODEL_DIR: &str = "data/models/all-MiniLM-L6-v2";
pub const DEFAULT_DATA_DIR: &str = "../shared/data";
const HOTPOT_FILES: [&str; 2] = [
    "hotpotqa/hotpot_dev_distractor_sample.json",
    "hotpotqa/hotpot_dev_fullwiki_sample.json",
];

#[derive(Parser, Debug)]
#[command(name = "rag", version, about = "Retrieval-augmented QA on Espresso Sentence Embeddings")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Encode a HotpotQA corpus and build the dense, BM25 and document indexes.
    Index(IndexArgs),
    /// Search the index: ranked paragraphs with scores.
    Search(SearchArgs),
    /// HotpotQA retrieval recall over depth x dimension.
    Eval(EvalArgs),
    /// Measure encoding throughput or query latency.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Serve search, question answering and embeddings over HTTP, models loaded once.
    Serve(ServeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DataArgs {
    /// Where the shared datasets live (hotpotqa/, sts/, nli/).
    #[arg(long, env = "RAG_DATA", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

impl DataArgs {
    fn hotpot_files(&self) -> Vec<PathBuf> {
        HOTPOT_FILES.iter().map(|f| self.data_dir.join(f)).collect()
    }

    fn distractor_questions(&self) -> PathBuf {
        self.data_dir.join(HOTPOT_FILES[0])
    }
}

#[derive(Args, Debug, Clone)]
pub struct EncoderArgs {
    /// A BERT checkpoint directory in the Hugging Face layout.
    #[arg(long, env = "RAG_MODEL", default_value = DEFAULT_MODEL_DIR)]
    pub model: PathBuf,
    /// Pooling (default: what 1_Pooling/config.json says, else CLS).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    /// Maximum tokens per text (default: the checkpoint's max_seq_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Text put before every question, e.g. bge's "Represent this sentence for searching relevant passages: ".
    #[arg(long)]
    pub query_prefix: Option<String>,
    /// Most texts per forward pass.
    #[arg(long, default_value_t = crate::encoder::DEFAULT_BATCH_SIZE)]
    pub batch_size: usize,
}

impl EncoderArgs {
    fn options(&self) -> EncoderOptions {
        EncoderOptions {
            pooling: self.pooling,
            max_length: self.max_length,
            query_prefix: self.query_prefix.clone(),
            max_layers: None,
            batch_size: Some(self.batch_size),
        }
    }
}

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// HotpotQA files (JSON array or JSONL); may be repeated. Default: both sample files.
    #[arg(long = "corpus")]
    pub corpus: Vec<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// Where the index goes.
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Depths to store, e.g. 1,3,6: one forward pass yields all of them (default: full depth).
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Size served by default; every smaller size stays available (default: full width).
    #[arg(long)]
    pub dim: Option<usize>,
    /// The text encoded for each paragraph.
    #[arg(long, default_value = DEFAULT_TEMPLATE)]
    pub template: String,
    /// Documents between checkpoints of an interruptible build.
    #[arg(long, default_value_t = DEFAULT_CHUNK_SIZE)]
    pub chunk_size: usize,
    /// Skip malformed records (counted in the summary) instead of stopping.
    #[arg(long)]
    pub skip_bad: bool,
    /// Start over instead of resuming an interrupted build.
    #[arg(long)]
    pub fresh: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// The question.
    pub query: String,
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Encoder to use; must be the one the index was built with (default: that one).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// How many paragraphs.
    #[arg(long, short, default_value_t = 5)]
    pub k: usize,
    #[arg(long, value_enum, default_value_t = Mode::Dense)]
    pub mode: Mode,
    /// Depth to query (default: the deepest stored).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Embedding size to query (default: the index's).
    #[arg(long)]
    pub dim: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

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
    /// Depths to evaluate (default: the deepest stored).
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Sizes to evaluate (default: the index's).
    #[arg(long, alias = "dim")]
    pub dims: Option<NumberList>,
    #[arg(long, value_enum, default_value_t = Mode::Dense)]
    pub mode: Mode,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Encoder to use; must be the one the index was built with (default: that one).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// GGUF generator for POST /ask (without it /ask answers 503).
    #[arg(long)]
    pub llm: Option<PathBuf>,
    /// Address to listen on; loopback unless you mean to expose it.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// How long an embedding request waits for others to share its forward pass (ms).
    #[arg(long, default_value_t = 2.0)]
    pub batch_window_ms: f64,
    /// Tokens per batched forward pass.
    #[arg(long, default_value_t = 8192)]
    pub batch_tokens: usize,
    /// Embedding requests waiting before the server answers 503.
    #[arg(long, default_value_t = 256)]
    pub queue: usize,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Paragraphs per second at each depth, in one warm process.
    Encode(BenchEncodeArgs),
    /// Query latency percentiles per retrieval mode, in one warm process.
    Query(BenchQueryArgs),
}

#[derive(Args, Debug)]
pub struct BenchEncodeArgs {
    /// Corpus to take paragraphs from (default: the distractor sample).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    #[arg(long, default_value_t = 2000)]
    pub limit: usize,
    #[arg(long, default_value = "6,3,1")]
    pub layers: NumberList,
    #[arg(long, default_value = DEFAULT_TEMPLATE)]
    pub template: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchQueryArgs {
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// HotpotQA file whose questions are asked (default: the distractor sample).
    #[arg(long)]
    pub questions: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
    #[arg(long, value_enum, value_delimiter = ',', default_value = "dense,bm25,hybrid")]
    pub modes: Vec<Mode>,
    #[arg(long, short, default_value_t = 5)]
    pub k: usize,
    #[arg(long)]
    pub layers: Option<usize>,
    #[arg(long)]
    pub dim: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Index(args) => run_index(args),
        Command::Search(args) => run_search(args),
        Command::Eval(args) => run_eval(args),
        Command::Bench(BenchCommand::Encode(args)) => run_bench_encode(args),
        Command::Bench(BenchCommand::Query(args)) => run_bench_query(args),
        Command::Serve(args) => run_serve(args),
    }
}

fn print_json(value: &impl Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn run_index(args: IndexArgs) -> Result<()> {
    let corpus = if args.corpus.is_empty() {
        args.data.hotpot_files()
    } else {
        args.corpus.clone()
    };
    let options = BuildOptions {
        index_dir: args.index.clone(),
        corpus,
        model_dir: args.encoder.model.clone(),
        encoder: args.encoder.options(),
        layers: args.layers.clone().map(|l| l.0),
        dim: args.dim,
        template: args.template.clone(),
        chunk_size: args.chunk_size,
        skip_bad: args.skip_bad,
        fresh: args.fresh,
        progress: ProgressMode::for_stderr(),
    };
    let summary = index::build(&options)?;
    if args.json {
        return print_json(&summary);
    }
    if summary.up_to_date {
        println!(
            "{} is up to date ({} paragraphs, layers {:?}, dim {}); --fresh rebuilds it",
            summary.index_dir.display(),
            summary.documents,
            summary.layers,
            summary.dim
        );
        return Ok(());
    }
    let resumed = if summary.resumed_from > 0 {
        format!(" (resumed after {})", summary.resumed_from)
    } else {
        String::new()
    };
    println!(
        "indexed {} paragraphs{resumed} into {} at layers {:?}, dim {} of {}: encoding {:.1} paragraphs/s, {:.1}s in all ({} duplicate titles, {} bad records skipped)",
        summary.documents,
        summary.index_dir.display(),
        summary.layers,
        summary.dim,
        summary.stored_dim,
        summary.paragraphs_per_second,
        summary.total_seconds,
        summary.duplicates,
        summary.skipped_records,
    );
    Ok(())
}

fn run_search(args: SearchArgs) -> Result<()> {
    let retriever = Retriever::open(&args.index, args.model.as_deref())?;
    let response = retriever.search(&SearchRequest {
        query: &args.query,
        k: args.k,
        mode: args.mode,
        layers: args.layers,
        dim: args.dim,
    })?;
    if args.json {
        return print_json(&response);
    }
    print_hits(&response);
    Ok(())
}

fn print_hits(response: &SearchResponse) {
    for hit in &response.hits {
        println!("{:>2}. {:.4}  {}", hit.rank, hit.score, hit.title);
        println!("    {}", snippet(&hit.text, 200));
    }
    println!(
        "{} results ({} mode, layers {}, dim {}) in {:.1} ms (encode {:.1} ms, search {:.1} ms)",
        response.hits.len(),
        response.mode,
        response.layers,
        response.dim,
        response.timings.total_ms,
        response.timings.encode_ms,
        response.timings.search_ms
    );
}

/// The first `max_chars` characters, cut at a character boundary.
fn snippet(text: &str, max_chars: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(max_chars).collect();
    if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    }
}

fn run_eval(args: EvalArgs) -> Result<()> {
    let retriever = Retriever::open(&args.index, None)?;
    let path = args
        .questions
        .clone()
        .unwrap_or_else(|| args.data.distractor_questions());
    let questions = crate::corpus::read_questions(&path, args.limit)?;
    let manifest = &retriever.index.manifest;
    let layers = args
        .layers
        .clone()
        .map(|l| l.0)
        .unwrap_or_else(|| vec![*manifest.layers.last().expect("a stored depth")]);
    let dims = args.dims.clone().map(|d| d.0).unwrap_or_else(|| vec![manifest.default_dim]);
    let mut reports = Vec::new();
    for &depth in &layers {
        for &dim in &dims {
            let (depth, dim) = manifest.resolve(Some(depth), Some(dim))?;
            let (report, _) =
                crate::eval::evaluate_retrieval(&retriever, &questions, args.mode, depth, dim)?;
            if !args.json {
                let recall: Vec<String> = report
                    .recall
                    .iter()
                    .map(|(k, r)| format!("R@{k} {r:.3}"))
                    .collect();
                println!(
                    "layers {depth} dim {dim:>4} {}: {}  both@5 {:.3}  ({} questions, {:.1}s)",
                    args.mode,
                    recall.join("  "),
                    report.all_supporting[&5],
                    report.questions,
                    report.seconds
                );
            }
            reports.push(report);
        }
    }
    if args.json {
        print_json(&reports)?;
    }
    Ok(())
}

fn run_bench_encode(args: BenchEncodeArgs) -> Result<()> {
    let options = bench::EncodeBenchOptions {
        corpus: args.corpus.unwrap_or_else(|| args.data.distractor_questions()),
        model_dir: args.encoder.model.clone(),
        encoder: args.encoder.options(),
        limit: args.limit,
        layers: args.layers.0,
        template: args.template,
    };
    let result = bench::encode_throughput(&options)?;
    if args.json {
        return print_json(&result);
    }
    for d in &result.depths {
        println!(
            "layers {:>2}: {:>8.1} paragraphs/s  {:>9.0} tokens/s  ({} paragraphs in {:.2}s)",
            d.layers, d.paragraphs_per_s, d.tokens_per_s, d.paragraphs, d.seconds
        );
    }
    Ok(())
}

fn run_bench_query(args: BenchQueryArgs) -> Result<()> {
    let options = bench::QueryBenchOptions {
        index_dir: args.index.clone(),
        questions: args
            .questions
            .clone()
            .unwrap_or_else(|| args.data.distractor_questions()),
        limit: args.limit,
        modes: args.modes.clone(),
        k: args.k,
        layers: args.layers,
        dim: args.dim,
    };
    let result = bench::query_latency(&options)?;
    if args.json {
        return print_json(&result);
    }
    for l in &result.latencies {
        println!(
            "{:>6}: p50 {:>6.2} ms  p90 {:>6.2} ms  p99 {:>6.2} ms  mean {:>6.2} ms  ({} queries, {} docs, layers {}, dim {})",
            l.mode.to_string(),
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.mean_ms,
            l.queries,
            result.documents,
            result.layers,
            result.dim
        );
    }
    Ok(())
}

fn run_serve(args: ServeArgs) -> Result<()> {
    if let Some(llm) = &args.llm {
        // The generator lands with `rag ask`; until then /ask is served without one.
        anyhow::bail!(
            "--llm {}: this build has no generator yet; run without --llm (POST /ask will answer 503)",
            llm.display()
        );
    }
    if !(args.batch_window_ms.is_finite() && args.batch_window_ms >= 0.0) {
        anyhow::bail!("--batch-window-ms must be a number of milliseconds, 0 or more");
    }
    let config = serve::ServeConfig {
        batch: serve::BatchOptions {
            window: std::time::Duration::from_secs_f64(args.batch_window_ms / 1000.0),
            max_tokens: args.batch_tokens.max(1),
            queue: args.queue,
        },
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("listening on {}", args.addr))?;
        if !args.addr.ip().is_loopback() {
            eprintln!("warning: listening on {}, reachable from other machines", args.addr);
        }
        eprintln!("listening on http://{} (loading models)", listener.local_addr()?);
        let (index_dir, model) = (args.index, args.model);
        let load = move || {
            Ok(serve::Models {
                retriever: Retriever::open(&index_dir, model.as_deref())?,
                answerer: None,
            })
        };
        serve::serve(listener, config, load, serve::shutdown_signal()).await
    })
}
