//! Building and querying an index end to end on a tiny generated model and corpus: the three
//! retrieval modes, the checks that refuse mismatched queries, crash safety (a build killed
//! midway leaves the old index intact and resumes where it stopped), and indexes reduced with a
//! post-hoc PCA (`--reduce pca:K`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use rag::encoder::tiny::TinyBert;
use rag::encoder::Precision;
use rag::eval::hotpot::plan;
use rag::eval::hotpot::record::Precisions;
use rag::index::{self, Index, PcaSpec};
use rag::retrieve::fusion::{convex_fusion, reciprocal_rank_fusion};
use rag::retrieve::{Mode, Queries, Retriever, SearchRequest, Strategy};

#[test]
fn build_then_search_three_ways_and_refuse_what_the_index_cannot_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 20, 5);
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

    let retriever = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    assert_eq!(retriever.index.manifest.default_dim, 16);
    let search = |mode, layers, dim| {
        retriever.search(&SearchRequest {
            query: "topic 42",
            k: 5,
            strategy: Strategy::new(mode, 1).unwrap(),
            layers,
            dim,
        })
    };
    let bm25 = search(Mode::Bm25, None, None).unwrap();
    assert_eq!(bm25.hits[0].title, "topic 42");
    // Hybrid is the reciprocal-rank fusion of the two rankings, cut to k.
    let hybrid = search(Mode::Hybrid, None, None).unwrap();
    let mut timings = Default::default();
    let mut rank = |mode| {
        retriever
            .rank(
                Queries::texts(&["topic 42"]),
                Strategy::new(mode, 1).unwrap(),
                hybrid.cell,
                50,
                &mut timings,
            )
            .unwrap()
            .remove(0)
            .into_iter()
            .map(|s| (s.id, s.score))
            .collect::<Vec<_>>()
    };
    let (dense, lexical) = (rank(Mode::Dense), rank(Mode::Bm25));
    let fused = reciprocal_rank_fusion(&[dense.clone(), lexical.clone()]);
    let hybrid_ids: Vec<u64> = hybrid.hits.iter().map(|h| h.id).collect();
    let fused_ids: Vec<u64> = fused.iter().take(5).map(|h| h.0).collect();
    assert_eq!(hybrid_ids, fused_ids);
    // Fusion is the convex combination of the two rankings' scaled scores, cut to k.
    let convex = search(Mode::Fusion, None, None).unwrap();
    let expected = convex_fusion(&dense, &lexical, retriever.tuning.fusion_weight);
    let convex_ids: Vec<u64> = convex.hits.iter().map(|h| h.id).collect();
    let expected_ids: Vec<u64> = expected.iter().take(5).map(|h| h.0).collect();
    assert_eq!(convex_ids, expected_ids);
    let dense = search(Mode::Dense, Some(1), Some(8)).unwrap();
    assert_eq!((dense.cell, dense.hits.len()), (index::Cell::new(1, 8), 5));
    assert!(dense.hits.windows(2).all(|w| w[0].score >= w[1].score));
    // `--dim 16` stored 16 dims; a smaller size is derived from them in memory: reading an
    // index never writes to it.
    assert!(index::dense_file(&index_dir, 3, 16).exists());
    assert!(!index::dense_file(&index_dir, 3, 32).exists());
    assert!(!index::dense_file(&index_dir, 1, 8).exists());

    // Refusals are data (the command line words them: `refusals_suggest_only_what_would_work`).
    let refusal = |err: anyhow::Error| err.downcast::<index::CellRefusal>().unwrap();
    assert_eq!(
        refusal(search(Mode::Dense, Some(2), None).unwrap_err()),
        index::CellRefusal::LayersNotStored {
            layers: 2,
            stored: vec![1, 3]
        }
    );
    let err = refusal(search(Mode::Dense, None, Some(33)).unwrap_err());
    assert!(
        matches!(err, index::CellRefusal::DimOutsideStored { dim: 33, .. }),
        "{err}"
    );

    // Another model (same shape, other weights) is refused.
    let other = tmp.path().join("other");
    TinyBert {
        seed: 99,
        ..Default::default()
    }
    .write(&other)
    .unwrap();
    let err = Retriever::open(&index_dir, Some(&other), Precision::F32)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not match the index"), "{err}");
}

