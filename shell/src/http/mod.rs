//! The metrics and health HTTP server: `/metrics`, `/healthz`, `/readyz`
//! over HTTP/1.1 (hyper), built to sit on a host port that anyone on the
//! network can reach.
//!
//! What keeps it up ([`Config`] has the numbers):
//! - **Timeouts.** A request head must arrive within `header_timeout` of
//!   the connection's accept or of the previous response (hyper's header
//!   read timeout; this is also the keep-alive idle timeout), and a request
//!   must be answered, its response handed to the socket, within
//!   `request_timeout` of its head. A connection past either is closed.
//! - **Caps.** At most `max_connections` connections, at most
//!   `max_connections_per_source` from one address. A newcomer at a cap
//!   displaces the connection whose current phase is the oldest, of its
//!   own source at the per-source cap, else of the sources holding the
//!   most slots: slow and idle connections go, and a prober with one
//!   connection keeps it against a flood from fewer addresses than slots.
//! - **Keep-alive limits.** At most `max_requests_per_connection` requests
//!   on one connection (the last response says `Connection: close`), and
//!   the idle timeout above.
//! - **Accept backoff.** When `accept` fails for want of resources
//!   (EMFILE, ENFILE, ENOBUFS, ENOMEM, anything not about one connection),
//!   the server sleeps, doubling from `accept_backoff_min` to
//!   `accept_backoff_max`, instead of spinning on a listener that stays
//!   readable: the runtime's other tasks keep their thread.
//! - **Graceful shutdown.** [`Handle::shutdown`] stops accepting, lets
//!   requests in flight finish for up to `shutdown_grace`, then closes the
//!   rest.
//!
//! [`Server::spawn_secure`] serves the same metrics over TLS with a bearer
//! token checked against the Kubernetes API ([`review`], [`secure`]): the
//! listener MetalLB's ServiceMonitor and PodMonitor scrape. Only
//! `/metrics` is served there; the limits above hold for it too, the TLS
//! handshake included (it must end within `header_timeout` of the
//! accept), and the token review counts toward `request_timeout`.

pub mod review;
pub mod secure;
mod slots;
pub mod text;

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, trace, warn};

use self::review::{Gate, Verdict};
use self::secure::{CertSource, Secure};
use self::slots::Slots;
pub use self::text::{CHUNK, Chunks, Text};
use crate::health::Health;

/// The server's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Connections held at once (at least 1). Prometheus and the kubelet's
    /// probes need a handful; each connection costs a file descriptor and
    /// hyper's buffers (about 16 KiB).
    pub max_connections: usize,
    /// Connections held at once from one IP address (at least 1).
    pub max_connections_per_source: usize,
    /// Time for a request head to arrive, from the accept or the previous
    /// response; also the keep-alive idle timeout.
    pub header_timeout: Duration,
    /// Time from a request head to its whole response handed to the socket
    /// (a client that does not read its response is closed after it).
    pub request_timeout: Duration,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_connection: u32,
    /// Largest request head accepted, in bytes (hyper's buffer; at least
    /// 8192).
    pub max_header_bytes: usize,
    /// First sleep after an `accept` error for want of resources.
    pub accept_backoff_min: Duration,
    /// Longest sleep between `accept` attempts while they keep failing.
    pub accept_backoff_max: Duration,
    /// How long [`Handle::shutdown`] lets requests in flight finish.
    pub shutdown_grace: Duration,
}

impl Default for Config {
    /// 64 connections, 8 per source, 5 s for a head, 10 s for a response,
    /// 100 requests per connection, 8 KiB heads, accept backoff from 10 ms
    /// to 1 s, 2 s of grace. The kubelet's probes time out after 1 s by
    /// default; they are answered in well under that while 64 slowloris
    /// connections are held, because the slowest connection makes room.
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_connections_per_source: 8,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_requests_per_connection: 100,
            max_header_bytes: 8192,
            accept_backoff_min: Duration::from_millis(10),
            accept_backoff_max: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

/// What the server answers: the metrics text and the health registry.
#[derive(Clone)]
pub struct Routes {
    metrics: Arc<dyn Fn() -> Text + Send + Sync>,
    health: Health,
}

impl Routes {
    /// `GET /metrics` answers `metrics()` (Prometheus text format 0.0.4)
    /// and the health gauges;
    /// `/healthz` and `/readyz` answer from `health`.
    pub fn new(health: Health, metrics: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self::streamed(health, move || Text::from(metrics()))
    }

