//! Only the head of a long text is tokenised: the encoder reads `max_length` tokens, and
//! tokenising a 50 MB paragraph whole (ids, offsets and words of millions of tokens, kept
//! for the overflow) peaked at 6.7 GB to keep 256 of them.
//!
//! A text is cut before a whitespace character within a byte budget. BERT's normaliser works
//! character by character and its pre-tokeniser splits at whitespace, so the tokens of such a
//! head are exactly the first tokens of the whole text; when the head yields the full
//! `max_length`, those are the tokens the whole text would have given. When it yields fewer,
//! the budget doubles until it does or the head is the whole text.

use anyhow::{anyhow, Result};
use tokenizers::Tokenizer;

/// Bytes of text tokenised first per token kept: English WordPiece tokens average about four
/// characters, so a cut this far in is almost never too short (and then only costs a retry).
const BYTES_PER_TOKEN: usize = 16;

/// Token ids of each text (with special tokens, truncated to `max_length` by `tokenizer`), as
/// tokenising the whole texts would give them, tokenised in parallel.
pub fn tokenize_heads(
    tokenizer: &Tokenizer,
    texts: &[&str],
    max_length: usize,
) -> Result<Vec<Vec<u32>>> {
    let mut budget = max_length.max(1) * BYTES_PER_TOKEN;
    let mut heads: Vec<&str> = texts.iter().map(|t| head(t, budget)).collect();
    let mut ids = encode(tokenizer, &heads)?;
    loop {
        // A head that is not the whole text and gave fewer than `max_length` tokens may have
        // left tokens out.
        let short: Vec<usize> = (0..texts.len())
            .filter(|&i| heads[i].len() < texts[i].len() && ids[i].len() < max_length)
            .collect();
        if short.is_empty() {
            return Ok(ids);
        }
        budget *= 2;
        let longer: Vec<&str> = short.iter().map(|&i| head(texts[i], budget)).collect();
        for (&i, (text, tokens)) in short
            .iter()
            .zip(longer.iter().zip(encode(tokenizer, &longer)?))
        {
            heads[i] = text;
            ids[i] = tokens;
        }
    }
}

fn encode(tokenizer: &Tokenizer, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
    Ok(tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|e| anyhow!("tokenising: {e}"))?
        .into_iter()
        .map(|e| e.get_ids().to_vec())
        .collect())
}

/// The longest prefix of `text` within `budget` bytes that ends just before a whitespace
/// character (so that its last word is whole, whichever side of it a tokeniser puts spaces) (`text` itself when it fits; empty when no whitespace comes soon enough, which
/// the caller's doubling takes care of).
fn head(text: &str, budget: usize) -> &str {
    if text.len() <= budget {
        return text;
    }
    let mut end = budget;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind(char::is_whitespace) {
        Some(at) => &text[..at],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_end_after_whitespace_within_the_budget() {
        assert_eq!(head("short", 10), "short");
        assert_eq!(head("one two three", 9), "one two");
        assert_eq!(head("one\u{3000}two three", 8), "one");
        assert_eq!(head("onetwothree four", 5), "");
        assert_eq!(head("é é é", 4), "é");
    }
}