/// Opening an index does not hash the model's weights when their seal (inode, change time) is
/// the build's; weights changed since are hashed, served if their bytes are the built ones and
/// refused if not; an index from before the seal hashes them as before.
#[test]
fn the_model_is_hashed_only_when_changed_since_the_build() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 4, 2);
    // Weights written just before the build are sealed too: the build waits out integrity's
    // margin before hashing them.
    let index_dir = tmp.path().join("index");
    index::build(&common::tiny_build_options(&model, corpus, &index_dir)).unwrap();
    assert!(Index::open(&index_dir)
        .unwrap()
        .manifest
        .model
        .weights_seal
        .0
        .is_some());
    let weights = model.join("model.safetensors");
    let size = std::fs::metadata(&weights).unwrap().len();
    let hashed_by_open = || {
        let before = index::integrity::bytes_hashed();
        let opened = Retriever::open(&index_dir, None, Precision::F32).map(|_| ());
        (index::integrity::bytes_hashed() - before, opened)
    };
    let (hashed, opened) = hashed_by_open();
    assert_eq!(hashed, 0);
    opened.unwrap();

    // Same bytes, new change time (a chmod to the same mode): hashed, and served.
    let mode = std::fs::metadata(&weights).unwrap().permissions().mode();
    std::fs::set_permissions(&weights, std::fs::Permissions::from_mode(mode)).unwrap();
    let (hashed, opened) = hashed_by_open();
    assert_eq!(hashed, size);
    opened.unwrap();

    // One byte changed in place, the size kept: refused.
    let mut bytes = std::fs::read(&weights).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 0x01;
    std::fs::write(&weights, &bytes).unwrap();
    let err = hashed_by_open().1.unwrap_err().to_string();
    assert!(err.contains("does not match the index"), "{err}");
    bytes[at] ^= 0x01;
    std::fs::write(&weights, &bytes).unwrap();

    // An index from before the seal: hashed at every open.
    let path = index_dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["model"]
        .as_object_mut()
        .unwrap()
        .remove("weights_seal");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..2 {
        let (hashed, opened) = hashed_by_open();
        assert_eq!(hashed, size);
        opened.unwrap();
    }
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
        // f32 as the resuming build below: `rag index` defaults to bf16 on AMX CPUs, and a
        // build never resumes a partial one of another precision.
        .args([
            "index",
            "--layers",
            "1,3",
            "--chunk-size",
            "16",
            "--precision",
            "f32",
            "--corpus",
        ])
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

