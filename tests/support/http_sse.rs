//! The HTTP/1.1 plumbing the scripted model servers share: a loopback listener running a
//! handler per connection on its own thread, a request reader (content-length or chunked), JSON
//! answers and server-sent events. Every answer closes its connection.
//!
//! Plain std threads: the crate's tokio has no `net` feature and the servers need one request
//! per connection, nothing more.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request as read off the wire.
pub struct Request {
    pub method: String,
    /// The request target, query included.
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The path without its query.
    pub fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// A listener on 127.0.0.1:<random> that hands each connection to `handler` on a new thread;
/// stops accepting when dropped. `stopped` tells long-running handlers (a hang) to give up.
pub struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    pub fn start<H>(handler: H) -> Listener
    where
        H: Fn(TcpStream, &AtomicBool) -> std::io::Result<()> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Arc::new(handler);
        let sp = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (h, s) = (handler.clone(), sp.clone());
                std::thread::spawn(move || {
                    if let Err(e) = h(conn, &s) {
                        eprintln!("model server: connection error: {e}");
                    }
                });
            }
        });
        Listener {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request; `None` when the client closed the connection without sending one.
pub fn read_request(stream: &TcpStream) -> std::io::Result<Option<Request>> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    let mut content_length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            content_length = value.parse().unwrap_or(0);
        }
        if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        }
        headers.push((name, value));
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; n];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else {
        body.resize(content_length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Error",
    }
}

/// A JSON answer; `extra_headers` are complete header lines, each ending in `\r\n`.
pub fn respond_json(
    stream: &mut TcpStream,
    status: u16,
    body: &Value,
    extra_headers: &str,
) -> std::io::Result<()> {
    let text = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra_headers}connection: close\r\n\r\n{text}",
        reason(status),
        text.len()
    )?;
    stream.flush()
}

/// The head of a `text/event-stream` answer; events follow with [`sse_event`].
pub fn start_sse(stream: &mut TcpStream, extra_headers: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n{extra_headers}connection: close\r\n\r\n"
    )?;
    stream.flush()
}

/// One server-sent event, with an `event:` line when `event` is given.
pub fn sse_event(stream: &mut TcpStream, event: Option<&str>, data: &str) -> std::io::Result<()> {
    if let Some(e) = event {
        writeln!(stream, "event: {e}")?;
    }
    write!(stream, "data: {data}\n\n")?;
    stream.flush()
}

/// Holds the connection open without answering until the listener stops (a hung provider).
pub fn hang(stop: &AtomicBool) -> std::io::Result<()> {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
