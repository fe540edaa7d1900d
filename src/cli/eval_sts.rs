//! `rag eval-sts`: STS Spearman per layer x size.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use rag::encoder::{Encoder, EncoderOptions};
use rag::eval::sts::{self, Reduction, StsDataset, StsOptions};
use rag::progress::ProgressMode;

use super::flags::{DataArgs, EncoderArgs, NumberList};
use super::print_json;

#[derive(Args, Debug)]
pub struct EvalStsArgs {
    #[command(flatten)]
    pub encoder: EncoderArgs,
    #[command(flatten)]
    pub data: DataArgs,
    /// Layers to evaluate at (default: every layer of the model).
    #[arg(long)]
    pub layers: Option<NumberList>,
    /// Dimensions to evaluate at (default: 32, 64, 128, ... below the model's, and all of them).
    #[arg(long)]
    pub dims: Option<NumberList>,
    /// Datasets to evaluate.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = StsDataset::ALL)]
    pub datasets: Vec<StsDataset>,
    /// Add rows for a post-hoc PCA per layer (fitted on the evaluated sentences) beside first-k
    /// truncation.
    #[arg(long, value_enum)]
    pub reduce: Option<Reduction>,
    /// Where summary.md, summary.json and heatmap.png go (default: eval/sts/<model>/, with
    /// --reduce pca eval/sts/<model>-pca/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: EvalStsArgs) -> Result<()> {
    let layers = args.layers.map(|l| l.0);
    let encoder = Encoder::load(
        &args.encoder.model_dir(),
        &EncoderOptions {
            // Layers deeper than the deepest asked for are never loaded.
            max_layers: layers.as_ref().and_then(|l| l.last().copied()),
            ..args.encoder.options()
        },
    )?;
    let pca = args.reduce == Some(Reduction::Pca);
    let report = sts::evaluate(
        &encoder,
        &StsOptions {
            data_dir: args.data.data_dir.clone(),
            datasets: args.datasets,
            layers,
            dims: args.dims.map(|d| d.0),
            pca,
            progress: ProgressMode::for_stderr(),
        },
    )?;
    let out = args.out.unwrap_or_else(|| {
        let suffix = if pca { "-pca" } else { "" };
        Path::new("eval/sts").join(format!("{}{suffix}", report.model))
    });
    report.write(&out)?;
    let line = format!("{} -> {}/", report.summary_line(), out.display());
    if args.json {
        eprintln!("{line}");
        return print_json(&report);
    }
    print!("{}", report.markdown());
    println!("{line}");
    Ok(())
}
