//! The seeded random numbers of training and tests.

/// SplitMix64: small, fast and seedable, so that shuffles and dropout masks repeat exactly for
/// a given seed (candle's CPU generator cannot be seeded), and its state fits in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is negligible for the sizes shuffled here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_repeats_for_a_seed_and_shuffles_into_a_permutation() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut items: Vec<usize> = (0..50).collect();
        a.shuffle(&mut items);
        let mut again: Vec<usize> = (0..50).collect();
        b.shuffle(&mut again);
        assert_eq!(items, again);
        assert_ne!(items, (0..50).collect::<Vec<_>>());
        items.sort();
        assert_eq!(items, (0..50).collect::<Vec<_>>());
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
