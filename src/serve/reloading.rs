//! The served index, one build at a time. A rebuild installs a new directory in place of
//! the old one; the server notices (its manifest's inode, size or mtime changed), opens the new
//! build in full (every file checked, every vector file loaded), and only then switches
//! to it, atomically: each request runs against the build it started with, from its
//! parameters' validation to its last document. A new build that cannot be opened (a
//! damaged build, a model that will not load) leaves the old one served, and `/health` says
//! why. This is what search servers do on refresh (Elasticsearch, OpenSearch and Solr reopen
//! their readers on a new commit point and swap them in).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::retrieve::Retriever;

/// How often the manifest is looked at: one `stat` a second.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What identifies one manifest file: replaced by a rebuild, it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    bytes: u64,
    modified_ns: i64,
}

fn stamp(dir: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(crate::index::top_manifest_file(dir)).ok()?;
    Some(Stamp {
        device: meta.dev(),
        inode: meta.ino(),
        bytes: meta.size(),
        modified_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
    })
}

#[derive(Default)]
struct Watch {
    /// The manifest last looked at (`None`: missing, as between an install's two renames).
    seen: Option<Stamp>,
    /// Why the newest build on disk is not the one served, if it is not.
    error: Option<String>,
}

pub struct ReloadingIndex {
    dir: PathBuf,
    current: RwLock<Arc<Retriever>>,
    watch: Mutex<Watch>,
}

impl ReloadingIndex {
    /// Serves `retriever`'s index, watching its directory for new builds. Its vectors (and
    /// title links) are loaded now, so that a damaged index is refused before the server
    /// reports ready and no request pays for the loading.
    pub fn new(retriever: Retriever) -> Result<Self> {
        retriever.preload()?;
        let dir = retriever.index.dir.clone();
        Ok(Self {
            watch: Mutex::new(Watch {
                seen: stamp(&dir),
                error: None,
            }),
            dir,
            current: RwLock::new(Arc::new(retriever)),
        })
    }

    /// The build served now; a request keeps it to the end.
    pub fn current(&self) -> Arc<Retriever> {
        Arc::clone(&self.current.read().expect("live index lock"))
    }

    /// Why the index on disk is not the build served, if it is not.
    pub fn reload_error(&self) -> Option<String> {
        self.watch.lock().expect("watch lock").error.clone()
    }

    /// Switches to the index's new build if its manifest changed since the last look;
    /// returns whether it switched.
    pub fn refresh(&self) -> bool {
        let now = stamp(&self.dir);
        {
            let mut watch = self.watch.lock().expect("watch lock");
            if watch.seen == now {
                return false;
            }
            watch.seen = now;
        }
        if now.is_none() {
            // Mid-install, or removed: keep serving and look again.
            return false;
        }
        let current = self.current();
        let served = current.index.build_id();
        if crate::index::build_on_disk(&self.dir).is_some_and(|g| g == served) {
            // The served build is on disk again (a damaged manifest put back): whatever
            // could not be opened meanwhile is no longer there.
            self.watch.lock().expect("watch lock").error = None;
            return false;
        }
        let opened = current.reopen(&self.dir);
        let mut watch = self.watch.lock().expect("watch lock");
        match opened {
            Ok(next) => {
                eprintln!(
                    "index {}: now serving build {} ({} documents; was {served})",
                    self.dir.display(),
                    next.index.build_id(),
                    next.index.len()
                );
                *self.current.write().expect("live index lock") = Arc::new(next);
                watch.error = None;
                true
            }
            Err(err) => {
                let message = format!("{err:#}");
                eprintln!(
                    "index {}: its new version could not be opened, still serving build {served}: {message}",
                    self.dir.display()
                );
                watch.error = Some(message);
                false
            }
        }
    }

    /// Calls [`refresh`](Self::refresh) every `every` on a thread of its own, until the returned
    /// sender is dropped.
    pub fn watch(self: &Arc<Self>, every: Duration) -> Result<(Sender<()>, JoinHandle<()>)> {
        let (stop, stopped) = mpsc::channel::<()>();
        let live = Arc::clone(self);
        let worker = std::thread::Builder::new()
            .name("rag-reload".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    live.refresh();
                }
            })
            .context("starting the index watch thread")?;
        Ok((stop, worker))
    }
}
