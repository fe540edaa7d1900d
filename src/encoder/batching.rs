//! Batching texts for the encoder: sequences grouped by length so that little compute goes to
//! padding, and each group padded into the model's input tensors.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

/// Padded id, type and mask tensors for one batch.
pub struct BatchInputs {
    pub input_ids: Tensor,
    pub token_type_ids: Tensor,
    pub attention_mask: Tensor,
}

impl BatchInputs {
    pub fn new<'a>(
        sequences: impl Iterator<Item = &'a [u32]> + Clone,
        device: &Device,
    ) -> Result<Self> {
        let rows = sequences.clone().count();
        let width = sequences
            .clone()
            .map(<[u32]>::len)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut input_ids = vec![0u32; rows * width];
        let mut mask = vec![0u32; rows * width];
        for (row, seq) in sequences.enumerate() {
            input_ids[row * width..row * width + seq.len()].copy_from_slice(seq);
            mask[row * width..row * width + seq.len()].fill(1);
        }
        Ok(Self {
            input_ids: Tensor::from_vec(input_ids, (rows, width), device)?,
            token_type_ids: Tensor::zeros((rows, width), DType::U32, device)?,
            attention_mask: Tensor::from_vec(mask, (rows, width), device)?,
        })
    }
}

/// Groups sequence indices into batches of similar length (longest first), each with at most
/// `max_sequences` members and at most `max_tokens` padded tokens, so little compute is spent on
/// padding.
pub fn length_batches(
    ids: &[Vec<u32>],
    max_sequences: usize,
    max_tokens: usize,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut width = 0;
    for i in order {
        let len = ids[i].len().max(1);
        let new_width = width.max(len);
        if !current.is_empty()
            && (current.len() == max_sequences || new_width * (current.len() + 1) > max_tokens)
        {
            batches.push(std::mem::take(&mut current));
            width = len;
        } else {
            width = new_width;
        }
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_batches_cover_every_sequence_once_within_limits() {
        let ids: Vec<Vec<u32>> = [5, 1, 9, 3, 9, 2, 7, 4]
            .iter()
            .map(|&n| vec![1; n])
            .collect();
        let batches = length_batches(&ids, 3, 20);
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..ids.len()).collect::<Vec<_>>());
        for batch in &batches {
            assert!(batch.len() <= 3);
            let width = batch.iter().map(|&i| ids[i].len()).max().unwrap();
            assert!(
                width * batch.len() <= 20,
                "batch {batch:?} exceeds the token budget"
            );
        }
        // Longest first: the first batch holds the two 9-token sequences.
        assert_eq!(ids[batches[0][0]].len(), 9);
    }
}
