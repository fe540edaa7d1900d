//! The lexical side: a tantivy BM25 index over title and text (English stemming), with the
//! document id stored so hits join the dense side and the document store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};
use tantivy::query::{Bm25StatisticsProvider, EnableScoring};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STORED,
};
use tantivy::{doc, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::corpus::Paragraph;

mod exact;
mod max_score;
mod query;
use exact::ExactQuery;
use max_score::Best;
use query::QueryBuilder;
pub use query::QuerySyntax;

const TOKENIZER: &str = "en_stem";
/// The document's global id (a fast field: rankings break ties by it).
const ID_FIELD: &str = "id";
const WRITER_MEMORY: usize = 256 << 20;
/// The lock files tantivy's writer leaves, empty: removed once a build is done (a built index
/// is never written again), and never part of what makes an index whole.
pub const LOCK_FILES: [&str; 2] = [".tantivy-meta.lock", ".tantivy-writer.lock"];

struct Fields {
    id: Field,
    title: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text_options = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        id: builder.add_u64_field(ID_FIELD, INDEXED | STORED | FAST),
        title: builder.add_text_field("title", text_options.clone()),
        text: builder.add_text_field("text", text_options),
    };
    (builder.build(), fields)
}

/// Indexes `documents` (each with its id: its position in the corpus) into a new tantivy index
/// in `dir`.
pub fn build(
    dir: &Path,
    documents: impl Iterator<Item = Result<(u64, Paragraph)>>,
    mut on_document: impl FnMut(),
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (schema, fields) = schema();
    let index = Index::create_in_dir(dir, schema)
        .with_context(|| format!("creating BM25 index in {}", dir.display()))?;
    let mut writer = index.writer::<TantivyDocument>(WRITER_MEMORY)?;
    for document in documents {
        let (id, paragraph) = document?;
        writer.add_document(doc!(
            fields.id => id,
            fields.title => paragraph.title,
            fields.text => paragraph.text,
        ))?;
        on_document();
    }
    writer.commit().context("committing the BM25 index")?;
    writer
        .wait_merging_threads()
        .context("merging BM25 segments")?;
    drop(index);
    remove_lock_files(dir)
}

/// The exact number of tokens BM25 indexed in each field, over the documents an index holds:
/// what its average lengths are computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenCounts {
    pub title: u64,
    pub text: u64,
}

/// Takes the documents `removed` (id and document) out of the tantivy index in `dir` and adds
/// `added` (each with its id), in one commit; `tokens`, the index's exact token counts before,
/// becomes the counts after, which the manifest keeps. Removed documents are then merged away,
/// all segments into one, so that the document count and each term's document frequency are
/// those of the documents left, as a fresh build's are (tantivy counts a deleted document in
/// them until a merge drops it). Its token counts after such a merge are estimates (from
/// quantised lengths), hence the exact ones kept beside it ([`Bm25Index::with_token_counts`]).
pub fn update(
    dir: &Path,
    removed: &[(u64, Paragraph)],
    added: &[(u64, Paragraph)],
    tokens: &mut TokenCounts,
) -> Result<()> {
    let index =
        Index::open_in_dir(dir).with_context(|| format!("opening BM25 index {}", dir.display()))?;
    let (_, fields) = schema();
    let count = |field: Field, text: &str| -> Result<u64> {
        let mut analyzer = index.tokenizer_for_field(field)?;
        let mut stream = analyzer.token_stream(text);
        let mut n = 0;
        while stream.advance() {
            n += 1;
        }
        Ok(n)
    };
    let mut writer = index.writer::<TantivyDocument>(WRITER_MEMORY)?;
    for (id, paragraph) in removed {
        writer.delete_term(Term::from_field_u64(fields.id, *id));
        tokens.title = tokens
            .title
            .saturating_sub(count(fields.title, &paragraph.title)?);
        tokens.text = tokens
            .text
            .saturating_sub(count(fields.text, &paragraph.text)?);
    }
    for (id, paragraph) in added {
        let (id, paragraph) = (*id, paragraph.clone());
        tokens.title += count(fields.title, &paragraph.title)?;
        tokens.text += count(fields.text, &paragraph.text)?;
        writer.add_document(doc!(
            fields.id => id,
            fields.title => paragraph.title,
            fields.text => paragraph.text,
        ))?;
    }
    writer.commit().context("committing the BM25 update")?;
    if !removed.is_empty() {
        let segments = index
            .searchable_segment_ids()
            .context("listing BM25 segments")?;
        writer
            .merge(&segments)
            .wait()
            .context("merging removed documents out of BM25")?;
    }
    writer
        .garbage_collect_files()
        .wait()
        .context("removing BM25 files no longer used")?;
    writer
        .wait_merging_threads()
        .context("merging BM25 segments")?;
    drop(index);
    remove_lock_files(dir)
}