/// OpenBLAS falls back to its generic kernels on CPU models it does not know; `rag` then starts
/// itself again with the kernels the CPU can run (`util::use_best_blas_kernels`).
#[test]
fn rag_runs_openblas_with_the_kernels_the_cpu_has() {
    let out = common::rag()
        .arg("--help")
        .env("OPENBLAS_VERBOSE", "2")
        .env_remove("OPENBLAS_CORETYPE")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cores: Vec<&str> = printed
        .lines()
        .filter_map(|line| line.strip_prefix("Core: "))
        .collect();
    let test = "rag_runs_openblas_with_the_kernels_the_cpu_has";
    let Some(first) = cores.first() else {
        return common::skip(test, "the BLAS faiss uses here is not OpenBLAS");
    };
    #[cfg(target_arch = "x86_64")]
    let has_more =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let has_more = false;
    if !first.eq_ignore_ascii_case("prescott") || !has_more {
        return common::skip(test, &format!("OpenBLAS chose {first} itself"));
    }
    assert_eq!(cores.len(), 2, "one restart: {printed}");
    assert!(!cores[1].eq_ignore_ascii_case("prescott"), "{printed}");
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

#[test]
fn pca_reduced_index_answers_queries_and_records_its_pca() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 20, 5);
    let index_dir = tmp.path().join("index");
    let reduced = |k| {
        let mut options = common::tiny_build_options(&model, corpus.clone(), &index_dir);
        options.reduce = Some(PcaSpec { dim: k });
        options.dim = None;
        options
    };

    let summary = index::build(&reduced(8)).unwrap();
    assert_eq!((summary.stored_dim, summary.dim), (8, 8));
    assert_eq!(summary.reduce.as_ref().unwrap().fitted_on, 100);
    let manifest = index::Manifest::read(&index_dir).unwrap();
    let reduction = manifest.reduce.clone().unwrap();
    assert_eq!(reduction.method, PcaSpec { dim: 8 });
    assert_eq!(
        manifest.format_version,
        index::manifest::CHECKSUMS_FORMAT_VERSION
    );
    assert_eq!(manifest.stored_dim, 8);
    assert_eq!(
        reduction.transforms.keys().copied().collect::<Vec<_>>(),
        vec![1, 3]
    );
    for file in reduction.transforms.values() {
        assert!(index_dir.join(file).is_file(), "{}", file.display());
    }
    assert!(index::build(&reduced(8)).unwrap().up_to_date);

    // A paragraph's own text finds it first with a cosine of about 1, at every depth and size:
    // queries go through the same PCA as the stored vectors.
    let retriever = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    let doc = retriever.index.document(42).unwrap();
    let own_text = format!("{}: {}", doc.title, doc.text);
    for (layers, dim) in [(None, None), (Some(1), Some(4)), (Some(3), Some(8))] {
        let response = retriever
            .search(&SearchRequest {
                query: &own_text,
                k: 5,
                strategy: Strategy::default(),
                layers,
                dim,
            })
            .unwrap();
        assert_eq!(response.hits[0].id, 42, "{layers:?} {dim:?}");
        assert!(response.hits[0].score > 0.999, "{}", response.hits[0].score);
    }
    let err = retriever
        .search(&SearchRequest {
            query: "topic 42",
            k: 5,
            strategy: Strategy::default(),
            layers: None,
            dim: Some(16),
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("reduced with pca:8"), "{err}");
    drop(retriever);

    // The CLI searches it the same way.
    let json = common::rag_json([
        "search",
        &own_text,
        "--json",
        "--index",
        &index_dir.display().to_string(),
    ]);
    assert_eq!(json["hits"][0]["id"], 42);
    assert_eq!(json["dim"], 8);

    // Another reduction, or none, is a different index: rebuilt, not reported up to date.
    let other = index::build(&reduced(4)).unwrap();
    assert!(!other.up_to_date);
    assert_eq!(
        index::Manifest::read(&index_dir)
            .unwrap()
            .reduce
            .unwrap()
            .method,
        PcaSpec { dim: 4 }
    );
    let mut plain = common::tiny_build_options(&model, corpus.clone(), &index_dir);
    plain.dim = None;
    assert!(!index::build(&plain).unwrap().up_to_date);
    let manifest = index::Manifest::read(&index_dir).unwrap();
    assert!(manifest.reduce.is_none());
    assert_eq!(manifest.stored_dim, 32);
    assert!(!index_dir.join("pca").exists());
}

