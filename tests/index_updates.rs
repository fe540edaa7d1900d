//! Additions, changes and removals without a rebuild (`rag index --add/--remove/
//! --remove-source`, and a plain `rag index --corpus` of a changed corpus): after a sequence of
//! them, every search (dense through the HNSW graph and flat, BM25, hybrid, fusion; one hop and
//! two) ranks the same titles with the same scores as a fresh build of the resulting corpus,
//! removed documents never come back, and an update killed anywhere leaves the old generation
//! served and is finished by the same command.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use rag::encoder::Precision;
use rag::retrieve::{Mode, Retriever, SearchRequest, Strategy};
use serde_json::{json, Value};

use common::{refused, succeed};

/// What each test starts from: the real encoder, a scratch directory, and the first `n`
/// paragraphs of the shared HotpotQA sample with its questions; or a loud skip.
struct Setup {
    model: PathBuf,
    dir: tempfile::TempDir,
    docs: Vec<(String, String)>,
    questions: Vec<String>,
}

fn setup(test: &str, n: usize) -> Option<Setup> {
    let Some(model) = common::default_model() else {
        common::missing(test, "models", "the default encoder is not in data/models");
        return None;
    };
    let Some(data) = common::data_dir() else {
        common::missing(test, "data", "../shared/data/hotpotqa is not there");
        return None;
    };
    let (docs, questions) = paragraphs(&data, n);
    Some(Setup {
        model,
        dir: tempfile::tempdir().unwrap(),
        docs,
        questions,
    })
}

/// The first `n` distinct paragraphs of the distractor sample, as (title, text), and questions.
fn paragraphs(data: &Path, n: usize) -> (Vec<(String, String)>, Vec<String>) {
    let records: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(data.join("hotpotqa/hotpot_dev_distractor_sample.json")).unwrap(),
    )
    .unwrap();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut questions = Vec::new();
    for record in &records {
        questions.push(record["question"].as_str().unwrap().to_string());
        for pair in record["context"].as_array().unwrap() {
            let title = pair[0].as_str().unwrap().to_string();
            let text: String = pair[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            if seen.insert(title.clone()) {
                out.push((title, text));
            }
        }
        if out.len() >= n {
            break;
        }
    }
    out.truncate(n);
    (out, questions)
}

fn write_records(path: &Path, docs: &[(String, String)]) {
    let mut file = std::fs::File::create(path).unwrap();
    for (title, text) in docs {
        writeln!(file, "{}", json!({"title": title, "text": text})).unwrap();
    }
}

const SETTINGS: [&str; 6] = ["--layers", "3,6", "--ann", "hnsw:16", "--precision", "f32"];

fn build(model: &Path, corpus: &Path, index: &Path) {
    let mut args = common::index_args(model, &[corpus], index, &SETTINGS);
    args.push("--fresh");
    succeed(&args);
}

/// `docs` written to `base.jsonl` in `dir` and built into `dir/index`: that file and the index.
fn base_index(model: &Path, dir: &Path, docs: &[(String, String)]) -> (PathBuf, PathBuf) {
    let corpus = dir.join("base.jsonl");
    write_records(&corpus, docs);
    let index = dir.join("index");
    build(model, &corpus, &index);
    (corpus, index)
}

/// `rag index` on `index` with `model`, then `extra`.
fn index_command<'a>(model: &'a Path, index: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "index",
        "--model",
        model.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args
}

fn update(model: &Path, index: &Path, extra: &[&str]) -> Value {
    let mut args = index_command(model, index, &["--json"]);
    args.extend_from_slice(extra);
    serde_json::from_str(&succeed(&args)).unwrap()
}

/// `--remove TITLE` for each of `titles`.
fn removing<'a>(titles: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    titles
        .into_iter()
        .flat_map(|title| ["--remove", title.as_str()])
        .collect()
}

/// Every mode, one hop and two, through the HNSW graph (the stored size, efSearch past the
/// corpus's size so that the graph's answer is the exact one) and exactly (a smaller size):
/// the same titles in the same order, scores within 1e-4.
fn assert_same_rankings(updated: &Path, fresh: &Path, questions: &[String], what: &str) {
    let mut a = Retriever::open(updated, None, Precision::F32).unwrap();
    let mut b = Retriever::open(fresh, None, Precision::F32).unwrap();
    a.tuning.ef_search = Some(1024);
    b.tuning.ef_search = Some(1024);
    assert_eq!(a.index.len(), b.index.len(), "{what}: documents served");
    for mode in Mode::ALL {
        for hops in [1, 2] {
            for (layers, dim) in [(6, 384), (3, 96)] {
                for query in questions {
                    let request = SearchRequest {
                        query,
                        k: 10,
                        strategy: Strategy::new(mode, hops).unwrap(),
                        layers: Some(layers),
                        dim: Some(dim),
                    };
                    let x = a.search(&request).unwrap().hits;
                    let y = b.search(&request).unwrap().hits;
                    let case = format!("{what}: {mode} {hops} hop(s) L{layers} d{dim} {query:?}");
                    let titles = |h: &[rag::retrieve::Hit]| {
                        h.iter().map(|h| h.title.clone()).collect::<Vec<_>>()
                    };
                    assert_eq!(titles(&x), titles(&y), "{case}");
                    for (p, q) in x.iter().zip(&y) {
                        assert!((p.score - q.score).abs() < 1e-4, "{case}: {p:?} {q:?}");
                    }
                }
            }
        }
    }
}

