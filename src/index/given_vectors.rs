//! Vectors taken from files instead of the encoder (`rag index --vectors-from DIR`): for a
//! scale harness that writes millions of documents through the same index writer (document
//! store, BM25, faiss, manifest, checksums) without the hours of encoding them
//! (`eval/scale/synthetic.py`). `DIR/layer-<depth>.f32` holds, for each stored depth, one row of
//! `width` little-endian f32 per document of the corpus stream, in stream order; rows are
//! renormalised as they are read, as encoded ones are.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::vectors::Matrix;

/// The file of `depth`'s rows under `dir`.
pub fn layer_file(dir: &Path, depth: usize) -> PathBuf {
    dir.join(format!("layer-{depth}.f32"))
}

/// Open row files, one per stored depth, read in step with the corpus stream.
pub struct GivenVectors {
    files: Vec<(PathBuf, BufReader<File>)>,
    width: usize,
}

impl GivenVectors {
    /// Opens `dir`'s file for each of `layers`, each positioned at row `skip` (a resumed build),
    /// checking that each holds whole rows of `width`.
    pub fn open(dir: &Path, layers: &[usize], width: usize, skip: u64) -> Result<Self> {
        let row_bytes = (width * 4) as u64;
        let files = layers
            .iter()
            .map(|&depth| {
                let path = layer_file(dir, depth);
                let mut file = File::open(&path).with_context(|| {
                    format!("--vectors-from: opening {} (layer {depth})", path.display())
                })?;
                let len = file
                    .metadata()
                    .with_context(|| format!("reading {}", path.display()))?
                    .len();
                if len % row_bytes != 0 {
                    bail!(
                        "--vectors-from: {} is {len} bytes, not whole rows of {width} f32",
                        path.display()
                    );
                }
                file.seek(SeekFrom::Start(skip * row_bytes))
                    .with_context(|| format!("seeking in {}", path.display()))?;
                Ok((path, BufReader::new(file)))
            })
            .collect::<Result<_>>()?;
        Ok(Self { files, width })
    }

    /// The next `rows` rows of every depth, each renormalised; an error if a file ends first.
    pub fn read(&mut self, rows: usize) -> Result<Vec<Matrix>> {
        let mut bytes = vec![0u8; rows * self.width * 4];
        self.files
            .iter_mut()
            .map(|(path, file)| {
                file.read_exact(&mut bytes).with_context(|| {
                    format!(
                        "--vectors-from: {} holds fewer rows than the corpus has documents",
                        path.display()
                    )
                })?;
                let data = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                    .collect();
                let mut matrix = Matrix::from_vec(rows, self.width, data);
                matrix.normalize_rows();
                Ok(matrix)
            })
            .collect()
    }

    /// Checks that every file was read to its end: a row file longer than the corpus belongs to
    /// another corpus.
    pub fn finish(mut self) -> Result<()> {
        for (path, file) in &mut self.files {
            let mut extra = [0u8; 1];
            if file
                .read(&mut extra)
                .with_context(|| format!("reading {}", path.display()))?
                > 0
            {
                bail!(
                    "--vectors-from: {} holds more rows than the corpus has documents",
                    path.display()
                );
            }
        }
        Ok(())
    }
}
