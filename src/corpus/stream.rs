//! The deduplicated paragraph stream, built on the record readers of `records.rs`.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};

use anyhow::{anyhow, bail, Result};

use super::records::read_records;
use super::{document, Chunker, CorpusInput, FileKind, Paragraph};

/// What a pass over the corpus saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamStats {
    pub records: usize,
    pub paragraphs: usize,
    pub duplicates: usize,
    pub skipped_records: usize,
    /// Files read, by kind ("json", "text", "markdown", "html"), bad ones included.
    pub files: BTreeMap<String, usize>,
    /// Bad files skipped whole (`--skip-bad`), each named on stderr.
    pub skipped_files: usize,
    /// Files in corpus folders of no kind that is read.
    pub ignored_files: usize,
}

enum Message {
    /// A paragraph and the corpus bytes read when it was parsed.
    Paragraph(Paragraph, u64),
    /// The end, with the counts of the pass, the corpus bytes read in all and each input's
    /// sha256.
    Done(StreamStats, u64, Vec<String>),
    Failed(anyhow::Error),
}

/// The distinct paragraphs (first occurrence of each title wins) of several corpus files, in
/// order. Parsing runs on its own thread, a bounded queue ahead of the consumer, so reading
/// overlaps encoding while memory stays bounded: only a 128-bit hash of each title is kept.
pub struct ParagraphStream {
    receiver: Receiver<Message>,
    stats: Option<StreamStats>,
    digests: Vec<String>,
    finished: bool,
    /// Bytes read up to the paragraph last given out (the reader thread's own count runs a
    /// queue of paragraphs ahead).
    position: u64,
}

const QUEUE_DEPTH: usize = 4096;

impl ParagraphStream {
    /// The paragraphs of `files` (each a file or a folder, see [`CorpusInput`]). Without a
    /// [`Chunker`] (the encoder's tokenizer), document files cannot be cut and are refused.
    pub fn open(files: &[PathBuf], skip_bad: bool) -> Self {
        let files = files.to_vec();
        Self::spawn(skip_bad, None, move || {
            files.iter().map(|p| CorpusInput::inspect(p)).collect()
        })
    }

    /// The paragraphs of `inputs`, each input's sha256 computed as it is read
    /// ([`ParagraphStream::digests`]); documents cut into passages by `chunker`.
    pub fn from_inputs(inputs: Vec<CorpusInput>, skip_bad: bool, chunker: Option<Chunker>) -> Self {
        Self::spawn(skip_bad, chunker, move || Ok(inputs))
    }

    fn spawn(
        skip_bad: bool,
        chunker: Option<Chunker>,
        inputs: impl FnOnce() -> Result<Vec<CorpusInput>> + Send + 'static,
    ) -> Self {
        let (sender, receiver) = sync_channel(QUEUE_DEPTH);
        std::thread::spawn(move || {
            let counter = Cell::new(0);
            let mut reader = Reader {
                skip_bad,
                chunker,
                stats: StreamStats::default(),
                seen: HashSet::new(),
                sender,
                counter: &counter,
            };
            let mut digests = Vec::new();
            let result = inputs().and_then(|inputs| {
                inputs.iter().try_for_each(|input| {
                    reader.stats.ignored_files += input.ignored;
                    digests.push(input.read(&counter, |path, bytes| reader.file(path, bytes))?);
                    Ok(())
                })
            });
            let message = match result {
                Ok(()) => Message::Done(std::mem::take(&mut reader.stats), counter.get(), digests),
                Err(e) => Message::Failed(e),
            };
            let _ = reader.sender.send(message);
        });
        Self {
            receiver,
            stats: None,
            digests: Vec::new(),
            finished: false,
            position: 0,
        }
    }

    /// Each input's sha256 over its raw bytes, computed while they were read; empty until the
    /// stream has been read to its end.
    pub fn digests(&self) -> &[String] {
        &self.digests
    }

