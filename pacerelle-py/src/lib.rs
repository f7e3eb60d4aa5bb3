//! The Python binding of Pacerelle (placeholder until the wheel lands).
