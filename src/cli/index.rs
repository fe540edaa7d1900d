//! `rag index`: build an index (or check one with `--verify`).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use rag::corpus::DEFAULT_TEMPLATE;
use rag::encoder::{EncoderOptions, Precision};
use rag::index::{self, build::DEFAULT_CHUNK_SIZE, BuildOptions};
use rag::progress::ProgressMode;

use super::flags::{DataArgs, EncoderArgs, NumberList};
use super::print_json;

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// HotpotQA files (JSON array or JSONL; plain, .bz2 or .gz), documents (.txt, .md, .html,
    /// .htm: cut into passages of at most --max-length tokens, each titled from its file and
    /// section and remembering its source) or folders of them (every such file under one, in
    /// path order, hidden ones left out: the Wikipedia dump once its .tar.bz2 is unpacked, a
    /// notes folder); may be repeated. Regular files only: a pipe or FIFO is refused. Default:
    /// both sample files.
    #[arg(long = "corpus")]
    pub corpus: Vec<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// Where the index goes.
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Layers to store vectors at, e.g. 1,3,6: one forward pass yields all of them (default: all
    /// of the model's).
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Store each depth's first K dimensions, renormalised (ESE / Matryoshka truncation): the
    /// vector files, memory and search cost shrink to K/the model's dimensions; queries may ask
    /// for any --dim up to K (default: all of the model's dimensions).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Store each depth's top K principal components (fitted on the corpus, applied to queries
    /// too) instead of its first dimensions: the post-hoc baseline to ESE truncation.
    #[arg(long, value_name = "pca:K")]
    pub reduce: Option<index::PcaSpec>,
    /// Also store, per depth, an approximate index beside the exact flat one: `hnsw` or
    /// `hnsw:M` (M links per node, default 32), searched at the stored size with
    /// `--ef-search`. Default: flat only.
    #[arg(long, value_name = "flat|hnsw[:M]", default_value = "flat")]
    pub ann: index::AnnSpec,
    /// With --verify: the efSearch at which an HNSW graph's recall@10 against flat is measured.
    #[arg(long, requires = "verify", default_value_t = index::DEFAULT_EF_SEARCH)]
    pub ef_search: usize,
    /// The text encoded for each paragraph.
    #[arg(long, default_value = DEFAULT_TEMPLATE)]
    pub template: String,
    /// Documents between checkpoints of an interruptible build.
    #[arg(long, default_value_t = DEFAULT_CHUNK_SIZE)]
    pub chunk_size: usize,
    /// Skip malformed records and bad files (not UTF-8, broken HTML, empty, unreadable; each
    /// named on stderr, counted in the summary) instead of stopping.
    #[arg(long)]
    pub skip_bad: bool,
    /// Start over instead of resuming an interrupted build.
    #[arg(long)]
    pub fresh: bool,
    /// Take each document's vectors from DIR/layer-<depth>.f32 (rows of the stored width,
    /// little-endian f32, in corpus order) instead of encoding it: for scale tests that write
    /// millions of synthetic documents through the real index writer (eval/scale/synthetic.py).
    #[arg(long, value_name = "DIR")]
    pub vectors_from: Option<PathBuf>,
    /// Check the index in --index instead of building one: every file against the manifest's
    /// sizes and checksums, every vector (finite, unit length) and every document (every shard
    /// of a sharded index).
    #[arg(long, conflicts_with_all = ["fresh", "layers", "dim", "reduce", "corpus", "ann"])]
    pub verify: bool,
    /// Build only shard i of n (0-based, e.g. 0/4 to 3/4) of the corpus, into
    /// <index>/shard-<i>-of-<n>/; documents are assigned by a hash of their title.
    #[arg(long, value_name = "i/n", conflicts_with_all = ["verify", "reduce"])]
    pub shard: Option<index::ShardSpec>,
    /// Check the shards in --index (all present, whole, built alike, covering the corpus) and
    /// write its top manifest, which makes the sharded index usable.
    #[arg(long, conflicts_with_all = ["verify", "shard", "fresh", "layers", "dim", "reduce", "corpus"])]
    pub merge: bool,
    /// Add the documents of these files or folders (read as --corpus reads them) to the index
    /// in --index without rebuilding it: only documents whose title it does not serve, or
    /// whose text changed, are encoded; the rest is kept. A new generation is installed.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with_all = ["verify", "merge", "shard", "fresh", "layers", "dim", "reduce", "corpus", "vectors_from"])]
    pub add: Vec<PathBuf>,
    /// Take the document with this title out of the index in --index (repeatable); it never
    /// appears in a search again.
    #[arg(long, value_name = "TITLE", conflicts_with_all = ["verify", "merge", "shard", "fresh", "layers", "dim", "reduce", "corpus", "vectors_from"])]
    pub remove: Vec<String>,
    /// Take out every document that came from this file, or from files under this folder
    /// (repeatable; the path as the documents' source names it).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["verify", "merge", "shard", "fresh", "layers", "dim", "reduce", "corpus", "vectors_from"])]
    pub remove_source: Vec<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: IndexArgs) -> Result<()> {
    if args.verify {
        return run_verify(&args);
    }
    if args.merge {
        return run_merge(&args);
    }
    if !args.add.is_empty() || !args.remove.is_empty() || !args.remove_source.is_empty() {
        return run_update(&args);
    }
    let corpus = if args.corpus.is_empty() {
        args.data.hotpot_files()
    } else {
        args.corpus.clone()
    };
    let options = BuildOptions {
        index_dir: args.index.clone(),
        corpus,
        model_dir: args.encoder.model_dir(),
        encoder: EncoderOptions {
            precision: args
                .encoder
                .precision
                .precision
                .unwrap_or_else(Precision::index_default),
            ..args.encoder.options()
        },
        layers: args.layers.clone().map(|l| l.0),
        dim: args.dim,
        reduce: args.reduce,
        ann: args.ann,
        template: args.template.clone(),
        chunk_size: args.chunk_size,
        skip_bad: args.skip_bad,
        fresh: args.fresh,
        shard: args.shard,
        progress: ProgressMode::for_stderr(),
        vectors_from: args.vectors_from.clone(),
    };
    let summary = index::build(&options)?;
    if args.json {
        return print_json(&summary);
    }
    let reduced = summary.reduce.as_ref().map_or(String::new(), |r| {
        format!(
            " ({} fitted on {} vectors per layer)",
            r.method, r.fitted_on
        )
    });
    if let Some(updated) = &summary.updated {
        print_update(updated);
        return Ok(());
    }
    if summary.up_to_date {
        println!(
            "{} is up to date ({} paragraphs, layers {:?}, dim {}{reduced}); --fresh rebuilds it",
            summary.index_dir.display(),
            summary.documents,
            summary.layers,
            summary.dim
        );
        return Ok(());
    }
    let resumed = if summary.resumed_from > 0 {
        format!(" (resumed after {})", summary.resumed_from)
    } else {
        String::new()
    };
    println!(
        "indexed {} paragraphs{resumed} into {} at layers {:?}, dim {} of {}{reduced}: encoding {:.1} paragraphs/s, {:.1}s in all ({} duplicate titles, {} bad records skipped{})",
        summary.documents,
        summary.index_dir.display(),
        summary.layers,
        summary.dim,
        summary.stored_dim,
        summary.paragraphs_per_second,
        summary.total_seconds,
        summary.duplicates,
        summary.skipped_records,
        file_counts(&summary),
    );
    Ok(())
}

