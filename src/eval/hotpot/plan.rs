//! What an evaluation covers before it runs: the grid of depths x sizes, the index that holds
//! them (built once, in one encoding pass, when the given one lacks a depth) and the run's name.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::record::{Precisions, RunCell, RunConfig};
use crate::index::{self, BuildOptions, Manifest};
use crate::retrieve::{Mode, Retriever};

/// The model an evaluation encodes with: the one asked for, else the model `index_dir` was built
/// with, else `default`.
pub fn model_dir(asked: Option<&Path>, index_dir: &Path, default: &Path) -> PathBuf {
    asked.map(Path::to_path_buf).unwrap_or_else(|| {
        crate::index::read_manifest(index_dir)
            .map_or_else(|_| default.to_path_buf(), |m| m.model.path)
    })
}

/// The size and sha256 of a model's weights: what tells whether an index was built with it.
fn weights_identity(model_dir: &Path) -> Result<(u64, String)> {
    let weights = crate::encoder::weights_file(model_dir)?;
    let bytes = std::fs::metadata(&weights)
        .with_context(|| format!("reading {}", weights.display()))?
        .len();
    Ok((bytes, crate::files::sha256_file(&weights)?))
}

/// An index built with `options.model_dir` and storing every depth in `depths`:
/// `options.index_dir` when it is one, else an `eval-...` index beside it that is (one already
/// built is reused), built when there is none with all the depths in one encoding pass. An index
/// of another model is never used: its vectors would not answer for this one.
pub fn index_with_depths(options: &BuildOptions, depths: &[usize]) -> Result<PathBuf> {
    let (bytes, sha256) = weights_identity(&options.model_dir)?;
    let covers = |dir: &Path| {
        crate::index::read_manifest(dir)
            .map(|m| {
                m.model.weights_bytes == bytes
                    && m.model.weights_sha256 == sha256
                    && depths.iter().all(|d| m.layers.contains(d))
            })
            .unwrap_or(false)
    };
    if covers(&options.index_dir) {
        return Ok(options.index_dir.clone());
    }
    let parent = options
        .index_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let key = build_key(options);
    let suffix = format!("-{key}");
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("eval-") && name.ends_with(&suffix) && covers(&entry.path()) {
                return Ok(entry.path());
            }
        }
    }
    let layers: Vec<String> = depths.iter().map(usize::to_string).collect();
    let dir = parent.join(format!("eval-L{}{suffix}", layers.join("-")));
    eprintln!(
        "{} has no vectors of {} for layers {}: building {} (one encoding pass for all of them)",
        options.index_dir.display(),
        options.model_dir.display(),
        layers.join(","),
        dir.display()
    );
    let mut build = options.clone();
    build.index_dir = dir.clone();
    build.layers = Some(depths.to_vec());
    index::build(&build).with_context(|| format!("building {}", dir.display()))?;
    Ok(dir)
}

/// What a run searching `retriever`'s vectors records of their precision
/// ([`RunConfig::precision`]): nothing where both sides are f32 or `mode` reads no vectors. An
/// index reused here may have been built at another precision than this run encodes at (bf16
/// by default on CPUs that have it), and its vectors then rank a little differently.
pub fn precisions(retriever: &Retriever, mode: Mode) -> Option<Precisions> {
    let precisions = Precisions {
        questions: retriever.encoder.precision,
        documents: retriever.index.manifest.model.precision,
    };
    (mode.is_dense() && precisions != Precisions::default()).then_some(precisions)
}

/// Names what an eval index is built from (corpus, encoder, template), so that a cached one is
/// reused only for the same inputs.
fn build_key(options: &BuildOptions) -> String {
    let mut hasher = Sha256::new();
    for path in &options.corpus {
        hasher.update(path.to_string_lossy().as_bytes());
        hasher.update(std::fs::metadata(path).map_or(0, |m| m.len()).to_le_bytes());
    }
    hasher.update(options.model_dir.to_string_lossy().as_bytes());
    // The batch size changes speed, not vectors.
    let encoder = crate::encoder::EncoderOptions {
        batch_size: None,
        ..options.encoder.clone()
    };
    hasher.update(format!("{encoder:?}").as_bytes());
    hasher.update(options.template.as_bytes());
    hex::encode(&hasher.finalize()[..4])
}

