//! AnglE as angle_emb 0.6 computes it: in-batch and hard-negative contrastive terms, the
//! angle difference in complex space, and CoSENT, weighted and combined per data format.
//!
//! A batch's embeddings are `[rows, d]` in blocks: for triplets `[anchors; positives;
//! negatives]`, for pairs `[anchors; positives]`, each block one row per example.

use candle_core::{DType, Device, Result, Tensor, D};
use serde::{Deserialize, Serialize};

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

pub(super) fn l2_normalize(x: &Tensor) -> Result<Tensor> {
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
pub(super) fn diagonal(rows: usize, cols: usize, value: f32, device: &Device) -> Result<Tensor> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{scalar, t};
    use super::*;

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
}
