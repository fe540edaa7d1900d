//! Title links for the second hop. A HotpotQA bridge question's two paragraphs are usually
//! joined by a Wikipedia link: one paragraph names the other's title (716 of the 1,186
//! distractor questions). Dense and BM25 second-hop searches find that paragraph only when the
//! seed's text happens to outweigh the question in the query, so the titles a first-hop
//! paragraph mentions are looked up directly, as hyperlinks would be.
//!
//! Every served title is a key of a finite-state transducer ([`fst`]), lower-cased in ASCII,
//! its value the documents of that name in `links.ids`. A build writes both files
//! ([`write`]), an update writes them again, and a search memory-maps them: made at open from
//! the titles, as before, the links cost a read of the whole document store and about 200 MB per
//! million titles, seconds at a million and half a minute at 5.2M, on every cold two-hop search.
//! An index from before them builds them in memory from its titles ([`Links::new`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use fst::raw::Output;

use super::docstore::DocStore;
use super::removed::Removed;
use crate::corpus::without_disambiguation;

/// Titles shorter than this (in characters, disambiguation removed) are never linked: "UK",
/// "Io" or "AC" match inside too many unrelated paragraphs to say anything.
const MIN_TITLE_CHARS: usize = 4;

/// The transducer: each name (lower-cased in ASCII) to its documents' place in [`IDS_FILE`].
pub const FST_FILE: &str = "links.fst";
/// The documents of each name, ascending within a name, names in key order (u64 little-endian).
pub const IDS_FILE: &str = "links.ids";

/// A name's documents as a transducer value: where they start in the ids, and how many.
const COUNT_BITS: u32 = 24;

/// The title links of an index: one table per part (a sharded index has one per shard).
#[derive(Clone)]
pub struct Links {
    tables: Vec<Arc<Table>>,
}

struct Table {
    names: fst::Map<Bytes>,
    ids: Bytes,
}

/// A table's bytes: built in memory or mapped from its file.
enum Bytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Self::Owned(bytes) => bytes,
            Self::Mapped(map) => map,
        }
    }
}

/// The transducer and ids of `(id, title)` pairs. A title's trailing disambiguation ("Kiss
/// (band)") is dropped, since text names "Kiss", never "Kiss (band)"; titles left too short are
/// skipped.
fn table_bytes(titles: impl IntoIterator<Item = (u64, String)>) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut names: Vec<(Vec<u8>, u64)> = titles
        .into_iter()
        .filter_map(|(id, title)| {
            let name = without_disambiguation(&title);
            // ASCII case folding only: sentence-initial capitals and all-caps names, no Unicode
            // tables.
            (name.chars().count() >= MIN_TITLE_CHARS)
                .then(|| (name.as_bytes().to_ascii_lowercase(), id))
        })
        .collect();
    names.sort_unstable();
    let mut builder = fst::MapBuilder::memory();
    let mut ids = Vec::with_capacity(names.len() * 8);
    for group in names.chunk_by(|a, b| a.0 == b.0) {
        let start = (ids.len() / 8) as u64;
        let count = group.len() as u64;
        if count >= 1 << COUNT_BITS || start >= 1 << (64 - COUNT_BITS) {
            bail!(
                "too many documents share the title {:?}",
                String::from_utf8_lossy(&group[0].0)
            );
        }
        builder.insert(&group[0].0, start << COUNT_BITS | count)?;
        group
            .iter()
            .for_each(|(_, id)| ids.extend_from_slice(&id.to_le_bytes()));
    }
    Ok((builder.into_inner()?, ids))
}

/// Writes the title links of the documents stored in `dir` (a build or update being staged)
/// into it: each one's global id (`ids`, a shard's, by local id; else its local id), the
/// `removed` ones left out.
pub(super) fn write_for_store(dir: &Path, ids: Option<&[u64]>, removed: &Removed) -> Result<()> {
    let store = DocStore::open(dir)?;
    let mut titles = Vec::with_capacity(store.len());
    for (local, paragraph) in store.iter().enumerate() {
        let local = local as u64;
        if removed.contains(local) {
            continue;
        }
        let id = ids.map_or(local, |ids| ids[local as usize]);
        titles.push((id, paragraph?.decoded().title));
    }
    write(dir, titles)
}

