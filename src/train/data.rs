//! Training examples: NLI triplets (as SimCSE / AnglE's `nli_for_simcse`), generic JSONL, and
//! in-domain pairs made from a HotpotQA corpus without its questions.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::corpus::{for_each_record, ParagraphText};
use crate::rng::Rng;

/// One training example. Examples of one kind are batched together, since each kind has its own
/// loss layout (angle_emb's formats C, B and A).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Example {
    Triplet {
        anchor: String,
        positive: String,
        negative: String,
    },
    Pair {
        anchor: String,
        positive: String,
    },
    Scored {
        text1: String,
        text2: String,
        label: f32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ExampleKind {
    Triplet,
    Pair,
    Scored,
}

impl Example {
    pub fn kind(&self) -> ExampleKind {
        match self {
            Example::Triplet { .. } => ExampleKind::Triplet,
            Example::Pair { .. } => ExampleKind::Pair,
            Example::Scored { .. } => ExampleKind::Scored,
        }
    }

    /// The texts of the example in the order of its kind's row blocks.
    pub fn texts(&self) -> Vec<&str> {
        match self {
            Example::Triplet {
                anchor,
                positive,
                negative,
            } => vec![anchor, positive, negative],
            Example::Pair { anchor, positive } => vec![anchor, positive],
            Example::Scored { text1, text2, .. } => vec![text1, text2],
        }
    }
}

/// Where examples come from, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataSource {
    /// An NLI CSV (`premise,hypothesis,label`).
    NliCsv(PathBuf),
    /// JSONL of `{"query","positive"[,"negative"]}` or `{"text1","text2","label"}`.
    Jsonl(PathBuf),
    /// A HotpotQA corpus: title + first sentence -> title + the rest of the paragraph.
    CorpusPairs(PathBuf),
}

impl DataSource {
    pub fn path(&self) -> &Path {
        match self {
            DataSource::NliCsv(p) | DataSource::Jsonl(p) | DataSource::CorpusPairs(p) => p,
        }
    }

    pub fn read(&self, limit: usize) -> Result<Vec<Example>> {
        match self {
            DataSource::NliCsv(path) => nli_triplets(path, limit),
            DataSource::Jsonl(path) => read_jsonl(path, limit),
            DataSource::CorpusPairs(path) => corpus_pairs(path, limit),
        }
    }
}

/// `nli` names every CSV under `<data_dir>/nli/`; other values are files, typed by extension.
pub fn resolve_sources(
    data: &[String],
    corpus: &[PathBuf],
    data_dir: &Path,
) -> Result<Vec<DataSource>> {
    let mut sources = Vec::new();
    for item in data {
        if item == "nli" {
            let dir = data_dir.join("nli");
            let mut csvs: Vec<PathBuf> = std::fs::read_dir(&dir)
                .with_context(|| format!("listing {} (set --data-dir)", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect();
            if csvs.is_empty() {
                bail!("{}: no NLI CSV files", dir.display());
            }
            csvs.sort();
            sources.extend(csvs.into_iter().map(DataSource::NliCsv));
        } else {
            let path = PathBuf::from(item);
            if !path.is_file() {
                bail!("training data {} does not exist", path.display());
            }
            match path.extension().and_then(|e| e.to_str()) {
                Some("csv") => sources.push(DataSource::NliCsv(path)),
                Some("jsonl") | Some("json") => sources.push(DataSource::Jsonl(path)),
                _ => bail!(
                    "{}: training data must be `nli`, a .csv (premise,hypothesis,label) or a .jsonl",
                    path.display()
                ),
            }
        }
    }
    for path in corpus {
        if !path.is_file() {
            bail!("corpus {} does not exist", path.display());
        }
        sources.push(DataSource::CorpusPairs(path.clone()));
    }
    if sources.is_empty() {
        bail!("no training data: pass --data nli, --data FILE or --pairs-from-corpus FILE");
    }
    Ok(sources)
}

/// Per premise, its first entailed and first contradicting hypothesis; premises lacking either
/// are skipped, as in SimCSE's `nli_for_simcse`.
pub fn nli_triplets(path: &Path, limit: usize) -> Result<Vec<Example>> {
    let mut reader = csv::Reader::from_path(path)
        .with_context(|| format!("opening NLI file {}", path.display()))?;
    let headers = reader
        .headers()
        .with_context(|| format!("{}: reading the header", path.display()))?
        .clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| {
                anyhow!(
                    "{}: no `{name}` column (need premise,hypothesis,label)",
                    path.display()
                )
            })
    };
    let (premise_col, hypothesis_col, label_col) =
        (column("premise")?, column("hypothesis")?, column("label")?);
    // Premise -> (entailment, contradiction), in order of first appearance.
    let mut by_premise: BTreeMap<usize, (String, Option<String>, Option<String>)> = BTreeMap::new();
    let mut index_of: std::collections::HashMap<String, usize> = Default::default();
    for (row, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("{}: row {}", path.display(), row + 2))?;
        let field = |i: usize| record.get(i).map(str::trim).unwrap_or("");
        let (premise, hypothesis, label) =
            (field(premise_col), field(hypothesis_col), field(label_col));
        if premise.is_empty() || hypothesis.is_empty() {
            continue;
        }
        let next = index_of.len();
        let id = *index_of.entry(premise.to_string()).or_insert(next);
        let entry = by_premise
            .entry(id)
            .or_insert_with(|| (premise.to_string(), None, None));
        match label {
            "entailment" | "0" => {
                entry.1.get_or_insert_with(|| hypothesis.to_string());
            }
            "contradiction" | "2" => {
                entry.2.get_or_insert_with(|| hypothesis.to_string());
            }
            "neutral" | "1" | "-" | "" => {}
            other => bail!(
                "{}: row {}: unknown label {other:?} (entailment, neutral or contradiction)",
                path.display(),
                row + 2
            ),
        }
    }
    Ok(by_premise
        .into_values()
        .filter_map(|(anchor, positive, negative)| {
            Some(Example::Triplet {
                anchor,
                positive: positive?,
                negative: negative?,
            })
        })
        .take(limit)
        .collect())
}

