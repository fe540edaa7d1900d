//! A BERT encoder in the style of candle-transformers' `bert.rs`, with the two things ESE needs:
//! it can stop after the first `L` transformer layers (the rest are never computed), and one
//! forward pass can hand back the hidden states of every layer it ran.
//!
//! Speed matters here (every corpus paragraph goes through it), so projections run as one 2-D
//! GEMM over all tokens of the batch and Q, K and V are fused into a single projection at load
//! time. Inference uses fused kernels (GELU, masked softmax, layer norm); training
//! (`train = true`) switches to candle's composite, differentiable forms and applies dropout.

mod config;
mod embeddings;
mod layer;

use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{LayerNorm, Linear, VarBuilder};

pub use self::config::{Config, HiddenAct};
pub use self::embeddings::BertEmbeddings;
pub use self::layer::BertLayer;
use super::kernels;
use super::profile::{self, Op};
use super::Precision;
use crate::rng::Rng;

fn linear(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Linear> {
    let weight = vb.get((out_dim, in_dim), "weight")?;
    let bias = vb.get(out_dim, "bias")?;
    Ok(Linear::new(weight, Some(bias)))
}

fn layer_norm(size: usize, eps: f64, vb: VarBuilder) -> Result<LayerNorm> {
    // Old TF-converted checkpoints name these gamma/beta.
    let weight = vb.get(size, "weight").or_else(|_| vb.get(size, "gamma"))?;
    let bias = vb.get(size, "bias").or_else(|_| vb.get(size, "beta"))?;
    Ok(LayerNorm::new(weight, bias, eps))
}

/// `xs rhs` for `xs` `[.., in]` and `rhs` `[in, out]`, as one `[rows, in] x [in, out]` GEMM
/// over all leading dimensions.
fn matmul_tokens(xs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    let mut dims = xs.dims().to_vec();
    let in_dim = dims.pop().unwrap_or(1);
    let out = xs.reshape(((), in_dim))?.matmul(rhs)?;
    dims.push(out.dim(1)?);
    out.reshape(dims)
}

fn linear_tokens(layer: &Linear, xs: &Tensor) -> Result<Tensor> {
    let out = matmul_tokens(xs, &layer.weight().t()?)?;
    match layer.bias() {
        Some(bias) => kernels::bias_add(&out, bias),
        None => Ok(out),
    }
}

/// The generator every dropout site of one model draws its masks from.
pub type DropoutRng = Arc<Mutex<Rng>>;

/// Inverted dropout with masks from a seeded generator, so that a training run repeats exactly
/// and resumes where it stopped (candle's own dropout draws from an unseedable generator).
struct Dropout {
    p: f32,
    rng: DropoutRng,
}

impl Dropout {
    fn new(p: f64, rng: &DropoutRng) -> Self {
        Self {
            p: p as f32,
            rng: Arc::clone(rng),
        }
    }

    fn forward(&self, xs: &Tensor, train: bool) -> Result<Tensor> {
        if !train || self.p <= 0.0 {
            return Ok(xs.clone());
        }
        let keep = 1.0 / (1.0 - self.p);
        // A 32-bit threshold: each u64 from the generator decides two elements.
        let threshold = (self.p as f64 * 4_294_967_296.0) as u64;
        let count = xs.elem_count();
        let mut mask = Vec::with_capacity(count + 1);
        {
            let mut rng = self.rng.lock().expect("dropout generator poisoned");
            while mask.len() < count {
                let bits = rng.next_u64();
                for half in [bits & 0xFFFF_FFFF, bits >> 32] {
                    mask.push(if half >= threshold { keep } else { 0.0 });
                }
            }
        }
        mask.truncate(count);
        xs.mul(&Tensor::from_vec(mask, xs.shape(), xs.device())?)
    }
}

struct Norm {
    inner: LayerNorm,
    eps: f64,
}

impl Norm {
    fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        Ok(Self {
            inner: layer_norm(cfg.hidden_size, cfg.layer_norm_eps, vb)?,
            eps: cfg.layer_norm_eps,
        })
    }

    /// rag's own layer norm in training and inference alike (candle's sums each row in one
    /// scalar chain; replacing it made no difference measurable through this machine's noise,
    /// but leaves one implementation instead of two).
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let bias = self
            .inner
            .bias()
            .expect("BERT layer norms are loaded with a bias");
        profile::time(Op::LayerNorm, || {
            kernels::layer_norm(xs, self.inner.weight(), bias, self.eps)
        })
    }
}

