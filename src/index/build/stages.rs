//! What a build makes from its encoded checkpoint: BM25, the title links, and each depth's
//! faiss files (through a PCA with `--reduce`).

use super::*;
use crate::index::flat_file::{Checks, FlatFile, FlatFileWriter, Residence};

/// Each depth's stored vectors (and graph) from the checkpointed ones, through a PCA fitted
/// here with `--reduce`: the reduction, if any, as the manifest records it.
pub(super) fn build_vectors(
    work: &Path,
    checkpoint: &mut Checkpoint,
    layers: &[usize],
    (width, encoded_width): (usize, usize),
    documents: u64,
    options: &BuildOptions,
) -> Result<Option<StoredReduction>> {
    let mut transforms = BTreeMap::new();
    for &depth in layers {
        let stage = stage_dense(depth, options);
        if checkpoint.finished.contains(&stage) {
            if options.reduce.is_some() {
                transforms.insert(depth, pca_file(depth));
            }
            continue;
        }
        let pca = match options.reduce {
            Some(spec) => {
                let pca = fit_pca(work, depth, width, documents, spec)
                    .with_context(|| format!("--reduce {spec} on layer {depth}"))?;
                let file = pca_file(depth);
                create_dir(&work.join("pca"))?;
                pca.save(&work.join(&file))?;
                transforms.insert(depth, file);
                Some(pca)
            }
            None => None,
        };
        build_dense(
            work,
            depth,
            encoded_width,
            pca.as_ref(),
            documents,
            options.ann,
        )?;
        checkpoint.finish(work, stage)?;
    }
    Ok(options.reduce.map(|method| StoredReduction {
        method,
        fitted_on: documents.min(PCA_SAMPLE_LIMIT as u64),
        transforms,
    }))
}

/// BM25 and the title links, unless the checkpoint has them already.
pub(super) fn build_lexical(
    work: &Path,
    checkpoint: &mut Checkpoint,
    documents: u64,
    mode: ProgressMode,
) -> Result<()> {
    if !checkpoint.finished.contains(&stage_bm25()) {
        build_bm25(work, documents, mode)?;
        checkpoint.finish(work, stage_bm25())?;
    }
    if !checkpoint.finished.contains(&stage_links()) {
        let ids_path = work.join(sharded::IDS_FILE);
        let ids = match ids_path.exists() {
            true => Some(sharded::read_ids(&ids_path)?),
            false => None,
        };
        links::write_for_store(work, ids.as_deref(), &Removed::default())?;
        checkpoint.finish(work, stage_links())?;
    }
    Ok(())
}

fn build_bm25(work: &Path, documents: u64, mode: ProgressMode) -> Result<()> {
    let dir = work.join("bm25");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).context("removing partial BM25 index")?;
    }
    let store = DocStore::open(work)?;
    let ids_path = work.join(sharded::IDS_FILE);
    let ids = match ids_path.exists() {
        true => sharded::read_ids(&ids_path)?,
        false => (0..documents).collect(),
    };
    let mut bar = Progress::new(
        mode,
        "BM25",
        documents,
        "BM25 {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}]",
    );
    let mut done = 0;
    let documents_with_ids = ids
        .into_iter()
        .zip(store.iter())
        .map(|(id, paragraph)| Ok((id, paragraph?)));
    bm25::build(&dir, documents_with_ids, || {
        done += 1;
        bar.update(done, || format!("{done}/{documents} paragraphs"));
    })?;
    bar.finish();
    Ok(())
}

/// Calls `f` on the checkpointed vectors of one depth, `ROWS_PER_BLOCK` rows at a time, after
/// checking that the file holds exactly `documents` of them.
pub(super) fn for_each_block(
    work: &Path,
    depth: usize,
    width: usize,
    documents: u64,
    mut f: impl FnMut(Matrix) -> Result<()>,
) -> Result<()> {
    let path = vectors_file(work, depth);
    let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let expected = documents * width as u64 * 4;
    if file.metadata()?.len() != expected {
        bail!(
            "{} does not hold {documents} vectors; rebuild with --fresh",
            path.display()
        );
    }
    let mut reader = BufReader::with_capacity(1 << 22, file);
    let mut buf = vec![0u8; ROWS_PER_BLOCK * width * 4];
    let mut remaining = documents as usize;
    while remaining > 0 {
        let rows = remaining.min(ROWS_PER_BLOCK);
        let bytes = &mut buf[..rows * width * 4];
        reader
            .read_exact(bytes)
            .with_context(|| format!("reading {}", path.display()))?;
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        f(Matrix::from_vec(rows, width, floats))?;
        remaining -= rows;
    }
    Ok(())
}

/// Fits one depth's PCA on its checkpointed vectors: all of them, or [`PCA_SAMPLE_LIMIT`]
/// evenly spaced ones.
pub(super) fn fit_pca(
    work: &Path,
    depth: usize,
    width: usize,
    documents: u64,
    spec: PcaSpec,
) -> Result<Pca> {
    let sample_size = documents.min(PCA_SAMPLE_LIMIT as u64);
    let mut sample = Vec::with_capacity(sample_size as usize * width);
    let mut row = 0u64;
    for_each_block(work, depth, width, documents, |block| {
        for i in 0..block.rows {
            // Row r is taken when r * sample_size / documents reaches a new integer: exactly
            // `sample_size` rows, spread over the whole corpus.
            if (row + 1) * sample_size / documents > row * sample_size / documents {
                sample.extend_from_slice(block.row(i));
            }
            row += 1;
        }
        Ok(())
    })?;
    Pca::fit(
        &Matrix::from_vec(sample_size as usize, width, sample),
        spec.dim,
    )
}

pub(super) fn build_dense(
    work: &Path,
    depth: usize,
    width: usize,
    pca: Option<&Pca>,
    documents: u64,
    ann: AnnSpec,
) -> Result<()> {
    create_dir(&work.join("dense"))?;
    let stored_dim = pca.map_or(width, Pca::output_dim);
    let path = dense_file(work, depth, stored_dim);
    let mut file = FlatFileWriter::create(&path, stored_dim, documents)?;
    for_each_block(work, depth, width, documents, |block| match pca {
        Some(pca) => file.write_rows(&pca.reduce(&block)?.data),
        None => file.write_rows(&block.data),
    })?;
    file.finish()?;
    match ann {
        AnnSpec::Flat => Ok(()),
        // The graph keeps its own copy of the rows, so they are in memory here once whatever.
        AnnSpec::Hnsw { m } => {
            let (index, _) = FlatFile::open(&path, documents, stored_dim)?
                .load(Residence::Mapped, Checks::None)?;
            HnswIndex::build(&index, m)
                .with_context(|| format!("--ann {ann} on layer {depth}"))?
                .save(&hnsw_file(work, depth, stored_dim))
        }
    }
}
