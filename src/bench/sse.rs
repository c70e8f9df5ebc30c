//! `whilly bench sse`: the event stream's fan-out. The baseline is the events table's own
//! insert rate, measured alone in the same run on the same queue; then the same number of
//! events is appended while N clients follow `/events/stream`, and the bench reports how fast
//! each client received them against that rate. A client the server cuts off (it fell behind
//! its buffer) reconnects with `Last-Event-ID`, as a browser does, and the reconnects are
//! counted.

use crate::bench::queue::Scratch;
use crate::http::{HttpOptions, start};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{NewEvent, Store};
use anyhow::Context as _;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct SseBenchOptions {
    pub clients: usize,
    pub events: usize,
    pub sqlite: bool,
    /// Server URL for Postgres (a scratch database is created on it and dropped); `None` skips it.
    pub postgres: Option<String>,
}

/// One backend's figures.
pub(crate) struct SseFigures {
    pub backend: &'static str,
    pub clients: usize,
    pub events: usize,
    /// Appends a second with nobody listening: the baseline.
    pub insert_alone: f64,
    /// Appends a second while the clients follow.
    pub insert_with_clients: f64,
    /// From the first append to the last client holding the last event.
    pub fan_out: Duration,
    /// Events each client received a second, on average over that time.
    pub per_client: f64,
    /// Events delivered a second over all clients.
    pub delivered: f64,
    /// Reconnects after the server cut a lagging client off.
    pub reconnects: usize,
}

impl SseFigures {
    /// Each client's delivery rate against the table's insert rate alone (1.0: every client
    /// keeps up with a writer that has the database to itself).
    pub(crate) fn ratio(&self) -> f64 {
        self.per_client / self.insert_alone.max(f64::MIN_POSITIVE)
    }
}

impl fmt::Display for SseFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "SSE fan-out — {}: {} events to {} clients",
            self.backend, self.events, self.clients
        )?;
        writeln!(
            f,
            "  events table, appends alone (baseline):   {:>10.0} events/s",
            self.insert_alone
        )?;
        writeln!(
            f,
            "  appends while {} clients follow:          {:>10.0} events/s",
            self.clients, self.insert_with_clients
        )?;
        writeln!(
            f,
            "  each client received:                     {:>10.0} events/s  (all in {:.2} s)",
            self.per_client,
            self.fan_out.as_secs_f64()
        )?;
        writeln!(
            f,
            "  delivered over all clients:               {:>10.0} events/s",
            self.delivered
        )?;
        writeln!(
            f,
            "  reconnects after a cut-off:               {:>10}",
            self.reconnects
        )?;
        write!(
            f,
            "  ratio (each client / appends alone):      {:>10.3}",
            self.ratio()
        )
    }
}

pub(crate) async fn run(opts: &SseBenchOptions) -> anyhow::Result<Vec<SseFigures>> {
    anyhow::ensure!(opts.clients > 0, "--clients must be at least 1");
    anyhow::ensure!(opts.events > 0, "--events must be at least 1");
    let mut out = Vec::new();
    if opts.sqlite {
        let dir = tempfile::Builder::new()
            .prefix("whilly-bench-sse-")
            .tempdir()
            .context("cannot create a scratch directory in the temp dir")?;
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("q.db"), None).await?);
        out.push(measure("SQLite (WAL)", store.clone(), opts).await?);
        store.close().await;
    }
    if let Some(server) = &opts.postgres {
        let scratch = Scratch::create(server).await?;
        let result = async {
            let store: Arc<dyn Store> = Arc::new(PgStore::connect(&scratch.url, None).await?);
            let figures = measure("Postgres", store.clone(), opts).await;
            store.close().await;
            figures
        }
        .await;
        scratch.drop_db().await;
        out.push(result?);
    }
    Ok(out)
}

async fn append(store: &dyn Store, n: usize) -> anyhow::Result<(i64, Duration)> {
    let started = Instant::now();
    let mut last = 0;
    for i in 0..n {
        last = store
            .append_event(NewEvent {
                event_type: "bench.sse".into(),
                payload: serde_json::json!({ "i": i }),
                ..NewEvent::default()
            })
            .await?
            .id;
    }
    Ok((last, started.elapsed()))
}

