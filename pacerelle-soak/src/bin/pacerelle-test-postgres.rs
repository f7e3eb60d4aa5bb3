//! A throw-away PostgreSQL cluster for the suites that are not Rust (the web app's end-to-end suite on
//! PostgreSQL, `cargo xtask test --only web`): starts one (`fsync=off`, as the Rust suites' clusters: the
//! suites test the relay on PostgreSQL, not PostgreSQL's durability), makes a fresh database in it, prints one line — the database's URL, a tab, the
//! cluster's folder — and holds the cluster until its standard input ends (or it is killed), when the cluster's
//! watchdog stops the server and removes the folder.

use std::io::{Read as _, Write as _};

use pacerelle_test_support::postgres::Cluster;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cluster = Cluster::start();
    let url = cluster.fresh_database().await;
    let folder = cluster
        .dir()
        .ok_or_else(|| anyhow::anyhow!("the cluster has no folder of its own"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{url}\t{}", folder.display())?;
    out.flush()?;
    // Until the caller closes the pipe; its end, or an error reading it, means the same.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(cluster);
    Ok(())
}
