//! The reused prompt: the context kept between prompts and the tokens its KV cache holds, so
//! that a prompt evaluates only what follows the longest opening it shares with the previous one
//! (the way llama.cpp's server reuses its cached prompt).

use anyhow::{anyhow, Result};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

/// What stays in the model's context between prompts: the context and the tokens its KV cache
/// holds, in order (sequence 0, positions 0..).
pub(super) struct Cached<'model> {
    pub(super) ctx: LlamaContext<'model>,
    pub(super) tokens: Vec<LlamaToken>,
}

impl Cached<'_> {
    /// Keeps the first `len` tokens in the KV cache and drops the rest, `tokens` in step. A
    /// model whose memory cannot drop a tail (a recurrent one) is emptied instead: false.
    pub(super) fn keep(&mut self, len: usize) -> bool {
        let dropped = self
            .ctx
            .clear_kv_cache_seq(Some(0), Some(len as u32), None)
            .unwrap_or(false);
        if dropped {
            self.tokens.truncate(len);
        } else {
            self.ctx.clear_kv_cache();
            self.tokens.clear();
        }
        dropped
    }

    /// Evaluates what of `tokens` the cache does not hold yet (at least the last token, whose
    /// logits give the first answer token): the batch, its last row holding those logits, and
    /// how many tokens were reused.
    pub(super) fn evaluate(
        &mut self,
        tokens: &[LlamaToken],
        reuse_prefix: bool,
    ) -> Result<(LlamaBatch<'static>, usize)> {
        let shared = if reuse_prefix {
            shared_prefix(&self.tokens, tokens)
        } else {
            0
        };
        let mut reused = shared.min(tokens.len() - 1);
        // Models whose memory cannot drop a tail start from an empty cache.
        if !self.keep(reused) {
            reused = 0;
        }
        let batch = self.append(&tokens[reused..], "evaluating the prompt")?;
        Ok((batch, reused))
    }

    /// Evaluates `tokens` after what the cache holds: a batch whose last row holds the logits
    /// after them; `doing` names the step in an error.
    pub(super) fn append(
        &mut self,
        tokens: &[LlamaToken],
        doing: &str,
    ) -> Result<LlamaBatch<'static>> {
        let start = self.tokens.len();
        let mut batch = LlamaBatch::new(tokens.len().max(1), 1);
        for (i, &token) in tokens.iter().enumerate() {
            batch.add(token, (start + i) as i32, &[0], i + 1 == tokens.len())?;
        }
        self.ctx
            .decode(&mut batch)
            .map_err(|e| anyhow!("{doing}: {e}"))?;
        self.tokens.extend_from_slice(tokens);
        Ok(batch)
    }
}

/// How many tokens two sequences share from the start.
fn shared_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
