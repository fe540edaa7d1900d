//! Issue 17: an index proves it is whole (cases 2 and 3). Every file is checked against the
//! manifest when the index opens (sizes, faiss headers, checksums) or loads (vector files):
//! a damaged file is refused with one line naming it and saying to rebuild, never searched as
//! a silent subset. Reading an index never writes to it. An index from before checksums still
//! opens, with a note, and `--verify` says it cannot check it fully.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rag::encoder::Precision;
use rag::index::{self, Index};
use rag::retrieve::{Retriever, SearchRequest, Strategy};

/// A tiny index of `records` x 5 paragraphs at depths 1 and 3 (width 32) in `dir/<name>`.
fn tiny_index(dir: &Path, name: &str, records: usize) -> PathBuf {
    let model = dir.join("model");
    if !model.exists() {
        rag::encoder::tiny::TinyBert::default()
            .write(&model)
            .unwrap();
    }
    let corpus = dir.join(format!("{name}.json"));
    common::write_corpus(&corpus, records, 5);
    let index_dir = dir.join(name);
    index::build(&common::tiny_build_options(&model, corpus, &index_dir)).unwrap();
    index_dir
}

fn search(index_dir: &Path) -> anyhow::Result<Vec<u64>> {
    let retriever = Retriever::open(index_dir, None, Precision::F32)?;
    let response = retriever.search(&SearchRequest {
        query: "topic 7",
        k: 5,
        strategy: Strategy::default(),
        layers: Some(3),
        dim: None,
    })?;
    Ok(response.hits.iter().map(|h| h.id).collect())
}

/// The one-line refusal of a damaged file.
fn assert_refused(err: anyhow::Error, file: &str) {
    let message = format!("{err:#}");
    assert!(
        message.contains(file) && message.contains("rebuild"),
        "expected a refusal naming {file}: {message}"
    );
    assert_eq!(message.lines().count(), 1, "{message}");
}

#[test]
fn a_vector_file_that_disagrees_with_the_manifest_is_refused_never_searched_as_a_subset() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tiny_index(tmp.path(), "big", 20);
    let small = tiny_index(tmp.path(), "small", 2);
    // `tiny_build_options` stores 16 dims.
    let file = "dense/L3-d16.faiss";

    // Fewer vectors than documents (another index's file).
    std::fs::copy(small.join(file), big.join(file)).unwrap();
    assert_refused(search(&big).unwrap_err(), file);
    assert_refused(index::verify(&big).unwrap_err(), file);

    // The same size, other bytes: caught by the checksum when the vectors load.
    let big = tiny_index(tmp.path(), "big2", 20);
    assert_eq!(search(&big).unwrap().len(), 5);
    let path = big.join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 7;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    assert_refused(search(&big).unwrap_err(), file);

    // A NaN written over a vector is refused even in an index without checksums.
    strip_checksums(&big);
    let nan = f32::NAN.to_le_bytes();
    let at = bytes.len() - 4 * 16;
    bytes[at..at + 4].copy_from_slice(&nan);
    std::fs::write(&path, &bytes).unwrap();
    let err = search(&big).unwrap_err();
    assert!(format!("{err:#}").contains("not finite"), "{err:#}");
    assert_refused(err, file);
}

#[test]
fn a_damaged_document_store_is_refused_when_the_index_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(tmp.path(), "index", 20);
    let docs = index_dir.join("docs.jsonl");
    let bytes = std::fs::read(&docs).unwrap();
    std::fs::write(&docs, &bytes[..bytes.len() / 2]).unwrap();
    // Refused at open, whichever document a search would have hit.
    assert_refused(Index::open(&index_dir).err().unwrap(), "docs.jsonl");

    // Same length, one letter changed: the checksum.
    let mut changed = bytes.clone();
    let at = changed.len() / 2;
    changed[at] = if changed[at] == b'a' { b'b' } else { b'a' };
    std::fs::write(&docs, &changed).unwrap();
    assert_refused(Index::open(&index_dir).err().unwrap(), "docs.jsonl");

    // Without checksums, a truncated store is still refused at open (its offsets overrun it).
    strip_checksums(&index_dir);
    std::fs::write(&docs, &bytes[..bytes.len() / 2]).unwrap();
    assert_refused(Index::open(&index_dir).err().unwrap(), "docs.offsets");
}

