//! Semantic textual similarity, the ESE paper's intrinsic benchmark (its Table 1 and Figure 3):
//! Spearman's correlation (x100) between the cosine similarity of two sentences' embeddings and
//! the human scores, on STS12-16, STS-B test and SICK-R test, for every layer x size of an
//! encoder. STS12-16 follow SentEval's "all" setting as AnglE and SimCSE report it: every subset
//! of a year pooled into one list of pairs, pairs without a gold score left out.
//!
//! A size k is the first k dimensions of a layer's pooled vector, L2-normalised again (the ESE
//! way). With `pca`, rows for a post-hoc PCA per layer are added beside them: the top k
//! principal components, L2-normalised again. That PCA is fitted on the very sentences being
//! evaluated (all datasets together, each distinct sentence once), which gives it the best case
//! a post-hoc reduction can have: no domain shift between what it was fitted on and what it
//! reduces.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::heatmap::{self, Panel};
use crate::encoder::{Encoder, Pooling};
use crate::index::manifest::model_name;
use crate::index::Pca;
use crate::progress::{Progress, ProgressMode};
use crate::util;
use crate::vectors::{cosine, Matrix};

/// Sentences per encoder call: one progress step, each encoded once to the deepest layer.
const ENCODE_CHUNK: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StsDataset {
    Sts12,
    Sts13,
    Sts14,
    Sts15,
    Sts16,
    #[value(alias = "sts-b")]
    Stsb,
    #[value(alias = "sick-r")]
    Sickr,
}

/// A tab-separated test file: where it is under `sts/`, the 0-based columns of the score and
/// the two sentences, and how its header line starts, if it has one.
struct TsvLayout {
    file: &'static str,
    score: usize,
    first: usize,
    second: usize,
    header: Option<&'static str>,
}

const STSB_TEST: TsvLayout = TsvLayout {
    file: "stsbenchmark/sts-test.csv",
    score: 4,
    first: 5,
    second: 6,
    header: None,
};

const SICK_TEST: TsvLayout = TsvLayout {
    file: "SICK/SICK_test_annotated.txt",
    score: 3,
    first: 1,
    second: 2,
    header: Some("pair_ID"),
};

impl StsDataset {
    /// In the order of the paper's tables.
    pub const ALL: [StsDataset; 7] = [
        StsDataset::Sts12,
        StsDataset::Sts13,
        StsDataset::Sts14,
        StsDataset::Sts15,
        StsDataset::Sts16,
        StsDataset::Stsb,
        StsDataset::Sickr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StsDataset::Sts12 => "STS12",
            StsDataset::Sts13 => "STS13",
            StsDataset::Sts14 => "STS14",
            StsDataset::Sts15 => "STS15",
            StsDataset::Sts16 => "STS16",
            StsDataset::Stsb => "STS-B",
            StsDataset::Sickr => "SICK-R",
        }
    }

    /// The test pairs, from `sts_dir` laid out as in `../shared/data/sts/`.
    pub fn load(self, sts_dir: &Path) -> Result<StsPairs> {
        match self {
            StsDataset::Stsb => read_tsv(sts_dir, &STSB_TEST),
            StsDataset::Sickr => read_tsv(sts_dir, &SICK_TEST),
            year => read_senteval_year(&sts_dir.join(format!("{}-en-test", year.name()))),
        }
    }
}

impl fmt::Display for StsDataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sentence pairs with their gold similarity scores, and the files they came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StsPairs {
    pub pairs: Vec<(String, String)>,
    pub gold: Vec<f64>,
    pub files: Vec<PathBuf>,
}

impl StsPairs {
    fn push(&mut self, first: &str, second: &str, score: f64) {
        self.pairs.push((first.to_string(), second.to_string()));
        self.gold.push(score);
    }
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn parse_score(field: &str, path: &Path, line: usize) -> Result<f64> {
    field
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|score| score.is_finite())
        .with_context(|| format!("{}:{line}: score '{field}' is not a number", path.display()))
}