#[test]
fn bad_reductions_are_refused_and_a_failed_fit_leaves_a_resumable_build() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 1, 5);
    let index_dir = tmp.path().join("index");
    let options = |reduce: usize, dim: Option<usize>| {
        let mut options = common::tiny_build_options(&model, corpus.clone(), &index_dir);
        options.reduce = Some(PcaSpec { dim: reduce });
        options.dim = dim;
        options
    };
    let err = index::build(&options(64, None)).unwrap_err().to_string();
    assert!(
        err.contains("--reduce pca:64 keeps more dimensions than the model has (32)"),
        "{err}"
    );
    let err = index::build(&options(4, Some(8))).unwrap_err().to_string();
    assert!(
        err.contains("--dim 8 and --reduce pca:4 both set the stored width"),
        "{err}"
    );

    // Five paragraphs cannot give eight components: the build stops after encoding them...
    let err = format!("{:#}", index::build(&options(8, None)).unwrap_err());
    assert!(err.contains("--reduce pca:8 on layer 1"), "{err}");
    assert!(err.contains("at least 8 vectors"), "{err}");
    assert!(!index_dir.exists());
    // ...and a build without the reduction picks up the encoded vectors instead of encoding again.
    let mut plain = options(8, None);
    plain.reduce = None;
    let summary = index::build(&plain).unwrap();
    assert_eq!((summary.resumed_from, summary.documents), (5, 5));

    let out = common::rag()
        .args(["index", "--reduce", "svd:8", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("expected pca:K"), "{stderr}");
}

/// What a stopped build finished after encoding (BM25 here: the PCA fit after it fails) is kept
/// when it resumes, and a corpus whose files only got new times (a copy, or data provisioned
/// again, as a new session's is) is the same corpus: the build resumes instead of starting over,
/// and the index is then up to date rather than rebuilt.
#[test]
fn a_resumed_build_keeps_finished_stages_and_new_file_times_are_the_same_corpus() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 1, 5);
    let index_dir = tmp.path().join("index");
    let mut options = common::tiny_build_options(&model, corpus.clone(), &index_dir);
    options.reduce = Some(PcaSpec { dim: 8 });
    options.dim = None;
    assert!(index::build(&options).is_err());
    let work = index::build::building_dir(&index_dir);
    let progress: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("progress.json")).unwrap()).unwrap();
    assert!(
        progress["finished"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "bm25"),
        "{progress}"
    );
    let identity = |dir: &Path| {
        let meta = std::fs::metadata(dir.join("bm25").join("meta.json")).unwrap();
        (meta.ino(), meta.mtime(), meta.mtime_nsec())
    };
    let bm25 = identity(&work);
    let later = |hours: u64| {
        let file = std::fs::File::options().write(true).open(&corpus).unwrap();
        let time = std::time::SystemTime::now() + Duration::from_secs(3600 * hours);
        file.set_modified(time).unwrap();
    };
    later(1);
    options.reduce = None;
    let summary = index::build(&options).unwrap();
    assert_eq!((summary.resumed_from, summary.documents), (5, 5));
    assert_eq!(identity(&index_dir), bm25, "BM25 was built again");
    later(2);
    assert!(index::build(&options).unwrap().up_to_date);
}

/// A build stores the second hop's title links (read memory-mapped, not from every title);
/// an index from before them still searches (its links made from its titles) and gains them
/// on the next `rag index` of the same corpus, without a rebuild, ranking as before.
#[test]
fn title_links_are_stored_and_an_index_from_before_them_gains_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 30, 3);
    let index_dir = tmp.path().join("index");
    let options = common::tiny_build_options(&model, corpus, &index_dir);
    index::build(&options).unwrap();
    let text = "a note on Topic 12 and on topic 3, not topic 123";
    let stored = Index::open(&index_dir).unwrap().links().unwrap();
    let from_titles =
        index::links::Links::new(Index::open(&index_dir).unwrap().titles().unwrap()).unwrap();
    assert_eq!(stored.mentioned(text, 0), from_titles.mentioned(text, 0));
    assert_eq!(
        stored.mentioned(text, 0).len(),
        2,
        "{:?}",
        stored.mentioned(text, 0)
    );

    // The index as a build before stored links left it: no files, none in the manifest.
    let manifest_path = index_dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let files = manifest["files"].as_object_mut().unwrap();
    for name in [index::links::FST_FILE, index::links::IDS_FILE] {
        assert!(
            files.remove(name).is_some(),
            "{name} not in the manifest: {files:?}"
        );
        std::fs::remove_file(index_dir.join(name)).unwrap();
    }
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let search = |dir: &Path| {
        let retriever = Retriever::open(dir, None, Precision::F32).unwrap();
        let request = SearchRequest {
            query: "topic 7 and topic 12",
            k: 10,
            strategy: Strategy::new(Mode::Fusion, 2).unwrap(),
            layers: None,
            dim: None,
        };
        retriever
            .search(&request)
            .unwrap()
            .hits
            .into_iter()
            .map(|h| (h.id, h.score))
            .collect::<Vec<_>>()
    };
    let before = search(&index_dir);
    assert_eq!(
        Index::open(&index_dir)
            .unwrap()
            .links()
            .unwrap()
            .mentioned(text, 0),
        from_titles.mentioned(text, 0)
    );

    let summary = index::build(&options).unwrap();
    assert!(summary.up_to_date);
    assert!(index_dir.join(index::links::FST_FILE).exists());
    assert_eq!(search(&index_dir), before);
    let manifest = Index::open(&index_dir).unwrap().manifest;
    assert_eq!(manifest.updates, 0);
    assert!(manifest.files.contains_key(index::links::IDS_FILE));
}

