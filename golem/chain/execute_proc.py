"""Run the executor for one permitted action in its own process — what a worker does in the execute
activity, reduced to a command, so a test can SIGKILL it inside the exactly-once windows.

    python -m golem.chain.execute_proc --rpc URL --data DIR --golem-id G --tick N \
        --action '{"action_index": 0, "tool": "borrow", "arguments": {"amount": 10}}' \
        --permit PERMIT_ID [--pause-after signed|broadcast] [--key-env GOLEM_PRIVATE_KEY]

The signing key is read from the environment variable named by --key-env (never an argument, so it
is not visible in `ps`). With --pause-after, the process prints `PAUSED <event> <tx_hash>` after the
first such event and sleeps until killed. Without it, it prints the ActionRecord as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from eth_account import Account

from golem.chain.contracts import Deployment
from golem.chain.executor import Executor
from golem.chain.journal import TxJournal
from golem.chain.permits import PermitStore
from golem.chain.reader import read_snapshot
from golem.chain.web3client import make_web3
from golem.models.observation import Observation
from golem.models.tick import ProposedAction
from golem.layout import DataLayout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="golem.chain.execute_proc")
    p.add_argument("--rpc", required=True)
    p.add_argument("--data", required=True, type=Path, help="data dir with deployment.json, tx_journal.sqlite, permits.sqlite")
    p.add_argument("--golem-id", required=True)
    p.add_argument("--tick", required=True, type=int)
    p.add_argument("--action", required=True, help="ProposedAction JSON")
    p.add_argument("--permit", required=True)
    p.add_argument("--pause-after", choices=["signed", "broadcast"])
    p.add_argument("--key-env", default="GOLEM_PRIVATE_KEY")
    args = p.parse_args(argv)

    key = os.environ.get(args.key_env)
    if not key:
        print(f"execute_proc: environment variable {args.key_env} is not set (it must hold the signing key)", file=sys.stderr)
        return 2
    try:
        action = ProposedAction.model_validate_json(args.action)
    except ValueError as e:
        print(f"execute_proc: --action is not a ProposedAction: {e}", file=sys.stderr)
        return 2
    w3 = make_web3(args.rpc)
    deployment = Deployment.load(DataLayout(args.data).deployment)
    signer = Account.from_key(key)
    del key

    def on_event(event: str, intent: Any) -> None:
        if event == args.pause_after:
            print(f"PAUSED {event} {intent.tx_hash}", flush=True)
            while True:  # wait for the SIGKILL
                time.sleep(60)

    executor = Executor(w3, deployment, signer, TxJournal(DataLayout(args.data).tx_journal),
                        PermitStore(DataLayout(args.data).permits), on_event=on_event)
    obs = Observation(snapshot=read_snapshot(w3, deployment, executor.account))
    record = executor.execute(args.golem_id, args.tick, action, args.permit, obs)
    print(record.model_dump_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
