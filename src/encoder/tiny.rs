//! Writes tiny, randomly initialised BERT checkpoints in the Hugging Face layout, so tests (here
//! and in the trainer) exercise the real loading and encoding code without any download.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use serde_json::json;

use super::Pooling;

#[derive(Debug, Clone)]
pub struct TinyBert {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub max_positions: usize,
    pub pooling: Pooling,
    pub seed: u64,
}

impl Default for TinyBert {
    fn default() -> Self {
        Self {
            hidden: 32,
            layers: 3,
            heads: 4,
            intermediate: 64,
            max_positions: 128,
            pooling: Pooling::Mean,
            seed: 7,
        }
    }
}

/// Special tokens, then single letters and digits and their `##` continuations, so that any
/// lower-case ASCII word tokenises (letter by letter at worst).
fn vocabulary() -> Vec<String> {
    let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let symbols: Vec<char> = ('a'..='z').chain('0'..='9').collect();
    vocab.extend(symbols.iter().map(|c| c.to_string()));
    vocab.extend(symbols.iter().map(|c| format!("##{c}")));
    vocab.extend(".,:;?!'\"()-".chars().map(|c| c.to_string()));
    vocab.extend(
        [
            "the", "of", "and", "is", "was", "in", "who", "what", "film", "city", "river",
        ]
        .iter()
        .map(|w| w.to_string()),
    );
    vocab
}

fn tokenizer_json(vocab: &[String], max_length: usize) -> serde_json::Value {
    let ids: serde_json::Map<String, serde_json::Value> = vocab
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let special = |content: &str, id: usize| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": max_length, "strategy": "LongestFirst", "stride": 0},
        "padding": null,
        "added_tokens": [special("[PAD]", 0), special("[UNK]", 1), special("[CLS]", 2),
                         special("[SEP]", 3), special("[MASK]", 4)],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids}
    })
}

/// A seeded xorshift generator: the same spec always gives the same weights.
struct Rng(u64);

impl Rng {
    fn normal_ish(&mut self) -> f32 {
        // Sum of uniforms: close enough to normal for initialisation, and dependency-free.
        (0..4)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 >> 11) as f32 / (1u64 << 53) as f32 - 0.5
            })
            .sum::<f32>()
    }

    fn tensor(&mut self, shape: &[usize], scale: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| self.normal_ish() * scale).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }
}

impl TinyBert {
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir.join("1_Pooling"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let vocab = vocabulary();
        let config = json!({
            "architectures": ["BertModel"], "model_type": "bert",
            "vocab_size": vocab.len(), "hidden_size": self.hidden,
            "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
            "intermediate_size": self.intermediate, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": self.max_positions, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "pad_token_id": 0
        });
        let pooling = json!({
            "word_embedding_dimension": self.hidden,
            "pooling_mode_cls_token": self.pooling == Pooling::Cls,
            "pooling_mode_mean_tokens": self.pooling == Pooling::Mean,
        });
        let write = |name: &str, value: &serde_json::Value| -> Result<()> {
            let path = dir.join(name);
            std::fs::write(&path, serde_json::to_vec_pretty(value)?)
                .with_context(|| format!("writing {}", path.display()))
        };
        write("config.json", &config)?;
        write("1_Pooling/config.json", &pooling)?;
        write(
            "tokenizer.json",
            &tokenizer_json(&vocab, self.max_positions),
        )?;
        write(
            "sentence_bert_config.json",
            &json!({"max_seq_length": self.max_positions}),
        )?;
        candle_core::safetensors::save(&self.weights(vocab.len())?, dir.join("model.safetensors"))
            .context("writing model.safetensors")?;
        Ok(())
    }

    fn weights(&self, vocab_size: usize) -> Result<HashMap<String, Tensor>> {
        let mut rng = Rng(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let (h, i) = (self.hidden, self.intermediate);
        let mut w = HashMap::new();
        let ones = |n: usize| Tensor::ones(n, candle_core::DType::F32, &Device::Cpu);
        let zeros = |n: usize| Tensor::zeros(n, candle_core::DType::F32, &Device::Cpu);
        w.insert(
            "embeddings.word_embeddings.weight".into(),
            rng.tensor(&[vocab_size, h], 1.0)?,
        );
        w.insert(
            "embeddings.position_embeddings.weight".into(),
            rng.tensor(&[self.max_positions, h], 0.3)?,
        );
        w.insert(
            "embeddings.token_type_embeddings.weight".into(),
            rng.tensor(&[2, h], 0.3)?,
        );
        w.insert("embeddings.LayerNorm.weight".into(), ones(h)?);
        w.insert("embeddings.LayerNorm.bias".into(), zeros(h)?);
        let scale = 1.0 / (h as f32).sqrt();
        for layer in 0..self.layers {
            let p = format!("encoder.layer.{layer}");
            for (name, out, inp) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", i, h),
                ("output.dense", h, i),
            ] {
                w.insert(
                    format!("{p}.{name}.weight"),
                    rng.tensor(&[out, inp], scale * 2.0)?,
                );
                w.insert(format!("{p}.{name}.bias"), rng.tensor(&[out], 0.1)?);
            }
            for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
                w.insert(format!("{p}.{name}.weight"), ones(h)?);
                w.insert(format!("{p}.{name}.bias"), zeros(h)?);
            }
        }
        Ok(w)
    }
}
