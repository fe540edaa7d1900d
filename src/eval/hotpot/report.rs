//! What a run leaves for people: `summary.json`, `summary.md` (one table row per cell) and, for
//! a grid, `heatmap.png`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::record::{Prediction, RunCell, RunConfig};
use super::scores::RECALL_KS;
use crate::eval::heatmap::{self, Panel};

#[derive(Debug, Clone, Serialize)]
pub struct CellSummary {
    #[serde(flatten)]
    pub cell: RunCell,
    pub questions: usize,
    pub recall: BTreeMap<usize, f64>,
    pub all_supporting: BTreeMap<usize, f64>,
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
    pub mean_prompt_tokens: Option<f64>,
    pub median_prompt_tokens: Option<f64>,
    /// Share of questions (yes/no answers aside) whose gold answer is in the prompt's context.
    pub answer_in_context: Option<f64>,
    /// Median time from a question's retrieval to its answer's last token.
    pub median_answer_ms: Option<f64>,
    pub questions_with_dropped_context: usize,
    pub generation_tokens_per_second: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub config: RunConfig,
    pub cells: Vec<CellSummary>,
    /// Wall time, summed over every session of a resumed run.
    pub seconds: f64,
}

impl CellSummary {
    pub fn of(cell: RunCell, predictions: &[&Prediction]) -> Self {
        let n = predictions.len().max(1) as f64;
        let mean =
            |f: &dyn Fn(&Prediction) -> f64| predictions.iter().map(|p| f(p)).sum::<f64>() / n;
        // Predictions that went through the generator (or, for --context-only, up to it).
        let generated: Vec<&&Prediction> = predictions
            .iter()
            .filter(|p| p.timings.prompt_tokens > 0)
            .collect();
        let answered: Vec<&&Prediction> = predictions
            .iter()
            .filter(|p| p.prediction.is_some())
            .collect();
        let over = |set: &[&&Prediction], f: &dyn Fn(&Prediction) -> f64| {
            (!set.is_empty()).then(|| set.iter().map(|p| f(p)).sum::<f64>() / set.len() as f64)
        };
        let (tokens, ms) = generated.iter().fold((0usize, 0.0), |(t, m), p| {
            (t + p.timings.generated_tokens, m + p.timings.generation_ms)
        });
        Self {
            cell,
            questions: predictions.len(),
            recall: RECALL_KS
                .iter()
                .map(|&k| {
                    (
                        k,
                        mean(&|p| p.retrieval.recall.get(&k).copied().unwrap_or(0.0)),
                    )
                })
                .collect(),
            all_supporting: RECALL_KS
                .iter()
                .map(|&k| {
                    let hit = |p: &Prediction| p.retrieval.all_supporting.get(&k) == Some(&true);
                    (k, mean(&|p| f64::from(u8::from(hit(p)))))
                })
                .collect(),
            exact_match: over(&answered, &|p| f64::from(u8::from(p.em == Some(true)))),
            f1: over(&answered, &|p| p.f1.unwrap_or(0.0)),
            mean_prompt_tokens: over(&generated, &|p| p.timings.prompt_tokens as f64),
            median_prompt_tokens: median(generated.iter().map(|p| p.timings.prompt_tokens as f64)),
            median_answer_ms: median(answered.iter().map(|p| p.timings.total_ms)),
            answer_in_context: {
                let found: Vec<bool> = predictions
                    .iter()
                    .filter_map(|p| p.answer_in_context)
                    .collect();
                (!found.is_empty())
                    .then(|| found.iter().filter(|&&f| f).count() as f64 / found.len() as f64)
            },
            questions_with_dropped_context: predictions.iter().filter(|p| p.dropped > 0).count(),
            generation_tokens_per_second: (ms > 0.0).then(|| tokens as f64 * 1000.0 / ms),
        }
    }
}

/// The middle value (the mean of the middle two for an even count); `None` for no values.
pub fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

pub fn summarize(config: &RunConfig, predictions: &[Prediction], seconds: f64) -> Summary {
    let cells = config
        .cells
        .iter()
        .filter_map(|&cell| {
            let mine: Vec<&Prediction> = predictions.iter().filter(|p| p.cell == cell).collect();
            (!mine.is_empty()).then(|| CellSummary::of(cell, &mine))
        })
        .collect();
    Summary {
        config: config.clone(),
        cells,
        seconds,
    }
}

/// The time a resumed run had already spent, from the summary it left (0 when there is none).
pub fn seconds_so_far(dir: &Path) -> f64 {
    std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|summary| summary["seconds"].as_f64())
        .unwrap_or(0.0)
}