/// Removes tantivy's empty lock files ([`LOCK_FILES`]) from `dir`.
fn remove_lock_files(dir: &Path) -> Result<()> {
    for name in LOCK_FILES {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

pub struct Bm25Index {
    reader: IndexReader,
    queries: QueryBuilder,
    /// The exact token counts where tantivy's are estimates (after a merge that dropped
    /// removed documents).
    tokens: Option<TokenCounts>,
}

impl Bm25Index {
    /// Opens the index read-only: nothing is written to `dir`, not even tantivy's lock files
    /// (a built index never changes, so there is nothing to lock against).
    pub fn open(dir: &Path) -> Result<Self> {
        let index = MmapDirectory::open(dir)
            .map_err(anyhow::Error::from)
            .and_then(|mmap| Ok(Index::open(ReadOnlyDirectory(mmap))?))
            .with_context(|| format!("opening BM25 index {}", dir.display()))?;
        let (_, fields) = schema();
        let queries = QueryBuilder::new(&index, &[fields.title, fields.text])
            .with_context(|| format!("reading the BM25 tokenizers of {}", dir.display()))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .context("opening BM25 reader")?;
        Ok(Self {
            reader,
            queries,
            tokens: None,
        })
    }

    /// The same index, scored with these exact token counts (the manifest's, after an update).
    pub fn with_token_counts(mut self, tokens: Option<TokenCounts>) -> Self {
        self.tokens = tokens;
        self
    }

    /// The exact token counts of the documents held: those kept by an update, else tantivy's,
    /// exact in a built index (segments merged without deletes add them up).
    pub fn token_counts(&self) -> Result<TokenCounts> {
        if let Some(tokens) = self.tokens {
            return Ok(tokens);
        }
        let (_, fields) = schema();
        let searcher = self.reader.searcher();
        Ok(TokenCounts {
            title: searcher.total_num_tokens(fields.title)?,
            text: searcher.total_num_tokens(fields.text)?,
        })
    }

    /// How many documents the index holds.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The `k` best documents for a question as (id, BM25 score), read as `syntax` says
    /// ([`query`]); never an error for what the question says.
    pub fn search(&self, question: &str, syntax: QuerySyntax, k: usize) -> Result<Vec<(u64, f32)>> {
        search_all(&[self], question, syntax, k).map(|mut lists| lists.remove(0))
    }
}

/// The `k` best documents of each of `shards` (the BM25 indexes of one corpus's shards) for a
/// question, every score computed with the statistics of all of them together, so that each is
/// exactly the score the document gets in one index of the whole corpus: BM25's idf and average
/// length are corpus-wide, and a shard's own would rank a rare term of one shard above a common
/// one of another. Merging the lists (best first, ties by id) gives the whole corpus's top k.
pub fn search_all(
    shards: &[&Bm25Index],
    question: &str,
    syntax: QuerySyntax,
    k: usize,
) -> Result<Vec<Vec<(u64, f32)>>> {
    let first = shards.first().context("no BM25 index to search")?;
    let query = first.queries.build(question, syntax);
    let statistics = Summed(
        shards
            .iter()
            .map(|s| (s.reader.searcher(), s.tokens))
            .collect(),
    );
    // One set of weights serves every shard: they hold only the corpus-wide statistics.
    let scoring = EnableScoring::enabled_from_statistics_provider(&statistics, &statistics.0[0].0);
    let exact = ExactQuery::new(query.as_ref(), scoring)?;
    statistics
        .0
        .iter()
        .map(|(searcher, _)| top_matches(searcher, &exact, k))
        .collect()
}

/// The `k` best documents of one shard's `searcher` for a query whose scores are summed so that
/// a document's score does not depend on its segment or shard ([`exact`]); equal scores rank by
/// id.
fn top_matches(searcher: &Searcher, exact: &ExactQuery, k: usize) -> Result<Vec<(u64, f32)>> {
    let mut best = Best::new(k);
    for segment in searcher.segment_readers() {
        let ids = segment.fast_fields().u64(ID_FIELD)?;
        let alive = segment.alive_bitset();
        exact.search(segment, &mut best, &mut |doc| {
            if alive.is_some_and(|alive| !alive.is_alive(doc)) {
                return Ok(None);
            }
            ids.first(doc)
                .map(Some)
                .context("BM25 document without an id")
        })?;
    }
    Ok(best.into_sorted())
}

/// BM25 statistics summed over several indexes' searchers, each with its exact token counts
/// where tantivy's are estimates.
struct Summed(Vec<(Searcher, Option<TokenCounts>)>);

impl Bm25StatisticsProvider for Summed {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let (_, fields) = schema();
        self.0
            .iter()
            .map(|(searcher, tokens)| match tokens {
                Some(t) if field == fields.title => Ok(t.title),
                Some(t) if field == fields.text => Ok(t.text),
                _ => searcher.total_num_tokens(field),
            })
            .sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.0.iter().map(|(s, _)| s.total_num_docs()).sum()
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.0.iter().map(|(s, _)| s.doc_freq(term)).sum()
    }
}

/// A tantivy directory that reads and never writes: writes fail, locks are no-ops.
#[derive(Debug, Clone)]
struct ReadOnlyDirectory(MmapDirectory);

fn read_only(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{} belongs to a built index, which is read-only",
            path.display()
        ),
    )
}

