//! A plain HTTP/1.1 driver over keep-alive connections: requests written as prepared bytes, answers read by
//! their `Content-Length`. It costs the load process far less than a full client per request and per parked
//! wait, and it can bind a connection to a chosen loopback source address (`127.x.y.z`): the relay keeps its
//! rate limits per client address, so spreading registrations over addresses lets thousands of agents
//! register in seconds without changing the relay.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Largest answer head read before giving up on an answer.
const MAX_HEAD: usize = 64 * 1024;

/// One keep-alive connection to the relay.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
}

/// An answer: its status and body.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, as sent.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text, for messages (relay bodies are JSON or plain text and never echo a request).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The bytes of one request. `bearer`: the credential of the `Authorization` header; `body`: JSON.
pub fn request(method: &str, path: &str, bearer: Option<&str>, body: Option<&str>) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if let Some(bearer) = bearer {
        out.push_str("Authorization: Bearer ");
        out.push_str(bearer);
        out.push_str("\r\n");
    }
    match body {
        Some(body) => {
            out.push_str("Content-Type: application/json\r\nContent-Length: ");
            out.push_str(&body.len().to_string());
            out.push_str("\r\n\r\n");
            out.push_str(body);
        }
        None => out.push_str("\r\n"),
    }
    out.into_bytes()
}

/// A TCP connection to `dest`, from `source` (any port) when given.
pub async fn connect(dest: SocketAddr, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(ip) = source {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    let stream = socket.connect(dest).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The loopback source address number `n` (from 0): `127.<group>.<n / 250>.<n % 250 + 1>`, so that each
/// address has its own rate-limit buckets at the relay and its own range of ephemeral ports.
pub fn loopback_source(group: u8, n: usize) -> IpAddr {
    // At most 250 × 256 addresses per group; callers use far fewer.
    let high = u8::try_from((n / 250) % 256).unwrap_or(0);
    let low = u8::try_from(n % 250 + 1).unwrap_or(1);
    IpAddr::from([127, group, high, low])
}

impl Conn {
    /// Opens a connection to `dest`, from `source` when given.
    pub async fn open(dest: SocketAddr, source: Option<IpAddr>) -> Result<Conn> {
        let stream = connect(dest, source)
            .await
            .with_context(|| format!("cannot connect to the relay at {dest}"))?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(1024),
        })
    }

    /// Writes `request` and reads its answer.
    pub async fn send(&mut self, request: &[u8]) -> Result<Response> {
        self.write(request).await?;
        self.read_response().await
    }

    /// Writes `request` (read its answer with [`Conn::read_response`]).
    pub async fn write(&mut self, request: &[u8]) -> Result<()> {
        Ok(self.stream.write_all(request).await?)
    }

    /// Reads one answer: its head, then `Content-Length` bytes of body.
    pub async fn read_response(&mut self) -> Result<Response> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head =
                    std::str::from_utf8(&self.buf[..end]).context("an answer head that is not UTF-8")?;
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse::<u16>().ok())
                    .context("an answer without a status")?;
                let mut length = 0usize;
                for line in head.split("\r\n").skip(1) {
                    let Some((name, value)) = line.split_once(':') else {
                        continue;
                    };
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().context("a malformed Content-Length")?;
                    } else if name.eq_ignore_ascii_case("transfer-encoding") {
                        bail!("a chunked answer (this driver reads Content-Length only)");
                    }
                }
                let total = end + 4 + length;
                while self.buf.len() < total {
                    if self.stream.read_buf(&mut self.buf).await? == 0 {
                        bail!("the relay closed the connection within an answer");
                    }
                }
                let body = self.buf[end + 4..total].to_vec();
                self.buf.drain(..total);
                return Ok(Response { status, body });
            }
            if self.buf.len() > MAX_HEAD {
                bail!("an answer head longer than {MAX_HEAD} bytes");
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                bail!("the relay closed the connection before answering");
            }
        }
    }
}

/// One request on a connection of its own.
pub async fn once(dest: SocketAddr, request: &[u8]) -> Result<Response> {
    Conn::open(dest, None).await?.send(request).await
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_a_body_has_its_length_and_one_without_ends_with_a_blank_line() {
        let post = request("POST", "/v1/x", Some("ag.s"), Some("{\"a\":1}"));
        let post = String::from_utf8(post).unwrap_or_default();
        assert!(post.starts_with("POST /v1/x HTTP/1.1\r\n"));
        assert!(post.contains("Authorization: Bearer ag.s\r\n"));
        assert!(post.ends_with("Content-Length: 7\r\n\r\n{\"a\":1}"));
        let get = String::from_utf8(request("GET", "/readyz", None, None)).unwrap_or_default();
        assert_eq!(get, "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    }

    #[test]
    fn loopback_sources_differ_and_stay_in_127() {
        assert_eq!(loopback_source(1, 0), IpAddr::from([127, 1, 0, 1]));
        assert_eq!(loopback_source(1, 249), IpAddr::from([127, 1, 0, 250]));
        assert_eq!(loopback_source(2, 250), IpAddr::from([127, 2, 1, 1]));
    }
}
