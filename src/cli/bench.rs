//! `rag bench`: encoding throughput and query latency in one warm process.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use rag::bench;
use rag::corpus::DEFAULT_TEMPLATE;
use rag::index;
use rag::retrieve::Mode;

use super::flags::{CellArgs, DataArgs, EncoderArgs, NumberList, PrecisionArg};
use super::print_json;

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
    /// Also encode the paragraphs in f32 (untimed) and report each depth's mean and lowest
    /// cosine to those vectors: what `--precision` costs in fidelity.
    #[arg(long)]
    pub fidelity: bool,
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
    #[command(flatten)]
    pub cell: CellArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Encode(args) => encode(args),
        BenchCommand::Query(args) => query(args),
    }
}

fn encode(args: BenchEncodeArgs) -> Result<()> {
    let options = bench::EncodeBenchOptions {
        corpus: args
            .corpus
            .unwrap_or_else(|| args.data.distractor_questions()),
        model_dir: args.encoder.model_dir(),
        encoder: args.encoder.options(),
        limit: args.limit,
        layers: args.layers.0,
        template: args.template,
        fidelity: args.fidelity,
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
        if let Some(f) = d.cosine_to_f32 {
            println!(
                "          cosine to f32: mean {:.5}, lowest {:.5}",
                f.mean, f.min
            );
        }
    }
    println!(
        "kernels: {}, precision {}, {} threads",
        format!("{:?}", result.kernels).to_lowercase(),
        format!("{:?}", options.encoder.precision).to_lowercase(),
        result.threads
    );
    Ok(())
}

fn query(args: BenchQueryArgs) -> Result<()> {
    let options = bench::QueryBenchOptions {
        index_dir: args.index.clone(),
        precision: args.precision.get(),
        questions: args
            .questions
            .clone()
            .unwrap_or_else(|| args.data.distractor_questions()),
        limit: args.limit,
        modes: args.modes.clone(),
        hops: args.hops,
        k: args.k,
        layers: args.cell.layers,
        dim: args.cell.dim,
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