impl Directory for ReadOnlyDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.0.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: Arc::new(read_only(path)),
            filepath: PathBuf::from(path),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.0.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: Arc::new(read_only(path)),
            filepath: PathBuf::from(path),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.0.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, _data: &[u8]) -> std::io::Result<()> {
        Err(read_only(path))
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.0.watch(watch_callback)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A BM25 index in `dir` of (title, text) paragraphs, ids in order; how many documents the
    /// build reported.
    pub fn index_of(dir: &Path, docs: &[(&str, &str)]) -> (Bm25Index, usize) {
        let documents = docs.iter().enumerate().map(|(id, (title, text))| {
            Ok((
                id as u64,
                Paragraph {
                    title: title.to_string(),
                    text: text.to_string(),
                    links: Vec::new(),
                    source: None,
                },
            ))
        });
        let mut seen = 0;
        build(dir, documents, || seen += 1).unwrap();
        (Bm25Index::open(dir).unwrap(), seen)
    }

    #[test]
    fn finds_the_paragraph_that_shares_stemmed_words() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            ("Paris", "Paris is the capital of France."),
            ("Rivers", "The Danube flows through many countries."),
            ("Cats", "Cats are running and jumping."),
        ];
        let (index, seen) = index_of(dir.path(), &docs);
        assert_eq!(seen, 3);
        let hits = index
            .search("which cat runs?", QuerySyntax::PlainText, 2)
            .unwrap();
        assert_eq!(hits[0].0, 2);
        // Unbalanced syntax is not an error, read either way.
        for syntax in [QuerySyntax::PlainText, QuerySyntax::Tantivy] {
            assert!(index.search("\"capital (of: France", syntax, 3).unwrap()[0].0 == 0);
        }
    }

    #[test]
    fn a_question_is_words_unless_syntax_is_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            (
                "Villaggio Mall",
                "The biggest store, today owned by the State of Qatar, is in Doha.",
            ),
            ("Harrods", "Harrods is a store in London."),
        ];
        let (index, _) = index_of(dir.path(), &docs);
        let question = "which store - today owned by the State of Qatar - is the biggest?";
        let plain = index.search(question, QuerySyntax::PlainText, 2).unwrap();
        assert_eq!(plain.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
        // As syntax, ` - today` and ` - is` exclude both paragraphs.
        assert!(index
            .search(question, QuerySyntax::Tantivy, 2)
            .unwrap()
            .is_empty());
        // Operators are words: `-store` does not exclude, `title:` does not restrict.
        for question in ["-store +London", "title:Harrods Qatar", "stores* Doha~2"] {
            let hits = index.search(question, QuerySyntax::PlainText, 2).unwrap();
            assert_eq!(hits.len(), 2, "{question}");
        }
    }

    #[test]
    fn quoted_spans_and_split_words_stay_phrases() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            (
                "Mark Twain",
                "His novel Adventures of Huckleberry Finn was written 1876-1884.",
            ),
            (
                "Finn Adventures",
                "Huckleberry pie adventures, of Finn the baker, in 1876 and 1884.",
            ),
        ];
        let (index, _) = index_of(dir.path(), &docs);
        // The same words, in the same numbers; only the phrases put the novel's page first.
        for question in [
            "who wrote \"Adventures of Huckleberry Finn\"?",
            "what was written 1876-1884?",
        ] {
            let plain = index.search(question, QuerySyntax::PlainText, 2).unwrap();
            assert_eq!(plain[0].0, 0, "{question}: {plain:?}");
            assert_eq!(
                plain,
                index.search(question, QuerySyntax::Tantivy, 2).unwrap(),
                "{question}"
            );
        }
        // An unpaired quote is dropped: the words after it are words.
        let hits = index
            .search("Finn \"baker pie", QuerySyntax::PlainText, 2)
            .unwrap();
        assert_eq!(hits[0].0, 1, "{hits:?}");
    }

    #[test]
    fn plain_words_score_as_the_parser_scored_them() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            (
                "Paris",
                "Paris is the capital of France, and the capital of fashion.",
            ),
            ("Rivers", "The Danube flows through many capital cities."),
        ];
        let (index, _) = index_of(dir.path(), &docs);
        let question = "what is the capital the river flows through";
        assert_eq!(
            index.search(question, QuerySyntax::PlainText, 2).unwrap(),
            index.search(question, QuerySyntax::Tantivy, 2).unwrap()
        );
    }
}
