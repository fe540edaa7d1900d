//! What an STS evaluation found (per layer x size x reduction, and the paper's shallow
//! average) and how it is shown: markdown tables, a one-line summary, `summary.json` and a
//! heatmap.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::data::StsDataset;
use super::stats::mean;
use super::Reduction;
use crate::encoder::Pooling;
use crate::eval::heatmap::{self, Panel};
use crate::files;

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

impl Correlations {
    pub(super) fn of(per_dataset: BTreeMap<String, f64>) -> Self {
        Self {
            average: mean(per_dataset.values().copied()),
            per_dataset,
        }
    }

    /// The element-wise mean of several cells' correlations.
    pub(super) fn mean_of(all: &[&Correlations]) -> Self {
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

fn fmt_score(value: Option<f64>) -> String {
    match value {
        Some(v) if !v.is_nan() => format!("{v:.2}"),
        _ => "n/a".to_string(),
    }
}

/// `1-5` for a run of layers, `1,3` otherwise.
pub(super) fn layer_span(layers: &[usize]) -> String {
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
        files::write_json_atomic(&dir.join("summary.json"), self)?;
        files::write_atomic(&dir.join("summary.md"), self.markdown().as_bytes())?;
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
