//! The `rag` command line: one module per command (its flags and its `run`, a few library
//! calls and the printing), the flag groups several commands share in [`flags`].

mod ask;
mod bench;
mod eval;
mod eval_sts;
mod flags;
mod index;
mod present;
mod search;
mod serve;
mod train;

use anyhow::Result;
use clap::{Parser, Subcommand};
use rag::index::CellRefusal;
use serde::Serialize;

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
    Index(index::IndexArgs),
    /// Search the index: ranked paragraphs with scores.
    Search(search::SearchArgs),
    /// Answer a question from the retrieved paragraphs with a local GGUF model.
    Ask(ask::AskArgs),
    /// HotpotQA exact match and retrieval recall over depth x dimension.
    Eval(eval::EvalArgs),
    /// Spearman correlation on STS12-16, STS-B and SICK-R per layer x size (the ESE paper's
    /// Table 1 and Figure 3).
    EvalSts(eval_sts::EvalStsArgs),
    /// Measure encoding throughput or query latency.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Serve search, question answering and embeddings over HTTP, models loaded once.
    Serve(serve::ServeArgs),
    /// Train an encoder: ESE, or the RAW / MRL / 2DMSE / pooler baselines.
    Train(train::TrainArgs),
}

pub fn run(cli: Cli) -> Result<()> {
    // A misspelt cap would otherwise be ignored, and a run timed as AVX2 would not be.
    rag::encoder::cpu::max_isa()?;
    match cli.command {
        Command::Index(args) => index::run(args),
        Command::Search(args) => search::run(args),
        Command::Ask(args) => ask::run(args),
        Command::Eval(args) => eval::run(args),
        Command::EvalSts(args) => eval_sts::run(args),
        Command::Bench(command) => bench::run(command),
        Command::Serve(args) => serve::run(args),
        Command::Train(args) => train::run(args),
    }
}

/// What `--json` prints.
fn print_json(value: &impl Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// clap's own check of every command's flags: names given twice across flattened groups,
    /// defaults that do not parse, conflicts naming flags that do not exist.
    #[test]
    fn every_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn shared_flag_groups_parse_in_every_command_that_has_them() {
        for argv in [
            &["rag", "search", "q", "--layers", "3", "--dim", "64"][..],
            &["rag", "ask", "q", "--layers", "3", "--dim", "64"],
            &["rag", "bench", "query", "--layers", "3", "--dim", "64"],
        ] {
            let cli = Cli::try_parse_from(argv).expect("valid flags");
            let cell = match cli.command {
                Command::Search(a) => a.cell,
                Command::Ask(a) => a.cell,
                Command::Bench(bench::BenchCommand::Query(a)) => a.cell,
                other => panic!("parsed as {other:?}"),
            };
            assert_eq!((cell.layers, cell.dim), (Some(3), Some(64)), "{argv:?}");
        }
    }
}

/// An error as one line, its causes outermost first (anyhow's `{:#}`), with a refused depth or
/// size named by its flag and followed by the rebuild that would give it.
pub fn describe(err: &anyhow::Error) -> String {
    err.chain()
        .map(|cause| match cause.downcast_ref::<CellRefusal>() {
            Some(refusal) => refused(refusal),
            None => cause.to_string(),
        })
        .collect::<Vec<_>>()
        .join(": ")
}

fn refused(refusal: &CellRefusal) -> String {
    let words = refusal.describe(|field| format!("--{field}"));
    match refusal.rebuild_flags() {
        Some(flags) => format!("{words}; rebuild with `rag index {flags}`"),
        None => words,
    }
}
