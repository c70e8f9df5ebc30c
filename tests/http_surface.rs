//! `whilly serve` with the real binary over a queue a real run filled: every route's status
//! and content type, the metrics of a known run, the event stream replayed from an id and
//! resumed after a reconnect with `Last-Event-ID`, and the bearer token when one is set.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/http_serve.rs"]
mod http_serve;

use engine::{Repo, plan, task, wait_for};
use http_serve::serve;
use serde_json::Value;
use std::time::Duration;
use whilly::store::EventLog;

const AGENT: &str = r#"sh -c 'mkdir -p files; echo done > "files/$WHILLY_TASK_ID.txt"; echo "<promise>COMPLETE</promise>"'"#;

fn done_run() -> Repo {
    let repo = Repo::new(&plan("p", vec![task("A"), task("B")]), AGENT);
    let out = repo
        .spawn(&["run", "plan.json", "--headless"])
        .wait(Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    repo
}

/// The `data:` JSON of each event in an SSE body, with its `id:`.
fn sse_events(body: &str) -> Vec<(i64, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let id = block
                .lines()
                .find_map(|l| l.strip_prefix("id:"))?
                .trim()
                .parse()
                .ok()?;
            let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
            Some((id, serde_json::from_str(data.trim()).ok()?))
        })
        .collect()
}

/// Reads an SSE response until `enough` holds of what arrived (or `limit` passed). Each event
/// is parsed once, when its blank line arrives.
async fn read_stream(
    resp: reqwest::Response,
    limit: Duration,
    enough: impl Fn(&[(i64, Value)]) -> bool,
) -> Vec<(i64, Value)> {
    let mut resp = resp;
    let mut partial = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if enough(&events) {
            return events;
        }
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => take_events(&mut partial, &chunk, &mut events),
            _ => return events,
        }
    }
}

/// Adds `chunk` to `partial` and moves the events it completes to `events`.
fn take_events(partial: &mut String, chunk: &[u8], events: &mut Vec<(i64, Value)>) {
    partial.push_str(&String::from_utf8_lossy(chunk));
    if let Some(end) = partial.rfind("\n\n") {
        events.extend(sse_events(&partial[..end + 2]));
        partial.drain(..end + 2);
    }
}

#[test]
fn every_route_answers_and_the_metrics_tell_the_run() {
    let repo = done_run();
    let s = serve(&repo, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let get = |path: &str| http.get(format!("{}{path}", s.url)).send();
        let live = get("/health/live").await.unwrap();
        assert_eq!(live.status(), 200);
        let ready = get("/health/ready").await.unwrap();
        assert_eq!(ready.status(), 200);
        let health = get("/health").await.unwrap();
        assert_eq!(health.status(), 200);
        assert!(
            health.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let h: Value = health.json().await.unwrap();
        assert_eq!(h["backend"], "sqlite");
        assert_eq!(h["plans"][0]["id"], "p");
        assert_eq!(h["plans"][0]["done"], 2);

        let m = get("/metrics").await.unwrap();
        assert_eq!(m.status(), 200);
        assert!(
            m.headers()["content-type"]
                .to_str()
                .unwrap()
                .contains("openmetrics-text")
        );
        let text = m.text().await.unwrap();
        for line in [
            r#"whilly_tasks{plan="p",state="DONE"} 2"#,
            r#"whilly_tasks{plan="p",state="PENDING"} 0"#,
            "whilly_completes_total 2",
            "whilly_claims_total 2",
            "whilly_claims_pending 0",
            "whilly_task_duration_seconds_count 2",
            "whilly_queue_wait_seconds_count 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
        }
        assert!(!text.contains("task=\""), "no task ids in labels");
        assert_eq!(get("/nowhere").await.unwrap().status(), 404);
    });
}

