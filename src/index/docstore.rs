//! The document store: every paragraph as one JSON line in `docs.jsonl`, with the byte offset
//! of each line in `docs.offsets` (little-endian u64) so that document `i` (also its faiss id)
//! is one seek away. Append-only, which is what lets an interrupted build resume.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::corpus::Paragraph;

pub const DOCS_FILE: &str = "docs.jsonl";
pub const OFFSETS_FILE: &str = "docs.offsets";

pub struct DocStoreWriter {
    docs: BufWriter<File>,
    offsets: BufWriter<File>,
    docs_path: PathBuf,
    next_offset: u64,
    count: u64,
}

/// Byte lengths that describe a consistent prefix of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
pub struct DocStoreMark {
    pub documents: u64,
    pub docs_bytes: u64,
}

impl DocStoreWriter {
    /// Opens the store in `dir` for appending, first cutting it back to `mark` (what the last
    /// checkpoint recorded), so bytes written after that checkpoint are forgotten.
    pub fn open_at(dir: &Path, mark: DocStoreMark) -> Result<Self> {
        let docs_path = dir.join(DOCS_FILE);
        let offsets_path = dir.join(OFFSETS_FILE);
        let docs = open_truncated(&docs_path, mark.docs_bytes)?;
        let offsets = open_truncated(&offsets_path, mark.documents * 8)?;
        Ok(Self {
            docs: BufWriter::with_capacity(1 << 20, docs),
            offsets: BufWriter::new(offsets),
            docs_path,
            next_offset: mark.docs_bytes,
            count: mark.documents,
        })
    }

    pub fn append(&mut self, paragraph: &Paragraph) -> Result<()> {
        let mut line = serde_json::to_vec(paragraph)?;
        line.push(b'\n');
        self.docs
            .write_all(&line)
            .with_context(|| format!("writing {}", self.docs_path.display()))?;
        self.offsets.write_all(&self.next_offset.to_le_bytes())?;
        self.next_offset += line.len() as u64;
        self.count += 1;
        Ok(())
    }

    /// Flushes and fsyncs, returning the mark to record in the checkpoint.
    pub fn sync(&mut self) -> Result<DocStoreMark> {
        for writer in [&mut self.docs, &mut self.offsets] {
            writer.flush()?;
            writer.get_ref().sync_data()?;
        }
        Ok(DocStoreMark {
            documents: self.count,
            docs_bytes: self.next_offset,
        })
    }
}

pub(crate) fn open_truncated(path: &Path, len: u64) -> Result<File> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let actual = file.metadata()?.len();
    if actual < len {
        bail!(
            "{} is shorter than its checkpoint says ({actual} < {len} bytes); rebuild with --fresh",
            path.display()
        );
    }
    file.set_len(len)?;
    file.seek(SeekFrom::End(0))?;
    Ok(file)
}

pub struct DocStore {
    docs: File,
    offsets: Vec<u64>,
    docs_len: u64,
    path: PathBuf,
}

impl DocStore {
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(DOCS_FILE);
        let docs = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let docs_len = docs.metadata()?.len();
        let offsets_path = dir.join(OFFSETS_FILE);
        let mut raw = Vec::new();
        File::open(&offsets_path)
            .and_then(|mut f| f.read_to_end(&mut raw))
            .with_context(|| format!("reading {}", offsets_path.display()))?;
        if raw.len() % 8 != 0 {
            bail!(
                "{} is damaged (length not a multiple of 8); rebuild the index with `rag index --fresh`",
                offsets_path.display()
            );
        }
        let offsets: Vec<u64> = raw
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8-byte chunk")))
            .collect();
        // Each line starts where the last ended, and all of them inside the file: a truncated
        // or overwritten store is refused here, not when a hit lands in the damaged part.
        let ordered = offsets.first().is_none_or(|&first| first == 0)
            && offsets.windows(2).all(|w| w[0] < w[1])
            && offsets.last().is_none_or(|&last| last < docs_len);
        if !ordered {
            bail!(
                "{} does not match {} (damaged or truncated); rebuild the index with `rag index --fresh`",
                offsets_path.display(),
                path.display()
            );
        }
        Ok(Self {
            docs,
            offsets,
            docs_len,
            path,
        })
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn get(&self, id: u64) -> Result<Paragraph> {
        let i = id as usize;
        let start = *self
            .offsets
            .get(i)
            .with_context(|| format!("document {id} is not in {}", self.path.display()))?;
        let end = self.offsets.get(i + 1).copied().unwrap_or(self.docs_len);
        let mut buf = vec![0u8; (end - start) as usize];
        self.docs
            .read_exact_at(&mut buf, start)
            .with_context(|| format!("reading document {id} from {}", self.path.display()))?;
        serde_json::from_slice(&buf).with_context(|| {
            format!(
                "document {id} in {} is damaged; rebuild the index with `rag index --fresh`",
                self.path.display()
            )
        })
    }

    /// Every document in id order, read sequentially.
    pub fn iter(&self) -> impl Iterator<Item = Result<Paragraph>> + '_ {
        (0..self.len() as u64).map(move |id| self.get(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn para(t: &str) -> Paragraph {
        Paragraph {
            title: t.into(),
            text: format!("text of {t} \u{e9}"),
            links: Vec::new(),
            source: None,
        }
    }

    #[test]
    fn append_read_and_cut_back_to_a_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DocStoreWriter::open_at(dir.path(), DocStoreMark::default()).unwrap();
        w.append(&para("a")).unwrap();
        let mark = w.sync().unwrap();
        w.append(&para("b")).unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(
            DocStore::open(dir.path()).unwrap().get(1).unwrap(),
            para("b")
        );

        // Reopening at the first mark forgets "b", as a resumed build must.
        let mut w = DocStoreWriter::open_at(dir.path(), mark).unwrap();
        w.append(&para("c")).unwrap();
        w.sync().unwrap();
        let store = DocStore::open(dir.path()).unwrap();
        let all: Vec<_> = store.iter().map(|p| p.unwrap().title).collect();
        assert_eq!(all, ["a", "c"]);
        assert!(store.get(2).is_err());
    }
}
