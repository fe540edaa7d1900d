//! Folders of documents (issue 55, item 1): text, Markdown and HTML read beside records, in a
//! stable order with hidden files left out, cut into passages that fit the encoder at sentence
//! boundaries, titled from the file and its sections, each keeping its source path and span
//! through to `search`; bad files named, then skipped (`--skip-bad`) or refused.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use rag::corpus::{document, Chunker, FileKind, Paragraph};

fn tiny_model(dir: &Path) -> PathBuf {
    let model = dir.join("model");
    rag::encoder::tiny::TinyBert::default()
        .write(&model)
        .unwrap();
    model
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    out.write_all(bytes).unwrap();
    out.finish().unwrap()
}

/// `rag index` of `corpus` into `index` with the tiny model, `--max-length 64`, `--json`.
fn index_json(model: &Path, corpus: &Path, index: &Path, extra: &[&str]) -> std::process::Output {
    let flags = [
        &["--layers", "1", "--max-length", "64", "--json"][..],
        extra,
    ]
    .concat();
    let args = common::index_args(model, &[corpus], index, &flags);
    common::rag().args(&args).output().unwrap()
}

fn stored(index: &Path) -> Vec<Paragraph> {
    std::fs::read_to_string(index.join("docs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A folder of every kind, with files that must not be read.
fn mixed_folder(root: &Path) {
    write(
        &root.join("a-guide.md"),
        b"# The Guide\n\nRivers flow to the sea.\n\n## Mountains\n\nMountains are tall.\n",
    );
    write(&root.join("b-notes.txt"), b"Doha is a city in Qatar.\n");
    write(
        &root.join("c-page.html"),
        b"<html><head><title>Harbour page</title></head><body><p>Ships dock here.</p></body></html>",
    );
    write(
        &root.join("d-records.jsonl"),
        b"{\"title\":\"Danube\",\"text\":\"The Danube is a river.\"}\n",
    );
    write(
        &root.join("sub/e-more.txt.gz"),
        &gz(b"Compressed text is read too.\n"),
    );
    write(&root.join(".hidden/secret.txt"), b"Never indexed.\n");
    write(
        &root.join(".draft.md"),
        b"# Draft\n\nNever indexed either.\n",
    );
    write(&root.join("photo.png"), b"\x89PNG not text");
}

#[test]
fn a_mixed_folder_is_read_in_order_without_hidden_files_and_counted_by_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let folder = tmp.path().join("notes");
    mixed_folder(&folder);

    let index = tmp.path().join("index");
    let out = index_json(&model, &folder, &index, &[]);
    common::assert_success(&out);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["files"],
        serde_json::json!({"html": 1, "json": 1, "markdown": 1, "text": 2})
    );
    assert_eq!(summary["ignored_files"], 1);
    assert_eq!(summary["skipped_files"], 0);

    let titles: Vec<String> = stored(&index).into_iter().map(|p| p.title).collect();
    assert_eq!(
        titles,
        [
            "The Guide",
            "The Guide — Mountains",
            "b-notes",
            "Harbour page",
            "Danube",
            "e-more"
        ]
    );
    // The same folder again, elsewhere: the same documents in the same order.
    let again = tmp.path().join("again");
    let out = index_json(&model, &folder, &again, &[]);
    assert!(out.status.success());
    assert_eq!(stored(&again), stored(&index));
    // The summary line names the kinds.
    let third = tmp.path().join("third");
    let plain = common::succeed(&common::index_args(
        &model,
        &[&folder],
        &third,
        &["--layers", "1", "--max-length", "64"],
    ));
    assert!(
        plain.contains("files: 1 html, 1 json, 1 markdown, 2 text; 1 of no kind read, ignored"),
        "{plain}"
    );
}

fn chunker_for(model: &Path, max_length: usize) -> Chunker {
    let tokenizer = rag::encoder::load_tokenizer(model, 10_000).unwrap();
    Chunker::new(&tokenizer, max_length, "{title}: {text}").unwrap()
}

#[test]
fn passages_fit_the_token_limit_and_end_at_sentence_boundaries() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let limit = 64;
    let chunker = chunker_for(&model, limit);
    let sentences: Vec<String> = (0..40)
        .map(|i| format!("Sentence {i} is about rivers and hills."))
        .collect();
    let long_sentence = "word ".repeat(200).trim_end().to_string() + ".";
    let text = format!(
        "{}\n\n{}\n\n{long_sentence}\n\nShort last one.\n",
        sentences[..25].join(" "),
        sentences[25..].join(" "),
    );
    let path = tmp.path().join("long.txt");
    let passages = document::passages(&path, FileKind::Text, text.as_bytes(), &chunker).unwrap();
    assert!(passages.len() > 5, "{}", passages.len());
    let mut cut_inside = 0;
    for p in &passages {
        let tokens = chunker.rendered_tokens(&p.title, &p.text);
        assert!(tokens <= limit, "{tokens} tokens: {p:?}");
        if p.text.ends_with('.') {
            // Whole sentences only: each starts a sentence of the text.
            let first = p.text.split_whitespace().next().unwrap();
            assert!(
                first == "Sentence" || first == "word" || first == "Short",
                "{p:?}"
            );
        } else {
            // Only the sentence longer than the limit alone is cut inside.
            assert!(p.text.starts_with("word"), "cut mid-sentence: {p:?}");
            cut_inside += 1;
        }
    }
    assert!(cut_inside > 0);
    // Every sentence is in exactly one passage, in order.
    let all: String = passages
        .iter()
        .map(|p| p.text.clone())
        .collect::<Vec<_>>()
        .join(" ");
    for s in &sentences {
        assert_eq!(all.matches(s.as_str()).count(), 1, "{s}");
    }
    // A paragraph that fits a passage of its own is not split across two: with room for the
    // first paragraph but not for both, each paragraph is one passage, whole.
    let first = "First paragraph one. First paragraph two.";
    let small = format!("{first}\n\nSecond paragraph, alone.\n");
    let room = chunker.rendered_tokens("long (part 999 of 999)", first) + 2;
    let passages = document::passages(
        &path,
        FileKind::Text,
        small.as_bytes(),
        &chunker_for(&model, room),
    )
    .unwrap();
    let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, [first, "Second paragraph, alone."]);
    // Titles of a file cut in parts say which part.
    assert_eq!(passages[0].title, "long (part 1 of 2)");
}

