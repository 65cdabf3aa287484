"""The Slurm provider against a real slurmctld/slurmd (and slurmdbd for sacct) on 127.0.0.1.

Each job takes 2-4 s to turn around, so the jobs that need no observation of their early states are submitted
together by one fixture and the tests then check one job each.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.providers.base import TAG_RUN_ID, Instance, InstanceState, LaunchRequest, ProviderError
from gpuplan.providers.slurm.provider import SlurmProvider

from support.clihelp import run_cli
from support.slurmhelp import SlurmCluster, wait_for
from support.torchrun_args import torchrun_sees

SECRET = "s3cr3t-'$(touch /tmp/gpuplan-pwned)'-value"
HOSTILE_NAME = 'it\'s "$(touch PWNED)" `touch PWNED2`\nrm -rf / ; echo'
HOSTILE_VALUE = "a'b\"c $(touch PWNED3) `touch PWNED4` $HOME \\n; exit 9"


@pytest.fixture(scope="module")
def cluster(slurm: SlurmCluster) -> SlurmCluster:
    return slurm


@pytest.fixture
def provider(cluster: SlurmCluster) -> SlurmProvider:
    return SlurmProvider(slurm_conf=cluster.conf, price_per_gpu_hour="2.50", price_per_node_hour="0.40")


def request(run_id: str, command: str, run_dir: Path, **kw: object) -> LaunchRequest:
    return LaunchRequest(run_id=run_id, name=kw.pop("name", run_id), command=command,  # type: ignore[arg-type]
                         run_dir=str(run_dir), **kw)  # type: ignore[arg-type]


def finish(provider: SlurmProvider, job_id: str, timeout: float = 40) -> tuple[Instance, list[str]]:
    """Poll until the job has ended; returns its last description and every state seen on the way."""
    seen: list[str] = []

    def done() -> Instance | None:
        inst = provider.describe([job_id])[0]
        if not seen or seen[-1] != inst.state:
            seen.append(inst.state)
        return inst if inst.state in InstanceState.GONE else None

    return wait_for(done, timeout=timeout), seen


def test_cpu_job_end_to_end(provider: SlurmProvider, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    req = request("r-e2e0000001", 'echo "hello from $GPUPLAN_RUN_ID rank $RANK of $WORLD_SIZE"; sleep 5; echo done',
                  run_dir, max_hours=0.5, nodes=1)
    [inst] = provider.launch(req)
    # On a busy machine the job may already be running by the time sbatch returns.
    assert inst.state in (InstanceState.PENDING, InstanceState.RUNNING) and inst.instance_id.isdigit()
    assert inst.run_id == "r-e2e0000001" and inst.tags[TAG_RUN_ID] == "r-e2e0000001"
    assert inst.price_per_hour == Decimal("0.40")  # no GPUs: one node at the node-hour rate

    # Launch is idempotent per run id: the same job comes back, nothing new is queued.
    [again] = provider.launch(req)
    assert again.instance_id == inst.instance_id

    running = wait_for(lambda: provider.describe([inst.instance_id])[0].state == InstanceState.RUNNING)
    assert running
    live = {i.instance_id for i in provider.list_tagged("r-e2e0000001")}
    assert inst.instance_id in live or provider.describe([inst.instance_id])[0].state == InstanceState.SUCCEEDED
    limit = provider._run("scontrol", ["show", "job", "-o", inst.instance_id]).stdout
    assert "TimeLimit=00:30:00" in limit and "JobName=gpuplan-r-e2e0000001" in limit
    assert "Comment=r-e2e0000001" in limit

    final, seen = finish(provider, inst.instance_id)
    assert final.state == InstanceState.SUCCEEDED, (seen, final)
    assert final.exit_code == 0
    assert final.launched_at is not None and final.ended_at is not None and final.ended_at >= final.launched_at
    log = Path(provider.logs(final, str(run_dir)) or "")
    assert log == run_dir / "node-0" / "job.log"
    text = log.read_text()
    assert "hello from r-e2e0000001 rank 0 of 1" in text and "done" in text
    assert provider.list_tagged("r-e2e0000001") == []  # finished: nothing left for reconcile


@pytest.fixture(scope="module")
def batch(cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Jobs submitted together (they run side by side on the 8 advertised CPUs): name -> (run dir, job id)."""
    provider = SlurmProvider(slurm_conf=cluster.conf, price_per_gpu_hour="2.50")
    base = tmp_path_factory.mktemp("slurm-batch")
    env_dump = ('python3 -c \'import json,os; json.dump({k: v for k, v in os.environ.items()}, '
                'open(os.path.join(os.environ["GPUPLAN_RUN_DIR"], "env-" + os.environ["RANK"] + ".json"), "w"))\'')
    specs = {
        "fail": request("r-fail000001", "echo about to fail; exit 3", base / "fail"),
        "ranks": request("r-ranks00001", env_dump, base / "ranks", gpus_per_node=2,
                         options={"tasks_per_node": 2, "master_port": 29611}),
        "hostile": request(
            "r-hostile001",
            # The command runs as written: its own quoting survives, and hostile env values stay literal.
            "printf '%s\\n' \"it's\" 'a \"b\"' \"$HOSTILE\" \"$GPUPLAN_JOB_NAME\" > out.txt; "
            "echo `echo backticks run` $(echo dollar-parens run) >> out.txt",
            base / "hostile", name=HOSTILE_NAME, env={"HOSTILE": HOSTILE_VALUE}, workdir=str(base / "hostile"),
        ),
        "secret": request("r-secret0001", 'printf %s "$API_TOKEN" | sha256sum; echo "names=$GPUPLAN_SECRET_NAMES"',
                          base / "secret", secrets={"API_TOKEN": SECRET}),
    }
    (base / "hostile").mkdir(parents=True)
    jobs = {}
    for key, req in specs.items():
        [inst] = provider.launch(req)
        jobs[key] = (Path(req.run_dir), inst.instance_id)
    for _, job_id in jobs.values():
        finish(provider, job_id)
    return jobs


