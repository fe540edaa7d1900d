//! The distributed build and evaluation on a real Ray cluster (cluster/, eval/scale/): a 3-node
//! cluster in a private network namespace builds a 4-shard index of 300 paragraphs with the
//! tiny model while one worker node is lost mid-build (its raylet, then its workers, killed
//! with SIGKILL); the job completes (the lost node's task runs again elsewhere), and the sharded index ranks every test question
//! exactly like the single index built here, as does the evaluation run on the cluster.
//!
//! Needs Ray (`cluster/setup.sh`; `scripts/test.sh` installs it when RAG_REQUIRE is set, and
//! then requires it) and root for `unshare -n`. Every process it starts is stopped, by pid,
//! however it ends.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rag::encoder::Precision;
use rag::retrieve::{Mode, Retriever, SearchRequest, Strategy};

const TEST: &str = "cluster::a_killed_node_does_not_change_what_the_cluster_builds";

fn ray_venv() -> PathBuf {
    std::env::var_os("RAG_RAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/rag/ray-venv")
        })
}

fn script(name: &str) -> PathBuf {
    common::repo_root().join("cluster").join(name)
}

/// The local cluster, stopped (every process in its namespace, by pid) when dropped.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Self {
        let cluster = Cluster {
            dir: dir.to_path_buf(),
        };
        let out = Command::new(script("local-cluster.sh"))
            .arg("start")
            .arg(dir)
            .output()
            .unwrap();
        common::assert_success(&out);
        cluster
    }

    fn raylet(&self, node: usize) -> u32 {
        let path = self.dir.join(format!("node{node}.raylet.pid"));
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// `cluster/rag-ray ARGS` inside the cluster's namespace.
    fn rag_ray(&self, args: &[&str]) -> Command {
        let mut command = Command::new(script("local-cluster.sh"));
        command
            .arg("run")
            .arg(&self.dir)
            .arg(script("rag-ray"))
            .args(args);
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script("local-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing paren.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The processes descending from `ancestor`, with their command lines.
fn descendants(ancestor: u32) -> Vec<(u32, String)> {
    let descends = |pid: u32| {
        let mut at = pid;
        while let Some(up) = parent(at).filter(|&p| p > 1) {
            if up == ancestor {
                return true;
            }
            at = up;
        }
        false
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| descends(pid))
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&cmdline).into_owned())
        })
        .collect()
}

fn kill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Waits for `child` at most `limit`, killing it after; its stdout and whether it succeeded.
fn finish(mut child: std::process::Child, limit: Duration) -> (bool, String, String) {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

#[test]
fn a_killed_node_does_not_change_what_the_cluster_builds() {
    if !ray_venv().join("bin/ray").exists() {
        common::missing(
            TEST,
            "ray",
            "Ray is not installed (cluster/setup.sh installs it)",
        );
        return;
    }
    if !Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        common::skip(
            TEST,
            "cannot make a network namespace (unshare -n needs root)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(dir.path(), 60, 5);
    let single = dir.path().join("single");
    rag::index::build(&common::tiny_build_options(&model, corpus.clone(), &single)).unwrap();

    // rag, two seconds late: every shard's task is still running when the raylet is killed.
    let slow_rag = dir.path().join("slow-rag");
    std::fs::write(
        &slow_rag,
        format!(
            "#!/bin/sh\nsleep 2\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_rag")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&slow_rag, std::fs::Permissions::from_mode(0o755)).unwrap();

    let cluster = Cluster::start(&dir.path().join("cluster"));
    let sharded = dir.path().join("sharded");
    let (sharded_arg, rag_arg) = (sharded.to_str().unwrap(), slow_rag.to_str().unwrap());
    let (model_arg, corpus_arg) = (model.to_str().unwrap(), corpus.to_str().unwrap());
    let driver = cluster
        .rag_ray(&[
            "index",
            "--index",
            sharded_arg,
            "--shards",
            "4",
            "--rag",
            rag_arg,
            "--json",
            "--",
            "--model",
            model_arg,
            "--corpus",
            corpus_arg,
            "--layers",
            "1,3",
            "--dim",
            "16",
            "--chunk-size",
            "8",
            // The single index above is f32; `rag index` defaults to bf16 on AMX CPUs.
            "--precision",
            "f32",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let victim = cluster.raylet(1);
    let started = Instant::now();
    let workers = loop {
        let workers = descendants(victim);
        if workers.iter().any(|(_, cmdline)| cmdline.contains(rag_arg)) {
            break workers;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no shard task ever ran on node 1"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The raylet first; then, as when a machine goes down, its workers, which could otherwise
    // still finish the task they hold and report it to the driver directly.
    kill(victim);
    for (pid, _) in workers {
        kill(pid);
    }

    let (ok, out, err) = finish(driver, Duration::from_secs(120));
    assert!(ok, "the driver failed: {err}");
    let summary: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{e}: the driver printed {out:?}; stderr {err}"));
    assert!(summary["retries"].as_u64().unwrap() >= 1, "{summary}");
    let shards = summary["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4);
    assert!(
        shards.iter().all(|s| s["node"] != "node1"),
        "a shard finished on the killed node: {summary}"
    );
    assert_eq!(summary["rag"]["documents"], 300, "{summary}");
    assert!(err.contains("[4/4]"), "no progress lines: {err}");

    // The same top 10 as the single index, for every question, in every one-hop mode.
    let one = Retriever::open(&single, None, Precision::F32).unwrap();
    let many = Retriever::open(&sharded, None, Precision::F32).unwrap();
    for mode in Mode::ALL {
        for n in (0..300).step_by(23) {
            let query = format!("what is topic {n} about? river film");
            let request = SearchRequest {
                query: &query,
                k: 10,
                strategy: Strategy::new(mode, 1).unwrap(),
                layers: Some(3),
                dim: Some(16),
            };
            let ids = |r: &Retriever| {
                let hits = r.search(&request).unwrap().hits;
                hits.iter()
                    .map(|h| (h.id, h.title.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(&one), ids(&many), "{mode} {query:?}");
        }
    }

    // The evaluation on the cluster (two nodes left) writes the run folder of a local one.
    let questions = dir.path().join("questions.json");
    common::write_topic_questions(&questions, 20);
    let runs = dir.path().join("runs");
    let dense_3 = ("dense", "3");
    let mut args = vec![
        "eval",
        "--index",
        sharded_arg,
        "--rag",
        env!("CARGO_BIN_EXE_rag"),
        "--",
    ];
    args.extend(common::retrieval_eval_flags(
        &questions, &runs, "cluster", dense_3,
    ));
    let driver = cluster
        .rag_ray(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, out, err) = finish(driver, Duration::from_secs(90));
    assert!(ok, "rag-ray eval failed: {err}");
    assert!(out.contains("evaluated 4 shards"), "{out}");
    common::succeed(&common::retrieval_eval_args(
        &single,
        &questions,
        &runs,
        "local",
        dense_3,
        &[],
    ));
    let (local, cluster) = (
        common::run_result(&runs.join("local")),
        common::run_result(&runs.join("cluster")),
    );
    assert_eq!(local.0.len(), 20);
    assert_eq!(local, cluster);
}
