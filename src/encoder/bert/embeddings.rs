//! The input embeddings: word + token type + position, normalised, with dropout in training.

use candle_core::{Module, Result, Tensor};
use candle_nn::{embedding, Embedding, VarBuilder};

use super::{Config, Dropout, DropoutRng, Norm};
use crate::encoder::profile::{self, Op};

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

    /// The device the weights live on.
    pub(super) fn device(&self) -> &candle_core::Device {
        self.word_embeddings.embeddings().device()
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
