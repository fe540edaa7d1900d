//! faiss's file of an `IndexFlatL2` ("IxF2"): its header checked here against the manifest
//! before any vector is read, the file then read by faiss from the handle opened with the rest
//! of the index (not by path later, when a build may have put another build in its place),
//! memory-mapped for searches or read once at its exact size; and written here, in faiss's own
//! format byte for byte, a block of rows at a time. Both sides avoid a faiss index grown row
//! block by row block: it grows by doubling, so at its last growth it holds the rows one and a
//! half to three times over (a 5.2M x 384 search peaked at 20 GB for 7.6 GB of vectors).
//!
//! ```text
//! "IxF2" | d: i32 | ntotal: i64 | 2 x i64 (unused) | is_trained: u8 | metric: i32 (1 = L2)
//!        | floats: u64 (= ntotal * d) | ntotal * d x f32
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use faiss::index::io::read_index_with_flags;
use faiss::index::io_flags::IoFlags;
use faiss::index::IndexImpl;
use sha2::{Digest, Sha256};

use super::{ann_ffi, DenseIndex};

const HEADER_BYTES: u64 = 45;
const FOURCC: &[u8; 4] = b"IxF2";
const METRIC_L2: i32 = 1;
/// What faiss writes in the header's two unused fields.
const UNUSED: i64 = 1 << 20;
/// Rows hashed, checked or written at a time.
const ROWS_PER_BLOCK: usize = 16_384;

/// How a stored faiss file is held once read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residence {
    /// Memory-mapped: the vectors (and a graph's links) stay in the page cache, read as
    /// searches visit them, shared with every other process reading the file.
    Mapped,
    /// Read whole into memory, owned: for an index to be changed (faiss cannot add to a mapped
    /// one), or a server's, whose searches should not wait on page faults.
    InMemory,
}

/// faiss's reading of the index file open as `file` (named `path` in errors), from the handle.
pub(super) fn read_open(file: &File, path: &Path, residence: Residence) -> Result<IndexImpl> {
    let flags = match residence {
        Residence::InMemory => 0,
        Residence::Mapped => ann_ffi::io_flag_mmap(),
    };
    let flags = u16::try_from(flags)
        .map(|f| IoFlags::from(i32::from(f)))
        .map_err(|_| anyhow!("faiss's mmap flag {flags} does not fit the faiss crate's IoFlags"))?;
    let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    read_index_with_flags(&fd_path, flags)
        .map_err(|e| anyhow!("faiss: {e}"))
        .with_context(|| format!("reading {}", path.display()))
}

/// What loading a vector file checks of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// Nothing: a file whose seal matches (its bytes are the build's, whose vectors were
    /// checked going in), or one this process has just written.
    None,
    /// Every vector finite (a NaN would rank nowhere, an infinity first): an index that records
    /// no checksum for the file.
    Values,
    /// Every vector finite, and the whole file's sha256 for the caller to compare with the
    /// recorded one.
    ValuesAndHash,
}

/// A stored vector file, opened and its header checked.
pub struct FlatFile {
    file: File,
    path: PathBuf,
    pub dim: usize,
    pub count: u64,
}

