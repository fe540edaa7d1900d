//! Small file helpers shared by every stage: hashing and crash-safe writes.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

pub fn sha256_file(path: &Path) -> Result<String> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Writes `bytes` to a sibling temporary file, fsyncs it and renames it over `path`, so readers
/// see the old content or the new, never half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// `<dir>.<suffix>` beside `dir`: where work on `dir` is staged or its old copy waits.
pub fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}

/// Puts the finished directory `staged` in place of `target` with two renames. Between them
/// the old `target` exists only as `<target>.old`, which [`recover_interrupted_install`] puts
/// back.
pub fn install_dir(staged: &Path, target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    if target.exists() {
        std::fs::rename(target, &old)
            .with_context(|| format!("moving {} aside", target.display()))?;
    }
    std::fs::rename(staged, target).with_context(|| format!("installing {}", target.display()))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    Ok(())
}

/// Undoes an [`install_dir`] cut off between its two renames.
pub fn recover_interrupted_install(target: &Path) -> Result<()> {
    let old = sibling(target, "old");
    if !target.exists() && old.exists() {
        std::fs::rename(&old, target)
            .with_context(|| format!("restoring {} from {}", target.display(), old.display()))?;
    }
    Ok(())
}

pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Milliseconds elapsed since `start`: the unit every timing in rag's output is reported in.
pub fn ms_since(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

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

/// A comma-separated list of positive numbers from the command line, sorted and distinct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberList(pub Vec<usize>);

impl std::str::FromStr for NumberList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_list(s).map(NumberList)
    }
}

/// Parses "1,3,6" into sorted, distinct positive numbers.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut values = s
        .split(',')
        .map(|part| {
            part.trim()
                .parse::<usize>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("'{part}' is not a positive number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    values.sort();
    values.dedup();
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_list_sorts_dedups_and_rejects_zero() {
        assert_eq!(parse_list("6, 1,3,6").unwrap(), vec![1, 3, 6]);
        assert!(parse_list("0,3").is_err());
        assert!(parse_list("a").is_err());
    }

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

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        write_json_atomic(&path, &vec![1, 2]).unwrap();
        write_json_atomic(&path, &vec![3]).unwrap();
        assert_eq!(read_json::<Vec<i32>>(&path).unwrap(), vec![3]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(
            sha256_file(&path).unwrap(),
            hex::encode(Sha256::digest(std::fs::read(&path).unwrap()))
        );
    }
}