/// The padding mask in the two forms the attention paths need.
pub struct AttentionMask {
    /// `[batch, 1, 1, seq]` additive bias: 0 for real tokens, a large negative for padding.
    pub bias: Tensor,
    /// `[batch]` u32: real tokens per sequence (padding is always on the right).
    pub lengths: Tensor,
    /// `[batch]` u32: each sequence's first row among the `batch * seq` rows.
    pub starts: Tensor,
}

impl AttentionMask {
    /// From a `[batch, seq]` 0/1 mask.
    pub fn new(attention_mask: &Tensor) -> Result<Self> {
        let (batch, seq) = attention_mask.dims2()?;
        let mask = attention_mask.to_dtype(DType::F32)?;
        // -1e4 rather than f32::MIN: large enough to zero the softmax, small enough not to
        // overflow when added to a score.
        let bias = ((&mask - 1.0)? * 1e4)?.reshape((batch, 1, 1, seq))?;
        let lengths = mask.sum(1)?.to_dtype(DType::U32)?;
        let starts = (Tensor::arange(0u32, batch as u32, mask.device())? * seq as f64)?;
        Ok(Self {
            bias,
            lengths,
            starts,
        })
    }
}

/// Each layer's output over a batch's real tokens only, packed back to back: sequence `b` is
/// rows `starts[b]..starts[b] + lengths[b]` of every `[tokens, hidden]` state.
pub struct PackedStates {
    pub layers: Vec<Tensor>,
    /// Each packed row's index among the padded `batch * seq` rows.
    real_rows: Tensor,
    pub starts: Vec<u32>,
    pub lengths: Vec<u32>,
}

impl PackedStates {
    /// Every state in the padded `[batch, seq, hidden]` layout, zeros at padding.
    pub fn padded(&self, batch: usize, seq: usize) -> Result<Vec<Tensor>> {
        self.layers
            .iter()
            .map(|state| {
                let (_, hidden) = state.dims2()?;
                Tensor::zeros((batch * seq, hidden), state.dtype(), state.device())?
                    .index_add(&self.real_rows, state, 0)?
                    .reshape((batch, seq, hidden))
            })
            .collect()
    }
}

pub struct BertModel {
    embeddings: BertEmbeddings,
    layers: Vec<BertLayer>,
    dropout_rng: DropoutRng,
    pub config: Config,
}

