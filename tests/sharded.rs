//! Sharded indexes (eval/scale/): shards built one at a time by `rag index --shard i/n`, merged
//! by `rag index --merge`, search exactly like one index of the whole corpus (dense and BM25,
//! their fusions, one hop and two), and a shard that is missing, damaged or rebuilt since the
//! merge is refused by name.

mod common;

use std::path::{Path, PathBuf};

use rag::encoder::Precision;
use rag::index::{self, Index};
use rag::retrieve::{Mode, Retriever, SearchRequest, Strategy};

use common::{refused, run_result, succeed};

const SHARDS: usize = 4;

/// A tiny model, a corpus of 300 paragraphs (with duplicates, which every shard must skip the
/// same way), the single index of it and its 4 shards, merged.
fn single_and_sharded(dir: &Path) -> (PathBuf, PathBuf) {
    let (model, corpus) = common::tiny_model_and_corpus(dir, 60, 5);
    let again = dir.join("again.json");
    common::write_corpus(&again, 10, 5);
    let build =
        |index: &Path, extra: &[&str]| common::tiny_index(&model, &[&corpus, &again], index, extra);
    let single = dir.join("single");
    build(&single, &[]);
    let sharded = dir.join("sharded");
    for i in 0..SHARDS {
        build(&sharded, &["--shard", &format!("{i}/{SHARDS}")]);
    }
    let merged = succeed(&["index", "--merge", "--index", sharded.to_str().unwrap()]);
    assert!(
        merged.contains("4 shards checked and merged, 300 documents"),
        "{merged}"
    );
    (single, sharded)
}

fn questions() -> Vec<String> {
    (0..12)
        .map(|n| match n % 3 {
            0 => format!("topic {}", n * 23),
            1 => "river city film garden".to_string() + &" stone".repeat(n % 4),
            _ => format!("what is topic {} about? bridge winter", n * 11),
        })
        .collect()
}

