//! `rag index --dim K` stores K dimensions per depth (the first K, renormalised): the vector files
//! are K/width of the full ones, every size up to K ranks exactly as a full-width index queried
//! at that size, a larger size is a one-line error naming the flag, and an index built before
//! `--dim` meant the stored width still opens with its old default.

mod common;

use std::path::Path;

use rag::encoder::Precision;
use rag::index::{self, Index, Manifest};
use rag::retrieve::{Retriever, SearchRequest, Strategy};

fn ranking(retriever: &Retriever, query: &str, layers: usize, dim: Option<usize>) -> Vec<u64> {
    retriever
        .search(&SearchRequest {
            query,
            k: 10,
            strategy: Strategy::default(),
            layers: Some(layers),
            dim,
        })
        .unwrap()
        .hits
        .iter()
        .map(|h| h.id)
        .collect()
}

fn dense_bytes(dir: &Path, depth: usize, dim: usize) -> u64 {
    std::fs::metadata(index::dense_file(dir, depth, dim))
        .unwrap()
        .len()
}

#[test]
fn dim_stores_that_width_and_serves_every_size_up_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 40, 5);
    let full_dir = tmp.path().join("full");
    let small_dir = tmp.path().join("small");
    let mut full = common::tiny_build_options(&model, corpus.clone(), &full_dir);
    full.dim = None;
    let summary = index::build(&full).unwrap();
    assert_eq!((summary.stored_dim, summary.dim), (32, 32));
    let mut small = common::tiny_build_options(&model, corpus.clone(), &small_dir);
    small.dim = Some(8);
    let summary = index::build(&small).unwrap();
    assert_eq!((summary.stored_dim, summary.dim), (8, 8));

    // A quarter of the width, a quarter of the vectors (the faiss header aside).
    let manifest = Manifest::read(&small_dir).unwrap();
    assert_eq!((manifest.stored_dim, manifest.default_dim), (8, 8));
    assert_eq!(
        manifest.format_version,
        index::manifest::CHECKSUMS_FORMAT_VERSION
    );
    for depth in [1, 3] {
        assert!(!index::dense_file(&small_dir, depth, 32).exists());
        let (full_bytes, small_bytes) = (
            dense_bytes(&full_dir, depth, 32),
            dense_bytes(&small_dir, depth, 8),
        );
        let vectors = 200 * 4;
        assert_eq!(
            small_bytes - vectors * 8,
            full_bytes - vectors * 32,
            "same header, {full_bytes} vs {small_bytes} bytes"
        );
    }
    // The same build is up to date; another width is not.
    assert!(index::build(&small).unwrap().up_to_date);

    // Every size up to 8 ranks as the full-width index at that size, at every depth.
    let full = Retriever::open(&full_dir, None, Precision::F32).unwrap();
    let small = Retriever::open(&small_dir, None, Precision::F32).unwrap();
    for query in [
        "topic 42 river",
        "what is the film about",
        "harbor planet engine",
    ] {
        for depth in [1, 3] {
            for dim in [4, 8] {
                assert_eq!(
                    ranking(&small, query, depth, Some(dim)),
                    ranking(&full, query, depth, Some(dim)),
                    "{query:?} at {depth} x {dim}"
                );
            }
            assert_eq!(
                ranking(&small, query, depth, None),
                ranking(&full, query, depth, Some(8))
            );
        }
    }
    // A larger size is refused, with the rebuild that gives it (the command line names the
    // flag: below).
    let err = small
        .search(&SearchRequest {
            query: "topic 1",
            k: 5,
            strategy: Strategy::default(),
            layers: None,
            dim: Some(16),
        })
        .unwrap_err()
        .downcast::<rag::index::CellRefusal>()
        .unwrap();
    assert_eq!(err.rebuild_flags().as_deref(), Some("--dim 16"), "{err}");
    assert!(err.to_string().contains("dim 16 is outside 1..=8"), "{err}");
    drop((full, small));
    let small_arg = small_dir.to_str().unwrap();
    let line = common::refused(&["search", "topic 1", "--index", small_arg, "--dim", "16"]);
    assert!(
        line.contains("--dim 16 is outside 1..=8") && line.contains("rag index --dim 16"),
        "{line}"
    );
    let json = common::rag_json(["search", "topic 1", "--json", "--index", small_arg]);
    assert_eq!(json["dim"], 8);

    // More than the model has is refused before anything is encoded.
    let wide = tmp.path().join("wide");
    let line = common::refused(&common::index_args(
        &model,
        &[&corpus],
        &wide,
        &["--dim", "33"],
    ));
    assert!(line.contains("--dim 33 is outside 1..=32"), "{line}");
    assert!(!tmp.path().join("wide").exists());
}

/// An index from before: the full width stored, a smaller default in the manifest (what `--dim`
/// used to set). It opens as it did: the default served, every size up to the full width.
#[test]
fn an_index_from_before_opens_with_its_default_size() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 20, 5);
    let dir = tmp.path().join("old");
    let mut options = common::tiny_build_options(&model, corpus, &dir);
    options.dim = None;
    index::build(&options).unwrap();
    // The manifest is not among the files it seals, so the edit keeps the index whole.
    let path = dir.join(index::manifest::MANIFEST_FILE);
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["default_dim"] = 16.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();

    let opened = Index::open(&dir).unwrap();
    assert_eq!(
        (opened.manifest.stored_dim, opened.manifest.default_dim),
        (32, 16)
    );
    drop(opened);
    let retriever = Retriever::open(&dir, None, Precision::F32).unwrap();
    let search = |dim| {
        retriever
            .search(&SearchRequest {
                query: "topic 7",
                k: 5,
                strategy: Strategy::default(),
                layers: None,
                dim,
            })
            .unwrap()
            .cell
            .dim
    };
    assert_eq!(search(None), 16);
    assert_eq!(search(Some(32)), 32);
    index::verify(&dir).unwrap();
}
