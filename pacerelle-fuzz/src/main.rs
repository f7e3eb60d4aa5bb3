//! `cargo xtask fuzz`: property and fuzz targets over every parser fed by the network or a file.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("the fuzz targets are being written")
}