#[test]
fn a_sharded_index_ranks_exactly_like_the_single_index_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (single, sharded) = single_and_sharded(dir.path());
    let verified = succeed(&["index", "--verify", "--index", sharded.to_str().unwrap()]);
    assert!(verified.contains("300 documents"), "{verified}");

    // The default tuning, title links on: BM25 scores are summed the same way in every shard
    // (index::bm25::exact), so even near-ties, which links and fusion amplify, rank alike.
    let one = Retriever::open(&single, None, Precision::F32).unwrap();
    let many = Retriever::open(&sharded, None, Precision::F32).unwrap();
    assert_eq!(many.index.parts().len(), SHARDS);
    assert_eq!(many.index.len(), one.index.len());
    let sizes: Vec<u64> = many.index.parts().iter().map(|p| p.documents()).collect();
    assert!(sizes.iter().all(|&n| n > 40), "uneven shards {sizes:?}");
    for mode in Mode::ALL {
        for hops in [1, 2] {
            for (layers, dim) in [(3, 16), (1, 8)] {
                for query in questions() {
                    let request = SearchRequest {
                        query: &query,
                        k: 10,
                        strategy: Strategy::new(mode, hops).unwrap(),
                        layers: Some(layers),
                        dim: Some(dim),
                    };
                    let a = one.search(&request).unwrap().hits;
                    let b = many.search(&request).unwrap().hits;
                    let what = format!("{mode} {hops} hop(s) L{layers} d{dim} {query:?}");
                    assert_eq!(a.len(), b.len(), "{what}");
                    for (x, y) in a.iter().zip(&b) {
                        assert_eq!((x.id, &x.title), (y.id, &y.title), "{what}");
                        assert!((x.score - y.score).abs() < 1e-4, "{what}: {x:?} {y:?}");
                    }
                }
            }
        }
    }

    // The command line reads it too.
    let hits = |index: &Path| {
        let out = common::rag_json([
            "search",
            "topic 42",
            "--index",
            index.to_str().unwrap(),
            "--mode",
            "fusion",
            "--k",
            "10",
            "--json",
        ]);
        out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["title"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(hits(&single), hits(&sharded));
}

#[test]
fn a_missing_damaged_or_rebuilt_shard_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_, sharded) = single_and_sharded(dir.path());
    let index_arg = sharded.to_str().unwrap().to_string();

    // Damaged: one byte of shard 2's document store changed.
    let docs = sharded
        .join("shard-2-of-4")
        .join(index::docstore::DOCS_FILE);
    let mut bytes = std::fs::read(&docs).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&docs, &bytes).unwrap();
    let err = format!("{:#}", Index::open(&sharded).err().unwrap());
    assert!(
        err.contains("shard-2-of-4") && err.contains("docs.jsonl"),
        "{err}"
    );
    let line = refused(&["search", "topic 1", "--index", &index_arg]);
    assert!(
        line.contains("shard-2-of-4") && line.contains("docs.jsonl"),
        "{line}"
    );
    let line = refused(&["index", "--merge", "--index", &index_arg]);
    assert!(
        line.contains("shard-2-of-4") && line.contains("docs.jsonl"),
        "{line}"
    );
    let line = refused(&["index", "--verify", "--index", &index_arg]);
    assert!(line.contains("shard-2-of-4"), "{line}");
    bytes[10] ^= 0x20;
    std::fs::write(&docs, &bytes).unwrap();
    Index::open(&sharded).unwrap();

    // Damaged: shard 1's ids no longer those its manifest recorded.
    let ids = sharded.join("shard-1-of-4").join(index::sharded::IDS_FILE);
    let original = std::fs::read(&ids).unwrap();
    let mut swapped = original.clone();
    swapped.swap(0, 8);
    std::fs::write(&ids, &swapped).unwrap();
    let line = refused(&["search", "topic 1", "--index", &index_arg]);
    assert!(
        line.contains("shard-1-of-4") && line.contains("ids.u64"),
        "{line}"
    );
    std::fs::write(&ids, &original).unwrap();

    // Missing: the merge names the shard and how to build it.
    let moved = dir.path().join("shard-3-elsewhere");
    std::fs::rename(sharded.join("shard-3-of-4"), &moved).unwrap();
    let line = refused(&["index", "--merge", "--index", &index_arg]);
    assert!(
        line.contains("shard-3-of-4 is missing") && line.contains("--shard 3/4"),
        "{line}"
    );
    let line = refused(&["search", "topic 1", "--index", &index_arg]);
    assert!(line.contains("shard-3-of-4"), "{line}");
    std::fs::rename(&moved, sharded.join("shard-3-of-4")).unwrap();

    // Rebuilt since the merge: refused until merged again.
    let shard0 = sharded.join("shard-0-of-4");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shard0.join("manifest.json")).unwrap()).unwrap();
    manifest["generation"] = "0123456789abcdef".into();
    std::fs::write(
        shard0.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let line = refused(&["search", "topic 1", "--index", &index_arg]);
    assert!(
        line.contains("shard-0-of-4") && line.contains("--merge"),
        "{line}"
    );
}

