//! The objectives: AnglE as angle_emb 0.6 computes it, the ESE objective (learn-to-express +
//! learn-to-compress) and the MRL / 2DMSE baselines.
//!
//! A batch's embeddings are `[rows, d]` in blocks: for triplets `[anchors; positives;
//! negatives]`, for pairs `[anchors; positives]`, each block one row per example.

use candle_core::{DType, Device, Result, Tensor, D};
use serde::{Deserialize, Serialize};

use super::pca::pca_target;

/// The row layout of a batch, with the labels of scored pairs.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// angle_emb's format C: (anchor, positive, negative).
    Triplets,
    /// Format B: (query, positive), in-batch negatives only.
    Pairs,
    /// Format A: (text1, text2) with a similarity label per pair.
    Scored(Vec<f32>),
}

impl Layout {
    fn blocks(&self) -> usize {
        match self {
            Layout::Triplets => 3,
            Layout::Pairs | Layout::Scored(_) => 2,
        }
    }
}

/// AnglE's weights and temperatures; defaults as angle_emb 0.6.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AngleLoss {
    pub ibn_weight: f64,
    pub cln_weight: f64,
    pub angle_weight: f64,
    pub cosine_weight: f64,
    pub ibn_tau: f64,
    pub angle_tau: f64,
    pub cosine_tau: f64,
}

impl Default for AngleLoss {
    fn default() -> Self {
        Self {
            ibn_weight: 1.0,
            cln_weight: 1.0,
            angle_weight: 0.02,
            cosine_weight: 0.0,
            ibn_tau: 20.0,
            angle_tau: 20.0,
            cosine_tau: 20.0,
        }
    }
}

/// The parts of AnglE on one batch, before weighting.
pub struct AngleParts {
    pub ibn: Tensor,
    pub cln: Option<Tensor>,
    pub angle: Tensor,
    pub cosine: Tensor,
}

fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    // F.normalize: divide by max(||x||, 1e-12).
    let norm = x.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    x.broadcast_div(&norm)
}

/// log(sum(exp(v))) over a 1-D tensor, stable.
fn logsumexp(v: &Tensor) -> Result<Tensor> {
    let max = v.max_keepdim(0)?.detach();
    (v.broadcast_sub(&max)?.exp()?.sum_keepdim(0)?.log()? + max)?.squeeze(0)
}

/// A `[rows, cols]` matrix with `value` on the diagonal and zeros elsewhere.
fn diagonal(rows: usize, cols: usize, value: f32, device: &Device) -> Result<Tensor> {
    let values: Vec<f32> = (0..rows * cols)
        .map(|p| if p / cols == p % cols { value } else { 0.0 })
        .collect();
    Tensor::from_vec(values, (rows, cols), device)
}

/// Cross-entropy of `scores` against the (one-hot or all-zero) rows of `target`, batch mean.
fn cross_entropy(scores: &Tensor, target: &Tensor) -> Result<Tensor> {
    let log_probs = candle_nn::ops::log_softmax(scores, D::Minus1)?;
    (target * log_probs)?.sum(1)?.neg()?.mean_all()
}

/// angle_emb's `contrastive_with_negative_loss`: each query against every positive (and hard
/// negative) of the batch, its own positive the target.
pub fn contrastive(
    query: &Tensor,
    positive: &Tensor,
    negative: Option<&Tensor>,
    tau: f64,
) -> Result<Tensor> {
    let targets = match negative {
        Some(n) => Tensor::cat(&[positive, n], 0)?,
        None => positive.clone(),
    };
    let scores = (l2_normalize(query)?.matmul(&l2_normalize(&targets)?.t()?)? * tau)?;
    let (b, t) = scores.dims2()?;
    // Query i's own positive is target i.
    cross_entropy(&scores, &diagonal(b, t, 1.0, scores.device())?)
}

/// CoSENT-style ranking: `log(1 + sum over (i, j) with label_i < label_j of exp(v_i - v_j))`.
fn rank_loss(values: &Tensor, labels: &[f32]) -> Result<Tensor> {
    let n = labels.len();
    let mask: Vec<f32> = (0..n * n)
        .map(|p| {
            if labels[p / n] < labels[p % n] {
                0.0
            } else {
                -1e12
            }
        })
        .collect();
    let mask = Tensor::from_vec(mask, (n, n), values.device())?;
    let diff = values.unsqueeze(1)?.broadcast_sub(&values.unsqueeze(0)?)?;
    let flat = (diff + mask)?.flatten_all()?;
    let zero = Tensor::zeros(1, DType::F32, values.device())?;
    logsumexp(&Tensor::cat(&[&zero, &flat], 0)?)
}

