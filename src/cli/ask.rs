//! `rag ask`: a question answered from the index by a GGUF model, with its sources.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use rag::ask::{AskResult, Pipeline};
use rag::progress::ms_since;

use super::flags::{CellArgs, ContextArgs, GeneratorArgs, OpenIndexArgs, StrategyArgs};
use super::print_json;

#[derive(Args, Debug)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    #[command(flatten)]
    pub index: OpenIndexArgs,
    /// Default: the best measured (see eval/answers/).
    #[command(flatten)]
    pub strategy: StrategyArgs,
    #[command(flatten)]
    pub context: ContextArgs,
    #[command(flatten)]
    pub cell: CellArgs,
    #[command(flatten)]
    pub generator: GeneratorArgs,
    /// Print the answer's tokens as they come.
    #[arg(long)]
    pub stream: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: AskArgs) -> Result<()> {
    rag::retrieve::validate_question(&args.question)?;
    let spec = args.generator.prompt()?;
    let settings = args.context.settings(
        args.strategy.strategy(rag::ask::DEFAULT_STRATEGY)?,
        args.cell.layers,
        args.cell.dim,
    );
    let retriever = args.strategy.open(&args.index)?;
    let loading = Instant::now();
    let generator = args.generator.load()?;
    let model_load_ms = ms_since(loading);
    let pipeline = Pipeline::new(&retriever, &generator, &spec);
    let stream = args.stream && !args.json;
    let mut streamed = String::new();
    let answer = pipeline.ask(&args.question, &settings, |piece| {
        if stream {
            print!("{}", rag::terminal::escape(piece));
            let _ = std::io::stdout().flush();
            streamed.push_str(piece);
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
        // The answer may be read back after generation (a document's label as its title, a
        // year as the documents' full date): then the final one follows what was streamed.
        if answer.answer != streamed.trim() {
            println!("= {}", rag::terminal::escape(&answer.answer));
        }
    } else {
        println!("{}", rag::terminal::escape(&answer.answer));
    }
    super::present::print_details(&answer, model_load_ms);
    Ok(())
}