#[test]
fn the_event_stream_replays_from_an_id_and_resumes_after_a_reconnect() {
    let repo = done_run();
    let all = repo.events(None);
    assert!(all.len() > 6, "a run writes events: {}", all.len());
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    let s = serve(&repo, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let resp = http
            .get(format!("{}/events/stream?after=0", s.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let got = read_stream(resp, Duration::from_secs(10), |e| e.len() >= ids.len()).await;
        let got_ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(got_ids, ids, "the whole trail, in order, ids as SSE ids");
        assert_eq!(got[0].1["id"], got[0].0);

        // Reconnect as a browser does: from the last id seen, nothing twice, nothing lost.
        let seen = ids[3];
        let resp = http
            .get(format!("{}/events/stream", s.url))
            .header("Last-Event-ID", seen.to_string())
            .send()
            .await
            .unwrap();
        // Something new happens while it is connected.
        let r = repo
            .spawn(&["plan", "pause", "p"])
            .wait(Duration::from_secs(30));
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let got = read_stream(resp, Duration::from_secs(10), |e| {
            e.iter().any(|(_, v)| v["event_type"] == "plan.paused")
        })
        .await;
        let got_ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            &got_ids[..ids.len() - 4],
            &ids[4..],
            "replayed after {seen}"
        );
        assert!(
            got.iter().any(|(_, v)| v["event_type"] == "plan.paused"),
            "then live: {got_ids:?}"
        );

        // ?plan= filters.
        let resp = http
            .get(format!("{}/events/stream?after=0&plan=nope", s.url))
            .send()
            .await
            .unwrap();
        // Nothing of another plan's arrives, however long one listens (here: two seconds).
        let got = read_stream(resp, Duration::from_secs(2), |e| !e.is_empty()).await;
        assert!(got.is_empty(), "{got:?}");
    });
}

#[test]
fn with_a_token_every_route_but_live_wants_it() {
    let repo = Repo::new(&plan("p", vec![task("A")]), AGENT);
    let token = "s3cret-token-for-the-test";
    let s = serve(&repo, &[("WHILLY_HTTP_TOKEN", token)]);
    assert!(
        s.running
            .stdout_now()
            .contains("a bearer token is required"),
        "it says so at start"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let url = |p: &str| format!("{}{p}", s.url);
        assert_eq!(
            http.get(url("/health/live")).send().await.unwrap().status(),
            200
        );
        for path in ["/health", "/health/ready", "/metrics", "/events/stream"] {
            let plain = http.get(url(path)).send().await.unwrap();
            assert_eq!(plain.status(), 401, "{path}");
            let wrong = http
                .get(url(path))
                .bearer_auth("nope")
                .send()
                .await
                .unwrap();
            assert_eq!(wrong.status(), 401, "{path}");
        }
        let ok = http
            .get(url("/metrics"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
    });
    // Off loopback without a token, it refuses to start.
    let out = repo
        .spawn(&["serve", "--http", "0.0.0.0:0"])
        .wait(Duration::from_secs(20));
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("[http] token"), "{}", out.stderr);
}

