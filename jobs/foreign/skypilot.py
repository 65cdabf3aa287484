"""A SkyPilot task YAML as a gpuplan job spec.

The task's keys are SkyPilot's (sky/utils/schemas.py `get_task_schema` and the resources schema:
https://docs.skypilot.co/en/latest/reference/yaml-spec.html). Its `run` keeps working unchanged: it runs under
bash, as SkyPilot runs it, after a prelude that sets the variables SkyPilot gives every node
(https://docs.skypilot.co/en/latest/running-jobs/environment-variables.html): SKYPILOT_NODE_RANK,
SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS (one address a line, the head node first) and SKYPILOT_NUM_GPUS_PER_NODE,
from gpuplan's own GPUPLAN_* contract (gpuplan.jobs.runner). `setup` stays a setup (once per node, before run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TASK_KEYS = frozenset({"name", "workdir", "event_callback", "num_nodes", "resources", "file_mounts", "service",
                       "pool", "setup", "run", "envs", "secrets", "managed_secrets", "inputs", "outputs",
                       "file_mounts_mapping", "config", "volumes", "volume_mounts", "api_server_access",
                       "_metadata"})
RESOURCE_KEYS = frozenset({"cloud", "region", "zone", "infra", "cpus", "memory", "accelerators", "instance_type",
                           "use_spot", "job_recovery", "volumes", "disk_size", "disk_tier", "network_tier", "ports",
                           "labels", "accelerator_args", "image_id", "autostop", "priority", "any_of", "ordered",
                           "_docker_login_config", "_docker_username_for_runpod", "_is_image_managed",
                           "_requires_fuse", "_cluster_config_overrides", "_no_missing_accel_warnings"})
SKY_ONLY_KEYS = TASK_KEYS - {"name", "workdir", "resources", "setup", "run", "secrets"}


def prelude(has_gpus: bool) -> str:
    """Shell lines that set SkyPilot's node variables from gpuplan's (GPUPLAN_NPROC_PER_NODE is the GPU count of
    the machine the run got, whichever candidate GPU that was)."""
    gpus = '"${GPUPLAN_NPROC_PER_NODE:-1}"' if has_gpus else "0"
    return "\n".join([
        "# SkyPilot's node variables, from gpuplan's (added by gpuplan convert)",
        'export SKYPILOT_NODE_RANK="${GPUPLAN_NODE_RANK:-0}" SKYPILOT_NUM_NODES="${GPUPLAN_NNODES:-1}"',
        f"export SKYPILOT_NUM_GPUS_PER_NODE={gpus}",
        'SKYPILOT_NODE_IPS="${GPUPLAN_NODE_IPS:-${GPUPLAN_MASTER_ADDR:-127.0.0.1}}"',
        "export SKYPILOT_NODE_IPS",
    ])


def looks_like(data: Mapping[str, Any], gpuplan_keys: frozenset[str], gpuplan_resource_keys: frozenset[str]) -> bool:
    """A SkyPilot task: only SkyPilot's keys, and at least one that gpuplan does not have (top level or in
    resources)."""
    keys = set(data)
    if not keys or not keys <= TASK_KEYS:
        return False
    resources = data.get("resources")
    res_keys = set(resources) if isinstance(resources, dict) else set()
    return bool(keys - gpuplan_keys) or bool(res_keys - gpuplan_resource_keys)


def _accelerators(value: Any) -> list[str]:
    """`A100:8`, `A100`, `{A100: 8}`, `[A100:8, H100:8]`, `{A100:8, H100:8}` -> ["A100:8", "H100:8"]."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [item for v in value for item in _accelerators(v)]
    if isinstance(value, dict):
        out = []
        for name, count in value.items():
            if count is None:
                out += _accelerators(str(name))
            else:
                number = float(count)
                if number != int(number) or number < 1:
                    raise ValueError(f"accelerators {name}: {count}: gpuplan rents whole GPUs (1 or more)")
                out.append(f"{name}:{int(number)}")
        return out
    raise ValueError(f"accelerators: {value!r} is not a GPU name, a NAME:COUNT or a list of them")


