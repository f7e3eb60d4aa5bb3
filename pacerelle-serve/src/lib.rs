//! Serving HTTP/1.1 connections, plain or TLS, under a connection cap and header, idle and body timeouts,
//! with graceful shutdown: the accept loop of the relay and of the MCP adapter's HTTP endpoint.
//!
//! One crate for it because the MCP adapter may not depend on the relay (ARCHITECTURE.md, layer rule), and
//! both serve connections the same way. What differs between them is passed in: the [`Limits`], the
//! [`Answers`] (the refusal written at the cap, the `408` of a late body, how a refusal is logged), the
//! [`Tls`] settings, the shutdown signal and the [`axum::Router`]. Nothing here knows the relay's settings,
//! MCP or either's error codes.

mod conn;
mod tls;

pub use conn::{Answers, Limits, serve};
pub use tls::{
    HTTP1_ALPN, Tls, TlsConfig, TlsError, server_config_builder, server_config_from_pem,
    server_config_from_pem_files,
};
