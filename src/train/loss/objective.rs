//! The training objectives built on AnglE: ESE (learn-to-express over every layer plus
//! learn-to-compress towards the [`pca_target`]), the RAW, MRL, 2DMSE and pooler baselines, and
//! the optional distillation from the base model.

use candle_core::{DType, Result, Tensor, D};
use serde::{Deserialize, Serialize};

use super::angle::{diagonal, l2_normalize, AngleLoss, Layout};
use crate::train::compression::pca_target;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// AnglE on the last layer at full width.
    Raw,
    /// Matryoshka: AnglE on the last layer at every size 8, 16, ... up to d, summed.
    Mrl,
    /// 2D Matryoshka: per step a sampled layer and size besides the last layer's.
    #[cfg_attr(feature = "cli", value(name = "2dmse"))]
    #[serde(rename = "2dmse")]
    TwoDmse,
    /// Espresso: learn-to-express over every layer plus learn-to-compress.
    Ese,
    /// Wang et al.: a trained `D x d` dense head on the CLS state.
    Pooler,
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::Raw => "raw",
            Method::Mrl => "mrl",
            Method::TwoDmse => "2dmse",
            Method::Ese => "ese",
            Method::Pooler => "pooler",
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
    pub mode: Method,
    pub angle: AngleLoss,
    /// ESE's `k`: the size the compression target and the shallow layers are trained at.
    pub compression_size: usize,
    pub kl_temperature: f64,
    /// Multiplies ESE's shallow-layer terms (1: the paper's `1/(n-1) * sum w_i ...`); more
    /// puts the weight where a model served at a reduced depth needs it.
    #[serde(default = "paper_shallow_weight")]
    pub shallow_weight: f64,
    /// Weight of [`similarity_distillation`] from the base model's full-depth embeddings into
    /// every layer the objective trains, at the sizes it trains them (0: off, the paper's
    /// objective; not for the pooler, whose head is what it trains).
    /// The untrained last layer of a retrieval model is already a good retriever; this hands
    /// its neighbourhoods down to the shallow layers and keeps the last layer near them.
    #[serde(default)]
    pub distill_weight: f64,
    /// Weight of [`embedding_distillation`] from the base model's full-depth embeddings into
    /// every layer the objective trains, at full width (0: off). On the last layer it holds the base
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
    /// model's embeddings of the same rows) by a distilling objective.
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
        let teacher = match (self.needs_teacher(), teacher) {
            (false, _) => None,
            (true, Some(teacher)) => Some(teacher.detach()),
            (true, None) => {
                candle_core::bail!("a distilling objective needs the teacher's embeddings")
            }
        };
        // The contrastive term of a layer at the size it is trained at, plus the similarity
        // distillation at that size where it is on.
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
        // A trained layer's terms plus the embedding distillation, at full width whatever sizes
        // the layer is trained at.
        let imitate = |x: &Tensor, term: Tensor| -> Result<Tensor> {
            match &teacher {
                Some(t) if self.embedding_distill_weight > 0.0 => {
                    term + (embedding_distillation(x, t)? * self.embedding_distill_weight)?
                }
                _ => Ok(term),
            }
        };
        let plain = |total: Tensor| LossValue {
            total,
            compress: None,
        };
        match self.mode {
            Method::Raw | Method::Pooler => Ok(plain(imitate(last, express_at(last)?)?)),
            Method::Mrl => {
                let terms = matryoshka_dims(d)
                    .into_iter()
                    .map(|m| express_at(&first(last, m)?))
                    .collect::<Result<Vec<_>>>()?;
                Ok(plain(imitate(last, Tensor::stack(&terms, 0)?.sum(0)?)?))
            }
            Method::TwoDmse => {
                let sample = sample.ok_or_else(|| {
                    candle_core::Error::Msg("2dmse needs a sampled layer and size".into())
                })?;
                let both_sizes = |x: &Tensor| -> Result<Tensor> {
                    express_at(x)? + express_at(&first(x, sample.dim)?)?
                };
                let last_terms = imitate(last, both_sizes(last)?)?;
                let total = if sample.layer < layers.len() {
                    let shallow = &layers[sample.layer - 1];
                    let shallow_terms =
                        (imitate(shallow, both_sizes(shallow)?)? / sample.layer as f64)?;
                    let kl = (kl_divergence(shallow, &last.detach(), self.kl_temperature)?
                        * self.kl_temperature)?;
                    ((last_terms + shallow_terms)? + kl)?
                } else {
                    last_terms
                };
                Ok(plain(total))
            }
            Method::Ese => {
                let k = self.compression_size;
                if k >= d {
                    candle_core::bail!(
                        "--compression-size {k} must be smaller than the embedding size {d}"
                    );
                }
                let compress_at =
                    |x: &Tensor| align(&first(x, k)?, &pca_target(x, k)?, self.kl_temperature);
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
    use super::super::tests::{scalar, t};
    use super::*;
    use candle_core::Device;

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
            mode: Method::Ese,
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
    fn the_baselines_distil_the_layers_they_train() {
        let mut rng = crate::rng::Rng::new(11);
        let mut random = |rows: usize, cols: usize| {
            let values: Vec<f32> = (0..rows * cols)
                .map(|_| rng.below(2001) as f32 / 1000.0 - 1.0)
                .collect();
            Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap()
        };
        let (rows, d) = (6, 16);
        let layers: Vec<Tensor> = (0..3).map(|_| random(rows, d)).collect();
        let teacher = random(rows, d);
        let sample = Sample { layer: 2, dim: 4 };
        let total = |mode: Method, weights: (f64, f64), teacher: Option<&Tensor>| {
            let objective = Objective {
                mode,
                angle: AngleLoss::default(),
                compression_size: 4,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: weights.0,
                embedding_distill_weight: weights.1,
            };
            objective
                .loss(&layers, &Layout::Triplets, Some(sample), teacher)
                .map(|v| scalar(&v.total))
        };
        let scale = AngleLoss::default().ibn_tau;
        let distil = |x: &Tensor| scalar(&similarity_distillation(x, &teacher, scale).unwrap());
        let imitate = |x: &Tensor| scalar(&embedding_distillation(x, &teacher).unwrap());
        let narrow = |x: &Tensor, m: usize| x.narrow(1, 0, m).unwrap();
        let (last, shallow) = (&layers[2], &layers[1]);
        // Per method, by hand: the similarity terms at every size it trains each layer at, the
        // embedding term once per trained layer (2DMSE's sampled layer weighted 1/layer).
        let expected = [
            (Method::Raw, distil(last), imitate(last)),
            (
                Method::Mrl,
                matryoshka_dims(d)
                    .iter()
                    .map(|&m| distil(&narrow(last, m)))
                    .sum(),
                imitate(last),
            ),
            (
                Method::TwoDmse,
                distil(last)
                    + distil(&narrow(last, 4))
                    + (distil(shallow) + distil(&narrow(shallow, 4))) / 2.0,
                imitate(last) + imitate(shallow) / 2.0,
            ),
        ];
        for (mode, similarities, embeddings) in expected {
            let plain = total(mode, (0.0, 0.0), None).unwrap();
            assert_eq!(total(mode, (0.0, 0.0), Some(&teacher)).unwrap(), plain);
            assert!(
                total(mode, (0.5, 0.0), None).is_err(),
                "{mode}: teacher required"
            );
            for (weights, want) in [
                ((0.5, 0.0), 0.5 * similarities),
                ((0.0, 2.0), 2.0 * embeddings),
                ((0.5, 2.0), 0.5 * similarities + 2.0 * embeddings),
            ] {
                let got = total(mode, weights, Some(&teacher)).unwrap() - plain;
                assert!(
                    (got - want).abs() < 1e-4,
                    "{mode} {weights:?}: {got} vs {want}"
                );
            }
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
}
