//! Helpers shared by the integration tests: where the real default model and the shared data
//! are, a loud skip when they are not there, and a tiny generated corpus and index.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

use rag::encoder::tiny::TinyBert;
use rag::encoder::EncoderOptions;
use rag::index::BuildOptions;
use rag::progress::ProgressMode;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The default encoder, if `scripts/fetch-models.sh encoder` has put it in place.
pub fn default_model() -> Option<PathBuf> {
    let dir = std::env::var_os("RAG_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("data/models/all-MiniLM-L6-v2"));
    dir.join("model.safetensors").exists().then_some(dir)
}

/// The shared datasets (`$RAG_DATA`, else `../shared/data` beside the checkout).
pub fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RAG_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data"));
    dir.join("hotpotqa").is_dir().then_some(dir)
}

/// Skips a test this machine cannot run (see `rag::skip`).
pub use rag::skip::skip;

/// Skips a test whose model or data (`what`: "models" or "data") is missing, unless
/// `$RAG_REQUIRE` names it (or says "all"): then the test fails, so CI cannot pass without
/// running the real thing.
pub fn missing(test: &str, what: &str, why: &str) {
    let required = std::env::var("RAG_REQUIRE").unwrap_or_default();
    if required
        .split(',')
        .any(|r| r.trim() == what || r.trim() == "all")
    {
        panic!("{test}: {why}, and RAG_REQUIRE={required} requires {what}");
    }
    skip(test, why);
}

/// Runs the `rag` binary built for these tests.
/// Fails the test with the command's stderr unless it succeeded.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn rag() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_rag"))
}

/// Runs `rag` with `args`, asserting it succeeds; its stdout.
pub fn succeed<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    let out = rag().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `rag` with `args`, asserting it fails with one line on stderr; that line.
pub fn refused<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    let out = rag().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// The arguments of `rag index` of `corpora` with `model` into `index`, `extra` appended.
pub fn index_args<'a>(
    model: &'a Path,
    corpora: &[&'a Path],
    index: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["index", "--model", model.to_str().unwrap()];
    for corpus in corpora {
        args.extend(["--corpus", corpus.to_str().unwrap()]);
    }
    args.extend(["--index", index.to_str().unwrap()]);
    args.extend_from_slice(extra);
    args
}

/// `rag index` of `corpora` with `model` into `index`, at depths 1 and 3, size 16, chunks of 16
/// tokens, `extra` appended; its stdout.
pub fn tiny_index(model: &Path, corpora: &[&Path], index: &Path, extra: &[&str]) -> String {
    let tiny = ["--layers", "1,3", "--dim", "16", "--chunk-size", "16"];
    succeed(&index_args(
        model,
        corpora,
        index,
        &[&tiny[..], extra].concat(),
    ))
}

/// The flags of a retrieval-only `rag eval` (those after `eval --index DIR`) over `questions`
/// into `runs`/`name`: `mode`, one hop, depth `layers`, size 16.
pub fn retrieval_eval_flags<'a>(
    questions: &'a Path,
    runs: &'a Path,
    name: &'a str,
    (mode, layers): (&'a str, &'a str),
) -> Vec<&'a str> {
    vec![
        "--questions",
        questions.to_str().unwrap(),
        "--no-generate",
        "--mode",
        mode,
        "--hops",
        "1",
        "--layers",
        layers,
        "--dims",
        "16",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--name",
        name,
    ]
}

/// `rag eval --index index` with [`retrieval_eval_flags`], `extra` appended.
pub fn retrieval_eval_args<'a>(
    index: &'a Path,
    questions: &'a Path,
    runs: &'a Path,
    name: &'a str,
    mode_layers: (&'a str, &'a str),
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["eval", "--index", index.to_str().unwrap()];
    args.extend(retrieval_eval_flags(questions, runs, name, mode_layers));
    args.extend_from_slice(extra);
    args
}

