//! Streaming record readers: a HotpotQA file (a JSON array or JSON lines, plain or compressed)
//! read one record at a time, whatever its size.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::de::{DeserializeSeed, Error as _, SeqAccess, Visitor};

use super::Record;

/// Calls `f(record_number, record)` for every record of a HotpotQA file (plain, `.bz2` or
/// `.gz`), in file order, holding one record in memory at a time. A record that is valid JSON but
/// not a HotpotQA record reaches `f` as `Err(reason)` so the caller can skip or reject it; broken
/// JSON ends the read with an error naming the record. Record numbers start at 1.
pub fn for_each_record(
    path: &Path,
    mut f: impl FnMut(usize, Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let reader = super::input::open_decoded(path)?;
    read_records(path, reader, &mut f)
}

/// The records of one file's (decompressed) bytes, as [`for_each_record`].
pub(super) fn read_records(
    path: &Path,
    reader: impl Read,
    f: &mut impl FnMut(usize, Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    match first_byte(&mut reader).with_context(|| format!("reading {}", path.display()))? {
        None => bail!("{}: the file is empty", path.display()),
        Some(b'[') => read_array(path, reader, f),
        Some(b'{') => read_jsonl(path, reader, f),
        Some(other) => bail!(
            "{}: not HotpotQA JSON (expected a JSON array or JSON lines, found {:?})",
            path.display(),
            other as char
        ),
    }
}

/// The first byte that is not whitespace, after a UTF-8 byte order mark if the file starts
/// with one (as files saved by some Windows editors do).
fn first_byte(reader: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    if reader.fill_buf()?.starts_with(UTF8_BOM) {
        reader.consume(UTF8_BOM.len());
    }
    loop {
        let buf = reader.fill_buf()?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let byte = buf[i];
                reader.consume(i);
                return Ok(Some(byte));
            }
            None if buf.is_empty() => return Ok(None),
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

fn parse_record(value: serde_json::Value) -> Result<Record, String> {
    let record: Record = serde_json::from_value(value).map_err(|e| e.to_string())?;
    record.paragraphs()?;
    Ok(record)
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// JSON lines, read as bytes: a line that is not UTF-8 is a bad record like any other (named
/// by its number, skippable), not an error that ends the read.
fn read_jsonl(
    path: &Path,
    reader: impl BufRead,
    f: &mut impl FnMut(usize, Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let mut number = 0;
    for line in reader.split(b'\n') {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim_ascii().is_empty() {
            continue;
        }
        number += 1;
        let record = std::str::from_utf8(&line)
            .map_err(|e| format!("not UTF-8 (at byte {} of the line)", e.valid_up_to()))
            .and_then(|line| {
                serde_json::from_str::<serde_json::Value>(line)
                    .map_err(|e| format!("invalid JSON: {e}"))
            })
            .and_then(parse_record);
        f(number, record)?;
    }
    Ok(())
}

fn read_array(
    path: &Path,
    reader: impl Read,
    f: &mut impl FnMut(usize, Result<Record, String>) -> Result<()>,
) -> Result<()> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut count = 0;
    let mut stopped_by_caller = None;
    let seed = ArraySeed {
        f,
        count: &mut count,
        stopped_by_caller: &mut stopped_by_caller,
    };
    let outcome = seed.deserialize(&mut de).and_then(|()| de.end());
    if let Some(err) = stopped_by_caller {
        return Err(err);
    }
    outcome.map_err(|e| {
        anyhow!(
            "{}: record {}: invalid JSON: {e}",
            path.display(),
            count + 1
        )
    })
}

/// Visits the top-level array one element at a time instead of collecting it.
struct ArraySeed<'a, F> {
    f: &'a mut F,
    count: &'a mut usize,
    stopped_by_caller: &'a mut Option<anyhow::Error>,
}

impl<'de, F> DeserializeSeed<'de> for ArraySeed<'_, F>
where
    F: FnMut(usize, Result<Record, String>) -> Result<()>,
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F> Visitor<'de> for ArraySeed<'_, F>
where
    F: FnMut(usize, Result<Record, String>) -> Result<()>,
{
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array of HotpotQA records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(value) = seq.next_element::<serde_json::Value>()? {
            *self.count += 1;
            if let Err(e) = (self.f)(*self.count, parse_record(value)) {
                *self.stopped_by_caller = Some(e);
                return Err(A::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}