#[derive(Deserialize)]
struct JsonlRecord {
    query: Option<String>,
    positive: Option<String>,
    negative: Option<String>,
    text1: Option<String>,
    text2: Option<String>,
    label: Option<f32>,
}

pub fn read_jsonl(path: &Path, limit: usize) -> Result<Vec<Example>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut examples = Vec::new();
    for (number, line) in BufReader::new(file).lines().enumerate() {
        if examples.len() >= limit {
            break;
        }
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}: line {}", path.display(), number + 1);
        let record: JsonlRecord = serde_json::from_str(&line).with_context(at)?;
        examples.push(match record {
            JsonlRecord {
                query: Some(anchor),
                positive: Some(positive),
                negative,
                ..
            } => match negative {
                Some(negative) => Example::Triplet {
                    anchor,
                    positive,
                    negative,
                },
                None => Example::Pair { anchor, positive },
            },
            JsonlRecord {
                text1: Some(text1),
                text2: Some(text2),
                label: Some(label),
                ..
            } => Example::Scored {
                text1,
                text2,
                label,
            },
            _ => bail!(
                "{}: needs {{\"query\",\"positive\"[,\"negative\"]}} or {{\"text1\",\"text2\",\"label\"}}",
                at()
            ),
        });
    }
    Ok(examples)
}

/// A paragraph given as its sentences: the first one and the rest, if it has more than one.
fn split_sentences(sentences: &[String]) -> Option<(String, String)> {
    (sentences.len() > 1).then(|| {
        (
            sentences[0].trim().to_string(),
            sentences[1..].concat().trim().to_string(),
        )
    })
}

/// Splits a paragraph given as one string into its first sentence and the rest.
fn split_first_sentence(text: &str) -> Option<(String, String)> {
    let cut = text
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .find(|&i| i > 20)?;
    Some((
        text[..cut].trim().to_string(),
        text[cut..].trim().to_string(),
    ))
}

/// (title + first sentence, title + rest of the paragraph) for every distinct paragraph with
/// more than one sentence: in-domain pairs that need no questions. The positive carries the
/// title as an indexed document does (HotpotQA Recall@5 at 3 layers / 64 dims 0.169 against
/// 0.134 with the bare rest; that run is in git history, see eval/training/).
pub fn corpus_pairs(path: &Path, limit: usize) -> Result<Vec<Example>> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut pairs = Vec::new();
    for_each_record(path, |number, record| {
        let record =
            record.map_err(|reason| anyhow!("{}: record {number}: {reason}", path.display()))?;
        let paragraphs: Vec<(String, Option<(String, String)>)> =
            match (&record.context, &record.title, &record.text) {
                (Some(context), _, _) => context
                    .iter()
                    .map(|(title, sentences)| (title.clone(), split_sentences(sentences)))
                    .collect(),
                (None, Some(title), Some(ParagraphText::Sentences(sentences))) => {
                    vec![(title.clone(), split_sentences(sentences))]
                }
                (None, Some(title), Some(ParagraphText::Joined(text))) => {
                    vec![(title.clone(), split_first_sentence(text))]
                }
                _ => bail!(
                    "{}: record {number}: has neither `context` nor `title` and `text`",
                    path.display()
                ),
            };
        for (title, split) in paragraphs {
            let Some((first, rest)) = split else { continue };
            if pairs.len() >= limit || rest.is_empty() || !seen.insert(title.clone()) {
                continue;
            }
            pairs.push(Example::Pair {
                anchor: format!("{title}: {first}"),
                positive: format!("{title}: {rest}"),
            });
        }
        Ok(())
    })?;
    Ok(pairs)
}