    /// As [`Routes::new`], the metrics a [`Text`]: its [`Chunks`] are
    /// written as they are sent, a [`CHUNK`] at a time, other tasks
    /// running between chunks (measured first the same way, for the
    /// `Content-Length`).
    pub fn streamed(health: Health, metrics: impl Fn() -> Text + Send + Sync + 'static) -> Self {
        Self {
            metrics: Arc::new(metrics),
            health,
        }
    }

    /// The answer to `method path` (no I/O; the checks and the metrics
    /// closure run here):
    /// - `GET /metrics`: 200 with the exposition text, and the health
    ///   registry's gauges ([`crate::health::Report::render_metrics`]);
    /// - `GET /healthz`: 200 `ok`, or 500 naming each failed component;
    /// - `GET /readyz`: 200 `ok`, or 503 naming each component not ready;
    /// - other paths 404; methods other than GET and HEAD 405.
    pub fn respond(&self, method: &Method, path: &str) -> (StatusCode, &'static str, String) {
        let Reply {
            status,
            content_type,
            body,
        } = self.reply(method, path);
        (status, content_type, body.into_string())
    }

    /// [`Routes::respond`], the body as it is sent.
    fn reply(&self, method: &Method, path: &str) -> Reply {
        const TEXT: &str = "text/plain";
        if method != Method::GET && method != Method::HEAD {
            return (
                StatusCode::METHOD_NOT_ALLOWED,
                TEXT,
                "method not allowed\n".to_owned(),
            )
                .into();
        }
        match path {
            "/metrics" => {
                let mut text = (self.metrics)();
                text.push_str(self.health.report().render_metrics());
                Reply {
                    status: StatusCode::OK,
                    content_type: "text/plain; version=0.0.4",
                    body: text,
                }
            }
            "/healthz" => {
                let report = self.health.report();
                if report.is_live() {
                    (StatusCode::OK, TEXT, "ok\n".to_owned()).into()
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, TEXT, report.failures()).into()
                }
            }
            "/readyz" => {
                let report = self.health.report();
                if report.is_ready() {
                    (StatusCode::OK, TEXT, "ok\n".to_owned()).into()
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, TEXT, report.not_ready()).into()
                }
            }
            _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()).into(),
        }
    }
}

/// A bound listener, not serving yet.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    config: Config,
}

/// A running server. Dropping it leaves the server running for as long as
/// the runtime does; [`Handle::shutdown`] stops it.
#[derive(Debug)]
pub struct Handle {
    local: SocketAddr,
    stop: CancellationToken,
    force: CancellationToken,
    tracker: TaskTracker,
    grace: Duration,
}

