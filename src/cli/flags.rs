//! Flag groups several commands share, each turned into the library's options in one place.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use rag::ask::context::SentenceWeights;
use rag::ask::AskSettings;
use rag::encoder::{EncoderOptions, Pooling, Precision};
use rag::generate::{
    Generator, GeneratorOptions, PromptSpec, PromptStyle, DEFAULT_LLM, DEFAULT_MAX_TOKENS,
    DEFAULT_YES_NO_BIAS,
};
use rag::retrieve::hops::HopQuery;
use rag::retrieve::{Mode, Retriever, Strategy, Tuning};

pub const DEFAULT_MODEL_DIR: &str = "data/models/all-MiniLM-L6-v2";
pub const DEFAULT_DATA_DIR: &str = "../shared/data";
const HOTPOT_FILES: [&str; 2] = [
    "hotpotqa/hotpot_dev_distractor_sample.json",
    "hotpotqa/hotpot_dev_fullwiki_sample.json",
];

#[derive(Args, Debug, Clone)]
pub struct DataArgs {
    /// Where the shared datasets live (hotpotqa/, sts/, nli/).
    #[arg(long, env = "RAG_DATA", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

impl DataArgs {
    pub fn hotpot_files(&self) -> Vec<PathBuf> {
        HOTPOT_FILES.iter().map(|f| self.data_dir.join(f)).collect()
    }

    pub fn distractor_questions(&self) -> PathBuf {
        self.data_dir.join(HOTPOT_FILES[0])
    }
}

#[derive(Args, Debug, Clone)]
pub struct EncoderArgs {
    /// A BERT checkpoint directory in the Hugging Face layout (default:
    /// data/models/all-MiniLM-L6-v2; for `rag eval`, the index's own model).
    #[arg(long, env = "RAG_MODEL")]
    pub model: Option<PathBuf>,
    /// Pooling (default: what 1_Pooling/config.json says, else CLS).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    /// Maximum tokens per text (default: the checkpoint's max_seq_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Text put before every question, e.g. bge's "Represent this sentence for searching relevant passages: ".
    #[arg(long)]
    pub query_prefix: Option<String>,
    /// Most texts per forward pass.
    #[arg(long, default_value_t = rag::encoder::DEFAULT_BATCH_SIZE)]
    pub batch_size: usize,
    #[command(flatten)]
    pub precision: PrecisionArg,
}

/// The index a question is asked of, and the encoder that reads it.
#[derive(Args, Debug, Clone)]
pub struct OpenIndexArgs {
    #[arg(long, env = "RAG_INDEX", default_value = rag::index::DEFAULT_INDEX_DIR)]
    pub index: PathBuf,
    /// Encoder to use; must be the one the index was built with (default: that one).
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub precision: PrecisionArg,
}

#[derive(Args, Debug, Clone, Copy)]
pub struct PrecisionArg {
    /// Arithmetic of the encoder's projections: `bf16` (AVX-512 BF16; f32 where the CPU lacks
    /// it) and `int8` (8-bit integers, AVX-512 VNNI, else AVX2) encode faster, with vectors a little off
    /// the exact `f32` ones (see eval/precision/). Default: f32; for `index`, bf16 where the
    /// CPU has AMX tiles.
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
}

impl PrecisionArg {
    /// The precision asked for, else f32.
    pub fn get(self) -> Precision {
        self.precision.unwrap_or_default()
    }
}

impl EncoderArgs {
    /// The model asked for, else the default one.
    pub fn model_dir(&self) -> PathBuf {
        self.model
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_MODEL_DIR))
    }

    pub fn options(&self) -> EncoderOptions {
        EncoderOptions {
            pooling: self.pooling,
            max_length: self.max_length,
            query_prefix: self.query_prefix.clone(),
            max_layers: None,
            batch_size: Some(self.batch_size),
            precision: self.precision.get(),
        }
    }
}

/// Which of the index's layers and dimensions a question is searched at.
#[derive(Args, Debug, Clone, Copy)]
pub struct CellArgs {
    /// Layers to query at: the encoder's first N (default: the most stored).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Dimensions to query at: the embedding's first N (default: the index's).
    #[arg(long)]
    pub dim: Option<usize>,
}

