//! The jobs an encoding thread holds, and what its next forward pass takes of them.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{BatchOptions, Job, Reply};
use crate::serve::metrics::Metrics;

/// A bulk job being encoded piece by piece: its rows so far.
pub(super) struct Bulk {
    pub(super) job: Job,
    /// The first text not yet encoded.
    pub(super) next: usize,
    pub(super) data: Vec<f32>,
    pub(super) cols: usize,
}

/// The jobs the encoding thread holds, taken off the channel.
#[derive(Default)]
pub(super) struct Lanes {
    pub(super) searches: VecDeque<Job>,
    pub(super) bulk: VecDeque<Bulk>,
}

/// What one forward pass encodes: whole searches, then pieces (texts `range` of the `index`-th
/// bulk job).
pub(super) struct Pass {
    pub(super) searches: Vec<Job>,
    pub(super) pieces: Vec<(usize, Range<usize>)>,
}

impl Lanes {
    pub(super) fn add(&mut self, job: Job) {
        match job.reply {
            Reply::Search(..) => self.searches.push_back(job),
            Reply::Vectors(_) => self.bulk.push_back(Bulk {
                job,
                next: 0,
                data: Vec::new(),
                cols: 0,
            }),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.searches.is_empty() && self.bulk.is_empty()
    }

    pub(super) fn search_tokens(&self) -> usize {
        self.searches.iter().map(|j| j.tokens[0]).sum()
    }

    pub(super) fn bulk_tokens(&self) -> usize {
        self.bulk
            .iter()
            .map(|b| b.job.tokens[b.next..].iter().sum::<usize>())
            .sum()
    }

    /// Forgets the jobs whose clients gave up: they cost nothing more.
    pub(super) fn drop_abandoned(&mut self, metrics: &Metrics) {
        let before = self.searches.len() + self.bulk.len();
        self.searches.retain(|j| !j.reply.is_closed());
        self.bulk.retain(|b| !b.job.reply.is_closed());
        let dropped = before - self.searches.len() - self.bulk.len();
        metrics.embed_queue.fetch_sub(dropped, Ordering::Relaxed);
    }

    /// The next pass: every search (within `max_tokens`), then bulk texts within
    /// `chunk_tokens` (at least one), all for the encoder of the first job. (Each encoding
    /// thread holds one kind of job, so a pass is searches or a bulk piece.)
    pub(super) fn next_pass(
        &mut self,
        options: &BatchOptions,
    ) -> Option<(Arc<crate::encoder::Encoder>, Pass)> {
        let first = match (self.searches.front(), self.bulk.front()) {
            (Some(job), _) | (None, Some(Bulk { job, .. })) => job,
            (None, None) => return None,
        };
        let encoder = Arc::clone(&first.retriever.encoder);
        let mut tokens = 0;
        let mut searches = Vec::new();
        while let Some(job) = self.searches.front() {
            if !Arc::ptr_eq(&job.retriever.encoder, &encoder)
                || (!searches.is_empty() && tokens + job.tokens[0] > options.max_tokens)
            {
                break;
            }
            tokens += job.tokens[0];
            searches.extend(self.searches.pop_front());
        }
        let mut bulk_tokens = 0;
        let mut pieces = Vec::new();
        'jobs: for (index, bulk) in self.bulk.iter().enumerate() {
            if !Arc::ptr_eq(&bulk.job.retriever.encoder, &encoder) {
                break;
            }
            let start = bulk.next;
            let mut end = start;
            for &t in &bulk.job.tokens[start..] {
                let fits = bulk_tokens + t <= options.chunk_tokens
                    && tokens + bulk_tokens + t <= options.max_tokens;
                if bulk_tokens > 0 && !fits {
                    break;
                }
                bulk_tokens += t;
                end += 1;
            }
            pieces.push((index, start..end));
            if end < bulk.job.texts.len() {
                break 'jobs;
            }
        }
        Some((encoder, Pass { searches, pieces }))
    }
}