impl Server {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr, config: Config) -> io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(addr).await?,
            config,
        })
    }

    /// The bound address (the port chosen for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts serving `routes` in background tasks (inside a tokio
    /// runtime).
    pub fn spawn(self, routes: Routes) -> io::Result<Handle> {
        self.start(routes, None)
    }

    /// Starts serving `GET /metrics` from `routes` over TLS to requests
    /// whose bearer token `secure`'s gate allows (401 without or with a bad
    /// token, 403 when its user may not get `/metrics`, 500 when the API
    /// cannot say); every other path is 404. Warns once of what in the TLS
    /// flags rustls cannot honour. A certificate directory is re-read every
    /// [`CERT_RELOAD`] and a changed, valid pair replaces the certificate.
    pub fn spawn_secure(self, routes: Routes, secure: Secure) -> io::Result<Handle> {
        for note in &secure.notes {
            warn!(note = %note, "secure metrics: TLS setting not honoured");
        }
        review::started();
        self.start(routes, Some(secure))
    }

    fn start(self, routes: Routes, secure: Option<Secure>) -> io::Result<Handle> {
        let local = self.listener.local_addr()?;
        let c = &self.config;
        match secure.as_ref().map(|s| &s.source) {
            None => info!(
                addr = %local,
                max_connections = c.max_connections,
                max_connections_per_source = c.max_connections_per_source,
                header_timeout_ms = millis(c.header_timeout),
                request_timeout_ms = millis(c.request_timeout),
                "metrics server listening"
            ),
            Some(source) => info!(
                addr = %local,
                max_connections = c.max_connections,
                max_connections_per_source = c.max_connections_per_source,
                header_timeout_ms = millis(c.header_timeout),
                request_timeout_ms = millis(c.request_timeout),
                certificate = %match source {
                    CertSource::Dir(dir) => dir.display().to_string(),
                    CertSource::SelfSigned => "self-signed".to_owned(),
                },
                cache_allowed_ttl_ms = millis(review::ALLOWED_TTL),
                cache_denied_ttl_ms = millis(review::DENIED_TTL),
                "secure metrics server listening"
            ),
        }
        let stop = CancellationToken::new();
        let force = CancellationToken::new();
        let tracker = TaskTracker::new();
        let (tls, watched) = match secure {
            Some(s) => (
                Some(Tls {
                    acceptor: s.acceptor,
                    gate: s.gate,
                }),
                s.watched,
            ),
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            slots: Mutex::new(Slots::new(c.max_connections, c.max_connections_per_source)),
            permits: Arc::new(Semaphore::new(c.max_connections.max(1))),
            routes,
            config: self.config.clone(),
            stop: stop.clone(),
            force: force.clone(),
            tracker: tracker.clone(),
            tls,
        });
        if let Some(mut watched) = watched {
            let stop = stop.clone();
            tracker.spawn(async move {
                let mut tick = tokio::time::interval(CERT_RELOAD);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut failing = false;
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        () = stop.cancelled() => break,
                    }
                    match watched.reload() {
                        Ok(true) => {
                            failing = false;
                            info!(dir = %watched.dir().display(), "secure metrics: certificate reloaded");
                        }
                        Ok(false) => failing = false,
                        Err(e) if !failing => {
                            failing = true;
                            warn!(error = %e, "secure metrics: cannot reload the certificate; keeping the one in use");
                        }
                        Err(_) => {}
                    }
                }
            });
        }
        tracker.spawn(accept_loop(self.listener, shared));
        Ok(Handle {
            local,
            stop,
            force,
            tracker,
            grace: self.config.shutdown_grace,
        })
    }
}

/// How often a certificate directory is re-read.
pub const CERT_RELOAD: Duration = Duration::from_secs(10);

impl Handle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops accepting, lets requests in flight finish (idle connections
    /// close at once) for up to the configured grace, then closes what is
    /// left. Returns when every connection is closed.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tracker.close();
        if tokio::time::timeout(self.grace, self.tracker.wait())
            .await
            .is_err()
        {
            debug!("metrics server: grace over, closing the remaining connections");
            self.force.cancel();
            self.tracker.wait().await;
        }
        info!("metrics server stopped");
    }
}

/// What the accept loop and the connection tasks share.
struct Shared {
    slots: Mutex<Slots<Arc<Notify>>>,
    /// One per connection task: bounds the sockets held, evicted ones
    /// included until their task has closed them.
    permits: Arc<Semaphore>,
    routes: Routes,
    config: Config,
    stop: CancellationToken,
    force: CancellationToken,
    tracker: TaskTracker,
    /// The secure listener's TLS and token gate.
    tls: Option<Tls>,
}

struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    gate: Arc<Gate>,
}

