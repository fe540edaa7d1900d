//! Where one encoding batch's time goes, op by op (eval/encode/profile.sh runs it): the first
//! `--batch` distinct distractor paragraphs encoded as one batch, `--rounds` times after a
//! warm-up, each op's wall time summed.
//!   encode_profile CORPUS MODEL_DIR [BATCH=64] [ROUNDS=5] [PRECISION=f32] [LAYERS=6]
//! Prints JSON.

mod common;

use anyhow::Result;
use rag::encoder::profile;
use rag::encoder::{Encoder, EncoderOptions};

fn main() -> Result<()> {
    // As `rag` does: without it, page faults on every op's fresh buffer were a fifth of the time.
    rag::runtime::keep_freed_memory();
    let args = common::Args::from_env();
    let model_dir = args.model_dir();
    let batch: usize = args.parsed(2, "64", "batch")?;
    let rounds: usize = args.parsed(3, "5", "rounds")?;
    let precision = args.precision(4, "f32")?;
    let layers: usize = args.parsed(5, "6", "layers")?;
    let texts = common::paragraphs(&args.corpus(), batch)?;
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
