"""`gpuplan bench --on PROVIDER[:TYPE]`: the same bench, run as a short job through the launch machinery.

Why a job and not a special path: the bench then goes through the one orchestration every run uses (Run row
first, provider call, instance rows, caps, budgets), so its machine time and cost are in the books like any
run's, and a forgotten machine is impossible by the same guarantees.

The job runs `python -m gpuplan bench <the same options> --no-save --output "$GPUPLAN_RUN_DIR/bench.json"` and
then prints that one-line JSON to its log behind RESULT_MARKER. The launching side reads the result from
RUN_DIR/bench.json (local and Slurm: the run folder is this machine's or shared), else from the marker line of
RUN_DIR/node-0/job.log (clouds: the log is what a machine ships to the run's storage and
`Provider.fetch_outputs` copies back), and stores it as a Benchmark row with `run_id` set.

On a cloud machine the job runs in `--image` (default DEFAULT_CLOUD_IMAGE, which has torch); gpuplan is
installed into it with pip from `--install` (your wheel or a git URL) when `import gpuplan` fails there. There
is no default: a package called `gpuplan` on a public index need not be this project, so gpuplan never installs
one by name on the user's behalf; without `--install` an image lacking gpuplan fails with exit 3 and says why.
Nothing here imports torch, SQLAlchemy or a cloud SDK.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.errors import GpuplanError, UserError

if TYPE_CHECKING:
    from gpuplan.providers.base import Provider
    from gpuplan.store.models import Run

RESULT_FILE = "bench.json"
RESULT_MARKER = "gpuplan-bench-result: "
DEFAULT_CLOUD_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
MISSING_GPUPLAN_EXIT = 3
DEFAULT_MAX_HOURS = 0.5
log = logging.getLogger(__name__)
_ON_RE = re.compile(r"^([a-z][a-z0-9_-]*)(?::([A-Za-z0-9][A-Za-z0-9._-]*))?$")


@dataclass(frozen=True)
class RemoteTarget:
    """Where to bench: a registered provider and, for clouds, the instance (machine) type; for Slurm a GPU type."""

    provider: str
    detail: str | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.detail}" if self.detail else self.provider


def parse_on(text: str) -> RemoteTarget:
    """`aws:p5.48xlarge` -> RemoteTarget("aws", "p5.48xlarge"); bad forms and unknown providers are UserErrors."""
    from gpuplan.providers.registry import load_provider_class, provider_names

    match = _ON_RE.match(text.strip())
    if not match:
        raise UserError(f"--on must look like PROVIDER[:INSTANCE_TYPE] (aws:p5.48xlarge, gcp:a2-highgpu-1g, "
                        f"slurm, local), not {text!r}")
    provider, detail = match.group(1), match.group(2)
    known = provider_names()
    if provider not in known:
        raise UserError(f"--on: unknown provider {provider!r}; known: {', '.join(known)}")
    kind = load_provider_class(provider)
    if kind.runs_here and detail:
        raise UserError(f"--on {provider} takes no instance type (it is this machine), not {detail!r}")
    if kind.priced_by_catalog and not detail:
        raise UserError(f"--on {provider} needs an instance type: --on {provider}:TYPE "
                        "(e.g. aws:p5.48xlarge, gcp:a2-highgpu-1g; see `gpuplan prices`)")
    return RemoteTarget(provider, detail)


def bench_argv(options: dict[str, Any]) -> list[str]:
    """The `gpuplan bench` options of this invocation, as the job passes them on (None/False left out)."""
    flags = {"model": "--model", "model_config": "--model-config", "module": "--module", "layers": "--layers",
             "device": "--device", "precision": "--precision", "seq_len": "--seq-len",
             "micro_batch": "--micro-batch", "steps": "--steps", "warmup": "--warmup",
             "peak_tflops": "--peak-tflops"}
    argv: list[str] = []
    for key, flag in flags.items():
        value = options.get(key)
        if value is not None:
            argv += [flag, str(value)]
    if options.get("compile"):
        argv.append("--compile")
    return argv


def job_script(argv: Sequence[str], install: str | None) -> str:
    """The job's shell text: find python, install gpuplan if the image lacks it, bench, echo the result line.

    Every value enters through shlex.quote; `$GPUPLAN_RUN_DIR` is the one variable the job contract sets.
    """
    bench = shlex.join(["-m", "gpuplan", "bench", *argv, "--no-save"])
    lines = [
        "set -e",
        'PY=$(command -v python3 || command -v python)',
    ]
    if install:
        lines.append(f'"$PY" -c "import gpuplan" 2>/dev/null || "$PY" -m pip install --quiet {shlex.quote(install)}')
    else:
        lines.append(f'"$PY" -c "import gpuplan" 2>/dev/null || {{ echo "gpuplan is not installed in this image: '
                     f'pass --install with a pip spec of your gpuplan build" >&2; exit {MISSING_GPUPLAN_EXIT}; }}')
    lines += [
        # stdout (the JSON) is not needed: the result line below carries it; progress stays on stderr (the log)
        f'"$PY" {bench} --json --output "$GPUPLAN_RUN_DIR/{RESULT_FILE}" >/dev/null',
        f'echo "{RESULT_MARKER}$(cat "$GPUPLAN_RUN_DIR/{RESULT_FILE}")"',
    ]
    return "\n".join(lines) + "\n"


def build_spec(target: RemoteTarget, argv: Sequence[str], *, name: str, image: str | None, install: str | None,
               max_hours: float, budget_usd: Decimal | None, gpu: str | None = None,
               gpus_per_node: int | None = None) -> tuple[Any, str]:
    """The bench job as a JobSpec and its YAML text (what the Run row keeps), validated like a spec file."""
    import yaml

    from gpuplan.jobs.spec import parse_spec

    resources: dict[str, Any] = {}
    if gpu:
        resources["gpu"] = gpu
    if gpus_per_node:
        resources["gpus_per_node"] = gpus_per_node
    limits: dict[str, Any] = {"max_hours": max_hours}
    if budget_usd is not None:
        limits["budget_usd"] = str(budget_usd)
    data: dict[str, Any] = {"name": name, "run": job_script(argv, install), "runtime": "auto"}
    if image:
        data["image"] = image
    if resources:
        data["resources"] = resources
    data["limits"] = limits
    data["labels"] = {"gpuplan-kind": "bench"}
    text = yaml.safe_dump(data, sort_keys=False)
    return parse_spec(text, source=f"bench --on {target.label}"), text


@dataclass(frozen=True)
class CloudType:
    """A cloud instance type as the catalog knows it: its GPUs and its cheapest on-demand region."""

    instance_type: str
    region: str
    gpu: str
    gpu_count: int
    price_per_hour: Decimal | None


def cloud_type(cloud: str, instance_type: str, *, db_url: str | None = None) -> CloudType:
    """The catalog's offer of exactly this instance type (cheapest on-demand region); unknown -> UserError."""
    from gpuplan.catalog import load_offers

    offers = [o for o in load_offers(clouds=[cloud], db_url=db_url) if o.instance_type == instance_type]
    if not offers:
        raise UserError(f"{cloud} instance type {instance_type!r} is not in the price catalog "
                        f"(see `gpuplan prices --cloud {cloud}`)")
    priced = [o for o in offers if o.price(False) is not None]
    best = min(priced or offers, key=lambda o: (o.price(False) or Decimal(0), o.region))
    return CloudType(instance_type, best.region, best.gpu, max(int(best.gpu_count), 1) if best.gpu_count >= 1
                     else 1, best.price(False))


