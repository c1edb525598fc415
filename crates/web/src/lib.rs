//! rocelink's HTTP server: the Prometheus endpoint (`--metrics`) today, one server for
//! whatever a running command publishes over HTTP.
//!
//! Built on hyper (through axum's router) on a tokio runtime of its own thread, so the
//! packet loops never wait for a client:
//! * every connection is a task of its own: one slow, idle or malicious client cannot
//!   delay another's request;
//! * a request head must arrive within [`Limits::header_timeout`] (slowloris), a whole
//!   exchange within [`Limits::request_timeout`], and at most [`Limits::max_connections`]
//!   are open at once: a new connection beyond that closes the oldest one still waiting
//!   for its request head, so a fresh request gets in however many slow clients there are
//!   (it waits only while every slot is answering a request);
//! * addresses: loopback by default; a wildcard (`0.0.0.0`, `::`) only when asked for
//!   ([`Exposure::Public`]) — see [`check_addr`].
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use axum::Router;
use axum::routing::get;
use rocelink_runtime::counters::Board;
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a server allows each client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time for a request's head to arrive.
    pub header_timeout: Duration,
    /// Time for a whole exchange (request and answer) of a plain request.
    pub request_timeout: Duration,
}

impl Default for Limits {
    /// 64 connections, 5 s for a head, 10 s for an exchange.
    fn default() -> Self {
        Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// Who may reach a server's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Only loopback and addresses named explicitly.
    Local,
    /// Also every interface (`0.0.0.0`, `::`).
    Public,
}

/// Whether a server may listen at `addr`: loopback always; a wildcard only when
/// [`Exposure::Public`]; another address (one interface) with a warning for the caller to
/// print. `flag` names the option in messages.
pub fn check_addr(
    addr: SocketAddr,
    exposure: Exposure,
    flag: &str,
) -> Result<Option<String>, String> {
    let ip = addr.ip();
    if ip.is_loopback() {
        return Ok(None);
    }
    if ip.is_unspecified() {
        return match exposure {
            Exposure::Public => Ok(Some(format!(
                "{flag} {addr}: serving every interface; anyone who can reach this host reads it"
            ))),
            Exposure::Local => Err(format!(
                "{flag} {addr} would serve every interface: give a loopback or one interface's address, or add {flag}-public"
            )),
        };
    }
    Ok(Some(format!(
        "{flag} {addr}: reachable by anyone who can reach that interface"
    )))
}

/// A server running on a thread of its own; stops when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Listen at `addr` (bound before this returns: a taken address is an error now) and
    /// serve `app` within `limits`.
    pub fn start(addr: SocketAddr, app: Router, limits: Limits, name: &str) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("{name} at {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("rocelink-{name}"))
            .spawn(move || rt.block_on(serve(listener, app, limits, rx)))?;
        Ok(Server {
            addr,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The connections being served, oldest first: whether each has sent its request head
/// yet (one that has not is idle, and is the first to go when the server is full).
type Table = Arc<Mutex<VecDeque<Conn>>>;

#[derive(Debug)]
struct Conn {
    head: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

/// Accept until `stop`: each connection its own task, at most `limits.max_connections`.
/// A connection beyond that sheds the oldest one still waiting for its request head, so a
/// fresh request always gets in however many slow clients hold the slots; only when every
/// slot is answering a request does a new one wait (for at most a request's time).
async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let table: Table = Arc::default();
    loop {
        let conn = tokio::select! {
            _ = &mut stop => return,
            c = listener.accept() => c,
        };
        let Ok((stream, _)) = conn else {
            continue;
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                shed_oldest_idle(&table);
                tokio::select! {
                    _ = &mut stop => return,
                    p = slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                }
            }
        };
        let head = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(exchange(stream, app.clone(), limits, head.clone(), permit));
        lock(&table).push_back(Conn {
            head,
            task: task.abort_handle(),
        });
    }
}

/// Close the oldest connection that has not sent its request head (its task's end frees
/// its slot); forget those that ended.
fn shed_oldest_idle(table: &Table) {
    let mut t = lock(table);
    t.retain(|c| !c.task.is_finished());
    if let Some(i) = t.iter().position(|c| !c.head.load(Ordering::Relaxed))
        && let Some(c) = t.remove(i)
    {
        c.task.abort();
    }
}

fn lock(table: &Table) -> std::sync::MutexGuard<'_, VecDeque<Conn>> {
    // the table holds no invariant a panic could break: take it even if poisoned
    table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One connection: its request head within `header_timeout`, the whole exchange within
/// `request_timeout`; `head` is set once the head has arrived (the request reached `app`).
async fn exchange(
    stream: tokio::net::TcpStream,
    app: Router,
    limits: Limits,
    head: Arc<AtomicBool>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc = hyper::service::service_fn(move |req| {
        head.store(true, Ordering::Relaxed);
        tower::ServiceExt::oneshot(app.clone(), req)
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(false);
    let _ = tokio::time::timeout(limits.request_timeout, http.serve_connection(io, svc)).await;
    drop(permit);
}

/// `GET /metrics` (and `/`): the counters on `board` in Prometheus' text format.
pub fn metrics(board: Board) -> Router {
    let text = move || {
        let b = board.clone();
        async move {
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                b.snapshot().prometheus(),
            )
        }
    };
    Router::new()
        .route("/metrics", get(text.clone()))
        .route("/", get(text))
        .fallback(|| async {
            (
                axum::http::StatusCode::NOT_FOUND,
                "rocelink serves GET /metrics\n",
            )
        })
}