/// Writes `summary.json`, `summary.md` and, for a grid, `heatmap.png`.
pub fn write(
    dir: &Path,
    config: &RunConfig,
    predictions: &[Prediction],
    seconds: f64,
) -> Result<Summary> {
    let summary = summarize(config, predictions, seconds);
    crate::files::write_json_atomic(&dir.join("summary.json"), &summary)?;
    crate::files::write_atomic(&dir.join("summary.md"), markdown(&summary).as_bytes())?;
    if summary.cells.len() > 1 {
        draw_heatmap(&dir.join("heatmap.png"), &summary)?;
    }
    Ok(summary)
}

/// Recall@5 and, when answers were generated, exact match over the grid's layers x dims.
fn draw_heatmap(path: &Path, summary: &Summary) -> Result<()> {
    let mut layers: Vec<usize> = summary.cells.iter().filter_map(|c| c.cell.layers).collect();
    let mut dims: Vec<usize> = summary.cells.iter().filter_map(|c| c.cell.dim).collect();
    for axis in [&mut layers, &mut dims] {
        axis.sort();
        axis.dedup();
    }
    let cell = |layer: usize, dim: usize| {
        summary
            .cells
            .iter()
            .find(|c| c.cell.layers == Some(layer) && c.cell.dim == Some(dim))
    };
    let mut panels = vec![Panel {
        title: "Recall@5 (%)".into(),
        value: Box::new(|layer, dim| {
            cell(layer, dim).and_then(|c| c.recall.get(&5).map(|r| r * 100.0))
        }),
    }];
    if summary.cells.iter().any(|c| c.exact_match.is_some()) {
        panels.push(Panel {
            title: "Exact match (%)".into(),
            value: Box::new(|layer, dim| {
                cell(layer, dim).and_then(|c| c.exact_match.map(|em| em * 100.0))
            }),
        });
    }
    heatmap::draw(path, &layers, &dims, &panels, panels.len())
}

fn pct(value: f64) -> String {
    format!("{:.1}", value * 100.0)
}

fn cell_label(value: Option<usize>) -> String {
    value.map_or_else(|| "gold".to_string(), |v| v.to_string())
}