/// How questions are searched. Each command has its own defaults (plain dense for `search`, the
/// best measured for `ask`, `eval` and `serve`).
#[derive(Args, Debug, Clone)]
pub struct StrategyArgs {
    /// dense: ESE vectors; bm25: words; hybrid: reciprocal-rank fusion of both; fusion: a
    /// weighted sum of both's scaled scores.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// 2 searches again with the question joined to each of the first hop's best paragraphs
    /// and merges both hops (for questions that need two paragraphs).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub hops: Option<u8>,
    /// Dense weight of `--mode fusion`, between 0 (BM25 alone) and 1 (dense alone).
    #[arg(long, default_value_t = Tuning::default().fusion_weight)]
    pub fusion_weight: f32,
    /// With --hops 2: first-hop paragraphs that each seed a second-hop search.
    #[arg(long, default_value_t = Tuning::default().hop_beam)]
    pub hop_beam: usize,
    /// With --hops 2: how much second-hop evidence counts beside first-hop evidence.
    #[arg(long, default_value_t = Tuning::default().hop_weight)]
    pub hop_weight: f32,
    /// With --hops 2: how much a first-hop paragraph naming another's title counts for that
    /// other (Wikipedia-style links); 0 turns links off.
    #[arg(long, default_value_t = Tuning::default().link_weight)]
    pub link_weight: f32,
    /// BM25 reads the question (and second-hop queries) as tantivy query syntax: `+word`
    /// required, `-word` excluded, `"a phrase"`, `title:word`, `word~1`. Without it a question
    /// is plain words.
    #[arg(long)]
    pub bm25_syntax: bool,
    /// With an index built with `--ann hnsw`: candidates its graph visits per dense search
    /// (more is slower and nearer exact; default 64); 0 searches exactly (flat) instead, so
    /// one index gives both. Unused by a flat index, which is exact.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub ef_search: Option<u32>,
    /// With --hops 2: what of each seed paragraph the second hop's BM25 query holds beside the
    /// question: `full`, `sentence` (title and first sentence), `title`, or `words:N` (title
    /// and first N words); `seed-title`: the title alone, without the question. The dense
    /// query always holds the question and the whole paragraph.
    #[arg(long, value_name = "full|sentence|title|seed-title|words:N", default_value_t = Tuning::default().hop_query)]
    pub hop_query: HopQuery,
}

impl StrategyArgs {
    /// The strategy asked for, `default` filling in what was not.
    pub fn strategy(&self, default: Strategy) -> Result<Strategy> {
        Strategy::new(
            self.mode.unwrap_or(default.mode),
            self.hops.unwrap_or(default.hops),
        )
    }

    pub fn tuning(&self) -> Tuning {
        Tuning {
            fusion_weight: self.fusion_weight,
            hop_beam: self.hop_beam,
            hop_weight: self.hop_weight,
            link_weight: self.link_weight,
            bm25_syntax: self.bm25_syntax,
            ef_search: self.ef_search.map(|ef| ef as usize),
            hop_query: self.hop_query,
        }
    }

    /// The retriever of `index`, tuned by these flags.
    pub fn open(&self, index: &OpenIndexArgs) -> Result<Retriever> {
        Retriever::open(&index.index, index.model.as_deref(), index.precision.get())?
            .with_tuning(self.tuning())
    }
}

/// What the generator reads.
#[derive(Args, Debug, Clone)]
pub struct ContextArgs {
    /// Paragraphs retrieved; the context is made from them.
    #[arg(long, default_value_t = rag::ask::DEFAULT_TOP_K)]
    pub top_k: usize,
    /// Token budget (the generator's tokens) for the retrieved paragraphs' best sentences;
    /// 0 puts the paragraphs in whole.
    #[arg(long, default_value_t = rag::ask::DEFAULT_CONTEXT_TOKENS)]
    pub context_tokens: usize,
    /// How sentences are scored for the context: weights of the encoder's cosine to the
    /// question, the share of the question's words held, 1/rank of the paragraph, opening the
    /// paragraph, and being in a paragraph whose title a kept sentence names.
    #[arg(long, value_name = "DENSE,LEXICAL,RANK,FIRST,LINK", default_value_t = SentenceWeights::default())]
    pub sentence_weights: SentenceWeights,
    /// The best-ranked paragraphs that each get their best sentence before the others are
    /// chosen by score (0: by score alone, after the paragraphs the question names).
    #[arg(long, default_value_t = rag::ask::DEFAULT_CONTEXT_FLOOR)]
    pub context_floor: usize,
    /// An answer found in none of the prompt's documents is given again from the best
    /// sentences within this budget (0, or one not above --context-tokens: never).
    #[arg(long, default_value_t = rag::ask::DEFAULT_WIDEN_TOKENS)]
    pub widen_tokens: usize,
}

#[derive(Args, Debug, Clone)]
pub struct GeneratorArgs {
    /// A GGUF model (`scripts/fetch-models.sh llm-small` fetches a faster 0.5B one).
    #[arg(long, env = "RAG_LLM", default_value = DEFAULT_LLM)]
    pub llm: PathBuf,
    #[command(flatten)]
    pub settings: GeneratorSettingsArgs,
}