/// angle_emb's `angle_loss`: the angle difference of each pair in complex space (first half of
/// the embedding the real part, second half the imaginary part), ranked by label.
pub fn angle_term(a: &Tensor, b: &Tensor, labels: &[f32], tau: f64) -> Result<Tensor> {
    let d = a.dim(1)?;
    if d % 2 != 0 {
        candle_core::bail!("the angle loss needs an even embedding size, got {d}");
    }
    let half = d / 2;
    let (re_a, im_a) = (a.narrow(1, 0, half)?, a.narrow(1, half, half)?);
    let (re_b, im_b) = (b.narrow(1, 0, half)?, b.narrow(1, half, half)?);
    let z = (re_b.sqr()? + im_b.sqr()?)?.sum_keepdim(1)?;
    let re = ((&re_a * &re_b)? + (&im_a * &im_b)?)?.broadcast_div(&z)?;
    let im = ((&im_a * &re_b)? - (&re_a * &im_b)?)?.broadcast_div(&z)?;
    let norm_a = (re_a.sqr()? + im_a.sqr()?)?.sum_keepdim(1)?.sqrt()?;
    let norm_b = z.sqrt()?;
    let ratio = (norm_a / norm_b)?;
    let re = re.broadcast_div(&ratio)?;
    let im = im.broadcast_div(&ratio)?;
    let pooled = (re.sum(1)? + im.sum(1)?)?;
    rank_loss(&(pooled.abs()? * tau)?, labels)
}

/// angle_emb's `cosine_loss` (CoSENT): cosine similarities ranked by label.
pub fn cosine_term(a: &Tensor, b: &Tensor, labels: &[f32], tau: f64) -> Result<Tensor> {
    let cos = (l2_normalize(a)? * l2_normalize(b)?)?.sum(1)?;
    rank_loss(&(cos * tau)?, labels)
}

/// angle_emb's `in_batch_negative_loss` for scored pairs: every text against every other text of
/// the batch, its partner the target when the pair's label is positive (its integer part
/// non-zero, as angle_emb's `.int()` has it); rows of other pairs add zero but count in the mean.
fn in_batch_scored(x: &Tensor, labels: &[f32], tau: f64) -> Result<Tensor> {
    let rows = x.dim(0)?;
    let pairs = labels.len();
    let normed = l2_normalize(x)?;
    // A text is never its own candidate.
    let sims = ((normed.matmul(&normed.t()?)? - diagonal(rows, rows, 1e12, x.device())?)? * tau)?;
    let mut target = vec![0f32; rows * rows];
    for (pair, label) in labels.iter().enumerate() {
        if label.trunc() != 0.0 {
            target[pair * rows + pair + pairs] = 1.0;
            target[(pair + pairs) * rows + pair] = 1.0;
        }
    }
    cross_entropy(&sims, &Tensor::from_vec(target, (rows, rows), x.device())?)
}

impl AngleLoss {
    pub fn parts(&self, x: &Tensor, layout: &Layout) -> Result<AngleParts> {
        let rows = x.dim(0)?;
        let n = rows / layout.blocks();
        if n == 0 || rows % layout.blocks() != 0 {
            candle_core::bail!("a batch of {rows} rows does not fit {layout:?}");
        }
        let block = |i: usize| x.narrow(0, i * n, n);
        match layout {
            Layout::Triplets => {
                let (q, p, neg) = (block(0)?, block(1)?, block(2)?);
                let a = Tensor::cat(&[&q, &q], 0)?;
                let b = Tensor::cat(&[&p, &neg], 0)?;
                let labels: Vec<f32> = (0..2 * n).map(|i| if i < n { 1.0 } else { 0.0 }).collect();
                Ok(AngleParts {
                    ibn: contrastive(&q, &p, None, self.ibn_tau)?,
                    cln: Some(contrastive(&q, &p, Some(&neg), self.ibn_tau)?),
                    angle: angle_term(&a, &b, &labels, self.angle_tau)?,
                    cosine: cosine_term(&a, &b, &labels, self.cosine_tau)?,
                })
            }
            Layout::Pairs => {
                let zero = Tensor::zeros((), DType::F32, x.device())?;
                Ok(AngleParts {
                    ibn: contrastive(&block(0)?, &block(1)?, None, self.ibn_tau)?,
                    cln: None,
                    angle: zero.clone(),
                    cosine: zero,
                })
            }
            Layout::Scored(labels) => {
                let (a, b) = (block(0)?, block(1)?);
                Ok(AngleParts {
                    ibn: in_batch_scored(x, labels, self.ibn_tau)?,
                    cln: None,
                    angle: angle_term(&a, &b, labels, self.angle_tau)?,
                    cosine: cosine_term(&a, &b, labels, self.cosine_tau)?,
                })
            }
        }
    }