async fn measure(
    backend: &'static str,
    store: Arc<dyn Store>,
    opts: &SseBenchOptions,
) -> anyhow::Result<SseFigures> {
    let (baseline_last, alone) = append(&*store, opts.events).await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http = HttpOptions::new("127.0.0.1:0", None)?;
    let server = start(store.clone(), &http, Duration::from_secs(60), async {
        let _ = stop_rx.await;
    })
    .await?;
    let base = format!("http://{}", server.addr);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.clients)
        .build()?;
    // Every client is connected (its response headers arrived) before the first append.
    let mut connected = Vec::new();
    for _ in 0..opts.clients {
        let resp = client
            .get(format!("{base}/events/stream?after={baseline_last}"))
            .send()
            .await
            .context("a bench client could not connect to the event stream")?;
        anyhow::ensure!(
            resp.status().is_success(),
            "the event stream answered {}",
            resp.status()
        );
        connected.push(resp);
    }
    let (target_tx, target) = tokio::sync::watch::channel(i64::MAX);
    let mut followers = Vec::new();
    for resp in connected {
        followers.push(tokio::spawn(follow(
            client.clone(),
            base.clone(),
            resp,
            baseline_last,
            target.clone(),
        )));
    }
    let started = Instant::now();
    let (last, with_clients) = append(&*store, opts.events).await?;
    let _ = target_tx.send(last);
    let mut reconnects = 0;
    let mut slowest = Duration::ZERO;
    for f in followers {
        let (done_at, r) = tokio::time::timeout(Duration::from_secs(300), f)
            .await
            .context("a client did not receive every event within 5 minutes")???;
        reconnects += r;
        slowest = slowest.max(done_at.duration_since(started));
    }
    let _ = stop_tx.send(());
    drop(server);
    let secs = slowest.as_secs_f64().max(f64::MIN_POSITIVE);
    Ok(SseFigures {
        backend,
        clients: opts.clients,
        events: opts.events,
        insert_alone: opts.events as f64 / alone.as_secs_f64().max(f64::MIN_POSITIVE),
        insert_with_clients: opts.events as f64 / with_clients.as_secs_f64().max(f64::MIN_POSITIVE),
        fan_out: slowest,
        per_client: opts.events as f64 / secs,
        delivered: (opts.events * opts.clients) as f64 / secs,
        reconnects,
    })
}

/// Reads one client's stream until it holds the last event (known once the appends end),
/// reconnecting from its last id when the server ends the stream; returns when it got there
/// and how often it reconnected.
async fn follow(
    client: reqwest::Client,
    base: String,
    first: reqwest::Response,
    after: i64,
    mut target: tokio::sync::watch::Receiver<i64>,
) -> anyhow::Result<(Instant, usize)> {
    let mut resp = first;
    let mut seen = after;
    let mut reconnects = 0;
    let mut partial = String::new();
    loop {
        // The last id becomes known when the appends end: the client may hold it already.
        let chunk = tokio::select! {
            c = resp.chunk() => c?,
            changed = target.changed() => {
                if changed.is_err() || seen >= *target.borrow() {
                    return Ok((Instant::now(), reconnects));
                }
                continue;
            }
        };
        match chunk {
            Some(bytes) => {
                partial.push_str(&String::from_utf8_lossy(&bytes));
                // Whole events end with a blank line; keep the unfinished tail.
                if let Some(end) = partial.rfind("\n\n") {
                    for line in partial[..end].lines() {
                        if let Some(id) = line.strip_prefix("id:") {
                            seen = id.trim().parse().unwrap_or(seen);
                        }
                    }
                    partial.drain(..end + 2);
                }
                if seen >= *target.borrow() {
                    return Ok((Instant::now(), reconnects));
                }
            }
            None => {
                reconnects += 1;
                partial.clear();
                resp = client
                    .get(format!("{base}/events/stream"))
                    .header("Last-Event-ID", seen.to_string())
                    .send()
                    .await?;
            }
        }
    }
}