/// How answers are generated, whichever GGUF model generates them ([`GeneratorArgs`] adds
/// which one; `rag serve` picks its model apart).
#[derive(Args, Debug, Clone)]
pub struct GeneratorSettingsArgs {
    /// Most tokens in an answer.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: usize,
    /// `chat`: instruction and paragraphs in the system turn, question in the user turn;
    /// `paper`: the ESE paper's prompt as one user turn (default: chat, paper with --prompt-file).
    #[arg(long, value_enum)]
    pub prompt_style: Option<PromptStyle>,
    /// A prompt with {context} and {question} replacing the paper's; with `--prompt-style
    /// chat`, the system instruction the documents follow.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// Context window in tokens (default: 4096, at most what the model was trained on).
    #[arg(long)]
    pub ctx_size: Option<u32>,
    /// Generation threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Show llama.cpp's own log.
    #[arg(long)]
    pub verbose: bool,
    /// Evaluate every prompt whole instead of reusing the opening it shares with the previous
    /// one (the same answers, slower).
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// An answer opening with yes or no says "yes" only if the model's yes-token beats its
    /// no-token by more than this many logits (0: plain greedy decoding).
    #[arg(long, default_value_t = DEFAULT_YES_NO_BIAS, allow_negative_numbers = true)]
    pub yes_no_bias: f32,
    /// An answer naming one of the two options a question ends with ("..., A or B?") is the
    /// first option only if the model's log-probability of it beats the second's by more than
    /// this, and the second otherwise; `off` keeps the greedy answer (measured no better on
    /// the fullwiki questions: eval/answers/README.md).
    #[arg(long, default_value_t = OptionBias(None), allow_negative_numbers = true)]
    pub option_bias: OptionBias,
    /// `true`: an answer naming one of the two options a question ends with is decided after
    /// the model has written the documents' facts about them (up to 64 more generated tokens
    /// for such answers), by the options' log-probabilities then (`--option-bias`, or 0 when
    /// off, favouring the first); `false`: as `--option-bias` says.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub option_facts: bool,
    /// `true` (default): a bare year answering a question that opens with "when" or asks for a
    /// date becomes the full date the documents give for that year, where they give exactly
    /// one; `false`: the answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub full_dates: bool,
    /// `true` (default: on the 48 fullwiki questions asking for the earlier or later of two, 5
    /// answers became right and 2 wrong, eval/answers/README.md): a question choosing the
    /// earlier or later of two documents of the prompt by their titles ("Who was born first, A
    /// or B?", "Between A and B, which is older?"), answered with a name of one of them, is
    /// answered with the title whose document's text gives the earlier (or later) first year;
    /// `false`: the answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub option_dates: bool,
    /// `true` (default: on the 20 fullwiki questions asking which of two has more or fewer of
    /// something, 3 answers became right and none wrong, eval/answers/README.md): a question
    /// choosing whichever of two documents of the prompt it names by their titles has more (or
    /// fewer) of a thing ("Which has more species, A or B?", "Which opera has more acts, A or
    /// B?"), answered with a name of one or both of them or a bare number, is answered with the title
    /// whose document gives the larger (smaller) first count of it ("about 15 species", "in
    /// five acts", "the only species" for one); `false`: the answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub option_counts: bool,
    /// `true` (default: on the 4 fullwiki questions comparing two by height or population, 1
    /// answer became right and none wrong, eval/answers/README.md): a question comparing two documents of the prompt that
    /// it names by their titles by height or population, as a choice ("Which is taller, A or
    /// B?", "Which town has a greater population, A or B?", answered with a name of one or both)
    /// or with "than" ("Is A taller than B?", answered yes or no), is answered from the first
    /// height (feet or metres) or population each document gives; `false`: the answer as
    /// generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub option_measures: bool,
    /// `true` (default: on the 51 fullwiki yes/no questions, 1 answer became right and none
    /// wrong, eval/answers/README.md): "yes" to whether two documents of the prompt that the
    /// question names by their titles are (both) in or from a place ("Are A and B both in
    /// Florida?") becomes "no" where one of the two documents never mentions the place, by its
    /// name or its people's ("Portuguese", "American"); a "no" is never changed; `false`: the
    /// answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub shared_place: bool,
    /// `true` (default: on the 240 fullwiki tuning questions and the 30 asking for a count or
    /// an order, 5 answers changed, 2 to right and none to wrong, eval/answers/README.md): a
    /// bare number answering a question ("8", "1st") that the prompt's documents never write
    /// in digits but write as exactly one number word, its cardinal or its ordinal ("eight
    /// legs", "the first of three films"), becomes that word (only a cardinal where the
    /// question asks how many); `false`: the answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub number_words: bool,
    /// `true` (default: on the 41 fullwiki questions answered so, 2 answers became right and
    /// none wrong, eval/answers/README.md): an answer that is
    /// nothing but a phrase of its question, where the question offers no choice ("What was the
    /// debut album by Weezer ...?" -> "Weezer"), is generated again with its first word
    /// forbidden, and the new answer kept unless it is a yes, a no or an echo too; `false`: the
    /// answer as generated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub answer_again: bool,
    /// `true`: every answer token is the most likely one that keeps the answer a span of the
    /// prompt's text (case aside) or a yes or a no; `false` (default: measured no better on the
    /// fullwiki questions, eval/answers/README.md): plain greedy decoding.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub extractive: bool,
    /// `true` (default): an answer opening with yes or no is decided after the model has written
    /// the documents' facts about the question (up to 64 more generated tokens for such
    /// answers), `--yes-no-bias` then applying to the margin read after them; `false`: by the
    /// first token's margin (whose fullwiki-chosen bias was 2.2).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub yes_no_facts: bool,
    /// Record, for each answer opening with yes or no, the yes/no margin of the question asked
    /// with no documents (`eval/answers/tune.sh yes-no` reads it; one more short prompt
    /// evaluation per such answer).
    #[arg(long)]
    pub yes_no_prior: bool,
}

