//! The vector instruction sets the hand-written f32 kernels run on, behind one trait, so that
//! each kernel (the packed GEMM with its epilogues, the tiled attention, exp and GELU) is
//! written once over a vector of `LANES` f32 and instantiated per width: 16 lanes on AVX-512,
//! 8 on AVX2 with FMA (most laptops and many cloud machines have no AVX-512).
//!
//! The trait's implementations are one intrinsic (or a short fixed sequence) per method, so
//! that the kernels' logic (tiles, tails, masks, reductions) can be checked on any machine: the
//! tests also run every kernel through [`portable`], plain arrays of 16 and of 8 lanes, which
//! leaves only the thin AVX-512 implementation unexercised where the CPU lacks it.
//!
//! The methods are `#[inline(always)]` and carry no `target_feature` of their own: they inline
//! into a kernel entry point compiled for the set (`#[target_feature(enable = ..)]`), where the
//! intrinsics inside them inline in turn. Called anywhere else, they are undefined behaviour on
//! a CPU without the set, hence `unsafe`.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(test)]
pub(in crate::encoder) mod portable;
#[cfg(test)]
pub(in crate::encoder) mod probe;
#[cfg(test)]
mod tests;

#[cfg(target_arch = "x86_64")]
pub(in crate::encoder) use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub(in crate::encoder) use avx512::Avx512;

/// Which vector backend a kernel was prepared for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::encoder) enum Isa {
    Avx512,
    Avx2,
    /// [`portable::Portable`] at 16 lanes, shaped like AVX-512's tiles (tests only).
    #[cfg(test)]
    Portable16,
    /// [`portable::Portable`] at 8 lanes, shaped like AVX2's tiles (tests only).
    #[cfg(test)]
    Portable8,
}

impl Isa {
    /// The widest set this CPU has, if any.
    pub(in crate::encoder) fn detect() -> Option<Self> {
        Self::available().into_iter().next()
    }

    /// Every set this CPU has (and `RAG_MAX_ISA` allows), widest first.
    pub(in crate::encoder) fn available() -> Vec<Self> {
        use crate::encoder::cpu::{has, Feature};
        let mut sets = Vec::new();
        if has(Feature::Avx512F) {
            sets.push(Self::Avx512);
        }
        if has(Feature::Avx2Fma) {
            sets.push(Self::Avx2);
        }
        sets
    }

    /// What the kernel tests run: the portable backends at both widths, then every set the
    /// CPU has.
    #[cfg(test)]
    pub(in crate::encoder) fn testable() -> Vec<Self> {
        let mut sets = vec![Self::Portable16, Self::Portable8];
        sets.extend(Self::available());
        sets
    }
}

/// A vector of `LANES` f32 and the operations the kernels need on it.
///
/// # Safety
/// Every method needs the CPU to have the set (see the module's note).
#[allow(clippy::missing_safety_doc)]
pub(in crate::encoder) trait Simd {
    type V: Copy;
    const LANES: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    /// `LANES` floats from `p`, unaligned.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The first `n` lanes from `p` (all of them from `LANES` on), zero in the others; reads
    /// nothing past them, so a row's tail can be loaded at the end of its buffer.
    unsafe fn load_first(p: *const f32, n: usize) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Writes the first `n` lanes only (all of them from `LANES` on).
    unsafe fn store_first(p: *mut f32, n: usize, v: Self::V);
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise maximum; where either is NaN, `b` (as `maxps` does).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise minimum; where either is NaN, `b` (as `minps` does).
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`, one rounding.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `c - a * b`, one rounding.
    unsafe fn fnmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `1 / a` to about 23 bits: the hardware estimate refined by one Newton step.
    unsafe fn recip(a: Self::V) -> Self::V;
    /// Rounded to the nearest integer, ties to even.
    unsafe fn round(a: Self::V) -> Self::V;
    /// `a * 2^n` for integral `n` in -126..=127 (`exp` keeps it there; lanes outside are
    /// garbage that its caller masks off).
    unsafe fn scale_pow2(a: Self::V, n: Self::V) -> Self::V;
    /// `a` where `x > limit`, else zero (NaN `x` too).
    unsafe fn zero_unless_above(a: Self::V, x: Self::V, limit: f32) -> Self::V;
    /// The sum of the lanes (in the backend's own order).
    unsafe fn reduce_add(a: Self::V) -> f32;
    /// The largest lane (of non-NaN lanes).
    unsafe fn reduce_max(a: Self::V) -> f32;
    /// Transposes the `LANES x LANES` block `rows` (exactly `LANES` vectors) in registers:
    /// lane `j` of row `i` becomes lane `i` of row `j`.
    unsafe fn transpose(rows: &mut [Self::V]);
}