/// Runs `rag` with `args` and parses what it printed as JSON; a failed run fails the test with
/// its stderr.
pub fn rag_json<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> serde_json::Value {
    let out = rag().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A tiny generated model in `dir/model` and a corpus of `records` x `per_record` paragraphs
/// in `dir/corpus.json`.
pub fn tiny_model_and_corpus(dir: &Path, records: usize, per_record: usize) -> (PathBuf, PathBuf) {
    let model = dir.join("model");
    TinyBert::default().write(&model).unwrap();
    let corpus = dir.join("corpus.json");
    write_corpus(&corpus, records, per_record);
    (model, corpus)
}

const WORDS: [&str; 12] = [
    "river", "city", "film", "stone", "music", "garden", "bridge", "winter", "engine", "forest",
    "harbor", "planet",
];

/// A HotpotQA-format file of `records` records with `per_record` paragraphs each; paragraph `n`
/// says "topic n" plus a deterministic mix of words.
pub fn write_corpus(path: &Path, records: usize, per_record: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(out, "[").unwrap();
    for r in 0..records {
        let context: Vec<serde_json::Value> = (0..per_record)
            .map(|p| {
                let n = r * per_record + p;
                let words: Vec<&str> = (0..20)
                    .map(|w| WORDS[(n * 7 + w * 3 + w * n) % WORDS.len()])
                    .collect();
                serde_json::json!([
                    format!("topic {n}"),
                    [format!("topic {n} is about "), words.join(" ")]
                ])
            })
            .collect();
        let record = serde_json::json!({"_id": r.to_string(), "question": "q", "answer": "a",
                                        "supporting_facts": [], "context": context});
        if r > 0 {
            write!(out, ",").unwrap();
        }
        serde_json::to_writer(&mut out, &record).unwrap();
    }
    write!(out, "]").unwrap();
}

/// A question file for a corpus of [`write_corpus`] (300 paragraphs or more): "what is topic N about?", topic N supporting.
pub fn write_topic_questions(path: &Path, count: usize) {
    let records: Vec<serde_json::Value> = (0..count)
        .map(|q| {
            let n = q * 17 % 300;
            serde_json::json!({
                "_id": format!("q{q}"), "question": format!("what is topic {n} about?"),
                "answer": "x", "supporting_facts": [[format!("topic {n}"), 0]],
                "context": [[format!("topic {n}"), ["x"]]]
            })
        })
        .collect();
    std::fs::write(path, serde_json::to_vec(&records).unwrap()).unwrap();
}

/// An index under `dir` of one HotpotQA record whose paragraphs are `context` (`[[title,
/// [sentence, ...]], ...]`), encoded by a tiny generated model: for tests whose point is the
/// sentences a prompt holds, not the encoder.
pub fn tiny_index_of(dir: &Path, context: serde_json::Value) -> PathBuf {
    let corpus = dir.join("corpus.json");
    let record = serde_json::json!([{"_id": "0", "question": "q", "answer": "a",
                                     "supporting_facts": [], "context": context}]);
    std::fs::write(&corpus, record.to_string()).unwrap();
    let model = dir.join("model");
    TinyBert::default().write(&model).unwrap();
    let index_dir = dir.join("index");
    rag::index::build(&tiny_build_options(&model, corpus, &index_dir)).unwrap();
    index_dir
}

/// Build options for a tiny test index: depths 1 and 3, served at size 16.
pub fn tiny_build_options(model: &Path, corpus: PathBuf, index_dir: &Path) -> BuildOptions {
    BuildOptions {
        index_dir: index_dir.to_path_buf(),
        corpus: vec![corpus],
        model_dir: model.to_path_buf(),
        encoder: EncoderOptions::default(),
        layers: Some(vec![1, 3]),
        dim: Some(16),
        reduce: None,
        ann: Default::default(),
        template: "{title}: {text}".into(),
        chunk_size: 32,
        skip_bad: false,
        fresh: false,
        shard: None,
        progress: ProgressMode::Quiet,
        vectors_from: None,
    }
}

/// The default generator, if `scripts/fetch-models.sh llm` has put it in place.
pub fn default_llm() -> Option<PathBuf> {
    let path = std::env::var_os("RAG_LLM")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"));
    path.is_file().then_some(path)
}

/// The small generator (`scripts/fetch-models.sh llm-small`), which CI fetches.
pub fn small_llm() -> Option<PathBuf> {
    let path = repo_root().join("data/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    path.is_file().then_some(path)
}

const NO_LLM: &str = "no GGUF generator; run scripts/fetch-models.sh llm (or llm-small)";

/// A generator for `test`: the default one, else the small one; with neither, `test` is
/// reported [`missing`] (a failure where models are required).
pub fn any_llm(test: &str) -> Option<PathBuf> {
    let llm = default_llm().or_else(small_llm);
    if llm.is_none() {
        missing(test, "models", NO_LLM);
    }
    llm
}

/// Every generator present for `test`, the default first; with none, as [`any_llm`].
pub fn all_llms(test: &str) -> Vec<PathBuf> {
    let llms: Vec<PathBuf> = default_llm().into_iter().chain(small_llm()).collect();
    if llms.is_empty() {
        missing(test, "models", NO_LLM);
    }
    llms
}

/// The settings of a retrieval-only `rag eval` run (no generator) over `cells`.
pub fn retrieval_config(
    questions_file: &Path,
    questions: usize,
    cells: Vec<rag::eval::hotpot::RunCell>,
    strategy: rag::retrieve::Strategy,
    index: &Path,
) -> rag::eval::hotpot::RunConfig {
    rag::eval::hotpot::RunConfig {
        questions_file: questions_file.to_path_buf(),
        questions,
        cells,
        mode: strategy.mode,
        hops: strategy.hops,
        tuning: None,
        top_k: 5,
        context_tokens: 0,
        context_only: false,
        sentence_weights: None,
        context_floor: 0,
        widen_tokens: 0,
        oracle: false,
        generator: None,
        prompt_style: None,
        max_tokens: None,
        yes_no_bias: None,
        option_bias: None,
        option_facts: false,
        full_dates: false,
        option_dates: false,
        option_counts: false,
        option_measures: false,
        shared_place: false,
        number_words: false,
        answer_again: false,
        extractive: false,
        yes_no_facts: false,
        index: Some(index.to_path_buf()),
        rankings_from: None,
        precision: None,
    }
}

/// What a run folder says was retrieved, per question, and its summary's recall.
pub fn run_result(run: &Path) -> (Vec<(String, Vec<String>)>, serde_json::Value) {
    let mut lines: Vec<(String, Vec<String>)> =
        std::fs::read_to_string(run.join("predictions.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let p: serde_json::Value = serde_json::from_str(l).unwrap();
                let retrieved = p["retrieved"].as_array().unwrap();
                let titles = retrieved
                    .iter()
                    .map(|t| t.as_str().unwrap().into())
                    .collect();
                (p["id"].as_str().unwrap().to_string(), titles)
            })
            .collect();
    lines.sort();
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    (lines, summary["cells"].clone())
}
