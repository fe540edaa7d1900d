//! The rankings an earlier run recorded (`rag eval --rankings-from RUN`): each question's
//! retrieved titles at each cell, read back instead of searching. What one retriever ranked can
//! then be read by another generator or context setting without that retriever's model or
//! index: any index of the same corpus supplies the documents. The corpus is deduplicated by
//! title, so a title names one document in every index of it, whatever the ids there.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::record::{read_predictions, RunConfig, CONFIG_FILE, PREDICTIONS_FILE};
use super::run::ranking_depth;
use super::shard_hits::Rankings;
use crate::corpus::Question;
use crate::index::Index;

/// The rankings of `questions` at `config`'s cells that the run in `dir` recorded, as ids of
/// `index`. Refused, by name, when that run searched another way (mode, hops, weights), ranked
/// less deep than `config` reads, lacks a question or cell, or names a title `index` lacks.
pub fn read(
    dir: &Path,
    config: &RunConfig,
    questions: &[Question],
    index: &Index,
) -> Result<Rankings> {
    let source: RunConfig = crate::files::read_json(&dir.join(CONFIG_FILE))
        .with_context(|| format!("{} is not a run folder of rag eval", dir.display()))?;
    let (theirs, ours) = (source.strategy()?, config.strategy()?);
    if theirs != ours {
        bail!(
            "{} ranked with {theirs}, this run asks for {ours}: pass the same --mode and --hops",
            dir.display()
        );
    }
    if source.tuning != config.tuning {
        bail!(
            "{} ranked with other fusion or second-hop weights ({:?}): pass the same ones",
            dir.display(),
            source.tuning
        );
    }
    let depth = ranking_depth(config.top_k);
    if ranking_depth(source.top_k) < depth {
        bail!(
            "{} ranked {} paragraphs deep, this run reads {depth} (--top-k {})",
            dir.display(),
            ranking_depth(source.top_k),
            config.top_k
        );
    }
    let mut recorded: HashMap<_, _> = read_predictions(&dir.join(PREDICTIONS_FILE))?
        .into_iter()
        .map(|p| ((p.id, p.cell), p.retrieved))
        .collect();
    let ids: HashMap<String, u64> = index.titles()?.into_iter().map(|(id, t)| (t, id)).collect();
    let mut rankings = Rankings::new();
    for question in questions {
        for &cell in &config.cells {
            let key = (question.id.clone(), cell);
            let Some(titles) = recorded.remove(&key) else {
                bail!(
                    "{} has no ranking for question {} at {cell}: finish that run first",
                    dir.display(),
                    question.id,
                );
            };
            let ranking = titles
                .iter()
                .take(depth)
                .map(|title| match ids.get(title.as_str()) {
                    // A run records titles, not scores: none is made up.
                    Some(&id) => Ok((id, f32::NAN)),
                    None => bail!(
                        "{} retrieved \"{title}\", which {} does not hold: it was ranked over another corpus",
                        dir.display(),
                        index.dir.display()
                    ),
                })
                .collect::<Result<_>>()?;
            rankings.insert(key, ranking);
        }
    }
    Ok(rankings)
}
