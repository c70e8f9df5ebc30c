//! A real headless Chromium, driven over the W3C WebDriver protocol (plain HTTP to Debian's
//! `chromedriver`, with reqwest): open a page, run a script in it, take a screenshot.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str = "a headless Chromium is needed for this test and was not found.\n\
     Install Debian's packages: apt-get install -y chromium chromium-driver\n\
     (or point WHILLY_CHROMIUM / WHILLY_CHROMEDRIVER at the binaries), or set WHILLY_SKIP_BROWSER=1 to skip it.";

fn binary(var: &str, default: &str) -> PathBuf {
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(p.is_file(), "{} not found; {INSTALL_HINT}", p.display());
    p
}

pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A fresh headless browser; `None` when WHILLY_SKIP_BROWSER=1, a panic with the install
    /// hint when Chromium or its driver is missing.
    pub fn start() -> Option<Browser> {
        if std::env::var("WHILLY_SKIP_BROWSER").is_ok_and(|v| v == "1") {
            eprintln!("WHILLY_SKIP_BROWSER=1: skipping a headless Chromium test");
            return None;
        }
        let chromium = binary("WHILLY_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = binary("WHILLY_CHROMEDRIVER", "/usr/bin/chromedriver");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}; {INSTALL_HINT}", chromedriver.display()));
        let profile = tempfile::Builder::new()
            .prefix("whilly-chromium-")
            .tempdir()
            .unwrap();
        let mut b = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            http: reqwest::Client::new(),
            rt: tokio::runtime::Runtime::new().unwrap(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while b.call("GET", "/status", None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1280,900", "--hide-scrollbars", "--no-first-run",
                    format!("--user-data-dir={}", b._profile.path().display()),
                ],
            },
        }}});
        let v = b
            .call("POST", "/session", Some(caps))
            .unwrap_or_else(|e| panic!("creating a Chromium session: {e}"));
        b.session = v["sessionId"].as_str().unwrap().to_string();
        Some(b)
    }

    /// One WebDriver command; its `value`, or the error it answered.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        self.rt.block_on(async {
            let req = match method {
                "GET" => self.http.get(&url),
                "DELETE" => self.http.delete(&url),
                _ => self
                    .http
                    .post(&url)
                    .json(&body.unwrap_or_else(|| json!({}))),
            };
            let resp = req
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let ok = resp.status().is_success();
            let v: Value = resp.json().await.map_err(|e| e.to_string())?;
            if ok {
                Ok(v["value"].clone())
            } else {
                Err(v.to_string())
            }
        })
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body)
            .unwrap_or_else(|e| panic!("webdriver {method} {path}: {e}"))
    }

    pub fn goto(&self, url: &str) {
        self.session_call("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body: `return …`) in the page; its return value.
    pub fn eval(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// The visible text of the element with this id ("" when there is none).
    pub fn text_of(&self, id: &str) -> String {
        let script = format!(
            "var e = document.getElementById({}); return e ? e.innerText : '';",
            serde_json::to_string(id).unwrap()
        );
        self.eval(&script).as_str().unwrap_or_default().to_string()
    }

    /// Polls `check` until it holds; panics with `what` and the page's text after `limit`.
    pub fn wait_until(&self, what: &str, limit: Duration, check: impl Fn(&Browser) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if check(self) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "waited {limit:?} for {what}; the page says:\n{}",
                    self.eval("return document.body ? document.body.innerText : '';")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let b64 = self.session_call("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap()
    }

    /// Saves a screenshot to `path`.
    pub fn save_screenshot(&self, path: &Path) {
        let png = self.screenshot();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    pub fn set_window(&self, width: u32, height: u32) {
        self.session_call(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