/// `--http` beside a run: the run's own queue is served while its agent works, and the
/// server ends with the run.
#[test]
fn a_run_serves_its_queue_while_it_works() {
    let slow = r#"sh -c 'sleep 3; mkdir -p files; echo done > "files/$WHILLY_TASK_ID.txt"; echo "<promise>COMPLETE</promise>"'"#;
    let repo = Repo::new(&plan("p", vec![task("A")]), slow);
    let running = repo.spawn(&["run", "plan.json", "--headless", "--http", "127.0.0.1:0"]);
    let url = wait_for(Duration::from_secs(20), "the server's address", || {
        http_serve::url_after(&running.stderr_now(), "serving ")
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let text = rt.block_on(async {
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let text = http
                .get(format!("{url}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let running_now = text
                .lines()
                .any(|l| l == r#"whilly_tasks{plan="p",state="IN_PROGRESS"} 1"#);
            if running_now || tokio::time::Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    assert!(
        text.lines()
            .any(|l| l == r#"whilly_tasks{plan="p",state="IN_PROGRESS"} 1"#),
        "{text}"
    );
    let out = running.wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let gone = rt.block_on(async { reqwest::get(format!("{url}/health/live")).await.is_err() });
    assert!(gone, "the server ends with the run");
}

/// A client that stops reading while the trail grows by far more than its buffer holds is cut
/// off cleanly (its stream ends; it never holds the server back: a reading client gets every
/// event meanwhile), and reconnecting with its last id gives exactly the rest: nothing twice,
/// nothing lost.
#[test]
fn a_lagging_client_is_cut_off_and_resumes_from_its_last_id() {
    use whilly::store::NewEvent;
    let repo = Repo::new(&plan("p", vec![task("A")]), AGENT);
    // The queue exists before the server opens it.
    let out = repo
        .spawn(&["plan", "import", "plan.json"])
        .wait(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let s = serve(&repo, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = whilly::store::sqlite::SqliteStore::open_in_repo(&repo.repo)
            .await
            .expect("open the repo's queue");
        let http = reqwest::Client::new();
        let first = store
            .events(&whilly::store::EventFilter::default())
            .await
            .unwrap();
        let before = first.last().map(|e| e.id).unwrap_or(0);
        // The stalled one: connected from the start, then never polled until the end (hyper
        // reads a response body only when asked, so the socket fills and the server's buffer
        // behind it).
        let stalled = http
            .get(format!("{}/events/stream?after={before}", s.url))
            .send()
            .await
            .unwrap();
        assert_eq!(stalled.status(), 200);
        let reader = http
            .get(format!("{}/events/stream?after={before}", s.url))
            .send()
            .await
            .unwrap();
        // Far more than the server's per-client buffer (2048 events) and the kernel's socket
        // buffers on loopback hold, padded so each event is about 1 KiB.
        let n: i64 = 12_000;
        let pad = "x".repeat(900);
        let writer = tokio::spawn(async move {
            let mut last = 0;
            for i in 0..n {
                let e = store
                    .append_event(NewEvent {
                        event_type: "test.flood".into(),
                        plan_id: Some("p".into()),
                        payload: serde_json::json!({ "i": i, "pad": pad }),
                        ..NewEvent::default()
                    })
                    .await
                    .expect("append");
                last = e.id;
            }
            last
        });
        let read_all = read_stream(reader, Duration::from_secs(120), |e| e.len() as i64 >= n);
        let (last, got) = tokio::join!(writer, read_all);
        let last = last.unwrap();
        let got_ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        let want: Vec<i64> = (before + 1..=last).collect();
        assert_eq!(got_ids.len(), want.len(), "the reading client got all");
        assert_eq!(got_ids, want, "in order, every one");

        // The stalled client now reads what was kept for it: a prefix, then the end.
        let kept = read_to_end(stalled, Duration::from_secs(60)).await;
        let kept_ids: Vec<i64> = kept.iter().map(|(id, _)| *id).collect();
        assert!(!kept_ids.is_empty(), "it had been sent something");
        assert_eq!(
            kept_ids,
            (before + 1..=*kept_ids.last().unwrap()).collect::<Vec<_>>()
        );
        let seen = *kept_ids.last().unwrap();
        assert!(
            seen < last,
            "it was cut off, not served everything: {seen} of {last}"
        );

        // It reconnects as a browser does, with the last id it saw, and gets exactly the rest.
        let resumed = http
            .get(format!("{}/events/stream", s.url))
            .header("Last-Event-ID", seen.to_string())
            .send()
            .await
            .unwrap();
        let rest = read_stream(resumed, Duration::from_secs(60), |e| {
            e.last().is_some_and(|(id, _)| *id >= last)
        })
        .await;
        let rest_ids: Vec<i64> = rest.iter().map(|(id, _)| *id).collect();
        assert_eq!(rest_ids, (seen + 1..=last).collect::<Vec<_>>());
    });
}

/// Reads an SSE response to its end (the server closed it); panics after `limit`.
async fn read_to_end(resp: reqwest::Response, limit: Duration) -> Vec<(i64, Value)> {
    let mut resp = resp;
    let mut partial = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => take_events(&mut partial, &chunk, &mut events),
            Ok(_) => return events,
            Err(_) => panic!(
                "the stream did not end within {limit:?}: {} events",
                events.len()
            ),
        }
    }
}