def test_failing_job_reports_its_exit_code(provider: SlurmProvider, batch: dict[str, tuple[Path, str]]) -> None:
    run_dir, job_id = batch["fail"]
    [inst] = provider.describe([job_id])
    assert inst.state == InstanceState.FAILED
    assert inst.exit_code == 3
    assert "about to fail" in (run_dir / "node-0" / "job.log").read_text()
    assert "gpuplan: job exited with status 3" in (run_dir / "node-0" / "job.log").read_text()


def test_parsable_squeue_and_scontrol_give_the_same_answer(cluster: SlurmCluster,
                                                           batch: dict[str, tuple[Path, str]]) -> None:
    """Clusters without squeue's JSON plugin: the parsable form plus `scontrol show job` for the exit code."""
    parsable = SlurmProvider(slurm_conf=cluster.conf, status_format="parsable")
    json_form = SlurmProvider(slurm_conf=cluster.conf, status_format="json")
    ids = [batch["fail"][1], batch["ranks"][1]]
    by_parsable = {i.instance_id: i for i in parsable.describe(ids)}
    by_json = {i.instance_id: i for i in json_form.describe(ids)}
    for job_id in ids:
        a, b = by_parsable[job_id], by_json[job_id]
        assert (a.state, a.exit_code, a.run_id, a.gpu_count) == (b.state, b.exit_code, b.run_id, b.gpu_count)
        assert a.launched_at == b.launched_at and a.ended_at == b.ended_at
    assert by_parsable[batch["fail"][1]].exit_code == 3
    assert by_parsable[batch["ranks"][1]].gpu_count == 2


def test_sacct_knows_finished_jobs(cluster: SlurmCluster, provider: SlurmProvider,
                                   batch: dict[str, tuple[Path, str]]) -> None:
    """After MinJobAge the controller forgets a job; the exit code then comes from the accounting database."""
    if not cluster.accounting:
        pytest.skip("slurmdbd/mariadb are not installed: this cluster keeps no accounting")
    job_id = batch["fail"][1]

    def recorded():  # type: ignore[no-untyped-def]
        records = [r for r in provider._sacct([job_id]) if r.name == "gpuplan-r-fail000001"]
        return records[0] if records and records[0].end else None

    record = recorded() or wait_for(recorded, timeout=15)
    assert record.job_id == job_id and record.exit_code == 3 and record.state == InstanceState.FAILED
    ranks = wait_for(lambda: [r for r in provider._sacct([batch["ranks"][1]]) if r.gpus_per_node], timeout=15)
    assert ranks[0].gpus_per_node == 2 and ranks[0].state == InstanceState.SUCCEEDED


