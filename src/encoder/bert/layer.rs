//! One transformer layer: self-attention and the feed-forward block, each with a residual and a
//! layer norm; a fast inference path over prepared weights and packed tokens, and the
//! differentiable one for training.

use candle_core::{Result, Tensor};
use candle_nn::{Linear, VarBuilder};

use super::{
    linear, linear_tokens, matmul_tokens, AttentionMask, Config, Dropout, DropoutRng, HiddenAct,
    Norm,
};
use crate::encoder::gemm::{self, PackedLinear};
use crate::encoder::kernels;
use crate::encoder::profile::{self, Op};
use crate::encoder::Precision;

/// A projection prepared for inference: packed for the AVX-512 or AVX2 kernel where the CPU has
/// one (in bf16 or 8-bit integers when asked, which `PackedLinear::new_bf16`/`new_int8` refuse
/// where the CPU cannot), else
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
pub(super) struct InferenceWeights {
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

    pub(super) fn prepare_inference(&mut self, precision: Precision) -> Result<()> {
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
    pub(super) fn packed(&self) -> Option<&InferenceWeights> {
        self.inference
            .as_ref()
            .filter(|_| self.act == HiddenAct::Gelu)
    }

    /// The fast path on packed rows: `xs` `[tokens, hidden]` holds the real tokens of every
    /// sequence back to back (sequence `b` is the `lengths[b]` rows from `starts[b]` on), so
    /// no projection is spent on padding.
    pub(super) fn forward_packed(
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
