//! `RAG_MAX_ISA` caps the encoder's kernels (so an AVX-512 machine can run and time the AVX2
//! path): what `rag bench encode` reports running is the narrower of the cap and the CPU, and a
//! misspelt cap is refused rather than ignored.

mod common;

/// The widest set this CPU offers the kernels, as `rag` names it.
fn widest_on_this_cpu() -> &'static str {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    if has("avx512f") {
        "avx512"
    } else if has("avx2") && has("fma") {
        "avx2"
    } else {
        "none"
    }
}

const ORDER: [&str; 3] = ["none", "avx2", "avx512"];

#[test]
fn bench_encode_runs_the_kernels_the_cap_allows() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 4, 4);
    let cpu = ORDER
        .iter()
        .position(|&s| s == widest_on_this_cpu())
        .unwrap();
    for (cap_at, cap) in ORDER.iter().enumerate() {
        let out = common::rag()
            .env("RAG_MAX_ISA", cap)
            .args(["bench", "encode", "--corpus"])
            .arg(&corpus)
            .arg("--model")
            .arg(&model)
            .args([
                "--limit",
                "16",
                "--layers",
                "2",
                "--precision",
                "f32",
                "--json",
            ])
            .output()
            .unwrap();
        common::assert_success(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            report["kernels"],
            ORDER[cap_at.min(cpu)],
            "RAG_MAX_ISA={cap} on a CPU whose widest is {}",
            ORDER[cpu]
        );
    }
}

#[test]
fn a_misspelt_cap_is_refused_naming_the_variable() {
    // Checked before the command runs: the missing index is never reached.
    let out = common::rag()
        .env("RAG_MAX_ISA", "avx-512")
        .args(["search", "--index", "/nonexistent", "anything"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("RAG_MAX_ISA") && stderr.contains("avx-512"),
        "{stderr}"
    );
}
