use std::path::Path;

use super::*;
use crate::encoder::tiny::TinyBert;
use crate::encoder::EncoderOptions;
use crate::files;
use crate::progress::ProgressMode;
use crate::train::data::DataSource;
use crate::train::loss::{self, AngleLoss, Objective};
use crate::train::model::HeadSetup;
use crate::vectors::cosine;

/// Triplets whose anchor and positive share two of three words and whose negative shares
/// none: something a tiny model can learn in a few steps.
fn synthetic_triplets(dir: &Path, count: usize) -> PathBuf {
    let mut rng = Rng::new(5);
    let mut word = || -> String {
        (0..3)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect()
    };
    let lines: Vec<String> = (0..count)
        .map(|_| {
            let (a, b, c, d) = (word(), word(), word(), word());
            serde_json::json!({
                "query": format!("{a} {b} {c}"),
                "positive": format!("{a} {b} {d}"),
                "negative": format!("{} {} {}", word(), word(), word()),
            })
            .to_string()
        })
        .collect();
    let path = dir.join("train.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

fn options(model_dir: &Path, out_dir: &Path, data: &Path, mode: Method) -> TrainOptions {
    TrainOptions {
        model_dir: model_dir.to_path_buf(),
        out_dir: out_dir.to_path_buf(),
        sources: vec![DataSource::Jsonl(data.to_path_buf())],
        max_examples: usize::MAX,
        max_corpus_pairs: usize::MAX,
        objective: Objective {
            mode,
            angle: AngleLoss::default(),
            compression_size: 16,
            kl_temperature: 1.0,
            shallow_weight: 1.0,
            distill_weight: 0.0,
            embedding_distill_weight: 0.0,
        },
        pooling: None,
        pooler_dim: 16,
        two_step: false,
        batch_size: 8,
        grad_accum: 1,
        epochs: 1,
        max_steps: Some(24),
        lr: 2e-3,
        warmup_ratio: 0.1,
        weight_decay: 0.0,
        max_grad_norm: 1.0,
        max_len: 16,
        seed: 3,
        checkpoint_every: 10,
        pause_after: None,
        resume: false,
        fresh: false,
        progress: ProgressMode::Quiet,
    }
}

fn tiny_model(dir: &Path, dropout: bool) -> PathBuf {
    let model_dir = dir.join("tiny");
    TinyBert::default().write(&model_dir).unwrap();
    if !dropout {
        let path = model_dir.join("config.json");
        let mut config: serde_json::Value = files::read_json(&path).unwrap();
        config["hidden_dropout_prob"] = 0.0.into();
        config["attention_probs_dropout_prob"] = 0.0.into();
        files::write_json_atomic(&path, &config).unwrap();
    }
    model_dir
}

/// The objective on a fixed batch, without dropout. For ESE, its learn-to-express part at
/// the compressed size (what ESE trains shallow layers for): the compression target moves
/// with the model, so on a tiny random model the total need not fall in a few steps.
fn eval_loss(model: &TrainableModel, objective: &Objective, examples: &[Example]) -> f64 {
    let batch: Vec<usize> = (0..16).collect();
    let (texts, layout) = batch_texts(examples, &batch);
    let every_layer = matches!(objective.mode, Method::Ese | Method::TwoDmse);
    let layers = model.embed(&texts, every_layer, false).unwrap();
    let value = if objective.mode == Method::Ese {
        let k = objective.compression_size;
        let terms: Vec<f32> = layers
            .iter()
            .map(|x| {
                let x = x.narrow(1, 0, k).unwrap();
                objective
                    .angle
                    .forward(&x, &layout)
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
            })
            .collect();
        terms.iter().sum::<f32>()
    } else {
        let sample = Sample { layer: 1, dim: 16 };
        let value = objective
            .loss(&layers, &layout, Some(sample), None)
            .unwrap();
        value.total.to_scalar::<f32>().unwrap()
    };
    value as f64
}

#[test]
fn a_short_run_lowers_the_loss_in_every_mode_and_the_model_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = tiny_model(dir.path(), true);
    let data = synthetic_triplets(dir.path(), 64);
    let examples = DataSource::Jsonl(data.clone()).read(usize::MAX).unwrap();
    for mode in [
        Method::Raw,
        Method::Mrl,
        Method::TwoDmse,
        Method::Ese,
        Method::Pooler,
    ] {
        let out = dir.path().join(format!("out-{mode}"));
        let mut opts = options(&model_dir, &out, &data, mode);
        if mode == Method::Pooler {
            // A random tiny model's CLS state carries little of the text at first: the
            // pooler needs a few more steps than the pooled modes.
            opts.max_steps = Some(160);
        }
        let head = |fresh: bool| match (mode, fresh) {
            (Method::Pooler, true) => HeadSetup::Fresh {
                dim: 16,
                seed: opts.seed,
            },
            (Method::Pooler, false) => HeadSetup::FromCheckpoint,
            _ => HeadSetup::None,
        };
        let before = TrainableModel::load(&model_dir, None, 16, head(true)).unwrap();
        let loss_before = eval_loss(&before, &opts.objective, &examples);
        let summary = train(&opts).unwrap();
        assert_eq!(summary.steps, opts.max_steps.unwrap());
        assert!(
            !output::work_dir(&out).exists(),
            "{mode}: the work directory was left behind"
        );
        let after = TrainableModel::load(&out, None, 16, head(false)).unwrap();
        let loss_after = eval_loss(&after, &opts.objective, &examples);
        let log = std::fs::read_to_string(out.join("train_log.jsonl")).unwrap();
        assert!(
            loss_after < loss_before * 0.9,
            "{mode}: loss {loss_before} -> {loss_after}\n{log}"
        );

        // The encoder loads the saved model unchanged and encodes what training computed.
        let encoder = Encoder::load(&out, &EncoderOptions::default()).unwrap();
        let texts = ["abc def ghi", "the river of the city"];
        let trained = after
            .embed(&texts, false, false)
            .unwrap()
            .remove(0)
            .to_vec2::<f32>()
            .unwrap();
        let encoded = encoder
            .encode(&texts, &[encoder.depth()])
            .unwrap()
            .remove(0);
        assert_eq!(encoded.cols, if mode == Method::Pooler { 16 } else { 32 });
        for (i, row) in trained.iter().enumerate() {
            assert!(cosine(row, encoded.row(i)) > 0.9999, "{mode}: text {i}");
        }
        let record: serde_json::Value = files::read_json(&out.join("ese.json")).unwrap();
        assert_eq!(record["run"]["objective"]["mode"], mode.to_string());
        assert!(std::fs::read_to_string(out.join("README.md"))
            .unwrap()
            .contains(&mode.to_string()));
    }
}

#[test]
fn distilling_brings_the_shallow_layers_to_the_base_models_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = tiny_model(dir.path(), false);
    let data = synthetic_triplets(dir.path(), 64);
    let examples = DataSource::Jsonl(data.clone()).read(usize::MAX).unwrap();
    let (texts, _) = batch_texts(&examples, &(0..16).collect::<Vec<_>>());
    let base = Encoder::load(&model_dir, &EncoderOptions::default()).unwrap();
    let teacher = teacher_embeddings(&base, &texts, &Device::Cpu).unwrap();
    let k = 16;
    // How far layer 1 is from the base model's last layer: its first k dimensions'
    // neighbourhoods, and its full-width embeddings.
    let gaps = |model: &Path| {
        let model = TrainableModel::load(model, None, 16, HeadSetup::None).unwrap();
        let first = model.embed(&texts, true, false).unwrap().remove(0);
        let student = first.narrow(1, 0, k).unwrap();
        let similarities = loss::similarity_distillation(&student, &teacher, 20.0).unwrap();
        let embeddings = loss::embedding_distillation(&first, &teacher).unwrap();
        [similarities, embeddings].map(|v| v.to_scalar::<f32>().unwrap() as f64)
    };
    let trained = |name: &str, distill_weight: f64, embedding_distill_weight: f64| {
        let out = dir.path().join(name);
        let mut opts = options(&model_dir, &out, &data, Method::Ese);
        opts.objective.distill_weight = distill_weight;
        opts.objective.embedding_distill_weight = embedding_distill_weight;
        train(&opts).unwrap();
        let record: serde_json::Value = files::read_json(&out.join("ese.json")).unwrap();
        let objective = &record["run"]["objective"];
        assert_eq!(objective["distill_weight"], distill_weight);
        assert_eq!(
            objective["embedding_distill_weight"],
            embedding_distill_weight
        );
        out
    };
    let before = gaps(&model_dir);
    let plain = gaps(&trained("plain", 0.0, 0.0));
    let similarities = gaps(&trained("similarities", 5.0, 0.0));
    let embeddings = gaps(&trained("embeddings", 0.0, 20.0));
    assert!(
        similarities[0] < 0.7 * before[0] && similarities[0] < 0.7 * plain[0],
        "layer 1's neighbourhoods vs the base model's last layer: {} before, {} after plain \
         ESE, {} after distilling similarities",
        before[0],
        plain[0],
        similarities[0]
    );
    assert!(
        embeddings[1] < 0.7 * before[1] && embeddings[1] < 0.7 * plain[1],
        "layer 1's embeddings vs the base model's last layer (1 - cos): {} before, {} after \
         plain ESE, {} after distilling embeddings",
        before[1],
        plain[1],
        embeddings[1]
    );
    for (flag, weights) in [("similarities", (1.0, 0.0)), ("embeddings", (0.0, 1.0))] {
        let mut opts = options(
            &model_dir,
            &dir.path().join("pooler"),
            &data,
            Method::Pooler,
        );
        (
            opts.objective.distill_weight,
            opts.objective.embedding_distill_weight,
        ) = weights;
        assert!(
            train(&opts).is_err(),
            "distilling {flag} goes into encoder layers, which the pooler does not train"
        );
    }
}

