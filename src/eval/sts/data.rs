//! The STS test sets, read from `sts/` under the data folder: STS12-16 in SentEval's "all"
//! setting (every subset of a year pooled, pairs without a gold score left out), STS-B test and
//! SICK-R test.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum StsDataset {
    Sts12,
    Sts13,
    Sts14,
    Sts15,
    Sts16,
    #[cfg_attr(feature = "cli", value(alias = "sts-b"))]
    Stsb,
    #[cfg_attr(feature = "cli", value(alias = "sick-r"))]
    Sickr,
}

/// A tab-separated test file: where it is under `sts/`, the 0-based columns of the score and
/// the two sentences, and how its header line starts, if it has one.
struct TsvLayout {
    file: &'static str,
    score: usize,
    first: usize,
    second: usize,
    header: Option<&'static str>,
}

const STSB_TEST: TsvLayout = TsvLayout {
    file: "stsbenchmark/sts-test.csv",
    score: 4,
    first: 5,
    second: 6,
    header: None,
};

const SICK_TEST: TsvLayout = TsvLayout {
    file: "SICK/SICK_test_annotated.txt",
    score: 3,
    first: 1,
    second: 2,
    header: Some("pair_ID"),
};

impl StsDataset {
    /// In the order of the paper's tables.
    pub const ALL: [StsDataset; 7] = [
        StsDataset::Sts12,
        StsDataset::Sts13,
        StsDataset::Sts14,
        StsDataset::Sts15,
        StsDataset::Sts16,
        StsDataset::Stsb,
        StsDataset::Sickr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StsDataset::Sts12 => "STS12",
            StsDataset::Sts13 => "STS13",
            StsDataset::Sts14 => "STS14",
            StsDataset::Sts15 => "STS15",
            StsDataset::Sts16 => "STS16",
            StsDataset::Stsb => "STS-B",
            StsDataset::Sickr => "SICK-R",
        }
    }

    /// The test pairs, from `sts_dir` laid out as in `../shared/data/sts/`.
    pub fn load(self, sts_dir: &Path) -> Result<StsPairs> {
        match self {
            StsDataset::Stsb => read_tsv(sts_dir, &STSB_TEST),
            StsDataset::Sickr => read_tsv(sts_dir, &SICK_TEST),
            year => read_senteval_year(&sts_dir.join(format!("{}-en-test", year.name()))),
        }
    }
}

impl fmt::Display for StsDataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sentence pairs with their gold similarity scores, and the files they came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StsPairs {
    pub pairs: Vec<(String, String)>,
    pub gold: Vec<f64>,
    pub files: Vec<PathBuf>,
}

impl StsPairs {
    fn push(&mut self, first: &str, second: &str, score: f64) {
        self.pairs.push((first.to_string(), second.to_string()));
        self.gold.push(score);
    }
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn parse_score(field: &str, path: &Path, line: usize) -> Result<f64> {
    field
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|score| score.is_finite())
        .with_context(|| format!("{}:{line}: score '{field}' is not a number", path.display()))
}

/// One pair per line of a tab-separated file (STS-B, SICK); blank lines are skipped, and so is a
/// header line. Extra columns after the ones used are ignored (some STS-B lines carry them).
fn read_tsv(sts_dir: &Path, layout: &TsvLayout) -> Result<StsPairs> {
    let path = &sts_dir.join(layout.file);
    let text = read_text(path)?;
    let needed = layout.score.max(layout.first).max(layout.second) + 1;
    let mut out = StsPairs {
        files: vec![path.to_path_buf()],
        ..Default::default()
    };
    for (i, line) in text.lines().enumerate() {
        let is_header = i == 0 && layout.header.is_some_and(|h| line.starts_with(h));
        if is_header || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < needed {
            bail!(
                "{}:{}: expected at least {needed} tab-separated fields, found {}",
                path.display(),
                i + 1,
                fields.len()
            );
        }
        let score = parse_score(fields[layout.score], path, i + 1)?;
        out.push(fields[layout.first], fields[layout.second], score);
    }
    if out.pairs.is_empty() {
        bail!("{} has no sentence pairs", path.display());
    }
    Ok(out)
}

