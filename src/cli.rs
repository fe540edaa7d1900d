//! Command-line flags and the thin layer that turns them into library calls and prints results.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::ask::context::SentenceWeights;
use crate::ask::{AskResult, AskSettings, Pipeline};
use crate::bench;
use crate::corpus::DEFAULT_TEMPLATE;
use crate::encoder::{Encoder, EncoderOptions, Pooling, Precision};
use crate::eval::run::{Cell, RunConfig, RunOptions};
use crate::eval::sts::{self, Reduction, StsDataset, StsOptions};
use crate::generate::{
    Generator, GeneratorOptions, PromptSpec, PromptStyle, DEFAULT_LLM, DEFAULT_MAX_TOKENS,
};
use crate::index::{self, build::DEFAULT_CHUNK_SIZE, BuildOptions};
use crate::progress::ProgressMode;
use crate::retrieve::{Mode, Retriever, SearchRequest, SearchResponse, Strategy, Tuning};
use crate::serve;
use crate::train::{
    self, data,
    loss::{AngleLoss, Method as TrainMode, Objective},
    TrainOptions,
};
use crate::util::ms_since;
use crate::util::NumberList;

pub const DEFAULT_MODEL_DIR: &str = "data/models/all-MiniLM-L6-v2";
pub const DEFAULT_DATA_DIR: &str = "../shared/data";
const HOTPOT_FILES: [&str; 2] = [
    "hotpotqa/hotpot_dev_distractor_sample.json",
    "hotpotqa/hotpot_dev_fullwiki_sample.json",
];

#[derive(Parser, Debug)]
#[command(
    name = "rag",
    version,
    about = "Retrieval-augmented QA on Espresso Sentence Embeddings"
)]
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
    /// Answer a question from the retrieved paragraphs with a local GGUF model.
    Ask(AskArgs),
    /// HotpotQA exact match and retrieval recall over depth x dimension.
    Eval(EvalArgs),
    /// Spearman correlation on STS12-16, STS-B and SICK-R per layer x size (the ESE paper's
    /// Table 1 and Figure 3).
    EvalSts(EvalStsArgs),
    /// Measure encoding throughput or query latency.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Serve search, question answering and embeddings over HTTP, models loaded once.
    Serve(ServeArgs),
    /// Train an encoder: ESE, or the RAW / MRL / 2DMSE / pooler baselines.
    Train(TrainArgs),
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
    #[command(flatten)]
    pub precision: PrecisionArg,
}

#[derive(Args, Debug, Clone, Copy)]
pub struct PrecisionArg {
    /// Arithmetic of the encoder's projections: `int8` (8-bit integers, AVX-512 VNNI) encodes
    /// faster, with vectors a little off the exact `f32` ones (see eval/int8/).
    #[arg(long, value_enum, default_value_t)]
    pub precision: Precision,
}

