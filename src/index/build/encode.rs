//! Encoding the corpus into the checkpoint: the document store and each depth's vectors, a
//! chunk at a time, fsynced before `progress.json` says so.

use super::*;

pub(super) fn encode_corpus(
    encoder: &Encoder,
    work: &Path,
    mut checkpoint: Checkpoint,
    inputs: &[CorpusInput],
    options: &BuildOptions,
) -> Result<(Checkpoint, CorpusCounts)> {
    let layers = checkpoint.plan.layers.clone();
    let hidden = encoder.hidden_size();
    let width = checkpoint.plan.encoded_width.unwrap_or(hidden);
    let row_bytes = (width * 4) as u64;
    let done = checkpoint.docstore.documents;
    let mut docs = DocStoreWriter::open_at(work, checkpoint.docstore)?;
    let mut vector_files = layers
        .iter()
        .map(|&depth| {
            open_truncated(&vectors_file(work, depth), done * row_bytes).map(BufWriter::new)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut given = match &options.vectors_from {
        Some(dir) => Some(GivenVectors::open(dir, &layers, width, done)?),
        None => None,
    };
    let mut ids_file = match options.shard {
        Some(_) => Some(BufWriter::new(open_truncated(
            &work.join(sharded::IDS_FILE),
            done * 8,
        )?)),
        None => None,
    };

    let mut stream = BuildDocuments {
        stream: ParagraphStream::from_inputs(
            inputs.to_vec(),
            options.skip_bad,
            Some(Chunker::new(
                encoder.tokenizer(),
                encoder.max_length,
                &checkpoint.plan.template,
            )?),
        ),
        shard: options.shard,
        position: 0,
    };
    for skipped in 0..done {
        match stream.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => bail!("the corpus has fewer paragraphs ({skipped}) than the checkpoint ({done}); rebuild with --fresh"),
        }
    }

    let total_bytes: u64 = checkpoint.plan.corpus.iter().map(|c| c.bytes).sum();
    let mut bar = Progress::new(
        options.progress,
        "encoding",
        total_bytes,
        "encoding {bar:30} {percent:>3}% {msg} [{elapsed_precise} < {eta_precise}]",
    );
    let started = Instant::now();
    let mut encoded = 0u64;
    loop {
        let (chunk_ids, chunk): (Vec<u64>, Vec<Paragraph>) = stream
            .by_ref()
            .take(options.chunk_size.max(1))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        if chunk.is_empty() {
            break;
        }
        let vectors = match given.as_mut() {
            Some(given) => given.read(chunk.len())?,
            None => {
                let texts: Vec<String> = chunk
                    .iter()
                    .map(|p| p.render(&checkpoint.plan.template))
                    .collect();
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                encoder.encode(&refs, &layers)?
            }
        };
        for paragraph in &chunk {
            docs.append(paragraph)?;
        }
        for (file, matrix) in vector_files.iter_mut().zip(vectors) {
            // The first `width` dims, renormalised: the ESE way to a smaller size.
            let matrix = match width < matrix.cols {
                true => matrix.truncated(width),
                false => matrix,
            };
            write_f32s(file, &matrix.data)?;
            file.flush()?;
            file.get_ref().sync_data()?;
        }
        if let Some(file) = ids_file.as_mut() {
            let bytes: Vec<u8> = chunk_ids.iter().flat_map(|id| id.to_le_bytes()).collect();
            file.write_all(&bytes).context("writing document ids")?;
            file.flush()?;
            file.get_ref().sync_data()?;
        }
        checkpoint.docstore = docs.sync()?;
        files::write_json_atomic(&work.join(PROGRESS_FILE), &checkpoint)?;

        encoded += chunk.len() as u64;
        bar.update(stream.stream.bytes_read(), || {
            format!(
                "{} paragraphs, {:.1}/s",
                checkpoint.docstore.documents,
                encoded as f64 / started.elapsed().as_secs_f64().max(1e-9)
            )
        });
    }
    bar.finish();
    if let Some(given) = given {
        given.finish()?;
    }
    let stats = stream.stream.stats().context("corpus stream ended early")?;
    let counts = CorpusCounts::from(stats);
    checkpoint.encoded = Some(counts.clone());
    checkpoint.corpus_documents = stats.paragraphs as u64;
    // Taken as the stream read the corpus: the build reads it once.
    checkpoint.corpus = inputs
        .iter()
        .zip(stream.stream.digests())
        .map(|(input, sha)| CorpusFile::new(input, sha.clone()))
        .collect();
    files::write_json_atomic(&work.join(PROGRESS_FILE), &checkpoint)?;
    Ok((checkpoint, counts))
}

/// The corpus's documents that go into this build, each with its global id (its position in the
/// deduplicated corpus): all of them, or a shard's.
pub(super) struct BuildDocuments {
    stream: ParagraphStream,
    shard: Option<ShardSpec>,
    position: u64,
}

impl Iterator for BuildDocuments {
    type Item = Result<(u64, Paragraph)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let paragraph = match self.stream.next()? {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            let id = self.position;
            self.position += 1;
            if self.shard.is_none_or(|shard| shard.owns(&paragraph.title)) {
                return Some(Ok((id, paragraph)));
            }
        }
    }
}

pub(super) fn write_f32s(out: &mut impl Write, values: &[f32]) -> Result<()> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    out.write_all(&bytes).context("writing vectors")
}