def default_budget(price_per_hour: Decimal | None, max_hours: float, min_billed_seconds: int = 0) -> Decimal | None:
    """The most the bench can cost at its price within max_hours, rounded up to the cent (None when free).

    A cloud bills at least `min_billed_seconds` however short the bench: a budget below that minimum would leave
    the machine's fail-safe (gpuplan.launching.failsafe) no time at all, and the launch would be refused.
    """
    if not price_per_hour:
        return None
    hours = max(Decimal(str(max_hours)), Decimal(min_billed_seconds) / Decimal(3600))
    return (price_per_hour * hours).quantize(Decimal("0.01"), rounding=ROUND_UP)


# ---------------------------------------------------------------------------------------------- the result


class NoRemoteResult(GpuplanError):
    """The bench job ended without a result the launching side can read (exit 1: not the user's typo)."""


def read_result_text(run_dir: str | Path) -> str | None:
    """The job's result JSON text: RUN_DIR/bench.json, else the last marker line of a node's job log."""
    run_dir = Path(run_dir)
    path = run_dir / RESULT_FILE
    if path.is_file():
        return path.read_text()
    for log in [*sorted(run_dir.glob("node-*/job.log")), run_dir / "job.log"]:
        if not log.is_file():
            continue
        found = None
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(RESULT_MARKER):
                found = line[len(RESULT_MARKER):]
        if found:
            return found
    return None


def parse_result(text: str, source: str) -> Any:
    """The job's JSON -> BenchResult; anything missing or malformed is a NoRemoteResult naming the source."""
    from gpuplan.bench.result import BenchResult

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NoRemoteResult(f"the bench result in {source} is not JSON: {exc}") from exc
    names = [f.name for f in dataclasses.fields(BenchResult)]
    if not isinstance(data, dict):
        raise NoRemoteResult(f"the bench result in {source} is not a JSON object")
    missing = [n for n in names if n not in data]
    if missing:
        raise NoRemoteResult(f"the bench result in {source} lacks {', '.join(missing[:5])}")
    return BenchResult(**{n: data[n] for n in names})


def read_result(run_dir: str | Path) -> Any:
    """The BenchResult the job left in its run folder, or NoRemoteResult when there is none."""
    text = read_result_text(run_dir)
    if text is None:
        raise NoRemoteResult(f"the bench job left no {RESULT_FILE} (nor a result line in its log) in {run_dir}")
    return parse_result(text, str(run_dir))


def fetch_outputs(provider: Provider, run: Run) -> None:
    """Copy what the run's machines shipped into the run folder (a provider whose machines write the run
    folder themselves, this machine or a shared cluster file system, has nothing to fetch)."""
    from gpuplan.providers.base import Instance, InstanceState

    for row in run.instances:
        instance = Instance(provider=row.provider, instance_id=row.provider_instance_id,
                            state=row.state or InstanceState.TERMINATED, run_id=run.id, cloud=row.cloud,
                            region=row.region, zone=row.zone, instance_type=row.instance_type,
                            node_rank=row.node_rank or 0)
        try:
            provider.fetch_outputs(instance, run.run_dir or "")
        except Exception as exc:  # a failed copy is reported by the missing result, with the storage hint
            log.warning("cannot fetch the outputs of %s (%s): %s", run.id, row.provider_instance_id, exc)


def storage_hint(provider: Provider) -> str:
    """What to configure so a cloud machine's log (and so the result) comes back."""
    if not provider.boots_from_script:  # the machines write the run folder themselves
        return ""
    text = provider.outcome_hint()
    return text or ("the cloud bench needs run storage configured (GPUPLAN_STORAGE_URL or the provider's "
                    "bucket) so the machine can ship its log back")
