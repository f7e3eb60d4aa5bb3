//! `pacerelle-load`: a load generator in its own process (skeleton; see `cargo xtask bench --load`).

fn main() {
    println!("pacerelle-load: not built yet");
}