impl Shared {
    fn slots(&self) -> MutexGuard<'_, Slots<Arc<Notify>>> {
        // Each table operation is a few map updates that cannot panic
        // half-way: the table stays consistent.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let cfg = &shared.config;
    let mut delay = cfg.accept_backoff_min;
    // The current run of failed accepts: how many, since when.
    let mut failing: Option<(u64, Instant)> = None;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = shared.stop.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) if about_one_connection(&e) => {
                debug!(error = %e, "metrics server: accept failed for one connection");
                continue;
            }
            Err(e) => {
                let (errors, _) = failing.get_or_insert((0, Instant::now()));
                *errors += 1;
                if *errors == 1 {
                    warn!(error = %e, retry_in_ms = millis(delay), "metrics server cannot accept; backing off");
                } else {
                    debug!(error = %e, retry_in_ms = millis(delay), errors = *errors, "metrics server cannot accept; backing off");
                }
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shared.stop.cancelled() => break,
                }
                delay = (delay * 2).min(cfg.accept_backoff_max);
                continue;
            }
        };
        if let Some((errors, since)) = failing.take() {
            info!(
                errors,
                failing_ms = millis(since.elapsed()),
                "metrics server accepting again"
            );
        }
        delay = cfg.accept_backoff_min;
        let source = peer.ip().to_canonical();
        let wake = Arc::new(Notify::new());
        let (id, evicted) = shared
            .slots()
            .admit(source, Instant::now(), Arc::clone(&wake));
        if let Some(victim) = evicted {
            debug!(%peer, "metrics server at a connection cap: closing the oldest");
            victim.notify_one();
        }
        // Waits only while an evicted connection's task is closing its
        // socket.
        let permit = tokio::select! {
            p = Arc::clone(&shared.permits).acquire_owned() => p,
            () = shared.stop.cancelled() => break,
        };
        let Ok(permit) = permit else { break };
        trace!(%peer, id, "metrics connection accepted");
        let conn_shared = Arc::clone(&shared);
        shared.tracker.spawn(async move {
            match &conn_shared.tls {
                None => {
                    let _ = stream.set_nodelay(true);
                    connection(stream, peer, id, wake, &conn_shared).await;
                }
                Some(tls) => {
                    if let Some(stream) = handshake(tls, stream, peer, &wake, &conn_shared).await {
                        connection(stream, peer, id, wake, &conn_shared).await;
                    }
                }
            }
            conn_shared.slots().release(id);
            drop(permit);
        });
    }
}

/// The TLS handshake of a secure connection, within `header_timeout` of
/// the accept; `None` when it failed, timed out, or the connection was
/// evicted or the server stopped meanwhile.
async fn handshake(
    tls: &Tls,
    stream: TcpStream,
    peer: SocketAddr,
    wake: &Notify,
    shared: &Shared,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let _ = stream.set_nodelay(true);
    let accept = tokio::time::timeout(shared.config.header_timeout, tls.acceptor.accept(stream));
    tokio::select! {
        r = accept => match r {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                debug!(%peer, error = %e, "secure metrics: TLS handshake failed");
                None
            }
            Err(_) => {
                debug!(%peer, "secure metrics: TLS handshake timed out");
                None
            }
        },
        () = wake.notified() => {
            debug!(%peer, "metrics connection closed to make room");
            None
        }
        () = shared.stop.cancelled() => None,
        () = shared.force.cancelled() => None,
    }
}

/// Serves one connection until it ends, times out, is evicted, or the
/// server stops.
async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    id: u64,
    wake: Arc<Notify>,
    shared: &Arc<Shared>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let cfg = &shared.config;
    let served = Arc::new(AtomicU32::new(0));
    let svc_shared = Arc::clone(shared);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let n = served.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let shared = Arc::clone(&svc_shared);
        async move {
            shared.slots().touch(id, Instant::now());
            let mut reply = match &shared.tls {
                None => shared.routes.reply(req.method(), req.uri().path()),
                Some(tls) => secure_reply(&shared.routes, &tls.gate, &req).await,
            };
            // The metrics' pieces are measured one by one, other tasks
            // running between them, as they are then sent.
            let len = reply.body.measure().await;
            Ok::<_, Infallible>(answer(&shared, id, n, reply, len))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(cfg.header_timeout)
        .keep_alive(true)
        .max_buf_size(cfg.max_header_bytes.max(8192));
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        // `since` moves when a request starts and when its response has
        // been handed over; gone once this connection was evicted.
        let Some(since) = shared.slots().since(id) else {
            debug!(%peer, "metrics connection closed to make room");
            return;
        };
        let deadline = since + cfg.request_timeout;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!(%peer, error = %e, "metrics connection ended");
                }
                return;
            }
            () = tokio::time::sleep_until(deadline.into()) => {
                if shared.slots().since(id).is_some_and(|s| s + cfg.request_timeout <= Instant::now()) {
                    debug!(%peer, "metrics connection timed out");
                    return;
                }
            }
            () = wake.notified() => {}
            () = shared.stop.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
            () = shared.force.cancelled() => return,
        }
    }
}

