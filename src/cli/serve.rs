//! `rag serve`: the HTTP server, models loaded once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use rag::encoder::Precision;
use rag::generate::DEFAULT_LLM;
use rag::index;
use rag::serve;

use super::flags::{ContextArgs, GeneratorSettingsArgs, OpenIndexArgs, PrecisionArg, StrategyArgs};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[arg(long, env = "RAG_INDEX", default_value = index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Encoder to use; must be the one the index was built with (default: that one).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Arithmetic of the encoder's projections; default: int8 where the CPU has AVX-512 VNNI,
    /// or AVX2 with full-width 256-bit integer multiplies (1.31x f32 on a Zen 3), else f32 (on
    /// a first-generation Zen int8 measured no faster). A server lives on encoding throughput,
    /// and int8 gives up to twice as much with unchanged search recall; `f32` returns embeddings that match the reference to a cosine
    /// of 0.9999 instead of 0.990 (see eval/precision/).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// GGUF generator for POST /ask (default: the default generator, data/models/..., when it
    /// is there, as for `rag ask`).
    #[arg(long, conflicts_with = "no_llm")]
    pub llm: Option<PathBuf>,
    /// Serve search only: load no generator (/ask answers 503).
    #[arg(long)]
    pub no_llm: bool,
    /// How /ask generates.
    #[command(flatten)]
    pub settings: GeneratorSettingsArgs,
    /// How /ask retrieves when a request does not say (default: the best measured).
    #[command(flatten)]
    pub strategy: StrategyArgs,
    /// What /ask's generator reads when a request does not say.
    #[command(flatten)]
    pub context: ContextArgs,
    /// Address to listen on; loopback unless you mean to expose it.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// How long an embedding request waits for others to share its forward pass (ms).
    #[arg(long, default_value_t = 2.0)]
    pub batch_window_ms: f64,
    /// Tokens per batched forward pass.
    #[arg(long, default_value_t = 8192)]
    pub batch_tokens: usize,
    /// Embedding requests waiting before the server answers 503.
    #[arg(long, default_value_t = 256)]
    pub queue: usize,
    /// Tokens of bulk `/v1/embeddings` work per forward pass (at least one text): big requests
    /// are encoded in pieces this size, so the thread that encodes searches shares the cores
    /// with bulk work pass by pass rather than after whole requests.
    #[arg(long, default_value_t = 128)]
    pub chunk_tokens: usize,
    /// Key every route but the page's files and /health wants, as `Authorization: Bearer KEY`
    /// (prefer the variable: a flag shows in `ps`).
    #[arg(long, env = "RAG_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Listen beyond loopback without an API key.
    #[arg(long)]
    pub insecure: bool,
    /// A host name clients use to reach the server, besides its address and localhost
    /// (repeatable); other `Host` headers get 421.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// The one origin (`https://app.example`) whose pages may call the API from a browser;
    /// without it no CORS headers are sent.
    #[arg(long)]
    pub cors_origin: Option<String>,
    /// `rag eval` runs whose sweeps the web page draws heatmaps of (default: eval/runs, when
    /// there is one).
    #[arg(long)]
    pub runs: Option<PathBuf>,
}

impl ServeArgs {
    /// The precision asked for, else the fastest this CPU has.
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or_else(Precision::fastest_available)
    }

    /// The generator to load: `--llm`, else `default` where that file is there, so that a
    /// plain `rag serve` answers like `rag ask`; none with `--no-llm`.
    fn generator(&self, default: &Path) -> Option<PathBuf> {
        if self.no_llm {
            return None;
        }
        if let Some(llm) = &self.llm {
            return Some(llm.clone());
        }
        if default.is_file() {
            return Some(default.to_path_buf());
        }
        eprintln!(
            "note: no generator at {} (scripts/fetch-models.sh llm fetches it), so /ask answers 503; --llm FILE names another",
            default.display()
        );
        None
    }
}

/// The runs folder named with `--runs` (which must exist), else `eval/runs` if there is one.
fn serve_runs_dir(named: Option<PathBuf>) -> Result<Option<PathBuf>> {
    match named {
        Some(dir) if dir.is_dir() => Ok(Some(dir)),
        Some(dir) => anyhow::bail!("--runs {}: no such folder", dir.display()),
        None => Ok(Some(PathBuf::from("eval/runs")).filter(|d| d.is_dir())),
    }
}

