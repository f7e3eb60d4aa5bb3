//! The integration tests of pacerelle-cli, one test binary (docs/testing.md, "One binary per crate"): each module is
//! one suite, run alone with `cargo test -p pacerelle-cli --test it MODULE::`. One binary links the relay, the client
//! and their dependencies once, instead of once per suite.

mod common;

mod answer;
mod approvals;
mod ask;
mod ask_here;
mod at_rest;
mod audit_grants;
mod audit_verify;
mod cli;
mod device_signing;
mod display;
mod domain;
mod durability;
mod follow;
mod gate_table;
mod grants;
mod hook;
mod hook_skill;
mod input;
mod instances;
mod instances_outboxes;
mod long_text;
mod operations;
mod partner;
mod quotas;
mod relay_override;
mod secrets;
mod sessions;
mod several_agents;
mod store_copy;
mod trust;