/// A SentEval year (`STS12-en-test/` ...): every `STS.input.<subset>.txt` (two tab-separated
/// sentences a line) with its `STS.gs.<subset>.txt` (the score on the same line, or nothing for
/// an unscored pair), pooled in the order of the subsets' names.
fn read_senteval_year(dir: &Path) -> Result<StsPairs> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut subsets: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some(
                name.strip_prefix("STS.input.")?
                    .strip_suffix(".txt")?
                    .to_string(),
            )
        })
        .collect();
    subsets.sort();
    if subsets.is_empty() {
        bail!("{} has no STS.input.*.txt files", dir.display());
    }
    let mut out = StsPairs::default();
    for subset in subsets {
        let input = dir.join(format!("STS.input.{subset}.txt"));
        let gold = dir.join(format!("STS.gs.{subset}.txt"));
        let (sentences, scores) = (read_text(&input)?, read_text(&gold)?);
        let (sentences, scores): (Vec<&str>, Vec<&str>) =
            (sentences.lines().collect(), scores.lines().collect());
        if sentences.len() != scores.len() {
            bail!(
                "{} has {} lines but {} has {}: they must pair up line by line",
                input.display(),
                sentences.len(),
                gold.display(),
                scores.len()
            );
        }
        for (i, (pair, score)) in sentences.iter().zip(&scores).enumerate() {
            if score.trim().is_empty() {
                continue;
            }
            let score = parse_score(score, &gold, i + 1)?;
            let fields: Vec<&str> = pair.split('\t').collect();
            if fields.len() != 2 {
                bail!(
                    "{}:{}: expected two tab-separated sentences, found {} fields",
                    input.display(),
                    i + 1,
                    fields.len()
                );
            }
            out.push(fields[0], fields[1], score);
        }
        out.files.extend([input, gold]);
    }
    if out.pairs.is_empty() {
        bail!("{} has no scored sentence pairs", dir.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Loading `dataset` fails with a message containing `needle`.
    fn assert_load_error(dataset: StsDataset, sts: &Path, needle: &str) {
        let err = format!("{:#}", dataset.load(sts).unwrap_err());
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }

    #[test]
    fn sts_benchmark_and_sick_files_parse_with_clear_line_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let sts = tmp.path();
        write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\t2.500\tA girl.\tA woman.\n\ng\tf\t2012\t2\t5\tOne.\tTwo.\textra\tcolumns\n",
        );
        write(
            sts,
            "SICK/SICK_test_annotated.txt",
            "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n6\tA boy.\tA kid.\t3.3\tNEUTRAL\r\n",
        );
        let stsb = StsDataset::Stsb.load(sts).unwrap();
        assert_eq!(
            stsb.pairs,
            vec![
                ("A girl.".to_string(), "A woman.".to_string()),
                ("One.".to_string(), "Two.".to_string())
            ]
        );
        assert_eq!(stsb.gold, vec![2.5, 5.0]);
        let sick = StsDataset::Sickr.load(sts).unwrap();
        assert_eq!(
            sick.pairs,
            vec![("A boy.".to_string(), "A kid.".to_string())]
        );
        assert_eq!(sick.gold, vec![3.3]);

        let path = write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\t2.5\tA.\tB.\ng\tf\t2012\t2\t2.5\tA.\n",
        );
        assert_load_error(
            StsDataset::Stsb,
            sts,
            &format!("{}:2: expected at least 7", path.display()),
        );
        write(
            sts,
            "stsbenchmark/sts-test.csv",
            "g\tf\t2012\t1\tfive\tA.\tB.\n",
        );
        assert_load_error(
            StsDataset::Stsb,
            sts,
            "sts-test.csv:1: score 'five' is not a number",
        );
        write(sts, "stsbenchmark/sts-test.csv", "\n");
        assert_load_error(StsDataset::Stsb, sts, "has no sentence pairs");
        std::fs::remove_file(sts.join("SICK/SICK_test_annotated.txt")).unwrap();
        assert_load_error(StsDataset::Sickr, sts, "reading ");
        assert_load_error(StsDataset::Sickr, sts, "SICK_test_annotated.txt");
    }

    #[test]
    fn a_senteval_year_pools_its_subsets_and_skips_unscored_pairs() {
        let tmp = tempfile::tempdir().unwrap();
        let sts = tmp.path();
        let year = sts.join("STS15-en-test");
        write(
            &year,
            "STS.input.b.txt",
            "b one\tb two\nb three\tb four\nb five\tb six\n",
        );
        write(&year, "STS.gs.b.txt", "4.0\n\n1\n");
        write(&year, "STS.input.a.txt", "a one\ta two\n");
        write(&year, "STS.gs.a.txt", "2.5\n");
        // A gold file without input (STS13's licensed SMT) is ignored.
        write(&year, "STS.gs.c.txt", "3\n");
        let pairs = StsDataset::Sts15.load(sts).unwrap();
        let firsts: Vec<&str> = pairs.pairs.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(firsts, vec!["a one", "b one", "b five"]);
        assert_eq!(pairs.gold, vec![2.5, 4.0, 1.0]);
        assert_eq!(pairs.files.len(), 4);

        write(&year, "STS.gs.b.txt", "4.0\n\n");
        assert_load_error(StsDataset::Sts15, sts, "STS.input.b.txt has 3 lines but");
        write(&year, "STS.gs.b.txt", "4.0\n\nx\n");
        assert_load_error(StsDataset::Sts15, sts, "STS.gs.b.txt:3: score 'x'");
        write(&year, "STS.gs.b.txt", "4.0\n\n1\n");
        write(
            &year,
            "STS.input.b.txt",
            "b one\tb two\nb three\tb four\nno tab here\n",
        );
        assert_load_error(
            StsDataset::Sts15,
            sts,
            "STS.input.b.txt:3: expected two tab-separated sentences, found 1",
        );
        std::fs::remove_file(year.join("STS.gs.a.txt")).unwrap();
        assert_load_error(StsDataset::Sts15, sts, "STS.gs.a.txt");
        assert_load_error(StsDataset::Sts12, sts, "STS12-en-test");
    }
}
