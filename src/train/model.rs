//! The model under training: a BERT whose weights live in a `VarMap` (so autograd and the
//! optimizer see them), the optional pooler head, and the forward that turns a batch of texts
//! into pooled embeddings, one tensor per layer.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use tokenizers::Tokenizer;

use crate::encoder::dense_head::{self, DenseConfig, DenseHead};
use crate::encoder::{self, BatchInputs, BertModel, Config, Pooling};
use crate::rng::Rng;

/// Sequences per forward pass inside one training batch: sorted by length and cut into groups
/// this big, a batch wastes little compute on padding.
const SEQUENCES_PER_PASS: usize = 32;

/// Variables of the pooler head are named under this prefix in checkpoints.
pub const HEAD_PREFIX: &str = "head.";

pub struct TrainableModel {
    pub bert: BertModel,
    pub config: Config,
    pub tokenizer: Tokenizer,
    pub pooling: Pooling,
    /// The encoder's variables, named as in the source checkpoint.
    pub encoder_vars: VarMap,
    pub head: Option<(DenseHead, VarMap)>,
    /// Two-step pooler training: the encoder runs without gradients.
    pub encoder_frozen: bool,
    /// Every tensor of the source checkpoint, so that those not trained (buffers, BERT's unused
    /// pooler) are saved back unchanged.
    pub source_tensors: HashMap<String, Tensor>,
}

/// How the pooler head is set up.
pub enum HeadSetup {
    None,
    /// A new `D x d` head, initialised as PyTorch's `nn.Linear` (uniform in +-1/sqrt(D)).
    Fresh {
        dim: usize,
        seed: u64,
    },
    /// The checkpoint's own Dense module (the second step of two-step training).
    FromCheckpoint,
}

fn read_tensors(weights: &Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    let tensors: HashMap<String, Tensor> =
        if weights.extension().is_some_and(|e| e == "safetensors") {
            candle_core::safetensors::load(weights, device)?
        } else {
            candle_core::pickle::read_all(weights)?
                .into_iter()
                .collect()
        };
    Ok(tensors)
}

/// A VarMap holding `tensors` (float ones, as f32) under their names.
fn varmap_of(tensors: &HashMap<String, Tensor>) -> Result<VarMap> {
    let varmap = VarMap::new();
    {
        let mut data = varmap
            .data()
            .lock()
            .map_err(|_| anyhow!("variable map poisoned"))?;
        for (name, tensor) in tensors {
            if tensor.dtype().is_float() {
                data.insert(
                    name.clone(),
                    Var::from_tensor(&tensor.to_dtype(DType::F32)?)?,
                );
            }
        }
    }
    Ok(varmap)
}

fn fresh_head(
    in_features: usize,
    out_features: usize,
    seed: u64,
    device: &Device,
) -> Result<HashMap<String, Tensor>> {
    let mut rng = Rng::new(seed ^ 0x005E_ED0F_4EAD);
    let bound = 1.0 / (in_features as f64).sqrt();
    let mut uniform = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * bound)
            .map(|v| v as f32)
            .collect()
    };
    let weight = Tensor::from_vec(
        uniform(out_features * in_features),
        (out_features, in_features),
        device,
    )?;
    let bias = Tensor::from_vec(uniform(out_features), out_features, device)?;
    Ok(HashMap::from([
        ("linear.weight".to_string(), weight),
        ("linear.bias".to_string(), bias),
    ]))
}

impl TrainableModel {
    pub fn load(
        model_dir: &Path,
        pooling: Option<Pooling>,
        max_len: usize,
        head: HeadSetup,
    ) -> Result<Self> {
        if !model_dir.is_dir() {
            bail!(
                "model directory {} does not exist (pass --model DIR)",
                model_dir.display()
            );
        }
        let device = Device::Cpu;
        let config = encoder::read_config(model_dir)?;
        let weights = encoder::weights_file(model_dir)?;
        let source_tensors = read_tensors(&weights, &device)
            .with_context(|| format!("reading {}", weights.display()))?;
        let encoder_vars = varmap_of(&source_tensors)?;
        let vb = VarBuilder::from_varmap(&encoder_vars, DType::F32, &device);
        let bert = BertModel::load(vb, &config, None)
            .with_context(|| format!("loading BERT weights from {}", weights.display()))?;
        let tokenizer =
            encoder::load_tokenizer(model_dir, max_len.min(config.max_position_embeddings))?;
        let (head, encoder_frozen) = match head {
            HeadSetup::None => (None, false),
            HeadSetup::Fresh { dim, seed } => {
                let head_config = DenseConfig {
                    in_features: config.hidden_size,
                    out_features: dim,
                    bias: true,
                    activation_function: dense_head::IDENTITY.to_string(),
                };
                (
                    Some((
                        head_config,
                        fresh_head(config.hidden_size, dim, seed, &device)?,
                    )),
                    false,
                )
            }
            HeadSetup::FromCheckpoint => {
                let dir = dense_head::find(model_dir)?.ok_or_else(|| {
                    anyhow!("{}: --two-step needs a model trained with --mode pooler (it has no Dense module)", model_dir.display())
                })?;
                let head_config: DenseConfig = crate::files::read_json(&dir.join("config.json"))?;
                let tensors =
                    candle_core::safetensors::load(dir.join("model.safetensors"), &device)
                        .with_context(|| format!("reading {}", dir.display()))?;
                (Some((head_config, tensors)), true)
            }
        };
        let head = head
            .map(|(head_config, tensors)| -> Result<(DenseHead, VarMap)> {
                let vars = varmap_of(&tensors)?;
                let vb = VarBuilder::from_varmap(&vars, DType::F32, &device);
                Ok((DenseHead::load(vb, &head_config)?, vars))
            })
            .transpose()?;
        let pooling = match (&head, pooling) {
            // The pooler head reads the CLS state, as in Wang et al.
            (Some(_), _) => Pooling::Cls,
            (None, Some(p)) => p,
            (None, None) => Pooling::from_checkpoint(model_dir)?.unwrap_or(Pooling::Cls),
        };
        Ok(Self {
            bert,
            config,
            tokenizer,
            pooling,
            encoder_vars,
            head,
            encoder_frozen,
            source_tensors,
        })
    }

