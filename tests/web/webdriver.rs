//! A W3C WebDriver client for chromedriver driving headless chromium: the dozen commands the
//! page test uses, over the test's own HTTP client (no WebDriver crate to build).

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use super::http;

/// WebDriver's name for an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// WebDriver's code for the Enter key.
pub const ENTER: &str = "\u{E007}";

/// A chromedriver process and one browser session in it; both end when this is dropped.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    listener.local_addr().expect("a bound address").port()
}

impl Browser {
    /// Starts `chromedriver` and a headless `chromium` window of `width` x `height`.
    pub fn start(chromedriver: &Path, chromium: &Path, width: u32, height: u32) -> Self {
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut browser = Self {
            driver,
            addr,
            session: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http::request(addr, "GET", "/status", &[], None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                // No sandbox: CI runs as root, where chromium refuses to start with one.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--hide-scrollbars",
                         format!("--window-size={width},{height}")],
            },
        }}});
        let created = browser.command("POST", "/session", Some(&capabilities));
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {created}"))
            .to_string();
        browser
    }

    /// Sends a command and returns its `value`; a WebDriver error fails the test with its message.
    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let reply = http::request(self.addr, method, path, &[], body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let value = reply.json()["value"].take();
        assert!(
            reply.status == 200,
            "WebDriver {method} {path} failed ({}): {} {}",
            reply.status,
            value["error"],
            value["message"]
        );
        value
    }

    fn session_command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.command(method, &format!("/session/{}{path}", self.session), body)
    }

    pub fn goto(&self, url: &str) {
        self.session_command("POST", "/url", Some(&json!({ "url": url })));
    }

    pub fn resize(&self, width: u32, height: u32) {
        self.session_command(
            "POST",
            "/window/rect",
            Some(&json!({"width": width, "height": height})),
        );
    }

    /// The element matching a CSS selector (the test fails when there is none).
    pub fn find(&self, css: &str) -> String {
        let found = self.session_command(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        found[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("no element id for {css}: {found}"))
            .to_string()
    }

    /// Types `text` into the element, as keys (WebDriver codes such as [`ENTER`] included).
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css);
        self.session_command(
            "POST",
            &format!("/element/{element}/value"),
            Some(&json!({ "text": text })),
        );
    }

    pub fn clear(&self, css: &str) {
        let element = self.find(css);
        self.session_command(
            "POST",
            &format!("/element/{element}/clear"),
            Some(&json!({})),
        );
    }

    pub fn click(&self, css: &str) {
        let element = self.find(css);
        self.session_command(
            "POST",
            &format!("/element/{element}/click"),
            Some(&json!({})),
        );
    }

    /// Whether the page shows a dialog (`prompt`, `alert`), and its text.
    pub fn dialog(&self) -> Option<String> {
        let path = format!("/session/{}/alert/text", self.session);
        let reply = http::request(self.addr, "GET", &path, &[], None).ok()?;
        (reply.status == 200).then(|| reply.json()["value"].as_str().unwrap_or("").to_string())
    }

    /// Waits (up to `timeout`) for the page's `prompt`, types `text` into it and accepts it;
    /// returns what the prompt said.
    pub fn answer_prompt(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let asked = loop {
            if let Some(asked) = self.dialog() {
                break asked;
            }
            assert!(Instant::now() < deadline, "the page never prompted");
            std::thread::sleep(Duration::from_millis(50));
        };
        self.session_command("POST", "/alert/text", Some(&json!({ "text": text })));
        self.session_command("POST", "/alert/accept", Some(&json!({})));
        asked
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns its value.
    pub fn eval(&self, script: &str, args: &[Value]) -> Value {
        self.session_command(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": args})),
        )
    }

    /// Waits until `script` returns something truthy and returns it; on timeout the test fails
    /// with `what` and whatever the page shows in its error box.
    pub fn wait_for(&self, what: &str, script: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.eval(script, &[]);
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                let shown = self.eval("return document.getElementById('error').innerText", &[]);
                panic!("timed out waiting for {what}; the page's error box says: {shown}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG of the whole page at the window's width, below the fold too (chromium's
    /// DevTools command, which chromedriver passes on).
    pub fn screenshot(&self, path: &Path) {
        let shot = self.session_command(
            "POST",
            "/goog/cdp/execute",
            Some(&json!({"cmd": "Page.captureScreenshot",
                         "params": {"format": "png", "captureBeyondViewport": true}})),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .expect("the screenshot is base64");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http::request(
                self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                &[],
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
