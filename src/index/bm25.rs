//! The lexical side: a tantivy BM25 index over title and text (English stemming), with the
//! document id stored so hits join the dense side and the document store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use tantivy::collector::TopDocs;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, FAST, INDEXED, STORED,
};
use tantivy::{doc, Index, IndexReader, ReloadPolicy, TantivyDocument};

use crate::corpus::Paragraph;

const TOKENIZER: &str = "en_stem";
const WRITER_MEMORY: usize = 256 << 20;

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
        id: builder.add_u64_field("id", INDEXED | STORED | FAST),
        title: builder.add_text_field("title", text_options.clone()),
        text: builder.add_text_field("text", text_options),
    };
    (builder.build(), fields)
}

/// Indexes `documents` (id = position) into a new tantivy index in `dir`.
pub fn build(
    dir: &Path,
    documents: impl Iterator<Item = Result<Paragraph>>,
    mut on_document: impl FnMut(),
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (schema, fields) = schema();
    let index = Index::create_in_dir(dir, schema)
        .with_context(|| format!("creating BM25 index in {}", dir.display()))?;
    let mut writer = index.writer::<TantivyDocument>(WRITER_MEMORY)?;
    for (id, paragraph) in documents.enumerate() {
        let paragraph = paragraph?;
        writer.add_document(doc!(
            fields.id => id as u64,
            fields.title => paragraph.title,
            fields.text => paragraph.text,
        ))?;
        on_document();
    }
    writer.commit().context("committing the BM25 index")?;
    writer
        .wait_merging_threads()
        .context("merging BM25 segments")?;
    Ok(())
}

pub struct Bm25Index {
    reader: IndexReader,
    parser: QueryParser,
    id: Field,
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
        let parser = QueryParser::for_index(&index, vec![fields.title, fields.text]);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .context("opening BM25 reader")?;
        Ok(Self {
            reader,
            parser,
            id: fields.id,
        })
    }

    /// How many documents the index holds.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The `k` best documents for a free-text question as (id, BM25 score). Query syntax in the
    /// question (quotes, colons, stray parentheses) is read leniently, never as an error.
    pub fn search(&self, question: &str, k: usize) -> Result<Vec<(u64, f32)>> {
        let (query, _ignored) = self.parser.parse_query_lenient(question);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(k.max(1)))?;
        top.into_iter()
            .map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address)?;
                let id = doc
                    .get_first(self.id)
                    .and_then(|v| v.as_u64())
                    .context("BM25 document without an id")?;
                Ok((id, score))
            })
            .collect()
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
mod tests {
    use super::*;

    #[test]
    fn finds_the_paragraph_that_shares_stemmed_words() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            ("Paris", "Paris is the capital of France."),
            ("Rivers", "The Danube flows through many countries."),
            ("Cats", "Cats are running and jumping."),
        ]
        .map(|(t, x)| {
            Ok(Paragraph {
                title: t.into(),
                text: x.into(),
            })
        });
        let mut seen = 0;
        build(dir.path(), docs.into_iter(), || seen += 1).unwrap();
        assert_eq!(seen, 3);
        let index = Bm25Index::open(dir.path()).unwrap();
        let hits = index.search("which cat runs?", 2).unwrap();
        assert_eq!(hits[0].0, 2);
        // Unbalanced syntax is not an error.
        assert!(index.search("\"capital (of: France", 3).unwrap()[0].0 == 0);
    }
}
