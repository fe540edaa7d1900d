// The two calls on faiss's IndexHNSW that its C API (faiss_c 1.12) lacks; src/index/ann_ffi.rs
// declares them. Each catches every C++ exception (none may cross into Rust) and reports it
// through rag_faiss_last_error().

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>

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
