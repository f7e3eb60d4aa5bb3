//! The relay's accept loop, the same for HTTP and HTTPS: hyper's HTTP/1.1 connections with the timeouts and
//! the cap of [`Connections`].
//!
//! Each connection is in one of three phases, and a watchdog beside it closes it when its phase has lasted
//! too long:
//! - **head**: from the moment it opened (after the TLS handshake, over HTTPS), or from the first byte of a
//!   next request on a kept-alive connection, until its request head (line and headers) is complete: at most
//!   `header_timeout`;
//! - **busy**: a request is being answered (its body read, a long-poll parked, its response written): no
//!   limit here, apart from the body's `body_timeout` (a body not arrived by then is answered `408
//!   request_timeout` and the connection closed). A response is not timed while written: a client that
//!   does not read a large answer holds its connection busy (the relay's answers are small; long-polls
//!   need a credential);
//! - **idle**: a kept-alive connection between a response and the first byte of its next request: at most
//!   `idle_timeout`.
//!
//! hyper's own header-read timeout is set to `header_timeout + idle_timeout`: it runs from each response to
//! the next complete head, so it never fires before the watchdog and only backs it up.
//!
//! At most `max_connections` connections are open at once. A new connection beyond the cap displaces the
//! connection that has been without a request in progress the longest (head or idle phase, TLS handshakes
//! included): silent or slow connections cannot lock anyone out. When every connection has a request in
//! progress, the new one is refused: closed at once, over plain HTTP after a `503 unavailable` written
//! without reading anything (when the socket takes it at once).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::config::Connections;

