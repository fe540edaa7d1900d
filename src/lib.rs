//! `rag`: retrieval-augmented question answering on Espresso Sentence Embeddings (ESE).
//!
//! Data flows one way: [`corpus`] (HotpotQA paragraphs) -> [`encoder`] (a BERT run to a chosen
//! depth, truncated to a chosen size) -> [`index`] (faiss, tantivy, document store) ->
//! [`retrieve`] (dense, BM25, their fusions, one hop or two) -> [`generate`] (a GGUF model
//! through llama.cpp) -> [`ask`] (the pipeline from a question to an answer: retrieval, the
//! sentences the generator reads, the prompt, generation) -> [`eval`] (recall and exact match
//! on HotpotQA; STS) and [`serve`] (the same pipeline over HTTP, with the web page). [`train`]
//! writes the encoders [`encoder`] loads; its one import the other way is eval's: an STS run
//! appends its scores to the trained model's card (`train::append_card_section`). [`bench`]
//! measures. Shared by all: [`files`] (checksums, crash-safe writes), [`progress`], [`rng`],
//! [`runtime`] (allocator and BLAS set-up), [`terminal`], [`vectors`] and [`words`] (where text is
//! cut into words, and why the crate's four word normalisers differ); [`skip`] is the tests'
//! loud skip.
//! The `rag` binary's flags live in `src/cli/`, outside the library, which builds without clap
//! when the `cli` feature is off.

pub mod ask;
pub mod bench;
pub mod corpus;
pub mod encoder;
pub mod eval;
pub mod files;
pub mod generate;
pub mod index;
pub mod progress;
pub mod retrieve;
pub mod rng;
pub mod runtime;
pub mod serve;
#[doc(hidden)]
pub mod skip;
pub mod terminal;
pub mod train;
pub mod vectors;
pub mod words;