/// No search in any mode returns one of `titles`, even asked for by its own text.
fn assert_never_found(index: &Path, gone: &[(String, String)]) {
    let retriever = Retriever::open(index, None, Precision::F32).unwrap();
    for (title, text) in gone {
        for mode in Mode::ALL {
            for hops in [1, 2] {
                for (layers, dim) in [(6, 384), (3, 96)] {
                    let query = format!("{title} {text}");
                    let request = SearchRequest {
                        query: &query,
                        k: 20,
                        strategy: Strategy::new(mode, hops).unwrap(),
                        layers: Some(layers),
                        dim: Some(dim),
                    };
                    let hits = retriever.search(&request).unwrap().hits;
                    assert!(
                        hits.iter().all(|h| &h.title != title),
                        "{title:?} was removed but {mode} {hops} hop(s) L{layers} found it"
                    );
                }
            }
        }
    }
    let titles: HashSet<String> = retriever
        .index
        .titles()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert!(gone.iter().all(|(t, _)| !titles.contains(t)));
}

#[test]
fn updates_rank_exactly_like_a_fresh_build_of_the_resulting_corpus() {
    let Some(Setup {
        model,
        dir,
        docs,
        questions,
    }) = setup("updates_rank_exactly_like_a_fresh_build", 420)
    else {
        return;
    };
    assert_eq!(docs.len(), 420);
    let questions = &questions[..12];
    let base = &docs[..300];
    let index = dir.path().join("updated");
    let base_file = dir.path().join("base.jsonl");
    write_records(&base_file, base);
    build(&model, &base_file, &index);

    // 100 new paragraphs and 10 of the base's with a changed text, in one --add.
    let mut extra: Vec<(String, String)> = docs[300..400].to_vec();
    let changed: Vec<(String, String)> = base[20..30]
        .iter()
        .map(|(t, x)| (t.clone(), format!("{x} It was revised in 2024.")))
        .collect();
    extra.extend(changed.iter().cloned());
    extra.push(base[0].clone()); // unchanged: not encoded again
    let extra_file = dir.path().join("extra.jsonl");
    write_records(&extra_file, &extra);
    let added = update(&model, &index, &["--add", extra_file.to_str().unwrap()]);
    assert_eq!(
        (&added["added"], &added["changed"], &added["unchanged"]),
        (&json!(100), &json!(10), &json!(1)),
        "{added}"
    );
    // The same again changes nothing and installs nothing.
    let again = update(&model, &index, &["--add", extra_file.to_str().unwrap()]);
    assert_eq!(again["up_to_date"], json!(true), "{again}");
    assert_eq!(again["generation"], added["generation"]);

    // Five titles out, then one of them back with its old text.
    let removed: Vec<(String, String)> = base[40..45].to_vec();
    let out = update(&model, &index, &removing(removed.iter().map(|(t, _)| t)));
    assert_eq!(out["removed"], json!(5), "{out}");
    assert_eq!(out["compacted"], json!(false), "{out}");
    let back_file = dir.path().join("back.jsonl");
    write_records(&back_file, &removed[..1]);
    update(&model, &index, &["--add", back_file.to_str().unwrap()]);

    // The resulting corpus, in the order the updates left it, built afresh.
    let changed_titles: HashSet<&String> = changed.iter().map(|(t, _)| t).collect();
    let gone: HashSet<&String> = removed[1..].iter().map(|(t, _)| t).collect();
    let mut resulting: Vec<(String, String)> = base
        .iter()
        .filter(|(t, _)| !changed_titles.contains(t) && !gone.contains(t) && *t != removed[0].0)
        .cloned()
        .collect();
    resulting.extend(docs[300..400].iter().cloned());
    resulting.extend(changed.iter().cloned());
    resulting.push(removed[0].clone());
    let resulting_file = dir.path().join("resulting.jsonl");
    write_records(&resulting_file, &resulting);
    let fresh = dir.path().join("fresh");
    build(&model, &resulting_file, &fresh);
    assert_same_rankings(&index, &fresh, questions, "after additions and removals");
    assert_never_found(&index, &removed[1..]);
    let verified = succeed(&["index", "--verify", "--index", index.to_str().unwrap()]);
    assert!(verified.contains("is whole"), "{verified}");

    // Past the compaction share: the rows go, the ids are renumbered, rankings stay.
    let out = update(
        &model,
        &index,
        &removing(resulting[..100].iter().map(|(t, _)| t)),
    );
    assert_eq!(out["compacted"], json!(true), "{out}");
    assert_eq!(out["removed_rows"], json!(0), "{out}");
    let left: Vec<(String, String)> = resulting[100..].to_vec();
    let left_file = dir.path().join("left.jsonl");
    write_records(&left_file, &left);
    build(&model, &left_file, &fresh);
    assert_same_rankings(&index, &fresh, questions, "after a compaction");
    assert_never_found(&index, &resulting[..3]);

    // A plain `rag index --corpus` of a changed corpus does only what changed: here, adding
    // back three paragraphs and dropping one.
    let mut synced = left[1..].to_vec();
    synced.extend(resulting[..3].iter().cloned());
    let synced_file = dir.path().join("left.jsonl");
    write_records(&synced_file, &synced);
    let mut args = common::index_args(&model, &[&synced_file], &index, &SETTINGS);
    args.push("--json");
    let out: Value = serde_json::from_str(&succeed(&args)).unwrap();
    let updated = &out["updated"];
    assert_eq!(
        (&updated["added"], &updated["removed"]),
        (&json!(3), &json!(1)),
        "{out}"
    );
    let out: Value = serde_json::from_str(&succeed(&args)).unwrap();
    assert_eq!(out["up_to_date"], json!(true), "{out}");
    build(&model, &synced_file, &fresh);
    assert_same_rankings(&index, &fresh, &questions[..4], "after a sync");
}

