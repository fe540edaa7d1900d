// The calls on faiss's IndexHNSW that its C API (faiss_c 1.12) lacks; src/index/ann_ffi.rs
// declares them. Each catches every C++ exception (none may cross into Rust) and reports it
// through rag_faiss_last_error().

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/index_io.h>

#include <cstdint>
#include <cstdio>
#include <exception>

namespace {
thread_local char last_error[512];

void set_error(const char* message) {
    std::snprintf(last_error, sizeof last_error, "%s", message);
}
} // namespace

extern "C" {

const char* rag_faiss_last_error() {
    return last_error;
}

// The IndexFlat an IndexHNSW keeps its vectors in (owned by the graph, freed with it), or
// null if `index` is not an IndexHNSW over an IndexFlat.
faiss::Index* rag_hnsw_flat_storage(faiss::Index* index) {
    auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(index);
    if (hnsw == nullptr) {
        return nullptr;
    }
    return dynamic_cast<faiss::IndexFlat*>(hnsw->storage);
}

// faiss's IO_FLAG_MMAP_IFC as the linked faiss defines it (1 << 9 in 1.12): read_index then
// maps the file and makes the graph's links and its flat storage views of it, instead of
// copies. Taken from the header rather than written in Rust: the `faiss` crate's
// IoFlags::MEM_MAP (0x01) is IO_FLAG_SKIP_STORAGE in this faiss, which maps nothing.
int rag_faiss_io_flag_mmap() {
    return faiss::IO_FLAG_MMAP_IFC;
}

// Whether the graph's links are a view of a memory-mapped file (read with faiss's
// IO_FLAG_MMAP_IFC) rather than owned in memory: 1 mapped, 0 owned, -1 not an IndexHNSW.
int rag_hnsw_is_mapped(const faiss::Index* index) {
    auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(index);
    if (hnsw == nullptr) {
        return -1;
    }
    return hnsw->hnsw.neighbors.is_owned ? 0 : 1;
}

// IndexHNSW::search with efSearch given for this call alone (SearchParametersHNSW), so
// concurrent searches at different efSearch need no lock: the index is only read. 0 on
// success, -1 with rag_faiss_last_error() set otherwise.
int rag_hnsw_search(
        const faiss::Index* index,
        int64_t n,
        const float* x,
        int64_t k,
        int ef_search,
        float* distances,
        int64_t* labels) {
    try {
        auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(index);
        if (hnsw == nullptr) {
            set_error("the index is not an IndexHNSW");
            return -1;
        }
        faiss::SearchParametersHNSW params;
        params.efSearch = ef_search;
        hnsw->search(n, x, k, distances, labels, &params);
        return 0;
    } catch (const std::exception& e) {
        set_error(e.what());
        return -1;
    } catch (...) {
        set_error("unknown C++ exception");
        return -1;
    }
}

} // extern "C"