/// One pair per line of a tab-separated file (STS-B, SICK); blank lines are skipped, and so is a
/// header line. Extra columns after the ones used are ignored (some STS-B lines carry them).
fn read_tsv(sts_dir: &Path, layout: &TsvLayout) -> Result<StsPairs> {
    let path = &sts_dir.join(layout.file);
    let text = read_text(path)?;
    let needed = layout.score.max(layout.first).max(layout.second) + 1;
    let mut out = StsPairs {
        files: vec![path.to_path_buf()],
        ..Default::default()
    };
    for (i, line) in text.lines().enumerate() {
        let is_header = i == 0 && layout.header.is_some_and(|h| line.starts_with(h));
        if is_header || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < needed {
            bail!(
                "{}:{}: expected at least {needed} tab-separated fields, found {}",
                path.display(),
                i + 1,
                fields.len()
            );
        }
        let score = parse_score(fields[layout.score], path, i + 1)?;
        out.push(fields[layout.first], fields[layout.second], score);
    }
    if out.pairs.is_empty() {
        bail!("{} has no sentence pairs", path.display());
    }
    Ok(out)
}

/// A SentEval year (`STS12-en-test/` ...): every `STS.input.<subset>.txt` (two tab-separated
/// sentences a line) with its `STS.gs.<subset>.txt` (the score on the same line, or nothing for
/// an unscored pair), pooled in the order of the subsets' names.
fn read_senteval_year(dir: &Path) -> Result<StsPairs> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut subsets: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some(
                name.strip_prefix("STS.input.")?
                    .strip_suffix(".txt")?
                    .to_string(),
            )
        })
        .collect();
    subsets.sort();
    if subsets.is_empty() {
        bail!("{} has no STS.input.*.txt files", dir.display());
    }
    let mut out = StsPairs::default();
    for subset in subsets {
        let input = dir.join(format!("STS.input.{subset}.txt"));
        let gold = dir.join(format!("STS.gs.{subset}.txt"));
        let (sentences, scores) = (read_text(&input)?, read_text(&gold)?);
        let (sentences, scores): (Vec<&str>, Vec<&str>) =
            (sentences.lines().collect(), scores.lines().collect());
        if sentences.len() != scores.len() {
            bail!(
                "{} has {} lines but {} has {}: they must pair up line by line",
                input.display(),
                sentences.len(),
                gold.display(),
                scores.len()
            );
        }
        for (i, (pair, score)) in sentences.iter().zip(&scores).enumerate() {
            if score.trim().is_empty() {
                continue;
            }
            let score = parse_score(score, &gold, i + 1)?;
            let fields: Vec<&str> = pair.split('\t').collect();
            if fields.len() != 2 {
                bail!(
                    "{}:{}: expected two tab-separated sentences, found {} fields",
                    input.display(),
                    i + 1,
                    fields.len()
                );
            }
            out.push(fields[0], fields[1], score);
        }
        out.files.extend([input, gold]);
    }
    if out.pairs.is_empty() {
        bail!("{} has no scored sentence pairs", dir.display());
    }
    Ok(out)
}

/// Spearman's rank correlation: Pearson's correlation of the ranks, tied values sharing the
/// average of their ranks (as scipy's `spearmanr`). NaN when either side is constant.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len(), "spearman needs paired values");
    pearson(&ranks(x), &ranks(y))
}

/// 1-based ranks, ties getting the mean of the ranks they span.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Sorted positions start..end hold one value: ranks start+1 ..= end, averaged.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    sxy / (sxx * syy).sqrt()
}

/// How a layer's vectors are cut down to a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// The first k dimensions (ESE); always evaluated.
    #[value(skip)]
    Truncate,
    /// The top k principal components of the layer's vectors.
    Pca,
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reduction::Truncate => "truncation",
            Reduction::Pca => "PCA",
        })
    }
}

#[derive(Debug, Clone)]
pub struct StsOptions {
    /// The folder holding `sts/` (`../shared/data`).
    pub data_dir: PathBuf,
    pub datasets: Vec<StsDataset>,
    /// Depths to evaluate; `None` is every layer the encoder has loaded.
    pub layers: Option<Vec<usize>>,
    /// Sizes to evaluate; `None` is [`default_dims`].
    pub dims: Option<Vec<usize>>,
    /// Add PCA rows beside the truncation ones.
    pub pca: bool,
    pub progress: ProgressMode,
}