    /// The weighted loss, combined as angle_emb does per format.
    pub fn forward(&self, x: &Tensor, layout: &Layout) -> Result<Tensor> {
        let parts = self.parts(x, layout)?;
        let angle = (parts.angle * self.angle_weight)?;
        let cosine = (parts.cosine * self.cosine_weight)?;
        match (layout, parts.cln) {
            // Format C: (ibn + cln) / 2 + angle + cosine.
            (Layout::Triplets, Some(cln)) => {
                let contrastive = ((parts.ibn * self.ibn_weight)? + (cln * self.cln_weight)?)?;
                ((contrastive * 0.5)? + angle)? + cosine
            }
            // Format B: the contrastive term alone.
            (Layout::Pairs, _) => Ok(parts.ibn),
            // Format A: cosine + ibn + angle.
            _ => ((parts.ibn * self.ibn_weight)? + angle)? + cosine,
        }
    }
}

/// `Align(x, y) = MSE(x, y) + T * KL(log_softmax(x/T) || softmax(y/T))`, KL summed per row and
/// averaged over the batch (PyTorch's `batchmean`).
pub fn align(x: &Tensor, y: &Tensor, temperature: f64) -> Result<Tensor> {
    let mse = (x - y)?.sqr()?.mean_all()?;
    mse + (kl_divergence(x, y, temperature)? * temperature)?
}

/// `KL(softmax(y/T) || softmax(x/T))`, batch mean: how far the student `x` is from the target `y`.
pub fn kl_divergence(x: &Tensor, y: &Tensor, temperature: f64) -> Result<Tensor> {
    let rows = x.dim(0)? as f64;
    let log_q = candle_nn::ops::log_softmax(&(x / temperature)?, D::Minus1)?;
    let log_p = candle_nn::ops::log_softmax(&(y / temperature)?, D::Minus1)?;
    let p = log_p.exp()?;
    (p * (log_p - log_q)?)?.sum_all()? / rows
}

/// How far the student's neighbourhoods are from the teacher's: for each row, the softmax over
/// its cosine similarities (times `scale`) to the batch's other rows, teacher against student,
/// KL batch mean. It compares similarities, not coordinates, so a student of any width (a
/// shallow layer's first k dimensions) can learn from a full-width teacher.
pub fn similarity_distillation(student: &Tensor, teacher: &Tensor, scale: f64) -> Result<Tensor> {
    let rows = student.dim(0)?;
    // A row is always its own nearest neighbour; masked out, so only the others are compared.
    let self_mask = diagonal(rows, rows, -1e4, student.device())?;
    let similarities = |x: &Tensor| -> Result<Tensor> {
        let x = l2_normalize(x)?;
        (x.matmul(&x.t()?)? * scale)? + &self_mask
    };
    kl_divergence(&similarities(student)?, &similarities(teacher)?, 1.0)
}

/// How far the student's embeddings point from the teacher's, row by row: the mean of
/// `1 - cos(student_r, teacher_r)`. Unlike [`similarity_distillation`] it compares coordinates,
/// so both have the same width: a layer learns to output what the base model's last layer
/// outputs, `d` numbers of signal per text instead of a batch's worth of similarities.
pub fn embedding_distillation(student: &Tensor, teacher: &Tensor) -> Result<Tensor> {
    let cos = (l2_normalize(student)? * l2_normalize(teacher)?)?.sum(1)?;
    cos.affine(-1.0, 1.0)?.mean_all()
}

/// ESE's layer weight `w_i = 1 / (1 + ln i)` for layer `i` (1-based).
pub fn layer_weight(layer: usize) -> f64 {
    1.0 / (1.0 + (layer as f64).ln())
}

