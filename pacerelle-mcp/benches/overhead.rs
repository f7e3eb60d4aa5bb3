//! What the MCP adapter adds to one tool call: the same relay call made through `pacerelle-mcp` over stdio
//! (JSON-RPC, argument checks, result rendering, a pipe each way) and directly through the client.
//!
//! `cargo bench -p pacerelle-mcp --bench overhead [-- --quick]`
//!
//! A relay runs in this process on loopback with a SQLite file; the real `pacerelle-mcp` binary is spawned
//! and driven by an rmcp client over stdio. Calls alternate between the two paths so that both see the same
//! conditions. Lines:
//! 1. `get_checkpoints {limit: 5}` (3 stored) against `AgentClient::checkpoints(5)`;
//! 2. `wait_for_messages {timeoutSeconds: 0}` on an empty inbox against `wait_for_messages(…, 0)`, each
//!    with its own agent's lease held;
//! 3. an MCP round trip that reaches no relay (a call refused with `invalid_params`): the transport floor.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use pacerelle_client::core::wire::OpenSession;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions};
use pacerelle_relay::{Config, Relay};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Figures {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Figures {
    fn new(name: &'static str) -> Self {
        Figures {
            name,
            samples: Vec::new(),
        }
    }

    fn print(&mut self) -> (Duration, Duration) {
        self.samples.sort();
        let (p50, p99) = (percentile(&self.samples, 0.5), percentile(&self.samples, 0.99));
        println!(
            "{:<48} n={:<6} p50={:>8.3} ms  p99={:>8.3} ms",
            self.name,
            self.samples.len(),
            ms(p50),
            ms(p99)
        );
        (p50, p99)
    }
}

fn args(value: serde_json::Value) -> JsonObject {
    value.as_object().expect("object").clone()
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &'static str,
    arguments: JsonObject,
) -> Duration {
    let start = Instant::now();
    let result = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
        .await;
    let elapsed = start.elapsed();
    let result = result.expect("call");
    assert_ne!(result.is_error, Some(true), "{name}: {:?}", result.content);
    elapsed
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 200 } else { 2000 };
    let warmup = rounds / 10;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let relay = Relay::open(Config {
            database_path: dir.path().join("bench.db"),
            open_registration: true,
            registration_secret: None,
            public_url: None,
            ..Default::default()
        })
        .await
        .expect("relay");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(relay.serve(listener, std::future::pending()));

        // Two agents with the same data, so that the direct client and the adapter each hold their own lease.
        let mut agents = Vec::new();
        for name in ["direct", "adapter"] {
            let agent = AgentClient::register(&url, name, None).await.expect("register");
            let link = agent
                .create_pairing(PairingOptions::default())
                .await
                .expect("pairing");
            DeviceClient::join(&link.link, "phone").await.expect("join");
            for i in 0..3 {
                agent
                    .save_checkpoint(&format!("step {i} done"), "go on", &[])
                    .await
                    .expect("checkpoint");
            }
            agents.push(agent);
        }
        let (direct, adapter) = (&agents[0], &agents[1]);
        direct
            .open_session(&OpenSession::new("bench"))
            .await
            .expect("session");

        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_pacerelle-mcp"));
        cmd.env("PACERELLE_AGENT_ID", adapter.agent_id())
            .env("PACERELLE_AGENT_TOKEN", adapter.token().expose())
            .env("PACERELLE_RELAY_URL", &url)
            .env("RUST_LOG", "warn,rmcp=error");
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn");
        let client = ().serve(transport).await.expect("initialize");

        println!(
            "machine: {} cores; relay, client and MCP client in one process, pacerelle-mcp in another; \
             loopback",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        let mut ckp_direct = Figures::new("get_checkpoints, client directly");
        let mut ckp_mcp = Figures::new("get_checkpoints, through pacerelle-mcp (stdio)");
        let mut wait_direct = Figures::new("wait_for_messages 0 s, client directly");
        let mut wait_mcp = Figures::new("wait_for_messages 0 s, through pacerelle-mcp");
        let mut floor = Figures::new("MCP round trip without relay (invalid_params)");
        for i in 0..rounds + warmup {
            let start = Instant::now();
            let list = direct.checkpoints(5).await.expect("checkpoints");
            let d = start.elapsed();
            assert_eq!(list.len(), 3);
            let m = call(&client, "get_checkpoints", args(json!({"limit": 5}))).await;

            let start = Instant::now();
            direct
                .wait_for_messages(None, Duration::ZERO)
                .await
                .expect("wait");
            let wd = start.elapsed();
            let wm = call(&client, "wait_for_messages", args(json!({"timeoutSeconds": 0}))).await;

            let start = Instant::now();
            let bad = CallToolRequestParams::new("get_checkpoints").with_arguments(args(json!({"limit": 0})));
            let refused = client.call_tool(bad).await;
            let f = start.elapsed();
            assert!(refused.is_err());
            if i >= warmup {
                ckp_direct.samples.push(d);
                ckp_mcp.samples.push(m);
                wait_direct.samples.push(wd);
                wait_mcp.samples.push(wm);
                floor.samples.push(f);
            }
        }
        let (cd50, cd99) = ckp_direct.print();
        let (cm50, cm99) = ckp_mcp.print();
        let (wd50, wd99) = wait_direct.print();
        let (wm50, wm99) = wait_mcp.print();
        floor.print();
        println!(
            "adapter overhead, get_checkpoints:   p50 {:+.3} ms  p99 {:+.3} ms",
            ms(cm50) - ms(cd50),
            ms(cm99) - ms(cd99)
        );
        println!(
            "adapter overhead, wait_for_messages: p50 {:+.3} ms  p99 {:+.3} ms",
            ms(wm50) - ms(wd50),
            ms(wm99) - ms(wd99)
        );
        client.cancel().await.expect("stop the server");
    });
}
