//! `rag eval-sts` end to end on a tiny generated model and a tiny generated STS folder in the
//! shared layout (report shape, values, files, the one-line errors of bad input), and on the
//! real default encoder and STS data when they are present.

mod common;

use std::path::{Path, PathBuf};

use rag::encoder::tiny::TinyBert;
use rag::encoder::{Encoder, EncoderOptions};
use rag::eval::sts::{self, Reduction, StsDataset, StsOptions};
use rag::progress::ProgressMode;

const WORDS: [&str; 10] = [
    "the river",
    "a city",
    "film",
    "of stone",
    "music",
    "and gardens",
    "who",
    "was",
    "in",
    "what",
];

/// Sentence `n` (below 1000): a word per decimal digit, and one more for variety.
fn sentence(n: usize) -> String {
    let digits = [n / 100 % 10, n / 10 % 10, n % 10];
    let extra = digits.iter().sum::<usize>() % 10;
    digits
        .iter()
        .chain([&extra])
        .map(|&d| WORDS[d])
        .collect::<Vec<_>>()
        .join(" ")
}

/// `count` scored pairs starting at sentence `first`: every other pair is one sentence twice
/// (gold 4 to 5), the rest two unrelated sentences (gold 0 to 1), so any encoder ranks most of
/// them right.
fn pairs(first: usize, count: usize) -> Vec<(String, String, f64)> {
    (0..count)
        .map(|i| {
            let n = first + i;
            if i % 2 == 0 {
                (sentence(n), sentence(n), 4.0 + (i % 5) as f64 / 5.0)
            } else {
                (sentence(n), sentence(999 - n), (i % 5) as f64 / 5.0)
            }
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// All seven datasets in the layout of `../shared/data/sts/`, 20 to 40 scored pairs each.
fn write_sts_data(data: &Path) {
    let sts = data.join("sts");
    for (y, year) in ["STS12", "STS13", "STS14", "STS15", "STS16"]
        .iter()
        .enumerate()
    {
        for (s, subset) in ["alpha", "beta"].iter().enumerate() {
            let dir = sts.join(format!("{year}-en-test"));
            let (mut input, mut gold) = (String::new(), String::new());
            for (i, (a, b, score)) in pairs(100 * y + 40 * s, 12).into_iter().enumerate() {
                input.push_str(&format!("{a}\t{b}\n"));
                // Every fourth pair of the later years is unscored, as in STS15/16.
                if y >= 3 && i % 4 == 3 {
                    gold.push('\n');
                } else {
                    gold.push_str(&format!("{score:.3}\n"));
                }
            }
            write(&dir.join(format!("STS.input.{subset}.txt")), &input);
            write(&dir.join(format!("STS.gs.{subset}.txt")), &gold);
        }
    }
    let stsb: String = pairs(600, 30)
        .iter()
        .enumerate()
        .map(|(i, (a, b, s))| {
            format!("main-captions\tMSRvid\t2012test\t{i:04}\t{s:.3}\t{a}\t{b}\n")
        })
        .collect();
    write(&sts.join("stsbenchmark/sts-test.csv"), &stsb);
    let sick: String = std::iter::once(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n".to_string(),
    )
    .chain(
        pairs(700, 40)
            .iter()
            .enumerate()
            .map(|(i, (a, b, s))| format!("{i}\t{a}\t{b}\t{:.1}\tNEUTRAL\r\n", 1.0 + s * 0.8)),
    )
    .collect();
    write(&sts.join("SICK/SICK_test_annotated.txt"), &sick);
}

fn tiny_setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    TinyBert::default().write(&model).unwrap();
    let data = tmp.path().join("data");
    write_sts_data(&data);
    (tmp, model, data)
}

#[test]
fn tiny_model_report_covers_every_layer_size_and_method() {
    let (tmp, model, data) = tiny_setup();
    let encoder = Encoder::load(&model, &EncoderOptions::default()).unwrap();
    let report = sts::evaluate(
        &encoder,
        &StsOptions {
            data_dir: data,
            datasets: StsDataset::ALL.to_vec(),
            layers: None,
            dims: Some(vec![32, 8]),
            pca: true,
            progress: ProgressMode::Quiet,
        },
    )
    .unwrap();
    assert_eq!(report.layers, vec![1, 2, 3]);
    assert_eq!(report.dims, vec![8, 32]);
    assert_eq!(report.methods, vec![Reduction::Truncate, Reduction::Pca]);
    assert_eq!(report.cells.len(), 3 * 2 * 2);
    let pairs: Vec<(&str, usize)> = report.datasets.iter().map(|d| (d.name, d.pairs)).collect();
    assert_eq!(
        pairs,
        vec![
            ("STS12", 24),
            ("STS13", 24),
            ("STS14", 24),
            ("STS15", 18),
            ("STS16", 18),
            ("STS-B", 30),
            ("SICK-R", 40)
        ]
    );
    for cell in &report.cells {
        assert_eq!(cell.spearman.per_dataset.len(), 7);
        for (name, &value) in &cell.spearman.per_dataset {
            assert!((-100.0..=100.0).contains(&value), "{name}: {value}");
        }
        // Identical sentences are each other's nearest: the ranking follows the gold one.
        assert!(
            cell.spearman.average > 40.0,
            "layer {} dim {} {:?}: {}",
            cell.layer,
            cell.dim,
            cell.method,
            cell.spearman.average
        );
    }
    // "< Avg" is the mean of layers 1 and 2, per size and method.
    assert_eq!(report.shallow.len(), 2 * 2);
    let shallow = &report.shallow[0];
    assert_eq!(shallow.layers, vec![1, 2]);
    let of = |layer| {
        report
            .cells
            .iter()
            .find(|c| c.layer == layer && c.dim == shallow.dim && c.method == shallow.method)
            .unwrap()
            .spearman
            .average
    };
    assert!((shallow.spearman.average - (of(1) + of(2)) / 2.0).abs() < 1e-9);
    let markdown = report.markdown();
    for needle in [
        "## STS-B: layer x size",
        "## Average of the 7 datasets: layer x size",
        "## Every dataset",
        "| layer | method | 8 | 32 |",
        "| < Avg (1,2) | PCA |",
        "| 3 | 32 | truncation |",
        "STS12 24 pairs",
    ] {
        assert!(markdown.contains(needle), "{needle}\n{markdown}");
    }

    let out = tmp.path().join("out");
    report.write(&out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["cells"].as_array().unwrap().len(), 12);
    assert_eq!(json["cells"][0]["method"], "truncate");
    assert!(out.join("summary.md").is_file());
}

#[test]
fn cli_writes_the_report_and_refuses_bad_input_in_one_line() {
    let (tmp, model, data) = tiny_setup();
    let out = tmp.path().join("report");
    let json = common::rag_json([
        "eval-sts",
        "--model",
        &model.display().to_string(),
        "--data-dir",
        &data.display().to_string(),
        "--layers",
        "1,3",
        "--datasets",
        "stsb,sick-r",
        "--reduce",
        "pca",
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    // Default sizes for a 32-wide model: just the full width.
    assert_eq!(json["dims"], serde_json::json!([32]));
    assert_eq!(json["cells"].as_array().unwrap().len(), 2 * 2);
    assert_eq!(json["datasets"].as_array().unwrap().len(), 2);
    for file in ["summary.json", "summary.md"] {
        assert!(out.join(file).is_file(), "{file}");
    }

    let run = |extra: &[&str]| {
        let out = common::rag()
            .args(["eval-sts", "--model"])
            .arg(&model)
            .arg("--out")
            .arg(tmp.path().join("bad"))
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        stderr
    };
    let data_arg = data.display().to_string();
    let one_line = |extra: &[&str], expected: &str| {
        let stderr = run(extra);
        assert!(stderr.starts_with("error: "), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    };
    one_line(
        &["--data-dir", "/nonexistent"],
        "no STS data at /nonexistent/sts",
    );
    one_line(
        &["--data-dir", &data_arg, "--dims", "8,64"],
        "--dims 64 is outside 1..=32",
    );
    one_line(
        &["--data-dir", &data_arg, "--layers", "2,4"],
        "--layers must be between 1 and 3",
    );
    // clap's own message for a value it cannot parse: one error line, then a usage hint.
    let stderr = run(&["--data-dir", &data_arg, "--layers", "0"]);
    assert!(
        stderr.starts_with("error: invalid value '0' for '--layers"),
        "{stderr}"
    );
    let stderr = run(&["--data-dir", &data_arg, "--datasets", "sts17"]);
    assert!(
        stderr.starts_with("error: invalid value 'sts17'"),
        "{stderr}"
    );

    let stsb = data.join("sts/stsbenchmark/sts-test.csv");
    let text = std::fs::read_to_string(&stsb).unwrap();
    write(&stsb, &text.replacen("\t", "|", 5));
    one_line(
        &["--data-dir", &data_arg],
        &format!(
            "{}:1: expected at least 7 tab-separated fields, found 2",
            stsb.display()
        ),
    );
    std::fs::remove_file(data.join("sts/SICK/SICK_test_annotated.txt")).unwrap();
    one_line(
        &["--data-dir", &data_arg, "--datasets", "sickr"],
        "SICK_test_annotated.txt",
    );
}

#[test]
fn real_model_matches_the_published_sts_b_score() {
    let (Some(model), Some(data)) = (
        common::default_model(),
        common::data_dir().filter(|d| d.join("sts").is_dir()),
    ) else {
        return common::missing(
            "STS on the default model",
            "models",
            "default encoder (scripts/fetch-models.sh encoder) or ../shared/data/sts missing",
        );
    };
    // SentEval's pair counts for the "all" setting.
    let expected = [
        (StsDataset::Sts12, 3108),
        (StsDataset::Sts13, 1500),
        (StsDataset::Sts14, 3750),
        (StsDataset::Sts15, 3000),
        (StsDataset::Sts16, 1186),
        (StsDataset::Stsb, 1379),
        (StsDataset::Sickr, 4927),
    ];
    for (dataset, pairs) in expected {
        let loaded = dataset.load(&data.join("sts")).unwrap();
        assert_eq!(loaded.pairs.len(), pairs, "{dataset}");
    }
    let encoder = Encoder::load(&model, &EncoderOptions::default()).unwrap();
    let report = sts::evaluate(
        &encoder,
        &StsOptions {
            data_dir: data,
            datasets: vec![StsDataset::Stsb],
            layers: Some(vec![6]),
            dims: Some(vec![384]),
            pca: false,
            progress: ProgressMode::Quiet,
        },
    )
    .unwrap();
    // all-MiniLM-L6-v2's STS-B test Spearman as the MTEB leaderboard lists it: 82.03.
    let stsb = report.cells[0].spearman.per_dataset["STS-B"];
    assert!((stsb - 82.03).abs() < 0.3, "STS-B {stsb}");
    assert!(report.shallow.is_empty());
}
