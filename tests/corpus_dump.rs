//! `--corpus` as the HotpotQA Wikipedia dump is distributed (issue 53, item 4): a folder of
//! folders of `.bz2` files (and `.gz`), one JSON object per line with `text` as a list of
//! sentences and the hyperlinks in `text_with_links`. A miniature of it is made from the shared
//! sample paragraphs and indexed: every file read in path order, decompressed while streaming, the
//! links kept in the document store, the checksum taken in the same single pass. And inputs
//! that cannot be read twice (issue 54, item 13): a FIFO or piped stdin is refused with one line,
//! where it used to hang or fail as "empty"; a file redirected to stdin works.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use rag::index::{self, Index, Manifest};
use sha2::{Digest, Sha256};

/// The miniature dump under `root`: `AA/wiki_00.bz2`, `AA/wiki_01.bz2`, `AB/wiki_00.bz2` and
/// `AB/wiki_01.gz`, the sample's first distinct paragraphs spread over them in that order, each
/// record linking to the next paragraph's title (percent-encoded, as the dump does). Returns the
/// titles in file order.
fn write_dump(root: &Path, data: &Path, paragraphs: usize) -> Vec<String> {
    let sample: Vec<serde_json::Value> = serde_json::from_slice(
        &std::fs::read(data.join("hotpotqa/hotpot_dev_distractor_sample.json")).unwrap(),
    )
    .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut docs: Vec<(String, Vec<String>)> = Vec::new();
    'records: for record in &sample {
        for pair in record["context"].as_array().unwrap() {
            let title = pair[0].as_str().unwrap().to_string();
            let sentences: Vec<String> = serde_json::from_value(pair[1].clone()).unwrap();
            if seen.insert(title.clone()) {
                docs.push((title, sentences));
            }
            if docs.len() == paragraphs {
                break 'records;
            }
        }
    }
    let files = [
        "AA/wiki_00.bz2",
        "AA/wiki_01.bz2",
        "AB/wiki_00.bz2",
        "AB/wiki_01.gz",
    ];
    let per_file = docs.len().div_ceil(files.len());
    for (f, name) in files.iter().enumerate() {
        let mut lines = String::new();
        for i in f * per_file..((f + 1) * per_file).min(docs.len()) {
            let (title, sentences) = &docs[i];
            let next = &docs[(i + 1) % docs.len()].0;
            let href = next.replace(' ', "%20").replace('&', "%26");
            let mut linked = sentences.clone();
            linked[0] = format!("<a href=\"{href}\">{}</a>", linked[0]);
            let offsets: Vec<Vec<[usize; 2]>> =
                sentences.iter().map(|s| vec![[0, s.len()]]).collect();
            let record = serde_json::json!({
                "id": i.to_string(), "url": format!("https://en.wikipedia.org/wiki?curid={i}"),
                "title": title, "text": sentences, "charoffset": offsets,
                "text_with_links": linked, "charoffset_with_links": offsets,
            });
            lines.push_str(&record.to_string());
            lines.push('\n');
        }
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = if name.ends_with(".bz2") {
            let mut out = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
            out.write_all(lines.as_bytes()).unwrap();
            out.finish().unwrap()
        } else {
            let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            out.write_all(lines.as_bytes()).unwrap();
            out.finish().unwrap()
        };
        std::fs::write(path, bytes).unwrap();
    }
    docs.into_iter().map(|(title, _)| title).collect()
}

/// The folder's checksum as the manifest defines it: per file in path order, its relative path,
/// a zero byte and its raw bytes.
fn folder_sha256(root: &Path, files: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for name in files {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(root.join(name)).unwrap());
    }
    hex::encode(hasher.finalize())
}