def test_two_tasks_see_the_torchrun_variables(provider: SlurmProvider,
                                              batch: dict[str, tuple[Path, str]]) -> None:
    run_dir, job_id = batch["ranks"]
    [inst] = provider.describe([job_id])
    assert inst.state == InstanceState.SUCCEEDED, (run_dir / "node-0" / "job.log").read_text()
    assert inst.gpu_count == 2 and inst.price_per_hour == Decimal("5.00")  # 2 GPUs x 2.50
    envs = [json.loads((run_dir / f"env-{rank}.json").read_text()) for rank in (0, 1)]
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    for rank, env in enumerate(envs):
        assert env["RANK"] == env["GPUPLAN_RANK"] == str(rank)
        assert env["LOCAL_RANK"] == env["GPUPLAN_LOCAL_RANK"] == str(rank)
        assert env["NODE_RANK"] == env["GPUPLAN_NODE_RANK"] == "0"
        assert env["WORLD_SIZE"] == env["GPUPLAN_WORLD_SIZE"] == "2"
        assert env["NNODES"] == env["GPUPLAN_NNODES"] == "1"
        assert env["NPROC_PER_NODE"] == env["GPUPLAN_NPROC_PER_NODE"] == "2"
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == env["GPUPLAN_MASTER_ADDR"] == host
        assert env["MASTER_PORT"] == env["GPUPLAN_MASTER_PORT"] == "29611"
        # What a bare `torchrun train.py` reads (its PET_* variables, torch/distributed/argparse_util.py).
        assert torchrun_sees(env) == {"nnodes": "1", "node_rank": "0", "master_addr": host, "master_port": "29611",
                                      "nproc_per_node": "2"}
        assert env["GPUPLAN_RUN_ID"] == "r-ranks00001" and env["GPUPLAN_PROVIDER"] == "slurm"
        assert env["GPUPLAN_METRICS"] == str(run_dir / "metrics.jsonl")
        assert env["SLURM_GPUS_ON_NODE"] == "2"  # --gres=gpu:2 was granted
        assert env["GPUPLAN_SLURM_JOB_ID"] == job_id


def test_hostile_name_env_and_command_stay_inert(provider: SlurmProvider,
                                                 batch: dict[str, tuple[Path, str]]) -> None:
    run_dir, job_id = batch["hostile"]
    [inst] = provider.describe([job_id])
    assert inst.state == InstanceState.SUCCEEDED, (run_dir / "node-0" / "job.log").read_text()
    lines = (run_dir / "out.txt").read_text().split("\n")
    name_lines = HOSTILE_NAME.split("\n")
    assert lines[:3] == ["it's", 'a "b"', HOSTILE_VALUE]
    assert lines[3:3 + len(name_lines)] == name_lines
    assert lines[3 + len(name_lines)] == "backticks run dollar-parens run"  # the command's own $() runs
    for marker in ("PWNED", "PWNED2", "PWNED3", "PWNED4"):
        assert not (run_dir / marker).exists()
        assert not (Path.cwd() / marker).exists()


def test_secret_reaches_the_job_but_no_file(provider: SlurmProvider, batch: dict[str, tuple[Path, str]]) -> None:
    run_dir, job_id = batch["secret"]
    [inst] = provider.describe([job_id])
    assert inst.state == InstanceState.SUCCEEDED
    log = (run_dir / "node-0" / "job.log").read_text()
    assert hashlib.sha256(SECRET.encode()).hexdigest() in log
    assert "names=API_TOKEN" in log
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert not Path("/tmp/gpuplan-pwned").exists()


def test_cancel_and_list_tagged(cluster: SlurmCluster, provider: SlurmProvider, tmp_path: Path) -> None:
    [inst] = provider.launch(request("r-cancel0001", "echo started; sleep 120", tmp_path / "run"))
    # Someone else's job on the same cluster: reconcile must never see it as gpuplan's.
    other = cluster.run("sbatch", "--parsable", "--job-name=not-ours", "-o", "/dev/null", "--wrap", "sleep 120")
    assert other.returncode == 0, other.stderr
    other_id = other.stdout.strip()
    try:
        wait_for(lambda: provider.describe([inst.instance_id])[0].state == InstanceState.RUNNING)
        tagged = provider.list_tagged()
        assert inst.instance_id in {i.instance_id for i in tagged}
        assert other_id not in {i.instance_id for i in tagged}
        assert {i.run_id for i in tagged if i.instance_id == inst.instance_id} == {"r-cancel0001"}
        started = time.monotonic()
        provider.terminate([inst.instance_id])
        final, _ = finish(provider, inst.instance_id, timeout=20)
        assert final.state == InstanceState.TERMINATED and final.state_reason == "stopped"
        assert time.monotonic() - started < 15
        provider.terminate([inst.instance_id])  # idempotent
        provider.terminate(["999999"])  # a job Slurm never had: not an error either
        assert inst.instance_id not in {i.instance_id for i in provider.list_tagged()}
    finally:
        cluster.run("scancel", other_id)


