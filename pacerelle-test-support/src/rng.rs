//! The one seeded generator of the test tools (the fuzzer's mutations, the soak's kills and pauses):
//! SplitMix64, small, fast and good enough to pick; the same seed gives the same run.

/// SplitMix64 from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number from 0 to `n - 1` (0 when `n` is 0), of `n`'s type (`usize` for an index, `u64`…).
    pub fn below<N>(&mut self, n: N) -> N
    where
        N: Copy + Default + TryInto<u64> + TryFrom<u64>,
    {
        match n.try_into() {
            Ok(0) | Err(_) => N::default(),
            Ok(n64) => N::try_from(self.next_u64() % n64).unwrap_or_default(),
        }
    }

    /// A number from `low` to `high` included.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low) + 1)
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A random element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers_within_their_bounds() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let n: usize = a.below(13);
            assert_eq!(n, b.below(13usize));
            assert!(n < 13);
            let x = a.between(5, 9);
            assert_eq!(x, b.between(5, 9));
            assert!((5..=9).contains(&x));
        }
        assert_eq!(a.below(0u64), 0);
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
