//! The approximations the kernels are built on: `exp`, `erf` and the exact GELU as branch-free
//! polynomials that the compiler vectorises, where libm's scalar calls do not. They are
//! accurate to a few float ulps of the exact functions (tested below), far inside what the
//! reference-vector tests allow.

/// Where `exp` stops being a normal f32: below it the approximations return exactly zero.
const EXP_MIN: f32 = -87.3;
/// ln 2 split in two so that x - n*ln2 stays exact.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Taylor coefficients of `exp(r)` for r^6 down to r^2 (those of r and 1 are 1).
const EXP_POLY: [f32; 5] = [
    0.001_388_889,
    0.008_333_334,
    0.041_666_668,
    0.166_666_67,
    0.5,
];

/// `exp(x)` for f32 by range reduction to `r` in [-ln2/2, ln2/2] and a degree-6 polynomial.
#[inline(always)]
pub(super) fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, 88.7);
    // Round to nearest by the 1.5 * 2^23 trick: `f32::round` is a libm call that stops the
    // loop from vectorising.
    const SHIFTER: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFTER) - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let [c6, c5, c4, c3, c2] = EXP_POLY;
    let p = 1.0 + r * (1.0 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    // Below the clamp the true value is (nearly) zero; returning 2^-126-ish instead would seed
    // denormals downstream (masked attention scores in training), which slow every FMA that
    // touches them a hundredfold.
    if x <= EXP_MIN {
        0.0
    } else {
        p * scale
    }
}

/// `erf` as the rational function `x P(x^2) / Q(x^2)` on [-4, 4] (Eigen's and XLA's f32 erf;
/// beyond 4, erf is 1 to f32 precision): 11 multiply-adds and a division, where Abramowitz &
/// Stegun 7.1.26 (a reciprocal, a polynomial and an `exp`) took about 30 vector instructions,
/// the bulk of the FFN's GELU epilogue.
const ERF_LIMIT: f32 = 4.0;
/// P's coefficients, of x^12 down to x^0.
const ERF_NUM: [f32; 7] = [
    -2.726_142_4e-10,
    2.770_681_5e-8,
    -2.101_024e-6,
    -5.692_506_2e-5,
    -7.349_906_4e-4,
    -2.954_6e-3,
    -1.609_603_3e-2,
];
/// Q's coefficients, of x^8 down to x^0: all negative, so Q never vanishes.
const ERF_DEN: [f32; 5] = [
    -1.456_607_15e-5,
    -2.133_740_5e-4,
    -1.682_827e-3,
    -7.373_329_3e-3,
    -1.426_473_9e-2,
];

/// `erf(x)` by the rational approximation above: |error| < 4e-7 in f32 (tested below).
#[inline(always)]
pub(super) fn erf_approx(x: f32) -> f32 {
    let x = x.clamp(-ERF_LIMIT, ERF_LIMIT);
    let x2 = x * x;
    let horner = |coefficients: &[f32]| coefficients.iter().fold(0.0, |p, &c| p * x2 + c);
    x * horner(&ERF_NUM) / horner(&ERF_DEN)
}

#[inline(always)]
pub(in crate::encoder) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
pub(super) fn softmax_in_place(xs: &mut [f32]) {
    let max = xs.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    // Kept apart from the sum so this loop has no loop-carried dependency and vectorises.
    for x in xs.iter_mut() {
        *x = exp_approx(*x - max);
    }
    let inv = 1.0 / xs.iter().sum::<f32>();
    xs.iter_mut().for_each(|x| *x *= inv);
}

/// The same approximations on vectors of any width ([`Simd`]), for the kernels written over
/// it: the GEMM's GELU epilogue and the attention's softmax.
pub(in crate::encoder) mod vector {
    use super::{ERF_DEN, ERF_LIMIT, ERF_NUM, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO};
    use crate::encoder::simd::Simd;

    /// [`super::gelu`] on a vector, with the same erf approximation; its division is a
    /// reciprocal estimate refined by one Newton step (to about 23 bits).
    ///
    /// # Safety
    /// Needs `S`'s instruction set; inlines into a kernel compiled for it.
    #[inline(always)]
    pub(in crate::encoder) unsafe fn gelu<S: Simd>(x: S::V) -> S::V {
        let z = S::mul(x, S::splat(std::f32::consts::FRAC_1_SQRT_2));
        let z = S::min(S::max(z, S::splat(-ERF_LIMIT)), S::splat(ERF_LIMIT));
        let z2 = S::mul(z, z);
        let horner = |coefficients: &[f32]| {
            let mut p = S::splat(coefficients[0]);
            for &c in &coefficients[1..] {
                p = S::fmadd(p, z2, S::splat(c));
            }
            p
        };
        let erf = S::mul(S::mul(z, horner(&ERF_NUM)), S::recip(horner(&ERF_DEN)));
        let half = S::mul(x, S::splat(0.5));
        S::fmadd(half, erf, half)
    }

