//! The UniFFI binding of Pacerelle (placeholder until the phone SDK lands).
