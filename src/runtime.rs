//! Process-wide tuning, set once at start: the allocator (keep freed memory) and OpenBLAS (its
//! best kernels, one thread where callers spread the work themselves).

/// candle allocates a fresh buffer for every tensor op. By default glibc serves large blocks
/// with mmap and returns them to the kernel when freed, and the next op faults them back in,
/// zeroed: over a tenth of encoding and training time went to that. Serving every block from
/// the heap and never trimming it costs only the memory already in use. (glibc ignores an
/// M_MMAP_THRESHOLD above 32 MiB, so mmap is switched off outright instead.) One arena for all
/// threads: with batches encoded side by side, per-thread arenas (64 MiB heaps that do get
/// trimmed, too small for a batch's activations) brought the page faults back.
pub fn keep_freed_memory() {
    // SAFETY: mallopt only adjusts allocator thresholds; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// OpenBLAS (0.3.21 in Debian 12) does not know this machine's CPU model and falls back to its
/// generic Prescott (SSE3) kernels, which made faiss's batched searches (evaluation, PCA fits)
/// several times slower than its AVX-512 ones. It reads `OPENBLAS_CORETYPE` only while it
/// loads, before `main`, so when it has fallen back on a CPU that has more, the process starts
/// itself again with the better core named. Returns when there is nothing to do (another BLAS,
/// a core already chosen) or the restart failed, which only costs speed.
pub fn use_best_blas_kernels() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os("OPENBLAS_CORETYPE").is_some() {
            return;
        }
        match openblas_core() {
            Some(core) if core.eq_ignore_ascii_case("prescott") => {}
            _ => return,
        }
        let better = if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            "SkylakeX"
        } else if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            "Haswell"
        } else {
            return;
        };
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        // `exec` returns only if it failed; then this process carries on with the old kernels.
        let _ = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("OPENBLAS_CORETYPE", better)
            .exec();
    }
}

/// The kernel set OpenBLAS chose at load, if the BLAS this process uses is OpenBLAS.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn openblas_core() -> Option<String> {
    let symbol = openblas_symbol(c"openblas_get_corename")?;
    // SAFETY: the symbol is OpenBLAS's `char *openblas_get_corename(void)`, which returns a
    // static string.
    unsafe {
        let corename: extern "C" fn() -> *const libc::c_char = std::mem::transmute(symbol);
        let name = corename();
        (!name.is_null()).then(|| {
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// Puts OpenBLAS (when it is the BLAS loaded) on one thread for the rest of the process: for
/// callers that spread their BLAS calls over the cores themselves, where OpenBLAS's own threads
/// only competed with them (a batched faiss search ran 4 to 6 times slower).
pub fn single_threaded_blas() {
    #[cfg(target_os = "linux")]
    if let Some(symbol) = openblas_symbol(c"openblas_set_num_threads") {
        // SAFETY: the symbol is OpenBLAS's `void openblas_set_num_threads(int)`.
        unsafe {
            let set_threads: extern "C" fn(libc::c_int) = std::mem::transmute(symbol);
            set_threads(1);
        }
    }
}

/// An OpenBLAS function by name, if OpenBLAS is among the loaded libraries.
#[cfg(target_os = "linux")]
fn openblas_symbol(name: &std::ffi::CStr) -> Option<*mut libc::c_void> {
    // SAFETY: looks a NUL-terminated name up in the libraries already loaded; nothing is called.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!symbol.is_null()).then_some(symbol)
}