    /// Bytes of the corpus files read up to the paragraph this stream last gave out (to within
    /// the read buffer), for progress: not the parser's own count, which runs up to a queue of
    /// paragraphs ahead and so reached the end with a fifth of the encoding still to do.
    pub fn bytes_read(&self) -> u64 {
        self.position
    }

    /// Counts of the whole pass; `None` until the stream has been read to its end.
    pub fn stats(&self) -> Option<&StreamStats> {
        self.stats.as_ref()
    }
}

impl Iterator for ParagraphStream {
    type Item = Result<Paragraph>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.receiver.recv() {
            Ok(Message::Paragraph(p, position)) => {
                self.position = position;
                Some(Ok(p))
            }
            Ok(Message::Done(stats, bytes, digests)) => {
                self.position = bytes;
                self.stats = Some(stats);
                self.digests = digests;
                self.finished = true;
                None
            }
            Ok(Message::Failed(e)) => {
                self.finished = true;
                Some(Err(e))
            }
            Err(_) => {
                self.finished = true;
                Some(Err(anyhow!("corpus reader stopped unexpectedly")))
            }
        }
    }
}

/// The reading thread's state: what has been seen, and where paragraphs go.
struct Reader<'a> {
    skip_bad: bool,
    chunker: Option<Chunker>,
    stats: StreamStats,
    /// A 128-bit hash of every title given out.
    seen: HashSet<u128>,
    sender: std::sync::mpsc::SyncSender<Message>,
    counter: &'a Cell<u64>,
}

impl Reader<'_> {
    /// One corpus file: its records, or its passages.
    fn file(&mut self, path: &Path, bytes: Result<&mut dyn Read, String>) -> Result<()> {
        let kind = FileKind::of_named(path);
        *self.stats.files.entry(kind.name().to_string()).or_default() += 1;
        let outcome = match bytes {
            Err(reason) => Err(reason),
            Ok(reader) if kind.is_document() => self.document(path, kind, reader)?,
            Ok(reader) => self.records(path, reader)?,
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(reason) if self.skip_bad => {
                self.stats.skipped_files += 1;
                eprintln!("skipped {}: {reason}", path.display());
                Ok(())
            }
            Err(reason) => bail!(
                "{}: {reason} (use --skip-bad to skip such files)",
                path.display()
            ),
        }
    }

    /// A file of records; the inner `Err` is why the file is bad as a whole (it holds no
    /// records, or its JSON breaks off; the paragraphs before the break were given out). A bad
    /// record stops the read (the outer `Err`) unless bad records are skipped.
    fn records(&mut self, path: &Path, reader: &mut dyn Read) -> Result<Result<(), String>> {
        let mut stopped: Option<anyhow::Error> = None;
        let read = read_records(path, reader, &mut |number, record| {
            self.stats.records += 1;
            let record = match record {
                Ok(r) => r,
                Err(_) if self.skip_bad => {
                    self.stats.skipped_records += 1;
                    return Ok(());
                }
                Err(reason) => {
                    let e = anyhow!(
                        "{}: record {number}: {reason} (use --skip-bad to skip such records)",
                        path.display()
                    );
                    stopped = Some(anyhow!("{e}"));
                    return Err(e);
                }
            };
            for paragraph in record.paragraphs().expect("validated by parse_record") {
                if !self.seen.insert(title_key(&paragraph.title)) {
                    self.stats.duplicates += 1;
                    continue;
                }
                if let Err(e) = self.give(paragraph) {
                    stopped = Some(anyhow!("{e}"));
                    return Err(e);
                }
            }
            Ok(())
        });
        match (read, stopped) {
            (Ok(()), _) => Ok(Ok(())),
            // Not the file's fault: a bad record without --skip-bad, or the consumer gone.
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Ok(Err(without_path(path, &format!("{e:#}")))),
        }
    }

    /// A document file, read whole, cut into passages; titles already taken get the file's
    /// path, then a number, so that every passage is found under a title of its own.
    fn document(
        &mut self,
        path: &Path,
        kind: FileKind,
        reader: &mut dyn Read,
    ) -> Result<Result<(), String>> {
        let Some(chunker) = &self.chunker else {
            bail!(
                "{}: a {} document; only `rag index` cuts documents into passages",
                path.display(),
                kind.name()
            );
        };
        let mut bytes = Vec::new();
        if let Err(e) = reader.read_to_end(&mut bytes) {
            return Ok(Err(format!("cannot be read ({e})")));
        }
        let passages = match document::passages(path, kind, &bytes, chunker) {
            Ok(passages) => passages,
            Err(reason) => return Ok(Err(reason)),
        };
        for mut passage in passages {
            if self.seen.contains(&title_key(&passage.title)) {
                let with_path = format!("{} ({})", passage.title, path.display());
                let mut title = with_path.clone();
                let mut n = 2;
                while self.seen.contains(&title_key(&title)) {
                    title = format!("{with_path} #{n}");
                    n += 1;
                }
                passage.title = title;
            }
            self.seen.insert(title_key(&passage.title));
            self.give(passage)?;
        }
        Ok(Ok(()))
    }

    fn give(&mut self, paragraph: Paragraph) -> Result<()> {
        self.stats.paragraphs += 1;
        self.sender
            .send(Message::Paragraph(paragraph, self.counter.get()))
            .map_err(|_| anyhow!("paragraph consumer went away"))
    }
}

