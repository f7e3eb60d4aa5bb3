"""Per-task overhead of the Python supervised loop (`Agent.run`) compared with the Rust echo agent.

Both agents do the same work per task: reply `echo: <text>`, mark it processed, save a checkpoint. Each runs
as its own process against its own fresh relay (`pacerelle serve`, SQLite, on 127.0.0.1); a device (this
process) sends the tasks. Three measures per agent:

- sequential: send one task, wait for its reply on the device's conversation long-poll, send the next —
  the round trip a person sees, p50/p99;
- burst: send N tasks at once, time until the relay counts all N processed — tasks per second;
- agent CPU per task: the agent process's user + system CPU time over both phases, divided by the tasks.
  Wall-clock figures are bound by the relay's synced writes (three per task); the CPU figure is the cost of
  the agent itself, and the difference between the two agents is the cost of the Python layer.

    python pacerelle-py/bench/overhead.py [--tasks 300] [--burst 500] [--python-first]

Needs the wheel installed (`pip install ./pacerelle-py`), `target/{release,debug}/pacerelle` and
`target/{release,debug}/echo-agent` (or PACERELLE_BIN / --relay / --echo-agent). Linux (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pacerelle

ROOT = Path(__file__).resolve().parents[2]

PYTHON_AGENT = """
import pacerelle
agent = pacerelle.Agent.from_env(host="bench")
def handle(message, ctx):
    ctx.save_checkpoint(f"answered {message.message_id}", "wait for the next task")
    return f"echo: {message.text}"
agent.run(handle)
"""


def binary(name: str, explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / name
        if path.exists():
            return path
    sys.exit(f"no {name} binary: cargo build --release -p {'pacerelle-cli' if name == 'pacerelle' else name}")


def start_relay(bin_path: Path, data: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [str(bin_path), "serve", "--json", "--listen", "127.0.0.1:0", "--data", str(data)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PACERELLE_HOME=str(data / "home"), PACERELLE_LOG="warn"),
    )
    assert proc.stdout is not None
    text = ""
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("the relay did not start")
        text += line
        try:
            return proc, json.loads(text)["relayUrl"]
        except json.JSONDecodeError:
            continue


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_processed(agent: pacerelle.Agent, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while agent.status().processed < count:
        if time.monotonic() > deadline:
            sys.exit("the agent did not process the tasks in time")
        time.sleep(0.005)


def measure(name: str, command: list[str], relay_url: str, tasks: int, burst: int, warmup: int) -> dict[str, object]:
    agent = pacerelle.Agent.register(relay_url, f"bench {name}")
    device = pacerelle.Device.join(agent.create_pairing().link, "bench phone")
    env = dict(
        os.environ,
        PACERELLE_RELAY_URL=relay_url,
        PACERELLE_AGENT_ID=agent.agent_id,
        PACERELLE_AGENT_TOKEN=agent.token,
        PACERELLE_LOG="warn",
    )
    proc = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        cursor = device.conversation().cursor
        latencies: list[float] = []
        cpu_start = 0.0
        for i in range(warmup + tasks):
            if i == warmup:
                cpu_start = cpu_seconds(proc.pid)
            started = time.perf_counter()
            sent = device.send(f"task {i}")
            replied = False
            while not replied:
                page = device.conversation(cursor, timeout=30)
                cursor = page.cursor
                replied = any(it.kind == "reply" and it.source_message_id == sent.id for it in page.items)
            if i >= warmup:
                latencies.append(time.perf_counter() - started)
        done = warmup + tasks
        wait_processed(agent, done)
        started = time.perf_counter()
        for i in range(burst):
            device.send(f"burst {i}")
        wait_processed(agent, done + burst)
        elapsed = time.perf_counter() - started
        cpu_per_task = (cpu_seconds(proc.pid) - cpu_start) / (tasks + burst)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    latencies.sort()
    return {
        "agent": name,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "burst_tasks_per_s": burst / elapsed,
        "burst_ms_per_task": elapsed / burst * 1000,
        "agent_cpu_ms_per_task": cpu_per_task * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=300, help="sequential tasks measured (after --warmup)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--burst", type=int, default=500, help="tasks sent at once for the throughput figure")
    parser.add_argument("--relay", help="the pacerelle binary (default: target/release or target/debug)")
    parser.add_argument("--echo-agent", help="the Rust echo agent binary (default: target/release or target/debug)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--python-first", action="store_true", help="measure the Python agent first")
    args = parser.parse_args()

    relay_bin = binary("pacerelle", args.relay or os.environ.get("PACERELLE_BIN"))
    echo_bin = binary("echo-agent", args.echo_agent)
    agents = [
        ("rust echo-agent", [str(echo_bin)]),
        ("python Agent.run", [sys.executable, "-c", PYTHON_AGENT]),
    ]
    if args.python_first:
        agents.reverse()
    rows = []
    for name, command in agents:
        # A fresh relay and database for each agent, so that neither inherits the other's data.
        with tempfile.TemporaryDirectory() as tmp:
            relay, url = start_relay(relay_bin, Path(tmp))
            try:
                rows.append(measure(name, command, url, args.tasks, args.burst, args.warmup))
            finally:
                relay.terminate()
                relay.wait(10)
    rows.sort(key=lambda r: str(r["agent"]) != "rust echo-agent")
    if args.json:
        print(json.dumps({"rows": rows, "relay": str(relay_bin), "echo_agent": str(echo_bin)}, indent=2))
        return
    print(f"# relay {relay_bin}, echo agent {echo_bin}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"# {args.tasks} sequential tasks (after {args.warmup} warm-up), then a burst of {args.burst}")
    print("| agent | p50 round trip | p99 round trip | burst throughput | burst time per task | agent CPU per task |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['agent']} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | "
            f"{r['burst_tasks_per_s']:.0f} tasks/s | {r['burst_ms_per_task']:.2f} ms | {r['agent_cpu_ms_per_task']:.2f} ms |"
        )
    rust, py = rows

    def diff(key: str) -> float:
        return float(str(py[key])) - float(str(rust[key]))

    print(
        f"\nPython loop overhead per task: {diff('p50_ms'):+.2f} ms round trip at p50, "
        f"{diff('burst_ms_per_task'):+.2f} ms in the burst, {diff('agent_cpu_ms_per_task'):+.2f} ms of agent CPU"
    )

if __name__ == "__main__":
    main()