/// The training objectives `rag train --mode` picks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// AnglE on the last layer at full width.
    Raw,
    /// Matryoshka: AnglE on the last layer at every size 8, 16, ... up to d, summed.
    Mrl,
    /// 2D Matryoshka: per step a sampled layer and size besides the last layer's.
    #[value(name = "2dmse")]
    #[serde(rename = "2dmse")]
    TwoDmse,
    /// Espresso: learn-to-express over every layer plus learn-to-compress.
    Ese,
    /// Wang et al.: a trained `D x d` dense head on the CLS state.
    Pooler,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Raw => "raw",
            Mode::Mrl => "mrl",
            Mode::TwoDmse => "2dmse",
            Mode::Ese => "ese",
            Mode::Pooler => "pooler",
        })
    }
}

/// The sizes MRL and 2DMSE use: 8, 16, 32, ... below `d`, then `d`.
pub fn matryoshka_dims(d: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = std::iter::successors(Some(8usize), |m| Some(m * 2))
        .take_while(|&m| m < d)
        .collect();
    dims.push(d);
    dims
}

/// An objective with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    pub mode: Mode,
    pub angle: AngleLoss,
    /// ESE's `k`: the size the compression target and the shallow layers are trained at.
    pub compression_size: usize,
    pub kl_temperature: f64,
    /// Multiplies ESE's shallow-layer terms (1: the paper's `1/(n-1) * sum w_i ...`); more
    /// puts the weight where a model served at a reduced depth needs it.
    #[serde(default = "paper_shallow_weight")]
    pub shallow_weight: f64,
    /// Weight of [`similarity_distillation`] from the base model's full-depth embeddings into
    /// every layer ESE trains, at the sizes it trains them (0: off, the paper's objective).
    /// The untrained last layer of a retrieval model is already a good retriever; this hands
    /// its neighbourhoods down to the shallow layers and keeps the last layer near them.
    #[serde(default)]
    pub distill_weight: f64,
    /// Weight of [`embedding_distillation`] from the base model's full-depth embeddings into
    /// every layer ESE trains, at full width (0: off). On the last layer it holds the base
    /// model's embeddings in place; on a shallow layer it teaches the layer to compute them.
    #[serde(default)]
    pub embedding_distill_weight: f64,
}

impl Objective {
    /// Whether the loss needs the base model's embeddings of each batch.
    pub fn needs_teacher(&self) -> bool {
        self.distill_weight > 0.0 || self.embedding_distill_weight > 0.0
    }
}

fn paper_shallow_weight() -> f64 {
    1.0
}

/// A loss with the part that learn-to-compress contributed, for the training log.
pub struct LossValue {
    pub total: Tensor,
    pub compress: Option<Tensor>,
}

/// What 2DMSE samples for one step: a shallow layer (1-based) and a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub layer: usize,
    pub dim: usize,
}

fn first(x: &Tensor, k: usize) -> Result<Tensor> {
    x.narrow(1, 0, k)
}