impl EncoderArgs {
    fn options(&self) -> EncoderOptions {
        EncoderOptions {
            pooling: self.pooling,
            max_length: self.max_length,
            query_prefix: self.query_prefix.clone(),
            max_layers: None,
            batch_size: Some(self.batch_size),
            precision: self.precision.precision,
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
    /// Size served by default; every smaller size stays available (default: full width, or K
    /// with --reduce pca:K).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Store each depth's top K principal components (fitted on the corpus, applied to queries
    /// too) instead of its first dimensions: the post-hoc baseline to ESE truncation.
    #[arg(long, value_name = "pca:K")]
    pub reduce: Option<index::PcaSpec>,
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
    /// Check the index in --index instead of building one: every file against the manifest's
    /// sizes and checksums, every vector (finite, unit length) and every document.
    #[arg(long, conflicts_with_all = ["fresh", "layers", "dim", "reduce", "corpus"])]
    pub verify: bool,
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
    #[command(flatten)]
    pub precision: PrecisionArg,
    /// How many paragraphs.
    #[arg(long, short, default_value_t = 5)]
    pub k: usize,
    /// Default: dense, one hop.
    #[command(flatten)]
    pub strategy: StrategyArgs,
    /// Depth to query (default: the deepest stored).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Embedding size to query (default: the index's).
    #[arg(long)]
    pub dim: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

/// How questions are searched. Each command has its own defaults (plain dense for `search`, the
/// best measured for `ask`, `eval` and `serve`).
#[derive(Args, Debug, Clone)]
pub struct StrategyArgs {
    /// dense: ESE vectors; bm25: words; hybrid: reciprocal-rank fusion of both; fusion: a
    /// weighted sum of both's scaled scores.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// 2 searches again with the question joined to each of the first hop's best paragraphs
    /// and merges both hops (for questions that need two paragraphs).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub hops: Option<u8>,
    /// Dense weight of `--mode fusion`, between 0 (BM25 alone) and 1 (dense alone).
    #[arg(long, default_value_t = Tuning::default().fusion_weight)]
    pub fusion_weight: f32,
    /// With --hops 2: first-hop paragraphs that each seed a second-hop search.
    #[arg(long, default_value_t = Tuning::default().hop_beam)]
    pub hop_beam: usize,
    /// With --hops 2: how much second-hop evidence counts beside first-hop evidence.
    #[arg(long, default_value_t = Tuning::default().hop_weight)]
    pub hop_weight: f32,
}

impl StrategyArgs {
    /// The strategy asked for, `default` filling in what was not.
    fn strategy(&self, default: Strategy) -> Result<Strategy> {
        Strategy::new(
            self.mode.unwrap_or(default.mode),
            self.hops.unwrap_or(default.hops),
        )
    }

    fn tuning(&self) -> Tuning {
        Tuning {
            fusion_weight: self.fusion_weight,
            hop_beam: self.hop_beam,
            hop_weight: self.hop_weight,
        }
    }

    fn open(&self, index: &Path, model: Option<&Path>, precision: Precision) -> Result<Retriever> {
        Retriever::open(index, model, precision)?.with_tuning(self.tuning())
    }
}

/// What the generator reads.
#[derive(Args, Debug, Clone)]
pub struct ContextArgs {
    /// Paragraphs retrieved; the context is made from them.
    #[arg(long, default_value_t = crate::ask::DEFAULT_TOP_K)]
    pub top_k: usize,
    /// Token budget (the generator's tokens) for the retrieved paragraphs' best sentences;
    /// 0 puts the paragraphs in whole.
    #[arg(long, default_value_t = crate::ask::DEFAULT_CONTEXT_TOKENS)]
    pub context_tokens: usize,
    /// How sentences are scored for the context: weights of the encoder's cosine to the
    /// question, the share of the question's words held, 1/rank of the paragraph, and opening
    /// the paragraph.
    #[arg(long, value_name = "DENSE,LEXICAL,RANK,FIRST", default_value_t = SentenceWeights::default())]
    pub sentence_weights: SentenceWeights,
}

#[derive(Args, Debug, Clone)]
pub struct GeneratorArgs {
    /// A GGUF model (`scripts/fetch-models.sh llm-small` fetches a faster 0.5B one).
    #[arg(long, env = "RAG_LLM", default_value = DEFAULT_LLM)]
    pub llm: PathBuf,
    #[command(flatten)]
    pub generation: GenerationArgs,
}

/// How answers are generated, whichever GGUF model generates them.
#[derive(Args, Debug, Clone)]
pub struct GenerationArgs {
    /// Most tokens in an answer.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: usize,
    /// `chat`: instruction and paragraphs in the system turn, question in the user turn;
    /// `paper`: the ESE paper's prompt as one user turn (default: chat, paper with --prompt-file).
    #[arg(long, value_enum)]
    pub prompt_style: Option<PromptStyle>,
    /// A prompt with {context} and {question} replacing the paper's.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// Context window in tokens (default: 4096, at most what the model was trained on).
    #[arg(long)]
    pub ctx_size: Option<u32>,
    /// Generation threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Show llama.cpp's own log.
    #[arg(long)]
    pub verbose: bool,
    /// Evaluate every prompt whole instead of reusing the opening it shares with the previous
    /// one (the same answers, slower).
    #[arg(long)]
    pub no_prefix_cache: bool,
}

impl GenerationArgs {
    fn prompt(&self) -> Result<PromptSpec> {
        PromptSpec::from_flags(self.prompt_style, self.prompt_file.as_deref())
    }

    fn load(&self, llm: &Path) -> Result<Generator> {
        Generator::load(
            llm,
            &GeneratorOptions {
                max_tokens: self.max_tokens,
                ctx_size: self.ctx_size,
                threads: self.threads,
                verbose: self.verbose,
                reuse_prefix: !self.no_prefix_cache,
            },
        )
    }
}

impl GeneratorArgs {
    fn prompt(&self) -> Result<PromptSpec> {
        self.generation.prompt()
    }

    fn load(&self) -> Result<Generator> {
        self.generation.load(&self.llm)
    }
}

#[derive(Args, Debug)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Encoder to use; must be the one the index was built with (default: that one).
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub precision: PrecisionArg,
    /// Default: the best measured (see eval/answers/).
    #[command(flatten)]
    pub strategy: StrategyArgs,
    #[command(flatten)]
    pub context: ContextArgs,
    /// Depth to query (default: the deepest stored).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Embedding size to query (default: the index's).
    #[arg(long)]
    pub dim: Option<usize>,
    #[command(flatten)]
    pub generator: GeneratorArgs,
    /// Print the answer's tokens as they come.
    #[arg(long)]
    pub stream: bool,
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
    /// Encoder for an index built for this evaluation.
    #[command(flatten)]
    pub encoder: EncoderArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct EvalStsArgs {
    #[command(flatten)]
    pub encoder: EncoderArgs,
    #[command(flatten)]
    pub data: DataArgs,
    /// Depths to evaluate (default: every layer of the model).
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Sizes to evaluate (default: 32, 64, 128, ... below the model's width, and its width).
    #[arg(long)]
    pub dims: Option<NumberList>,
    /// Datasets to evaluate.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = StsDataset::ALL)]
    pub datasets: Vec<StsDataset>,
    /// Add rows for a post-hoc PCA per layer (fitted on the evaluated sentences) beside first-k
    /// truncation.
    #[arg(long, value_enum)]
    pub reduce: Option<Reduction>,
    /// Where summary.md, summary.json and heatmap.png go (default: eval/sts/<model>/, with
    /// --reduce pca eval/sts/<model>-pca/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    #[arg(long, value_enum, default_value_t = TrainMode::Ese)]
    pub mode: TrainMode,
    /// The checkpoint to start from (Hugging Face layout).
    #[arg(long, env = "RAG_MODEL", default_value = DEFAULT_MODEL_DIR)]
    pub model: PathBuf,
    /// Where the trained model goes.
    #[arg(long)]
    pub out: PathBuf,
    /// Training data: `nli` (every CSV under <data-dir>/nli/), a premise,hypothesis,label CSV,
    /// or JSONL of {"query","positive"[,"negative"]} / {"text1","text2","label"}; may be repeated.
    #[arg(long, default_value = "nli")]
    pub data: Vec<String>,
    /// Also train on in-domain pairs from a HotpotQA corpus (title + first sentence -> title +
    /// the rest of the paragraph); may be repeated.
    #[arg(long)]
    pub pairs_from_corpus: Vec<PathBuf>,
    /// Read at most this many examples from each --data source.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    pub max_examples: usize,
    /// Make at most this many pairs from each --pairs-from-corpus corpus.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    pub max_corpus_pairs: usize,
    #[command(flatten)]
    pub data_dir: DataArgs,
    /// ESE's k: the size shallow layers and the compression target are trained at.
    #[arg(long, default_value_t = 128)]
    pub compression_size: usize,
    /// Output size of the pooler head (--mode pooler).
    #[arg(long, default_value_t = 128)]
    pub pooler_dim: usize,
    /// Second step of pooler training: freeze the encoder of a --mode pooler model (--model)
    /// and fine-tune only its head.
    #[arg(long)]
    pub two_step: bool,
    /// Pooling (default: the checkpoint's, else CLS; the pooler head always reads CLS).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Batches whose gradients are summed before each optimizer step.
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Stop after this many optimizer steps (default: the epochs' worth).
    #[arg(long)]
    pub max_steps: Option<usize>,
    #[arg(long, default_value_t = 5e-5)]
    pub lr: f64,
    /// Fraction of the steps spent warming the learning rate up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    /// Clip the gradients' global norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0)]
    pub max_grad_norm: f64,
    /// Tokens per text.
    #[arg(long, default_value_t = 64)]
    pub max_len: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Optimizer steps between checkpoints.
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: usize,
    /// Skip the STS-B evaluation whose table goes into the model card.
    #[arg(long)]
    pub no_eval: bool,
    /// Stop after this many steps, with a checkpoint, and go on later with --resume.
    #[arg(long)]
    pub pause_after: Option<usize>,
    /// Continue an interrupted run from its last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Discard an interrupted run and start over.
    #[arg(long)]
    pub fresh: bool,
    #[arg(long, default_value_t = 1.0)]
    pub ibn_weight: f64,
    #[arg(long, default_value_t = 1.0)]
    pub cln_weight: f64,
    #[arg(long, default_value_t = 0.02)]
    pub angle_weight: f64,
    #[arg(long, default_value_t = 0.0)]
    pub cosine_weight: f64,
    #[arg(long, default_value_t = 20.0)]
    pub ibn_tau: f64,
    #[arg(long, default_value_t = 20.0)]
    pub angle_tau: f64,
    #[arg(long, default_value_t = 20.0)]
    pub cosine_tau: f64,
    /// Temperature of the KL term in ESE's alignment and 2DMSE's distillation.
    #[arg(long, default_value_t = 1.0)]
    pub kl_temperature: f64,
    /// Multiplies ESE's shallow-layer terms (1: the paper's weighting); raise it for a model
    /// that will mostly be served at a reduced depth.
    #[arg(long, default_value_t = 1.0)]
    pub shallow_weight: f64,
    /// With ESE: weight of distilling the base model's full-depth similarities into every layer
    /// trained, at its trained size (0: the paper's objective). Keeps shallow layers close to a
    /// base model that already retrieves well, and its last layer from drifting.
    #[arg(long, default_value_t = 0.0)]
    pub distill_weight: f64,
    /// With ESE: weight of distilling the base model's full-depth embeddings themselves
    /// (1 - cosine, full width) into every layer trained (0: off). Holds the last layer where
    /// the base model had it and teaches shallow layers to compute it.
    #[arg(long, default_value_t = 0.0)]
    pub embedding_distill_weight: f64,
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
    /// Arithmetic of the encoder's projections; default: int8 where the CPU has AVX-512 VNNI,
    /// else f32. A server lives on encoding throughput, and int8 gives twice as much with
    /// unchanged search recall; `f32` returns embeddings that match the reference to a cosine
    /// of 0.9999 instead of 0.990 (see eval/int8/).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// GGUF generator for POST /ask (without it /ask answers 503).
    #[arg(long)]
    pub llm: Option<PathBuf>,
    /// How /ask generates (with --llm).
    #[command(flatten)]
    pub generation: GenerationArgs,
    /// How /ask retrieves when a request does not say (default: the best measured).
    #[command(flatten)]
    pub strategy: StrategyArgs,
    /// What /ask's generator reads when a request does not say.
    #[command(flatten)]
    pub context: ContextArgs,
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
    /// `rag eval` runs whose sweeps the web page draws heatmaps of (default: eval/runs, when
    /// there is one).
    #[arg(long)]
    pub runs: Option<PathBuf>,
}

impl ServeArgs {
    /// The precision asked for, else the fastest this CPU has.
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or_else(Precision::fastest_available)
    }
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
    #[command(flatten)]
    pub precision: PrecisionArg,
    /// HotpotQA file whose questions are asked (default: the distractor sample).
    #[arg(long)]
    pub questions: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "dense,bm25,hybrid,fusion"
    )]
    pub modes: Vec<Mode>,
    /// 2 adds the second hop to every mode.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub hops: u8,
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
        Command::Ask(args) => run_ask(args),
        Command::Eval(args) => run_eval(args),
        Command::EvalSts(args) => run_eval_sts(args),
        Command::Bench(BenchCommand::Encode(args)) => run_bench_encode(args),
        Command::Bench(BenchCommand::Query(args)) => run_bench_query(args),
        Command::Serve(args) => run_serve(args),
        Command::Train(args) => run_train(args),
    }
}

fn print_json(value: &impl Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn run_index(args: IndexArgs) -> Result<()> {
    if args.verify {
        return run_verify(&args);
    }
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
        reduce: args.reduce,
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
    let reduced = summary.reduce.as_ref().map_or(String::new(), |r| {
        format!(
            " ({} fitted on {} vectors per layer)",
            r.method, r.fitted_on
        )
    });
    if summary.up_to_date {
        println!(
            "{} is up to date ({} paragraphs, layers {:?}, dim {}{reduced}); --fresh rebuilds it",
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
        "indexed {} paragraphs{resumed} into {} at layers {:?}, dim {} of {}{reduced}: encoding {:.1} paragraphs/s, {:.1}s in all ({} duplicate titles, {} bad records skipped)",
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

fn run_verify(args: &IndexArgs) -> Result<()> {
    let verified = index::verify(&args.index)?;
    if args.json {
        return print_json(&verified);
    }
    if verified.checksums {
        println!(
            "{} is whole: generation {}, {} documents, {} files match their checksums, every vector and document reads back",
            args.index.display(),
            verified.generation,
            verified.documents,
            verified.files
        );
    } else {
        println!(
            "{}: {} documents; counts, sizes, vectors and documents check out, but the index predates checksums, so its bytes cannot be verified fully (`rag index --fresh` adds them)",
            args.index.display(),
            verified.documents
        );
    }
    Ok(())
}

fn run_search(args: SearchArgs) -> Result<()> {
    let strategy = args.strategy.strategy(Strategy::default())?;
    if strategy.mode == Mode::Bm25 && (args.layers.is_some() || args.dim.is_some()) {
        eprintln!("note: BM25 uses no vectors, so --layers and --dim are ignored");
    }
    let retriever =
        args.strategy
            .open(&args.index, args.model.as_deref(), args.precision.precision)?;
    let response = retriever.search(&SearchRequest {
        query: &args.query,
        k: args.k,
        strategy,
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
        let hop = if hit.hop == 2 { "  (second hop)" } else { "" };
        println!("{:>2}. {:.4}  {}{hop}", hit.rank, hit.score, hit.title);
        println!("    {}", snippet(&hit.text, 200));
    }
    println!(
        "{} results ({} mode, {} hop(s), layers {}, dim {}) in {:.1} ms (encode {:.1} ms, search {:.1} ms)",
        response.hits.len(),
        response.mode,
        response.hops,
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

impl ContextArgs {
    fn settings(
        &self,
        strategy: Strategy,
        layers: Option<usize>,
        dim: Option<usize>,
    ) -> AskSettings {
        AskSettings {
            strategy,
            layers,
            dim,
            top_k: self.top_k,
            context_tokens: self.context_tokens,
            weights: self.sentence_weights,
        }
    }
}

fn run_ask(args: AskArgs) -> Result<()> {
    crate::retrieve::validate_question(&args.question)?;
    let spec = args.generator.prompt()?;
    let settings = args.context.settings(
        args.strategy.strategy(crate::ask::DEFAULT_STRATEGY)?,
        args.layers,
        args.dim,
    );
    let retriever =
        args.strategy
            .open(&args.index, args.model.as_deref(), args.precision.precision)?;
    let loading = Instant::now();
    let generator = args.generator.load()?;
    let model_load_ms = ms_since(loading);
    let pipeline = Pipeline::new(&retriever, &generator, &spec);
    let stream = args.stream && !args.json;
    let answer = pipeline.ask(&args.question, &settings, |piece| {
        if stream {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
        true
    })?;
    if answer.dropped_paragraphs > 0 {
        eprintln!(
            "note: left out the {} lowest-ranked of {} paragraphs to fit the model's context (--ctx-size)",
            answer.dropped_paragraphs,
            answer.sources.len()
        );
    }
    if args.json {
        #[derive(Serialize)]
        struct WithLoad<'a> {
            #[serde(flatten)]
            answer: &'a AskResult,
            model_load_ms: f64,
        }
        return print_json(&WithLoad {
            answer: &answer,
            model_load_ms,
        });
    }
    if stream {
        println!();
    } else {
        println!("{}", answer.answer);
    }
    crate::ask::present::print_details(&answer, model_load_ms);
    Ok(())
}

/// The grid an evaluation covers: the paper's (layers 1,3,6 x dims 32..384) for a bare
/// `--sweep`, else full depth at the index's size.
fn eval_grid(args: &EvalArgs) -> Result<(Vec<usize>, Option<Vec<usize>>)> {
    let (default_layers, default_dims) = if args.sweep {
        (vec![1, 3, 6], Some(vec![32, 64, 128, 384]))
    } else {
        let manifest = index::Manifest::read(&args.index).ok();
        let depth = match &manifest {
            Some(m) => *m.layers.last().expect("an index stores a depth"),
            None => {
                let config: crate::encoder::bert::Config =
                    crate::util::read_json(&args.encoder.model.join("config.json"))?;
                config.num_hidden_layers
            }
        };
        (vec![depth], None)
    };
    let layers = args.layers.clone().map_or(default_layers, |l| l.0);
    let dims = args.dims.clone().map(|d| d.0).or(default_dims);
    let cells = layers.len() * dims.as_ref().map_or(1, Vec::len);
    if cells > 1 && !args.sweep {
        bail!("{cells} settings asked for; add --sweep to evaluate the grid");
    }
    Ok((layers, dims))
}

fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn run_eval(args: EvalArgs) -> Result<()> {
    let path = args
        .questions
        .clone()
        .unwrap_or_else(|| args.data.distractor_questions());
    let questions = crate::corpus::read_questions(&path, args.limit)?;
    if questions.is_empty() {
        bail!("{} has no questions", path.display());
    }
    let strategy = args.strategy.strategy(crate::ask::DEFAULT_STRATEGY)?;
    let spec = (!args.no_generate)
        .then(|| args.generator.prompt())
        .transpose()?;
    // Before any index build, so that a bad model fails fast.
    let generator = spec.as_ref().map(|_| args.generator.load()).transpose()?;

    let (retriever, cells) = if args.oracle {
        (None, vec![Cell::ORACLE])
    } else {
        let (layers, dims) = eval_grid(&args)?;
        let build = BuildOptions {
            index_dir: args.index.clone(),
            corpus: args.data.hotpot_files(),
            model_dir: args.encoder.model.clone(),
            encoder: args.encoder.options(),
            layers: None,
            dim: None,
            reduce: None,
            template: DEFAULT_TEMPLATE.to_string(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            skip_bad: false,
            fresh: false,
            progress: ProgressMode::for_stderr(),
        };
        let dir = crate::eval::index_with_depths(&build, &layers)?;
        let retriever = args
            .strategy
            .open(&dir, None, args.encoder.precision.precision)?;
        let dims = dims.unwrap_or_else(|| vec![retriever.index.manifest.default_dim]);
        let mut cells = Vec::new();
        for &depth in &layers {
            for &dim in &dims {
                let (depth, dim) = retriever.index.manifest.resolve(
                    Some(depth),
                    Some(dim),
                    crate::index::manifest::Asker::Cli,
                )?;
                cells.push(Cell::retrieval(depth, dim));
            }
        }
        (Some(retriever), cells)
    };
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
        index: retriever.as_ref().map(|r| r.index.dir.clone()),
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| run_name(&config, args.generator.llm.as_path()));
    let dir = args.runs_dir.join(&name);
    let pipeline = generator
        .as_ref()
        .zip(spec.as_ref())
        .map(|(generator, spec)| Pipeline {
            retriever: retriever.as_ref(),
            generator,
            spec,
        });
    let summary = crate::eval::run::run(&RunOptions {
        dir: dir.clone(),
        config,
        questions: &questions,
        retriever: retriever.as_ref(),
        pipeline: pipeline.as_ref(),
        fresh: args.fresh,
        progress: ProgressMode::for_stderr(),
    })?;
    if args.json {
        return print_json(&summary);
    }
    print!("{}", crate::eval::report::markdown(&summary));
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

/// A run's default name, from what sets it apart: e.g. `dense-L6-d384-k5-chat-qwen2.5-coder-1.5b-instruct-q4_k_m-n300`.
fn run_name(config: &RunConfig, llm: &Path) -> String {
    let layers: Vec<usize> = config.cells.iter().filter_map(|c| c.layers).collect();
    let dims: Vec<usize> = config.cells.iter().filter_map(|c| c.dim).collect();
    let dedup = |mut v: Vec<usize>| {
        v.sort();
        v.dedup();
        join(&v)
    };
    let weight = match (config.mode, config.tuning) {
        (Mode::Fusion, Some(t)) => t.fusion_weight.to_string(),
        _ => String::new(),
    };
    let hops = match config.tuning {
        Some(t) if config.hops > 1 => {
            format!("-{}hop-b{}w{}", config.hops, t.hop_beam, t.hop_weight)
        }
        _ => String::new(),
    };
    let retrieval = format!(
        "{}{weight}{hops}-L{}-d{}",
        config.mode,
        dedup(layers),
        dedup(dims)
    );
    let llm = llm
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let context = match config.context_tokens {
        0 => String::new(),
        tokens => format!("-c{tokens}"),
    };
    let what = match (&config.prompt_style, config.oracle) {
        (Some(style), true) => format!("oracle-{style}-{llm}"),
        (Some(style), false) => format!("{retrieval}-k{}{context}-{style}-{llm}", config.top_k),
        (None, _) => format!("{retrieval}-retrieval"),
    };
    format!("{what}-n{}", config.questions)
}

fn run_eval_sts(args: EvalStsArgs) -> Result<()> {
    let layers = args.layers.map(|l| l.0);
    let encoder = Encoder::load(
        &args.encoder.model,
        &EncoderOptions {
            // Layers deeper than the deepest asked for are never loaded.
            max_layers: layers.as_ref().and_then(|l| l.last().copied()),
            ..args.encoder.options()
        },
    )?;
    let pca = args.reduce == Some(Reduction::Pca);
    let report = sts::evaluate(
        &encoder,
        &StsOptions {
            data_dir: args.data.data_dir.clone(),
            datasets: args.datasets,
            layers,
            dims: args.dims.map(|d| d.0),
            pca,
            progress: ProgressMode::for_stderr(),
        },
    )?;
    let out = args.out.unwrap_or_else(|| {
        let suffix = if pca { "-pca" } else { "" };
        Path::new("eval/sts").join(format!("{}{suffix}", report.model))
    });
    report.write(&out)?;
    let line = format!("{} -> {}/", report.summary_line(), out.display());
    if args.json {
        eprintln!("{line}");
        return print_json(&report);
    }
    print!("{}", report.markdown());
    println!("{line}");
    Ok(())
}

fn run_bench_encode(args: BenchEncodeArgs) -> Result<()> {
    let options = bench::EncodeBenchOptions {
        corpus: args
            .corpus
            .unwrap_or_else(|| args.data.distractor_questions()),
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
        precision: args.precision.precision,
        questions: args
            .questions
            .clone()
            .unwrap_or_else(|| args.data.distractor_questions()),
        limit: args.limit,
        modes: args.modes.clone(),
        hops: args.hops,
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
            "{:>6}: p50 {:>6.2} ms  p90 {:>6.2} ms  p99 {:>6.2} ms  mean {:>6.2} ms (encode {:.2}, search {:.2})  ({} queries, {} docs, layers {}, dim {})",
            l.mode.to_string(),
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.mean_ms,
            l.mean_encode_ms,
            l.mean_search_ms,
            l.queries,
            result.documents,
            result.layers,
            result.dim
        );
    }
    Ok(())
}

/// The runs folder named with `--runs` (which must exist), else `eval/runs` if there is one.
fn serve_runs_dir(named: Option<PathBuf>) -> Result<Option<PathBuf>> {
    match named {
        Some(dir) if dir.is_dir() => Ok(Some(dir)),
        Some(dir) => anyhow::bail!("--runs {}: no such folder", dir.display()),
        None => Ok(Some(PathBuf::from("eval/runs")).filter(|d| d.is_dir())),
    }
}

fn run_serve(args: ServeArgs) -> Result<()> {
    if !(args.batch_window_ms.is_finite() && args.batch_window_ms >= 0.0) {
        anyhow::bail!("--batch-window-ms must be a number of milliseconds, 0 or more");
    }
    let config = serve::ServeConfig {
        batch: serve::BatchOptions {
            window: std::time::Duration::from_secs_f64(args.batch_window_ms / 1000.0),
            max_tokens: args.batch_tokens.max(1),
            queue: args.queue,
        },
        ask: args.context.settings(
            args.strategy.strategy(crate::ask::DEFAULT_STRATEGY)?,
            None,
            None,
        ),
        runs: serve_runs_dir(args.runs.clone())?,
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
            eprintln!(
                "warning: listening on {}, reachable from other machines",
                args.addr
            );
        }
        eprintln!(
            "listening on http://{} (loading models)",
            listener.local_addr()?
        );
        let precision = args.precision();
        let (index_dir, model, llm, generation, strategy) = (
            args.index,
            args.model,
            args.llm,
            args.generation,
            args.strategy,
        );
        let load = move || {
            let retriever = Arc::new(serve::LiveIndex::new(strategy.open(
                &index_dir,
                model.as_deref(),
                precision,
            )?)?);
            let answerer = match llm {
                Some(path) => Some(Arc::new(serve::RagAnswerer {
                    retriever: Arc::clone(&retriever),
                    generator: generation.load(&path)?,
                    spec: generation.prompt()?,
                }) as Arc<dyn serve::Answerer>),
                None => None,
            };
            Ok(serve::Models {
                retriever,
                answerer,
            })
        };
        serve::serve(listener, config, load, serve::shutdown_signal()).await
    })
}

/// STS-B Spearman per layer x size of a freshly trained model, appended to its model card.
fn card_evaluation(model_dir: &Path, data_dir: &Path) -> Result<()> {
    let encoder = Encoder::load(model_dir, &EncoderOptions::default())?;
    let report = sts::evaluate(
        &encoder,
        &StsOptions {
            data_dir: data_dir.to_path_buf(),
            datasets: vec![StsDataset::Stsb],
            layers: None,
            dims: None,
            pca: false,
            progress: ProgressMode::for_stderr(),
        },
    )
    .context("evaluating the trained model on STS-B (--no-eval skips it)")?;
    report.write(&model_dir.join("eval-sts"))?;
    // The report's own title becomes a section of the card.
    train::append_to_model_card(model_dir, &format!("#{}", report.markdown()))
}

fn run_train(args: TrainArgs) -> Result<()> {
    let options = TrainOptions {
        sources: data::resolve_sources(
            &args.data,
            &args.pairs_from_corpus,
            &args.data_dir.data_dir,
        )?,
        model_dir: args.model,
        out_dir: args.out,
        max_examples: args.max_examples,
        max_corpus_pairs: args.max_corpus_pairs,
        objective: Objective {
            mode: args.mode,
            angle: AngleLoss {
                ibn_weight: args.ibn_weight,
                cln_weight: args.cln_weight,
                angle_weight: args.angle_weight,
                cosine_weight: args.cosine_weight,
                ibn_tau: args.ibn_tau,
                angle_tau: args.angle_tau,
                cosine_tau: args.cosine_tau,
            },
            compression_size: args.compression_size,
            kl_temperature: args.kl_temperature,
            shallow_weight: args.shallow_weight,
            distill_weight: args.distill_weight,
            embedding_distill_weight: args.embedding_distill_weight,
        },
        pooling: args.pooling,
        pooler_dim: args.pooler_dim,
        two_step: args.two_step,
        batch_size: args.batch_size,
        grad_accum: args.grad_accum,
        epochs: args.epochs,
        max_steps: args.max_steps,
        lr: args.lr,
        warmup_ratio: args.warmup,
        weight_decay: args.weight_decay,
        max_grad_norm: args.max_grad_norm,
        max_len: args.max_len,
        seed: args.seed,
        checkpoint_every: args.checkpoint_every,
        pause_after: args.pause_after,
        resume: args.resume,
        fresh: args.fresh,
        progress: ProgressMode::for_stderr(),
    };
    let summary = train::train(&options)?;
    if summary.finished && !args.no_eval {
        card_evaluation(&summary.out_dir, &args.data_dir.data_dir)?;
    }
    if args.json {
        return print_json(&summary);
    }
    if !summary.finished {
        println!(
            "paused after step {} of {} ({:.1} examples/s); continue with the same command and --resume",
            summary.resumed_from.unwrap_or(0) + summary.steps_run,
            summary.steps,
            summary.examples_per_second
        );
        return Ok(());
    }
    println!(
        "trained {} ({}) in {} steps, {:.0} s ({:.1} examples/s, {:.2} s/step), final loss {:.4}",
        summary.out_dir.display(),
        summary.mode,
        summary.steps,
        summary.seconds,
        summary.examples_per_second,
        summary.seconds_per_step,
        summary.final_loss
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let argv = ["rag", "serve"].iter().chain(flags);
        match Cli::try_parse_from(argv).expect("valid flags").command {
            Command::Serve(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn serve_defaults_to_the_fastest_precision_and_honours_an_explicit_one() {
        let expected = if Precision::Int8.available() {
            Precision::Int8
        } else {
            Precision::F32
        };
        assert_eq!(serve_args(&[]).precision(), expected);
        assert_eq!(
            serve_args(&["--precision", "f32"]).precision(),
            Precision::F32
        );
        assert_eq!(
            serve_args(&["--precision", "int8"]).precision(),
            Precision::Int8
        );
    }
}