#[test]
fn titles_come_from_headings_title_or_file_name_and_stay_unique() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let chunker = chunker_for(&model, 128);
    let title_of = |name: &str, kind, body: &str| -> Vec<String> {
        document::passages(Path::new(name), kind, body.as_bytes(), &chunker)
            .unwrap()
            .into_iter()
            .map(|p| p.title)
            .collect()
    };
    assert_eq!(
        title_of(
            "x/readme.md",
            FileKind::Markdown,
            "# Project\n\nIntro.\n\n## Install\n\nRun it.\n"
        ),
        ["Project", "Project — Install"]
    );
    assert_eq!(
        title_of(
            "page.html",
            FileKind::Html,
            "<title>A page</title><h1>Top</h1><p>Body text.</p>"
        ),
        ["A page — Top"]
    );
    assert_eq!(
        title_of("dir/Scott Derrickson.txt", FileKind::Text, "He directs."),
        ["Scott Derrickson"]
    );
    assert_eq!(
        title_of("untitled.html", FileKind::Html, "<p>Just text.</p>"),
        ["untitled"]
    );

    // Two files of the same title in a folder: both indexed, the second under its path.
    let folder = tmp.path().join("same");
    write(&folder.join("one/notes.md"), b"# Notes\n\nAlpha text.\n");
    write(&folder.join("two/notes.md"), b"# Notes\n\nBeta text.\n");
    write(&folder.join("two/zz.txt"), b"Notes twice.\n");
    let index = tmp.path().join("index");
    let out = index_json(&model, &folder, &index, &[]);
    common::assert_success(&out);
    let titles: Vec<String> = stored(&index).into_iter().map(|p| p.title).collect();
    let second = format!("Notes ({})", folder.join("two/notes.md").display());
    assert_eq!(titles, ["Notes", second.as_str(), "zz"]);
}

