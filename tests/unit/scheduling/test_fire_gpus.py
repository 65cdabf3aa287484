"""A scheduled GPU job where there are no GPUs fails the fire instead of running on a CPU; where it runs."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.gpu_devices import nvidia_devices
from gpuplan.jobs.spec import parse_spec
from gpuplan.scheduling.fire import make_launcher, provider_name_for
from gpuplan.scheduling.scheduler import FireRequest, Gates
from gpuplan.store.db import Store
from gpuplan.store.models import Run, Schedule

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.mark.skipif(bool(nvidia_devices()), reason="this machine has NVIDIA GPUs")
def test_scheduled_gpu_job_on_this_cpu_machine_fails_the_fire(tmp_path: Path) -> None:
    store = Store.open(os.environ["GPUPLAN_DB"])
    spec_text = "name: nightly-gpu\nruntime: process\ncommand: 'true'\nresources: {gpu: 'A100:1'}\n"
    with store.session() as s:
        schedule = Schedule(name="nightly-gpu", cron="0 3 * * *", spec_text=spec_text, spec_hash="x")
        s.add(schedule)
        s.flush()
        schedule_id = schedule.id
    launcher = make_launcher(store, spec_dir=str(tmp_path))
    with pytest.raises(UserError, match="asks for 1 x A100 per node on local, but this machine has no NVIDIA GPU"):
        launcher(FireRequest(schedule_id=schedule_id, schedule_name="nightly-gpu", spec_text=spec_text,
                             fire_at=NOW, now=NOW, gates=Gates()))
    with store.session() as s:
        assert s.query(Run).count() == 0


def test_scheduled_provider_follows_clouds_then_the_config_default(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plain = parse_spec("name: n\nruntime: process\ncommand: x\n", source="t")
    assert provider_name_for(plain) == "local"
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nprovider = "slurm"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    assert provider_name_for(plain) == "slurm"
    on_gcp = parse_spec("name: n\nruntime: process\ncommand: x\nresources: {clouds: [gcp]}\n", source="t")
    assert provider_name_for(on_gcp) == "gcp"
