//! Title links for the second hop. A HotpotQA bridge question's two paragraphs are usually
//! joined by a Wikipedia link: one paragraph names the other's title (716 of the 1,186
//! distractor questions). Dense and BM25 second-hop searches find that paragraph only when the
//! seed's text happens to outweigh the question in the query, so the titles a first-hop
//! paragraph mentions are looked up directly, as hyperlinks would be.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use anyhow::{Context, Result};

use crate::corpus::without_disambiguation;
use crate::index::Index;

/// Titles shorter than this (in characters, disambiguation removed) are never linked: "UK",
/// "Io" or "AC" match inside too many unrelated paragraphs to say anything.
const MIN_TITLE_CHARS: usize = 4;

/// Every document's title as one automaton, mapping a paragraph's text to the documents it
/// names.
pub struct Links {
    automaton: AhoCorasick,
    /// The document of each pattern, in pattern order.
    documents: Vec<u64>,
}

impl Links {
    /// The links of `(id, title)` pairs. A title's trailing disambiguation ("Kiss (band)") is
    /// dropped, since text names "Kiss", never "Kiss (band)"; titles left too short are skipped.
    pub fn new(titles: impl IntoIterator<Item = (u64, String)>) -> Result<Self> {
        let mut patterns = Vec::new();
        let mut documents = Vec::new();
        for (id, title) in titles {
            let name = without_disambiguation(&title);
            if name.chars().count() >= MIN_TITLE_CHARS {
                patterns.push(name.to_string());
                documents.push(id);
            }
        }
        // Standard semantics, so that every title at a position is seen (overlapping search),
        // not only the automaton's first pick; `mentioned` chooses among them. ASCII case
        // folding only: sentence-initial capitals and all-caps names, no Unicode tables.
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .context("building the title automaton")?;
        Ok(Self {
            automaton,
            documents,
        })
    }

    /// The links of every document in `index`.
    pub fn of_index(index: &Index) -> Result<Self> {
        Self::new(index.titles()?)
    }

    /// The documents whose titles `text` mentions as whole words, first mention first, each
    /// once, `seed` (the paragraph `text` belongs to) left out. A title inside a longer title
    /// mentioned at the same place ("Paris" in "Paris Hilton") does not count: the link is the
    /// longer one's.
    pub fn mentioned(&self, text: &str, seed: u64) -> Vec<u64> {
        let mut spans: Vec<(usize, usize, u64)> = self
            .automaton
            .find_overlapping_iter(text)
            .filter(|m| whole_word(text, m.start(), m.end()))
            .map(|m| (m.start(), m.end(), self.documents[m.pattern().as_usize()]))
            .collect();
        // By start, the longest first, so a span inside an earlier one ends no later than it;
        // one name of several documents in id order.
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut out = Vec::new();
        let mut reach = 0;
        let mut last = None;
        for (start, end, id) in spans {
            let same_span = last == Some((start, end));
            if end <= reach && !same_span {
                continue;
            }
            reach = reach.max(end);
            last = Some((start, end));
            if id != seed && !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }
}

/// Whether `text[start..end]` has no letter or digit right before or after it.
fn whole_word(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(titles: &[&str]) -> Links {
        Links::new(
            titles
                .iter()
                .enumerate()
                .map(|(i, t)| (i as u64, t.to_string())),
        )
        .unwrap()
    }

    #[test]
    fn titles_match_as_whole_words_in_any_ascii_case() {
        let l = links(&["Ed Wood", "Wood", "Tim Burton", "Burt"]);
        // "Burt" is inside "Burton" (no word), "Wood" inside the longer "Ed Wood".
        assert_eq!(
            l.mentioned("TIM BURTON directed a film on ed wood.", 9),
            vec![2, 0]
        );
        assert_eq!(l.mentioned("Woodstock and Edwood", 9), Vec::<u64>::new());
        assert_eq!(l.mentioned("Wood, then Wood again", 9), vec![1]);
    }

    #[test]
    fn overlapping_titles_keep_the_longest_and_partial_overlaps() {
        let l = links(&[
            "Paris",
            "Paris Hilton",
            "Hilton Hotels",
            "Kiss (band)",
            "Kiss",
        ]);
        // "Paris" is inside "Paris Hilton"; "Hilton Hotels" overlaps it only in part.
        assert_eq!(l.mentioned("Paris Hilton Hotels", 9), vec![1, 2]);
        assert_eq!(l.mentioned("Paris, the city", 9), vec![0]);
        // Two documents with one name are both mentioned.
        assert_eq!(l.mentioned("a song by Kiss.", 9), vec![3, 4]);
    }

    #[test]
    fn the_seed_itself_and_short_titles_are_skipped() {
        let l = links(&["Ed Wood", "Glen or Glenda", "UK", "Io (moon)"]);
        let text = "Ed Wood made Glen or Glenda in the UK; Io.";
        assert_eq!(l.mentioned(text, 0), vec![1]);
        assert_eq!(l.mentioned(text, 1), vec![0]);
    }
}
