//! `rag serve` as a child process on a loopback port the OS picked, ready once `/health` says
//! so; killed when dropped. `RAG_BIN` names another binary (a copy set aside while others
//! rebuild a shared target directory, or another version to compare).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http;

/// The `rag` binary cargo built for this test, or the one `RAG_BIN` names (a copy set aside
/// while others rebuild a shared target directory).
pub fn rag() -> Command {
    std::env::var_os("RAG_BIN").map_or_else(crate::common::rag, Command::new)
}

/// `rag serve` as a child process, on a loopback port the OS picked; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Self {
        let mut child = rag()
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting rag serve");
        let stderr = child.stderr.take().expect("a piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    let _ = addr_tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                let mut log = lines.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut server = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| server.fail("never said where it listens"));
        server.addr = addr.parse().expect("a socket address");
        // Loading a GGUF takes seconds; the page waits for /health too, but the test's own
        // comparisons need the models.
        let deadline = Instant::now() + Duration::from_secs(300);
        while http::request(server.addr, "GET", "/health", &[], None)
            .map(|r| r.status)
            .ok()
            != Some(200)
        {
            if let Ok(Some(status)) = server.child.try_wait() {
                server.fail(&format!("exited with {status} while loading"));
            }
            if Instant::now() > deadline {
                server.fail("never became ready");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn fail(&self, what: &str) -> ! {
        panic!("rag serve {what}; its log:\n{}", self.log.lock().unwrap())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn get(&self, path: &str) -> http::Reply {
        http::get(self.addr, path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