/// 32, 64, 128, ... below the model's width, and the full width.
pub fn default_dims(width: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = std::iter::successors(Some(32), |d| Some(d * 2))
        .take_while(|&d| d < width)
        .collect();
    dims.push(width);
    dims
}

#[derive(Debug, Clone, Serialize)]
pub struct DatasetSummary {
    pub name: &'static str,
    pub pairs: usize,
    pub files: Vec<PathBuf>,
}

/// Spearman x100 per dataset, and their mean.
#[derive(Debug, Clone, Serialize)]
pub struct Correlations {
    pub per_dataset: BTreeMap<String, f64>,
    pub average: f64,
}

/// One layer, size and reduction.
#[derive(Debug, Clone, Serialize)]
pub struct StsCell {
    pub layer: usize,
    pub dim: usize,
    pub method: Reduction,
    #[serde(flatten)]
    pub spearman: Correlations,
}

/// The paper's "< Avg": the cells of the shallow layers (every evaluated layer but the model's
/// last) averaged, per size and reduction.
#[derive(Debug, Clone, Serialize)]
pub struct ShallowAverage {
    pub layers: Vec<usize>,
    pub dim: usize,
    pub method: Reduction,
    #[serde(flatten)]
    pub spearman: Correlations,
}

#[derive(Debug, Clone, Serialize)]
pub struct StsReport {
    pub model: String,
    pub model_path: PathBuf,
    /// Layers the checkpoint has: the last one is the full model, the others are "shallow".
    pub model_layers: usize,
    pub hidden_size: usize,
    pub pooling: Pooling,
    pub datasets: Vec<DatasetSummary>,
    /// Distinct sentences encoded.
    pub sentences: usize,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    pub methods: Vec<Reduction>,
    pub cells: Vec<StsCell>,
    pub shallow: Vec<ShallowAverage>,
    pub encode_seconds: f64,
    pub seconds: f64,
}

/// A dataset's pairs as rows of the shared sentence table.
struct IndexedPairs {
    name: &'static str,
    pairs: Vec<(usize, usize)>,
    gold: Vec<f64>,
}

