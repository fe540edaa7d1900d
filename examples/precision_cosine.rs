//! How far a precision's paragraph vectors are from f32's (eval/encode/int8-avx2.sh runs it):
//! the first `LIMIT` distinct distractor paragraphs (`{title}: {text}`, max length 256) encoded
//! at f32 and at `PRECISION` at each depth, each paragraph's cosine between the two.
//!   precision_cosine CORPUS MODEL_DIR [LIMIT=500] [PRECISION=int8] [LAYERS=6,3,1]
//! Prints JSON: per depth the lowest, 1st-percentile and median cosine, and how many fall
//! under 0.99.

use anyhow::{Context, Result};
use rag::corpus::ParagraphStream;
use rag::encoder::{Encoder, EncoderOptions, Precision};
use rag::vectors::cosine;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let corpus = std::path::PathBuf::from(arg(
        0,
        "../shared/data/hotpotqa/hotpot_dev_distractor_sample.json",
    ));
    let model_dir = std::path::PathBuf::from(arg(1, "data/models/all-MiniLM-L6-v2"));
    let limit: usize = arg(2, "500").parse().context("LIMIT")?;
    let precision = match arg(3, "int8").as_str() {
        "int8" => Precision::Int8,
        "bf16" => Precision::Bf16,
        other => anyhow::bail!("PRECISION: int8 or bf16, not {other}"),
    };
    let layers: Vec<usize> = arg(4, "6,3,1")
        .split(',')
        .map(|d| d.parse().context("LAYERS"))
        .collect::<Result<_>>()?;
    let texts: Vec<String> = ParagraphStream::open(std::slice::from_ref(&corpus), false)
        .take(limit)
        .map(|p| p.map(|p| p.render("{title}: {text}")))
        .collect::<Result<_>>()?;
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
