//! One index directory opened for queries: the files of one build, checked against its
//! manifest. An unsharded index is one part; a sharded one is a part per shard ([`super::Index`]
//! searches them together).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::ann::{hnsw_file, AnnSpec, HnswFile, HnswIndex};
use super::flat_file::{Checks, Residence};
use super::integrity::Hashing;
use super::links::{self, Links};
use super::removed::{Removed, REMOVED_FILE};
use super::{bm25, dense_file, docstore, flat_file, integrity, sharded};
use super::{Cell, DenseIndex, DocStore, Manifest, Pca};
use crate::corpus::Paragraph;
use crate::vectors::Matrix;

/// Smaller sizes derived from the stored vectors kept in memory at once; the least recently
/// used goes first, so that clients asking for many sizes cannot grow the server without bound.
const DERIVED_SIZES_KEPT: usize = 8;

/// One index directory, opened for queries: an unsharded index, or one shard of a sharded one.
/// Each depth's vectors are loaded on first use, from the file opened with the index.
pub struct OpenDir {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// A shard's documents' global ids, by local id (`None`: the two are the same).
    ids: Option<Vec<u64>>,
    /// Local ids of the documents taken out since the build ([`super::removed`]).
    removed: Removed,
    docs: DocStore,
    bm25: bm25::Bm25Index,
    /// Per depth, the PCA that reduced the stored vectors (`rag index --reduce`), if any.
    pca: HashMap<usize, Pca>,
    /// Per depth, the stored vector file, header checked.
    files: HashMap<usize, flat_file::FlatFile>,
    /// Per depth, the HNSW graph's file (`rag index --ann hnsw`), header checked.
    graphs: HashMap<usize, HnswFile>,
    /// The stored title links, memory-mapped (`None`: an index from before them).
    links: Option<Links>,
    dense: Mutex<DenseCache>,
}

#[derive(Default)]
struct DenseCache {
    stored: HashMap<usize, Arc<DenseIndex>>,
    graphs: HashMap<usize, Arc<HnswIndex>>,
    /// Derived sizes, most recently used last.
    derived: Vec<((usize, usize), Arc<DenseIndex>)>,
}

