//! A distributed evaluation's two halves (`cluster/rag-ray eval`): each shard's worker ranks
//! every question against its own documents ([`write_shard_hits`], `rag eval --shard i/n
//! --hits-dir DIR`), and the merge ([`read_merged`], `rag eval --from-hits DIR`) takes the best
//! of the shards' lists for the ordinary run folder. Dense and BM25 scores are the single
//! index's (BM25 with the whole corpus's statistics), so the merged lists are exactly its
//! rankings. One hop, dense or BM25: fusion and the second hop re-rank merged candidate lists,
//! which in-process readers of a sharded index do.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::record::RunCell;
use crate::corpus::Question;
use crate::index::sharded::{merge_top_k, ShardSpec};
use crate::retrieve::{Mode, Queries, Retriever, SearchTimings, Strategy};

/// (global id, score), best first.
pub type Ranking = Vec<(u64, f32)>;
/// Each question's merged ranking per cell, by (question id, cell).
pub type Rankings = HashMap<(String, RunCell), Ranking>;

/// One line of a shard's hits file.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    question: String,
    layers: usize,
    dim: usize,
    hits: Ranking,
}

/// Refuses what the distributed path does not merge.
pub fn check_strategy(strategy: Strategy) -> Result<()> {
    if strategy.hops != 1 || !matches!(strategy.mode, Mode::Dense | Mode::Bm25) {
        bail!(
            "the distributed evaluation merges one-hop dense or BM25 rankings (got {strategy}); pass --mode dense|bm25 --hops 1, or evaluate the sharded index in one process"
        );
    }
    Ok(())
}

/// The hits file of `shard` in `dir`.
pub fn hits_file(dir: &Path, shard: ShardSpec) -> PathBuf {
    dir.join(format!("{}.jsonl", shard.dir_name()))
}

/// Ranks every question at every cell against `retriever`'s documents (one shard's, see
/// [`crate::index::Index::only_shard`]), `k` deep, and writes the lists to `path` atomically:
/// a worker killed half-way leaves no file, and its retry writes the whole one.
pub fn write_shard_hits(
    retriever: &Retriever,
    questions: &[Question],
    cells: &[RunCell],
    strategy: Strategy,
    k: usize,
    path: &Path,
) -> Result<usize> {
    check_strategy(strategy)?;
    let texts: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
    let mut out = Vec::new();
    let mut lines = 0;
    for cell in cells {
        let Some(searched) = cell.searched() else {
            bail!("the oracle has no rankings to distribute");
        };
        let mut timings = SearchTimings::default();
        let ranked = retriever.rank(Queries::texts(&texts), strategy, searched, k, &mut timings)?;
        for (question, ranking) in questions.iter().zip(ranked) {
            let line = Line {
                question: question.id.clone(),
                layers: searched.layers,
                dim: searched.dim,
                hits: ranking.into_iter().map(|s| (s.id, s.score)).collect(),
            };
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            lines += 1;
        }
    }
    crate::files::write_atomic(path, &out)?;
    Ok(lines)
}

/// Reads the hits files of all `count` shards in `dir` and merges each question's lists to
/// the best `k`. A missing file, or one that lacks a question, is refused by name.
pub fn read_merged(
    dir: &Path,
    count: usize,
    questions: &[Question],
    cells: &[RunCell],
    k: usize,
) -> Result<Rankings> {
    let mut lists: HashMap<(String, RunCell), Vec<Ranking>> = HashMap::new();
    for index in 0..count {
        let path = hits_file(dir, ShardSpec { index, count });
        let file = std::fs::File::open(&path).with_context(|| {
            format!(
                "opening {} (the hits of shard {index}/{count}; run `rag eval --shard {index}/{count} --hits-dir {}`)",
                path.display(),
                dir.display()
            )
        })?;
        let mut seen = 0;
        for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            let line: Line = serde_json::from_str(&line)
                .with_context(|| format!("{}: line {} is damaged", path.display(), number + 1))?;
            let key = (line.question, RunCell::retrieval(line.layers, line.dim));
            lists.entry(key).or_default().push(line.hits);
            seen += 1;
        }
        if seen != questions.len() * cells.len() {
            bail!(
                "{} holds {seen} rankings, not {} ({} questions x {} cells): it was written for other settings",
                path.display(),
                questions.len() * cells.len(),
                questions.len(),
                cells.len()
            );
        }
    }
    let mut merged = Rankings::new();
    for question in questions {
        for &cell in cells {
            let key = (question.id.clone(), cell);
            match lists.remove(&key) {
                Some(shards) if shards.len() == count => {
                    merged.insert(key, merge_top_k(shards, k));
                }
                _ => bail!(
                    "the hits in {} lack question {} at {cell} from some shard: they were written for other settings",
                    dir.display(),
                    question.id,
                ),
            }
        }
    }
    Ok(merged)
}