/// The depths and sizes an evaluation covers: what was asked for, else the paper's grid
/// (layers 1,3,6 x dims 32..384) for a bare `sweep`, else full depth (the index's deepest, or
/// the model's when there is no index yet) at the index's size (`None`).
pub fn grid(
    index_dir: &Path,
    model_dir: &Path,
    sweep: bool,
    layers: Option<Vec<usize>>,
    dims: Option<Vec<usize>>,
) -> Result<(Vec<usize>, Option<Vec<usize>>)> {
    let (default_layers, default_dims) = if sweep {
        (vec![1, 3, 6], Some(vec![32, 64, 128, 384]))
    } else {
        let depth = match crate::index::read_manifest(index_dir) {
            Ok(m) => *m.layers.last().expect("an index stores a depth"),
            Err(_) => crate::encoder::read_config(model_dir)?.num_hidden_layers,
        };
        (vec![depth], None)
    };
    let layers = layers.unwrap_or(default_layers);
    let dims = dims.or(default_dims);
    let cells = layers.len() * dims.as_ref().map_or(1, Vec::len);
    if cells > 1 && !sweep {
        bail!("{cells} settings asked for; add --sweep to evaluate the grid");
    }
    Ok((layers, dims))
}

/// Every depth x size of the grid as the index resolves it (`dims` `None`: its default size).
pub fn cells(
    manifest: &Manifest,
    layers: &[usize],
    dims: Option<&[usize]>,
) -> Result<Vec<RunCell>> {
    let dims = dims.map_or_else(|| vec![manifest.default_dim], <[usize]>::to_vec);
    let mut cells = Vec::new();
    for &depth in layers {
        for &dim in &dims {
            let cell = manifest.resolve(Some(depth), Some(dim))?;
            cells.push(RunCell::retrieval(cell.layers, cell.dim));
        }
    }
    Ok(cells)
}

fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
/// A run's default name, from what sets it apart: e.g.
/// `dense-L6-d384-k5-chat-qwen2.5-coder-1.5b-instruct-q4_k_m-n300`.
pub fn run_name(config: &RunConfig, llm: &Path) -> String {
    let layers: Vec<usize> = config.cells.iter().filter_map(|c| c.layers).collect();
    let dims: Vec<usize> = config.cells.iter().filter_map(|c| c.dim).collect();
    let dedup = |mut v: Vec<usize>| {
        v.sort();
        v.dedup();
        join(&v)
    };
    let weight = match (config.mode, config.tuning) {
        (Mode::Fusion, Some(t)) => t.fusion_weight.to_string(),
        _ => String::new(),
    };
    let hops = match config.tuning {
        Some(t) if config.hops > 1 => {
            format!("-{}hop-b{}w{}", config.hops, t.hop_beam, t.hop_weight)
        }
        _ => String::new(),
    };
    // Only with links on, so that runs from before links keep their names.
    let hops = match config.tuning {
        Some(t) if config.hops > 1 && t.link_weight > 0.0 => format!("{hops}l{}", t.link_weight),
        _ => hops,
    };
    // Only with a shorter second-hop BM25 query, so that runs from before keep their names.
    let hops = match config.tuning {
        Some(t) if config.hops > 1 && !t.hop_query.is_full() && config.mode != Mode::Dense => {
            format!("{hops}-hq{}", t.hop_query.to_string().replace(':', ""))
        }
        _ => hops,
    };
    // Only with query syntax on, so that runs of plain-text questions keep their names.
    let syntax = match config.tuning {
        Some(t) if t.bm25_syntax && config.mode != Mode::Dense => "-bm25syntax",
        _ => "",
    };
    let retrieval = format!(
        "{}{weight}{hops}{syntax}-L{}-d{}",
        config.mode,
        dedup(layers),
        dedup(dims)
    );
    let llm = llm
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let context = match config.context_tokens {
        0 => String::new(),
        tokens => format!("-c{tokens}"),
    };
    let what = match (&config.prompt_style, config.oracle) {
        (Some(style), true) => format!("oracle-{style}-{llm}"),
        (Some(style), false) => format!("{retrieval}-k{}{context}-{style}-{llm}", config.top_k),
        (None, _) => format!("{retrieval}-retrieval"),
    };
    format!("{what}-n{}", config.questions)
}
