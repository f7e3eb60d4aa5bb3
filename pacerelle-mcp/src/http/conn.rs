//! The endpoint's accept loop, the same for HTTP and HTTPS: hyper's HTTP/1.1 connections under the
//! [`Limits`] — the relay's design (its `conn` module) at the scale of an MCP endpoint that serves a few hosts.
//!
//! Each connection is in one of three phases, and a watchdog beside it closes it when its phase has lasted
//! too long:
//! - **head**: from the moment it opened (after the TLS handshake, over HTTPS), or from the first byte of a
//!   next request on a kept-alive connection, until its request head (line and headers) is complete: at most
//!   `header_timeout`;
//! - **busy**: a request is being answered: from its head until its response is written. A `GET /mcp` SSE
//!   stream and a `POST` whose answer streams (a `wait_for_messages` parked until a task comes) are requests
//!   in progress for as long as they last, never cut here. Only the request body's arrival is timed
//!   ([`BODY_TIMEOUT`]; late, the request is answered `408` and the connection closed);
//! - **idle**: a kept-alive connection between a response and the first byte of its next request: at most
//!   `idle_timeout`.
//!
//! hyper's own header-read timeout is set to `header_timeout + idle_timeout`: it runs from each response to
//! the next complete head, so it never fires before the watchdog and only backs it up.
//!
//! At most `max_connections` connections are open at once, TLS handshakes included. A new connection beyond
//! the cap takes the place of the one that has gone longest without a request in progress (silent, half a
//! head, or idle), which is closed: silent connections cannot lock the hosts out. When every connection has
//! a request in progress, the new one is refused: closed at once, over plain HTTP after a `503` written
//! without reading anything.

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
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::{HANDSHAKE_TIMEOUT, Limits, MAX_HANDSHAKES};

/// A request body that has not fully arrived this long after its head is answered `408`.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a new connection at the cap waits for the connection it displaced to close.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);
/// A failed `accept` (out of file descriptors and the like) waits this long before the next, as axum does.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What a refused plain-HTTP connection is sent, written without reading its request.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
connection: close\r\ncontent-length: 64\r\n\r\n\
pacerelle-mcp has too many connections open (--max-connections)\n";

/// Serves `app` on `listener` (over TLS with `tls`) under `limits` until `signal` resolves; then stops
/// accepting, closes the connections that have no request in progress, lets the others finish, and returns
/// once every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: Limits,
    signal: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    tracing::info!(
        max_connections = limits.max_connections,
        header_timeout_s = limits.header_timeout.as_secs_f64(),
        idle_timeout_s = limits.idle_timeout.as_secs_f64(),
        "connection limits"
    );
    let table = Arc::new(Table {
        slots: Arc::new(Semaphore::new(limits.max_connections)),
        open: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    let (stop, stopped) = watch::channel(false);
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
                Err(e) => {
                    tracing::debug!(error = %e, "accepting a connection failed; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = table.admit().await else {
            tracing::warn!(
                %addr,
                max_connections = limits.max_connections,
                "connection refused: every connection has a request in progress (--max-connections)"
            );
            refuse(stream, tls.is_none());
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            addr,
            tls.clone(),
            handshake,
            slot,
            app.clone(),
            limits,
            stopped.clone(),
        ));
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a slot until it is closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = table.slots.acquire_many(all).await;
    Ok(())
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
            Phase::Head(since) => since + limits.header_timeout,
            Phase::Idle(since) => since + limits.idle_timeout,
            Phase::Busy(_) | Phase::Closing => Instant::now() + recheck,
        }
    }

    /// Whether the current phase has run out: a head not complete in time, or too long idle.
    fn expired(&self, limits: Limits) -> Option<&'static str> {
        let now = Instant::now();
        match *lock(&self.phase) {
            Phase::Head(since) if now >= since + limits.header_timeout => Some("header timeout"),
            Phase::Idle(since) if now >= since + limits.idle_timeout => Some("idle timeout"),
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

/// Runs one connection: the TLS handshake if any (within [`HANDSHAKE_TIMEOUT`]), then HTTP/1.1 under the
/// watchdog.
#[allow(clippy::too_many_arguments)]
async fn connection(
    stream: TcpStream,
    addr: SocketAddr,
    tls: Option<TlsAcceptor>,
    handshake: Option<OwnedSemaphorePermit>,
    slot: Slot,
    app: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    match tls {
        None => http(stream, addr, &conn, app, limits, stopped).await,
        Some(acceptor) => {
            let tls = tokio::select! {
                tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)) => match tls {
                    Ok(Ok(tls)) => Some(tls),
                    Ok(Err(e)) => {
                        tracing::debug!(%addr, error = %e, "TLS handshake failed");
                        None
                    }
                    Err(_) => {
                        tracing::debug!(%addr, "TLS handshake timed out");
                        None
                    }
                },
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
            http(tls, addr, &conn, app, limits, stopped).await;
        }
    }
    drop(slot);
}

/// HTTP/1.1 on `io` until the client closes, a timeout or displacement closes it, or the endpoint stops.
async fn http<I>(
    io: I,
    addr: SocketAddr,
    conn: &Arc<Conn>,
    app: Router,
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
        let app = app.clone();
        let conn = service_conn.clone();
        async move { Ok::<_, Infallible>(answer(app, conn, addr, request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.header_timeout + limits.idle_timeout);
    let served = builder.serve_connection(io, service);
    tokio::pin!(served);
    let recheck = limits
        .header_timeout
        .min(limits.idle_timeout)
        .max(Duration::from_secs(1));
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

/// Answers one request through the app: the body under [`BODY_TIMEOUT`], the connection busy until the
/// response is written.
async fn answer(
    app: Router,
    conn: Arc<Conn>,
    addr: SocketAddr,
    request: Request<Incoming>,
) -> Response<Body> {
    conn.begin_request();
    let busy = Busy(conn);
    let timed_out = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let body = Body::new(TimedBody {
        inner: body,
        deadline: Instant::now() + BODY_TIMEOUT,
        sleep: None,
        timed_out: timed_out.clone(),
    });
    let response = match app.oneshot(Request::from_parts(parts, body)).await {
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

/// `408 Request Timeout`, closing the connection.
fn request_timeout() -> Response<Body> {
    let mut response = Response::new(Body::from("the request body did not arrive in time\n"));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
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

/// A response body that keeps its connection busy until written (an SSE stream: until it ends).
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

/// The request body timed out (never shown to the client: it is answered `408` instead).
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

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_progress_never_runs_out_and_head_and_idle_phases_do() {
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
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
        // A request in progress (an SSE stream) never runs out, nor does a second one beside it.
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
}
