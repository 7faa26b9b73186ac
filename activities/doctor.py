"""The worker's own diagnosis, for `golem doctor` (workflows/doctor.py)."""

from __future__ import annotations

import os
import socket

from temporalio import activity

from activities import ActivitySet
from golem.doctor import doctor_report
from golem.models.config_version import short
from golem.services import Services


class DoctorActivities(ActivitySet):
    def __init__(self, services: Services) -> None:
        self.s = services

    @activity.defn(name="doctor")
    def doctor(self, golem_id: str) -> str:
        s = self.s
        head = (f"seen by the worker: pid {os.getpid()} on {socket.gethostname()}, data {s.data_dir}, "
                f"config version {short(s.config_version)}, chain {s.config.chain.rpc_url} (chain id {s.chain_id}), "
                f"account {s.account}, live={s.live}")
        return head + "\n" + doctor_report(s.config, os.environ, s.home, s.data_dir,
                                           deliberator=(s.deliberator, s.deliberator_reason))
