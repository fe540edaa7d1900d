//! `rag`: retrieval-augmented question answering on Espresso Sentence Embeddings (ESE).
//!
//! Data flows one way: [`corpus`] (HotpotQA paragraphs) -> [`encoder`] (a BERT run to a chosen
//! depth, truncated to a chosen size) -> [`index`] (faiss, tantivy, document store) ->
//! [`retrieve`] (dense, BM25, their fusions, one hop or two) -> [`generate`] (a GGUF model
//! through llama.cpp) -> [`ask`] (the pipeline from a question to an answer: retrieval, the
//! sentences the generator reads, the prompt, generation) -> [`eval`] (recall, exact match). [`cli`] parses flags and calls into these; [`bench`]
//! measures them.

pub mod ask;
pub mod bench;
pub mod cli;
pub mod corpus;
pub mod encoder;
pub mod eval;
pub mod generate;
pub mod index;
pub mod progress;
pub mod retrieve;
pub mod serve;
pub mod train;
pub mod util;
pub mod vectors;
