//! A GGUF header check run before llama.cpp sees the file, whose own failure says only "null
//! result from llama cpp": reads the header, the metadata and the tensor table and refuses a
//! file that is not GGUF, has a version llama.cpp does not read, or is shorter than its tensors
//! need, saying which. What llama.cpp refuses after that is reported with what the header told
//! (architecture, size against the memory available).
//!
//! ```text
//! "GGUF" | version: u32 | tensors: u64 | metadata entries: u64
//!        | entries: (key: string, type: u32, value) ... | tensors: (name, dims: u32, ne: u64 x dims, type: u32, offset: u64) ...
//!        | padding to `general.alignment` (32) | tensor data
//! ```

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

const MAGIC: &[u8; 4] = b"GGUF";
/// The versions llama.cpp reads (version 1 was dropped long ago).
const VERSIONS: std::ops::RangeInclusive<u32> = 2..=3;
const DEFAULT_ALIGNMENT: u64 = 32;
/// Bounds that no real model reaches, so a damaged count fails here instead of allocating.
const MAX_ENTRIES: u64 = 1 << 20;
const MAX_DIMS: u32 = 8;

/// What the header says about a GGUF file that passed the check.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub tensors: u64,
    pub architecture: Option<String>,
    /// The bytes the file must have for all of its tensors.
    pub needed_bytes: u64,
}

/// Checks the GGUF file at `path` (see the module docs).
pub fn check(path: &Path) -> Result<GgufHeader> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let actual = file.metadata()?.len();
    let mut reader = Reader {
        inner: BufReader::new(file),
        read: 0,
        len: actual,
    };
    let refuse =
        |why: String| anyhow::anyhow!("{} is not a usable GGUF model: {why}", path.display());
    let mut magic = [0u8; 4];
    if reader.bytes(&mut magic).is_err() || &magic != MAGIC {
        return Err(refuse(
            "it is not a GGUF file (no GGUF magic at its start)".into(),
        ));
    }
    let header = read_header(&mut reader).map_err(|e| refuse(format!("{e:#}")))?;
    if header.needed_bytes > actual {
        return Err(refuse(format!(
            "it is truncated: its tensors need {} bytes, the file has {actual}",
            header.needed_bytes
        )));
    }
    Ok(header)
}

impl GgufHeader {
    /// The error for a file llama.cpp would not load although its header is sound.
    pub fn load_error(&self, path: &Path, cause: impl std::fmt::Display) -> anyhow::Error {
        let available = available_memory().map_or(String::new(), |bytes| {
            format!(", {} MiB available", bytes >> 20)
        });
        anyhow::anyhow!(
            "llama.cpp could not load {} ({cause}), though its header is sound (GGUF v{}, architecture {}, {} tensors): its architecture may be one this llama.cpp does not know, or memory too short (it needs {} MiB{available})",
            path.display(),
            self.version,
            self.architecture.as_deref().unwrap_or("unnamed"),
            self.tensors,
            self.needed_bytes >> 20,
        )
    }
}

fn read_header(r: &mut Reader) -> Result<GgufHeader> {
    let version = r.u32()?;
    if !VERSIONS.contains(&version) {
        bail!(
            "unsupported GGUF version {version} (llama.cpp reads versions {} to {})",
            VERSIONS.start(),
            VERSIONS.end()
        );
    }
    let tensors = r.count("tensor count")?;
    let entries = r.count("metadata count")?;
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut architecture = None;
    for _ in 0..entries {
        let key = r.string()?;
        let kind = r.u32()?;
        match (key.as_str(), kind) {
            ("general.alignment", 4) => alignment = u64::from(r.u32()?),
            ("general.architecture", 8) => architecture = Some(r.string()?),
            _ => r.skip_value(kind)?,
        }
    }
    if alignment == 0 || !alignment.is_power_of_two() {
        bail!("bad header: alignment {alignment}");
    }
    let mut data_bytes = 0u64;
    for _ in 0..tensors {
        r.string()?;
        let dims = r.u32()?;
        if dims == 0 || dims > MAX_DIMS {
            bail!("bad header: a tensor with {dims} dimensions");
        }
        let mut elements = 1u64;
        for _ in 0..dims {
            elements = elements.saturating_mul(r.u64()?);
        }
        let kind = r.u32()?;
        let offset = r.u64()?;
        // A type this table does not know is left to llama.cpp: its extent is unknown here.
        if let Some((block, bytes)) = type_size(kind) {
            let end = offset.saturating_add(elements.div_ceil(block).saturating_mul(bytes));
            data_bytes = data_bytes.max(end);
        }
    }
    let data_start = r.read.div_ceil(alignment) * alignment;
    Ok(GgufHeader {
        version,
        tensors,
        architecture,
        needed_bytes: data_start.saturating_add(data_bytes),
    })
}