/// Makes `index_dir` look like an index from before checksums.
fn strip_checksums(index_dir: &Path) {
    let path = index_dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let object = manifest.as_object_mut().unwrap();
    object.remove("files");
    object.remove("generation");
    // The format builds wrote then (one with checksums would be damaged without them).
    object.insert("format_version".into(), 1.into());
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

/// Issue 54, case 8: a manifest whose format has checksums (or that names a generation, the
/// digest of its file list) but lost its `files` is damaged: removing the list does not turn
/// the checks off and serve altered documents.
#[test]
fn a_manifest_that_lost_its_checksums_is_damaged_not_taken_for_an_old_index() {
    let tmp = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(tmp.path(), "index", 20);
    let path = index_dir.join("manifest.json");
    let original = std::fs::read(&path).unwrap();
    let docs = index_dir.join("docs.jsonl");
    let text = std::fs::read_to_string(&docs).unwrap();
    std::fs::write(
        &docs,
        text.replacen("topic 7 is about", "topic 7 is ABOUT", 1),
    )
    .unwrap();
    let without = |fields: &[&str]| {
        let mut manifest: serde_json::Value = serde_json::from_slice(&original).unwrap();
        for field in fields {
            manifest.as_object_mut().unwrap().remove(*field);
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    };
    for fields in [&["files"][..], &["files", "generation"][..]] {
        without(fields);
        let err = search(&index_dir).unwrap_err();
        assert!(
            format!("{err:#}").contains("lost its list of files"),
            "{err:#}"
        );
        assert_refused(err, "manifest.json");
    }
}

#[test]
fn an_index_from_before_checksums_opens_with_a_note_and_verify_says_what_it_could_not_check() {
    let tmp = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(tmp.path(), "index", 20);
    let verified = index::verify(&index_dir).unwrap();
    assert!(verified.checksums);
    let expected = search(&index_dir).unwrap();
    strip_checksums(&index_dir);
    assert_eq!(search(&index_dir).unwrap(), expected);
    assert!(!index::verify(&index_dir).unwrap().checksums);

    let dir = index_dir.display().to_string();
    let out = common::rag()
        .args(["search", "topic 7", "--index", &dir, "--k", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("predates checksums").count(), 1, "{stderr}");
    assert!(stderr.contains("rag index --fresh"), "{stderr}");
    let stdout = common::succeed(&["index", "--verify", "--index", &dir]);
    assert!(stdout.contains("cannot be verified fully"), "{stdout}");
}

/// Every file under `dir` with its length and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            }
            files.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
        }
    }
    files
}

fn set_writable(dir: &Path, writable: bool) {
    for path in snapshot(dir).keys().chain([&dir.to_path_buf()]) {
        let mode = match (path.is_dir(), writable) {
            (true, true) => 0o755,
            (true, false) => 0o555,
            (false, true) => 0o644,
            (false, false) => 0o444,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Issue 17, case 3: searching at any size, in any mode, from the command line and the
/// library, leaves a read-only index exactly as it was. (Run as root, the permissions do not
/// bind; the snapshot comparison still does.)
#[test]
fn reads_never_write_and_work_on_a_read_only_index() {
    let tmp = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(tmp.path(), "index", 20);
    let before = snapshot(&index_dir);
    set_writable(&index_dir, false);
    let dir = index_dir.display().to_string();
    for args in [
        vec!["--dim", "1"],
        vec!["--dim", "7", "--layers", "1"],
        vec!["--mode", "hybrid", "--dim", "5"],
        vec!["--mode", "bm25"],
    ] {
        let mut search = vec!["search", "topic 7", "--index", &dir, "--json"];
        search.extend_from_slice(&args);
        common::succeed(&search);
    }
    common::succeed(&["index", "--verify", "--index", &dir]);
    set_writable(&index_dir, true);
    assert_eq!(snapshot(&index_dir), before);
}