/// Writes the title links of `(id, title)` pairs into `dir`.
pub fn write(dir: &Path, titles: impl IntoIterator<Item = (u64, String)>) -> Result<()> {
    let (names, ids) = table_bytes(titles)?;
    for (name, bytes) in [(FST_FILE, names), (IDS_FILE, ids)] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

impl Table {
    fn new(names: Bytes, ids: Bytes, dir: &Path) -> Result<Self> {
        let damaged = |why: String| {
            anyhow::anyhow!(
                "{} is damaged ({why}); rebuild the index",
                dir.join(FST_FILE).display()
            )
        };
        let names = fst::Map::new(names).map_err(|e| damaged(e.to_string()))?;
        if ids.as_ref().len() % 8 != 0 {
            return Err(damaged(format!("{IDS_FILE} is not whole")));
        }
        Ok(Self { names, ids })
    }

    /// A name's documents. Opening reads no value (that would grow with the corpus): one
    /// pointing past the ids, which only bits flipped beneath the file system could make (any
    /// write is caught by the seal), gives none rather than a panic.
    fn ids(&self, value: u64) -> impl Iterator<Item = u64> + '_ {
        let start = (value >> COUNT_BITS) as usize;
        let count = (value & ((1 << COUNT_BITS) - 1)) as usize;
        self.ids
            .as_ref()
            .get(start * 8..(start + count) * 8)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// Every (start, end, document) where `text[start..end]` is a name, as a whole word.
    fn spans(&self, text: &str, lower: &[u8], out: &mut Vec<(usize, usize, u64)>) {
        let fst = self.names.as_fst();
        for start in (0..text.len()).filter(|&s| text.is_char_boundary(s)) {
            if text[..start]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
            {
                continue;
            }
            let mut node = fst.root();
            let mut output = Output::zero();
            for (end, &byte) in lower.iter().enumerate().skip(start) {
                let Some(i) = node.find_input(byte) else {
                    break;
                };
                let transition = node.transition(i);
                output = output.cat(transition.out);
                node = fst.node(transition.addr);
                let end = end + 1;
                if node.is_final()
                    && text.is_char_boundary(end)
                    && !text[end..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphanumeric)
                {
                    let value = output.cat(node.final_output()).value();
                    out.extend(self.ids(value).map(|id| (start, end, id)));
                }
            }
        }
    }
}

impl Links {
    /// The links of `(id, title)` pairs, built in memory.
    pub fn new(titles: impl IntoIterator<Item = (u64, String)>) -> Result<Self> {
        let (names, ids) = table_bytes(titles)?;
        let table = Table::new(Bytes::Owned(names), Bytes::Owned(ids), Path::new("memory"))?;
        Ok(Self {
            tables: vec![Arc::new(table)],
        })
    }

    /// The links stored in `dir`, memory-mapped; `None` for an index from before them.
    pub fn open(dir: &Path) -> Result<Option<Self>> {
        let names_path = dir.join(FST_FILE);
        if !names_path.exists() {
            return Ok(None);
        }
        let map = |name: &str| -> Result<Bytes> {
            let path = dir.join(name);
            let file = std::fs::File::open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            // SAFETY: a built index's files are never written again (an update writes a new
            // build beside it), so the mapped bytes do not change under the map.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .with_context(|| format!("mapping {}", path.display()))?;
            Ok(Bytes::Mapped(map))
        };
        let table = Table::new(map(FST_FILE)?, map(IDS_FILE)?, dir)?;
        Ok(Some(Self {
            tables: vec![Arc::new(table)],
        }))
    }

    /// One set of links over several parts' (a sharded index's shards, whose ids are global).
    pub fn join(parts: impl IntoIterator<Item = Links>) -> Self {
        Self {
            tables: parts.into_iter().flat_map(|l| l.tables).collect(),
        }
    }

    /// The documents whose titles `text` mentions as whole words, first mention first, each
    /// once, `seed` (the paragraph `text` belongs to) left out. A title inside a longer title
    /// mentioned at the same place ("Paris" in "Paris Hilton") does not count: the link is the
    /// longer one's.
    pub fn mentioned(&self, text: &str, seed: u64) -> Vec<u64> {
        let lower = text.as_bytes().to_ascii_lowercase();
        let mut spans = Vec::new();
        for table in &self.tables {
            table.spans(text, &lower, &mut spans);
        }
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

    /// Every (start, end, id) by brute force: each name compared at every place, ASCII case
    /// folded, whole words only.
    fn spans_by_brute_force(titles: &[(u64, String)], text: &str) -> Vec<(usize, usize, u64)> {
        let lower = text.to_ascii_lowercase();
        let mut spans = Vec::new();
        for (id, title) in titles {
            let name = without_disambiguation(title).to_ascii_lowercase();
            if name.chars().count() < MIN_TITLE_CHARS {
                continue;
            }
            // Every place, overlapping ones too ("édith édith" twice in "édith édith édith").
            let places = (0..text.len())
                .filter(|&s| lower.is_char_boundary(s) && lower[s..].starts_with(&name));
            for start in places {
                let end = start + name.len();
                let before = text[..start].chars().next_back();
                let after = text[end..].chars().next();
                if !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
                {
                    spans.push((start, end, *id));
                }
            }
        }
        spans.sort_unstable();
        spans
    }

    /// The transducer finds exactly the whole-word mentions a comparison at every place finds,
    /// for names that share prefixes, repeat, differ in case, hold punctuation and non-ASCII
    /// letters; stored and memory-mapped, it answers as built in memory.
    #[test]
    fn stored_links_find_every_mention_a_brute_force_search_finds() {
        let words = [
            "ed", "wood", "Ed", "Wood", "édith", "piaf", "paris", "hilton", "(band)", "kiss",
            "st.", "louis", "x", "-", "'s", "ÉDITH", "woods",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let phrase = |rng: &mut fastrand::Rng, most: usize| {
            let n = rng.usize(1..most);
            (0..n)
                .map(|_| words[rng.usize(..words.len())])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let titles: Vec<(u64, String)> = (0..300u64).map(|id| (id, phrase(&mut rng, 4))).collect();
        let memory = Links::new(titles.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), titles.clone()).unwrap();
        let stored = Links::open(dir.path()).unwrap().unwrap();
        for _ in 0..300 {
            let text = phrase(&mut rng, 30).replace(" - ", "-");
            let lower = text.as_bytes().to_ascii_lowercase();
            let mut found = Vec::new();
            stored.tables[0].spans(&text, &lower, &mut found);
            found.sort_unstable();
            assert_eq!(found, spans_by_brute_force(&titles, &text), "{text}");
            assert_eq!(
                stored.mentioned(&text, 3),
                memory.mentioned(&text, 3),
                "{text}"
            );
        }
    }

    #[test]
    fn damaged_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            [(0, "Ed Wood".to_string()), (1, "Tim Burton".to_string())],
        )
        .unwrap();
        let ids = dir.path().join(IDS_FILE);
        let bytes = std::fs::read(&ids).unwrap();
        std::fs::write(&ids, &bytes[..7]).unwrap();
        let err = Links::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("links.fst is damaged"), "{err}");
        std::fs::write(dir.path().join(FST_FILE), b"not a transducer").unwrap();
        assert!(Links::open(dir.path()).is_err());
    }

    #[test]
    fn the_seed_itself_and_short_titles_are_skipped() {
        let l = links(&["Ed Wood", "Glen or Glenda", "UK", "Io (moon)"]);
        let text = "Ed Wood made Glen or Glenda in the UK; Io.";
        assert_eq!(l.mentioned(text, 0), vec![1]);
        assert_eq!(l.mentioned(text, 1), vec![0]);
    }
}
