//! The accept loop, the same for HTTP and HTTPS: hyper's HTTP/1.1 connections with the timeouts and the cap
//! of [`Limits`].
//!
//! Each connection is in one of three phases, and a watchdog beside it closes it when its phase has lasted
//! too long:
//! - **head**: from the moment it opened (after the TLS handshake, over HTTPS), or from the first byte of a
//!   next request on a kept-alive connection, until its request head (line and headers) is complete: at most
//!   `header_timeout`;
//! - **busy**: a request is being answered (its body read, a long-poll parked or an SSE stream open, its
//!   response written): no limit here, apart from the body's `body_timeout` (a body not arrived by then is
//!   answered with [`Answers::request_timeout`] and the connection closed). A response is not timed while
//!   written: a client that does not read a large answer holds its connection busy;
//! - **idle**: a kept-alive connection between a response and the first byte of its next request: at most
//!   `idle_timeout`.
//!
//! hyper's own header-read timeout is set to `header_timeout + idle_timeout`: it runs from each response to
//! the next complete head, so it never fires before the watchdog and only backs it up.
//!
//! At most `max_connections` connections are open at once, TLS handshakes included. A new connection beyond
//! the cap displaces the connection that has been without a request in progress the longest (head or idle
//! phase, TLS handshakes included): silent or slow connections cannot lock anyone out. When every connection
//! has a request in progress, the new one is refused: closed at once, over plain HTTP after
//! [`Answers::refusal`] written without reading anything (when the socket takes it at once).
//!
//! Plain and TLS connections are two kinds of task, each sized to its own path: a plain connection's task
//! has no room for a TLS stream and handshake, and the handshake is boxed, its room gone once it is done
//! (every open connection — a parked wait holds one — is such a task).

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
use axum::http::{Request, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::tls::Tls;

/// How long a new connection at the cap waits for the connection it displaced to close.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);
/// A failed `accept` (out of file descriptors and the like) waits this long before the next, as axum does.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning about failed accepts this often.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// What a connection may hold: a client that connects and sends nothing, sends a request head or body
/// slowly, or keeps connections open without using them cannot exhaust the process's file descriptors. A
/// request in progress is never cut by these, only its body's arrival is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once at most, TLS handshakes included (at least 1).
    pub max_connections: usize,
    /// A request head must be complete this long after the connection opened (after the TLS handshake), or
    /// after the first byte of a next request on a kept-alive connection.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this long.
    pub idle_timeout: Duration,
    /// A request body that has not fully arrived this long after its head is answered
    /// [`Answers::request_timeout`], and its connection closed.
    pub body_timeout: Duration,
}

/// What the server answers and logs of its own, in the caller's words.
#[derive(Debug, Clone, Copy)]
pub struct Answers {
    /// A whole HTTP/1.1 response (with `connection: close`) written to a plain-HTTP connection refused at
    /// the cap, without reading its request.
    pub refusal: &'static [u8],
    /// The answer to a request whose body did not arrive within the body timeout (it should close the
    /// connection: `connection: close`).
    pub request_timeout: fn() -> Response<Body>,
    /// Told of each connection refused at the cap (its peer and the cap), to log it.
    pub refused: fn(SocketAddr, usize),
}

/// What each connection's task needs of [`Limits`] and [`Answers`].
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
    body: Duration,
    request_timeout: fn() -> Response<Body>,
}

