//! Corpus inputs as distributed: a file, or a folder of them (the HotpotQA Wikipedia dump is a
//! tree of `.bz2` files), each read plain or decompressed on the fly by its extension (`.bz2`,
//! `.gz`). The raw bytes are counted (for progress) and hashed (the manifest's checksum) as they
//! stream by, so the corpus is read once per build; what a build is resumed or skipped for is
//! named by a cheap fingerprint (every file's path, size and modification time) instead.
//!
//! A folder is read for every file of a kind [`FileKind`] knows (records, text, Markdown, HTML),
//! hidden files and folders (names starting with `.`) left out, as a notes folder holds
//! `.git/` and editor backups; other files (images, PDFs) are counted as ignored.
//!
//! Only regular files (and folders of them) are accepted: a FIFO or a pipe (`/dev/stdin` fed by
//! `|`) would block the open or be consumed by the first read, and cannot be read again to
//! resume a build, so it is refused with one line. A file redirected to stdin (`< file`) is a
//! regular file and works.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::FileKind;

/// One `--corpus` argument: a file, or every file under a folder, in path order.
#[derive(Debug, Clone)]
pub struct CorpusInput {
    pub path: PathBuf,
    /// The files read, in order: `path` itself, or every file under it sorted by path.
    pub files: Vec<PathBuf>,
    /// Their raw (compressed) size in all.
    pub bytes: u64,
    /// sha256 of every file's path (relative to `path`), size and modification time.
    pub fingerprint: String,
    /// Files under a folder that are of no kind read (neither records nor documents).
    pub ignored: usize,
}

impl CorpusInput {
    /// Lists the files of a `--corpus` argument without reading them.
    pub fn inspect(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).with_context(|| format!("corpus {}", path.display()))?;
        let mut ignored = 0;
        let files = if meta.is_dir() {
            let mut files = Vec::new();
            let walk = walkdir::WalkDir::new(path)
                .follow_links(true)
                .sort_by_file_name()
                .into_iter()
                .filter_entry(|e| {
                    e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.')
                });
            for entry in walk {
                let entry = match entry {
                    Ok(entry) => entry,
                    // A link to nothing is a file that cannot be read: named (or skipped) when
                    // the build comes to it, like any unreadable file.
                    Err(e) if e.path().is_some() && e.io_error().is_some() && e.depth() > 0 => {
                        let broken = e.path().expect("checked").to_path_buf();
                        if FileKind::of(&broken).is_some() {
                            files.push(broken);
                        }
                        continue;
                    }
                    Err(e) => {
                        return Err(e).with_context(|| format!("listing corpus {}", path.display()))
                    }
                };
                if entry.file_type().is_dir() {
                    continue;
                }
                if FileKind::of(entry.path()).is_none() {
                    ignored += 1;
                    continue;
                }
                check_regular(entry.path(), &entry.metadata()?)?;
                files.push(entry.into_path());
            }
            if files.is_empty() {
                bail!(
                    "corpus folder {} holds no files to read (records: .json, .jsonl; documents: .txt, .md, .html, .htm; each also .gz or .bz2)",
                    path.display()
                );
            }
            files
        } else {
            check_regular(path, &meta)?;
            vec![path.to_path_buf()]
        };
        let mut hasher = Sha256::new();
        let mut bytes = 0;
        for file in &files {
            // An unreadable file (a broken link) counts as empty here; reading it fails.
            let (len, modified) = match std::fs::metadata(file) {
                Ok(meta) => (
                    meta.len(),
                    meta.modified()
                        .ok()
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_nanos()),
                ),
                Err(_) => (0, 0),
            };
            hasher.update(relative(path, file).as_bytes());
            hasher.update([0]);
            hasher.update(len.to_le_bytes());
            hasher.update(modified.to_le_bytes());
            bytes += len;
        }
        Ok(Self {
            path: path.to_path_buf(),
            files,
            bytes,
            fingerprint: hex::encode(hasher.finalize()),
            ignored,
        })
    }

    pub fn is_folder(&self) -> bool {
        self.files.len() != 1 || self.files[0] != self.path
    }

    /// Calls `read(file, decompressed)` for each file in order, counting the raw bytes into
    /// `bytes_read` as they are read; returns the sha256 of the raw bytes: of the file itself,
    /// or for a folder of each file's relative path, a zero byte and its bytes, in order. Each
    /// file is read to its end, whatever `read` left, so the checksum covers all of it. A file
    /// that cannot be opened reaches `read` as `Err(reason)`: it may skip it or stop.
    pub fn read(
        &self,
        bytes_read: &Cell<u64>,
        mut read: impl FnMut(&Path, Result<&mut dyn Read, String>) -> Result<()>,
    ) -> Result<String> {
        let mut hasher = Sha256::new();
        for file in &self.files {
            if self.is_folder() {
                hasher.update(relative(&self.path, file).as_bytes());
                hasher.update([0]);
            }
            let opened = match open_regular(file) {
                Ok(opened) => opened,
                Err(e) => {
                    read(file, Err(format!("cannot be read ({})", root_cause(&e))))?;
                    continue;
                }
            };
            let mut raw = Hashing {
                inner: opened,
                hasher: &mut hasher,
                bytes_read,
            };
            {
                let mut decoded = decoder(file, &mut raw);
                read(file, Ok(&mut decoded))?;
            }
            std::io::copy(&mut raw, &mut std::io::sink())
                .with_context(|| format!("reading {}", file.display()))?;
        }
        Ok(hex::encode(hasher.finalize()))
    }
}

