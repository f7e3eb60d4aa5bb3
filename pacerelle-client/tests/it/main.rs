//! The integration tests of pacerelle-client, one test binary (docs/testing.md, "One binary per crate"): each module is
//! one suite, run alone with `cargo test -p pacerelle-client --test it MODULE::`. One binary links the relay, the client
//! and their dependencies once, instead of once per suite.

mod common;

mod asked;
mod device_signing;
mod follow;
mod host_answers;
mod inbox;
mod listener;
mod partner;
mod questions;
mod quotas;
mod relay_push;
mod runner;
mod sessions;
mod signing;
mod trust;
mod updates;
