//! What people type and what corpora hold, read as text: questions are words (not query
//! syntax), an untitled paragraph is named, a closed pipe ends `rag` quietly, and corpus text
//! cannot drive the terminal (issue 54, items 11, 12, 14, 15).

mod common;

use std::path::{Path, PathBuf};

/// A tiny model and an index of `paragraphs` (title, text), one record each, in `dir`.
fn index_of(dir: &Path, paragraphs: &[(&str, &str)]) -> PathBuf {
    let model = dir.join("model");
    rag::encoder::tiny::TinyBert::default()
        .write(&model)
        .unwrap();
    let corpus = dir.join("corpus.jsonl");
    let lines: Vec<String> = paragraphs
        .iter()
        .map(|(title, text)| serde_json::json!({"title": title, "text": text}).to_string())
        .collect();
    std::fs::write(&corpus, lines.join("\n")).unwrap();
    let index = dir.join("index");
    common::tiny_index(&model, &[&corpus], &index, &[]);
    index
}

const STORES: [(&str, &str); 3] = [
    (
        "Villaggio Mall",
        "The biggest store, today owned by the State of Qatar, is in Doha.",
    ),
    ("Harrods", "Harrods is a department store in London."),
    ("Rivers", "The Danube flows through many countries."),
];

fn bm25_titles(index: &Path, question: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "search",
        question,
        "--index",
        index.to_str().unwrap(),
        "--mode",
        "bm25",
        "--json",
    ];
    args.extend_from_slice(extra);
    let response = common::rag_json(args);
    response["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["title"].as_str().unwrap().to_string())
        .collect()
}

/// Item 11: ` - today` and ` - is` in a real HotpotQA question were exclusions.
#[test]
fn bm25_reads_a_question_as_words_unless_asked_for_syntax() {
    let tmp = tempfile::tempdir().unwrap();
    let index = index_of(tmp.path(), &STORES);
    let question = "which store - today owned by the State of Qatar - is the biggest?";
    let titles = bm25_titles(&index, question, &[]);
    assert_eq!((titles[0].as_str(), titles.len()), ("Villaggio Mall", 3));
    // As query syntax, every paragraph with "today" or "is" is excluded.
    assert_eq!(
        bm25_titles(&index, question, &["--bm25-syntax"]),
        ["Rivers"]
    );
    // Operators are words: `-store` excludes nothing, `title:` restricts to no field, a stray
    // quote or parenthesis is punctuation.
    for (question, found) in [
        ("+London -store", 2),
        ("title:Rivers Doha", 2),
        ("\"store (Danube", 3),
    ] {
        assert_eq!(
            bm25_titles(&index, question, &[]).len(),
            found,
            "{question}"
        );
    }
}

/// Item 12: the second untitled paragraph was dropped as a duplicate of the first.
#[test]
fn an_untitled_paragraph_is_a_named_bad_record() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    rag::encoder::tiny::TinyBert::default()
        .write(&model)
        .unwrap();
    let corpus = tmp.path().join("corpus.jsonl");
    std::fs::write(
        &corpus,
        "{\"title\":\"A\",\"text\":\"a.\"}\n{\"title\":\"\",\"text\":\"b.\"}\n\
         {\"title\":\"\",\"text\":\"c.\"}\n{\"title\":\"D\",\"text\":\"d.\"}\n",
    )
    .unwrap();
    let index = tmp.path().join("index");
    let args = |extra: &[&str]| {
        let flags = [&["--layers", "1", "--dim", "16"][..], extra].concat();
        common::index_args(&model, &[&corpus], &index, &flags)
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let error = common::refused(&args(&[]));
    assert!(
        error.contains("record 2: has an empty title") && error.contains("--skip-bad"),
        "{error}"
    );
    common::succeed(&args(&["--skip-bad"]));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(index.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["documents"], 2, "{manifest}");
}

/// Item 14: `rag search ... | head -1` panicked ("failed printing to stdout", exit 101).
#[test]
fn a_closed_pipe_ends_search_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let index = index_of(tmp.path(), &STORES);
    let mut child = common::rag()
        .args(["search", "store", "--index", index.to_str().unwrap()])
        .args(["--mode", "bm25"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before anything is printed.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// Item 15: titles with ESC, BEL or a right-to-left override reached the terminal raw.
#[test]
fn corpus_text_cannot_drive_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let title = "Evil\u{1b}]0;owned\u{7}\u{202e}title";
    let index = index_of(
        tmp.path(),
        &[(title, "a store with \u{1b}[2J in its text"), STORES[1]],
    );
    let out = common::succeed(&[
        "search",
        "store",
        "--index",
        index.to_str().unwrap(),
        "--mode",
        "bm25",
    ]);
    assert!(
        !out.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "raw controls in {out:?}"
    );
    assert!(
        out.contains("Evil\\u{1b}]0;owned\\u{7}\\u{202e}title"),
        "{out}"
    );
    assert!(out.contains("with \\u{1b}[2J in"), "{out}");
    // --json keeps the text itself (JSON escapes it).
    assert_eq!(bm25_titles(&index, "store", &[])[0], title);
}

/// Item 16: a 50 MB paragraph was tokenised whole (6.7 GB) to keep `--max-length` tokens; only
/// its head is now, and every text still gets exactly the tokens (so the vectors) it had.
#[test]
fn only_the_head_of_a_long_text_is_tokenised_with_the_same_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let mut models = vec![tmp.path().join("model")];
    rag::encoder::tiny::TinyBert::default()
        .write(&models[0])
        .unwrap();
    models.extend(common::default_model());
    let words = "The Villaggio store, today (2017) owned by Qatar's state: \u{1b}naïve 東京 ";
    let long = words.repeat(20_000);
    let unbroken = format!("{} tail", "x".repeat(100_000));
    let texts = [
        "short",
        "",
        &words.repeat(3),
        &words.repeat(60),
        &long,
        &unbroken,
    ];
    for model in models {
        let options = rag::encoder::EncoderOptions {
            max_length: Some(64),
            ..Default::default()
        };
        let encoder = rag::encoder::Encoder::load(&model, &options).unwrap();
        let ours = encoder.tokenize(&texts).unwrap();
        for (text, ids) in texts.iter().zip(&ours) {
            let whole = encoder.tokenizer().encode(*text, true).unwrap();
            assert_eq!(ids, whole.get_ids(), "{} bytes", text.len());
        }
        // The vectors of the long text are those of a text of its head alone.
        let head = &long[..4096];
        let head = &head[..head.rfind(' ').unwrap()];
        let vectors = encoder.encode(&[&long, head], &[1]).unwrap().remove(0);
        assert_eq!(vectors.row(0), vectors.row(1));
    }
}
