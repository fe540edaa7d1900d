//! A BERT encoder in the style of candle-transformers' `bert.rs`, with the two things ESE needs:
//! it can stop after the first `L` transformer layers (the rest are never computed), and one
//! forward pass can hand back the hidden states of every layer it ran.
//!
//! Speed matters here (every corpus paragraph goes through it), so projections run as one 2-D
//! GEMM over all tokens of the batch and Q, K and V are fused into a single projection at load
//! time. Inference uses fused kernels (GELU, masked softmax, layer norm); training
//! (`train = true`) switches to candle's composite, differentiable forms and applies dropout.

use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{embedding, Embedding, LayerNorm, Linear, VarBuilder};
use serde::{Deserialize, Serialize};

use super::gemm::{self, PackedLinear};
use super::kernels;
use super::profile::{self, Op};
use super::Precision;
use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HiddenAct {
    /// The exact, erf-based GELU that Hugging Face calls "gelu".
    #[default]
    Gelu,
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluApproximate,
    Relu,
}

/// The subset of a Hugging Face `config.json` that a BERT encoder needs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default)]
    pub hidden_act: HiddenAct,
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    #[serde(default = "default_dropout")]
    pub attention_probs_dropout_prob: f64,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: usize,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_dropout() -> f64 {
    0.1
}
fn default_type_vocab_size() -> usize {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}

impl Config {
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

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

pub struct BertEmbeddings {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    layer_norm: Norm,
    dropout: Dropout,
}

impl BertEmbeddings {
    pub fn load(vb: VarBuilder, cfg: &Config, rng: &DropoutRng) -> Result<Self> {
        Ok(Self {
            word_embeddings: embedding(cfg.vocab_size, cfg.hidden_size, vb.pp("word_embeddings"))?,
            position_embeddings: embedding(
                cfg.max_position_embeddings,
                cfg.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_type_embeddings: embedding(
                cfg.type_vocab_size,
                cfg.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            layer_norm: Norm::load(vb.pp("LayerNorm"), cfg)?,
            dropout: Dropout::new(cfg.hidden_dropout_prob, rng),
        })
    }

    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let (_batch, seq_len) = input_ids.dims2()?;
        let positions = Tensor::arange(0u32, seq_len as u32, input_ids.device())?;
        let xs = profile::time(Op::Embeddings, || -> Result<Tensor> {
            let words = self.word_embeddings.forward(input_ids)?;
            let types = self.token_type_embeddings.forward(token_type_ids)?;
            let positions = self.position_embeddings.forward(&positions)?;
            (words + types)?.broadcast_add(&positions)
        })?;
        let xs = self.layer_norm.forward(&xs)?;
        self.dropout.forward(&xs, train)
    }
}

/// A projection prepared for inference: packed for the AVX-512 kernel where the CPU has it (in
/// bf16 or 8-bit integers when asked, which `PackedLinear::new_bf16`/`new_int8` refuse where
/// the CPU cannot), else
/// kept transposed to `[in, out]` and contiguous so that candle's GEMM reads it in place instead
/// of repacking it on every call (most of the cost of encoding one short question).
enum Projection {
    Packed(PackedLinear),
    Transposed { weight_t: Tensor, bias: Tensor },
}

impl Projection {
    fn of(layers: &[&Linear], precision: Precision) -> Result<Self> {
        let weights: Vec<&Tensor> = layers.iter().map(|l| l.weight()).collect();
        let biases: Vec<&Tensor> = layers
            .iter()
            .map(|l| l.bias().expect("BERT projections are loaded with a bias"))
            .collect();
        let (weight, bias) = (Tensor::cat(&weights, 0)?, Tensor::cat(&biases, 0)?);
        Ok(if precision == Precision::Int8 {
            Self::Packed(PackedLinear::new_int8(&weight, &bias)?)
        } else if precision == Precision::Bf16 {
            Self::Packed(PackedLinear::new_bf16(&weight, &bias)?)
        } else if gemm::supported() {
            Self::Packed(PackedLinear::new(&weight, &bias)?)
        } else {
            Self::Transposed {
                weight_t: weight.t()?.contiguous()?,
                bias,
            }
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Self::Packed(packed) => profile::time(Op::Gemm, || packed.forward(xs)),
            Self::Transposed { weight_t, bias } => {
                let product = profile::time(Op::Gemm, || matmul_tokens(xs, weight_t))?;
                profile::time(Op::Bias, || kernels::bias_add(&product, bias))
            }
        }
    }

    /// `gelu(xs W^T + b)`.
    fn forward_gelu(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Self::Packed(packed) => profile::time(Op::Gemm, || packed.forward_gelu(xs)),
            Self::Transposed { weight_t, bias } => {
                let product = profile::time(Op::Gemm, || matmul_tokens(xs, weight_t))?;
                profile::time(Op::BiasGelu, || kernels::bias_gelu(&product, bias))
            }
        }
    }