#[test]
fn two_step_refines_only_the_pooler_head() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = tiny_model(dir.path(), true);
    let data = synthetic_triplets(dir.path(), 64);
    let first = dir.path().join("pooler");
    let mut opts = options(&model_dir, &first, &data, Method::Pooler);
    opts.max_steps = Some(4);
    train(&opts).unwrap();
    let second = dir.path().join("pooler-2step");
    let mut opts = options(&first, &second, &data, Method::Pooler);
    opts.two_step = true;
    opts.max_steps = Some(4);
    train(&opts).unwrap();
    let read = |dir: &Path, file: &str| std::fs::read(dir.join(file)).unwrap();
    assert!(read(&first, "model.safetensors") == read(&second, "model.safetensors"));
    assert!(
        read(&first, "2_Dense/model.safetensors") != read(&second, "2_Dense/model.safetensors")
    );
    // Two-step needs a pooler model to start from.
    let mut bad = options(
        &model_dir,
        &dir.path().join("bad"),
        &dir.path().join("train.jsonl"),
        Method::Pooler,
    );
    bad.two_step = true;
    assert!(train(&bad).unwrap_err().to_string().contains("--two-step"));
}

#[test]
fn autograd_gradients_match_finite_differences() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = tiny_model(dir.path(), false);
    let data = synthetic_triplets(dir.path(), 8);
    let examples = DataSource::Jsonl(data).read(usize::MAX).unwrap();
    let model = TrainableModel::load(&model_dir, None, 16, HeadSetup::None).unwrap();
    let batch: Vec<usize> = (0..4).collect();
    let (texts, layout) = batch_texts(&examples, &batch);
    let angle = AngleLoss::default();
    // AnglE on every layer's embedding, so the check runs through every layer and the
    // pooling; the trained path (train = true) without dropout is deterministic.
    let loss = || -> Tensor {
        let layers = model.embed(&texts, true, true).unwrap();
        let terms: Vec<Tensor> = layers
            .iter()
            .map(|x| angle.forward(x, &layout).unwrap())
            .collect();
        Tensor::stack(&terms, 0).unwrap().sum(0).unwrap()
    };
    let grads = loss().backward().unwrap();
    let vars = model.trainable_vars();
    let mut checked = 0;
    for name in [
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.1.intermediate.dense.weight",
        "encoder.layer.2.output.dense.bias",
        "encoder.layer.2.output.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
        "embeddings.position_embeddings.weight",
    ] {
        let var = &vars
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .1;
        let original = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let grad = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        // The element with the largest gradient: well above f32 noise.
        let (at, &analytic) = grad
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap();
        let eps = 1e-2f32;
        let at_value = |v: f32| {
            let mut values = original.clone();
            values[at] = v;
            var.set(&Tensor::from_vec(values, var.shape(), var.device()).unwrap())
                .unwrap();
            loss().to_scalar::<f32>().unwrap()
        };
        let numeric = (at_value(original[at] + eps) - at_value(original[at] - eps)) / (2.0 * eps);
        at_value(original[at]);
        assert!(
            (numeric - analytic).abs() <= 2e-3 + 0.05 * analytic.abs(),
            "{name}[{at}]: autograd {analytic} vs finite difference {numeric}"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn an_interrupted_run_resumes_to_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = tiny_model(dir.path(), true);
    let data = synthetic_triplets(dir.path(), 64);
    let straight = dir.path().join("straight");
    train(&options(&model_dir, &straight, &data, Method::Ese)).unwrap();

    // Leave a run that stopped after its step-10 checkpoint: same settings, then resume.
    let resumed = dir.path().join("resumed");
    let mut first = options(&model_dir, &resumed, &data, Method::Ese);
    first.checkpoint_every = 10;
    first.pause_after = Some(10);
    let paused = train(&first).unwrap();
    assert!(!paused.finished && paused.steps_run == 10);
    assert!(output::work_dir(&resumed)
        .join("checkpoint/state.json")
        .exists());
    assert!(!resumed.exists(), "a paused run installed a model");
    first.pause_after = None;
    // Without --resume (or --fresh) an interrupted run is not silently discarded.
    let err = train(&first).unwrap_err().to_string();
    assert!(err.contains("--resume"), "{err}");
    // A crash between the two renames of the checkpoint's install leaves it aside as
    // `checkpoint.old`; resuming still starts from it.
    let checkpoint = output::work_dir(&resumed).join("checkpoint");
    std::fs::rename(&checkpoint, files::sibling(&checkpoint, "old")).unwrap();
    let mut again = first;
    again.resume = true;
    let summary = train(&again).unwrap();
    assert_eq!(summary.resumed_from, Some(10));
    // The same cut-off in the model's own install: loading it puts it back.
    std::fs::rename(&resumed, files::sibling(&resumed, "old")).unwrap();
    Encoder::load(&resumed, &EncoderOptions::default()).unwrap();
    assert!(resumed.join("model.safetensors").exists());
    let weights = |dir: &Path| std::fs::read(dir.join("model.safetensors")).unwrap();
    assert!(
        weights(&straight) == weights(&resumed),
        "resumed weights differ"
    );
    let log = std::fs::read_to_string(resumed.join("train_log.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 24);
}