/// Serves `router` on `listener` (over TLS with `tls`) under `limits` until `signal` resolves; then stops
/// accepting, closes the connections that have no request in progress, lets the others finish their
/// request, and returns once every connection is closed. Each request carries its peer's address as
/// [`ConnectInfo<SocketAddr>`].
pub async fn serve(
    listener: TcpListener,
    tls: Option<Tls>,
    router: Router,
    limits: Limits,
    answers: Answers,
    signal: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    if limits.max_connections == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the connection cap must be at least 1",
        ));
    }
    let cap = limits
        .max_connections
        .min(u32::MAX as usize)
        .min(Semaphore::MAX_PERMITS);
    let timeouts = Timeouts {
        header: limits.header_timeout,
        idle: limits.idle_timeout,
        body: limits.body_timeout,
        request_timeout: answers.request_timeout,
    };
    let table = Arc::new(Table {
        slots: Arc::new(Semaphore::new(cap)),
        open: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    let tls = tls.map(Arc::new);
    let handshakes = Arc::new(Semaphore::new(
        tls.as_ref().map_or(0, |tls| tls.max_handshakes.max(1)),
    ));
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
            (answers.refused)(addr, cap);
            refuse(stream, tls.is_none(), answers.refusal);
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
                    timeouts,
                    stopped.clone(),
                ));
            }
            Some(tls) => {
                tokio::spawn(tls_connection(
                    stream,
                    addr,
                    tls.clone(),
                    handshake,
                    slot,
                    router.clone(),
                    timeouts,
                    stopped.clone(),
                ));
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a slot until it is closed.
    let _ = table.slots.acquire_many(cap as u32).await;
    Ok(())
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

/// Closes a connection beyond the cap; a plain-HTTP one is first sent `refusal` if its socket takes it at
/// once (nothing is read, nothing waits).
fn refuse(stream: TcpStream, plain: bool, refusal: &[u8]) {
    if plain {
        let _ = stream.try_write(refusal);
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
    fn deadline(&self, limits: Timeouts, recheck: Duration) -> Instant {
        match *lock(&self.phase) {
            Phase::Head(since) => since + limits.header,
            Phase::Idle(since) => since + limits.idle,
            Phase::Busy(_) | Phase::Closing => Instant::now() + recheck,
        }
    }

    /// Whether the current phase has run out: a head not complete in time, or too long idle.
    fn expired(&self, limits: Timeouts) -> Option<&'static str> {
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
    timeouts: Timeouts,
    stopped: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    http(stream, addr, &conn, router, timeouts, stopped).await;
    drop(slot);
}

/// Runs one HTTPS connection: the TLS handshake, then HTTP/1.1 under the watchdog.
#[allow(clippy::too_many_arguments)]
async fn tls_connection(
    stream: TcpStream,
    addr: SocketAddr,
    tls: Arc<Tls>,
    handshake: Option<OwnedSemaphorePermit>,
    slot: Slot,
    router: Router,
    timeouts: Timeouts,
    mut stopped: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    // The handshake is boxed: its room is gone once it is done, not kept for the connection's life.
    let stream = tokio::select! {
        stream = Box::pin(crate::tls::handshake(&tls, stream, addr)) => stream,
        _ = conn.evict.notified() => None,
        _ = stopped.wait_for(|stop| *stop) => None,
    };
    drop(handshake);
    drop(tls);
    let Some(stream) = stream else { return };
    {
        // The head's time starts once the handshake (with its own timeout) is done.
        let mut phase = lock(&conn.phase);
        if let Phase::Head(_) = *phase {
            *phase = Phase::Head(Instant::now());
        }
    }
    http(stream, addr, &conn, router, timeouts, stopped).await;
    drop(slot);
}

/// HTTP/1.1 on `io` until the client closes, a timeout or displacement closes it, or the server stops.
async fn http<I>(
    io: I,
    addr: SocketAddr,
    conn: &Arc<Conn>,
    router: Router,
    limits: Timeouts,
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
        async move { Ok::<_, Infallible>(answer(router, conn, addr, limits, request).await) }
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
    limits: Timeouts,
    request: Request<Incoming>,
) -> Response<Body> {
    conn.begin_request();
    let busy = Busy(conn);
    let timed_out = Arc::new(AtomicBool::new(false));
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(ConnectInfo(addr));
    let body = Body::new(TimedBody {
        inner: body,
        deadline: Instant::now() + limits.body,
        sleep: None,
        timed_out: timed_out.clone(),
    });
    let response = match router.oneshot(Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let response = if timed_out.load(Ordering::Acquire) {
        tracing::debug!(%addr, "request body timed out");
        (limits.request_timeout)()
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

/// The request body timed out (never shown to the client: it is answered `request_timeout` instead).
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

    fn timeouts() -> Timeouts {
        Timeouts {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            request_timeout: || Response::new(Body::empty()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn phases_run_out_after_their_timeouts() {
        let limits = timeouts();
        let conn = Conn {
            phase: Mutex::new(Phase::Head(Instant::now())),
            evict: Notify::new(),
            changed: Notify::new(),
        };
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(conn.expired(limits), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(conn.expired(limits), Some("header timeout"));
        // A request in progress (a parked long-poll, an SSE stream) never runs out, nor a second beside it.
        conn.begin_request();
        conn.begin_request();
        tokio::time::advance(Duration::from_secs(3_600)).await;
        conn.end_request();
        tokio::time::advance(Duration::from_secs(3_600)).await;
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

    const REFUSAL: &[u8] =
        b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 4\r\n\r\nfull";

    /// A server on a free loopback port with `limits`, whose `/park` never answers; its address and the
    /// sender that stops it.
    async fn start(limits: Limits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let router = Router::new()
            .route("/park", axum::routing::get(std::future::pending::<()>))
            .route("/", axum::routing::get(|| async { "ok" }));
        let answers = Answers {
            refusal: REFUSAL,
            request_timeout: || Response::new(Body::empty()),
            refused: |_, _| {},
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, None, router, limits, answers, async {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    fn limits(max_connections: usize, header_timeout: Duration) -> Limits {
        Limits {
            max_connections,
            header_timeout,
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
        }
    }

    /// Everything the server sends until it closes, within five seconds.
    async fn read_all(stream: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got))
            .await
            .expect("closed in time")
            .expect("read");
        got
    }

    #[tokio::test]
    async fn at_the_cap_a_silent_connection_gives_way_and_a_busy_one_does_not() {
        let (addr, _stop) = start(limits(1, Duration::from_secs(60))).await;
        // A silent connection holds the one slot; a new one displaces it and is served.
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut served = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(read_all(&mut silent).await, b"");
        served
            .write_all(b"GET /park HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Every connection has a request in progress: the next one is refused with the caller's answer.
        let mut refused = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(read_all(&mut refused).await, REFUSAL);
    }

    #[tokio::test]
    async fn half_a_head_is_closed_after_the_header_timeout_without_an_answer() {
        let (addr, _stop) = start(limits(8, Duration::from_millis(300))).await;
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(b"GET / HTTP/1.1\r\nho").await.expect("write");
        let started = std::time::Instant::now();
        assert_eq!(read_all(&mut stream).await, b"");
        assert!(started.elapsed() >= Duration::from_millis(250));
        // A whole head in time is answered.
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let answer = read_all(&mut stream).await;
        assert!(answer.starts_with(b"HTTP/1.1 200 "), "{answer:?}");
        assert!(answer.ends_with(b"ok"));
    }

    #[tokio::test]
    async fn a_cap_of_zero_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let answers = Answers {
            refusal: REFUSAL,
            request_timeout: || Response::new(Body::empty()),
            refused: |_, _| {},
        };
        let served = serve(
            listener,
            None,
            Router::new(),
            limits(0, Duration::from_secs(1)),
            answers,
            std::future::pending(),
        )
        .await;
        assert!(served.is_err());
    }
}
