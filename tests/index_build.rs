//! Building and querying an index end to end on a tiny generated model and corpus: the three
//! retrieval modes, the checks that refuse mismatched queries, and crash safety (a build killed
//! midway leaves the old index intact and resumes where it stopped).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use rag::encoder::tiny::TinyBert;
use rag::index::{self, Index};
use rag::retrieve::{reciprocal_rank_fusion, Mode, Retriever, SearchRequest};

#[test]
fn build_then_search_three_ways_and_refuse_what_the_index_cannot_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    TinyBert::default().write(&model).unwrap();
    let corpus = tmp.path().join("corpus.json");
    common::write_corpus(&corpus, 20, 5);
    let index_dir = tmp.path().join("index");

    let summary = index::build(&common::tiny_build_options(
        &model,
        corpus.clone(),
        &index_dir,
    ))
    .unwrap();
    assert_eq!(summary.documents, 100);
    assert_eq!(summary.layers, vec![1, 3]);
    assert!(!summary.up_to_date);
    assert!(!index::build::building_dir(&index_dir).exists());
    // The same build again is a no-op; another size is not.
    assert!(
        index::build(&common::tiny_build_options(
            &model,
            corpus.clone(),
            &index_dir
        ))
        .unwrap()
        .up_to_date
    );
    let mut wider = common::tiny_build_options(&model, corpus.clone(), &index_dir);
    wider.dim = Some(32);
    assert!(!index::build(&wider).unwrap().up_to_date);
    index::build(&common::tiny_build_options(
        &model,
        corpus.clone(),
        &index_dir,
    ))
    .unwrap();

    let retriever = Retriever::open(&index_dir, None).unwrap();
    assert_eq!(retriever.index.manifest.default_dim, 16);
    let search = |mode, layers, dim| {
        retriever.search(&SearchRequest {
            query: "topic 42",
            k: 5,
            mode,
            layers,
            dim,
        })
    };
    let bm25 = search(Mode::Bm25, None, None).unwrap();
    assert_eq!(bm25.hits[0].title, "topic 42");
    // Hybrid is the reciprocal-rank fusion of the two rankings, cut to k.
    let hybrid = search(Mode::Hybrid, None, None).unwrap();
    let (layers, dim) = (hybrid.layers, hybrid.dim);
    let mut timings = Default::default();
    let mut rank = |mode| {
        retriever
            .rank(&["topic 42"], mode, layers, dim, 50, &mut timings)
            .unwrap()
            .remove(0)
    };
    let fused = reciprocal_rank_fusion(&[rank(Mode::Dense), rank(Mode::Bm25)]);
    let hybrid_ids: Vec<u64> = hybrid.hits.iter().map(|h| h.id).collect();
    let fused_ids: Vec<u64> = fused.iter().take(5).map(|h| h.0).collect();
    assert_eq!(hybrid_ids, fused_ids);
    let dense = search(Mode::Dense, Some(1), Some(8)).unwrap();
    assert_eq!((dense.layers, dense.dim, dense.hits.len()), (1, 8, 5));
    assert!(dense.hits.windows(2).all(|w| w[0].score >= w[1].score));
    // A size not built at index time is derived from the stored vectors and cached.
    assert!(index::dense_file(&index_dir, 1, 8).exists());
    assert!(index::dense_file(&index_dir, 3, 16).exists());

    let err = search(Mode::Dense, Some(2), None).unwrap_err().to_string();
    assert!(err.contains("no vectors for --layers 2"), "{err}");
    let err = search(Mode::Dense, None, Some(33)).unwrap_err().to_string();
    assert!(err.contains("--dim 33"), "{err}");

    // Another model (same shape, other weights) is refused.
    let other = tmp.path().join("other");
    TinyBert {
        seed: 99,
        ..Default::default()
    }
    .write(&other)
    .unwrap();
    let err = Retriever::open(&index_dir, Some(&other))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not match the index"), "{err}");
}

#[test]
fn killed_build_leaves_old_index_intact_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    TinyBert::default().write(&model).unwrap();
    let small = tmp.path().join("small.json");
    common::write_corpus(&small, 4, 5);
    let big = tmp.path().join("big.json");
    common::write_corpus(&big, 800, 10);
    let index_dir = tmp.path().join("index");
    index::build(&common::tiny_build_options(&model, small, &index_dir)).unwrap();

    let mut child = common::rag()
        .args(["index", "--layers", "1,3", "--chunk-size", "16", "--corpus"])
        .arg(&big)
        .arg("--model")
        .arg(&model)
        .arg("--index")
        .arg(&index_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let progress = index::build::building_dir(&index_dir).join("progress.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let checkpointed = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["docstore"]["documents"].as_u64())
            .unwrap_or(0)
    };
    while checkpointed(&progress) < 64 {
        assert!(Instant::now() < deadline, "the build never checkpointed");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // The live index is still the small one, whole.
    let old = Index::open(&index_dir).unwrap();
    assert_eq!(old.len(), 20);
    assert_eq!(old.document(19).unwrap().title, "topic 19");

    let mut opts = common::tiny_build_options(&model, big, &index_dir);
    opts.dim = None;
    opts.chunk_size = 256;
    let summary = index::build(&opts).unwrap();
    assert!(
        summary.resumed_from >= 64,
        "resumed from {}",
        summary.resumed_from
    );
    assert_eq!(summary.documents, 8_000);
    let index = Index::open(&index_dir).unwrap();
    for id in [0u64, 4_321, 7_999] {
        assert_eq!(index.document(id).unwrap().title, format!("topic {id}"));
    }
}

#[test]
fn cli_reports_bad_input_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "index".into(),
            "--corpus".into(),
            "/nonexistent/c.json".into(),
            "--model".into(),
            "/nonexistent/m".into(),
        ],
        vec![
            "search".into(),
            "".into(),
            "--index".into(),
            tmp.path().display().to_string(),
        ],
        vec![
            "search".into(),
            "who?".into(),
            "--index".into(),
            tmp.path().join("none").display().to_string(),
        ],
    ];
    for args in cases {
        let out = common::rag().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
