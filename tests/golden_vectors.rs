//! The encoder against the reference stack: vectors for the default model must match
//! sentence-transformers (full depth) and Hugging Face `hidden_states[L]` pooled (depths 1..6) to
//! cosine >= 0.9999. Reference vectors: tests/fixtures/minilm_reference.json, made by
//! eval/reference/make_fixtures.py.

mod common;

use std::collections::BTreeMap;

use rag::encoder::{Encoder, EncoderOptions, Pooling};
use rag::vectors::cosine;
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    max_length: usize,
    texts: Vec<String>,
    sentence_transformers: Vec<Vec<f32>>,
    mean: BTreeMap<String, Vec<Vec<f32>>>,
    cls: BTreeMap<String, Vec<Vec<f32>>>,
}

const MIN_COSINE: f32 = 0.9999;

fn reference() -> Reference {
    let path = common::repo_root().join("tests/fixtures/minilm_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reference fixture")).unwrap()
}

fn check(label: &str, got: &rag::vectors::Matrix, want: &[Vec<f32>]) {
    assert_eq!(got.rows, want.len());
    for (i, expected) in want.iter().enumerate() {
        let c = cosine(got.row(i), expected);
        assert!(
            c >= MIN_COSINE,
            "{label}, text {i}: cosine {c} < {MIN_COSINE}"
        );
    }
}

#[test]
fn default_model_matches_reference_at_every_depth_and_pooling() {
    let Some(model) = common::default_model() else {
        return common::skip(
            "golden vectors",
            "default encoder missing (scripts/fetch-models.sh encoder)",
        );
    };
    let reference = reference();
    let texts: Vec<&str> = reference.texts.iter().map(String::as_str).collect();
    let depths: Vec<usize> = (1..=6).collect();
    for (pooling, table) in [
        (Pooling::Mean, &reference.mean),
        (Pooling::Cls, &reference.cls),
    ] {
        let encoder = Encoder::load(
            &model,
            &EncoderOptions {
                pooling: Some(pooling),
                max_length: Some(reference.max_length),
                ..Default::default()
            },
        )
        .unwrap();
        let all = encoder.encode(&texts, &depths).unwrap();
        for (depth, got) in depths.iter().zip(&all) {
            check(
                &format!("{pooling} pooling, depth {depth}"),
                got,
                &table[&depth.to_string()],
            );
        }
        if pooling == Pooling::Mean {
            check(
                "sentence-transformers",
                &all[5],
                &reference.sentence_transformers,
            );
        }
    }
}
