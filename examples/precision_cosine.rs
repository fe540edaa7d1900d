//! How far a precision's paragraph vectors are from f32's (eval/encode/int8-avx2.sh runs it):
//! the first `LIMIT` distinct distractor paragraphs (`{title}: {text}`, max length 256) encoded
//! at f32 and at `PRECISION` at each depth, each paragraph's cosine between the two.
//!   precision_cosine CORPUS MODEL_DIR [LIMIT=500] [PRECISION=int8] [LAYERS=6,3,1]
//! Prints JSON: per depth the lowest, 1st-percentile and median cosine, and how many fall
//! under 0.99.

mod common;

use anyhow::{Context, Result};
use rag::encoder::{Encoder, EncoderOptions, Precision};
use rag::vectors::cosine;

fn main() -> Result<()> {
    let args = common::Args::from_env();
    let model_dir = args.model_dir();
    let limit: usize = args.parsed(2, "500", "LIMIT")?;
    let precision = args.precision(3, "int8")?;
    let layers: Vec<usize> = args
        .get(4, "6,3,1")
        .split(',')
        .map(|d| d.parse().context("LAYERS"))
        .collect::<Result<_>>()?;
    let texts = common::paragraphs(&args.corpus(), limit)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let encode = |precision| -> Result<_> {
        let options = EncoderOptions {
            max_length: Some(256),
            precision,
            ..Default::default()
        };
        Encoder::load(&model_dir, &options)?.encode(&refs, &layers)
    };
    let (exact, ours) = (encode(Precision::F32)?, encode(precision)?);
    let mut depths = Vec::new();
    for ((depth, a), b) in layers.iter().zip(&exact).zip(&ours) {
        let mut cosines: Vec<f32> = (0..refs.len())
            .map(|r| cosine(a.row(r), b.row(r)))
            .collect();
        cosines.sort_by(f32::total_cmp);
        depths.push(serde_json::json!({
            "layers": depth,
            "lowest": cosines[0],
            "p01": cosines[cosines.len() / 100],
            "median": cosines[cosines.len() / 2],
            "under_0_99": cosines.iter().filter(|&&c| c < 0.99).count(),
        }));
    }
    let report = serde_json::json!({
        "precision": format!("{precision:?}").to_lowercase(),
        "paragraphs": refs.len(),
        "depths": depths,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
