//! End-to-end tests of the relay: a real server on 127.0.0.1:0, a real SQLite file, HTTP through reqwest.

mod common;

mod auth;
mod bad_input;
mod durability;
mod instances;
mod lease;
mod messages;
mod metrics;
mod pairing;
mod persistence;
mod probes;
mod questions;
mod quotas;
mod readiness;
mod registration;
mod retention;
mod signing;
mod updates;
mod webhooks;
