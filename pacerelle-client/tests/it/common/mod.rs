//! A real relay on 127.0.0.1:0 with a SQLite file in a temporary folder (`pacerelle-test-support`).
#![allow(unused_imports, dead_code)]

pub mod rows;

pub use pacerelle_test_support::{TestRelay, file_contains};
