"""A dstack `type: task` configuration as a gpuplan job spec, where it maps.

The keys are dstack's TaskConfiguration (src/dstack/_internal/core/models/configurations.py and profiles.py;
https://dstack.ai/docs/concepts/tasks/). `commands` run in order in one shell, as dstack runs them, after a
prelude that sets the node variables dstack gives every node: DSTACK_NODE_RANK, DSTACK_NODES_NUM,
DSTACK_MASTER_NODE_IP, DSTACK_NODES_IPS, DSTACK_GPUS_PER_NODE, DSTACK_GPUS_NUM, DSTACK_RUN_NAME.
Only `type: task` maps: a dev-environment or a service has no gpuplan equivalent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MAPPED = frozenset({"type", "name", "image", "commands", "env", "nodes", "resources", "working_dir", "backends",
                    "regions", "availability_zones", "spot_policy", "max_price", "max_duration", "schedule",
                    "tags", "shell"})
_GPU_RE = re.compile(r"^(?P<names>[A-Za-z][\w\-,]*)(?::(?P<mem>\d+GB(?:\.\.\d*GB)?))?(?::(?P<count>\d+))?$")


def looks_like(data: Mapping[str, Any]) -> bool:
    """dstack configurations carry a `type` (task, dev-environment, service, fleet, ...); gpuplan specs do not."""
    return isinstance(data.get("type"), str) and ("commands" in data or data["type"] != "task" or "nodes" in data
                                                 or "python" in data or "resources" in data)


def prelude() -> str:
    return "\n".join([
        "# dstack's node variables, from gpuplan's (added by gpuplan convert)",
        'export DSTACK_NODE_RANK="${GPUPLAN_NODE_RANK:-0}" DSTACK_NODES_NUM="${GPUPLAN_NNODES:-1}"',
        'export DSTACK_MASTER_NODE_IP="${GPUPLAN_MASTER_ADDR:-127.0.0.1}" DSTACK_RUN_NAME="${GPUPLAN_JOB_NAME:-}"',
        'export DSTACK_GPUS_PER_NODE="${GPUPLAN_NPROC_PER_NODE:-0}"',
        "export DSTACK_GPUS_NUM=$((DSTACK_GPUS_PER_NODE * DSTACK_NODES_NUM))",
        'DSTACK_NODES_IPS="${GPUPLAN_NODE_IPS:-$DSTACK_MASTER_NODE_IP}"',
        "export DSTACK_NODES_IPS",
    ])


def _gpu(value: Any, unmapped: list[str]) -> str | list[str] | None:
    """`A100:8`, `H100:80GB:8`, `A100,H100:8`, `{name: [A100, H100], count: 8}` -> gpuplan's gpu (one or
    candidates). A count range (`1..8`) or memory-only request names no GPU: left out, with a note."""
    if value is None:
        return None
    if isinstance(value, int):
        unmapped.append(f"resources.gpu: {value} (no GPU name: gpuplan needs one, like A100:{value})")
        return None
    if isinstance(value, dict):
        names = value.get("name")
        names = [names] if isinstance(names, str) else list(names or [])
        count = value.get("count", 1)
        if not names or not isinstance(count, int):
            unmapped.append(f"resources.gpu: {value} (gpuplan needs GPU names and one count)")
            return None
        found = [f"{n}:{count}" for n in names]
        return found[0] if len(found) == 1 else found
    match = _GPU_RE.match(str(value).strip())
    if match is None or not re.search(r"[A-Za-z]", match.group("names")):
        unmapped.append(f"resources.gpu: {value} (a range or a memory size: gpuplan needs a GPU name and count)")
        return None
    if match.group("mem"):
        unmapped.append(f"resources.gpu memory {match.group('mem')} (the GPU name fixes it)")
    count = int(match.group("count") or 1)
    found = [f"{n}:{count}" for n in match.group("names").split(",") if n]
    return found[0] if len(found) == 1 else found


def translate(data: Mapping[str, Any], *, default_name: str) -> Any:
    """The Translation of a dstack task configuration (a mapping read from its YAML)."""
    from gpuplan.jobs.foreign.translation import Translation, dump_spec

    kind = data.get("type")
    if kind != "task":
        raise ValueError(f"type: {kind} has no gpuplan equivalent (gpuplan runs batch jobs: type: task)")
    if not data.get("commands"):
        raise ValueError("it has no commands: (nothing to run)")
    unmapped: list[str] = []
    spec: dict[str, Any] = {"name": str(data.get("name") or default_name)}
    if data.get("image"):
        spec["image"] = str(data["image"])
    if data.get("working_dir"):
        spec["workdir"] = str(data["working_dir"])
    env_in = data.get("env") or {}
    pairs = ([str(item).partition("=") for item in env_in] if isinstance(env_in, list)
             else [(str(k), "=", v) for k, v in env_in.items()])
    env = {k: str(v) for k, sep, v in pairs if sep and v is not None}
    from_caller = [k for k, sep, v in pairs if not sep or v is None]  # `- HF_TOKEN`: from the caller's env
    if env:
        spec["env"] = env
    if from_caller:
        spec["secrets"] = from_caller
    res_in = data.get("resources") or {}
    res: dict[str, Any] = {}
    gpu = _gpu(res_in.get("gpu"), unmapped) if isinstance(res_in, dict) else None
    if gpu:
        res["gpu"] = gpu
    for key in sorted(set(res_in) - {"gpu"}) if isinstance(res_in, dict) else []:
        unmapped.append(f"resources.{key}")
    if data.get("nodes"):
        res["nodes"] = data["nodes"]  # as written: the spec refuses 1.5, true, .inf
    policy = data.get("spot_policy")
    if policy == "spot":
        res["spot"] = True
    elif policy == "auto":
        unmapped.append("spot_policy: auto (gpuplan runs spot only when asked: on-demand here)")
    for key, target in (("backends", "clouds"), ("regions", "regions"), ("availability_zones", "zones")):
        if data.get(key):
            value = data[key]
            res[target] = [str(v).lower() if key == "backends" else str(v)
                           for v in (value if isinstance(value, list) else [value])]
    if data.get("max_price"):
        res["max_price_per_hour"] = str(data["max_price"])
    if res:
        spec["resources"] = res
    if data.get("max_duration") not in (None, "off", False):
        spec["limits"] = {"max_hours": str(data["max_duration"])}
    tags = data.get("tags")
    if isinstance(tags, dict) and tags:
        spec["labels"] = {str(k): str(v) for k, v in tags.items()}
    if data.get("schedule"):
        unmapped.append("schedule (use `gpuplan schedule add` with its cron)")
    shell = str(data.get("shell") or ("sh" if data.get("image") else "bash"))
    commands = "\n".join(str(c).rstrip("\n") for c in data["commands"])
    spec["command"] = [shell, "-c", prelude() + "\nset -e\n" + commands + "\n"]
    for key in sorted(set(data) - MAPPED):
        unmapped.append(key)
    header = "# gpuplan job spec translated from a dstack task (gpuplan convert)\n"
    return Translation("dstack", dump_spec(spec, header), unmapped)