/// One epoch's batches: examples grouped by kind, shuffled within each kind, cut into batches of
/// `batch_size` (a short last batch is dropped: contrastive losses need in-batch negatives), and
/// the batches of every kind shuffled together. The same seed and epoch give the same order, so
/// a resumed run picks up exactly where it stopped.
pub fn epoch_batches(
    examples: &[Example],
    batch_size: usize,
    seed: u64,
    epoch: usize,
) -> Vec<Vec<usize>> {
    let mut rng = Rng::new(seed ^ (epoch as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut by_kind: BTreeMap<ExampleKind, Vec<usize>> = BTreeMap::new();
    for (i, example) in examples.iter().enumerate() {
        by_kind.entry(example.kind()).or_default().push(i);
    }
    let mut batches = Vec::new();
    for mut members in by_kind.into_values() {
        rng.shuffle(&mut members);
        batches.extend(members.chunks_exact(batch_size).map(<[usize]>::to_vec));
    }
    rng.shuffle(&mut batches);
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nli_rows_become_one_triplet_per_premise_with_both_hypotheses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nli.csv");
        std::fs::write(
            &path,
            "premise,hypothesis,label\n\
             A man plays.,Someone plays.,entailment\n\
             A man plays.,\"Nobody, ever, plays.\",contradiction\n\
             A man plays.,A man plays well.,neutral\n\
             Two dogs run.,Animals move.,entailment\n\
             A cat sleeps.,The cat is awake.,contradiction\n\
             A cat sleeps.,A cat rests.,entailment\n",
        )
        .unwrap();
        let triplets = nli_triplets(&path, usize::MAX).unwrap();
        assert_eq!(
            triplets,
            vec![
                Example::Triplet {
                    anchor: "A man plays.".into(),
                    positive: "Someone plays.".into(),
                    negative: "Nobody, ever, plays.".into()
                },
                Example::Triplet {
                    anchor: "A cat sleeps.".into(),
                    positive: "A cat rests.".into(),
                    negative: "The cat is awake.".into()
                },
            ]
        );
        std::fs::write(&path, "premise,hypothesis,label\na,b,maybe\n").unwrap();
        let err = nli_triplets(&path, usize::MAX).unwrap_err().to_string();
        assert!(err.contains("row 2") && err.contains("maybe"), "{err}");
        std::fs::write(&path, "sentence1,sentence2\na,b\n").unwrap();
        assert!(nli_triplets(&path, usize::MAX)
            .unwrap_err()
            .to_string()
            .contains("premise"));
    }

    #[test]
    fn jsonl_reads_all_three_shapes_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.jsonl");
        std::fs::write(
            &path,
            r#"{"query":"q","positive":"p"}
{"query":"q","positive":"p","negative":"n"}

{"text1":"a","text2":"b","label":0.5}
"#,
        )
        .unwrap();
        let kinds: Vec<ExampleKind> = read_jsonl(&path, usize::MAX)
            .unwrap()
            .iter()
            .map(Example::kind)
            .collect();
        assert_eq!(
            kinds,
            [ExampleKind::Pair, ExampleKind::Triplet, ExampleKind::Scored]
        );
        std::fs::write(
            &path,
            "{\"query\":\"q\",\"positive\":\"p\"}\n{\"query\":\"q\"}\n",
        )
        .unwrap();
        let err = format!("{:#}", read_jsonl(&path, usize::MAX).unwrap_err());
        assert!(err.contains("line 2"), "{err}");
        std::fs::write(&path, "{not json\n").unwrap();
        assert!(format!("{:#}", read_jsonl(&path, usize::MAX).unwrap_err()).contains("line 1"));
    }

    #[test]
    fn corpus_pairs_put_title_and_first_sentence_against_the_titled_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.json");
        std::fs::write(
            &path,
            r#"[{"context":[["Nile",["The Nile is a river."," It flows north."," It is long."]],["One",["Only one sentence."]]]},
                {"context":[["Nile",["Duplicate title.", " Skipped."]]]},
                {"title":"Rhine","text":"The Rhine is a European river. It begins in Switzerland."}]"#,
        )
        .unwrap();
        let pairs = corpus_pairs(&path, usize::MAX).unwrap();
        assert_eq!(
            pairs,
            vec![
                Example::Pair {
                    anchor: "Nile: The Nile is a river.".into(),
                    positive: "Nile: It flows north. It is long.".into()
                },
                Example::Pair {
                    anchor: "Rhine: The Rhine is a European river.".into(),
                    positive: "Rhine: It begins in Switzerland.".into()
                },
            ]
        );
    }

    #[test]
    fn epoch_batches_are_homogeneous_full_and_repeatable() {
        let mut examples: Vec<Example> = (0..10)
            .map(|i| Example::Pair {
                anchor: format!("a{i}"),
                positive: format!("p{i}"),
            })
            .collect();
        examples.extend((0..7).map(|i| Example::Triplet {
            anchor: format!("a{i}"),
            positive: format!("p{i}"),
            negative: format!("n{i}"),
        }));
        let batches = epoch_batches(&examples, 3, 42, 0);
        assert_eq!(batches.len(), 3 + 2);
        for batch in &batches {
            assert_eq!(batch.len(), 3);
            let kind = examples[batch[0]].kind();
            assert!(batch.iter().all(|&i| examples[i].kind() == kind));
        }
        assert_eq!(batches, epoch_batches(&examples, 3, 42, 0));
        assert_ne!(batches, epoch_batches(&examples, 3, 42, 1));
    }
}
