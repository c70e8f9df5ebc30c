//! The status page (`/`) and its data (`/status.json`) served by the real binary over a queue a
//! real run fills: the routes with their content types and the token, and the page in a real
//! headless Chromium, which shows the running task and follows the event stream without
//! reloading.

#[path = "support/browser.rs"]
mod browser;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/http_serve.rs"]
mod http_serve;

use browser::Browser;
use engine::{Repo, plan, task, wait_for};
use http_serve::serve;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// In task A's description: it must reach the page as text.
const HOSTILE: &str = "<b>bold</b> & <script>alert(1)</script>";

/// A repository whose agent works until the test creates its gate file: task A runs as long
/// as the test wants, then B after it.
struct Gated {
    repo: Repo,
    gate: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gated {
    fn new() -> Gated {
        let dir = tempfile::Builder::new()
            .prefix("whilly-gate-")
            .tempdir()
            .unwrap();
        let gate = dir.path().join("go");
        let agent = format!(
            r#"sh -c 'while [ ! -f {} ]; do sleep 0.1; done; mkdir -p files; echo done > "files/$WHILLY_TASK_ID.txt"; echo "<promise>COMPLETE</promise>"'"#,
            gate.display()
        );
        let mut a = task("A");
        a["description"] =
            format!("{HOSTILE}: the status page shows this task while it runs").into();
        let mut b = task("B");
        b["dependencies"] = serde_json::json!(["A"]);
        let mut p = plan("p", vec![a, b]);
        p["budget_usd"] = 5.0.into();
        Gated {
            repo: Repo::new(&p, &agent),
            gate,
            _dir: dir,
        }
    }

    fn open(&self) {
        std::fs::write(&self.gate, "go").unwrap();
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

async fn status_json(url: &str) -> Value {
    reqwest::get(format!("{url}/status.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `/status.json` until `ok` holds of it.
fn wait_status(url: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let rt = rt();
    wait_for(Duration::from_secs(60), what, || {
        let s = rt.block_on(status_json(url));
        ok(&s).then_some(s)
    })
}

fn runs_a(s: &Value) -> bool {
    s["running"][0]["task_id"] == "A" && s["running"][0]["status"] == "IN_PROGRESS"
}

#[test]
fn the_page_and_its_json_show_the_running_task() {
    let g = Gated::new();
    let run = g.repo.run_plan(&[], &[]);
    let s = serve(&g.repo, &[]);
    // The snapshot reads the events first (the page's stream goes on from the newest), so the
    // task may show as running a moment before its task.started is among the events.
    let snap = wait_status(&s.url, "task A running, its start among the events", |s| {
        runs_a(s)
            && s["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["event_type"] == "task.started"))
    });

    let plan = &snap["plans"][0];
    assert_eq!(plan["id"], "p");
    assert_eq!(
        (plan["done"].as_u64(), plan["total"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(plan["states"]["IN_PROGRESS"], 1);
    assert_eq!(plan["budget_usd"], 5.0);
    assert!(plan["remaining_usd"].as_f64().is_some_and(|r| r <= 5.0));
    let a = &snap["running"][0];
    assert_eq!(a["agent"], "fake", "the configured [run] agent");
    assert!(a["attempt"].as_str().unwrap().starts_with("1/"), "{a}");
    assert!(a["elapsed_secs"].as_i64().is_some(), "{a}");
    assert_eq!(
        a["title"],
        format!("{HOSTILE}: the status page shows this task while it runs")
    );
    let w = &snap["workers"][0];
    assert_eq!(w["online"], true, "the run is a worker: {w}");
    assert!(snap["inbox"].as_array().unwrap().is_empty());
    let events = snap["events"].as_array().unwrap();
    assert!(!events.is_empty());
    assert_eq!(events[0]["id"], snap["last_event_id"], "newest first");
    assert!(events.iter().any(|e| e["event_type"] == "task.started"));

    let rt = rt();
    rt.block_on(async {
        let resp = reqwest::get(format!("{}/", s.url)).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "text/html; charset=utf-8"
        );
        let html = resp.text().await.unwrap();
        for want in [
            r#"data-task="p/A""#,
            r#"<td data-label="Agent">fake</td>"#,
            "0/2 done",
            "$5.00",
            "task.started",
            "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;",
        ] {
            assert!(html.contains(want), "{want:?} not in\n{html}");
        }
        assert!(!html.contains(HOSTILE), "unescaped");
        assert_eq!(html.matches("<script>").count(), 1, "only the page's own");
    });

    g.open();
    let out = run.wait(Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}");
    let done = rt.block_on(status_json(&s.url));
    assert_eq!(done["plans"][0]["done"], 2, "{done}");
    assert!(done["running"].as_array().unwrap().is_empty(), "{done}");
}

#[test]
fn with_a_token_the_page_wants_it_as_bearer_or_basic() {
    let g = Gated::new();
    let token = "page-token-7f3a9c";
    let s = serve(&g.repo, &[("WHILLY_HTTP_TOKEN", token)]);
    let rt = rt();
    rt.block_on(async {
        let http = reqwest::Client::new();
        for path in ["/", "/status.json"] {
            let url = format!("{}{path}", s.url);
            let plain = http.get(&url).send().await.unwrap();
            assert_eq!(plain.status(), 401, "{path}");
            let challenges: Vec<&str> = plain
                .headers()
                .get_all("www-authenticate")
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect();
            assert!(
                challenges.iter().any(|c| c.starts_with("Basic ")),
                "a browser is asked for the token: {challenges:?}"
            );
            let wrong = http
                .get(&url)
                .basic_auth("whilly", Some("nope"))
                .send()
                .await
                .unwrap();
            assert_eq!(wrong.status(), 401, "{path}");
            let bearer = http.get(&url).bearer_auth(token).send().await.unwrap();
            assert_eq!(bearer.status(), 200, "{path}");
            let basic = http
                .get(&url)
                .basic_auth("anyone", Some(token))
                .send()
                .await
                .unwrap();
            assert_eq!(basic.status(), 200, "{path}");
        }
        // ?token= is not a way in: a token never goes in a URL.
        let q = http
            .get(format!("{}/?token={token}", s.url))
            .send()
            .await
            .unwrap();
        assert_eq!(q.status(), 401);
    });
    // Nothing the server wrote holds the token.
    let mut written = s.running.stdout_now() + &s.running.stderr_now();
    for f in walk(&g.repo.repo.join(".whilly")) {
        written.push_str(&String::from_utf8_lossy(
            &std::fs::read(f).unwrap_or_default(),
        ));
    }
    assert!(
        !written.contains(token),
        "the token leaked into output or .whilly/"
    );
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The page in a real browser: it shows the running task, then, as the run goes on, follows
/// the event stream to the end without reloading. Also a phone-sized window: nothing wider
/// than the screen.
#[test]
fn in_a_real_browser_the_page_follows_the_run_without_reloading() {
    let Some(b) = Browser::start() else { return };
    let g = Gated::new();
    let run = g.repo.run_plan(&[], &[]);
    let s = serve(&g.repo, &[]);
    wait_status(&s.url, "task A running", runs_a);

    b.goto(&format!("{}/", s.url));
    b.wait_until("the running task", Duration::from_secs(20), |b| {
        b.text_of("running").contains("A") && b.text_of("running").contains("fake")
    });
    b.wait_until("the stream to connect", Duration::from_secs(20), |b| {
        b.text_of("conn") == "live"
    });
    let running = b.text_of("running");
    assert!(running.contains(HOSTILE), "the title as text: {running}");
    let loaded = b.eval("window.whillyMarker = 'first-load'; return window.whillyLoadedAt;");
    assert!(loaded.as_f64().is_some(), "the page's script ran: {loaded}");

    let shot = b.screenshot();
    assert!(
        shot.starts_with(b"\x89PNG") && shot.len() > 10_000,
        "a real screenshot"
    );
    if let Some(out) = std::env::var_os("WHILLY_SCREENSHOT_OUT") {
        b.save_screenshot(std::path::Path::new(&out));
    }

    // On a phone's width the page fits: no sideways scrolling.
    b.set_window(390, 844);
    b.wait_until("the narrow layout", Duration::from_secs(5), |b| {
        b.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1;") == true
    });
    b.set_window(1280, 900);

    g.open();
    b.wait_until(
        "the page to show the run's end",
        Duration::from_secs(90),
        |b| {
            b.text_of("plans").contains("2/2 done")
                && b.text_of("running").contains("Nothing is running")
                && b.text_of("events").contains("task.done")
        },
    );
    assert_eq!(
        b.eval("return window.whillyMarker;"),
        "first-load",
        "updated in place, not reloaded"
    );
    assert_eq!(b.eval("return window.whillyLoadedAt;"), loaded);
    let out = run.wait(Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}");
}

/// With a token, a browser gets in with it as Basic credentials, and the page's stream and
/// refreshes carry them too: an event shows up live.
#[test]
fn in_a_real_browser_the_page_works_behind_the_token() {
    let Some(b) = Browser::start() else { return };
    let g = Gated::new();
    let out = g
        .repo
        .run(&["plan", "import", "plan.json"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    let token = "browser-token-51d0";
    let s = serve(&g.repo, &[("WHILLY_HTTP_TOKEN", token)]);
    let with_creds = s
        .url
        .replacen("http://", &format!("http://whilly:{token}@"), 1);
    b.goto(&format!("{with_creds}/"));
    b.wait_until("the page behind the token", Duration::from_secs(20), |b| {
        b.text_of("plans").contains("0/2 done") && b.text_of("conn") == "live"
    });
    b.eval("window.whillyMarker = 'first-load'; return 1;");
    let out = g.repo.run(&["plan", "pause", "p"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    b.wait_until("the pause, live", Duration::from_secs(30), |b| {
        b.text_of("events").contains("plan.paused") && b.text_of("plans").contains("paused")
    });
    assert_eq!(b.eval("return window.whillyMarker;"), "first-load");
}