def test_unknown_job_is_terminated(provider: SlurmProvider) -> None:
    [inst] = provider.describe(["987654"])
    assert inst.state == InstanceState.TERMINATED and "no longer knows" in (inst.state_reason or "")


def test_unreachable_controller_is_a_clear_error(cluster: SlurmCluster, tmp_path: Path) -> None:
    conf = Path(cluster.conf).read_text()
    dead = tmp_path / "slurm.conf"
    # Same cluster description, but the controller's port is one nobody listens on.
    import re

    from support.slurmhelp import _free_port

    conf = re.sub(r"SlurmctldPort=\d+", f"SlurmctldPort={_free_port()}", conf)
    dead.write_text(re.sub(r"MessageTimeout=\d+", "MessageTimeout=1", conf))  # fail fast
    provider = SlurmProvider(slurm_conf=str(dead), command_timeout=30)
    started = time.monotonic()
    with pytest.raises(ProviderError, match="cannot reach the Slurm controller") as err:
        provider.list_tagged()
    assert err.value.code == "SlurmUnreachable"
    assert time.monotonic() - started < 30


def test_missing_slurm_is_a_clear_error(tmp_path: Path) -> None:
    provider = SlurmProvider(bin_dir=str(tmp_path))
    with pytest.raises(ProviderError, match="is Slurm installed"):
        provider.launch(request("r-nobin00001", "true", tmp_path / "run"))


@pytest.mark.parametrize("rate", ["nan", "inf", "-inf"])
def test_a_non_finite_charge_back_rate_is_refused(rate: str) -> None:
    """`nan` crashed the constructor with decimal.InvalidOperation; `inf` priced every job at $inf/h."""
    with pytest.raises(ValueError, match=f"price_per_gpu_hour must be a finite number, got '{rate}'"):
        SlurmProvider(price_per_gpu_hour=rate)
    with pytest.raises(ValueError, match="price_per_node_hour must be a finite number"):
        SlurmProvider(price_per_node_hour=rate)


@pytest.mark.parametrize("rate", ["abc", "nan", "-2"])
def test_a_bad_charge_back_rate_is_bad_input_and_records_nothing(tmp_path: Path, rate: str) -> None:
    """GPUPLAN_SLURM_PRICE_PER_GPU_HOUR=abc was a ProviderError, exit 1 (a failure), where the local provider's
    bad price is bad input, exit 2; now both are one line naming the variable, exit 2, and nothing is recorded."""
    spec = tmp_path / "job.yaml"
    spec.write_text("name: rate\ncommand: echo hi\nresources:\n  gpu: A100\n  gpus_per_node: 2\n")
    result = run_cli("launch", str(spec), "--provider", "slurm", "-y",
                     env={"GPUPLAN_SLURM_PRICE_PER_GPU_HOUR": rate})
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: slurm: price_per_gpu_hour")
    assert "GPUPLAN_SLURM_PRICE_PER_GPU_HOUR" in result.stderr
    assert run_cli("runs", "--json").json() == []


def test_an_unknown_container_runtime_is_bad_input(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: rt\ncommand: echo hi\n")
    result = run_cli("launch", str(spec), "--provider", "slurm", "--dry-run", env={"GPUPLAN_SLURM_RUNTIME": "bogus"})
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert "unknown container runtime 'bogus' (GPUPLAN_SLURM_RUNTIME" in result.stderr


def test_a_bad_status_format_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[providers.slurm] status_format = "xml" was a ProviderError, exit 1 (a failure), though the user typed it;
    now it is one line naming the setting, exit 2, like the other bad Slurm settings, and nothing is recorded."""
    config = tmp_path / "config.toml"
    config.write_text('[providers.slurm]\nstatus_format = "xml"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    spec = tmp_path / "job.yaml"
    spec.write_text("name: fmt\ncommand: echo hi\n")
    result = run_cli("launch", str(spec), "--provider", "slurm", "-y")
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: slurm: status_format must be auto, json or parsable, got 'xml'")
    assert "[providers.slurm] status_format" in result.stderr and "Traceback" not in result.stderr
    assert run_cli("runs", "--json").json() == []
