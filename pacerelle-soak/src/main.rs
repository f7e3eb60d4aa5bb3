//! `cargo xtask soak`: senders, a supervised agent, random SIGKILLs, and a checker.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("the soak is being written")
}