/// (elements per block, bytes per block) of a ggml tensor type, from ggml's type traits.
fn type_size(kind: u32) -> Option<(u64, u64)> {
    Some(match kind {
        0 => (1, 4),       // F32
        1 => (1, 2),       // F16
        2 => (32, 18),     // Q4_0
        3 => (32, 20),     // Q4_1
        6 => (32, 22),     // Q5_0
        7 => (32, 24),     // Q5_1
        8 => (32, 34),     // Q8_0
        9 => (32, 36),     // Q8_1
        10 => (256, 84),   // Q2_K
        11 => (256, 110),  // Q3_K
        12 => (256, 144),  // Q4_K
        13 => (256, 176),  // Q5_K
        14 => (256, 210),  // Q6_K
        15 => (256, 292),  // Q8_K
        16 => (256, 66),   // IQ2_XXS
        17 => (256, 74),   // IQ2_XS
        18 => (256, 98),   // IQ3_XXS
        19 => (256, 50),   // IQ1_S
        20 => (32, 18),    // IQ4_NL
        21 => (256, 110),  // IQ3_S
        22 => (256, 82),   // IQ2_S
        23 => (256, 136),  // IQ4_XS
        24 => (1, 1),      // I8
        25 => (1, 2),      // I16
        26 => (1, 4),      // I32
        27 | 28 => (1, 8), // I64, F64
        29 => (256, 56),   // IQ1_M
        30 => (1, 2),      // BF16
        34 => (256, 54),   // TQ1_0
        35 => (256, 66),   // TQ2_0
        39 => (32, 17),    // MXFP4
        _ => return None,
    })
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Little-endian reads that fail with "truncated" at the end of the file, and count what they
/// read.
struct Reader {
    inner: BufReader<File>,
    read: u64,
    len: u64,
}

impl Reader {
    fn bytes(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|_| {
            anyhow::anyhow!(
                "it is truncated: the file ends ({} bytes) inside its header",
                self.len
            )
        })?;
        self.read += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn count(&mut self, what: &str) -> Result<u64> {
        let n = self.u64()?;
        if n > MAX_ENTRIES {
            bail!("bad header: {what} {n}");
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String> {
        let len = self.u64()?;
        if len > self.len.saturating_sub(self.read) {
            bail!(
                "bad header: a string of {len} bytes in a file of {}",
                self.len
            );
        }
        let mut buf = vec![0u8; len as usize];
        self.bytes(&mut buf)?;
        String::from_utf8(buf).map_err(|_| anyhow::anyhow!("bad header: a key that is not UTF-8"))
    }

    fn skip(&mut self, n: u64) -> Result<()> {
        if n > self.len.saturating_sub(self.read) {
            bail!(
                "it is truncated: the file ends ({} bytes) inside its header",
                self.len
            );
        }
        let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())?;
        self.read += copied;
        Ok(())
    }

    fn skip_value(&mut self, kind: u32) -> Result<()> {
        match kind {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let len = self.u64()?;
                self.skip(len)
            }
            9 => {
                let element = self.u32()?;
                let n = self.u64()?;
                if element == 9 {
                    bail!("bad header: nested arrays");
                }
                match element_size(element) {
                    Some(size) => self.skip(n.saturating_mul(size)),
                    None => (0..n).try_for_each(|_| self.skip_value(element)),
                }
            }
            _ => bail!("bad header: metadata of unknown type {kind}"),
        }
    }
}

/// Bytes of one fixed-size metadata value (`None` for strings and unknown types).
fn element_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal GGUF: one metadata entry, one F32 tensor of 4 values.
    fn tiny_gguf(version: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend_from_slice(&(s.len() as u64).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        string(&mut b, "general.architecture");
        b.extend_from_slice(&8u32.to_le_bytes());
        string(&mut b, "tiny");
        string(&mut b, "w");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&4u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.resize(b.len().div_ceil(32) * 32, 0);
        b.extend_from_slice(&[0u8; 16]);
        b
    }

    fn error(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).unwrap();
        format!("{:#}", check(&path).unwrap_err())
    }

    #[test]
    fn says_why_a_file_is_not_a_usable_gguf() {
        let good = tiny_gguf(3);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, &good).unwrap();
        let header = check(&path).unwrap();
        assert_eq!(header.needed_bytes, good.len() as u64);
        assert_eq!(header.architecture.as_deref(), Some("tiny"));

        assert!(error(b"PK\x03\x04 a zip").contains("not a GGUF file"));
        assert!(error(&tiny_gguf(1)).contains("unsupported GGUF version 1"));
        let cut = error(&good[..good.len() - 4]);
        assert!(
            cut.contains("truncated") && cut.contains(&format!("need {} bytes", good.len())),
            "{cut}"
        );
        assert!(error(&good[..30]).contains("ends (30 bytes) inside its header"));
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(error(&huge).contains("bad header"));
    }
}