/// Encodes every distinct sentence of `options.datasets` once, to the deepest requested layer,
/// and scores every layer x size (x reduction).
pub fn evaluate(encoder: &Encoder, options: &StsOptions) -> Result<StsReport> {
    let started = Instant::now();
    let width = encoder.hidden_size();
    let mut layers = options
        .layers
        .clone()
        .unwrap_or_else(|| (1..=encoder.depth()).collect());
    layers.sort();
    layers.dedup();
    if layers.is_empty() {
        bail!("no layers to evaluate");
    }
    encoder.check_depths(&layers)?;
    let mut dims = options.dims.clone().unwrap_or_else(|| default_dims(width));
    dims.sort();
    dims.dedup();
    match dims.iter().find(|&&d| d == 0 || d > width) {
        Some(bad) => bail!(
            "--dims {bad} is outside 1..={width}, the width of {}",
            encoder.model_dir.display()
        ),
        None if dims.is_empty() => bail!("no sizes to evaluate"),
        None => {}
    }
    let mut datasets: Vec<StsDataset> = Vec::new();
    for &d in &options.datasets {
        if !datasets.contains(&d) {
            datasets.push(d);
        }
    }
    if datasets.is_empty() {
        bail!("no datasets to evaluate");
    }
    let sts_dir = options.data_dir.join("sts");
    if !sts_dir.is_dir() {
        bail!(
            "no STS data at {} (pass --data-dir or set RAG_DATA to the folder that holds sts/)",
            sts_dir.display()
        );
    }

    let mut sentences: Vec<String> = Vec::new();
    let mut row_of: HashMap<String, usize> = HashMap::new();
    let mut row = |sentence: &str| {
        *row_of.entry(sentence.to_string()).or_insert_with(|| {
            sentences.push(sentence.to_string());
            sentences.len() - 1
        })
    };
    let mut indexed = Vec::new();
    let mut summaries = Vec::new();
    for dataset in datasets {
        let loaded = dataset.load(&sts_dir)?;
        indexed.push(IndexedPairs {
            name: dataset.name(),
            pairs: loaded.pairs.iter().map(|(a, b)| (row(a), row(b))).collect(),
            gold: loaded.gold,
        });
        summaries.push(DatasetSummary {
            name: dataset.name(),
            pairs: loaded.pairs.len(),
            files: loaded.files,
        });
    }

    let encode_started = Instant::now();
    let vectors = encode_sentences(encoder, &sentences, &layers, options.progress)?;
    let encode_seconds = encode_started.elapsed().as_secs_f64();

    let mut methods = vec![Reduction::Truncate];
    if options.pca {
        methods.push(Reduction::Pca);
    }
    let widest = *dims.last().expect("dims checked non-empty");
    let mut cells = Vec::new();
    for (&layer, full) in layers.iter().zip(&vectors) {
        for &method in &methods {
            // The components come strongest first, so one PCA to the widest size serves every
            // smaller size by truncation.
            let reduced = match method {
                Reduction::Truncate => full.clone(),
                Reduction::Pca => Pca::fit(full, widest)
                    .and_then(|pca| pca.reduce(full))
                    .with_context(|| format!("PCA of layer {layer}"))?,
            };
            for &dim in &dims {
                let vectors = reduced.truncated(dim);
                let per_dataset = indexed
                    .iter()
                    .map(|d| (d.name.to_string(), score(&vectors, d)))
                    .collect();
                cells.push(StsCell {
                    layer,
                    dim,
                    method,
                    spearman: Correlations::of(per_dataset),
                });
            }
        }
    }
    let model_layers = encoder.config().num_hidden_layers;
    let shallow = shallow_averages(&cells, &dims, &methods, model_layers);
    Ok(StsReport {
        model: model_name(&encoder.model_dir),
        model_path: encoder.model_dir.clone(),
        model_layers,
        hidden_size: width,
        pooling: encoder.pooling,
        datasets: summaries,
        sentences: sentences.len(),
        layers,
        dims,
        methods,
        cells,
        shallow,
        encode_seconds,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Full-width vectors of `sentences` at each of `layers`, one forward pass per chunk.
fn encode_sentences(
    encoder: &Encoder,
    sentences: &[String],
    layers: &[usize],
    progress: ProgressMode,
) -> Result<Vec<Matrix>> {
    let width = encoder.hidden_size();
    let mut data: Vec<Vec<f32>> = layers
        .iter()
        .map(|_| Vec::with_capacity(sentences.len() * width))
        .collect();
    let total = sentences.len();
    let mut bar = Progress::new(
        progress,
        "encoding",
        total as u64,
        "encoding {bar:30} {pos}/{len} sentences {msg} [{elapsed_precise} < {eta_precise}]",
    );
    let started = Instant::now();
    let mut done = 0;
    for chunk in sentences.chunks(ENCODE_CHUNK) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for (layer, matrix) in data.iter_mut().zip(encoder.encode(&refs, layers)?) {
            layer.extend_from_slice(&matrix.data);
        }
        done += chunk.len();
        bar.update(done as u64, || {
            format!(
                "{done}/{total} sentences, {:.0}/s",
                done as f64 / started.elapsed().as_secs_f64().max(1e-9)
            )
        });
    }
    bar.finish();
    Ok(data
        .into_iter()
        .map(|d| Matrix::from_vec(total, width, d))
        .collect())
}

fn score(vectors: &Matrix, dataset: &IndexedPairs) -> f64 {
    let similarities: Vec<f64> = dataset
        .pairs
        .iter()
        .map(|&(a, b)| f64::from(cosine(vectors.row(a), vectors.row(b))))
        .collect();
    100.0 * spearman(&similarities, &dataset.gold)
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    sum / n.max(1) as f64
}

impl Correlations {
    fn of(per_dataset: BTreeMap<String, f64>) -> Self {
        Self {
            average: mean(per_dataset.values().copied()),
            per_dataset,
        }
    }

    /// The element-wise mean of several cells' correlations.
    fn mean_of(all: &[&Correlations]) -> Self {
        let per_dataset = all[0]
            .per_dataset
            .keys()
            .map(|name| (name.clone(), mean(all.iter().map(|c| c.per_dataset[name]))))
            .collect();
        Self {
            per_dataset,
            average: mean(all.iter().map(|c| c.average)),
        }
    }

    fn stsb(&self) -> f64 {
        self.per_dataset
            .get(StsDataset::Stsb.name())
            .copied()
            .unwrap_or(f64::NAN)
    }

    fn average(&self) -> f64 {
        self.average
    }
}

fn shallow_averages(
    cells: &[StsCell],
    dims: &[usize],
    methods: &[Reduction],
    model_layers: usize,
) -> Vec<ShallowAverage> {
    let mut out = Vec::new();
    for &method in methods {
        for &dim in dims {
            let shallow: Vec<&StsCell> = cells
                .iter()
                .filter(|c| c.method == method && c.dim == dim && c.layer < model_layers)
                .collect();
            if shallow.is_empty() {
                continue;
            }
            let spearman: Vec<&Correlations> = shallow.iter().map(|c| &c.spearman).collect();
            out.push(ShallowAverage {
                layers: shallow.iter().map(|c| c.layer).collect(),
                dim,
                method,
                spearman: Correlations::mean_of(&spearman),
            });
        }
    }
    out
}

fn fmt_score(value: Option<f64>) -> String {
    match value {
        Some(v) if !v.is_nan() => format!("{v:.2}"),
        _ => "n/a".to_string(),
    }
}

/// `1-5` for a run of layers, `1,3` otherwise.
fn layer_span(layers: &[usize]) -> String {
    match (layers.first(), layers.last()) {
        (Some(first), Some(last)) if layers.len() > 2 && last - first + 1 == layers.len() => {
            format!("{first}-{last}")
        }
        _ => layers
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn table_row(out: &mut String, labels: &[String], values: impl Iterator<Item = Option<f64>>) {
    let values: Vec<String> = values.map(fmt_score).collect();
    let _ = writeln!(out, "| {} | {} |", labels.join(" | "), values.join(" | "));
}

/// A measure drawn as a layer x size grid, with its title.
type Measure = (String, fn(&Correlations) -> f64);

impl StsReport {
    fn cell(&self, layer: usize, dim: usize, method: Reduction) -> Option<&Correlations> {
        self.cells
            .iter()
            .find(|c| c.layer == layer && c.dim == dim && c.method == method)
            .map(|c| &c.spearman)
    }

    fn shallow_cell(&self, dim: usize, method: Reduction) -> Option<&Correlations> {
        self.shallow
            .iter()
            .find(|s| s.dim == dim && s.method == method)
            .map(|s| &s.spearman)
    }

    fn shallow_label(&self) -> Option<String> {
        self.shallow
            .first()
            .map(|s| format!("< Avg ({})", layer_span(&s.layers)))
    }

    /// What gets a layer x size grid: STS-B (the paper's Figure 3) and the mean over the
    /// datasets (just the one, when only one was evaluated).
    fn grid_measures(&self) -> Vec<Measure> {
        let has_stsb = self
            .datasets
            .iter()
            .any(|d| d.name == StsDataset::Stsb.name());
        let mut measures: Vec<Measure> = Vec::new();
        if has_stsb {
            measures.push(("STS-B".into(), Correlations::stsb));
        }
        match self.datasets.as_slice() {
            [_] if has_stsb => {}
            [only] => measures.push((only.name.into(), Correlations::average)),
            all => measures.push((
                format!("Average of the {} datasets", all.len()),
                Correlations::average,
            )),
        }
        measures
    }

    /// Labels of a row: its own, then the method when truncation is compared with PCA.
    fn labels(&self, own: &[String], method: Reduction) -> Vec<String> {
        let mut labels = own.to_vec();
        if self.methods.len() > 1 {
            labels.push(method.to_string());
        }
        labels
    }

    fn table_head(&self, out: &mut String, keys: &[&str], columns: &[String]) {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let mut labels = keys.clone();
        if self.methods.len() > 1 {
            labels.push("method".into());
        }
        let _ = writeln!(out, "| {} | {} |", labels.join(" | "), columns.join(" | "));
        let _ = writeln!(
            out,
            "|{}{}",
            "---|".repeat(labels.len()),
            "---:|".repeat(columns.len())
        );
    }

    /// Layer x size, deepest layer first and "< Avg" last, truncation and PCA rows together.
    fn grid(&self, out: &mut String, (title, measure): &Measure) {
        let _ = writeln!(out, "## {title}: layer x size\n");
        let sizes: Vec<String> = self.dims.iter().map(usize::to_string).collect();
        self.table_head(out, &["layer"], &sizes);
        for &layer in self.layers.iter().rev() {
            for &method in &self.methods {
                let values = self
                    .dims
                    .iter()
                    .map(|&dim| self.cell(layer, dim, method).map(measure));
                table_row(out, &self.labels(&[layer.to_string()], method), values);
            }
        }
        if let Some(label) = self.shallow_label() {
            for &method in &self.methods {
                let values = self
                    .dims
                    .iter()
                    .map(|&dim| self.shallow_cell(dim, method).map(measure));
                table_row(
                    out,
                    &self.labels(std::slice::from_ref(&label), method),
                    values,
                );
            }
        }
        let _ = writeln!(out);
    }

    /// Every dataset, as the paper's Table 1: widest size first, deepest layer first.
    fn per_dataset(&self, out: &mut String) {
        let _ = writeln!(out, "## Every dataset\n");
        let mut columns: Vec<String> = self.datasets.iter().map(|d| d.name.to_string()).collect();
        columns.push("Avg".into());
        self.table_head(out, &["layer", "size"], &columns);
        let row =
            |out: &mut String, label: String, dim: usize, method, c: Option<&Correlations>| {
                let values = self
                    .datasets
                    .iter()
                    .map(|d| c.map(|c| c.per_dataset[d.name]))
                    .chain([c.map(Correlations::average)]);
                table_row(out, &self.labels(&[label, dim.to_string()], method), values);
            };
        for &dim in self.dims.iter().rev() {
            for &layer in self.layers.iter().rev() {
                for &method in &self.methods {
                    row(
                        out,
                        layer.to_string(),
                        dim,
                        method,
                        self.cell(layer, dim, method),
                    );
                }
            }
            if let Some(label) = self.shallow_label() {
                for &method in &self.methods {
                    row(
                        out,
                        label.clone(),
                        dim,
                        method,
                        self.shallow_cell(dim, method),
                    );
                }
            }
        }
        let _ = writeln!(out);
    }

    /// The tables for people: STS-B and the average as layer x size grids, then every dataset.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# STS: {}\n", self.model);
        let pca = if self.methods.contains(&Reduction::Pca) {
            " PCA rows instead keep the top k principal components of the layer's vectors (fitted on all the sentences evaluated here), L2-normalised again."
        } else {
            ""
        };
        let shallow = match (self.shallow_label(), self.shallow.first()) {
            (Some(label), Some(s)) => format!(
                " {label}: the mean over layers {} (all evaluated layers but the model's last).",
                layer_span(&s.layers)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "Spearman correlation x100 between the cosine similarity of two sentences' embeddings and the gold scores (test sets; STS12-16 with every subset of a year pooled, unscored pairs left out). Size k: the first k dimensions of the layer's pooled vector, L2-normalised again (ESE truncation).{pca}{shallow}\n"
        );
        let _ = writeln!(
            out,
            "- model: `{}` ({} layers, {} dimensions, {} pooling)",
            self.model_path.display(),
            self.model_layers,
            self.hidden_size,
            self.pooling
        );
        let data: Vec<String> = self
            .datasets
            .iter()
            .map(|d| format!("{} {} pairs", d.name, d.pairs))
            .collect();
        let _ = writeln!(
            out,
            "- data: {}; {} distinct sentences",
            data.join(", "),
            self.sentences
        );
        let _ = writeln!(
            out,
            "- time: {:.1} s (encoding {:.1} s)\n",
            self.seconds, self.encode_seconds
        );
        for measure in self.grid_measures() {
            self.grid(&mut out, &measure);
        }
        self.per_dataset(&mut out);
        out
    }

    /// The headline in one line: the last evaluated layer at the widest and narrowest size, the
    /// shallow layers' mean at the widest, and PCA at the narrowest.
    pub fn summary_line(&self) -> String {
        let (Some(&deepest), Some(&widest), Some(&narrowest)) =
            (self.layers.last(), self.dims.last(), self.dims.first())
        else {
            return String::new();
        };
        let at =
            |dim, method| fmt_score(self.cell(deepest, dim, method).map(Correlations::average));
        let mut line = format!(
            "{}: mean Spearman x100 over {} STS datasets {} at layer {deepest} / {widest} dims, {} at {narrowest} dims",
            self.model,
            self.datasets.len(),
            at(widest, Reduction::Truncate),
            at(narrowest, Reduction::Truncate),
        );
        if let (Some(label), Some(s)) = (
            self.shallow_label(),
            self.shallow_cell(widest, Reduction::Truncate),
        ) {
            let _ = write!(
                line,
                "; {label} {} at {widest} dims",
                fmt_score(Some(s.average))
            );
        }
        if self.methods.contains(&Reduction::Pca) {
            let _ = write!(
                line,
                "; PCA {} at {narrowest} dims",
                at(narrowest, Reduction::Pca)
            );
        }
        let _ = write!(
            line,
            " ({} sentences, {:.1} s)",
            self.sentences, self.seconds
        );
        line
    }

    /// Writes `summary.json`, `summary.md` and `heatmap.png` (layers x sizes) into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        util::write_json_atomic(&dir.join("summary.json"), self)?;
        util::write_atomic(&dir.join("summary.md"), self.markdown().as_bytes())?;
        let measures = self.grid_measures();
        let mut panels = Vec::new();
        for &method in &self.methods {
            for (title, measure) in &measures {
                let title = if self.methods.len() > 1 {
                    format!("{title}, {method}")
                } else {
                    title.clone()
                };
                let measure = *measure;
                panels.push(Panel {
                    title,
                    value: Box::new(move |layer, dim| self.cell(layer, dim, method).map(measure)),
                });
            }
        }
        heatmap::draw(
            &dir.join("heatmap.png"),
            &self.layers,
            &self.dims,
            &panels,
            measures.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_matches_hand_computed_values_with_ties() {
        // y's ranks are 1, 2, 3.5, 5, 3.5: r = 8 / sqrt(10 * 9.5).
        let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]);
        assert!((r - 8.0 / 95f64.sqrt()).abs() < 1e-12, "{r}");
        // Ties on both sides: ranks 1.5, 1.5, 3, 4 against 1, 2.5, 2.5, 4 give 3.75 / 4.5.
        let r = spearman(&[1.0, 1.0, 2.0, 3.0], &[1.0, 2.0, 2.0, 3.0]);
        assert!((r - 3.75 / 4.5).abs() < 1e-12, "{r}");
        // Only the order counts.
        let r = spearman(&[0.1, 0.5, 0.2, 0.9], &[1.0, 100.0, 3.0, 1e6]);
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        let r = spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]);
        assert!((r + 1.0).abs() < 1e-12, "{r}");
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 30.0]), vec![1.0, 2.5, 2.5, 4.0]);
        assert_eq!(ranks(&[3.0, 1.0, 2.0]), vec![3.0, 1.0, 2.0]);
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Loading `dataset` fails with a message containing `needle`.
    fn assert_load_error(dataset: StsDataset, sts: &Path, needle: &str) {
        let err = format!("{:#}", dataset.load(sts).unwrap_err());
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }

    #[test]
    fn sts_benchmark_and_sick_files_parse_with_clear_line_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let sts = tmp.path();
        write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\t2.500\tA girl.\tA woman.\n\ng\tf\t2012\t2\t5\tOne.\tTwo.\textra\tcolumns\n",
        );
        write(
            sts,
            "SICK/SICK_test_annotated.txt",
            "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n6\tA boy.\tA kid.\t3.3\tNEUTRAL\r\n",
        );
        let stsb = StsDataset::Stsb.load(sts).unwrap();
        assert_eq!(
            stsb.pairs,
            vec![
                ("A girl.".to_string(), "A woman.".to_string()),
                ("One.".to_string(), "Two.".to_string())
            ]
        );
        assert_eq!(stsb.gold, vec![2.5, 5.0]);
        let sick = StsDataset::Sickr.load(sts).unwrap();
        assert_eq!(
            sick.pairs,
            vec![("A boy.".to_string(), "A kid.".to_string())]
        );
        assert_eq!(sick.gold, vec![3.3]);

        let path = write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\t2.5\tA.\tB.\ng\tf\t2012\t2\t2.5\tA.\n",
        );
        assert_load_error(
            StsDataset::Stsb,
            sts,
            &format!("{}:2: expected at least 7", path.display()),
        );
        write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\tfive\tA.\tB.\n",
        );
        assert_load_error(
            StsDataset::Stsb,
            sts,
            "sts-test.csv:1: score 'five' is not a number",
        );
        write(sts, "stsbenchmark/sts-test.csv", "\n");
        assert_load_error(StsDataset::Stsb, sts, "has no sentence pairs");
        std::fs::remove_file(sts.join("SICK/SICK_test_annotated.txt")).unwrap();
        assert_load_error(StsDataset::Sickr, sts, "reading ");
        assert_load_error(StsDataset::Sickr, sts, "SICK_test_annotated.txt");
    }

    #[test]
    fn a_senteval_year_pools_its_subsets_and_skips_unscored_pairs() {
        let tmp = tempfile::tempdir().unwrap();
        let sts = tmp.path();
        let year = sts.join("STS15-en-test");
        write(
            &year,
            "STS.input.b.txt",
            "b one\tb two\nb three\tb four\nb five\tb six\n",
        );
        write(&year, "STS.gs.b.txt", "4.0\n\n1\n");
        write(&year, "STS.input.a.txt", "a one\ta two\n");
        write(&year, "STS.gs.a.txt", "2.5\n");
        // A gold file without input (STS13's licensed SMT) is ignored.
        write(&year, "STS.gs.c.txt", "3\n");
        let pairs = StsDataset::Sts15.load(sts).unwrap();
        let firsts: Vec<&str> = pairs.pairs.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(firsts, vec!["a one", "b one", "b five"]);
        assert_eq!(pairs.gold, vec![2.5, 4.0, 1.0]);
        assert_eq!(pairs.files.len(), 4);

        write(&year, "STS.gs.b.txt", "4.0\n\n");
        assert_load_error(StsDataset::Sts15, sts, "STS.input.b.txt has 3 lines but");
        write(&year, "STS.gs.b.txt", "4.0\n\nx\n");
        assert_load_error(StsDataset::Sts15, sts, "STS.gs.b.txt:3: score 'x'");
        write(&year, "STS.gs.b.txt", "4.0\n\n1\n");
        write(
            &year,
            "STS.input.b.txt",
            "b one\tb two\nb three\tb four\nno tab here\n",
        );
        assert_load_error(
            StsDataset::Sts15,
            sts,
            "STS.input.b.txt:3: expected two tab-separated sentences, found 1",
        );
        std::fs::remove_file(year.join("STS.gs.a.txt")).unwrap();
        assert_load_error(StsDataset::Sts15, sts, "STS.gs.a.txt");
        assert_load_error(StsDataset::Sts12, sts, "STS12-en-test");
    }

    #[test]
    fn default_sizes_double_from_32_and_end_at_the_full_width() {
        assert_eq!(default_dims(384), vec![32, 64, 128, 256, 384]);
        assert_eq!(default_dims(768), vec![32, 64, 128, 256, 512, 768]);
        assert_eq!(default_dims(32), vec![32]);
        assert_eq!(default_dims(16), vec![16]);
        assert_eq!(layer_span(&[1, 2, 3, 4, 5]), "1-5");
        assert_eq!(layer_span(&[1, 3]), "1,3");
        assert_eq!(layer_span(&[1, 2]), "1,2");
    }
}
