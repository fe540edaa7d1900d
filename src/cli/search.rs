//! `rag search`: the ranked paragraphs for a question.

use anyhow::Result;
use clap::Args;

use rag::retrieve::{Mode, SearchRequest, SearchResponse, Strategy};
use rag::terminal::escape;

use super::flags::{CellArgs, OpenIndexArgs, StrategyArgs};
use super::print_json;

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// The question.
    pub query: String,
    #[command(flatten)]
    pub index: OpenIndexArgs,
    /// How many paragraphs.
    #[arg(long, short, default_value_t = 5)]
    pub k: usize,
    /// Default: dense, one hop.
    #[command(flatten)]
    pub strategy: StrategyArgs,
    #[command(flatten)]
    pub cell: CellArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SearchArgs) -> Result<()> {
    let strategy = args.strategy.strategy(Strategy::default())?;
    if strategy.mode == Mode::Bm25 && (args.cell.layers.is_some() || args.cell.dim.is_some()) {
        eprintln!("note: BM25 uses no vectors, so --layers and --dim are ignored");
    }
    let retriever = args.strategy.open(&args.index)?;
    let response = retriever.search(&SearchRequest {
        query: &args.query,
        k: args.k,
        strategy,
        layers: args.cell.layers,
        dim: args.cell.dim,
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
        let title = escape(&hit.title);
        println!("{:>2}. {:.4}  {title}{hop}", hit.rank, hit.score);
        if let Some(source) = &hit.source {
            println!("    from {}", escape(&source.to_string()));
        }
        println!("    {}", escape(&snippet(&hit.text, 200)));
    }
    println!(
        "{} results ({} mode, {} hop(s), layers {}, dim {}) in {:.1} ms (encode {:.1} ms, search {:.1} ms)",
        response.hits.len(),
        response.mode,
        response.hops,
        response.cell.layers,
        response.cell.dim,
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
