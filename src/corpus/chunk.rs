//! Cutting a section's blocks into passages the encoder reads whole: at most `--max-length`
//! tokens of the rendered template (title and text, special tokens included), counted with the
//! model's own tokenizer. Blocks (paragraphs) are kept together when they fit; a block too long
//! is cut between sentences ([`crate::ask::sentences`]); only a sentence longer than the limit
//! alone is cut inside, between words (or, for a "word" longer than the limit, between
//! characters).

use std::collections::VecDeque;
use std::ops::Range;

use anyhow::{anyhow, Result};
use tokenizers::Tokenizer;

use super::document::Block;

/// Counts tokens with the encoder's tokenizer (untruncated) against the encoder's limit.
#[derive(Clone)]
pub struct Chunker {
    tokenizer: Tokenizer,
    max_length: usize,
    template: String,
}

/// A passage: its text and its byte range in the parsed document's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub source: Range<usize>,
}

/// The longest title suffix a passage may get (see [`super::document::passages`]), reserved
/// in every passage's budget.
const PART_RESERVE: &str = " (part 999 of 999)";

/// One sentence, or part of one, of a block.
#[derive(Debug, Clone)]
struct Unit {
    block: usize,
    range: Range<usize>,
    tokens: usize,
    /// The tokens of its whole block, on the block's first unit.
    block_tokens: Option<usize>,
}

