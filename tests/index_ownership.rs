//! Issue 54, cases 1-7 and 9: `rag index` never touches what is not its own, takes one build at
//! a time, calls an index up to date only if it opens, and leaves files anyone may read. Each
//! case runs the `rag` binary as a user would, on a tiny generated model and corpus.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rag::index::{self, lock::BuildLock};

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    model: PathBuf,
    corpus: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (model, corpus) = common::tiny_model_and_corpus(&dir, 6, 5);
    Setup {
        _tmp: tmp,
        dir,
        model,
        corpus,
    }
}

/// The flags of a tiny build of `corpus` into `index`, `extra` appended.
fn index_args<'a>(
    s: &'a Setup,
    corpus: &'a Path,
    index: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "index",
        "--model",
        s.model.to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
        "--layers",
        "1,3",
        "--dim",
        "16",
    ];
    args.extend_from_slice(extra);
    args
}

fn build(s: &Setup, index: &Path, extra: &[&str]) -> String {
    common::succeed(&index_args(s, &s.corpus, index, extra))
}

fn refused(s: &Setup, index: &Path, extra: &[&str]) -> String {
    common::refused(&index_args(s, &s.corpus, index, extra))
}

/// `rag search` of the index in `dir`: (succeeded, stderr).
fn search(dir: &Path) -> (bool, String) {
    let out = common::rag()
        .args([
            "search",
            "topic 7",
            "--index",
            dir.to_str().unwrap(),
            "--k",
            "3",
        ])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every entry of `dir` (names only, sorted).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn notes(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
}

fn notes_intact(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("notes.txt")).is_ok_and(|t| t == "mine")
}

/// Case 1: a folder of someone's files is refused in one line, untouched; an empty folder and
/// an index this tool wrote are built into.
#[test]
fn a_folder_that_is_not_an_index_is_refused_and_left_as_it_was() {
    let s = setup();
    let folder = s.dir.join("notes");
    notes(&folder);
    let says = refused(&s, &folder, &[]);
    assert!(says.contains("no index built by rag"), "{says}");
    assert!(notes_intact(&folder));
    assert_eq!(listing(&folder), vec!["notes.txt"]);
    assert_eq!(listing(&s.dir), vec!["corpus.json", "model", "notes"]);

    let empty = s.dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    build(&s, &empty, &[]);
    assert!(search(&empty).0);
    // An index it wrote is rebuilt.
    build(&s, &empty, &["--fresh"]);
    assert!(search(&empty).0);
}

/// Case 2: a `DIR.old` or `DIR.building` beside the index that this tool did not make is
/// neither moved in nor removed; the build says it left it alone.
#[test]
fn unrelated_old_and_building_folders_beside_the_index_are_left_alone() {
    let s = setup();
    let index_dir = s.dir.join("index");
    for suffix in ["old", "building"] {
        let sibling = s.dir.join(format!("index.{suffix}"));
        notes(&sibling);
        // With no index yet (the `.old` looks like an interrupted install) and with one.
        for fresh in [&[][..], &["--fresh"][..]] {
            let says = refused(&s, &index_dir, fresh);
            assert!(
                says.contains("left alone") && says.contains(&format!("index.{suffix}")),
                "{says}"
            );
            assert!(notes_intact(&sibling), "{suffix}");
            assert_eq!(listing(&sibling), vec!["notes.txt"]);
        }
        assert!(!index_dir.exists());
        std::fs::rename(&sibling, s.dir.join(format!("mine-{suffix}"))).unwrap();
    }
    build(&s, &index_dir, &[]);
    for suffix in ["old", "building"] {
        let sibling = s.dir.join(format!("index.{suffix}"));
        notes(&sibling);
        refused(&s, &index_dir, &["--fresh"]);
        assert!(notes_intact(&sibling) && search(&index_dir).0);
        std::fs::remove_dir_all(&sibling).unwrap();
    }
    // The tool's own staging folders are cleaned up as before.
    build(&s, &index_dir, &["--fresh"]);
    assert_eq!(
        listing(&s.dir),
        vec!["corpus.json", "index", "mine-building", "mine-old", "model"]
    );
}

