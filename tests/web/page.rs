//! The page's browser and its first step, shared by the page test and the page's measurement
//! (`eval/web/measure.rs`): where chromium and chromedriver are, and opening the page.

use std::path::PathBuf;
use std::time::Duration;

use crate::server::Server;
use crate::webdriver::Browser;

/// The file `env` names, else `default`, where it is there.
pub fn existing(env: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(env).map_or_else(|| PathBuf::from(default), PathBuf::from);
    path.is_file().then_some(path)
}

/// chromedriver and chromium (`RAG_CHROMEDRIVER`, `RAG_CHROMIUM` to name others).
pub fn browser_paths() -> Option<(PathBuf, PathBuf)> {
    Some((
        existing("RAG_CHROMEDRIVER", "/usr/bin/chromedriver")?,
        existing("RAG_CHROMIUM", "/usr/bin/chromium")?,
    ))
}

/// Opens the page and waits until it says the server is ready.
pub fn open_page(browser: &Browser, server: &Server) {
    browser.goto(&server.url("/"));
    browser.wait_for(
        "the page to say the server is ready",
        "return document.getElementById('status-line').textContent.startsWith('Ready')",
        Duration::from_secs(60),
    );
}