/// File descriptors left to the rest of the relay when the cap is derived from the file limit: the database
/// and its journal, outgoing webhook and push deliveries, certificate renewals, logs, the listener, and a
/// connection being displaced or refused at the cap.
pub(crate) const FILE_RESERVE: u64 = 128;
/// The derived cap never goes below this (a tiny file limit still serves a few clients)…
const MIN_DERIVED_CAP: usize = 32;
/// …nor above this, whatever the file limit: memory, not descriptors, is then what runs out.
const MAX_DERIVED_CAP: usize = 65_536;
/// The cap when the file limit cannot be read (not a Unix system).
const CAP_WITHOUT_FILE_LIMIT: usize = 1_024;
/// How long a new connection at the cap waits for the connection it displaced to close.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);
/// A failed `accept` (out of file descriptors and the like) waits this long before the next, as axum does.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning about failed accepts this often.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// What a refused plain-HTTP connection is sent, written without reading its request.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
connection: close\r\ncontent-length: 72\r\n\r\n\
{\"code\":\"unavailable\",\"error\":\"the relay has too many connections open\"}";

/// The timeouts of [`Connections`] and the cap it resolves to.
#[derive(Debug, Clone, Copy)]
struct Limits {
    header: Duration,
    body: Duration,
    idle: Duration,
}

/// Serves `router` on `listener` (over TLS with `tls`) until `signal` resolves; then stops accepting, closes
/// the connections that have no request in progress, lets the others finish their request, and returns once
/// every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    settings: &Connections,
    signal: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let file_limit = raise_file_limit();
    let cap = match settings.max_connections {
        Some(0) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the connection cap (--max-connections) must be at least 1",
            ));
        }
        Some(n) => {
            let n = n.min(u32::MAX as usize).min(Semaphore::MAX_PERMITS);
            if let Some(limit) = file_limit
                && n as u64 + FILE_RESERVE > limit
            {
                tracing::warn!(
                    max_connections = n,
                    file_limit = limit,
                    "the connection cap leaves less than {FILE_RESERVE} files to the rest of the relay: \
                     connections may fail with \"too many open files\""
                );
            }
            n
        }
        None => derived_cap(file_limit),
    };
    let limits = Limits {
        header: settings.header_timeout,
        body: settings.body_timeout,
        idle: settings.idle_timeout,
    };
    tracing::info!(
        max_connections = cap,
        file_limit = file_limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
        header_timeout_s = limits.header.as_secs_f64(),
        body_timeout_s = limits.body.as_secs_f64(),
        idle_timeout_s = limits.idle.as_secs_f64(),
        "connection limits"
    );
    let table = Arc::new(Table {
        slots: Arc::new(Semaphore::new(cap)),
        open: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    let handshakes = Arc::new(Semaphore::new(crate::tls::MAX_HANDSHAKES));
    let (stop, stopped) = watch::channel(false);
    let mut last_warning: Option<Instant> = None;
    tokio::pin!(signal);
    loop {
        // Over TLS, a handshake slot before accepting: more connections wait in the kernel's queue.
        let handshake = match &tls {
            Some(_) => tokio::select! {
                _ = &mut signal => break,
                permit = handshakes.clone().acquire_owned() => permit.ok(),
            },
            None => None,
        };
        let (stream, addr) = tokio::select! {
            _ = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    if last_warning.is_none_or(|at| at.elapsed() >= ACCEPT_WARN_EVERY) {
                        tracing::warn!(error = %e, "accepting a connection failed; retrying");
                        last_warning = Some(Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = table.admit().await else {
            tracing::debug!(%addr, "connection refused: every connection has a request in progress");
            refuse(stream, tls.is_none());
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Two kinds of task, each sized to its own path: a plain connection's task does not carry the room
        // of a TLS stream and handshake (several KiB per connection, held by every parked wait).
        match &tls {
            None => {
                tokio::spawn(plain_connection(
                    stream,
                    addr,
                    slot,
                    router.clone(),
                    limits,
                    stopped.clone(),
                ));
            }
            Some(acceptor) => {
                tokio::spawn(tls_connection(
                    stream,
                    addr,
                    acceptor.clone(),
                    handshake,
                    slot,
                    router.clone(),
                    limits,
                    stopped.clone(),
                ));
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a slot until it is closed.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = table.slots.acquire_many(all).await;
    Ok(())
}

/// Raises the soft limit on open files to the hard limit where the system allows, and returns the soft
/// limit then in force (`None` where there is no such limit to read).
fn raise_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(limit) => Some(limit),
            Err(e) => {
                tracing::debug!(error = %e, "cannot raise the file limit");
                rlimit::getrlimit(rlimit::Resource::NOFILE)
                    .ok()
                    .map(|(soft, _)| soft)
            }
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The cap on connections for a soft file limit of `file_limit`: the limit less [`FILE_RESERVE`], within
/// [`MIN_DERIVED_CAP`]..=[`MAX_DERIVED_CAP`].
pub(crate) fn derived_cap(file_limit: Option<u64>) -> usize {
    match file_limit {
        Some(limit) => usize::try_from(limit.saturating_sub(FILE_RESERVE))
            .unwrap_or(usize::MAX)
            .clamp(MIN_DERIVED_CAP, MAX_DERIVED_CAP),
        None => CAP_WITHOUT_FILE_LIMIT,
    }
}

/// Errors of one connection that leave the listener fine (as axum treats them).
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Closes a connection beyond the cap; a plain-HTTP one is first sent [`REFUSAL`] if its socket takes it at
/// once (nothing is read, nothing waits).
fn refuse(stream: TcpStream, plain: bool) {
    if plain {
        let _ = stream.try_write(REFUSAL);
    }
    drop(stream);
}

/// The open connections and the slots they hold.
struct Table {
    slots: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
}

impl Table {
    /// A slot for a new connection: a free one, or the one of the connection that has been without a request
    /// in progress the longest, which is told to close. `None` when every connection has a request in
    /// progress (or the displaced one did not close in time).
    async fn admit(self: &Arc<Self>) -> Option<Slot> {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let displaced = self.longest_without_request()?;
                displaced.evict.notify_one();
                tokio::time::timeout(DISPLACE_WAIT, self.slots.clone().acquire_owned())
                    .await
                    .ok()?
                    .ok()?
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            phase: Mutex::new(Phase::Head(Instant::now())),
            evict: Notify::new(),
            changed: Notify::new(),
        });
        lock(&self.open).insert(id, conn.clone());
        Some(Slot {
            table: self.clone(),
            id,
            conn,
            _permit: permit,
        })
    }

    /// The open connection without a request in progress since the longest, marked as closing.
    fn longest_without_request(&self) -> Option<Arc<Conn>> {
        let open = lock(&self.open);
        let mut oldest: Option<(Instant, &Arc<Conn>)> = None;
        for conn in open.values() {
            let since = match *lock(&conn.phase) {
                Phase::Head(since) | Phase::Idle(since) => since,
                Phase::Busy(_) | Phase::Closing => continue,
            };
            if oldest.is_none_or(|(at, _)| since < at) {
                oldest = Some((since, conn));
            }
        }
        let (_, conn) = oldest?;
        let mut phase = lock(&conn.phase);
        // A request may have begun since the scan read its phase: then it stays.
        if matches!(*phase, Phase::Busy(_) | Phase::Closing) {
            return None;
        }
        *phase = Phase::Closing;
        drop(phase);
        Some(conn.clone())
    }
}

/// A connection's place in the [`Table`]; freed when dropped (when the connection's task ends).
struct Slot {
    table: Arc<Table>,
    id: u64,
    conn: Arc<Conn>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Out of the table before the permit is returned, so it is never displaced twice.
        lock(&self.table.open).remove(&self.id);
    }
}

/// What the watchdog of a connection knows of it.
#[derive(Debug)]
struct Conn {
    phase: Mutex<Phase>,
    /// Tells the connection to close at once: it was displaced by a new one at the cap.
    evict: Notify,
    /// Wakes the watchdog when the phase changes (its deadline may come sooner).
    changed: Notify,
}

/// Where a connection is; see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request head to complete, since then.
    Head(Instant),
    /// Answering this many requests.
    Busy(u32),
    /// Kept alive with no request in progress, since then.
    Idle(Instant),
    /// Displaced: closing.
    Closing,
}

impl Conn {
    /// When the current phase runs out; a busy connection is looked at again after `recheck`.
    fn deadline(&self, limits: Limits, recheck: Duration) -> Instant {
        match *lock(&self.phase) {
            Phase::Head(since) => since + limits.header,
            Phase::Idle(since) => since + limits.idle,
            Phase::Busy(_) | Phase::Closing => Instant::now() + recheck,
        }
    }

    /// Whether the current phase has run out: a head not complete in time, or too long idle.
    fn expired(&self, limits: Limits) -> Option<&'static str> {
        let now = Instant::now();
        match *lock(&self.phase) {
            Phase::Head(since) if now >= since + limits.header => Some("header timeout"),
            Phase::Idle(since) if now >= since + limits.idle => Some("idle timeout"),
            Phase::Closing => Some("displaced"),
            _ => None,
        }
    }

    fn is_busy(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Busy(_))
    }

    /// Bytes arrived: on an idle connection, the head of a next request has begun.
    fn on_read(&self) {
        let mut phase = lock(&self.phase);
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Head(Instant::now());
            self.changed.notify_one();
        }
    }

    /// A request head is complete.
    fn begin_request(&self) {
        let mut phase = lock(&self.phase);
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n.saturating_add(1)),
            Phase::Closing => Phase::Closing,
            Phase::Head(_) | Phase::Idle(_) => Phase::Busy(1),
        };
    }

    /// A response is written (or abandoned).
    fn end_request(&self) {
        let mut phase = lock(&self.phase);
        if let Phase::Busy(n) = *phase {
            *phase = if n > 1 {
                Phase::Busy(n - 1)
            } else {
                Phase::Idle(Instant::now())
            };
            self.changed.notify_one();
        }
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs one plain-HTTP connection under the watchdog.
async fn plain_connection(
    stream: TcpStream,
    addr: SocketAddr,
    slot: Slot,
    router: Router,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    http(stream, addr, &conn, router, limits, stopped).await;
    drop(slot);
}

/// Runs one HTTPS connection: the TLS handshake, then HTTP/1.1 under the watchdog.
#[allow(clippy::too_many_arguments)]
async fn tls_connection(
    stream: TcpStream,
    addr: SocketAddr,
    acceptor: TlsAcceptor,
    handshake: Option<OwnedSemaphorePermit>,
    slot: Slot,
    router: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    // The handshake is boxed: its room is gone once it is done, not kept for the connection's life.
    let tls = tokio::select! {
        tls = Box::pin(crate::tls::handshake(&acceptor, stream, addr)) => tls,
        _ = conn.evict.notified() => None,
        _ = stopped.wait_for(|stop| *stop) => None,
    };
    drop(handshake);
    let Some(tls) = tls else { return };
    {
        // The head's time starts once the handshake (with its own timeout) is done.
        let mut phase = lock(&conn.phase);
        if let Phase::Head(_) = *phase {
            *phase = Phase::Head(Instant::now());
        }
    }
    http(tls, addr, &conn, router, limits, stopped).await;
    drop(slot);
}

/// HTTP/1.1 on `io` until the client closes, a timeout or displacement closes it, or the relay stops.
async fn http<I>(
    io: I,
    addr: SocketAddr,
    conn: &Arc<Conn>,
    router: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(Watched {
        inner: io,
        conn: conn.clone(),
    });
    let service_conn = conn.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let router = router.clone();
        let conn = service_conn.clone();
        async move { Ok::<_, Infallible>(answer(router, conn, addr, limits.body, request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.header + limits.idle);
    let served = builder.serve_connection(io, service);
    tokio::pin!(served);
    let recheck = limits.header.min(limits.idle).max(Duration::from_secs(1));
    let mut stopping = false;
    loop {
        let deadline = conn.deadline(limits, recheck);
        tokio::select! {
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%addr, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline) => {
                if let Some(why) = conn.expired(limits) {
                    tracing::debug!(%addr, why, "connection closed");
                    return;
                }
            }
            _ = conn.changed.notified() => {}
            _ = conn.evict.notified() => {
                tracing::debug!(%addr, "connection closed: displaced by a new one at the cap");
                return;
            }
            _ = stopped.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                if !conn.is_busy() {
                    return;
                }
                // The request in progress finishes; the connection closes after its response.
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Answers one request through the router: the peer's address as `ConnectInfo`, the body under the body
/// timeout, the connection busy until the response is written.
async fn answer(
    router: Router,
    conn: Arc<Conn>,
    addr: SocketAddr,
    body_timeout: Duration,
    request: Request<Incoming>,
) -> Response<Body> {
    conn.begin_request();
    let busy = Busy(conn);
    let timed_out = Arc::new(AtomicBool::new(false));
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(ConnectInfo(addr));
    let body = Body::new(TimedBody {
        inner: body,
        deadline: Instant::now() + body_timeout,
        sleep: None,
        timed_out: timed_out.clone(),
    });
    let response = match router.oneshot(Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let response = if timed_out.load(Ordering::Acquire) {
        tracing::debug!(%addr, "request body timed out");
        request_timeout()
    } else {
        response
    };
    response.map(|body| {
        Body::new(Guarded {
            inner: body,
            _busy: busy,
        })
    })
}

/// `408 request_timeout`, closing the connection.
fn request_timeout() -> Response<Body> {
    let body = serde_json::json!({
        "code": pacerelle_core::wire::code::REQUEST_TIMEOUT,
        "error": "the request body did not arrive in time",
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Marks the connection busy while alive: from the request head until its response body is dropped.
struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// A response body that keeps its connection busy until written.
struct Guarded {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The request body timed out (never shown to the client: the relay answers `408` instead).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimeout;

/// A request body that fails with [`BodyTimeout`] if it has not fully arrived by its deadline.
struct TimedBody {
    inner: Incoming,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = self.deadline;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.timed_out.store(true, Ordering::Release);
                Poll::Ready(Some(Err(BodyTimeout.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's stream that tells its [`Conn`] when bytes arrive.
struct Watched<I> {
    inner: I,
    conn: Arc<Conn>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = result
            && buf.filled().len() > before
        {
            self.conn.on_read();
        }
        result
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_of6<F, A, B, C, D, E, G, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C, D, E, G) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// The same for a function of eight arguments.
    fn future_of8<F, A, B, C, D, E, G, H, I, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C, D, E, G, H, I) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_plain_connection_task_has_no_room_for_tls() {
        // Every open connection (a parked wait holds one) is a task this size: HTTP over TCP and the watchdog,
        // not the TLS stream and handshake of the HTTPS path.
        let plain = future_of6(&plain_connection);
        let http = future_of6(&http::<TcpStream>);
        let tls = future_of8(&tls_connection);
        assert!(
            plain < http + 512,
            "plain connection task {plain} bytes, HTTP alone {http}"
        );
        assert!(
            plain + 1024 < tls,
            "plain connection task {plain} bytes, HTTPS {tls}"
        );
    }

    #[test]
    fn the_derived_cap_leaves_a_reserve_within_bounds() {
        assert_eq!(derived_cap(Some(1_024)), 1_024 - FILE_RESERVE as usize);
        assert_eq!(derived_cap(Some(65_536)), 65_536 - FILE_RESERVE as usize);
        assert_eq!(derived_cap(Some(100)), MIN_DERIVED_CAP);
        assert_eq!(derived_cap(Some(1 << 20)), MAX_DERIVED_CAP);
        assert_eq!(derived_cap(Some(u64::MAX)), MAX_DERIVED_CAP);
        assert_eq!(derived_cap(None), CAP_WITHOUT_FILE_LIMIT);
    }

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["code"], pacerelle_core::wire::code::UNAVAILABLE);
    }

    #[tokio::test(start_paused = true)]
    async fn phases_run_out_after_their_timeouts() {
        let limits = Limits {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
        };
        let conn = Conn {
            phase: Mutex::new(Phase::Head(Instant::now())),
            evict: Notify::new(),
            changed: Notify::new(),
        };
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(conn.expired(limits), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(conn.expired(limits), Some("header timeout"));
        // A request in progress (a parked long-poll) never runs out.
        conn.begin_request();
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(conn.expired(limits), None);
        conn.end_request();
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(conn.expired(limits), None);
        // The first byte of a next request: the head's time starts.
        conn.on_read();
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(conn.expired(limits), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(conn.expired(limits), Some("header timeout"));
        conn.begin_request();
        conn.end_request();
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(conn.expired(limits), Some("idle timeout"));
    }
}