impl BertModel {
    /// Loads the first `max_layers` transformer layers (all of them when `None`): layers that
    /// will never run are not even read from the checkpoint.
    pub fn load(vb: VarBuilder, cfg: &Config, max_layers: Option<usize>) -> Result<Self> {
        // Checkpoints saved from `BertForMaskedLM` and friends nest the encoder under `bert.`.
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let depth = max_layers
            .unwrap_or(cfg.num_hidden_layers)
            .min(cfg.num_hidden_layers);
        let dropout_rng: DropoutRng = Arc::new(Mutex::new(Rng::new(0)));
        let embeddings = BertEmbeddings::load(vb.pp("embeddings"), cfg, &dropout_rng)?;
        let layers = (0..depth)
            .map(|i| BertLayer::load(vb.pp(format!("encoder.layer.{i}")), cfg, &dropout_rng))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embeddings,
            layers,
            dropout_rng,
            config: cfg.clone(),
        })
    }

    /// The generator behind every dropout mask: seed it, or save and restore its state, to make
    /// training repeatable.
    pub fn dropout_rng(&self) -> &DropoutRng {
        &self.dropout_rng
    }

    /// Prepares transposed, fused copies of the projection weights for fast inference. Call it
    /// once on a model that will not be trained further (the encoder does).
    pub fn prepare_inference(&mut self, precision: Precision) -> Result<()> {
        self.layers
            .iter_mut()
            .try_for_each(|layer| layer.prepare_inference(precision))
    }

    /// Number of transformer layers this instance can run.
    pub fn depth(&self) -> usize {
        self.layers.len()
    }

    pub fn device(&self) -> &Device {
        self.embeddings.device()
    }

    /// Runs the first `depth` layers and returns the hidden state after each of them:
    /// element `i` is the output of layer `i + 1`, `[batch, seq, hidden]`.
    /// The first `depth` layers, or an error for a depth this model does not have.
    fn layers_to(&self, depth: usize) -> Result<&[BertLayer]> {
        if depth == 0 || depth > self.layers.len() {
            candle_core::bail!(
                "depth {depth} is outside 1..={} for this model",
                self.layers.len()
            );
        }
        Ok(&self.layers[..depth])
    }

    pub fn forward_layers(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
        depth: usize,
        train: bool,
    ) -> Result<Vec<Tensor>> {
        self.layers_to(depth)?;
        if !train {
            if let Some(packed) =
                self.forward_packed(input_ids, token_type_ids, attention_mask, depth)?
            {
                let (batch, seq) = input_ids.dims2()?;
                return packed.padded(batch, seq);
            }
        }
        let mask = AttentionMask::new(attention_mask)?;
        let mut xs = self.embeddings.forward(input_ids, token_type_ids, train)?;
        let mut states = Vec::with_capacity(depth);
        for layer in &self.layers[..depth] {
            xs = layer.forward(&xs, &mask, train)?;
            states.push(xs.clone());
        }
        Ok(states)
    }

    /// Inference over the real tokens only, when every layer up to `depth` has prepared
    /// weights (`None` otherwise): the embeddings' real rows are packed together and run
    /// through the layers, so that with questions of mixed lengths in one batch no projection
    /// is spent on padding (up to half the rows).
    pub fn forward_packed(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
        depth: usize,
    ) -> Result<Option<PackedStates>> {
        let layers = self.layers_to(depth)?;
        let Some(weights) = layers
            .iter()
            .map(BertLayer::packed)
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        let xs = self.embeddings.forward(input_ids, token_type_ids, false)?;
        let (batch, seq, hidden) = xs.dims3()?;
        let lengths = attention_mask
            .to_dtype(DType::U32)?
            .sum(1)?
            .to_vec1::<u32>()?;
        let mut starts = Vec::with_capacity(batch);
        let mut real_rows = Vec::new();
        for (b, &len) in lengths.iter().enumerate() {
            starts.push(real_rows.len() as u32);
            real_rows.extend((0..len).map(|t| (b * seq) as u32 + t));
        }
        let device = xs.device();
        let real_rows = Tensor::new(real_rows, device)?;
        let starts_t = Tensor::new(starts.as_slice(), device)?;
        let lengths_t = Tensor::new(lengths.as_slice(), device)?;
        let mut packed = profile::time(Op::Padding, || {
            xs.reshape((batch * seq, hidden))?
                .index_select(&real_rows, 0)
        })?;
        let mut states = Vec::with_capacity(layers.len());
        for (layer, weights) in layers.iter().zip(weights) {
            packed = layer.forward_packed(weights, &packed, &starts_t, &lengths_t)?;
            states.push(packed.clone());
        }
        Ok(Some(PackedStates {
            layers: states,
            real_rows,
            starts,
            lengths,
        }))
    }

    /// The last hidden state after `depth` layers.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
        depth: usize,
    ) -> Result<Tensor> {
        let mut states =
            self.forward_layers(input_ids, token_type_ids, attention_mask, depth, false)?;
        Ok(states.pop().expect("depth >= 1 yields one state"))
    }
}
