//! Where one encoding batch's time goes, op by op (eval/encode/profile.sh runs it): the first
//! `--batch` distinct distractor paragraphs encoded as one batch, `--rounds` times after a
//! warm-up, each op's wall time summed.
//!   encode_profile CORPUS MODEL_DIR [BATCH=64] [ROUNDS=5] [PRECISION=f32] [LAYERS=6]
//! Prints JSON.

use anyhow::{Context, Result};
use rag::corpus::ParagraphStream;
use rag::encoder::profile;
use rag::encoder::{Encoder, EncoderOptions, Precision};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let corpus = std::path::PathBuf::from(arg(
        0,
        "../shared/data/hotpotqa/hotpot_dev_distractor_sample.json",
    ));
    let model_dir = std::path::PathBuf::from(arg(1, "data/models/all-MiniLM-L6-v2"));
    let batch: usize = arg(2, "64").parse().context("batch")?;
    let rounds: usize = arg(3, "5").parse().context("rounds")?;
    let precision = match arg(4, "f32").as_str() {
        "int8" => Precision::Int8,
        "bf16" => Precision::Bf16,
        _ => Precision::F32,
    };
    let layers: usize = arg(5, "6").parse().context("layers")?;
    let texts: Vec<String> = ParagraphStream::open(std::slice::from_ref(&corpus), false)
        .take(batch)
        .map(|p| p.map(|p| p.render("{title}: {text}")))
        .collect::<Result<_>>()?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let options = EncoderOptions {
        max_length: Some(256),
        batch_size: Some(batch),
        precision,
        ..Default::default()
    };
    let encoder = Encoder::load(&model_dir, &options)?;
    encoder.encode(&refs, &[layers])?;
    let tokens: usize = encoder.tokenize(&refs)?.iter().map(Vec::len).sum();
    profile::enable();
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        encoder.encode(&refs, &[layers])?;
    }
    let total = started.elapsed().as_secs_f64() / rounds as f64;
    let ops = profile::take();
    let mut report = serde_json::Map::new();
    report.insert(
        "precision".into(),
        format!("{precision:?}").to_lowercase().into(),
    );
    report.insert("paragraphs".into(), refs.len().into());
    report.insert("tokens".into(), tokens.into());
    report.insert("layers".into(), layers.into());
    report.insert("rounds".into(), rounds.into());
    report.insert("threads".into(), rayon::current_num_threads().into());
    report.insert("batch_seconds".into(), total.into());
    let mut rows = Vec::new();
    for (op, seconds, calls) in ops {
        rows.push(serde_json::json!({
            "op": op.name(),
            "seconds_per_batch": seconds / rounds as f64,
            "share": seconds / rounds as f64 / total,
            "calls_per_batch": calls as f64 / rounds as f64,
        }));
    }
    report.insert("ops".into(), rows.into());
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
