//! How `rag ask` shows an answer to a person: the sources (with the hop that found each and
//! what of it the generator read) and where the time went. The command line's own, so that the
//! library never prints.

use rag::ask::AskResult;
use rag::terminal::escape;

/// Prints the sources and timings below the answer.
pub fn print_details(ask: &AskResult, model_load_ms: f64) {
    let used = ask.sources.iter().filter(|s| s.in_prompt).count();
    let reading = if ask.context_tokens > 0 {
        format!("their best sentences within {} tokens", ask.context_tokens)
    } else {
        "whole".to_string()
    };
    println!(
        "\nsources ({} mode, {} hop(s), layers {}, dim {}; {used} in the prompt, {reading}):",
        ask.mode, ask.hops, ask.layers, ask.dim
    );
    for s in &ask.sources {
        let hop = if s.hit.hop == 2 { ", second hop" } else { "" };
        let read = if s.in_prompt {
            ""
        } else {
            "  (not in the prompt)"
        };
        let title = escape(&s.hit.title);
        println!("{:>3}. {:.4}  {title}{hop}{read}", s.hit.rank, s.hit.score);
        if let Some(source) = &s.hit.source {
            println!("       from {}", escape(&source.to_string()));
        }
        if ask.context_tokens > 0 {
            for sentence in s.sentences.iter().filter(|x| x.in_prompt) {
                println!("       > {}", escape(&sentence.text));
            }
        }
    }
    if let Some(w) = &ask.widened {
        println!(
            "\nread again within {} tokens: the first answer, {:?} (a prompt of {} tokens within {}), is in none of its documents",
            ask.context_tokens,
            escape(&w.first),
            w.first_prompt_tokens,
            w.first_context_tokens
        );
    }
    let g = &ask.generation;
    let t = &ask.timings;
    println!(
        "\ntimings: encode {:.1} ms, search {:.1} ms, select {:.1} ms, prompt {:.1} ms; prompt eval {} tokens ({} reused) in {:.0} ms; generation {} tokens in {:.0} ms ({:.1} tokens/s; llama.cpp: {} in {:.0} ms, {:.1} tokens/s)",
        t.encode_ms,
        t.search_ms,
        t.select_ms,
        t.prompt_ms,
        g.prompt_tokens,
        g.reused_tokens,
        g.prompt_eval_ms,
        g.generated_tokens,
        g.generation_ms,
        g.tokens_per_second,
        g.llama_eval_tokens,
        g.llama_eval_ms,
        g.llama_tokens_per_second,
    );
    let overhead = t.total_ms - t.llama_ms;
    println!(
        "answered in {:.0} ms: llama.cpp {:.0} ms (prompt eval {:.0} + generation {:.0}), everything else {:.1} ms ({:.1}%); model load {:.0} ms before that",
        t.total_ms,
        t.llama_ms,
        g.llama_prompt_eval_ms,
        g.llama_eval_ms,
        overhead,
        100.0 * overhead / t.total_ms.max(f64::MIN_POSITIVE),
        model_load_ms
    );
}