    /// `xs W^T + b + residual`.
    fn forward_residual(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        match self {
            Self::Packed(packed) => {
                profile::time(Op::Gemm, || packed.forward_residual(xs, residual))
            }
            Self::Transposed { .. } => {
                let projected = self.forward(xs)?;
                profile::time(Op::Residual, || projected + residual)
            }
        }
    }
}

/// The inference copies of a layer's projections (Q, K and V fused into one).
struct InferenceWeights {
    qkv: Projection,
    attention_output: Projection,
    intermediate: Projection,
    output: Projection,
}

pub struct BertLayer {
    /// Built by [`BertModel::prepare_inference`]; training never uses it, since optimizer steps
    /// would leave it stale.
    inference: Option<InferenceWeights>,
    query: Linear,
    key: Linear,
    value: Linear,
    attention_output: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
    act: HiddenAct,
    num_heads: usize,
    head_dim: usize,
    hidden_dropout: Dropout,
    attention_dropout: Dropout,
}

impl BertLayer {
    pub fn load(vb: VarBuilder, cfg: &Config, rng: &DropoutRng) -> Result<Self> {
        let h = cfg.hidden_size;
        let attn = vb.pp("attention");
        Ok(Self {
            inference: None,
            query: linear(h, h, attn.pp("self").pp("query"))?,
            key: linear(h, h, attn.pp("self").pp("key"))?,
            value: linear(h, h, attn.pp("self").pp("value"))?,
            attention_output: linear(h, h, attn.pp("output").pp("dense"))?,
            attention_norm: Norm::load(attn.pp("output").pp("LayerNorm"), cfg)?,
            intermediate: linear(h, cfg.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            output: linear(cfg.intermediate_size, h, vb.pp("output").pp("dense"))?,
            output_norm: Norm::load(vb.pp("output").pp("LayerNorm"), cfg)?,
            act: cfg.hidden_act,
            num_heads: cfg.num_attention_heads,
            head_dim: cfg.head_dim(),
            hidden_dropout: Dropout::new(cfg.hidden_dropout_prob, rng),
            attention_dropout: Dropout::new(cfg.attention_probs_dropout_prob, rng),
        })
    }

    /// Q, K and V as one `[3*hidden, hidden]` projection: one GEMM instead of three. Stacked on
    /// every call rather than once at load so that training updates to the weights are seen.
    fn qkv(&self) -> Result<Linear> {
        let weights = [self.query.weight(), self.key.weight(), self.value.weight()];
        let biases = [&self.query, &self.key, &self.value]
            .map(|l| l.bias().expect("BERT projections are loaded with a bias"));
        Ok(Linear::new(
            Tensor::cat(&weights, 0)?,
            Some(Tensor::cat(&biases, 0)?),
        ))
    }

    fn prepare_inference(&mut self, precision: Precision) -> Result<()> {
        let of = |layers: &[&Linear]| Projection::of(layers, precision);
        self.inference = Some(InferenceWeights {
            qkv: of(&[&self.query, &self.key, &self.value])?,
            attention_output: of(&[&self.attention_output])?,
            intermediate: of(&[&self.intermediate])?,
            output: of(&[&self.output])?,
        });
        Ok(())
    }

    /// The fast path (prepared weights, fused kernels), when this layer has it.
    fn packed(&self) -> Option<&InferenceWeights> {
        self.inference
            .as_ref()
            .filter(|_| self.act == HiddenAct::Gelu)
    }

    /// The fast path on packed rows: `xs` `[tokens, hidden]` holds the real tokens of every
    /// sequence back to back (sequence `b` is the `lengths[b]` rows from `starts[b]` on), so
    /// no projection is spent on padding.
    fn forward_packed(
        &self,
        weights: &InferenceWeights,
        xs: &Tensor,
        starts: &Tensor,
        lengths: &Tensor,
    ) -> Result<Tensor> {
        let qkv = weights.qkv.forward(xs)?;
        let context = profile::time(Op::Attention, || {
            kernels::attention(&qkv, starts, lengths, self.num_heads, self.head_dim)
        })?;
        let attended = weights.attention_output.forward_residual(&context, xs)?;
        let xs = self.attention_norm.forward(&attended)?;
        let inner = weights.intermediate.forward_gelu(&xs)?;
        let out = weights.output.forward_residual(&inner, &xs)?;
        self.output_norm.forward(&out)
    }

    /// candle's own ops throughout, on padded `[batch, seq, hidden]`: what training
    /// differentiates, and what runs before inference weights are prepared.
    pub fn forward(&self, xs: &Tensor, mask: &AttentionMask, train: bool) -> Result<Tensor> {
        let (batch, seq, hidden) = xs.dims3()?;
        let qkv = linear_tokens(&self.qkv()?, xs)?;
        let context = if train {
            self.attention_differentiable(&qkv, &mask.bias)?
        } else {
            let (heads, dh) = (self.num_heads, self.head_dim);
            kernels::attention(&qkv, &mask.starts, &mask.lengths, heads, dh)?
        };
        let attended = linear_tokens(&self.attention_output, &context)?;
        let attended = self.hidden_dropout.forward(&attended, train)?;
        let xs = self.attention_norm.forward(&(attended + xs)?)?;

        let inner = linear_tokens(&self.intermediate, &xs)?;
        let inner = match (self.act, train) {
            (HiddenAct::Gelu, true) => kernels::gelu_train(&inner)?,
            (HiddenAct::Gelu, false) => inner.gelu_erf()?,
            (HiddenAct::GeluApproximate, _) => inner.gelu()?,
            (HiddenAct::Relu, _) => inner.relu()?,
        };
        let out = linear_tokens(&self.output, &inner)?;
        let out = self.hidden_dropout.forward(&out, train)?;
        debug_assert_eq!(out.dims3()?, (batch, seq, hidden));
        self.output_norm.forward(&(out + xs)?)
    }

    /// Attention from candle's own ops, so autograd can run through it; `bias` is
    /// `[batch, 1, 1, seq]`: 0 for real tokens, a large negative for padding.
    fn attention_differentiable(&self, qkv: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, seq, _) = qkv.dims3()?;
        let qkv = qkv
            .reshape((batch, seq, 3, self.num_heads, self.head_dim))?
            .permute((2, 0, 3, 1, 4))?; // [3, batch, heads, seq, head_dim]
        let q = (qkv.get(0)? * (1.0 / (self.head_dim as f64).sqrt()))?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;
        let probs = kernels::masked_softmax_train(&q.matmul(&k.t()?)?, bias)?;
        let probs = self.attention_dropout.forward(&probs, true)?;
        probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch, seq, self.num_heads * self.head_dim))
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
        self.embeddings.word_embeddings.embeddings().device()
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