/// `--option-bias`: a finite number, or `off`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionBias(pub Option<f32>);

impl std::fmt::Display for OptionBias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(bias) => write!(f, "{bias}"),
            None => f.write_str("off"),
        }
    }
}

impl std::str::FromStr for OptionBias {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "off" {
            return Ok(Self(None));
        }
        match s.parse::<f32>() {
            Ok(bias) if bias.is_finite() => Ok(Self(Some(bias))),
            _ => Err(format!("'{s}' is neither a finite number nor 'off'")),
        }
    }
}

impl GeneratorSettingsArgs {
    pub fn prompt(&self) -> Result<PromptSpec> {
        PromptSpec::from_flags(self.prompt_style, self.prompt_file.as_deref())
    }

    pub fn load(&self, llm: &Path) -> Result<Generator> {
        Generator::load(
            llm,
            &GeneratorOptions {
                max_tokens: self.max_tokens,
                ctx_size: self.ctx_size,
                threads: self.threads,
                verbose: self.verbose,
                reuse_prefix: !self.no_prefix_cache,
                yes_no_bias: self.yes_no_bias,
                option_bias: self.option_bias.0,
                option_facts: self.option_facts,
                full_dates: self.full_dates,
                option_dates: self.option_dates,
                option_counts: self.option_counts,
                option_measures: self.option_measures,
                shared_place: self.shared_place,
                number_words: self.number_words,
                answer_again: self.answer_again,
                extractive: self.extractive,
                yes_no_facts: self.yes_no_facts,
                yes_no_prior: self.yes_no_prior,
            },
        )
    }
}

impl GeneratorArgs {
    pub fn prompt(&self) -> Result<PromptSpec> {
        self.settings.prompt()
    }

    pub fn load(&self) -> Result<Generator> {
        self.settings.load(&self.llm)
    }
}

impl ContextArgs {
    pub fn settings(
        &self,
        strategy: Strategy,
        layers: Option<usize>,
        dim: Option<usize>,
    ) -> AskSettings {
        AskSettings {
            strategy,
            layers,
            dim,
            top_k: self.top_k,
            context_tokens: self.context_tokens,
            weights: self.sentence_weights,
            context_floor: self.context_floor,
            widen_tokens: self.widen_tokens,
        }
    }
}

/// A comma-separated list of positive numbers from the command line, sorted and distinct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberList(pub Vec<usize>);

impl std::str::FromStr for NumberList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_list(s).map(NumberList)
    }
}

/// Parses "1,3,6" into sorted, distinct positive numbers.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut values = s
        .split(',')
        .map(|part| {
            part.trim()
                .parse::<usize>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("'{part}' is not a positive number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    values.sort();
    values.dedup();
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_list_sorts_dedups_and_rejects_zero() {
        assert_eq!(parse_list("6, 1,3,6").unwrap(), vec![1, 3, 6]);
        assert!(parse_list("0,3").is_err());
        assert!(parse_list("a").is_err());
    }

    #[test]
    fn option_bias_is_a_finite_number_or_off() {
        let parse = |s: &str| s.parse::<OptionBias>();
        assert_eq!(parse("-1.5"), Ok(OptionBias(Some(-1.5))));
        assert_eq!(parse("off"), Ok(OptionBias(None)));
        assert!(parse("inf").is_err() && parse("NaN").is_err() && parse("").is_err());
        for bias in [OptionBias(None), OptionBias(Some(0.8))] {
            assert_eq!(parse(&bias.to_string()), Ok(bias));
        }
    }
}
