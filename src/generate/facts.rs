//! Facts before a yes or a no. A small model's first-token yes/no margin barely moves with the
//! evidence (the 1.5B default gives "Were Scott Derrickson and Ed Wood of the same
//! nationality?" a yes margin of 0.36 with both men's "American" sentences in the prompt), so
//! an answer that opens with yes or no is decided after the model has written down what the
//! documents say about the question's subjects: the answer turn continues with [`OPENING`], a
//! few greedy lines of facts, then [`CLOSING`], and the yes/no margin is read after that. Only
//! the yes or the no is the answer; the facts are returned beside it.

use anyhow::Result;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

use super::cache::Cached;

/// What the answer turn is continued with before the facts.
pub const OPENING: &str = "Facts from the documents:\n-";
/// What follows the facts before a yes or a no; the next token's yes/no margin decides the
/// answer.
pub const CLOSING: &str = "\nSo the answer (yes or no) is:";
/// At most this many tokens of facts (two subjects' sentences fit in about 40).
pub const MAX_TOKENS: usize = 64;

/// The tokens the facts step may add after the prompt, for the context's room.
pub(super) fn room() -> usize {
    // The opening and closing are a few tokens each; 32 covers any tokenizer.
    MAX_TOKENS + 32
}

/// Appends `text` after what the cache holds: a batch whose last row holds the logits after it.
fn feed(model: &LlamaModel, cached: &mut Cached, text: &str) -> Result<LlamaBatch<'static>> {
    let tokens = model.vocab().tokenize(text.as_bytes(), false, false);
    cached.append(&tokens, "writing the facts")
}

/// Writes the facts after the evaluated prompt (the first answer token not yet taken), then
/// `closing` ([`CLOSING`] before a yes or a no): the facts' text and a batch whose last row
/// holds the logits of the answer's first token.
pub(super) fn write(
    model: &LlamaModel,
    cached: &mut Cached,
    closing: &str,
) -> Result<(String, LlamaBatch<'static>)> {
    let vocab = model.vocab();
    let mut batch = feed(model, cached, OPENING)?;
    let mut sampler = LlamaSampler::greedy();
    let mut text = Vec::new();
    let mut written = 0;
    while written < MAX_TOKENS {
        let token = sampler.sample(&cached.ctx, batch.n_tokens() - 1);
        if vocab.is_eog(token) {
            break;
        }
        text.extend_from_slice(&vocab.token_to_piece(token, false, None));
        written += 1;
        batch = cached.append(&[token], "writing the facts")?;
        // A blank line or the model's own verdict ends the facts.
        let so_far = String::from_utf8_lossy(&text);
        if so_far.contains("\n\n") || so_far.to_lowercase().contains("answer") {
            break;
        }
    }
    let facts = String::from_utf8_lossy(&text).trim().to_string();
    let batch = feed(model, cached, closing)?;
    Ok((format!("-{facts}"), batch))
}