impl OpenDir {
    /// Opens the index in `dir`, checking every file against the manifest (see [`integrity`]):
    /// sizes, headers and seals, and the checksum of a file read here whose seal does not match
    /// (vector files are checked the same way when they load).
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_hashing(
            dir,
            Hashing::Unsealed(&[
                docstore::DOCS_FILE,
                docstore::OFFSETS_FILE,
                sharded::IDS_FILE,
                REMOVED_FILE,
                links::FST_FILE,
                links::IDS_FILE,
                "bm25/",
                "pca/",
            ]),
        )
    }

    /// Whether the index in `dir` opens, every size, count and header checked but no file
    /// hashed: cheap enough for `rag index` to ask before it calls an index up to date.
    pub fn check_opens(dir: &Path) -> Result<()> {
        Self::open_hashing(dir, Hashing::None).map(drop)
    }

    /// Opens the index in `dir`, hashing the recorded files `hashing` names.
    fn open_hashing(dir: &Path, hashing: Hashing) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        integrity::check_recorded(dir, &manifest.files, hashing)?;
        let docs = DocStore::open(dir)?;
        if docs.len() as u64 != manifest.documents {
            anyhow::bail!(flat_file::damaged(
                &dir.join(docstore::OFFSETS_FILE),
                &format!(
                    "it lists {} documents, the manifest {}",
                    docs.len(),
                    manifest.documents
                )
            ));
        }
        let pca = match &manifest.reduce {
            Some(reduce) => manifest
                .layers
                .iter()
                .map(|&depth| {
                    let file = reduce.transforms.get(&depth).with_context(|| {
                        format!(
                            "{} is damaged: no PCA for layer {depth}; rebuild it",
                            dir.display()
                        )
                    })?;
                    let pca = Pca::load(&dir.join(file))?;
                    if pca.output_dim() != manifest.stored_dim {
                        anyhow::bail!(flat_file::damaged(
                            &dir.join(file),
                            "its width differs from the manifest's"
                        ));
                    }
                    Ok((depth, pca))
                })
                .collect::<Result<_>>()?,
            None => HashMap::new(),
        };
        let files = manifest
            .layers
            .iter()
            .map(|&depth| {
                let path = dense_file(dir, depth, manifest.stored_dim);
                let file =
                    flat_file::FlatFile::open(&path, manifest.documents, manifest.stored_dim)?;
                Ok((depth, file))
            })
            .collect::<Result<_>>()?;
        let graphs = match manifest.ann {
            AnnSpec::Flat => HashMap::new(),
            AnnSpec::Hnsw { .. } => manifest
                .layers
                .iter()
                .map(|&depth| {
                    let path = hnsw_file(dir, depth, manifest.stored_dim);
                    let file = HnswFile::open(&path, manifest.documents, manifest.stored_dim)?;
                    Ok((depth, file))
                })
                .collect::<Result<_>>()?,
        };
        let removed = Removed::read(dir, manifest.removed, manifest.documents)?;
        let bm25 =
            bm25::Bm25Index::open(&dir.join("bm25"))?.with_token_counts(manifest.bm25_tokens);
        // BM25 no longer holds the removed documents at all.
        if bm25.documents() != manifest.documents - manifest.removed {
            anyhow::bail!(flat_file::damaged(
                &dir.join("bm25"),
                &format!(
                    "it holds {} documents, the manifest {}",
                    bm25.documents(),
                    manifest.documents - manifest.removed
                )
            ));
        }
        let ids = match manifest.shard {
            Some(_) => {
                let path = dir.join(sharded::IDS_FILE);
                let ids = sharded::read_ids(&path)?;
                if ids.len() as u64 != manifest.documents {
                    anyhow::bail!(flat_file::damaged(
                        &path,
                        &format!(
                            "it lists {} ids, the manifest {} documents",
                            ids.len(),
                            manifest.documents
                        )
                    ));
                }
                Some(ids)
            }
            None => None,
        };
        let links = Links::open(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            links,
            ids,
            removed,
            bm25,
            manifest,
            docs,
            pca,
            files,
            graphs,
            dense: Mutex::new(DenseCache::default()),
        })
    }

    pub fn documents(&self) -> u64 {
        self.manifest.documents
    }

    /// The documents taken out since the build, by local id.
    pub fn removed(&self) -> &Removed {
        &self.removed
    }

    /// Whether local document `local` is served (not removed).
    pub fn serves(&self, local: u64) -> bool {
        local < self.documents() && !self.removed.contains(local)
    }

    /// The global id of local document `local`.
    pub fn global(&self, local: u64) -> u64 {
        self.ids.as_ref().map_or(local, |ids| ids[local as usize])
    }

    /// The local id of global document `id`, if this part holds it.
    pub fn local(&self, id: u64) -> Option<u64> {
        match &self.ids {
            Some(ids) => ids.binary_search(&id).ok().map(|i| i as u64),
            None => (id < self.documents()).then_some(id),
        }
    }

    /// Local document `local`, as stored.
    pub fn document(&self, local: u64) -> Result<Paragraph> {
        self.docs.get(local)
    }

    /// The stored title links (`None`: an index from before them).
    pub fn links(&self) -> Option<&Links> {
        self.links.as_ref()
    }

    pub fn bm25(&self) -> &bm25::Bm25Index {
        &self.bm25
    }

    /// Query vectors comparable with the stored ones at a resolved depth and size, from the
    /// encoder's full-width output: through the index's PCA when it has one, then cut to `cell.dim`.
    pub fn query_vectors(&self, cell: Cell, full: &Matrix) -> Result<Matrix> {
        Ok(match self.pca.get(&cell.layers) {
            Some(pca) => pca.reduce(full)?.truncated(cell.dim),
            None => full.truncated(cell.dim),
        })
    }

    /// Loads every depth's vectors now rather than on first use. A server reads each graph and
    /// flat file whole into memory: its searches then run on anonymous memory (huge pages, no
    /// page faults; a mapped 2.6 GB graph measured up to 1.6 times slower at efSearch 512
    /// under load), and a cold start is paid once, not per search.
    pub fn preload(&self) -> Result<()> {
        for &depth in &self.manifest.layers {
            let mut cache = self.dense.lock().expect("dense cache lock");
            self.stored_locked(&mut cache, depth, Residence::InMemory)?;
        }
        Ok(())
    }

    /// The dense index for a depth and size (both already resolved against the manifest). The
    /// stored width is loaded once, memory-mapped (its checksum checked unless sealed); a
    /// smaller size is derived from it in memory, never written: reading an index does not
    /// change it.
    pub fn dense(&self, depth: usize, dim: usize) -> Result<Arc<DenseIndex>> {
        let mut cache = self.dense.lock().expect("dense cache lock");
        let stored = self.stored_locked(&mut cache, depth, Residence::Mapped)?;
        if dim == stored.dim() {
            return Ok(stored);
        }
        if let Some(i) = cache
            .derived
            .iter()
            .position(|(key, _)| *key == (depth, dim))
        {
            let entry = cache.derived.remove(i);
            let index = Arc::clone(&entry.1);
            cache.derived.push(entry);
            return Ok(index);
        }
        let derived = Arc::new(stored.truncated(dim)?);
        if cache.derived.len() == DERIVED_SIZES_KEPT {
            cache.derived.remove(0);
        }
        cache.derived.push(((depth, dim), Arc::clone(&derived)));
        Ok(derived)
    }

    /// A depth's vectors at the stored width, loaded as `residence` says if not loaded yet.
    /// Where the depth has an HNSW graph, they are searched in the graph's own copy (built from
    /// the flat file, the same values), so that they are in memory once, not twice.
    fn stored_locked(
        &self,
        cache: &mut DenseCache,
        depth: usize,
        residence: Residence,
    ) -> Result<Arc<DenseIndex>> {
        if let Some(index) = cache.stored.get(&depth) {
            return Ok(Arc::clone(index));
        }
        let index = Arc::new(match self.graph_locked(cache, depth, residence)? {
            Some(graph) => {
                if graph.is_mapped() {
                    if let Some(file) = self.graphs.get(&depth) {
                        file.warm_vectors()?;
                    }
                }
                graph.exact()?
            }
            None => self.load_stored(depth, residence)?,
        });
        cache.stored.insert(depth, Arc::clone(&index));
        Ok(index)
    }

    /// The HNSW graph of a depth, if the index has one, loaded on first use (checked against
    /// its checksum first unless its seal matches).
    pub fn graph(&self, depth: usize) -> Result<Option<Arc<HnswIndex>>> {
        let mut cache = self.dense.lock().expect("dense cache lock");
        self.graph_locked(&mut cache, depth, Residence::Mapped)
    }

    /// [`graph`](Self::graph) with the cache already locked, read as `residence` says if it is
    /// not loaded yet (memory-mapped for searches, whole for a server's preload).
    fn graph_locked(
        &self,
        cache: &mut DenseCache,
        depth: usize,
        residence: Residence,
    ) -> Result<Option<Arc<HnswIndex>>> {
        let Some(file) = self.graphs.get(&depth) else {
            return Ok(None);
        };
        if let Some(graph) = cache.graphs.get(&depth) {
            return Ok(Some(Arc::clone(graph)));
        }
        // Sealed: the bytes are the build's, whose vectors were checked going in, so the mapped
        // graph is not scanned (that would read it whole). Otherwise hashed, and scanned.
        let mut sealed = false;
        if let Some(record) = self.record(file.path()) {
            let meta = file
                .file()
                .metadata()
                .with_context(|| format!("reading {}", file.path().display()))?;
            sealed = record.sealed(&meta);
            if !sealed {
                let sha256 = integrity::hash_open_file(file.file(), file.path())?;
                integrity::check_sha(file.path(), record, &sha256)?;
            }
        }
        let graph = Arc::new(HnswIndex::load(file, residence, !sealed)?);
        cache.graphs.insert(depth, Arc::clone(&graph));
        Ok(Some(graph))
    }

    fn record(&self, path: &Path) -> Option<&integrity::FileRecord> {
        let relative = path.strip_prefix(&self.dir).unwrap_or(path);
        integrity::record(&self.manifest.files, relative)
    }

    /// A depth's flat file, loaded as `residence` says whatever else the index holds (its
    /// checksum and values checked unless sealed, its values where the index records no
    /// checksum): `--verify` checks it against the graph, which searches use instead.
    pub(super) fn load_stored(&self, depth: usize, residence: Residence) -> Result<DenseIndex> {
        let file = self
            .files
            .get(&depth)
            .with_context(|| format!("the index stores no vectors for layer {depth}"))?;
        let record = self.record(file.path());
        let checks = match record {
            Some(record)
                if record.sealed(
                    &file
                        .file()
                        .metadata()
                        .with_context(|| format!("reading {}", file.path().display()))?,
                ) =>
            {
                Checks::None
            }
            Some(_) => Checks::ValuesAndHash,
            None => Checks::Values,
        };
        let (index, sha256) = file.load(residence, checks)?;
        if let (Some(record), Some(sha256)) = (record, sha256) {
            integrity::check_sha(file.path(), record, &sha256)?;
        }
        Ok(index)
    }
}