impl Chunker {
    /// `tokenizer` is the encoder's; its truncation is turned off here so that counts are true.
    pub fn new(tokenizer: &Tokenizer, max_length: usize, template: &str) -> Result<Self> {
        let mut tokenizer = tokenizer.clone();
        tokenizer
            .with_truncation(None)
            .map_err(|e| anyhow!("tokenizer: {e}"))?;
        tokenizer.with_padding(None);
        Ok(Self {
            tokenizer,
            max_length,
            template: template.to_string(),
        })
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// Tokens of `text` as the encoder sees it (with special tokens when `special`).
    pub fn count(&self, text: &str, special: bool) -> usize {
        self.tokenizer
            .encode(text, special)
            .map_or(text.split_whitespace().count() * 2, |e| e.len())
    }

    /// Tokens of the passage `text` under `title`, rendered as it will be encoded.
    pub fn rendered_tokens(&self, title: &str, text: &str) -> usize {
        let rendered = self
            .template
            .replace("{title}", title)
            .replace("{text}", text);
        self.count(&rendered, true)
    }

    /// The passages of `blocks` under `title`, in order.
    pub fn chunk(&self, title: &str, blocks: &[Block]) -> Vec<Piece> {
        let reserved_title = format!("{title}{PART_RESERVE}");
        let overhead = self.rendered_tokens(&reserved_title, "");
        // A title so long it leaves little room still leaves a quarter of the limit for text.
        let budget = self
            .max_length
            .saturating_sub(overhead)
            .max(self.max_length / 4)
            .max(1);
        let mut queue: VecDeque<Unit> = VecDeque::new();
        for (b, block) in blocks.iter().enumerate() {
            let mut units = Vec::new();
            for sentence in crate::ask::sentences::split(&block.text) {
                self.fit(&block.text, b, sentence, budget, &mut units);
            }
            let total = units.iter().map(|u| u.tokens).sum();
            if let Some(first) = units.first_mut() {
                first.block_tokens = Some(total);
            }
            queue.extend(units);
        }

        let mut out = Vec::new();
        let mut current: Vec<Unit> = Vec::new();
        let mut used = 0;
        while let Some(unit) = queue.pop_front() {
            let starts_new = !current.is_empty()
                && match unit.block_tokens {
                    // A paragraph that fits a passage of its own is not split to fill this one.
                    Some(block) if block <= budget => used + block > budget,
                    _ => used + unit.tokens > budget,
                };
            if starts_new {
                self.flush(&reserved_title, blocks, &mut current, &mut queue, &mut out);
                used = 0;
            }
            used += unit.tokens;
            current.push(unit);
        }
        self.flush(&reserved_title, blocks, &mut current, &mut queue, &mut out);
        // Units given back by a flush that overflowed are still queued.
        while !queue.is_empty() {
            let mut used = 0;
            while let Some(unit) = queue.front() {
                if !current.is_empty() && used + unit.tokens > budget {
                    break;
                }
                used += unit.tokens;
                current.push(queue.pop_front().expect("front"));
            }
            self.flush(&reserved_title, blocks, &mut current, &mut queue, &mut out);
        }
        out
    }

    /// Ends the passage of `current`. Counts were summed per sentence; the passage is counted
    /// again as a whole, and sentences that push it over (a tokenizer that does not split at
    /// white space) go back to the queue for the next one.
    fn flush(
        &self,
        title: &str,
        blocks: &[Block],
        current: &mut Vec<Unit>,
        queue: &mut VecDeque<Unit>,
        out: &mut Vec<Piece>,
    ) {
        while current.len() > 1
            && self.rendered_tokens(title, &join(blocks, current).text) > self.max_length
        {
            let mut last = current.pop().expect("more than one");
            // Back to the queue: it no longer starts its block here.
            last.block_tokens = None;
            queue.push_front(last);
        }
        if !current.is_empty() {
            out.push(join(blocks, current));
            current.clear();
        }
    }

    /// `range` of `text` (one sentence) as units of at most `budget` tokens: itself, or cut
    /// between words, or for a single overlong word between characters.
    fn fit(
        &self,
        text: &str,
        block: usize,
        range: Range<usize>,
        budget: usize,
        out: &mut Vec<Unit>,
    ) {
        let piece = &text[range.clone()];
        let tokens = self.count(piece, false);
        // Over the budget: cut at the white space nearest the middle, else at the middle
        // character; a piece of one character has nothing left to cut and stays whole.
        let cut = (tokens > budget)
            .then(|| {
                let middle = piece.len() / 2;
                piece
                    .char_indices()
                    .filter(|(_, c)| c.is_whitespace())
                    .map(|(i, _)| i)
                    .min_by_key(|&i| i.abs_diff(middle))
                    .unwrap_or_else(|| {
                        (middle..piece.len())
                            .find(|&i| piece.is_char_boundary(i))
                            .unwrap_or(piece.len())
                    })
            })
            .filter(|&cut| cut > 0 && cut < piece.len());
        let Some(cut) = cut else {
            out.push(Unit {
                block,
                range,
                tokens,
                block_tokens: None,
            });
            return;
        };
        let left = range.start..range.start + piece[..cut].trim_end().len();
        let right_start =
            range.start + cut + (piece[cut..].len() - piece[cut..].trim_start().len());
        if left.is_empty() || right_start >= range.end {
            out.push(Unit {
                block,
                range,
                tokens,
                block_tokens: None,
            });
            return;
        }
        self.fit(text, block, left, budget, out);
        self.fit(text, block, right_start..range.end, budget, out);
    }
}

/// The passage of `units`: the units of one block as that block's text from the first to the
/// last (the white space between sentences kept), blocks apart by a blank line.
fn join(blocks: &[Block], units: &[Unit]) -> Piece {
    let mut text = String::new();
    let mut source: Option<Range<usize>> = None;
    let mut i = 0;
    while i < units.len() {
        let block = units[i].block;
        let mut j = i;
        while j + 1 < units.len() && units[j + 1].block == block {
            j += 1;
        }
        let range = units[i].range.start..units[j].range.end;
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&blocks[block].text[range.clone()]);
        let start = blocks[block].source_at(range.start, false);
        let end = blocks[block].source_at(range.end, true);
        source = Some(source.map_or(start..end, |s| s.start..end.max(s.end)));
        i = j + 1;
    }
    Piece {
        text,
        source: source.unwrap_or(0..0),
    }
}