/// `--precision int8`: an index built with it says so in its manifest, int8 questions against
/// f32 documents find what f32 questions find, with scores within the rounding, and an
/// evaluation records either side that is not f32, so that it is not resumed across one.
#[test]
fn int8_builds_are_recorded_and_int8_questions_rank_like_f32() {
    if !Precision::Int8.available() {
        return common::skip("int8 index", "this CPU has no AVX-512 VNNI");
    }
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 20, 5);
    let exact_dir = tmp.path().join("f32");
    let int8_dir = tmp.path().join("int8");
    index::build(&common::tiny_build_options(
        &model,
        corpus.clone(),
        &exact_dir,
    ))
    .unwrap();
    let mut int8 = common::tiny_build_options(&model, corpus, &int8_dir);
    int8.encoder.precision = Precision::Int8;
    index::build(&int8).unwrap();
    let precision_of = |dir: &Path| Index::open(dir).unwrap().manifest.model.precision;
    assert_eq!(precision_of(&exact_dir), Precision::F32);
    assert_eq!(precision_of(&int8_dir), Precision::Int8);

    let exact = Retriever::open(&exact_dir, None, Precision::F32).unwrap();
    let quick = Retriever::open(&exact_dir, None, Precision::Int8).unwrap();
    for query in ["topic 3", "topic 42", "topic 77 paragraph"] {
        let search = |retriever: &Retriever| {
            retriever
                .search(&SearchRequest {
                    query,
                    k: 5,
                    strategy: Strategy::default(),
                    layers: None,
                    dim: None,
                })
                .unwrap()
                .hits
        };
        let (want, got) = (search(&exact), search(&quick));
        assert_eq!(got[0].id, want[0].id, "{query}: top hit");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.score - w.score).abs() < 0.02, "{query}: {g:?} vs {w:?}");
        }
        assert!(
            got.iter().zip(&want).any(|(g, w)| g.score != w.score),
            "{query}: int8 scores are exactly f32's; is int8 in use?"
        );
    }
    let both = |questions, documents| {
        Some(Precisions {
            questions,
            documents,
        })
    };
    assert_eq!(plan::precisions(&exact, Mode::Dense), None);
    assert_eq!(
        plan::precisions(&quick, Mode::Fusion),
        both(Precision::Int8, Precision::F32)
    );
    let on_int8 = Retriever::open(&int8_dir, None, Precision::F32).unwrap();
    assert_eq!(
        plan::precisions(&on_int8, Mode::Dense),
        both(Precision::F32, Precision::Int8)
    );
    // BM25 reads no vectors.
    assert_eq!(plan::precisions(&on_int8, Mode::Bm25), None);
}

