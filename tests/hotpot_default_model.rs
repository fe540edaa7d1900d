//! End to end on the real default encoder and real HotpotQA records: index the paragraphs of the
//! first distractor questions, then check that full-depth retrieval finds their supporting
//! paragraphs, that shallow layers (untrained) do worse, and that the CLI answers in JSON.

mod common;

use rag::corpus::read_questions;
use rag::encoder::{EncoderOptions, Precision};
use rag::eval::run::{self, Cell, RunConfig, RunOptions};
use rag::index::{self, BuildOptions};
use rag::progress::ProgressMode;
use rag::retrieve::{Mode, Retriever};

const QUESTIONS: usize = 40;

#[test]
fn real_model_retrieves_supporting_paragraphs() {
    let (Some(model), Some(data)) = (common::default_model(), common::data_dir()) else {
        return common::skip(
            "hotpot end to end",
            "default encoder (scripts/fetch-models.sh encoder) or ../shared/data missing",
        );
    };
    let source = data.join("hotpotqa/hotpot_dev_distractor_sample.json");
    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&source).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let subset = tmp.path().join("subset.json");
    std::fs::write(&subset, serde_json::to_vec(&records[..QUESTIONS]).unwrap()).unwrap();
    let index_dir = tmp.path().join("index");

    let summary = index::build(&BuildOptions {
        index_dir: index_dir.clone(),
        corpus: vec![subset.clone()],
        model_dir: model,
        encoder: EncoderOptions::default(),
        layers: Some(vec![3, 6]),
        dim: None,
        reduce: None,
        template: rag::corpus::DEFAULT_TEMPLATE.into(),
        chunk_size: 256,
        skip_bad: false,
        fresh: false,
        progress: ProgressMode::Quiet,
    })
    .unwrap();
    assert!(summary.documents > 300, "{} paragraphs", summary.documents);

    let retriever = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    let questions = read_questions(&subset, QUESTIONS).unwrap();
    let cells = vec![
        Cell::retrieval(6, 384),
        Cell::retrieval(3, 384),
        Cell::retrieval(6, 64),
    ];
    let summary = run::run(&RunOptions {
        dir: tmp.path().join("run"),
        config: RunConfig {
            questions_file: subset.clone(),
            questions: questions.len(),
            cells,
            mode: Mode::Dense,
            top_k: 5,
            oracle: false,
            generator: None,
            prompt_style: None,
            max_tokens: None,
            index: Some(index_dir.clone()),
        },
        questions: &questions,
        retriever: Some(&retriever),
        generator: None,
        fresh: false,
        progress: ProgressMode::Quiet,
    })
    .unwrap();
    let recall = |i: usize| summary.cells[i].recall[&5];
    let (full, shallow, small) = (recall(0), recall(1), recall(2));
    eprintln!(
        "Recall@5 on {QUESTIONS} questions: 6/384 {full:.3}, 3/384 {shallow:.3}, 6/64 {small:.3}"
    );
    assert!(full >= 0.75, "full-depth Recall@5 {full}");
    assert!(
        shallow < full,
        "the untrained model's layer 3 should retrieve worse than layer 6"
    );
    assert!(
        small <= full + 0.05,
        "64 dims should not beat 384 by much: {small} vs {full}"
    );

    let response = common::rag_json([
        "search",
        &questions[0].question,
        "--json",
        "--k",
        "3",
        "--mode",
        "hybrid",
        "--index",
        &index_dir.display().to_string(),
    ]);
    assert_eq!(response["hits"].as_array().unwrap().len(), 3);
    assert_eq!(response["mode"], "hybrid");
}