    pub fn depth(&self) -> usize {
        self.bert.depth()
    }

    /// The variables the optimizer updates, each with its checkpoint name.
    pub fn trainable_vars(&self) -> Vec<(String, Var)> {
        let named = |map: &VarMap, prefix: &str| -> Vec<(String, Var)> {
            let data = map.data().lock().expect("variable map poisoned");
            let mut vars: Vec<(String, Var)> = data
                .iter()
                .map(|(name, var)| (format!("{prefix}{name}"), var.clone()))
                .collect();
            vars.sort_by(|a, b| a.0.cmp(&b.0));
            vars
        };
        let mut vars = if self.encoder_frozen {
            Vec::new()
        } else {
            named(&self.encoder_vars, "")
        };
        if let Some((_, map)) = &self.head {
            vars.extend(named(map, HEAD_PREFIX));
        }
        vars
    }

    /// Pooled embeddings of `texts`: one `[texts, d]` tensor per layer 1..=depth when
    /// `every_layer`, else only the last layer's (through the head, if there is one).
    pub fn embed(&self, texts: &[&str], every_layer: bool, train: bool) -> Result<Vec<Tensor>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| anyhow!("tokenising: {e}"))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let depth = self.depth();
        let layers: Vec<usize> = if every_layer {
            (1..=depth).collect()
        } else {
            vec![depth]
        };
        let mut per_layer: Vec<Vec<Tensor>> = vec![Vec::new(); layers.len()];
        let device = self.bert.device().clone();
        for group in order.chunks(SEQUENCES_PER_PASS) {
            let inputs = BatchInputs::new(group.iter().map(|&i| ids[i]), &device)?;
            let states = self.bert.forward_layers(
                &inputs.input_ids,
                &inputs.token_type_ids,
                &inputs.attention_mask,
                depth,
                train && !self.encoder_frozen,
            )?;
            for (out, &layer) in per_layer.iter_mut().zip(&layers) {
                let pooled = self
                    .pooling
                    .pool(&states[layer - 1], &inputs.attention_mask)?;
                out.push(if self.encoder_frozen {
                    pooled.detach()
                } else {
                    pooled
                });
            }
        }
        // Back to the caller's order: position `i` of the sorted rows holds text `order[i]`.
        let mut inverse = vec![0u32; order.len()];
        for (position, &text) in order.iter().enumerate() {
            inverse[text] = position as u32;
        }
        let inverse = Tensor::from_vec(inverse, order.len(), &device)?;
        per_layer
            .into_iter()
            .map(|parts| {
                let pooled = Tensor::cat(&parts, 0)?
                    .contiguous()?
                    .index_select(&inverse, 0)?;
                Ok(match &self.head {
                    Some((head, _)) => head.forward(&pooled)?,
                    None => pooled,
                })
            })
            .collect()
    }

    /// Every tensor to save as the model's `model.safetensors`: the source checkpoint's, with the
    /// trained values in place of the originals.
    pub fn encoder_tensors(&self) -> Result<HashMap<String, Tensor>> {
        let mut out = self.source_tensors.clone();
        let data = self
            .encoder_vars
            .data()
            .lock()
            .map_err(|_| anyhow!("variable map poisoned"))?;
        for (name, var) in data.iter() {
            out.insert(name.clone(), var.as_tensor().detach());
        }
        Ok(out)
    }

    /// The head's tensors (`linear.weight`, `linear.bias`) and config, if there is a head.
    pub fn head_tensors(&self) -> Result<Option<(DenseConfig, HashMap<String, Tensor>)>> {
        let Some((head, vars)) = &self.head else {
            return Ok(None);
        };
        let data = vars
            .data()
            .lock()
            .map_err(|_| anyhow!("variable map poisoned"))?;
        let tensors = data
            .iter()
            .map(|(name, var)| (name.clone(), var.as_tensor().detach()))
            .collect();
        Ok(Some((head.config.clone(), tensors)))
    }
}