#[test]
fn bad_updates_are_refused_in_one_line_and_change_nothing() {
    let Some(Setup {
        model, dir, docs, ..
    }) = setup("bad_updates_are_refused", 30)
    else {
        return;
    };
    let (_, index) = base_index(&model, dir.path(), &docs);
    let generation = |index: &Path| rag::index::build_on_disk(index).unwrap();
    let before = generation(&index);
    let base = index_command(&model, &index, &[]);
    let line = refused(&[&base[..], &["--remove", "No Such Title"]].concat());
    assert!(line.contains("--remove \"No Such Title\""), "{line}");
    let line = refused(&[&base[..], &["--remove-source", "notes/nowhere.md"]].concat());
    assert!(line.contains("--remove-source notes/nowhere.md"), "{line}");
    let line = refused(&[&base[..], &["--add", "/nonexistent/file.jsonl"]].concat());
    assert!(line.contains("/nonexistent/file.jsonl"), "{line}");
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"title\": \"x\"\n").unwrap();
    let line = refused(&[&base[..], &["--add", broken.to_str().unwrap()]].concat());
    assert!(line.contains("broken.jsonl"), "{line}");
    assert_eq!(generation(&index), before);

    // Documents from files: removed by their source.
    let notes = dir.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(
        notes.join("a.md"),
        "# Alpha\n\nAlpha is the first letter.\n",
    )
    .unwrap();
    std::fs::write(notes.join("b.md"), "# Beta\n\nBeta is the second letter.\n").unwrap();
    let out = update(&model, &index, &["--add", notes.to_str().unwrap()]);
    assert_eq!(out["added"], json!(2), "{out}");
    let a = notes.join("a.md");
    let out = update(&model, &index, &["--remove-source", a.to_str().unwrap()]);
    assert_eq!(out["removed"], json!(1), "{out}");
    let titles: Vec<String> = Retriever::open(&index, None, Precision::F32)
        .unwrap()
        .index
        .titles()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert!(titles.contains(&"Beta".to_string()) && !titles.contains(&"Alpha".to_string()));
}