pub fn run(args: ServeArgs) -> Result<()> {
    if !(args.batch_window_ms.is_finite() && args.batch_window_ms >= 0.0) {
        anyhow::bail!("--batch-window-ms must be a number of milliseconds, 0 or more");
    }
    let config = serve::ServeConfig {
        batch: serve::BatchOptions {
            window: std::time::Duration::from_secs_f64(args.batch_window_ms / 1000.0),
            max_tokens: args.batch_tokens.max(1),
            queue: args.queue,
            chunk_tokens: args.chunk_tokens.max(1),
        },
        ask: args.context.settings(
            args.strategy.strategy(rag::ask::DEFAULT_STRATEGY)?,
            None,
            None,
        ),
        runs: serve_runs_dir(args.runs.clone())?,
        access: serve::AccessConfig {
            api_key: args.api_key.clone(),
            allowed_hosts: args.allowed_hosts.clone(),
            cors_origin: args.cors_origin.clone(),
        },
        ..Default::default()
    };
    // Refused binds fail first, before any note about the generator.
    serve::access::check_bind(args.addr, &config.access, args.insecure)?;
    let llm = args.generator(Path::new(DEFAULT_LLM));
    let index = OpenIndexArgs {
        precision: PrecisionArg {
            precision: Some(args.precision()),
        },
        index: args.index,
        model: args.model,
    };
    let (settings, strategy) = (args.settings, args.strategy);
    let load = move || {
        let retriever = Arc::new(serve::ReloadingIndex::new(strategy.open(&index)?)?);
        let answerer = match llm {
            Some(path) => Some(Arc::new(serve::RagAnswerer {
                retriever: Arc::clone(&retriever),
                generator: settings.load(&path)?,
                spec: settings.prompt()?,
            }) as Arc<dyn serve::Answerer>),
            None => None,
        };
        Ok(serve::Models {
            retriever,
            answerer,
        })
    };
    serve::run(args.addr, config, args.insecure, load)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::*;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let argv = ["rag", "serve"].iter().chain(flags);
        match Cli::try_parse_from(argv).expect("valid flags").command {
            Command::Serve(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    /// What the kernel says this CPU has, apart from the library's own detection (cpuid): int8
    /// where it lists AVX-512 F, BW and VNNI, or AVX2 and FMA on any CPU but an AMD one before
    /// Zen 2 (family below 23, or 23 below model 48) or a Hygon (family 24), else f32. `None`
    /// off Linux.
    fn fastest_by_the_kernel() -> Option<Precision> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let field = |name: &str| {
            cpuinfo.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_string())
            })
        };
        let flags = field("flags")?;
        let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
        let number = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
        let (family, model) = (number("cpu family")?, number("model")?);
        let split = match field("vendor_id")?.as_str() {
            "AuthenticAMD" => family < 23 || (family == 23 && model < 48),
            "HygonGenuine" => family == 24,
            _ => false,
        };
        let vnni = has("avx512f") && has("avx512bw") && has("avx512_vnni");
        Some(if vnni || (has("avx2") && has("fma") && !split) {
            Precision::Int8
        } else {
            Precision::F32
        })
    }

    #[test]
    fn serve_defaults_to_the_fastest_precision_and_honours_an_explicit_one() {
        match fastest_by_the_kernel() {
            Some(expected) => assert_eq!(serve_args(&[]).precision(), expected),
            None => rag::skip::skip(
                "serve_defaults_to_the_fastest_precision (the default)",
                "no /proc/cpuinfo to tell the CPU's features",
            ),
        }
        assert_eq!(
            serve_args(&["--precision", "f32"]).precision(),
            Precision::F32
        );
        assert_eq!(
            serve_args(&["--precision", "int8"]).precision(),
            Precision::Int8
        );
    }

    #[test]
    fn the_default_generator_answers_unless_told_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("default.gguf");
        // Not there: no generator, and no error (search still serves).
        assert_eq!(serve_args(&[]).generator(&default), None);
        std::fs::write(&default, b"GGUF").unwrap();
        assert_eq!(serve_args(&[]).generator(&default), Some(default.clone()));
        assert_eq!(serve_args(&["--no-llm"]).generator(&default), None);
        assert_eq!(
            serve_args(&["--llm", "other.gguf"]).generator(&default),
            Some(PathBuf::from("other.gguf"))
        );
        let argv = ["rag", "serve", "--llm", "x.gguf", "--no-llm"];
        assert!(Cli::try_parse_from(argv).is_err());
    }
}