/// Case 3: `--index` naming a file is refused before anything is touched.
#[test]
fn an_index_path_that_is_a_file_is_refused_before_anything_is_touched() {
    let s = setup();
    let file = s.dir.join("report.txt");
    std::fs::write(&file, "keep me").unwrap();
    let says = refused(&s, &file, &[]);
    assert!(says.contains("is a file"), "{says}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert_eq!(listing(&s.dir), vec!["corpus.json", "model", "report.txt"]);
}

/// Case 4: an index reached through a symlink is rebuilt in the link's target; the link stays.
#[test]
fn a_symlinked_index_is_rebuilt_in_the_links_target_and_the_link_stays() {
    let s = setup();
    let real = s.dir.join("real");
    build(&s, &real, &[]);
    let link = s.dir.join("link");
    std::os::unix::fs::symlink("real", &link).unwrap();
    let other = s.dir.join("other.json");
    common::write_corpus(&other, 9, 5);
    common::succeed(&index_args(&s, &other, &link, &[]));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(index::read_manifest(&real).unwrap().documents, 45);
    assert_eq!(
        listing(&s.dir),
        vec!["corpus.json", "link", "model", "other.json", "real"]
    );
    assert!(search(&link).0);
}

/// Case 5: while one build holds an index, a second is refused in one line naming the holder;
/// once it is done, builds go ahead and no lock file is left.
#[test]
fn a_second_build_of_the_same_index_is_refused_naming_the_first() {
    let s = setup();
    let index_dir = s.dir.join("index");
    let held = BuildLock::acquire(&index_dir).unwrap();
    let says = refused(&s, &index_dir, &[]);
    assert!(
        says.contains(&format!("pid {}", std::process::id())) && says.contains("index.lock"),
        "{says}"
    );
    assert!(!index_dir.exists());
    drop(held);
    build(&s, &index_dir, &[]);
    assert_eq!(listing(&s.dir), vec!["corpus.json", "index", "model"]);
}

/// Case 6: an index with a BM25 file gone is not "up to date": the same `rag index` rebuilds it.
#[test]
fn an_index_that_does_not_open_is_rebuilt_not_called_up_to_date() {
    let s = setup();
    let index_dir = s.dir.join("index");
    build(&s, &index_dir, &[]);
    assert!(build(&s, &index_dir, &[]).contains("up to date"));
    let bm25 = index_dir.join("bm25");
    let segment = std::fs::read_dir(&bm25)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "idx"))
        .expect("a BM25 segment file");
    std::fs::remove_file(&segment).unwrap();
    assert!(!search(&index_dir).0);
    let out = build(&s, &index_dir, &[]);
    assert!(out.contains("indexed 30 paragraphs"), "{out}");
    let (ok, stderr) = search(&index_dir);
    assert!(ok, "{stderr}");
}

/// Case 7: tantivy's empty lock files are not part of the index: a build leaves none, and an
/// index whose manifest lists them (built before) opens without them.
#[test]
fn tantivys_empty_lock_files_are_not_needed() {
    let s = setup();
    let index_dir = s.dir.join("index");
    build(&s, &index_dir, &[]);
    let bm25 = index_dir.join("bm25");
    for name in index::bm25::LOCK_FILES {
        let _ = std::fs::remove_file(bm25.join(name));
    }
    let (ok, stderr) = search(&index_dir);
    assert!(ok, "{stderr}");
    // As an older build recorded them.
    let path = index_dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for name in index::bm25::LOCK_FILES {
        manifest["files"][format!("bm25/{name}")] = serde_json::json!({
            "bytes": 0,
            "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        });
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let (ok, stderr) = search(&index_dir);
    assert!(ok, "{stderr}");
    let verified = common::succeed(&["index", "--verify", "--index", index_dir.to_str().unwrap()]);
    assert!(verified.contains("is whole"), "{verified}");
}

/// Case 9: every file of a built index has the mode the umask gives new files (tantivy writes
/// some 0600), so another user (a service account) can read it.
#[test]
fn every_index_file_follows_the_umask() {
    let s = setup();
    let index_dir = s.dir.join("index");
    build(&s, &index_dir, &[]);
    let expected = 0o666 & !rag::files::umask();
    let mut pending = vec![index_dir];
    let mut seen = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
                continue;
            }
            seen += 1;
            assert_eq!(
                meta.permissions().mode() & 0o777,
                expected,
                "{}",
                entry.path().display()
            );
        }
    }
    assert!(seen > 8, "{seen}");
}
