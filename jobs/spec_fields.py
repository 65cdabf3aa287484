"""What each field of the job spec means, in a line: the descriptions in the spec's JSON schema.

jobs/spec.py holds the fields' types and checks; this table holds what they are for, and
`describe_fields` (the models' `json_schema_extra`) puts each into the schema, where the generated job-spec
reference (docs/reference/job-spec.md, scripts/docsite) and editors that validate YAML read it. Keys are the
names a spec file uses (aliases). A field with `Field(description=...)` in spec.py keeps its own.
"""

from __future__ import annotations

from typing import Any

FIELD_DOCS: dict[str, dict[str, str]] = {
    "Resources": {
        "gpu": (
            'GPU type, any name the GPU table knows (`H100`, `A100-80GB`, `L4`); `NAME:COUNT` also sets '
            'gpus_per_node. None: a CPU job.'),
        "gpus_per_node": 'GPUs on each machine (0: a CPU job); default 1 when `gpu` is set.',
        "nodes": "Exactly this many machines: plan and launch never change it (torchrun's world size relies on it).",
        "spot": 'Spot/preemptible machines: cheaper, may be interrupted (relaunched from `checkpoint.dir`).',
        "clouds": (
            'Clouds to plan and launch on (`[aws, gcp]`); one cloud picks the provider. Default: `[defaults] '
            'clouds`, else this machine.'),
        "regions": 'Region globs the plan may use (`[us-*, europe-west4]`).',
        "max_price_per_hour": 'Highest price per machine-hour (USD) an offer may cost.',
        "gpu_candidates": (
            'Every GPU the job may run on as NAME:COUNT, filled from a list in `gpu` (`gpu: [A100:8, H100:8]`): plan '
            'and failover weigh each by the whole job\'s cost.'),
        "larger_machines": (
            'Let failover go on to machines with more of the same GPU than asked (each priced and listed before '
            'the launch); default false: the GPU count is exact.'),
        "zones": 'Zone names or ids the launch tries, and only those; the way to use an AWS Local or Wavelength Zone.',
    },
    "WorkloadSpec": {
        "params": 'Model size in parameters (`7B`, `1.3e9`); or give `model` or `model_config`.',
        "model": 'A model preset (`gpuplan models` lists them): llama-2-7b, mistral-7b, gpt2, ...',
        "tokens": 'Tokens to train on (`200B`, `2T`); or samples x seq_len x epochs.',
        "samples": 'Training samples (with seq_len and epochs, instead of tokens).',
        "epochs": 'Passes over the samples.',
        "seq_len": 'Sequence length in tokens.',
        "micro_batch": 'Sequences per GPU per forward/backward pass.',
        "global_batch": 'Sequences per optimizer step, over all GPUs (default: typical for the size).',
        "precision": 'Training precision (bf16 runs as fp16 on GPUs without bf16).',
        "optimizer": 'Optimizer, for its memory per parameter.',
        "sharding": 'ZeRO stage / FSDP: what is sharded across the data-parallel GPUs.',
        "activation_checkpointing": 'Recompute activations in the backward pass (less memory, more FLOPs).',
        "lora": 'LoRA rank: fine-tune adapters only (the base weights frozen).',
        "tp": 'Tensor-parallel degree your training code uses (times a step with the config-aware model).',
        "pp": 'Pipeline-parallel stages your training code uses.',
        "pp_schedule": 'Pipeline schedule.',
        "recompute": "Recomputation policy: selective (attention core), op (torchtitan's), full.",
        "kernels": ("How norms, rotary and activations run: fused (default; Megatron/NeMo/TE, torch.compile) or eager "
                    "(plain PyTorch without torch.compile)."),
        "tp_overlap": "Tensor-parallel communication overlapped with the GEMMs (Megatron's --tp-comm-overlap).",
        "dp_overlap": "The sharded optimizer's all-gather overlapped with the next forward (--overlap-param-gather).",
        "mfu": 'Model FLOPs utilisation to assume (0-1) instead of the prior.',
        "model_config": 'A Hugging Face config.json, model folder or cached Hub id (nothing is downloaded).',
    },
    "Limits": {
        "budget_usd": 'Most the run may spend (USD); the run is capped there, and its machines stop themselves.',
        "max_hours": 'Longest the run may take (`48h`, `90m`, `3d`; a bare number is hours).',
        "deadline": 'When the run must end: an ISO time (`2025-07-01T12:00Z`) or a duration from launch (`48h`).',
    },
    "Checkpoint": {
        "dir": (
            'Where the job writes checkpoints (`$GPUPLAN_CHECKPOINT_DIR` points there); a spot relaunch resumes '
            'from it.'),
        "interval": 'How often the job checkpoints (hours; `30m` accepted): the work a spot interruption loses.',
    },
    "ScheduleSpec": {
        "cron": 'When to fire: five cron fields (`0 2 * * *`) or @daily, @weekly, ...',
        "tz": 'Time zone of the cron expression (an IANA name like Europe/Berlin).',
        "max_price_per_hour": 'Skip a fire when the best offer costs more per machine-hour (USD).',
        "spot_only": 'Skip a fire when no spot offer fits.',
    },
    "JobSpec": {
        "name": "The job's name, shown in every listing and progress bar.",
        "setup": (
            'A script run once on every node before the command, in the same place (`sh -e`): its own section in the '
            'job log and its own failure reason ("setup failed (exit N)").'),
        "arch": (
            "The image's CPU architecture (amd64 or arm64) when its registry cannot be asked; otherwise read from "
            "the registry, and amd64 is assumed."),
        "image": 'A container image: the job runs in it (podman/docker locally), never on the host.',
        "command": 'The command to run: a string (run by a shell) or a list of arguments.',
        "run": 'A multi-line shell script to run instead of `command`.',
        "runtime": 'How the job runs: auto (a container when there is an image), process (directly), podman or docker.',
        "workdir": 'The folder the command starts in (inside the code folder or image when relative).',
        "env": 'Environment variables for the job (values are on the command line: not for secrets).',
        "secrets": 'Names of environment variables to pass to the job from the launching environment; never stored.',
        "resources": 'What machines the job needs.',
        "workload": 'What the job computes, for the estimate.',
        "limits": 'Hard caps: the run is stopped (`capped`) when one is reached.',
        "checkpoint": 'Where the job checkpoints and how often.',
        "storage": 'Durable run storage: s3://bucket/prefix, gs://bucket/prefix or a shared folder path.',
        "schedule": 'When `gpuplan schedule` fires the job.',
        "project": 'The project the run is booked to (reports, budgets); default `[defaults] project`.',
        "labels": 'Tags/labels put on every cloud resource of the run (and on the run).',
    },
}


def describe_fields(schema: dict[str, Any], model: type) -> None:
    """pydantic `json_schema_extra`: give each property of `model`'s schema its line from FIELD_DOCS."""
    docs = FIELD_DOCS.get(model.__name__, {})
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]