/// "; files: 3 markdown, 2 text; 1 bad file skipped; 4 ignored", or nothing for a build that
/// read one records file as before.
fn file_counts(summary: &index::build::BuildSummary) -> String {
    let only_records = summary.files.len() == 1 && summary.files.get("json") == Some(&1);
    if only_records || summary.files.is_empty() {
        return String::new();
    }
    let kinds: Vec<String> = summary
        .files
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let mut out = format!("; files: {}", kinds.join(", "));
    if summary.skipped_files > 0 {
        let s = if summary.skipped_files == 1 { "" } else { "s" };
        out += &format!("; {} bad file{s} skipped", summary.skipped_files);
    }
    if summary.ignored_files > 0 {
        out += &format!("; {} of no kind read, ignored", summary.ignored_files);
    }
    out
}

fn run_update(args: &IndexArgs) -> Result<()> {
    let options = index::update::UpdateOptions {
        index_dir: args.index.clone(),
        model_dir: args.encoder.model_dir(),
        encoder: args.encoder.options(),
        add: args.add.clone(),
        documents: Vec::new(),
        remove_titles: args.remove.clone(),
        remove_sources: args.remove_source.clone(),
        sync: false,
        skip_bad: args.skip_bad,
        progress: ProgressMode::for_stderr(),
    };
    let summary = index::update::update(&options)?;
    if args.json {
        return print_json(&summary);
    }
    print_update(&summary);
    Ok(())
}

fn print_update(summary: &index::update::UpdateSummary) {
    if summary.up_to_date {
        println!(
            "{} is up to date ({} documents, {} given unchanged); nothing encoded",
            summary.index_dir.display(),
            summary.documents,
            summary.unchanged
        );
        return;
    }
    let compacted = match summary.compacted {
        true => ", compacted".to_string(),
        false if summary.removed_rows > 0 => {
            format!(
                ", {} removed rows kept until compaction",
                summary.removed_rows
            )
        }
        false => String::new(),
    };
    println!(
        "updated {}: {} added, {} changed, {} unchanged, {} removed; {} documents, generation {}{compacted} ({:.1}s encoding, {:.1}s in all)",
        summary.index_dir.display(),
        summary.added,
        summary.changed,
        summary.unchanged,
        summary.removed,
        summary.documents,
        summary.build_id,
        summary.encode_seconds,
        summary.total_seconds,
    );
}

fn run_merge(args: &IndexArgs) -> Result<()> {
    let merged = index::sharded::merge(&args.index)?;
    if args.json {
        return print_json(&merged);
    }
    println!(
        "{}: {} shards checked and merged, {} documents, build {}",
        merged.index_dir.display(),
        merged.shards,
        merged.documents,
        merged.build_id
    );
    Ok(())
}

fn run_verify(args: &IndexArgs) -> Result<()> {
    let verified = index::verify_at(&args.index, args.ef_search)?;
    if args.json {
        return print_json(&verified);
    }
    for recall in &verified.ann_recall {
        println!(
            "{} layer {}: HNSW recall@10 against flat {:.4} at efSearch {} ({} stored vectors as queries)",
            recall.dir, recall.layer, recall.recall_at_10, recall.ef_search, recall.queries
        );
    }
    if verified.checksums {
        println!(
            "{} is whole: build {}, {} documents, {} files match their checksums, every vector and document reads back",
            args.index.display(),
            verified.build_id,
            verified.documents,
            verified.files
        );
    } else {
        println!(
            "{}: {} documents; counts, sizes, vectors and documents check out, but the index predates checksums, so its bytes cannot be verified fully (`rag index --fresh` adds them)",
            args.index.display(),
            verified.documents
        );
    }
    Ok(())
}