/// The sha256 [`CorpusInput::read`] reports, computed alone (for an index from before
/// fingerprints, whose up-to-date check needs it).
pub fn sha256(input: &CorpusInput) -> Result<String> {
    input.read(&Cell::new(0), |_, _| Ok(()))
}

/// The innermost cause of `error`, for a one-line reason.
fn root_cause(error: &anyhow::Error) -> String {
    error.root_cause().to_string()
}

/// A single file, decompressed by its extension: how question files are read.
pub fn open_decoded(path: &Path) -> Result<Box<dyn Read>> {
    let file = open_regular(path)?;
    Ok(decoder(path, file))
}

fn open_regular(path: &Path) -> Result<File> {
    // Checked before opening: opening a FIFO blocks until someone writes to it.
    let meta = std::fs::metadata(path).with_context(|| format!("opening {}", path.display()))?;
    check_regular(path, &meta)?;
    File::open(path).with_context(|| format!("opening {}", path.display()))
}

fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let what = if kind.is_fifo() {
        "a FIFO or pipe"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else if !kind.is_file() {
        "not a regular file"
    } else {
        return Ok(());
    };
    bail!(
        "{} is {what}: a corpus is read more than once (to resume, to check it is unchanged); save it to a file and pass that",
        path.display()
    )
}

/// `.bz2` and `.gz` files decompressed (every stream of a multi-stream file), others as they are.
fn decoder<'a>(path: &Path, raw: impl Read + 'a) -> Box<dyn Read + 'a> {
    let reader = BufReader::with_capacity(1 << 20, raw);
    match path.extension().and_then(|e| e.to_str()) {
        Some("bz2") => Box::new(bzip2::read::MultiBzDecoder::new(reader)),
        Some("gz") => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
        _ => Box::new(reader),
    }
}

/// `file`'s path under `root` with `/` separators ("" for the root itself).
fn relative(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap_or(file);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Counts and hashes the raw bytes as they are read.
struct Hashing<'a, R> {
    inner: R,
    hasher: &'a mut Sha256,
    bytes_read: &'a Cell<u64>,
}

impl<R: Read> Read for Hashing<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes_read.set(self.bytes_read.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn bz2(bytes: &[u8]) -> Vec<u8> {
        let mut out = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        out.write_all(bytes).unwrap();
        out.finish().unwrap()
    }

    #[test]
    fn files_stream_decompressed_and_hashed_once() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.jsonl");
        std::fs::write(&plain, b"{\"title\":\"A\"}\n").unwrap();
        let packed = dir.path().join("b.jsonl.bz2");
        let compressed = bz2(b"{\"title\":\"B\"}\n");
        std::fs::write(&packed, &compressed).unwrap();

        for (path, raw, text) in [
            (
                &plain,
                std::fs::read(&plain).unwrap(),
                "{\"title\":\"A\"}\n",
            ),
            (&packed, compressed.clone(), "{\"title\":\"B\"}\n"),
        ] {
            let input = CorpusInput::inspect(path).unwrap();
            assert!(!input.is_folder());
            let counted = Cell::new(0);
            let mut seen = String::new();
            let sha = input
                .read(&counted, |_, r| {
                    r.unwrap().read_to_string(&mut seen)?;
                    Ok(())
                })
                .unwrap();
            assert_eq!(seen, text);
            assert_eq!(counted.get(), raw.len() as u64);
            assert_eq!(sha, hex::encode(Sha256::digest(&raw)));
            assert_eq!(sha, crate::files::sha256_file(path).unwrap());
        }

        // A folder: its files in path order, hashed with their names.
        let input = CorpusInput::inspect(dir.path()).unwrap();
        assert!(input.is_folder());
        assert_eq!(input.files, [plain.clone(), packed.clone()]);
        let counted = Cell::new(0);
        let mut names = Vec::new();
        let sha = input
            .read(&counted, |path, _| {
                names.push(path.to_path_buf());
                Ok(())
            })
            .unwrap();
        assert_eq!(names, [plain.clone(), packed.clone()]);
        // Each file is read to its end even when the reader stopped early.
        assert_eq!(counted.get(), input.bytes);
        let mut expected = Sha256::new();
        for (name, path) in [("a.jsonl", &plain), ("b.jsonl.bz2", &packed)] {
            expected.update(name.as_bytes());
            expected.update([0]);
            expected.update(std::fs::read(path).unwrap());
        }
        assert_eq!(sha, hex::encode(expected.finalize()));

        // The fingerprint follows a file's size and time, without reading it.
        let before = input.fingerprint.clone();
        assert_eq!(
            CorpusInput::inspect(dir.path()).unwrap().fingerprint,
            before
        );
        std::fs::write(&plain, b"{\"title\":\"AA\"}\n").unwrap();
        assert_ne!(
            CorpusInput::inspect(dir.path()).unwrap().fingerprint,
            before
        );
    }

    #[test]
    fn fifos_and_empty_folders_are_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = CorpusInput::inspect(&fifo).unwrap_err().to_string();
        assert!(err.contains("is a FIFO or pipe"), "{err}");
        assert_eq!(err.lines().count(), 1);
        // Inside a folder too.
        let err = CorpusInput::inspect(dir.path()).unwrap_err().to_string();
        assert!(err.contains("fifo is a FIFO"), "{err}");

        let empty = tempfile::tempdir().unwrap();
        let err = CorpusInput::inspect(empty.path()).unwrap_err().to_string();
        assert!(err.contains("holds no files"), "{err}");
    }
}