    /// [`super::exp_approx`] on a vector of `x <= 0` (its caller's: `score - max`):
    /// zero (not a denormal) at and below `EXP_MIN`, and for minus infinity.
    ///
    /// # Safety
    /// As for [`gelu`].
    #[inline(always)]
    pub(in crate::encoder) unsafe fn exp<S: Simd>(x: S::V) -> S::V {
        let n = S::round(S::mul(x, S::splat(std::f32::consts::LOG2_E)));
        let r = S::fnmadd(n, S::splat(LN2_HI), x);
        let r = S::fnmadd(n, S::splat(LN2_LO), r);
        let [c6, c5, c4, c3, c2] = EXP_POLY;
        let mut p = S::splat(c6);
        for c in [c5, c4, c3, c2, 1.0, 1.0] {
            p = S::fmadd(p, r, S::splat(c));
        }
        // Below `EXP_MIN`, `n` leaves the range `scale_pow2` handles: those lanes are zeroed.
        S::zero_unless_above(S::scale_pow2(p, n), x, EXP_MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::simd::probe::{each, Probe};
    use crate::encoder::simd::Simd;

    #[test]
    fn exp_and_erf_match_libm() {
        let mut worst_exp = 0f32;
        let mut worst_erf = 0f32;
        for i in -40_000..=40_000 {
            let x = i as f32 / 1000.0;
            worst_exp = worst_exp.max(((exp_approx(x) - x.exp()) / x.exp()).abs());
            let exact = libm_erf(x);
            worst_erf = worst_erf.max((erf_approx(x) - exact).abs());
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp}");
        assert!(worst_erf < 4e-7, "erf error {worst_erf}");
    }

    /// `f` on a vector of `xs` (whole vectors of `S`) lane by lane.
    unsafe fn lanes<S: Simd>(xs: &[f32], f: impl Fn(S::V) -> S::V) -> Vec<f32> {
        let mut ys = vec![0f32; xs.len()];
        for (x, y) in xs.chunks_exact(S::LANES).zip(ys.chunks_exact_mut(S::LANES)) {
            S::store(y.as_mut_ptr(), f(S::load(x.as_ptr())));
        }
        ys
    }

    /// The worst difference of the vector GELU from the scalar one over [-30, 30), relative
    /// above 1.
    struct GeluError;

    impl Probe for GeluError {
        type Out = f32;
        unsafe fn run<S: Simd>(&self) -> f32 {
            let xs: Vec<f32> = (-30_000..30_000).map(|i| i as f32 / 1000.0).collect();
            let ys = lanes::<S>(&xs, |x| vector::gelu::<S>(x));
            let error = |(x, y): (&f32, f32)| (y - gelu(*x)).abs() / x.abs().max(1.0);
            xs.iter().zip(ys).map(error).fold(0.0, f32::max)
        }
    }

    /// The worst relative difference of the vector exp from the scalar one over [-100, 0],
    /// through the underflow cutoff, and whether minus infinity gives zero.
    struct ExpError;

    impl Probe for ExpError {
        type Out = (f32, f32);
        unsafe fn run<S: Simd>(&self) -> (f32, f32) {
            let xs: Vec<f32> = (-100_000..=0)
                .map(|i| i as f32 / 1000.0)
                .chain([f32::NEG_INFINITY; 16])
                .collect();
            let xs = &xs[xs.len() % S::LANES..];
            let ys = lanes::<S>(xs, |x| vector::exp::<S>(x));
            let mut worst = 0f32;
            for (&x, y) in xs.iter().zip(&ys) {
                let want = if x == f32::NEG_INFINITY {
                    0.0
                } else {
                    exp_approx(x)
                };
                let error = if want == 0.0 {
                    y.abs()
                } else {
                    (y - want).abs() / want
                };
                worst = worst.max(error);
            }
            (worst, ys[ys.len() - 1])
        }
    }

    /// The vector GELU of the GEMM epilogue and the vector exp of the softmax, on every
    /// backend, against the scalar ones (themselves checked against libm above), far into
    /// the tails where exp underflows.
    #[test]
    fn vector_gelu_and_exp_match_scalar() {
        for (isa, worst) in each(&GeluError) {
            assert!(worst < 1e-6, "{isa:?} GELU differs from scalar by {worst}");
        }
        for (isa, (worst, at_minus_infinity)) in each(&ExpError) {
            assert!(worst < 1e-6, "{isa:?} exp differs from scalar by {worst}");
            assert_eq!(at_minus_infinity, 0.0, "{isa:?} exp(-inf)");
        }
    }

    /// The oracle: candle's scalar f64 erf, the one its own `gelu_erf` uses.
    fn libm_erf(x: f32) -> f32 {
        candle_core::cpu::erf::erf_f64(x as f64) as f32
    }
}