#[test]
fn source_path_and_span_reach_search_output() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let folder = tmp.path().join("docs");
    let markdown = "# Guide\n\nThe harbour of Doha is busy.\n\n## Rivers\n\nThe Danube flows east. It is long.\n";
    write(&folder.join("guide.md"), markdown.as_bytes());
    let text = "Café owners open early.\n\nThe mill by the river grinds wheat.\n";
    write(&folder.join("mill.txt"), text.as_bytes());
    let index = tmp.path().join("index");
    let out = index_json(&model, &folder, &index, &[]);
    common::assert_success(&out);

    let index = index.to_str().unwrap();
    // BM25: the words searched for find their passage whatever the tiny model's vectors say.
    let search = |query: &str, extra: &[&str]| -> Vec<String> {
        ["search", query, "--index", index, "--mode", "bm25"]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    };
    let response = common::rag_json(search("mill river wheat", &["--json"]));
    let hit = &response["hits"][0];
    assert_eq!(hit["title"], "mill");
    let source = &hit["source"];
    assert_eq!(
        source["path"],
        folder.join("mill.txt").display().to_string()
    );
    // The span is in characters: "é" is one.
    let (start, end) = (
        source["start"].as_u64().unwrap() as usize,
        source["end"].as_u64().unwrap() as usize,
    );
    let chars: Vec<char> = text.chars().collect();
    let spanned: String = chars[start..end].iter().collect();
    assert_eq!(spanned, hit["text"].as_str().unwrap());
    assert_eq!(
        spanned,
        "Café owners open early.\n\nThe mill by the river grinds wheat."
    );

    // Markdown: the span covers the section's text in the file, markup and all.
    let response = common::rag_json(search("Danube flows east", &["--json"]));
    let hit = &response["hits"][0];
    assert_eq!(hit["title"], "Guide — Rivers");
    let (start, end) = (
        hit["source"]["start"].as_u64().unwrap() as usize,
        hit["source"]["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(&markdown[start..end], "The Danube flows east. It is long.");
    // And the text output shows it.
    let plain = common::succeed(&search("Danube flows east", &[]));
    let expected = format!("from {}:{start}-{end}", folder.join("guide.md").display());
    assert!(plain.contains(&expected), "{plain}");
}

#[test]
fn bad_files_are_named_then_skipped_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let folder = tmp.path().join("mixed");
    write(&folder.join("good.txt"), b"Good text here.\n");
    write(&folder.join("latin1.txt"), b"Caf\xe9 au lait.\n");
    write(
        &folder.join("broken.html"),
        b"<html><body><p>Cut off</p><a href=\"x",
    );
    write(&folder.join("empty.md"), b"  \n\n");
    write(&folder.join("zero.json"), b"");
    std::os::unix::fs::symlink(tmp.path().join("nowhere.txt"), folder.join("gone.txt")).unwrap();
    let bad = [
        "broken.html",
        "empty.md",
        "gone.txt",
        "latin1.txt",
        "zero.json",
    ];

    // Refused: the first bad file in path order, by path, in one line; nothing installed.
    let index = tmp.path().join("index");
    let out = index_json(&model, &folder, &index, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.trim().lines().last().unwrap();
    assert!(
        last.contains(&folder.join("broken.html").display().to_string())
            && last.contains("broken HTML")
            && last.contains("--skip-bad"),
        "{stderr}"
    );
    assert!(!index.join("manifest.json").exists());

    // Skipped: each named once on its own line, counted; the good file indexed.
    let out = index_json(&model, &folder, &index, &["--skip-bad"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("skipped "))
        .collect();
    assert_eq!(skipped.len(), bad.len(), "{stderr}");
    for (line, name) in skipped.iter().zip(bad) {
        assert!(
            line.contains(&folder.join(name).display().to_string()),
            "{line}"
        );
    }
    assert!(skipped[3].contains("not UTF-8"), "{}", skipped[3]);
    assert!(skipped[1].contains("empty"), "{}", skipped[1]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["skipped_files"], 5);
    let titles: Vec<String> = stored(&index).into_iter().map(|p| p.title).collect();
    assert_eq!(titles, ["good"]);
}