/// What to answer: status, content type, body.
struct Reply {
    status: StatusCode,
    content_type: &'static str,
    body: Text,
}

impl From<(StatusCode, &'static str, String)> for Reply {
    fn from((status, content_type, body): (StatusCode, &'static str, String)) -> Self {
        Self {
            status,
            content_type,
            body: Text::from(body),
        }
    }
}

/// The secure listener's answer: `/metrics` only, to a token the gate
/// allows.
async fn secure_reply(routes: &Routes, gate: &Gate, req: &Request<Incoming>) -> Reply {
    const TEXT: &str = "text/plain";
    let method = req.method();
    if method != Method::GET && method != Method::HEAD {
        return routes.reply(method, "/metrics");
    }
    if req.uri().path() != "/metrics" {
        return (StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()).into();
    }
    match gate.check(req.headers()).await {
        Ok(Verdict::Allowed { .. }) => routes.reply(method, "/metrics"),
        Ok(Verdict::Unauthenticated) => {
            (StatusCode::UNAUTHORIZED, TEXT, "Unauthorized\n".to_owned()).into()
        }
        Ok(Verdict::Forbidden { user }) => (
            StatusCode::FORBIDDEN,
            TEXT,
            format!("Authorization denied for user {user}: it may not get /metrics\n"),
        )
            .into(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            TEXT,
            "the bearer token could not be reviewed\n".to_owned(),
        )
            .into(),
    }
}

/// The response to one request, its body of `len` bytes
/// ([`Text::measure`]); the body reports back when hyper is done with it.
fn answer(shared: &Arc<Shared>, id: u64, nth: u32, reply: Reply, len: u64) -> Response<Streamed> {
    let Reply {
        status,
        content_type,
        body,
    } = reply;
    let mut resp = Response::new(Streamed {
        text: body,
        len,
        yielded: false,
        done: Some(Handed {
            shared: Arc::clone(shared),
            id,
        }),
    });
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if nth >= shared.config.max_requests_per_connection {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A response body: the [`Text`]'s whole parts as they are, its
/// [`Chunks`] written a piece at a time as hyper asks for them, letting
/// other tasks run before each (on the speaker's one thread, a scrape of
/// 50,000 lines held it for the whole render).
struct Streamed {
    text: Text,
    /// The bytes left to send (the `Content-Length`).
    len: u64,
    /// The task was let go once before the next piece is written.
    yielded: bool,
    done: Option<Handed>,
}

/// Dropped when hyper is done with a response body (all of it taken, or
/// the connection gone): the connection's next phase starts.
struct Handed {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Handed {
    fn drop(&mut self) {
        self.shared.slots().touch(self.id, Instant::now());
    }
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.text.next_is_written() && !this.yielded {
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = false;
        match this.text.next_piece() {
            Some(data) => {
                this.len = this.len.saturating_sub(data.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            None => {
                this.done = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.text.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// Errors `accept` reports about one pending connection, which Linux asks
/// callers to retry at once (accept(2), "Error handling"; EPERM is a
/// firewall refusing that one connection). Any other error (EMFILE,
/// ENFILE, ENOBUFS, ENOMEM, ...) is about the process or the system and
/// gets a backoff.
fn about_one_connection(e: &io::Error) -> bool {
    use io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted, WouldBlock};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || matches!(
        e.raw_os_error(),
        Some(
            libc::EPROTO
                | libc::ENETDOWN
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
                | libc::EPERM
        )
    )
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
