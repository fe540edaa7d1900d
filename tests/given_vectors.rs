//! `rag index --vectors-from DIR` writes given vectors through the real index writer: given the
//! encoder's own vectors it builds the same index as encoding does (same vector files, same
//! rankings), and row files that do not match the corpus are refused naming the file.

mod common;

use std::path::Path;

use rag::encoder::Precision;
use rag::index::{self, given_vectors};
use rag::retrieve::{Retriever, SearchRequest, Strategy};

/// The rows of a faiss `IndexFlatL2` file: what follows its 45-byte header.
fn stored_rows(dir: &Path, depth: usize, dim: usize) -> Vec<u8> {
    std::fs::read(index::dense_file(dir, depth, dim)).unwrap()[45..].to_vec()
}

fn ranking(retriever: &Retriever, query: &str, layers: usize) -> Vec<(u64, String)> {
    let hits = retriever
        .search(&SearchRequest {
            query,
            k: 10,
            strategy: Strategy::default(),
            layers: Some(layers),
            dim: None,
        })
        .unwrap()
        .hits;
    hits.iter()
        .map(|h| (h.id, format!("{:.5}", h.score)))
        .collect()
}

#[test]
fn given_vectors_build_the_index_encoding_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 30, 5);
    let encoded_dir = tmp.path().join("encoded");
    let encoded = common::tiny_build_options(&model, corpus.clone(), &encoded_dir);
    let documents = index::build(&encoded).unwrap().documents;

    // The encoded index's own vectors, as row files; one more set scaled by 3 (rows are
    // renormalised as they are read, as encoded ones are).
    let rows = tmp.path().join("rows");
    std::fs::create_dir(&rows).unwrap();
    for depth in [1, 3] {
        let bytes = stored_rows(&encoded_dir, depth, 16);
        let scaled: Vec<u8> = bytes
            .chunks_exact(4)
            .flat_map(|b| (3.0 * f32::from_le_bytes(b.try_into().unwrap())).to_le_bytes())
            .collect();
        std::fs::write(given_vectors::layer_file(&rows, depth), scaled).unwrap();
    }
    let given_dir = tmp.path().join("given");
    let mut given = common::tiny_build_options(&model, corpus.clone(), &given_dir);
    given.vectors_from = Some(rows.clone());
    assert_eq!(index::build(&given).unwrap().documents, documents);
    for depth in [1, 3] {
        let (a, b) = (
            stored_rows(&encoded_dir, depth, 16),
            stored_rows(&given_dir, depth, 16),
        );
        let floats = |v: &[u8]| -> Vec<f32> {
            v.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        let worst = floats(&a)
            .iter()
            .zip(floats(&b))
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "layer {depth}: rows differ by {worst}");
    }
    let (from_encoder, from_rows) = (
        Retriever::open(&encoded_dir, None, Precision::F32).unwrap(),
        Retriever::open(&given_dir, None, Precision::F32).unwrap(),
    );
    for query in ["topic 7 river", "what is the film about"] {
        for depth in [1, 3] {
            assert_eq!(
                ranking(&from_encoder, query, depth),
                ranking(&from_rows, query, depth),
                "{query:?} at layer {depth}"
            );
        }
    }

    // One row short, one row over, and a missing depth: each refused naming its file, and no
    // index left behind.
    let layer3 = given_vectors::layer_file(&rows, 3);
    let full = std::fs::read(&layer3).unwrap();
    let row = 16 * 4;
    for (name, bytes, says) in [
        ("short", full[..full.len() - row].to_vec(), "fewer rows"),
        (
            "over",
            [full.clone(), full[..row].to_vec()].concat(),
            "more rows",
        ),
        ("torn", full[..full.len() - 1].to_vec(), "not whole rows"),
    ] {
        std::fs::write(&layer3, &bytes).unwrap();
        let dir = tmp.path().join(name);
        let mut options = common::tiny_build_options(&model, corpus.clone(), &dir);
        options.vectors_from = Some(rows.clone());
        let err = format!("{:#}", index::build(&options).unwrap_err());
        assert!(
            err.contains(says) && err.contains("layer-3.f32"),
            "{name}: {err}"
        );
        assert!(!dir.join("manifest.json").exists(), "{name}");
    }
    std::fs::remove_file(&layer3).unwrap();
    let missing = tmp.path().join("missing");
    let line = common::refused(&common::index_args(
        &model,
        &[&corpus],
        &missing,
        &[
            "--layers",
            "1,3",
            "--dim",
            "16",
            "--vectors-from",
            rows.to_str().unwrap(),
        ],
    ));
    assert!(
        line.contains("--vectors-from") && line.contains("layer-3.f32"),
        "{line}"
    );
}