#[test]
fn an_update_killed_anywhere_leaves_the_old_generation_and_the_same_command_finishes_it() {
    let Some(Setup {
        model, dir, docs, ..
    }) = setup("an_update_killed_anywhere", 160)
    else {
        return;
    };
    let (corpus, index) = base_index(&model, dir.path(), &docs[..100]);
    let extra = dir.path().join("extra.jsonl");
    write_records(&extra, &docs[100..]);
    let old = rag::index::build_on_disk(&index).unwrap();
    let args = index_command(&model, &index, &["--add", extra.to_str().unwrap()]);
    let mut finished = None;
    for delay_ms in [150, 600, 1200, 2000, 3000, 4500] {
        let mut child = common::rag().args(&args).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        // Whatever it got to, the index opens whole at the old generation or the new one.
        let on_disk = rag::index::build_on_disk(&index);
        let opened = rag::index::Index::open(&index);
        if status.success() {
            finished = on_disk.clone();
        }
        match (&opened, &on_disk) {
            (Ok(opened), Some(g)) => assert_eq!(&opened.build_id(), g),
            // Between an install's two renames: the next command puts it back.
            _ => assert!(rag::files::sibling(&index, "old").exists()),
        }
        // The same command finishes it (or finds it done).
        let out = succeed(&args);
        assert!(
            out.contains("updated") || out.contains("up to date"),
            "{out}"
        );
        let now = rag::index::Index::open(&index).unwrap();
        assert_eq!(now.len(), 160, "after a kill at {delay_ms} ms");
        assert_ne!(now.build_id(), old);
        // Back to the old corpus for the next kill.
        build(&model, &corpus, &index);
    }
    let _ = finished;
    assert!(!rag::index::build::building_dir(&index).exists());
}

/// The same on a sharded index: additions go to the shard their title hashes to with the next
/// global ids, removals to the shard that holds them, a shard past the compaction share drops
/// its rows keeping its global ids, and the sharded index ranks exactly like a fresh build of
/// the resulting corpus (one index); `--merge` of the updated shards still accepts them.
#[test]
fn a_sharded_index_updates_exactly_like_a_fresh_build() {
    let Some(Setup {
        model,
        dir,
        docs,
        questions,
    }) = setup("a_sharded_index_updates_exactly", 200)
    else {
        return;
    };
    let questions = &questions[..6];
    let base = &docs[..150];
    let base_file = dir.path().join("base.jsonl");
    write_records(&base_file, base);
    let index = dir.path().join("sharded");
    for shard in ["0/2", "1/2"] {
        let mut args = common::index_args(&model, &[&base_file], &index, &SETTINGS);
        args.extend(["--shard", shard]);
        succeed(&args);
    }
    succeed(&["index", "--merge", "--index", index.to_str().unwrap()]);

    let mut extra: Vec<(String, String)> = docs[150..200].to_vec();
    let changed: Vec<(String, String)> = base[10..14]
        .iter()
        .map(|(t, x)| (t.clone(), format!("{x} It was revised in 2024.")))
        .collect();
    extra.extend(changed.iter().cloned());
    let extra_file = dir.path().join("extra.jsonl");
    write_records(&extra_file, &extra);
    let added = update(&model, &index, &["--add", extra_file.to_str().unwrap()]);
    assert_eq!(
        (&added["added"], &added["changed"]),
        (&json!(50), &json!(4)),
        "{added}"
    );
    let removed: Vec<(String, String)> = base[30..34].to_vec();
    let mut args = Vec::new();
    for (title, _) in &removed {
        args.extend(["--remove", title.as_str()]);
    }
    assert_eq!(update(&model, &index, &args)["removed"], json!(4));

    let changed_titles: HashSet<&String> = changed.iter().map(|(t, _)| t).collect();
    let gone: HashSet<&String> = removed.iter().map(|(t, _)| t).collect();
    let mut resulting: Vec<(String, String)> = base
        .iter()
        .filter(|(t, _)| !changed_titles.contains(t) && !gone.contains(t))
        .cloned()
        .collect();
    resulting.extend(docs[150..200].iter().cloned());
    resulting.extend(changed.iter().cloned());
    let resulting_file = dir.path().join("resulting.jsonl");
    write_records(&resulting_file, &resulting);
    let fresh = dir.path().join("fresh");
    build(&model, &resulting_file, &fresh);
    assert_same_rankings(
        &index,
        &fresh,
        questions,
        "sharded, after additions and removals",
    );
    assert_never_found(&index, &removed);

    // Past the compaction share in both shards.
    let many: Vec<&String> = resulting[..60].iter().map(|(t, _)| t).collect();
    let mut args = Vec::new();
    for title in &many {
        args.extend(["--remove", title.as_str()]);
    }
    let out = update(&model, &index, &args);
    assert_eq!(out["compacted"], json!(true), "{out}");
    let left_file = dir.path().join("left.jsonl");
    write_records(&left_file, &resulting[60..]);
    build(&model, &left_file, &fresh);
    assert_same_rankings(&index, &fresh, questions, "sharded, after a compaction");
    let merged = succeed(&["index", "--merge", "--index", index.to_str().unwrap()]);
    assert!(merged.contains("2 shards"), "{merged}");
    assert_same_rankings(&index, &fresh, &questions[..2], "sharded, merged again");
}