/// `message` without a leading `path: `, which the caller puts back once.
fn without_path(path: &Path, message: &str) -> String {
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_string()
}

/// Two independent 64-bit hashes: collisions among millions of titles stay out of reach.
fn title_key(title: &str) -> u128 {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        title.hash(&mut h);
        h.finish() as u128
    };
    (half(0) << 64) | half(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &tempfile::TempDir, name: &str, body: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        path
    }

    const ARRAY: &str = r#" [
      {"_id":"1","question":"q1","answer":"a","supporting_facts":[["A",0]],
       "context":[["A",["a1."," a2."]],["B",["b."]]]},
      {"_id":"2","question":"q2","answer":"b","supporting_facts":[["B",0]],
       "context":[["B",["b again."]],["C",["c."]]]}
    ]"#;

    fn collect(files: &[PathBuf], skip_bad: bool) -> (Result<Vec<Paragraph>>, Option<StreamStats>) {
        let mut stream = ParagraphStream::open(files, skip_bad);
        let items: Result<Vec<_>> = stream.by_ref().collect();
        (items, stream.stats().cloned())
    }

    #[test]
    fn array_and_jsonl_stream_deduplicated_paragraphs_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let array = write(&dir, "a.json", ARRAY);
        let jsonl = write(
            &dir,
            "b.jsonl",
            "{\"context\":[[\"C\",[\"dup\"]],[\"D\",[\"d.\"]]]}\n\n{\"title\":\"E\",\"text\":\"e.\"}\n",
        );
        let (items, stats) = collect(&[array, jsonl], false);
        let titles: Vec<String> = items.unwrap().into_iter().map(|p| p.title).collect();
        assert_eq!(titles, ["A", "B", "C", "D", "E"]);
        let stats = stats.unwrap();
        assert_eq!(
            (stats.records, stats.paragraphs, stats.duplicates),
            (4, 5, 2)
        );
    }

    /// Progress follows the paragraphs given out, not the reader thread, which by then has
    /// parsed the whole file into its queue.
    #[test]
    fn bytes_read_follows_the_paragraphs_given_out() {
        let dir = tempfile::tempdir().unwrap();
        let text = "x".repeat(2000);
        let records: Vec<String> = (0..1500)
            .map(|i| format!(r#"{{"context":[["T{i}",["{text}"]]]}}"#))
            .collect();
        let path = write(&dir, "big.json", &format!("[{}]", records.join(",")));
        let size = std::fs::metadata(&path).unwrap().len();
        let mut stream = ParagraphStream::open(std::slice::from_ref(&path), false);
        stream.next().unwrap().unwrap();
        // Time for the reader to parse all 1,500 paragraphs into the queue.
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(
            stream.bytes_read() <= 1 << 20,
            "{} of {size} bytes after the first paragraph",
            stream.bytes_read()
        );
        let mut last = stream.bytes_read();
        while let Some(paragraph) = stream.next() {
            paragraph.unwrap();
            assert!(stream.bytes_read() >= last);
            last = stream.bytes_read();
        }
        assert_eq!(stream.bytes_read(), size);
    }

    #[test]
    fn malformed_record_is_named_or_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(
            &dir,
            "bad.json",
            r#"[{"context":[["A",["a."]]]}, {"context": 5}, {"context":[["B",["b."]]]}]"#,
        );
        let (items, _) = collect(std::slice::from_ref(&bad), false);
        let msg = items.unwrap_err().to_string();
        assert!(msg.contains("bad.json: record 2"), "{msg}");

        let (items, stats) = collect(&[bad], true);
        assert_eq!(items.unwrap().len(), 2);
        assert_eq!(stats.unwrap().skipped_records, 1);
    }

    /// A line that is not UTF-8 is record n, refused by number or skipped; a leading byte
    /// order mark is read past, in either format.
    #[test]
    fn non_utf8_lines_are_bad_records_and_a_bom_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latin1.jsonl");
        let mut body = b"{\"title\":\"A\",\"text\":\"a.\"}\n{\"title\":\"Caf".to_vec();
        body.extend_from_slice(b"\xE9\",\"text\":\"c.\"}\n{\"title\":\"B\",\"text\":\"b.\"}\n");
        std::fs::write(&path, body).unwrap();
        let msg = collect(std::slice::from_ref(&path), false)
            .0
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("latin1.jsonl: record 2: not UTF-8") && msg.contains("--skip-bad"),
            "{msg}"
        );
        let (items, stats) = collect(&[path], true);
        let titles: Vec<String> = items.unwrap().into_iter().map(|p| p.title).collect();
        assert_eq!(titles, ["A", "B"]);
        assert_eq!(stats.unwrap().skipped_records, 1);

        let jsonl = write(
            &dir,
            "bom.jsonl",
            "\u{feff}{\"title\":\"T\",\"text\":\"t.\"}\n",
        );
        let array = write(&dir, "bom.json", &format!("\u{feff}{ARRAY}"));
        let (items, _) = collect(&[jsonl, array], false);
        assert_eq!(items.unwrap().len(), 4);
    }

    #[test]
    fn broken_json_names_the_record_where_it_broke() {
        let dir = tempfile::tempdir().unwrap();
        let broken = write(
            &dir,
            "broken.json",
            r#"[{"context":[["A",["a."]]]}, {"context": [["B""#,
        );
        let (items, _) = collect(std::slice::from_ref(&broken), false);
        let msg = items.unwrap_err().to_string();
        assert!(
            msg.contains("broken.json: record 2: invalid JSON") && msg.contains("--skip-bad"),
            "{msg}"
        );
        // With --skip-bad the rest of the file is skipped, what came before it kept.
        let (items, stats) = collect(&[broken], true);
        assert_eq!(items.unwrap().len(), 1);
        assert_eq!(stats.unwrap().skipped_files, 1);

        let not_json = write(&dir, "x.dat", "hello");
        assert!(collect(&[not_json], false)
            .0
            .unwrap_err()
            .to_string()
            .contains("not HotpotQA JSON"));
        let empty = write(&dir, "empty.json", "  \n");
        assert!(collect(&[empty], false)
            .0
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let (items, _) = collect(&[PathBuf::from("/nonexistent/corpus.json")], false);
        assert!(items
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/corpus.json"));
    }
}