def translate(data: Mapping[str, Any], *, default_name: str) -> Any:
    """The Translation of a SkyPilot task (a mapping read from its YAML)."""
    from gpuplan.jobs.foreign.translation import Translation, dump_spec

    unmapped: list[str] = []
    spec: dict[str, Any] = {"name": str(data.get("name") or default_name)}
    res_in = data.get("resources") or {}
    if not isinstance(res_in, dict):
        raise ValueError("resources must be a mapping")
    for choice_key in ("any_of", "ordered"):
        if choice_key in res_in:
            unmapped.append(f"resources.{choice_key} (give the GPUs as accelerators: [A100:8, H100:8])")
    res: dict[str, Any] = {}
    gpus = _accelerators(res_in.get("accelerators"))
    if len(gpus) == 1:
        res["gpu"] = gpus[0]
    elif gpus:
        res["gpu"] = gpus  # candidates: plan and failover weigh each by the whole job's cost
    if data.get("num_nodes") is not None:
        res["nodes"] = data["num_nodes"]  # as written: the spec refuses 1.5, true, .inf
    if res_in.get("use_spot"):
        res["spot"] = True
    infra = str(res_in["infra"]).split("/") if res_in.get("infra") else []
    cloud = res_in.get("cloud") or (infra[0] if infra and infra[0] != "*" else None)
    region = res_in.get("region") or (infra[1] if len(infra) > 1 and infra[1] != "*" else None)
    zone = res_in.get("zone") or (infra[2] if len(infra) > 2 else None)
    if cloud:
        res["clouds"] = [str(cloud).lower()]
    if region:
        res["regions"] = [str(region)]
    if zone:
        res["zones"] = [str(zone)]
    spec_image = None
    image_id = res_in.get("image_id")
    if isinstance(image_id, str) and image_id.startswith("docker:"):
        spec_image = image_id.removeprefix("docker:")
    elif image_id is not None:
        unmapped.append("resources.image_id (a machine image; gpuplan picks the cloud's GPU image, or give "
                        "image: for a container)")
    for key in sorted(set(res_in) - {"accelerators", "use_spot", "cloud", "region", "zone", "infra", "image_id",
                                     "any_of", "ordered", "labels"}):
        unmapped.append(f"resources.{key}")
    if spec_image:
        spec["image"] = spec_image
    workdir = data.get("workdir")
    if isinstance(workdir, str):
        # SkyPilot syncs the folder and runs there; gpuplan ships the spec's folder and starts in `workdir`.
        spec["workdir"] = workdir
    elif workdir is not None:
        unmapped.append("workdir (a git repository: clone it in setup)")
    envs = data.get("envs") or {}
    env = {str(k): str(v) for k, v in envs.items() if v is not None}
    from_caller = [str(k) for k, v in envs.items() if v is None]
    secrets_in = data.get("secrets") or {}
    secret_names = list(secrets_in) if isinstance(secrets_in, (dict, list)) else []
    inline = [str(k) for k, v in secrets_in.items() if v is not None] if isinstance(secrets_in, dict) else []
    if inline:
        unmapped.append(f"the values of secrets {', '.join(inline)} written in the file (gpuplan reads secrets "
                        "from your environment at launch and never stores them)")
    if env:
        spec["env"] = env
    # An env given as null in SkyPilot must come from the caller (`sky launch --env NAME`): the caller's
    # environment at launch, as gpuplan reads secrets.
    names = [*secret_names, *[n for n in from_caller if n not in secret_names]]
    if names:
        spec["secrets"] = [str(n) for n in names]
    if data.get("setup"):
        # SkyPilot runs setup with bash and without `set -e` (its exit code is its last command's)
        spec["setup"] = ("set +e  # as SkyPilot runs setup\n" + prelude(bool(gpus)) + "\n"
                         + 'export SKYPILOT_SETUP_NODE_RANK="$SKYPILOT_NODE_RANK" '
                           'SKYPILOT_SETUP_NODE_IPS="$SKYPILOT_NODE_IPS"\n' + str(data["setup"]))
    if not data.get("run"):
        raise ValueError("it has no run: (a setup-only task has nothing for gpuplan to run)")
    script = prelude(bool(gpus)) + "\n" + str(data["run"]).rstrip("\n") + "\n"
    spec["command"] = ["bash", "-c", script]  # SkyPilot runs `run` with bash, without `set -e`
    if res:
        spec["resources"] = res
    labels = res_in.get("labels")
    if isinstance(labels, dict) and labels:
        spec["labels"] = {str(k): str(v) for k, v in labels.items()}
    for key in sorted(set(data) & SKY_ONLY_KEYS - {"num_nodes", "envs", "_metadata"}):
        unmapped.append(key)
    header = "# gpuplan job spec translated from a SkyPilot task (gpuplan convert)\n"
    return Translation("skypilot", dump_spec(spec, header), unmapped)