/// Issue 17, cases 4, 6 and 7: refusals say what is wrong and suggest only commands that work;
/// BM25, which has no depth or size, ignores them.
#[test]
fn refusals_suggest_only_what_would_work() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 4, 5);
    let index_dir = tmp.path().join("index");
    index::build(&common::tiny_build_options(
        &model,
        corpus.clone(),
        &index_dir,
    ))
    .unwrap();
    let dir = index_dir.display().to_string();
    let run = |args: &[&str]| {
        let out = common::rag().args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let search = |extra: &[&str]| {
        let mut args = vec!["search", "topic 3", "--index", &dir];
        args.extend_from_slice(extra);
        run(&args)
    };
    for (layers, says) in [
        (
            "0",
            "--layers 0 is outside 1..=3, the depths of model (the index stores 1,3)",
        ),
        ("99", "--layers 99 is outside 1..=3"),
        ("2", "rebuild with `rag index --layers 1,2,3`"),
    ] {
        let (ok, stderr) = search(&["--layers", layers]);
        assert!(!ok && stderr.contains(says), "--layers {layers}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
    let (ok, stderr) = search(&["--mode", "bm25", "--layers", "2", "--dim", "999"]);
    assert!(ok && stderr.contains("ignored"), "{stderr}");

    // --max-length is between 1 and the model's positions (128 for the tiny model).
    let corpus = corpus.display().to_string();
    let model = model.display().to_string();
    for length in ["0", "129"] {
        let other = tmp
            .path()
            .join(format!("index-{length}"))
            .display()
            .to_string();
        let (ok, stderr) = run(&[
            "index",
            "--corpus",
            &corpus,
            "--model",
            &model,
            "--index",
            &other,
            "--max-length",
            length,
        ]);
        assert!(
            !ok && stderr.contains("--max-length must be between 1 and 128"),
            "{stderr}"
        );
    }

    // A generator that is not a GGUF file says so, not "null result from llama cpp".
    let fake = tmp.path().join("model.gguf");
    std::fs::write(&fake, b"<html>404 not found</html>").unwrap();
    let fake = fake.display().to_string();
    let (ok, stderr) = run(&["ask", "who?", "--index", &dir, "--llm", &fake]);
    assert!(!ok && stderr.contains("not a GGUF file"), "{stderr}");
    // The header check's sizes agree with a real model: all of it is tensors, to within the
    // last tensor's alignment padding.
    if let Some(llm) = common::default_llm() {
        let header = rag::generate::gguf::check(&llm).unwrap();
        let len = std::fs::metadata(&llm).unwrap().len();
        assert!(
            header.needed_bytes <= len && header.needed_bytes + 64 > len,
            "{header:?} vs {len}"
        );
    }
}

/// `rag index` without `--precision` encodes in bf16 where the CPU has AMX tiles, else f32,
/// and the manifest says which; `--precision` overrides it, and `bf16` without AVX-512 BF16
/// falls back to f32 (said on stderr) rather than failing.
#[test]
fn index_records_its_default_and_asked_precision() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 12, 5);
    let build = |name: &str, extra: &[&str]| {
        let dir = tmp.path().join(name);
        let out = common::rag()
            .args(["index", "--layers", "1,3", "--model"])
            .arg(&model)
            .arg("--corpus")
            .arg(&corpus)
            .arg("--index")
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        (Index::open(&dir).unwrap().manifest.model.precision, stderr)
    };
    let (default, _) = build("default", &[]);
    assert_eq!(default, Precision::index_default());
    let (f32, _) = build("f32", &["--precision", "f32"]);
    assert_eq!(f32, Precision::F32);
    let (bf16, stderr) = build("bf16", &["--precision", "bf16"]);
    if Precision::Bf16.available() {
        assert_eq!(bf16, Precision::Bf16);
    } else {
        assert_eq!(bf16, Precision::F32);
        assert!(stderr.contains("no AVX-512 BF16"), "{stderr}");
    }
}