/// A table people can read at a glance: one row per cell, percentages.
pub fn markdown(summary: &Summary) -> String {
    let c = &summary.config;
    let mut out = String::new();
    let generator = match (&c.generator, &c.prompt_style) {
        (Some(g), Some(style)) => format!(
            "{g}, {style} prompt, at most {} new tokens",
            c.max_tokens.unwrap_or(0)
        ),
        _ => "none (retrieval only)".to_string(),
    };
    let context = if c.oracle {
        "the gold paragraphs (oracle)".to_string()
    } else {
        let weight = match c.tuning {
            Some(t) if c.mode == crate::retrieve::Mode::Fusion => {
                format!(", dense weight {}", t.fusion_weight)
            }
            _ => String::new(),
        };
        let weight = match c.tuning {
            Some(t) if c.hops > 1 => {
                format!("{weight}, beam {}, hop weight {}", t.hop_beam, t.hop_weight)
            }
            _ => weight,
        };
        let weight = match c.tuning {
            Some(t) if c.hops > 1 && t.link_weight > 0.0 => {
                format!("{weight}, link weight {}", t.link_weight)
            }
            _ => weight,
        };
        let weight = match c.tuning {
            Some(t) if c.hops > 1 && !t.hop_query.is_full() => {
                format!("{weight}, second-hop BM25 query {}", t.hop_query)
            }
            _ => weight,
        };
        let read = match c.context_tokens {
            0 => "whole".to_string(),
            tokens => format!("their best sentences within {tokens} tokens"),
        };
        format!(
            "top {} by {} retrieval ({} hop(s){weight}), {read}",
            c.top_k, c.mode, c.hops
        )
    };
    let _ = writeln!(out, "# HotpotQA evaluation\n");
    let _ = writeln!(
        out,
        "- questions: the first {} of `{}`",
        c.questions,
        c.questions_file.display()
    );
    let _ = writeln!(out, "- context: {context}");
    let _ = writeln!(out, "- generator: {generator}");
    if let Some(index) = &c.index {
        let _ = writeln!(out, "- index: `{}`", index.display());
    }
    let _ = writeln!(out, "- time: {:.1} s\n", summary.seconds);
    let recall_heads: Vec<String> = RECALL_KS.iter().map(|k| format!("R@{k}")).collect();
    let _ = writeln!(
        out,
        "| layers | dim | n | {} | both@2 | both@5 | both@10 | EM | F1 | answer in context | prompt tokens (median) | answer ms (median) |",
        recall_heads.join(" | ")
    );
    let _ = writeln!(out, "|{}", "---:|".repeat(RECALL_KS.len() + 11));
    for cell in &summary.cells {
        let recall: Vec<String> = RECALL_KS.iter().map(|k| pct(cell.recall[k])).collect();
        let (recall, both) = if cell.cell == RunCell::ORACLE {
            (
                vec!["-".to_string(); RECALL_KS.len()],
                vec!["-".to_string(); 3],
            )
        } else {
            (
                recall,
                [2, 5, 10]
                    .iter()
                    .map(|k| pct(cell.all_supporting[k]))
                    .collect(),
            )
        };
        let number = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell_label(cell.cell.layers),
            cell_label(cell.cell.dim),
            cell.questions,
            recall.join(" | "),
            both.join(" | "),
            cell.exact_match.map_or("-".into(), pct),
            cell.f1.map_or("-".into(), pct),
            cell.answer_in_context.map_or("-".into(), pct),
            number(cell.median_prompt_tokens),
            number(cell.median_answer_ms),
        );
    }
    let _ = writeln!(
        out,
        "\nR@k: mean share of supporting paragraphs in the top k. both@k: questions with both in the top k. EM/F1: official HotpotQA answer metrics. Answer in context: questions (yes/no aside) whose gold answer is in the prompt. All in %; the medians are per question."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::record::PredictionTimings;
    use super::super::scores::RetrievalScores;
    use super::*;
    use crate::retrieve::Mode;

    fn prediction(cell: RunCell, em: bool, retrieved: &[&str]) -> Prediction {
        let titles: Vec<String> = retrieved.iter().map(|s| s.to_string()).collect();
        Prediction {
            id: "q".into(),
            cell,
            question: "?".into(),
            gold: "x".into(),
            prediction: Some(if em { "x" } else { "y" }.into()),
            em: Some(em),
            f1: Some(if em { 1.0 } else { 0.0 }),
            context_titles: vec![],
            dropped: usize::from(!em),
            context: vec![],
            answer_in_context: None,
            retrieval: RetrievalScores::of(&titles, &["A".to_string(), "B".to_string()]),
            retrieved: titles,
            yes_no_margin: None,
            yes_no_prior: None,
            option_choice: None,
            dated_choice: None,
            counted_choice: None,
            measured_choice: None,
            place_check: None,
            echo: None,
            widened: None,
            timings: PredictionTimings {
                generated_tokens: 4,
                generation_ms: 100.0,
                prompt_tokens: if em { 300 } else { 100 },
                ..Default::default()
            },
        }
    }

    #[test]
    fn summaries_average_per_cell_and_render_a_table() {
        let a = RunCell::retrieval(6, 64);
        let b = RunCell::retrieval(3, 64);
        let predictions = vec![
            prediction(a, true, &["A", "B"]),
            prediction(a, false, &["A", "X"]),
            prediction(b, false, &["X", "Y"]),
        ];
        let config = RunConfig {
            questions_file: "q.json".into(),
            questions: 2,
            cells: vec![b, a],
            mode: Mode::Dense,
            hops: 1,
            tuning: None,
            top_k: 5,
            context_tokens: 0,
            context_only: false,
            sentence_weights: None,
            context_floor: 0,
            widen_tokens: 0,
            oracle: false,
            generator: Some("m.gguf".into()),
            prompt_style: Some("chat".into()),
            max_tokens: Some(32),
            yes_no_bias: None,
            option_bias: None,
            option_facts: false,
            full_dates: false,
            option_dates: false,
            option_counts: false,
            option_measures: false,
            shared_place: false,
            number_words: false,
            answer_again: false,
            extractive: false,
            yes_no_facts: false,
            index: None,
            rankings_from: None,
            precision: None,
        };
        let summary = summarize(&config, &predictions, 1.0);
        assert_eq!(summary.cells.len(), 2);
        let sa = &summary.cells[1];
        assert_eq!(sa.cell, a);
        assert_eq!(sa.exact_match, Some(0.5));
        assert_eq!(sa.median_prompt_tokens, Some(200.0));
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median(std::iter::empty()), None);
        assert_eq!(sa.recall[&1], 0.5);
        assert_eq!(sa.recall[&2], 0.75);
        assert_eq!(sa.all_supporting[&2], 0.5);
        assert_eq!(sa.questions_with_dropped_context, 1);
        assert_eq!(sa.generation_tokens_per_second, Some(40.0));
        assert_eq!(summary.cells[0].exact_match, Some(0.0));
        let table = markdown(&summary);
        assert!(
            table
                .contains("| 6 | 64 | 2 | 50.0 | 75.0 | 75.0 | 75.0 | 50.0 | 50.0 | 50.0 | 50.0 |"),
            "{table}"
        );
        assert!(table.contains("| 3 | 64 | 1 | 0.0 |"), "{table}");
    }
}
