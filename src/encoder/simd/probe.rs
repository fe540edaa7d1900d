//! Runs a test's generic body on every backend the tests can reach ([`Isa::testable`]), each
//! compiled for its instruction set, so one check covers 16 and 8 lanes, portable and real.

use super::portable::Portable;
use super::{Isa, Simd};

/// A test body over any [`Simd`] backend.
pub(in crate::encoder) trait Probe {
    type Out;
    /// # Safety
    /// Needs `S`'s instruction set.
    unsafe fn run<S: Simd>(&self) -> Self::Out;
}

/// `probe` on each backend of [`Isa::testable`], with the backend's name.
pub(in crate::encoder) fn each<P: Probe>(probe: &P) -> Vec<(Isa, P::Out)> {
    Isa::testable()
        .into_iter()
        // SAFETY: the hardware sets in `testable` are those the CPU has.
        .map(|isa| (isa, unsafe { on(isa, probe) }))
        .collect()
}

/// # Safety
/// The CPU has `isa`.
unsafe fn on<P: Probe>(isa: Isa, probe: &P) -> P::Out {
    match isa {
        Isa::Portable16 => probe.run::<Portable<16>>(),
        Isa::Portable8 => probe.run::<Portable<8>>(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512(probe),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2(probe),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx512 | Isa::Avx2 => unreachable!("no x86 set is detected elsewhere"),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<P: Probe>(probe: &P) -> P::Out {
    probe.run::<super::Avx512>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<P: Probe>(probe: &P) -> P::Out {
    probe.run::<super::Avx2>()
}
