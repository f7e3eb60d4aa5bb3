//! The integration tests of pacerelle-mcp, one test binary (docs/testing.md, "One binary per crate"): each module is
//! one suite, run alone with `cargo test -p pacerelle-mcp --test it MODULE::`. One binary links the relay, the client
//! and their dependencies once, instead of once per suite.

mod common;

mod here;
mod listening;
mod named_sessions;
mod partner;
mod questions;
mod remote;
mod sessions;
mod tasks;