#[test]
fn bad_shard_flags_are_refused_in_one_line() {
    let out = common::rag()
        .args(["index", "--shard", "4/4", "--index", "/nonexistent"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 <= i < n"));
    let dir = tempfile::tempdir().unwrap();
    let line = refused(&["index", "--merge", "--index", dir.path().to_str().unwrap()]);
    assert!(line.contains("holds no shards"), "{line}");
}

#[test]
fn shards_hits_merged_make_the_run_folder_of_the_single_index() {
    let dir = tempfile::tempdir().unwrap();
    let (single, sharded) = single_and_sharded(dir.path());
    let questions = dir.path().join("questions.json");
    common::write_topic_questions(&questions, 25);
    let runs = dir.path().join("runs");
    let hits = dir.path().join("hits");
    for mode in ["dense", "bm25"] {
        let eval = |index: &Path, name: &str, extra: &[&str]| {
            let args =
                common::retrieval_eval_args(index, &questions, &runs, name, (mode, "3"), extra);
            succeed(&args)
        };
        eval(&single, &format!("single-{mode}"), &[]);
        for i in 0..SHARDS {
            let shard = format!("{i}/{SHARDS}");
            let hits_dir = hits.join(mode);
            let out = eval(
                &sharded,
                "unused",
                &["--shard", &shard, "--hits-dir", hits_dir.to_str().unwrap()],
            );
            assert!(out.contains("25 rankings"), "{out}");
        }
        let merged_name = format!("merged-{mode}");
        let hits_dir = hits.join(mode);
        eval(
            &sharded,
            &merged_name,
            &["--from-hits", hits_dir.to_str().unwrap()],
        );
        let (a, a_summary) = run_result(&runs.join(format!("single-{mode}")));
        let (b, b_summary) = run_result(&runs.join(&merged_name));
        assert_eq!(a, b, "{mode}");
        assert!(
            a_summary[0]["recall"]["5"].as_f64().unwrap() > 0.0,
            "{a_summary}"
        );
        assert_eq!(a_summary[0]["recall"], b_summary[0]["recall"], "{mode}");
        assert!(!runs.join("unused").exists());
    }

    // A shard's hits missing: refused, naming the file and how to make it.
    std::fs::remove_file(hits.join("dense").join("shard-1-of-4.jsonl")).unwrap();
    let line = refused(&[
        "eval",
        "--index",
        sharded.to_str().unwrap(),
        "--questions",
        questions.to_str().unwrap(),
        "--no-generate",
        "--mode",
        "dense",
        "--hops",
        "1",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--from-hits",
        hits.join("dense").to_str().unwrap(),
    ]);
    assert!(
        line.contains("shard-1-of-4.jsonl") && line.contains("--shard 1/4"),
        "{line}"
    );
}

/// An update of a sharded index cut off after its shards were renamed into place but before
/// `shards.json` named them: searches refuse the index in one line (never a mix of
/// generations), and the next update puts the shards `shards.json` names back first, then
/// applies itself.
#[test]
fn a_sharded_update_cut_off_before_its_top_manifest_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let (_, sharded) = single_and_sharded(dir.path());
    let model = dir.path().join("model");
    let top = sharded.join(index::sharded::SHARDS_FILE);
    let before_top = std::fs::read(&top).unwrap();
    let before = Index::open(&sharded).unwrap().manifest.build_id();
    // Copies of every shard as they are, to play the `.old` ones the switch leaves.
    let copies = dir.path().join("copies");
    std::fs::create_dir(&copies).unwrap();
    for i in 0..SHARDS {
        let name = format!("shard-{i}-of-{SHARDS}");
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(sharded.join(&name))
            .arg(copies.join(&name))
            .status()
            .unwrap();
        assert!(copied.success());
    }
    let remove = |title: &str| {
        succeed(&[
            "index",
            "--model",
            model.to_str().unwrap(),
            "--index",
            sharded.to_str().unwrap(),
            "--remove",
            title,
            "--json",
        ])
    };
    remove("topic 5");
    assert_ne!(Index::open(&sharded).unwrap().manifest.build_id(), before);
    // Back to the moment before the top manifest was replaced.
    std::fs::write(&top, &before_top).unwrap();
    for i in 0..SHARDS {
        let name = format!("shard-{i}-of-{SHARDS}");
        std::fs::rename(copies.join(&name), sharded.join(format!("{name}.old"))).unwrap();
    }
    let line = refused(&["search", "topic 5", "--index", sharded.to_str().unwrap()]);
    assert!(
        line.contains("rebuilt since the merge") || line.contains("is build"),
        "{line}"
    );

    let out: serde_json::Value = serde_json::from_str(&remove("topic 7")).unwrap();
    assert_eq!(out["removed"], serde_json::json!(1), "{out}");
    let index = Index::open(&sharded).unwrap();
    let titles: Vec<String> = index
        .titles()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    // Rolled back: topic 5 is served again; topic 7 is gone; no `.old` is left.
    assert!(titles.contains(&"topic 5".to_string()) && !titles.contains(&"topic 7".to_string()));
    for i in 0..SHARDS {
        assert!(!sharded.join(format!("shard-{i}-of-{SHARDS}.old")).exists());
    }
}