#[test]
fn a_miniature_dump_is_indexed_with_its_links_in_one_pass() {
    let Some(data) = common::data_dir() else {
        return common::missing(
            "a_miniature_dump_is_indexed_with_its_links_in_one_pass",
            "data",
            "no shared HotpotQA data",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("enwiki-abstracts");
    let titles = write_dump(&dump, &data, 60);
    let model = tmp.path().join("model");
    rag::encoder::tiny::TinyBert::default()
        .write(&model)
        .unwrap();
    let index_dir = tmp.path().join("index");
    let options = common::tiny_build_options(&model, dump.clone(), &index_dir);
    let summary = index::build(&options).unwrap();
    assert_eq!(summary.documents, titles.len() as u64);

    // Every file, in path order, decompressed; the links kept, decoded, as titles.
    let index = Index::open(&index_dir).unwrap();
    for (id, title) in titles.iter().enumerate() {
        let doc = index.document(id as u64).unwrap();
        assert_eq!(&doc.title, title);
        assert_eq!(
            doc.links,
            [titles[(id + 1) % titles.len()].clone()],
            "{title}"
        );
        assert!(!doc.text.contains("<a href"), "{}", doc.text);
    }
    drop(index);

    // The checksum of the whole folder, taken as it streamed; the fingerprint lets the next
    // build find it unchanged without reading it.
    let manifest = Manifest::read(&index_dir).unwrap();
    let files = [
        "AA/wiki_00.bz2",
        "AA/wiki_01.bz2",
        "AB/wiki_00.bz2",
        "AB/wiki_01.gz",
    ];
    let corpus = &manifest.corpus[0];
    assert_eq!(corpus.path, dump);
    assert_eq!(corpus.sha256, folder_sha256(&dump, &files));
    let raw: u64 = files
        .iter()
        .map(|f| std::fs::metadata(dump.join(f)).unwrap().len())
        .sum();
    assert_eq!(corpus.bytes, raw);
    assert!(!corpus.fingerprint.is_empty());
    assert!(index::build(&options).unwrap().up_to_date);
    // A file changed in place is a new corpus.
    let extra = dump.join("AB/wiki_01.gz");
    let mut bytes = std::fs::read(&extra).unwrap();
    bytes.extend_from_slice(&std::fs::read(&extra).unwrap());
    std::fs::write(&extra, bytes).unwrap();
    let rebuilt = index::build(&options).unwrap();
    assert!(!rebuilt.up_to_date);
    // A gzip file of two members is read whole: the second member's records are duplicates.
    assert_eq!(rebuilt.documents, titles.len() as u64);
    assert!(rebuilt.duplicates > 0);

    // Links are stored only where a paragraph has some.
    let plain = tmp.path().join("plain.jsonl");
    std::fs::write(&plain, "{\"title\":\"A\",\"text\":[\"a.\"]}\n").unwrap();
    let plain_index = tmp.path().join("plain-index");
    index::build(&common::tiny_build_options(
        &model,
        plain.clone(),
        &plain_index,
    ))
    .unwrap();
    let docs = std::fs::read_to_string(plain_index.join("docs.jsonl")).unwrap();
    assert!(!docs.contains("links"), "{docs}");
    let docs = std::fs::read_to_string(index_dir.join("docs.jsonl")).unwrap();
    assert_eq!(docs.matches("\"links\":").count(), titles.len());

    // The command line takes the folder too.
    let cli_index = tmp.path().join("cli-index");
    common::tiny_index(&model, &[&dump], &cli_index, &[]);
    assert_eq!(
        Manifest::read(&cli_index).unwrap().documents,
        titles.len() as u64
    );
}

fn rag_index_args(model: &Path, corpus: &str, index_dir: &Path) -> Vec<String> {
    [
        "index",
        "--model",
        model.to_str().unwrap(),
        "--corpus",
        corpus,
        "--index",
        index_dir.to_str().unwrap(),
        "--layers",
        "1",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn fifos_and_pipes_are_refused_in_one_line_and_a_redirected_file_works() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 4, 5);
    let index_dir = tmp.path().join("index");

    // A FIFO: refused at once, never opened (opening one blocks until a writer comes).
    let fifo = tmp.path().join("corpus.fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let line = common::refused(&rag_index_args(&model, fifo.to_str().unwrap(), &index_dir));
    assert!(line.contains("is a FIFO or pipe"), "{line}");
    assert!(!index_dir.exists());

    // Piped stdin: refused in one line, not "the file is empty".
    let mut child = common::rag()
        .args(rag_index_args(&model, "/dev/stdin", &index_dir))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = std::fs::read(&corpus).unwrap();
    // The refusal may come before the write ends: a broken pipe here is expected.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/dev/stdin is a FIFO or pipe") && !stderr.contains("empty"),
        "{stderr}"
    );

    // A file redirected to stdin is a regular file: indexed like the file itself.
    let out = common::rag()
        .args(rag_index_args(&model, "/dev/stdin", &index_dir))
        .stdin(std::fs::File::open(&corpus).unwrap())
        .output()
        .unwrap();
    common::assert_success(&out);
    let manifest = Manifest::read(&index_dir).unwrap();
    assert_eq!(manifest.documents, 20);
    assert_eq!(
        manifest.corpus[0].sha256,
        rag::files::sha256_file(&corpus).unwrap()
    );
}
