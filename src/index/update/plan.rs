//! What an update will do: the documents each part (the index, or each shard) takes in and
//! gives up, read from the given files and compared with what each part serves.

use super::*;

/// What an update will do, part by part (one for an unsharded index, one per shard).
pub(super) struct Plan {
    pub(super) parts: Vec<Changes>,
    /// For a sync, the inputs as read now, with the checksums taken while reading them.
    pub(super) corpus: Option<Vec<CorpusFile>>,
    /// A sync that would encode more than half the corpus: nothing done, a build is cheaper.
    pub(super) declined: bool,
    pub(super) encode_seconds: f64,
    pub(super) read: StreamStats,
    pub(super) new: usize,
    pub(super) changed: usize,
    pub(super) unchanged: usize,
    pub(super) removed: usize,
    /// Documents served afterwards, over all parts.
    pub(super) documents: u64,
    pub(super) removed_rows: u64,
    /// Loaded once documents are given: it cuts them, then encodes the ones added.
    pub(super) encoder: Option<Encoder>,
}

impl Plan {
    /// The changes `options` make to `parts` (a document belongs to the part its title's
    /// shard names, or to the only part).
    pub(super) fn make(
        parts: &[OpenDir],
        options: &UpdateOptions,
        corpus: Option<&[CorpusInput]>,
    ) -> Result<Self> {
        let served = parts.iter().map(Served::read).collect::<Result<Vec<_>>>()?;
        let part_of = |title: &str| match parts.len() {
            1 => 0,
            n => sharded::shard_of(title, n),
        };
        let dir = parts[0]
            .dir
            .parent()
            .filter(|_| parts.len() > 1)
            .unwrap_or(&parts[0].dir);
        let mut changes: Vec<Changes> = parts.iter().map(|_| Changes::default()).collect();
        let mut plan = Self {
            parts: Vec::new(),
            corpus: None,
            declined: false,
            encode_seconds: 0.0,
            read: StreamStats::default(),
            new: 0,
            changed: 0,
            unchanged: 0,
            removed: 0,
            documents: 0,
            removed_rows: parts.iter().map(|p| p.manifest.removed).sum(),
            encoder: None,
        };
        for title in &options.remove_titles {
            // The shard a title hashes to holds it; a title given decoded ("&amp;" as "&") can
            // name a document whose stored title hashed elsewhere.
            let found = std::iter::once(part_of(title))
                .chain(0..parts.len())
                .find_map(|part| Some((part, served[part].by_title(title)?)));
            let (part, local) = found.with_context(|| {
                format!(
                    "--remove {title:?}: no document of {} has this title",
                    dir.display()
                )
            })?;
            changes[part].remove(local);
            plan.removed += 1;
        }
        for source in &options.remove_sources {
            let mut found = 0;
            for (part, served) in served.iter().enumerate() {
                let locals = served.came_from(source);
                found += locals.len();
                locals
                    .into_iter()
                    .for_each(|local| changes[part].remove(local));
            }
            if found == 0 {
                bail!(
                    "--remove-source {}: no document of {} came from it",
                    source.display(),
                    dir.display()
                );
            }
            plan.removed += found;
        }
        let mut given = Vec::new();
        let mut digests = Vec::new();
        if !options.add.is_empty() || !options.documents.is_empty() {
            let encoder = load_encoder(options, &parts[0].manifest)?;
            (given, digests, plan.read) =
                read_additions(&encoder, options, &parts[0].manifest.template)?;
            plan.encoder = Some(encoder);
        }
        given.extend(options.documents.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        for paragraph in given {
            // The first of a title wins, as in a build.
            if !seen.insert(paragraph.title.clone()) {
                plan.read.duplicates += 1;
                continue;
            }
            let part = part_of(&paragraph.title);
            match served[part].by_title(&paragraph.title) {
                Some(local) if parts[part].document(local)? == paragraph => plan.unchanged += 1,
                Some(local) => {
                    changes[part].remove(local);
                    changes[part].add(paragraph, plan.new + plan.changed);
                    plan.changed += 1;
                }
                None => {
                    changes[part].add(paragraph, plan.new + plan.changed);
                    plan.new += 1;
                }
            }
        }
        if options.sync {
            for (part, served) in served.iter().enumerate() {
                for (&local, title) in &served.titles {
                    if !seen.contains(title) {
                        changes[part].remove(local);
                        plan.removed += 1;
                    }
                }
            }
        }
        let added: usize = changes.iter().map(|c| c.added.len()).sum();
        plan.declined = options.sync && added * 2 > seen.len();
        plan.corpus = corpus.map(|inputs| {
            inputs
                .iter()
                .zip(&digests)
                .map(|(input, sha)| CorpusFile::new(input, sha.clone()))
                .collect()
        });
        plan.documents = served.iter().map(|s| s.titles.len() as u64).sum::<u64>() + added as u64
            - changes.iter().map(|c| c.removing.len() as u64).sum::<u64>();
        plan.parts = changes;
        Ok(plan)
    }

    pub(super) fn documents_changed(&self) -> bool {
        self.parts
            .iter()
            .any(|c| !c.added.is_empty() || !c.removing.is_empty())
    }

    /// Each part's added documents' vectors, per depth, at the stored width: all of them
    /// encoded in one pass.
    pub(super) fn encode(
        &mut self,
        options: &UpdateOptions,
        manifest: &Manifest,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        let started = Instant::now();
        let added: Vec<Paragraph> = self.parts.iter().flat_map(|c| c.added.clone()).collect();
        // Dropped once used: the model's memory is not held through the rest of the update.
        let all = match (added.is_empty(), self.encoder.take()) {
            (false, Some(encoder)) => encode(&encoder, manifest, &added, options.progress)?,
            _ => vec![Vec::new(); manifest.layers.len()],
        };
        self.encode_seconds = started.elapsed().as_secs_f64();
        let width = manifest.stored_dim;
        let mut offset = 0;
        Ok(self
            .parts
            .iter()
            .map(|c| {
                let rows = offset * width..(offset + c.added.len()) * width;
                offset += c.added.len();
                all.iter()
                    .map(|depth| depth[rows.clone()].to_vec())
                    .collect()
            })
            .collect())
    }

    pub(super) fn summary(
        &self,
        index_dir: &Path,
        manifest: &Manifest,
        started: Instant,
        installed: bool,
    ) -> UpdateSummary {
        UpdateSummary {
            index_dir: index_dir.to_path_buf(),
            added: self.new,
            changed: self.changed,
            unchanged: self.unchanged,
            removed: self.removed,
            documents: manifest.documents - manifest.removed,
            removed_rows: manifest.removed,
            build_id: manifest.build_id(),
            compacted: false,
            encode_seconds: self.encode_seconds,
            total_seconds: started.elapsed().as_secs_f64(),
            up_to_date: !installed,
            declined: false,
            read: self.read.clone(),
        }
    }
}

/// What an update does to one part.
#[derive(Default)]
pub(super) struct Changes {
    /// Documents to add, in the order given, ids following the index's last.
    pub(super) added: Vec<Paragraph>,
    /// Each added document's place among all the update adds (over every part), which
    /// orders their ids as in a build of the resulting corpus.
    pub(super) order: Vec<u64>,
    /// Local ids taken out by this update.
    pub(super) removing: Vec<u64>,
}

impl Changes {
    pub(super) fn add(&mut self, paragraph: Paragraph, order: usize) {
        self.added.push(paragraph);
        self.order.push(order as u64);
    }

