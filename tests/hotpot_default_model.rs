//! End to end on the real default encoder and real HotpotQA records: index the paragraphs of the
//! first distractor questions, then check that full-depth retrieval finds their supporting
//! paragraphs, that shallow layers (untrained) do worse, and that the CLI answers in JSON.

mod common;

use rag::ask::DEFAULT_STRATEGY;
use rag::corpus::read_questions;
use rag::encoder::{EncoderOptions, Precision};
use rag::eval::hotpot::{self, RunCell, RunOptions};
use rag::index::{self, BuildOptions};
use rag::progress::ProgressMode;
use rag::retrieve::{Mode, Retriever, Strategy};

const QUESTIONS: usize = 40;

#[test]
fn real_model_retrieves_supporting_paragraphs() {
    let (Some(model), Some(data)) = (common::default_model(), common::data_dir()) else {
        return common::missing(
            "hotpot end to end",
            "models",
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
        ann: Default::default(),
        template: rag::corpus::DEFAULT_TEMPLATE.into(),
        chunk_size: 256,
        skip_bad: false,
        fresh: false,
        shard: None,
        progress: ProgressMode::Quiet,
        vectors_from: None,
    })
    .unwrap();
    assert!(summary.documents > 300, "{} paragraphs", summary.documents);

    let retriever = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    let questions = read_questions(&subset, QUESTIONS).unwrap();
    let cells = vec![
        RunCell::retrieval(6, 384),
        RunCell::retrieval(3, 384),
        RunCell::retrieval(6, 64),
    ];
    // A retrieval-only run in `tmp/<dir>`.
    let retrieval_run = |dir: &str, cells: Vec<RunCell>, strategy: Strategy| {
        hotpot::run(&RunOptions {
            dir: tmp.path().join(dir),
            config: common::retrieval_config(&subset, questions.len(), cells, strategy, &index_dir),
            questions: &questions,
            retriever: Some(&retriever),
            pipeline: None,
            rankings: None,
            fresh: false,
            progress: ProgressMode::Quiet,
        })
        .unwrap()
    };
    let summary = retrieval_run("run", cells, Strategy::new(Mode::Dense, 1).unwrap());
    let default_run = retrieval_run(
        "run-default",
        vec![RunCell::retrieval(6, 384)],
        DEFAULT_STRATEGY,
    );
    // Bridge questions need a paragraph only the first one leads to: the default retrieval
    // (fusion, two hops) must find both for more of them than one-hop dense does, including at
    // least one that dense misses.
    let both = |dir: &str| {
        hotpot::read_predictions(&tmp.path().join(dir).join("predictions.jsonl"))
            .unwrap()
            .into_iter()
            .filter(|p| p.cell == RunCell::retrieval(6, 384))
            .map(|p| (p.id, p.retrieval.all_supporting[&5]))
            .collect::<std::collections::HashMap<_, _>>()
    };
    let (dense_both, default_both) = (both("run"), both("run-default"));
    let bridges: Vec<_> = questions
        .iter()
        .filter(|q| q.kind.as_deref() == Some("bridge"))
        .collect();
    let count = |found: &std::collections::HashMap<String, bool>| {
        bridges.iter().filter(|q| found[&q.id]).count()
    };
    eprintln!(
        "bridge questions with both paragraphs in the top 5: dense {} / default {} of {}; all questions: default both@5 {:.3}",
        count(&dense_both),
        count(&default_both),
        bridges.len(),
        default_run.cells[0].all_supporting[&5]
    );
    assert!(count(&default_both) > count(&dense_both));
    assert!(bridges
        .iter()
        .any(|q| default_both[&q.id] && !dense_both[&q.id]));

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
