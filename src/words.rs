//! Where text is cut into words, for the crate's word normalisers that can share it. There are
//! four, and they differ on purpose:
//!
//! - [`alphanumeric`] here, under `ask::context::content_words` (question words that carry
//!   meaning: three letters or more, stop words dropped, stemmed: a relevance signal) and
//!   `generate::options`' words (every word, articles dropped, no stems: an answer must name an
//!   option, not merely be related to it). Both split at every character that is not a letter or
//!   digit, so "Jean-Paul" is "jean paul" to both.
//! - `eval::hotpot::scores::normalize_answer` is the official HotpotQA / SQuAD script's, to the
//!   letter (ASCII punctuation dropped, so "Jean-Paul" is one word "jeanpaul"), so that exact
//!   match and F1 compare with published numbers: it must not follow the others.
//! - `ask::sentences` reads the word before a full stop raw: lower-casing and splitting at
//!   punctuation would lose the capital and the inner dots that tell an initial or "U.S." from a
//!   sentence's last word.

/// The runs of letters and digits in `text`, as written (not lower-cased): every other
/// character separates words.
pub fn alphanumeric(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn splits_at_everything_but_letters_and_digits() {
        let words: Vec<&str> = super::alphanumeric("Jean-Paul's 2nd  café, (1966)!").collect();
        assert_eq!(words, ["Jean", "Paul", "s", "2nd", "café", "1966"]);
    }
}
