//! One STS evaluation: every distinct sentence encoded once to the deepest layer asked for,
//! then every layer x size (x reduction) scored against the gold similarities.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::data::StsDataset;
use super::report::{Correlations, DatasetSummary, ShallowAverage, StsCell, StsReport};
use super::stats::spearman;
use super::Reduction;
use crate::encoder::{Encoder, EncoderOptions};
use crate::files::model_name;
use crate::index::Pca;
use crate::progress::{Progress, ProgressMode};
use crate::vectors::{cosine, Matrix};

/// Sentences per encoder call: one progress step, each encoded once to the deepest layer.
const ENCODE_CHUNK: usize = 512;

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

/// STS-B Spearman per layer x size of a freshly trained model, appended to its model card.
pub fn evaluate_for_model_card(model_dir: &Path, data_dir: &Path) -> Result<()> {
    let encoder = Encoder::load(model_dir, &EncoderOptions::default())?;
    let report = evaluate(
        &encoder,
        &StsOptions {
            data_dir: data_dir.to_path_buf(),
            datasets: vec![StsDataset::Stsb],
            layers: None,
            dims: None,
            pca: false,
            progress: ProgressMode::for_stderr(),
        },
    )
    .context("evaluating the trained model on STS-B (--no-eval skips it)")?;
    report.write(&model_dir.join("eval-sts"))?;
    // The report's own title becomes a section of the card.
    crate::train::append_card_section(model_dir, &format!("#{}", report.markdown()))
}

#[cfg(test)]
mod tests {
    use super::super::report::layer_span;
    use super::*;

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
