"""A supervised Pacerelle agent in Python.

It answers each task from the phone, asks before doing anything risky, saves a checkpoint after each task,
keeps running across relay restarts, and stops cleanly on Ctrl-C or SIGTERM.

    pip install ./pacerelle-py
    export PACERELLE_RELAY_URL=http://127.0.0.1:8787 PACERELLE_AGENT_ID=ag_… PACERELLE_AGENT_TOKEN=pcr1_…
    python examples/python/supervised_agent.py

Tasks it understands: `deploy <env>` (asks the owner first), `notes` (the latest checkpoints); anything else
is echoed back. Set PACERELLE_POLICY to a policy file (docs/hooks or DESIGN §8) to let it decide what to ask.
"""

from __future__ import annotations

import logging
import os

import pacerelle

log = logging.getLogger("supervised_agent")

agent = pacerelle.Agent.from_env(host="supervised_agent.py")
policy = os.environ.get("PACERELLE_POLICY")  # None: ask for every deploy


@agent.require_approval("Deploy to {env}?", details="The agent will run the deploy script.", expires_in=300, policy=policy, tool="deploy")
def deploy(env: str) -> str:
    log.info("deploying to %s", env)
    return f"deployed {env}"


def handle(message: pacerelle.Message, ctx: pacerelle.RunContext) -> str:
    text = message.text.strip()
    if text.startswith("deploy "):
        env = text.removeprefix("deploy ").strip()
        try:
            result = deploy(env)
        except pacerelle.NotApproved as e:
            result = f"not deployed to {env}: {e.conclusion}"
        ctx.save_checkpoint(f"handled deploy to {env}: {result}", "wait for the next task")
        return result
    if text == "notes":
        latest = agent.get_checkpoints(3)
        return "\n".join(f"- {c.summary}" for c in latest) or "no notes yet"
    ctx.save_checkpoint(f"echoed {message.message_id}", "wait for the next task")
    return f"echo: {text}"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.info("agent %s on %s", agent.agent_id, agent.relay_url)
    agent.run(handle)  # until Ctrl-C or SIGTERM


if __name__ == "__main__":
    main()
