//! Additions and removals on a sharded index. A document goes to the shard its title hashes
//! to, as a build puts it there, and added documents take the next global ids in the order
//! given; each changed shard's new build is staged beside it (`shard-i-of-n.building/`, made as
//! an unsharded update makes one), then the shards are put in place and `shards.json` is
//! replaced last, naming them.
//!
//! Cut off before `shards.json` is replaced, the next update (or `--merge`) puts back every
//! shard `shards.json` names from its `.old` copy, and the same command starts over; between the
//! renames and `shards.json`, a search refuses the index with one line (a shard is not the
//! build `shards.json` records), and a running server keeps the generation it has open.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::{stage, Plan, UpdateOptions, UpdateSummary};
use crate::files;
use crate::index::build::PROGRESS_FILE;
use crate::index::manifest::{Manifest, MANIFEST_FILE};
use crate::index::sharded::{self, ShardEntry, ShardsManifest, SHARDS_FILE};

/// The top manifest of a switch in progress: written before the shards are renamed.
const NEXT_FILE: &str = "shards.json.next";

pub(super) fn update(
    index_dir: &Path,
    options: &UpdateOptions,
    started: Instant,
) -> Result<UpdateSummary> {
    if options.sync {
        bail!(
            "{} is sharded: rebuild its shards from the corpus (`rag index --shard i/n`, then --merge)",
            index_dir.display()
        );
    }
    recover(index_dir)?;
    let top = ShardsManifest::read(index_dir)?;
    let parts = top.open_shards(index_dir)?;
    let mut plan = Plan::make(&parts, options, None)?;
    let stale: Vec<usize> = (0..parts.len())
        .filter(|&i| {
            let changes = &plan.parts[i];
            !changes.added.is_empty() || !changes.removing.is_empty() || parts[i].links().is_none()
        })
        .collect();
    let shard_manifest = parts[0].manifest.clone();
    let combined = |plan: &Plan, next: &ShardsManifest, removed_rows: u64, installed: bool| {
        let mut manifest = next.combined(&shard_manifest);
        manifest.removed = removed_rows;
        let mut summary = plan.summary(index_dir, &manifest, started, installed);
        summary.documents = plan.documents;
        summary
    };
    if stale.is_empty() {
        return Ok(combined(&plan, &top, plan.removed_rows, false));
    }
    for &i in &stale {
        let work = files::sibling(&parts[i].dir, "building");
        if work.join(PROGRESS_FILE).exists() {
            bail!(
                "a build of shard {} waits in {}: finish it (`rag index --shard`), or remove it",
                top.shards[i].dir,
                work.display()
            );
        }
    }
    let first = top.documents;
    let added: u64 = plan.parts.iter().map(|c| c.added.len() as u64).sum();
    let vectors = plan.encode(options, &parts[0].manifest)?;
    let mut next = top.clone();
    next.documents = first + added;
    let mut removed_rows = 0;
    let mut compacted = false;
    for (i, part) in parts.iter().enumerate() {
        if !stale.contains(&i) {
            removed_rows += part.manifest.removed;
            continue;
        }
        let changes = &plan.parts[i];
        let changed = !changes.added.is_empty() || !changes.removing.is_empty();
        let ids: Vec<u64> = changes.order.iter().map(|o| first + o).collect();
        let work = files::sibling(&part.dir, "building");
        let manifest = stage(part, changes, &vectors[i], &ids, &work, |m| {
            if changed {
                m.updates += 1;
            }
            if let Some(shard) = &mut m.shard {
                shard.corpus_documents = next.documents;
            }
        })?;
        removed_rows += manifest.removed;
        compacted |= manifest.documents < part.manifest.documents + ids.len() as u64;
        next.shards[i] = ShardEntry {
            dir: top.shards[i].dir.clone(),
            documents: manifest.documents,
            build_id: manifest.build_id(),
            manifest_sha256: files::sha256_file(&work.join(MANIFEST_FILE))?,
        };
    }
    next.build_id = sharded::merge::build_id_of(&next.shards);
    drop(parts);
    switch(index_dir, &next, &stale)?;
    let mut summary = combined(&plan, &next, removed_rows, true);
    summary.compacted = compacted;
    Ok(summary)
}

/// Puts the staged shards `stale` in place and then `next` as `shards.json`.
fn switch(index_dir: &Path, next: &ShardsManifest, stale: &[usize]) -> Result<()> {
    files::write_json_atomic(&index_dir.join(NEXT_FILE), next)?;
    for &i in stale {
        let dir = index_dir.join(&next.shards[i].dir);
        let (old, building) = (
            files::sibling(&dir, "old"),
            files::sibling(&dir, "building"),
        );
        files::remove_owned_dir(&old)?;
        files::mark_owned(&dir)?;
        files::mark_owned(&building)?;
        std::fs::rename(&dir, &old).with_context(|| format!("moving {} aside", dir.display()))?;
        std::fs::rename(&building, &dir)
            .with_context(|| format!("installing {}", dir.display()))?;
    }
    let top = index_dir.join(SHARDS_FILE);
    std::fs::rename(index_dir.join(NEXT_FILE), &top)
        .with_context(|| format!("replacing {}", top.display()))?;
    for &i in stale {
        files::remove_owned_dir(&files::sibling(&index_dir.join(&next.shards[i].dir), "old"))?;
    }
    Ok(())
}

/// Finishes what a cut-off switch left: a shard `shards.json` does not name is replaced by
/// the `.old` copy it does name, and a `.old` copy no longer named is removed.
pub fn recover(index_dir: &Path) -> Result<()> {
    let next = index_dir.join(NEXT_FILE);
    if !index_dir.join(SHARDS_FILE).exists() {
        return Ok(());
    }
    let top = ShardsManifest::read(index_dir)?;
    for entry in &top.shards {
        let dir = index_dir.join(&entry.dir);
        let old = files::sibling(&dir, "old");
        if !old.exists() {
            continue;
        }
        let named = |d: &Path| Manifest::read(d).is_ok_and(|m| m.build_id() == entry.build_id);
        if named(&dir) {
            files::remove_owned_dir(&old)?;
        } else if named(&old) {
            if dir.exists() {
                files::remove_owned_dir(&dir)?;
            }
            std::fs::rename(&old, &dir)
                .with_context(|| format!("restoring {} from {}", dir.display(), old.display()))?;
        }
    }
    if next.exists() {
        std::fs::remove_file(&next).with_context(|| format!("removing {}", next.display()))?;
    }
    Ok(())
}
