//! Compiles `src/index/faiss_hnsw.cpp`: the two calls on faiss's `IndexHNSW` that its C API
//! (`faiss_c`, which the `faiss` crate wraps) lacks, against the headers faiss-sys installed
//! with the library it built (`DEP_FAISS_C_ROOT`), so the shim and the library always agree.

fn main() {
    let shim = "src/index/faiss_hnsw.cpp";
    println!("cargo:rerun-if-changed={shim}");
    println!("cargo:rerun-if-env-changed=DEP_FAISS_C_ROOT");
    let Ok(root) = std::env::var("DEP_FAISS_C_ROOT") else {
        panic!("faiss-sys did not say where it installed faiss (DEP_FAISS_C_ROOT): build it with its `static` feature");
    };
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        // faiss's headers as system headers: their warnings are not ours.
        .flag("-isystem")
        .flag(format!("{root}/include"))
        .file(shim)
        .compile("rag_faiss_hnsw");
}