    pub(super) fn remove(&mut self, local: u64) {
        if !self.removing.contains(&local) {
            self.removing.push(local);
        }
    }
}

/// The served documents' titles (as stored, and decoded where that differs) and sources.
pub(super) struct Served {
    titles: HashMap<u64, String>,
    by_title: HashMap<String, u64>,
    sources: Vec<(u64, PathBuf)>,
}

impl Served {
    pub(super) fn read(part: &OpenDir) -> Result<Self> {
        let mut served = Self {
            titles: HashMap::new(),
            by_title: HashMap::new(),
            sources: Vec::new(),
        };
        for local in (0..part.documents()).filter(|&l| part.serves(l)) {
            let paragraph = part.document(local)?;
            if let Some(source) = &paragraph.source {
                served.sources.push((local, PathBuf::from(&source.path)));
            }
            let decoded = crate::corpus::decode_entities(paragraph.title.clone());
            served.by_title.entry(decoded).or_insert(local);
            served.by_title.insert(paragraph.title.clone(), local);
            served.titles.insert(local, paragraph.title);
        }
        Ok(served)
    }

    pub(super) fn by_title(&self, title: &str) -> Option<u64> {
        self.by_title.get(title).copied()
    }

    /// The documents from `source`: that file, or any file under that folder.
    pub(super) fn came_from(&self, source: &Path) -> Vec<u64> {
        let wanted = normalise(source);
        self.sources
            .iter()
            .filter(|(_, path)| normalise(path).starts_with(&wanted))
            .map(|(local, _)| *local)
            .collect()
    }
}

/// `path` without `.` components, so that `./notes/a.md` names `notes/a.md`.
pub(super) fn normalise(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// The index's encoder, at the depth and precision its documents were encoded with.
pub(super) fn load_encoder(options: &UpdateOptions, manifest: &Manifest) -> Result<Encoder> {
    let mut encoder_options = options.encoder.clone();
    encoder_options.max_layers = manifest.layers.iter().max().copied();
    encoder_options.precision = manifest.model.precision;
    let encoder = Encoder::load(&options.model_dir, &encoder_options)?;
    manifest.model.check_matches(&encoder)?;
    Ok(encoder)
}

/// The documents of `options.add`, cut as a build cuts them, and each input's sha256.
pub(super) fn read_additions(
    encoder: &Encoder,
    options: &UpdateOptions,
    template: &str,
) -> Result<(Vec<Paragraph>, Vec<String>, StreamStats)> {
    if options.add.is_empty() {
        return Ok((Vec::new(), Vec::new(), StreamStats::default()));
    }
    let inputs = options
        .add
        .iter()
        .map(|p| CorpusInput::inspect(p))
        .collect::<Result<Vec<_>>>()?;
    let chunker = Chunker::new(encoder.tokenizer(), encoder.max_length, template)?;
    let mut stream = ParagraphStream::from_inputs(inputs, options.skip_bad, Some(chunker));
    let paragraphs = stream.by_ref().collect::<Result<Vec<_>>>()?;
    let read = stream.stats().cloned().unwrap_or_default();
    Ok((paragraphs, stream.digests().to_vec(), read))
}

/// Each depth's vectors of `added`, at the stored width, row-major.
pub(super) fn encode(
    encoder: &Encoder,
    manifest: &Manifest,
    added: &[Paragraph],
    mode: ProgressMode,
) -> Result<Vec<Vec<f32>>> {
    let mut out = vec![Vec::new(); manifest.layers.len()];
    let mut bar = Progress::new(
        mode,
        "encoding",
        added.len() as u64,
        "encoding {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}]",
    );
    let mut done = 0;
    for batch in added.chunks(ENCODE_BATCH) {
        let texts: Vec<String> = batch.iter().map(|p| p.render(&manifest.template)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for (rows, matrix) in out.iter_mut().zip(encoder.encode(&refs, &manifest.layers)?) {
            let matrix = match manifest.stored_dim < matrix.cols {
                true => matrix.truncated(manifest.stored_dim),
                false => matrix,
            };
            rows.extend_from_slice(&matrix.data);
        }
        done += batch.len() as u64;
        bar.update(done, || format!("{done} documents"));
    }
    bar.finish();
    Ok(out)
}