impl Objective {
    /// `layers[i]` is the pooled embedding after layer `i + 1`, `[rows, d]` (for `pooler`, the
    /// head's output as the only layer). `sample` is required by 2DMSE; `teacher` (the base
    /// model's embeddings of the same rows) by a distilling ESE objective.
    pub fn loss(
        &self,
        layers: &[Tensor],
        layout: &Layout,
        sample: Option<Sample>,
        teacher: Option<&Tensor>,
    ) -> Result<LossValue> {
        let last = layers
            .last()
            .ok_or_else(|| candle_core::Error::Msg("no layers".into()))?;
        let d = last.dim(1)?;
        let angle = |x: &Tensor| self.angle.forward(x, layout);
        match self.mode {
            Mode::Raw | Mode::Pooler => Ok(LossValue {
                total: angle(last)?,
                compress: None,
            }),
            Mode::Mrl => {
                let terms = matryoshka_dims(d)
                    .into_iter()
                    .map(|m| angle(&first(last, m)?))
                    .collect::<Result<Vec<_>>>()?;
                Ok(LossValue {
                    total: Tensor::stack(&terms, 0)?.sum(0)?,
                    compress: None,
                })
            }
            Mode::TwoDmse => {
                let sample = sample.ok_or_else(|| {
                    candle_core::Error::Msg("2dmse needs a sampled layer and size".into())
                })?;
                let last_terms = (angle(last)? + angle(&first(last, sample.dim)?)?)?;
                let total = if sample.layer < layers.len() {
                    let shallow = &layers[sample.layer - 1];
                    let shallow_terms = ((angle(shallow)?
                        + angle(&first(shallow, sample.dim)?)?)?
                        / sample.layer as f64)?;
                    let kl = (kl_divergence(shallow, &last.detach(), self.kl_temperature)?
                        * self.kl_temperature)?;
                    ((last_terms + shallow_terms)? + kl)?
                } else {
                    last_terms
                };
                Ok(LossValue {
                    total,
                    compress: None,
                })
            }
            Mode::Ese => {
                let k = self.compression_size;
                if k >= d {
                    candle_core::bail!(
                        "--compression-size {k} must be smaller than the embedding size {d}"
                    );
                }
                let teacher = match (self.needs_teacher(), teacher) {
                    (false, _) => None,
                    (true, Some(teacher)) => Some(teacher.detach()),
                    (true, None) => {
                        candle_core::bail!("a distilling objective needs the teacher's embeddings")
                    }
                };
                let compress_at =
                    |x: &Tensor| align(&first(x, k)?, &pca_target(x, k)?, self.kl_temperature);
                // Learn-to-express, plus the similarity distillation where it is on: each
                // trained layer at its trained size.
                let express_at = |x: &Tensor| -> Result<Tensor> {
                    let term = angle(x)?;
                    match &teacher {
                        Some(t) if self.distill_weight > 0.0 => {
                            term + (similarity_distillation(x, t, self.angle.ibn_tau)?
                                * self.distill_weight)?
                        }
                        _ => Ok(term),
                    }
                };
                // The embedding distillation, at full width whatever size the layer is trained at.
                let imitate = |x: &Tensor, term: Tensor| -> Result<Tensor> {
                    match &teacher {
                        Some(t) if self.embedding_distill_weight > 0.0 => {
                            term + (embedding_distillation(x, t)? * self.embedding_distill_weight)?
                        }
                        _ => Ok(term),
                    }
                };
                let express = imitate(last, (express_at(last)? + express_at(&first(last, k)?)?)?)?;
                let mut compress = compress_at(last)?;
                let mut total = express;
                let shallow = layers.len() - 1;
                if shallow > 0 {
                    let mut express_shallow = Tensor::zeros((), DType::F32, last.device())?;
                    let mut compress_shallow = Tensor::zeros((), DType::F32, last.device())?;
                    for (i, x) in layers[..shallow].iter().enumerate() {
                        let w = layer_weight(i + 1);
                        let express = imitate(x, express_at(&first(x, k)?)?)?;
                        express_shallow = (express_shallow + (express * w)?)?;
                        compress_shallow = (compress_shallow + (compress_at(x)? * w)?)?;
                    }
                    let scale = self.shallow_weight / shallow as f64;
                    total = (total + (express_shallow * scale)?)?;
                    compress = (compress + (compress_shallow * scale)?)?;
                }
                Ok(LossValue {
                    total: (total + &compress)?,
                    compress: Some(compress),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tensor from nested rows.
    fn tensor_from_rows(rows: &[Vec<f32>], device: &Device) -> Result<Tensor> {
        let cols = rows.first().map_or(0, Vec::len);
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        Tensor::from_vec(flat, (rows.len(), cols), device)
    }

    fn t(rows: &[&[f32]]) -> Tensor {
        let rows: Vec<Vec<f32>> = rows.iter().map(|r| r.to_vec()).collect();
        tensor_from_rows(&rows, &Device::Cpu).unwrap()
    }

    fn scalar(x: &Tensor) -> f64 {
        x.to_scalar::<f32>().unwrap() as f64
    }

    #[test]
    fn contrastive_matches_a_hand_computed_cross_entropy() {
        // q0 = p0 and q1 = p1 (cos 1), the two directions orthogonal (cos 0): each row's
        // cross-entropy is log(e^tau + 1) - tau.
        let q = t(&[&[1.0, 0.0], &[0.0, 2.0]]);
        let p = t(&[&[3.0, 0.0], &[0.0, 1.0]]);
        let tau = 2.0f64;
        let expected = (tau.exp() + 1.0).ln() - tau;
        assert!((scalar(&contrastive(&q, &p, None, tau).unwrap()) - expected).abs() < 1e-6);
        // A hard negative equal to the other positive adds one more e^0 term per row.
        let with_negative = contrastive(&q, &p, Some(&p.flip_rows()), tau).unwrap();
        let expected = (tau.exp() * 2.0 + 2.0).ln() - tau;
        assert!((scalar(&with_negative) - expected).abs() < 1e-6);
    }

    trait FlipRows {
        fn flip_rows(&self) -> Tensor;
    }
    impl FlipRows for Tensor {
        fn flip_rows(&self) -> Tensor {
            let n = self.dim(0).unwrap();
            let idx =
                Tensor::from_vec((0..n as u32).rev().collect::<Vec<_>>(), n, &Device::Cpu).unwrap();
            self.index_select(&idx, 0).unwrap()
        }
    }

    #[test]
    fn rank_loss_penalises_only_misordered_pairs() {
        // labels 0 < 1: one ordered pair (0, 1) with v0 - v1 = 3 - 1 = 2: log(1 + e^2).
        let v = Tensor::new(&[3.0f32, 1.0], &Device::Cpu).unwrap();
        let expected = (1.0 + 2f64.exp()).ln();
        assert!((scalar(&rank_loss(&v, &[0.0, 1.0]).unwrap()) - expected).abs() < 1e-6);
        // Equal labels: no pair counts, log(1) = 0.
        assert!(scalar(&rank_loss(&v, &[1.0, 1.0]).unwrap()).abs() < 1e-9);
    }

    #[test]
    fn align_is_mse_plus_kl_and_vanishes_on_equal_inputs() {
        let x = t(&[&[1.0, 2.0], &[0.0, 0.0]]);
        assert!(scalar(&align(&x, &x, 1.0).unwrap()).abs() < 1e-7);
        let y = t(&[&[2.0, 2.0], &[0.0, 0.0]]);
        // MSE: one element off by 1 of 4. KL only in row 0: p = softmax(2, 2) = (.5, .5),
        // q = softmax(1, 2); batch mean over 2 rows.
        let q0 = 1.0 / (1.0 + 1f64.exp());
        let kl = 0.5 * (0.5f64 / q0).ln() + 0.5 * (0.5f64 / (1.0 - q0)).ln();
        let expected = 0.25 + kl / 2.0;
        assert!((scalar(&align(&x, &y, 1.0).unwrap()) - expected).abs() < 1e-6);
    }

    #[test]
    fn similarity_distillation_compares_neighbourhoods_not_coordinates() {
        let teacher = t(&[&[1.0, 0.0, 0.0], &[0.8, 0.6, 0.0], &[0.0, 1.0, 0.0]]);
        // Rows 1 and 2 of the teacher, swapped, in two dimensions: by hand, each row's softmax
        // over its two neighbours (cosines x 2) against the teacher's, KL averaged: 0.44728.
        let student = t(&[&[1.0, 0.0], &[0.0, 1.0], &[0.6, 0.8]]);
        let got = scalar(&similarity_distillation(&student, &teacher, 2.0).unwrap());
        assert!((got - 0.447282).abs() < 1e-5, "{got}");
        // The same cosines in other coordinates (columns permuted, scaled, padded): nothing to
        // learn, whatever the width.
        let same = t(&[
            &[0.0, 3.0, 0.0, 0.0],
            &[0.0, 2.4, 1.8, 0.0],
            &[0.0, 0.0, 3.0, 0.0],
        ]);
        let zero = scalar(&similarity_distillation(&same, &teacher, 20.0).unwrap());
        assert!(zero.abs() < 1e-6, "{zero}");
    }

    #[test]
    fn ese_distils_every_trained_layer_at_its_trained_size() {
        let mut rng = crate::rng::Rng::new(9);
        let mut random = |rows: usize, cols: usize| {
            let values: Vec<f32> = (0..rows * cols)
                .map(|_| rng.below(2001) as f32 / 1000.0 - 1.0)
                .collect();
            Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap()
        };
        let (rows, d, k) = (6, 8, 4);
        let layers: Vec<Tensor> = (0..3).map(|_| random(rows, d)).collect();
        let teacher = random(rows, d);
        let objective = |distill_weight: f64, embedding_distill_weight: f64| Objective {
            mode: Mode::Ese,
            angle: AngleLoss::default(),
            compression_size: k,
            kl_temperature: 1.0,
            shallow_weight: 3.0,
            distill_weight,
            embedding_distill_weight,
        };
        let total = |weights: (f64, f64), teacher: Option<&Tensor>| {
            objective(weights.0, weights.1)
                .loss(&layers, &Layout::Triplets, None, teacher)
                .map(|v| scalar(&v.total))
        };
        let paper = total((0.0, 0.0), None).unwrap();
        // Off, the teacher changes nothing; on, it is required.
        assert_eq!(total((0.0, 0.0), Some(&teacher)).unwrap(), paper);
        assert!(total((0.5, 0.0), None).is_err());
        assert!(total((0.0, 0.5), None).is_err());
        // Each term on every trained layer, shallow ones weighted w_i * 3 / 2.
        let weighted = |last: f64, shallow: [f64; 2]| {
            last + 1.5 * (layer_weight(1) * shallow[0] + layer_weight(2) * shallow[1])
        };
        let scale = AngleLoss::default().ibn_tau;
        let distil = |x: &Tensor| scalar(&similarity_distillation(x, &teacher, scale).unwrap());
        let narrow = |x: &Tensor| x.narrow(1, 0, k).unwrap();
        let similarities = weighted(
            distil(&layers[2]) + distil(&narrow(&layers[2])),
            [distil(&narrow(&layers[0])), distil(&narrow(&layers[1]))],
        );
        let imitate = |x: &Tensor| scalar(&embedding_distillation(x, &teacher).unwrap());
        let embeddings = weighted(
            imitate(&layers[2]),
            [imitate(&layers[0]), imitate(&layers[1])],
        );
        for (weights, expected) in [
            ((0.5, 0.0), 0.5 * similarities),
            ((0.0, 2.0), 2.0 * embeddings),
            ((0.5, 2.0), 0.5 * similarities + 2.0 * embeddings),
        ] {
            let got = total(weights, Some(&teacher)).unwrap() - paper;
            assert!(
                (got - expected).abs() < 1e-4,
                "{weights:?}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn embedding_distillation_is_one_minus_cosine_per_row() {
        let teacher = t(&[&[1.0, 0.0], &[0.0, 2.0]]);
        // Row 0 at 60 degrees (cos 0.5), row 1 the same direction at another length (cos 1).
        let student = t(&[&[1.0, 3f32.sqrt()], &[0.0, 0.5]]);
        let got = scalar(&embedding_distillation(&student, &teacher).unwrap());
        assert!((got - 0.25).abs() < 1e-6, "{got}");
        // Unlike the similarity distillation, other coordinates are another embedding.
        let permuted = t(&[&[0.0, 1.0], &[2.0, 0.0]]);
        assert!((scalar(&embedding_distillation(&permuted, &teacher).unwrap()) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn layer_weights_and_matryoshka_sizes() {
        assert_eq!(layer_weight(1), 1.0);
        assert!((layer_weight(3) - 1.0 / (1.0 + 3f64.ln())).abs() < 1e-12);
        assert_eq!(matryoshka_dims(384), vec![8, 16, 32, 64, 128, 256, 384]);
        assert_eq!(matryoshka_dims(64), vec![8, 16, 32, 64]);
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        angle_triplet: Vec<TripletCase>,
        angle_pairs: Vec<PairCase>,
        align: Vec<AlignCase>,
        pca: Vec<PcaCase>,
        ese: Vec<EseCase>,
        mrl: Vec<MrlCase>,
    }
    #[derive(serde::Deserialize)]
    struct TripletCase {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        negative: Vec<Vec<f32>>,
        ibn: f64,
        cln: f64,
        angle: f64,
        cosine: f64,
        total: f64,
        #[serde(default)]
        grad_query: Option<Vec<Vec<f32>>>,
    }
    #[derive(serde::Deserialize)]
    struct PairCase {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct AlignCase {
        x: Vec<Vec<f32>>,
        y: Vec<Vec<f32>>,
        temperature: f64,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct PcaCase {
        x: Vec<Vec<f32>>,
        k: usize,
        target: Vec<Vec<f32>>,
    }
    #[derive(serde::Deserialize)]
    struct Blocks {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        negative: Vec<Vec<f32>>,
    }
    #[derive(serde::Deserialize)]
    struct EseCase {
        layers: Vec<Blocks>,
        compression_size: usize,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct MrlCase {
        #[serde(flatten)]
        blocks: Blocks,
        dims: Vec<usize>,
        total: f64,
    }

    fn rows(r: &[Vec<f32>]) -> Tensor {
        tensor_from_rows(r, &Device::Cpu).unwrap()
    }

    fn stacked(b: &Blocks) -> Tensor {
        Tensor::cat(&[rows(&b.query), rows(&b.positive), rows(&b.negative)], 0).unwrap()
    }

    fn close(got: f64, expected: f64, what: &str) {
        assert!(
            (got - expected).abs() <= 1e-4 * expected.abs().max(1.0),
            "{what}: rag {got} vs angle_emb {expected}"
        );
    }

    /// Values computed by PyTorch with angle_emb 0.6's own functions
    /// (eval/reference/make_loss_fixtures.py).
    #[test]
    fn losses_match_the_pytorch_reference() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/loss_reference.json"
        );
        let fixture: Fixture = crate::files::read_json(std::path::Path::new(path)).unwrap();
        let angle = AngleLoss::default();
        for (i, case) in fixture.angle_triplet.iter().enumerate() {
            let q = candle_core::Var::from_tensor(&rows(&case.query)).unwrap();
            let x = Tensor::cat(
                &[q.as_tensor(), &rows(&case.positive), &rows(&case.negative)],
                0,
            )
            .unwrap();
            let parts = angle.parts(&x, &Layout::Triplets).unwrap();
            close(scalar(&parts.ibn), case.ibn, &format!("triplet {i} ibn"));
            close(
                scalar(parts.cln.as_ref().unwrap()),
                case.cln,
                &format!("triplet {i} cln"),
            );
            close(
                scalar(&parts.angle),
                case.angle,
                &format!("triplet {i} angle"),
            );
            close(
                scalar(&parts.cosine),
                case.cosine,
                &format!("triplet {i} cosine"),
            );
            let total = angle.forward(&x, &Layout::Triplets).unwrap();
            close(scalar(&total), case.total, &format!("triplet {i} total"));
            if let Some(expected) = &case.grad_query {
                let grads = total.backward().unwrap();
                let got = grads.get(q.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
                for (g, e) in got.iter().flatten().zip(expected.iter().flatten()) {
                    assert!(
                        (g - e).abs() < 1e-4 * e.abs().max(1.0),
                        "gradient {g} vs {e}"
                    );
                }
            }
        }
        for (i, case) in fixture.angle_pairs.iter().enumerate() {
            let x = Tensor::cat(&[rows(&case.query), rows(&case.positive)], 0).unwrap();
            close(
                scalar(&angle.forward(&x, &Layout::Pairs).unwrap()),
                case.total,
                &format!("pairs {i}"),
            );
        }
        for (i, case) in fixture.align.iter().enumerate() {
            let got = align(&rows(&case.x), &rows(&case.y), case.temperature).unwrap();
            close(scalar(&got), case.total, &format!("align {i}"));
        }
        for (i, case) in fixture.pca.iter().enumerate() {
            let got = pca_target(&rows(&case.x), case.k)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            for (g, e) in got.iter().flatten().zip(case.target.iter().flatten()) {
                assert!(
                    (g - e).abs() < 1e-4 * e.abs().max(1.0),
                    "pca {i}: {g} vs {e}"
                );
            }
        }
        for (i, case) in fixture.ese.iter().enumerate() {
            let objective = Objective {
                mode: Mode::Ese,
                angle: angle.clone(),
                compression_size: case.compression_size,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: 0.0,
                embedding_distill_weight: 0.0,
            };
            let layers: Vec<Tensor> = case.layers.iter().map(stacked).collect();
            let got = objective
                .loss(&layers, &Layout::Triplets, None, None)
                .unwrap()
                .total;
            close(scalar(&got), case.total, &format!("ese {i}"));
            // --shallow-weight scales exactly the shallow layers' terms.
            let total_with = |shallow_weight: f64| {
                let objective = Objective {
                    shallow_weight,
                    ..objective.clone()
                };
                scalar(
                    &objective
                        .loss(&layers, &Layout::Triplets, None, None)
                        .unwrap()
                        .total,
                )
            };
            let (deep_only, paper) = (total_with(0.0), total_with(1.0));
            if case.layers.len() > 1 {
                assert!(
                    (paper - deep_only).abs() > 1e-6,
                    "ese {i}: no shallow terms"
                );
            }
            close(
                total_with(3.0),
                deep_only + 3.0 * (paper - deep_only),
                &format!("ese {i}, shallow weight 3"),
            );
        }
        for (i, case) in fixture.mrl.iter().enumerate() {
            let x = stacked(&case.blocks);
            assert_eq!(case.dims, matryoshka_dims(x.dim(1).unwrap()));
            let objective = Objective {
                mode: Mode::Mrl,
                angle: angle.clone(),
                compression_size: 0,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: 0.0,
                embedding_distill_weight: 0.0,
            };
            let got = objective
                .loss(&[x], &Layout::Triplets, None, None)
                .unwrap()
                .total;
            close(scalar(&got), case.total, &format!("mrl {i}"));
        }
    }
}
