//! What happens to a tile's sums `x W^T` on their way out, while they are still in L1: the
//! bias, then GELU or the residual add where the layer wants them, saving a pass over memory
//! for each. Written once over the vector width, for every kernel family's tiles.

use super::{kernels, Tile};
#[cfg(test)]
use crate::encoder::simd::portable::Portable;
#[cfg(target_arch = "x86_64")]
use crate::encoder::simd::{Avx2, Avx512};
use crate::encoder::simd::{Isa, Simd};

/// What happens to `x W^T + b` before it is stored.
#[derive(Clone, Copy)]
pub(super) enum Epilogue<'a> {
    Bias,
    BiasGelu,
    /// Adds the `[rows, out]` residual stream (the layer's input).
    BiasResidual(&'a [f32]),
}

impl<S> Tile<S> {
    /// Asks the caches for the residual rows that finishing the tile's first `rows` rows will
    /// add (`at` as for [`Self::finish`]), before its sums are computed. They lie in the layer's
    /// input, megabytes back and long out of cache, and the tile's own loads never touch them:
    /// read only at the end, their misses took about a third of the epilogues' time on a Zen 5
    /// (`perf record`, eval/encode/README.md).
    ///
    /// # Safety
    /// As for [`Self::finish`]; prefetches never fault, but the addresses are computed with
    /// `add`.
    #[cfg(target_arch = "x86_64")]
    pub(super) unsafe fn prefetch_residual(&self, rows: usize, epilogue: Epilogue, at: usize) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64 / std::mem::size_of::<f32>();
        if let Epilogue::BiasResidual(residual) = epilogue {
            for r in 0..rows {
                let row = residual.as_ptr().add(at + r * self.out_dim);
                for first in (0..self.cols).step_by(LINE) {
                    _mm_prefetch::<_MM_HINT_T0>(row.add(first).cast());
                }
            }
        }
    }

    /// Finishes the first `rows` rows' sums on `isa`: adds the bias (`bias` is this panel's,
    /// padded to whole vectors), then applies `epilogue`; `at` is the tile's offset in
    /// output-shaped arrays (the residual).
    ///
    /// # Safety
    /// The CPU has `isa`; the tile's output rows hold `cols` columns and so does the residual.
    pub(super) unsafe fn finish(
        &self,
        isa: Isa,
        rows: usize,
        bias: *const f32,
        epilogue: Epilogue,
        at: usize,
    ) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => self.finish_avx512(rows, bias, epilogue, at),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => self.finish_avx2(rows, bias, epilogue, at),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx512 | Isa::Avx2 => unreachable!("no x86 set is detected elsewhere"),
            #[cfg(test)]
            Isa::Portable16 => self.finish_on::<Portable<16>>(rows, bias, epilogue, at),
            #[cfg(test)]
            Isa::Portable8 => self.finish_on::<Portable<8>>(rows, bias, epilogue, at),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn finish_avx512(&self, rows: usize, bias: *const f32, epilogue: Epilogue, at: usize) {
        self.finish_on::<Avx512>(rows, bias, epilogue, at)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn finish_avx2(&self, rows: usize, bias: *const f32, epilogue: Epilogue, at: usize) {
        self.finish_on::<Avx2>(rows, bias, epilogue, at)
    }

    /// [`Self::finish`] on `V`, a vector at a time, the last one of a row masked to the
    /// panel's valid columns.
    #[inline(always)]
    unsafe fn finish_on<V: Simd>(
        &self,
        rows: usize,
        bias: *const f32,
        epilogue: Epilogue,
        at: usize,
    ) {
        for r in 0..rows {
            for first in (0..self.cols).step_by(V::LANES) {
                let live = self.cols - first;
                let offset = r * self.out_dim + first;
                let out = self.out.add(offset);
                let y = V::add(V::load_first(out, live), V::load(bias.add(first)));
                let y = match epilogue {
                    Epilogue::Bias => y,
                    Epilogue::BiasGelu => kernels::gelu_vector::<V>(y),
                    Epilogue::BiasResidual(residual) => {
                        let skip = residual.as_ptr().add(at + offset);
                        V::add(y, V::load_first(skip, live))
                    }
                };
                V::store_first(out, live, y);
            }
        }
    }
}