impl FlatFile {
    /// Opens `path` and checks that its header describes `count` vectors of width `dim` and that
    /// the file is as long as that header says.
    pub fn open(path: &Path, count: u64, dim: usize) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let (header, len) = check_header(&file, path, FOURCC, "IndexFlatL2", count, dim)?;
        let floats = i64::from_le_bytes(header[37..45].try_into().expect("8 bytes"));
        if floats != dim as i64 * count as i64 {
            bail!(damaged(path, "its header is inconsistent"));
        }
        let expected = HEADER_BYTES + count * dim as u64 * 4;
        if len != expected {
            bail!(damaged(
                path,
                &format!("it has {len} bytes, its header says {expected}")
            ));
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            dim,
            count,
        })
    }

    /// Loads the vectors as `residence` says, in one allocation or none, checking what
    /// `checks` says; with the sha256 of the whole file when that includes it.
    pub fn load(
        &self,
        residence: Residence,
        checks: Checks,
    ) -> Result<(DenseIndex, Option<String>)> {
        if residence == Residence::Mapped {
            // Every use of a flat index reads all of it (a scan, a hash, a smaller size), and
            // faiss's page faults would read it from the disk a few pages a request: a cold
            // 1M x 384 search took 9.8 s mapped against 5.9 s read whole.
            let len = HEADER_BYTES + self.count * self.dim as u64 * 4;
            super::page_cache::warm(&self.file, &self.path, 0, len)?;
        }
        let index = read_open(&self.file, &self.path, residence)?
            .into_flat()
            .map_err(|_| anyhow!(damaged(&self.path, "faiss read another kind of index")))?;
        let index = DenseIndex::owning(index);
        if index.dim() != self.dim || index.len() as u64 != self.count {
            bail!(damaged(&self.path, "faiss read another index"));
        }
        if checks == Checks::None {
            return Ok((index, None));
        }
        let mut hasher = (checks == Checks::ValuesAndHash).then(Sha256::new);
        let mut header = [0u8; HEADER_BYTES as usize];
        self.file
            .read_exact_at(&mut header, 0)
            .with_context(|| format!("reading {}", self.path.display()))?;
        if let Some(hasher) = &mut hasher {
            hasher.update(header);
        }
        for (block, rows) in index
            .vectors()
            .chunks(ROWS_PER_BLOCK * self.dim)
            .enumerate()
        {
            if let Some(at) = first_not_finite(rows, self.dim) {
                let row = (block * ROWS_PER_BLOCK + at) as u64;
                bail!(damaged(&self.path, &format!("vector {row} is not finite")));
            }
            if let Some(hasher) = &mut hasher {
                let bytes = le_bytes(rows);
                hasher.update(&bytes);
                super::integrity::count_hashed(bytes.len() as u64);
            }
        }
        Ok((index, hasher.map(|h| hex::encode(h.finalize()))))
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes a flat file a block of rows at a time, byte for byte what faiss writes for an
/// `IndexFlatL2` of the same rows. A build then holds one block, not every row: a faiss index
/// grows its rows by doubling, so at its last growth the rows and their copy were both resident
/// (16 GB for 5.2M x 384, which a 24 GB machine could not build: eval/scale/README.md).
pub struct FlatFileWriter {
    out: BufWriter<File>,
    tmp: PathBuf,
    path: PathBuf,
    dim: usize,
    count: u64,
    written: u64,
}

impl FlatFileWriter {
    /// Starts the file of `count` rows of width `dim` at `path`, under a temporary name until
    /// [`Self::finish`].
    pub fn create(path: &Path, dim: usize, count: u64) -> Result<Self> {
        let tmp = path.with_extension("faiss.tmp");
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut writer = Self {
            out: BufWriter::with_capacity(1 << 22, file),
            tmp,
            path: path.to_path_buf(),
            dim,
            count,
            written: 0,
        };
        let mut header = Vec::with_capacity(HEADER_BYTES as usize);
        header.extend_from_slice(FOURCC);
        header.extend_from_slice(&(dim as i32).to_le_bytes());
        header.extend_from_slice(&(count as i64).to_le_bytes());
        header.extend_from_slice(&UNUSED.to_le_bytes());
        header.extend_from_slice(&UNUSED.to_le_bytes());
        header.push(1); // is_trained
        header.extend_from_slice(&METRIC_L2.to_le_bytes());
        header.extend_from_slice(&(count * dim as u64).to_le_bytes());
        writer.write(&header)?;
        Ok(writer)
    }

    /// Appends row-major rows; refuses one that is not finite or more rows than announced.
    pub fn write_rows(&mut self, rows: &[f32]) -> Result<()> {
        let n = (rows.len() / self.dim.max(1)) as u64;
        if rows.len() % self.dim.max(1) != 0 || self.written + n > self.count {
            bail!(
                "{}: {} values do not make rows of {} within the {} announced",
                self.path.display(),
                rows.len(),
                self.dim,
                self.count
            );
        }
        if let Some(at) = first_not_finite(rows, self.dim) {
            bail!(
                "{}: vector {} is not finite",
                self.path.display(),
                self.written + at as u64
            );
        }
        for block in rows.chunks(ROWS_PER_BLOCK * self.dim.max(1)) {
            self.write(&le_bytes(block))?;
        }
        self.written += n;
        Ok(())
    }

    /// Checks that every announced row was written, syncs the file and gives it its name.
    pub fn finish(mut self) -> Result<()> {
        if self.written != self.count {
            bail!(
                "{}: {} of {} rows written",
                self.path.display(),
                self.written,
                self.count
            );
        }
        self.out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all())
            .with_context(|| format!("writing {}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("renaming to {}", self.path.display()))
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .with_context(|| format!("writing {}", self.tmp.display()))
    }
}

/// Values as the file holds them (little-endian f32).
fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The first of row-major vectors of width `dim` holding a NaN or an infinity: either would
/// rank silently wrong (a NaN nowhere, an infinity first).
pub fn first_not_finite(vectors: &[f32], dim: usize) -> Option<usize> {
    vectors
        .iter()
        .position(|v| !v.is_finite())
        .map(|at| at / dim.max(1))
}

/// Checks the common header faiss writes at the start of every index file (its fourcc, then
/// `d: i32 | ntotal: i64 | 2 x i64 | is_trained: u8 | metric: i32`) against the vectors the
/// index must hold; returns the header's bytes and the file's length.
pub(super) fn check_header(
    file: &File,
    path: &Path,
    fourcc: &[u8; 4],
    kind: &str,
    count: u64,
    dim: usize,
) -> Result<([u8; HEADER_BYTES as usize], u64)> {
    let len = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let mut header = [0u8; HEADER_BYTES as usize];
    if len < HEADER_BYTES || file.read_exact_at(&mut header, 0).is_err() {
        bail!(damaged(path, &format!("it has only {len} bytes")));
    }
    let int = |at: usize| i32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let long = |at: usize| i64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    if &header[..4] != fourcc || int(33) != METRIC_L2 {
        bail!(damaged(path, &format!("it is not a faiss {kind} file")));
    }
    let (file_dim, file_count) = (int(4), long(8));
    if file_dim <= 0 || file_count < 0 {
        bail!(damaged(path, "its header is inconsistent"));
    }
    let (file_dim, file_count) = (file_dim as usize, file_count as u64);
    if file_count != count || file_dim != dim {
        bail!(damaged(
            path,
            &format!(
                "it holds {file_count} vectors of {file_dim} dimensions, the index has {count} documents of {dim}"
            )
        ));
    }
    Ok((header, len))
}

/// The one-line error for an index file that is not what the manifest describes.
pub fn damaged(path: &Path, why: &str) -> String {
    format!(
        "{} is damaged ({why}); rebuild the index with `rag index --fresh`",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::Matrix;

    fn random_unit_rows(count: u64, dim: usize, seed: u64) -> Matrix {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut m = Matrix::from_vec(
            count as usize,
            dim,
            (0..count as usize * dim).map(|_| rng.f32() - 0.5).collect(),
        );
        m.normalize_rows();
        m
    }

    #[test]
    fn reads_what_faiss_wrote_and_refuses_a_file_that_disagrees_with_the_index() {
        let mut m = Matrix::from_vec(3, 2, vec![1.0, 0.0, 0.6, 0.8, 0.0, 1.0]);
        m.normalize_rows();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.faiss");
        DenseIndex::from_matrix(&m).unwrap().save(&path).unwrap();

        for residence in [Residence::Mapped, Residence::InMemory] {
            let file = FlatFile::open(&path, 3, 2).unwrap();
            let (loaded, sha) = file.load(residence, Checks::ValuesAndHash).unwrap();
            assert_eq!(loaded.vectors(), &m.data[..]);
            assert_eq!(sha.unwrap(), crate::files::sha256_file(&path).unwrap());
            for checks in [Checks::Values, Checks::None] {
                assert!(file.load(residence, checks).unwrap().1.is_none());
            }
        }

        for (count, dim, says) in [(4, 2, "holds 3 vectors"), (3, 4, "of 2 dimensions")] {
            let err = FlatFile::open(&path, count, dim).err().unwrap().to_string();
            assert!(err.contains(says) && err.contains("x.faiss"), "{err}");
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        let err = FlatFile::open(&path, 3, 2).err().unwrap().to_string();
        assert!(err.contains("bytes") && err.contains("rebuild"), "{err}");
        std::fs::write(&path, b"not faiss").unwrap();
        assert!(FlatFile::open(&path, 3, 2).is_err());
    }

    /// Rows written block by block give faiss's own file of them, byte for byte; a file short
    /// of rows, a row too many or a vector that is not finite is refused and never named.
    #[test]
    fn the_streamed_file_is_the_one_faiss_writes() {
        let (count, dim) = (1000u64, 24usize);
        let m = random_unit_rows(count, dim, 53);
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("faiss.faiss");
        DenseIndex::from_matrix(&m).unwrap().save(&theirs).unwrap();
        let ours = dir.path().join("ours.faiss");
        let mut writer = FlatFileWriter::create(&ours, dim, count).unwrap();
        for block in m.data.chunks(dim * 333) {
            writer.write_rows(block).unwrap();
        }
        writer.finish().unwrap();
        assert_eq!(
            std::fs::read(&ours).unwrap(),
            std::fs::read(&theirs).unwrap()
        );

        let short = dir.path().join("short.faiss");
        let mut writer = FlatFileWriter::create(&short, dim, count).unwrap();
        writer.write_rows(&m.data[..dim * 10]).unwrap();
        assert!(writer.write_rows(&m.data[..dim - 1]).is_err());
        assert!(writer
            .finish()
            .unwrap_err()
            .to_string()
            .contains("10 of 1000 rows"));
        let mut writer = FlatFileWriter::create(&short, dim, 2).unwrap();
        assert!(writer.write_rows(&m.data[..dim * 3]).is_err());
        let mut bad = m.data[..dim * 2].to_vec();
        bad[dim + 5] = f32::NAN;
        let err = writer.write_rows(&bad).unwrap_err().to_string();
        assert!(err.contains("vector 1 is not finite"), "{err}");
        assert!(!short.exists());
    }

    /// The line of /proc/self/maps whose mapping holds `address` (it ends with the mapped
    /// file's path, if any).
    fn mapping_at(address: usize) -> Option<String> {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .find(|line| {
                let range = line.split_whitespace().next().unwrap_or("");
                range.split_once('-').is_some_and(|(from, to)| {
                    let bound = |h| usize::from_str_radix(h, 16).unwrap_or(0);
                    (bound(from)..bound(to)).contains(&address)
                })
            })
            .map(str::to_string)
    }

    /// A mapped load searches the file's own pages, a whole one a copy; either is one faiss
    /// read from the handle opened with the index, so a file put in its place since is not the
    /// one read. A non-finite vector is refused unless the caller vouches for the file (sealed),
    /// with or without a checksum to compare.
    #[test]
    fn a_mapped_load_reads_the_opened_file_in_place() {
        let (count, dim) = (40_000u64, 16usize);
        let m = random_unit_rows(count, dim, 57);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.faiss");
        let mut writer = FlatFileWriter::create(&path, dim, count).unwrap();
        writer.write_rows(&m.data).unwrap();
        writer.finish().unwrap();
        let file = FlatFile::open(&path, count, dim).unwrap();
        let other = Matrix::from_vec(count as usize, dim, vec![0.25; count as usize * dim]);
        DenseIndex::from_matrix(&other)
            .unwrap()
            .save(&path)
            .unwrap();

        let (mapped, _) = file.load(Residence::Mapped, Checks::None).unwrap();
        let (whole, _) = file.load(Residence::InMemory, Checks::None).unwrap();
        assert_eq!(mapped.vectors(), &m.data[..]);
        assert_eq!(whole.vectors(), &m.data[..]);
        let at = |index: &DenseIndex| mapping_at(index.vectors().as_ptr() as usize);
        assert!(
            at(&mapped).unwrap().ends_with("v.faiss (deleted)"),
            "{:?}",
            at(&mapped)
        );
        assert!(!at(&whole).unwrap_or_default().contains("v.faiss"));
        let query = &m.data[dim * 123..dim * 124];
        assert_eq!(
            mapped.search(query, 5).unwrap(),
            whole.search(query, 5).unwrap()
        );
        assert_eq!(mapped.search(query, 1).unwrap()[0].0, 123);

        let mut bad = m.data.clone();
        bad[dim * 39_000 + 3] = f32::INFINITY;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(HEADER_BYTES as usize);
        bytes.extend(le_bytes(&bad));
        std::fs::write(&path, &bytes).unwrap();
        let file = FlatFile::open(&path, count, dim).unwrap();
        for residence in [Residence::Mapped, Residence::InMemory] {
            for checks in [Checks::Values, Checks::ValuesAndHash] {
                let err = file.load(residence, checks).err().unwrap().to_string();
                assert!(err.contains("vector 39000 is not finite"), "{err}");
            }
            assert!(file.load(residence, Checks::None).is_ok());
        }
    }
}
