"""Smoke test of the Python binding of pacerelle-ffi: a second language over the same binding surface.

Starts a real relay (`pacerelle serve` on 127.0.0.1:0, temporary database), creates an agent, runs the echo
agent, then drives the binding across separate processes:

1. a child process joins by link and prints only its credentials;
2. this process restores them (a new process), sends a task and receives the echo reply, answers a question
   the agent asked with `pacerelle ask` (which exits 0 on an approved answer);
3. after the agent side revokes the device, another child process restores the same credentials and gets
   `PacerelleError.NotPaired`.

Usage (what `cargo xtask test` runs, from the workspace root):

    python3 pacerelle-ffi/python-smoke/smoke.py --bindings target/bindings/python --target target/debug

`--bindings` holds the generated `pacerelle_ffi.py` and `pacerelle_core.py` (the core's enums and records, which
the SDK passes as they are) with `libpacerelle_ffi.so` copied beside them.
"""

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

RESULTS = []


def check(name, condition, detail=""):
    RESULTS.append((name, bool(condition)))
    print(f"{'ok  ' if condition else 'FAIL'} {name}{'' if condition else ': ' + str(detail)}", flush=True)


class Relay:
    """A relay, an agent and the echo agent, for the length of a `with` block."""

    def __init__(self, target):
        self.target = target
        self.dir = tempfile.TemporaryDirectory(prefix="pacerelle-py-smoke-")
        self.home = os.path.join(self.dir.name, "home")
        self.processes = []

    def __enter__(self):
        serve = subprocess.Popen(
            [self.bin("pacerelle"), "serve", "--listen", "127.0.0.1:0", "--json", "--data", self.path("data")],
            stdout=subprocess.PIPE,
            stderr=open(self.path("relay.log"), "wb"),
            text=True,
        )
        self.processes.append(serve)
        seen = ""
        while '"relayUrl"' not in seen or not seen.rstrip().endswith("}"):
            line = serve.stdout.readline()
            if not line:
                raise RuntimeError(f"the relay stopped before printing its URL: {seen}")
            seen += line
        self.url = json.loads(seen)["relayUrl"]
        agent = self.run("agent", "create", "--name", "python smoke", "--json")
        self.agent_id, token = agent["agentId"], agent["token"]
        env = dict(os.environ, PACERELLE_RELAY_URL=self.url, PACERELLE_AGENT_ID=self.agent_id,
                   PACERELLE_AGENT_TOKEN=token)
        echo = subprocess.Popen([self.bin("echo-agent"), "--takeover"], env=env,
                                stdout=subprocess.DEVNULL, stderr=open(self.path("echo-agent.log"), "wb"))
        self.processes.append(echo)
        return self

    def __exit__(self, *exc):
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        self.dir.cleanup()

    def bin(self, name):
        return os.path.join(self.target, name)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def env(self):
        return dict(os.environ, PACERELLE_HOME=self.home, PACERELLE_RELAY_URL=self.url)

    def run(self, *args):
        out = subprocess.run([self.bin("pacerelle"), *args], env=self.env(), capture_output=True, text=True,
                             timeout=60, check=True)
        return json.loads(out.stdout)

    def ask(self, *args):
        p = subprocess.Popen([self.bin("pacerelle"), "ask", *args, "--json"], env=self.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.processes.append(p)
        return p


def child(args, *extra):
    """Runs this script again in a new process; returns its stdout (last line)."""
    out = subprocess.run([sys.executable, __file__, "--bindings", args.bindings, "--target", args.target, *extra],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"child {extra[0]} failed: {out.stderr}")
    return out.stdout.strip().splitlines()[-1]


async def child_join(link):
    from pacerelle_ffi import DeviceClient

    device = await DeviceClient.join(link, "python phone")
    print(device.credentials())


async def child_expect_not_paired(credentials):
    from pacerelle_ffi import DeviceClient, PacerelleError

    device = DeviceClient.restore(credentials)
    try:
        await device.status()
    except PacerelleError.NotPaired:
        print("not_paired")
        return
    print("still paired")


async def wait_for(device, after, matches, timeout=30):
    deadline = time.monotonic() + timeout
    cursor = after
    while time.monotonic() < deadline:
        page = await device.wait_for_events(cursor, datetime.timedelta(seconds=5))
        for item in page.items:
            if matches(item):
                return item
        cursor = page.cursor
    return None


async def main(args):
    from pacerelle_core import Answer, ItemKind, QuestionKind
    from pacerelle_ffi import DeviceClient, PacerelleError

    with Relay(args.target) as relay:
        # 1. Join in another process; only the credentials string comes back.
        credentials = child(args, "join", relay.run("pair", "--json")["link"])
        check("join in a child process returns credentials", credentials.startswith("pcrdev1_"), credentials[:8])

        # 2. Restore them here, in a new process.
        device = DeviceClient.restore(credentials)
        identity = device.identity()
        check("restored identity names the agent", identity.agent_id == relay.agent_id, identity)
        sent = await device.send("hello from python", None)
        check("send stores the task", sent.created and sent.message_id, sent)
        reply = await wait_for(device, None,
                               lambda i: i.kind == ItemKind.REPLY and i.source_message_id == sent.message_id)
        check("the echo reply arrives", reply is not None and reply.text == "echo: hello from python", reply)
        again = await device.send("hello from python", sent.message_id)
        check("send is idempotent by id", not again.created, again)

        # The agent asks; the answer is given here; the agent sees it approved.
        ask = relay.ask("Deploy from python?", "--expires", "2m")
        question = None
        deadline = time.monotonic() + 30
        while question is None and time.monotonic() < deadline:
            question = next((q for q in await device.pending_questions() if q.question == "Deploy from python?"),
                            None)
            if question is None:
                await asyncio.sleep(0.1)
        check("the question is pending on the device",
              question is not None and question.kind == QuestionKind.YES_NO and question.is_open, question)
        if question is not None:
            try:
                await device.answer(question.question_id, Answer.TEXT("sure"))
                check("an answer that does not fit is refused", False, "accepted")
            except PacerelleError.InvalidInput:
                check("an answer that does not fit is refused", True)
            answered = await device.answer(question.question_id, Answer.YES())
            check("answer returns the answered question", answered.state.name == "ANSWERED", answered)
        try:
            out, _ = ask.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            ask.kill()
            out, _ = ask.communicate()
        check("the agent sees the answer approved (ask exits 0)", ask.returncode == 0, f"{ask.returncode}: {out}")

        # 3. Revoked on the agent side: the same credentials, restored in another process, are not paired.
        relay.run("agent", "revoke", identity.device_id, "--json")
        check("revoked credentials fail with NotPaired in a new process",
              child(args, "not-paired", credentials) == "not_paired")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bindings", required=True, help="folder of the generated modules and their library")
    parser.add_argument("--target", required=True, help="folder of the pacerelle and echo-agent binaries")
    parser.add_argument("mode", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.bindings = os.path.abspath(args.bindings)
    args.target = os.path.abspath(args.target)
    sys.path.insert(0, args.bindings)
    if args.mode and args.mode[0] == "join":
        asyncio.run(child_join(args.mode[1]))
    elif args.mode and args.mode[0] == "not-paired":
        asyncio.run(child_expect_not_paired(args.mode[1]))
    else:
        asyncio.run(main(args))
        failed = sum(1 for _, ok in RESULTS if not ok)
        print(f"python-smoke: {len(RESULTS) - failed} passed, {failed} failed")
        sys.exit(1 if failed else 0)
