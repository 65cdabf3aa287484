"""The YAML job spec: what to run, on what, within which limits — validated by pydantic, errors name the line.

A spec of just `name`, `runtime: process` and `command` is a valid CPU job for the local provider; everything
else is optional. Unknown keys are errors (extra="forbid") so a typo like `max_hour:` never silently removes a
cap. Errors point at the YAML line: the file is composed with PyYAML's node API (which keeps marks), and each
pydantic error location is walked down that node tree to the line that holds the bad key or value.

Secrets are *names* here; their values are read from the launching environment by gpuplan.launching.start and handed to
the provider, never stored in the spec text, the database or a log.

Nothing here imports a provider or the store.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import shlex
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpuplan.errors import UserError
from gpuplan.jobs.spec_bounds import deadline_in_range
from gpuplan.jobs.spec_fields import describe_fields
from gpuplan.jobs.spec_names import MAX_LABELS, MAX_ZONES, ZONE_RE, check_env_name, check_label
from gpuplan.limits import check
from gpuplan.units import MONEY_LIMIT, parse_duration_hours, parse_size

RUNTIMES = ("auto", "process", "podman", "docker")


class SpecError(UserError):
    """The job spec is not valid; the message names the file and line of each problem."""


# ---------------------------------------------------------------------------------------------- field types


def _size(limit: str) -> Any:
    """A `7B`-style size inside gpuplan.limits' range `limit` (params, tokens, samples)."""

    def parse(value: Any) -> int:
        if value is None:
            raise ValueError("a size is required here (like 7B, 1.3e9 or 125M)")
        return parse_size(value, limit=limit)

    return BeforeValidator(parse)


def _within(limit: str, *, low: float | None = None) -> Any:
    """The field's value must lie inside gpuplan.limits' range `limit`: the same table the CLI flags use, so
    `resources.nodes: 10**23` is refused as plainly as `--nodes 10**23` (`low`: a field's own floor)."""

    def validate(value: Any) -> Any:
        if value is not None:
            check(limit, float(value) if isinstance(value, Decimal) else value, "", low=low)
        return value

    return AfterValidator(validate)


def _hours(value: Any) -> float:
    return parse_duration_hours(value)


def _money(value: Any) -> Decimal:
    """Dollars as an exact Decimal; accepts 12, 12.5, "12.50" and "$12.50"."""
    if isinstance(value, bool):
        raise ValueError(f"expected an amount in dollars, not {value!r}")
    text = str(value).strip().lstrip("$").replace(",", "")
    try:
        amount = Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"expected an amount in dollars like 25 or 0.5, not {value!r}") from exc
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"an amount must be greater than zero, not {value!r}")
    if amount >= MONEY_LIMIT:
        raise ValueError(f"an amount must be less than ${MONEY_LIMIT:,}, not {value!r}")
    return amount


def _str_list(value: Any) -> Any:
    """`clouds: aws,gcp` and `clouds: [aws, gcp]` mean the same."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _env_value(value: Any) -> Any:
    """YAML turns `PORT: 8080` and `DEBUG: true` into int/bool; the environment only has strings."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _command(value: Any) -> Any:
    """YAML reads `command: true` or `command: 42` as a bool or a number: say how to write it instead."""
    if value is not None and not isinstance(value, (str, list)):
        raise ValueError(f"must be a string or a list of strings; YAML read {value!r}: quote it")
    if isinstance(value, list) and not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                           for v in value):
        raise ValueError("a command list holds strings (quote true/false/null items)")
    return [str(v) for v in value] if isinstance(value, list) else value


Hours = Annotated[float, BeforeValidator(_hours)]  # at most 100 years (gpuplan.units.parse_duration_hours)
Money = Annotated[Decimal, BeforeValidator(_money)]
PricePerHour = Annotated[Decimal, BeforeValidator(_money), _within("usd_per_hour")]
StrList = Annotated[list[str], BeforeValidator(_str_list)]
EnvValue = Annotated[str, BeforeValidator(_env_value)]
EnvName = Annotated[str, AfterValidator(lambda key: check_env_name(key, "env"))]
SecretName = Annotated[str, AfterValidator(lambda key: check_env_name(key, "secret"))]


class _Model(BaseModel):
    # allow_inf_nan=False: YAML reads `.inf` and `.nan` as floats; a throughput of infinity is no measurement.
    # json_schema_extra: each field's description (jobs/spec_fields.py) in the JSON schema the docs and editors read.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False, allow_inf_nan=False,
                              json_schema_extra=describe_fields)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`tp: true` was taken as 1 (pydantic's lax mode turns a bool into a number): a true/false is refused
        wherever the field is not itself a yes/no."""
        if isinstance(value, bool) and info.field_name is not None:
            annotation = str(cls.model_fields[info.field_name].annotation)
            numeric = any(kind in annotation for kind in ("int", "float", "Decimal"))
            if numeric and "bool" not in annotation and "list" not in annotation:
                raise ValueError(f"expected a number, not {str(value).lower()} (a yes/no)")
        return value


# ---------------------------------------------------------------------------------------------- sections


class Resources(_Model):
    """What machines the job needs. No `gpu` means a CPU job (fine for the local provider)."""

    gpu: str | None = None
    gpus_per_node: Annotated[int, _within("gpus_per_node", low=0)] | None = None  # 0: a CPU job
    # `gpu: [A100:8, H100:8]`: every GPU the job may run on, as NAME:COUNT (filled from a list in `gpu`, whose
    # first entry also sets gpu and gpus_per_node). Plan and failover weigh each by the whole job's cost.
    gpu_candidates: list[str] = Field(default_factory=list)
    nodes: Annotated[int, _within("launch_nodes")] = 1
    spot: bool = False
    clouds: StrList = Field(default_factory=list)
    regions: StrList = Field(default_factory=list)
    # Zone names (us-east-1a) or ids (use1-az4): the launch tries only these. The only way to use an AWS Local or
    # Wavelength Zone (use1-atl2-az1), which needs its own opt-in and subnet.
    zones: StrList = Field(default_factory=list)
    max_price_per_hour: PricePerHour | None = None
    # Failover never leaves the GPU count asked for (a 1-GPU job quoted at ~$1/h is never sent to a $16/h 8-GPU
    # machine); `larger_machines: true` lets it go on to machines with more of the same GPU, each listed with its
    # price before the launch (gpuplan.launching.placements.larger_fallbacks).
    larger_machines: bool = False

    @field_validator("zones")
    @classmethod
    def _zones(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_ZONES:
            raise ValueError(f"at most {MAX_ZONES} zones")
        for zone in value:
            if not ZONE_RE.match(zone):
                raise ValueError(f"zone {zone!r} is not a zone name or id (like us-east-1a, use1-az4 or "
                                 "us-central1-a: lower-case letters, digits and '-')")
        return value

    @model_validator(mode="before")
    @classmethod
    def _gpu_shorthand(cls, data: Any) -> Any:
        """`gpu: H100:8` is `gpu: H100` with `gpus_per_node: 8` (the form SkyPilot users type); `gpu: [A100:8,
        H100:8]` lists candidates (gpuplan.jobs.gpu_candidates)."""
        if isinstance(data, dict) and isinstance(data.get("gpu"), list):
            from gpuplan.jobs.gpu_candidates import split_candidates

            data = split_candidates(data)
        if isinstance(data, dict) and isinstance(data.get("gpu"), str) and ":" in data["gpu"]:
            name, _, count = data["gpu"].rpartition(":")
            # Only a count of 1 or more splits; anything else stays in `gpu` for _gpu_name to refuse on its line.
            if count.strip().isdigit() and int(count) >= 1 and name.strip():
                if data.get("gpus_per_node") not in (None, int(count)):
                    raise ValueError(f"gpu {data['gpu']!r} says {count} per node but gpus_per_node says "
                                     f"{data['gpus_per_node']}")
                data = {**data, "gpu": name.strip(), "gpus_per_node": int(count)}
        return data

    @field_validator("gpu")
    @classmethod
    def _gpu_name(cls, value: str | None) -> str | None:
        if value is not None and ":" in value:
            raise ValueError(f"gpu {value!r}: the count after ':' must be a whole number of GPUs per node, 1 or "
                             "more (like H100:8)")
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus_with_a_gpu(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value == 0 and info.data.get("gpu"):
            raise ValueError(f"gpu {info.data['gpu']} needs at least 1 GPU per node (leave out gpu for a CPU job)")
        return value

    @property
    def total_gpus(self) -> int:
        return (self.gpus_per_node or (1 if self.gpu else 0)) * self.nodes


class WorkloadSpec(_Model):
    """What the job computes, for the estimate: a model (size, preset or config) and how many tokens."""

    params: Annotated[int, _size("params")] | None = None
    model: str | None = None
    model_config_path: str | None = Field(default=None, alias="model_config")
    tokens: Annotated[int, _size("tokens")] | None = None
    samples: Annotated[int, _size("samples")] | None = None
    epochs: Annotated[float, _within("epochs")] | None = None
    seq_len: Annotated[int, _within("seq_len")] | None = None
    micro_batch: Annotated[int, _within("micro_batch")] | None = None
    global_batch: Annotated[int, _within("global_batch")] | None = None
    precision: Literal["fp32", "tf32", "bf16", "fp16", "fp8"] = "bf16"
    optimizer: Literal["adamw", "adam", "sgd", "adafactor", "adam8bit"] = "adamw"
    sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] = "none"
    activation_checkpointing: bool = False
    lora: Annotated[int, _within("lora")] | None = None
    attention: Literal["flash", "flash1", "eager"] = Field(
        default="flash", description="flash: fused attention (no s x s scores kept); flash1: the same at "
                                     "FlashAttention-1's speed; eager: scores materialised")
    # How the training code lays the job out, when it says (the config-aware estimate then times a step; gpuplan
    # does not configure the framework): the same choices as estimate's --tp/--pp/--pp-schedule/--recompute/
    # --tp-overlap/--dp-overlap/--kernels/--interconnect.
    tp: Annotated[int, _within("model_parallel")] | None = None  # None: the estimate's default (layout.py)
    pp: Annotated[int, _within("model_parallel")] | None = None
    pp_schedule: Literal["1f1b", "interleaved"] | None = None
    recompute: Literal["none", "selective", "op", "full"] | None = None
    tp_overlap: bool = False
    dp_overlap: bool = False
    kernels: Literal["fused", "eager"] | None = None  # None: the estimate's default (fused)
    interconnect: str | None = Field(default=None, description="inter-node network: a fabric name or Gbit/s")
    throughput: Annotated[float, _within("throughput")] | None = Field(default=None,
                                                                        description="measured tokens/s per GPU")
    mfu: Annotated[float, _within("mfu")] | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=(),
                              json_schema_extra=describe_fields,
                              allow_inf_nan=False)

    @field_validator("model")
    @classmethod
    def _known_preset(cls, value: str | None) -> str | None:
        if value is not None:
            from gpuplan.estimating.architecture import preset

            preset(value)  # ValueError lists close matches
        return value

    @field_validator("interconnect")
    @classmethod
    def _known_network(cls, value: str | None) -> str | None:
        if value is not None:
            from gpuplan.estimating.parallel import parse_interconnect

            parse_interconnect(str(value))  # ValueError names the fabrics
        return value

    @model_validator(mode="after")
    def _one_model(self) -> WorkloadSpec:
        given = [k for k, v in (("params", self.params), ("model", self.model),
                                ("model_config", self.model_config_path)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"give one of params, model or model_config, not {' and '.join(given)}")
        if self.samples is not None and self.seq_len is None:
            raise ValueError("samples needs seq_len to turn into tokens")
        from gpuplan.estimating.layout import SPEC_NAMES, layout_problems

        problems = layout_problems(SPEC_NAMES, tp=self.tp or 1, sharding=self.sharding, recompute=self.recompute,
                                   activation_checkpointing=self.activation_checkpointing,
                                   tp_overlap=self.tp_overlap, dp_overlap=self.dp_overlap)
        if problems:
            raise ValueError("; ".join(problems))

        if self.tokens is None and self.total_tokens is not None:  # each factor is in range, the product need not be
            check("tokens", self.total_tokens, "samples x seq_len x epochs")
        return self

    @property
    def total_tokens(self) -> int | None:
        """Tokens to train on: `tokens`, or samples x seq_len x epochs."""
        if self.tokens is not None:
            return self.tokens
        if self.samples is not None and self.seq_len is not None:
            return round(self.samples * self.seq_len * (self.epochs or 1))
        return None


class Limits(_Model):
    """Hard caps: the job is stopped (state `capped`) when one is reached."""

    budget_usd: Money | None = None
    max_hours: Hours | None = None
    deadline: dt.datetime | Hours | None = None

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, value: Any) -> Any:
        """An ISO time (`2025-07-01T12:00Z`) or a duration from launch (`48h`)."""
        if value is None:
            return value
        if isinstance(value, dt.datetime):
            return deadline_in_range(value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))
        if isinstance(value, dt.date):
            return deadline_in_range(dt.datetime.combine(value, dt.time(), tzinfo=dt.timezone.utc))
        if isinstance(value, str) and re.match(r"^\d{4}-\d\d-\d\d", value.strip()):
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return deadline_in_range(parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc))
        return parse_duration_hours(value, what="deadline")

    def deadline_at(self, launched_at: dt.datetime) -> dt.datetime | None:
        """The absolute deadline of a run launched at `launched_at`."""
        if self.deadline is None:
            return None
        if isinstance(self.deadline, dt.datetime):
            return self.deadline
        return launched_at + dt.timedelta(hours=float(self.deadline))


class Checkpoint(_Model):
    """Where the job writes checkpoints and how often (`interval` in hours; `30m` accepted)."""

    dir: str
    interval: Hours | None = None


class ScheduleSpec(_Model):
    """When the scheduler should fire this job (used by `gpuplan schedule`)."""

    cron: str
    tz: str = "UTC"
    window: str | None = Field(default=None, description="only start inside HH:MM-HH:MM (local to tz)")
    max_price_per_hour: PricePerHour | None = None
    spot_only: bool = False

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        from croniter import croniter

        from gpuplan.cronspec import validate_cron

        if not croniter.is_valid(value):
            raise ValueError(f"not a cron expression: {value!r} (five fields, like '0 2 * * *')")
        validate_cron(value)  # one that never fires (`0 0 30 2 *`) is refused as `schedule add --cron` refuses it
        return value

    @field_validator("tz")
    @classmethod
    def _tz(cls, value: str) -> str:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like Europe/Berlin)") from exc
        return value

    @field_validator("window")
    @classmethod
    def _window(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$", value.strip()):
            raise ValueError(f"window must look like 22:00-06:00, not {value!r}")
        return value.strip() if value else value


class JobSpec(_Model):
    """A job: only `name` and `command` (or `run`) are required."""

    name: str = Field(min_length=1, max_length=200)
    image: str | None = None
    # The image's CPU architecture when its registry cannot be asked (gpuplan.launching.image_arch); default amd64.
    arch: Literal["amd64", "arm64"] | None = None
    command: Annotated[str | list[str] | None, BeforeValidator(_command)] = None
    run: str | None = None
    # Runs once on every node before `command`/`run`, in the same place (container or host), as its own script
    # (`sh -e`): its own section in the job log and its own failure reason ("setup failed (exit N)").
    setup: str | None = None
    runtime: Literal["auto", "process", "podman", "docker"] = "auto"
    workdir: str | None = None
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    secrets: list[SecretName] = Field(default_factory=list)
    resources: Resources = Field(default_factory=Resources)
    workload: WorkloadSpec | None = None
    limits: Limits = Field(default_factory=Limits)
    checkpoint: Checkpoint | None = None
    # Durable run storage (gpuplan.jobs.storage): s3://bucket/prefix, gs://bucket/prefix or a shared folder path.
    storage: str | None = None
    schedule: ScheduleSpec | None = None
    project: str | None = Field(default=None, max_length=200)
    labels: dict[str, EnvValue] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            check_label(key, text)
        if len(value) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels (AWS allows 50 tags per resource and gpuplan sets up to "
                             f"{50 - MAX_LABELS} of its own), not {len(value)}")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        if not value.isprintable():  # shown in every listing and progress bar: no terminal control characters
            raise ValueError(f"name {value!r} must be printable (no control characters)")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        # The image follows the runtime's options on its command line (`podman run ... IMAGE ARGV`): a value
        # starting with `-` would be read as one more option (`--privileged`), a space would split it.
        if value is not None and (not value or value.startswith("-") or any(c.isspace() for c in value)
                                  or not value.isprintable()):
            raise ValueError(f"image {value!r} is not an image reference (no leading '-', no spaces)")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str | None) -> str | None:
        # Handed to `mkdir`/`cd` in boot scripts and to `-w`/`--pwd` of container runtimes: never an option.
        if value is not None and (not value.strip() or value.startswith("-") or "\0" in value):
            raise ValueError(f"workdir {value!r} must be a folder path (not starting with '-')")
        return value

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str | None) -> str | None:
        from gpuplan.jobs.storage import check_storage

        return check_storage(value)

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a secret is listed twice")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        if (self.command is None) == (self.run is None):
            raise ValueError("give exactly one of command (one command) or run (a multi-line script)")
        if isinstance(self.command, list) and not self.command:
            raise ValueError("command must not be empty")
        if isinstance(self.command, str) and not self.command.strip():
            raise ValueError("command must not be empty")
        if self.run is not None and not self.run.strip():
            raise ValueError("run must not be empty")
        if self.setup is not None and not self.setup.strip():
            raise ValueError("setup must not be empty (leave it out)")
        if self.runtime in ("podman", "docker") and not self.image:
            raise ValueError(f"runtime {self.runtime} needs an image")
        clash = sorted(set(self.env) & set(self.secrets))
        if clash:
            raise ValueError(f"{', '.join(clash)} is both in env and in secrets")
        return self

    # ------------------------------------------------------------------------------------------ derived

    @property
    def shell_script(self) -> str:
        """The job as `sh -c` text: a list command is joined with shlex; `run` gets `set -e` first; a `setup`
        comes before it (gpuplan.jobs.setup_step)."""
        if self.run is not None:
            main = "set -e\n" + self.run
        elif isinstance(self.command, list):
            main = shlex.join(self.command)
        else:
            assert self.command is not None
            main = self.command
        if self.setup is None:
            return main
        from gpuplan.jobs.setup_step import with_setup

        return with_setup(self.setup, main)

    @property
    def argv(self) -> list[str]:
        """The job as an argument vector: always through /bin/sh so `run` scripts and pipes work alike."""
        return ["/bin/sh", "-c", self.shell_script]

    def wants_container(self) -> bool:
        """True when the job should run in a container (podman/docker, or auto with an image)."""
        return self.runtime in ("podman", "docker") or (self.runtime == "auto" and bool(self.image))


# ---------------------------------------------------------------------------------------------- loading


def spec_hash(text: str) -> str:
    """sha256 of the spec text as launched (what Run.spec_hash and Schedule.spec_hash hold)."""
    return hashlib.sha256(text.encode()).hexdigest()


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a job spec file; every problem is a SpecError naming `file:line`."""
    return parse_spec(read_spec_text(path), source=str(path))


def read_spec_text(path: str | Path) -> str:
    """A job spec file's text, read once: the caller validates and records this very text (a second read could
    see another file). Every problem is a SpecError naming the file."""
    from gpuplan.jobs.spec_bounds import SpecBoundsError, read_bounded
    from gpuplan.readfile import FileRefused

    path = Path(path)
    try:
        return read_bounded(path)
    except FileNotFoundError as exc:
        raise SpecError(f"job spec {path} does not exist") from exc
    except FileRefused as exc:  # not a regular file, too big, not UTF-8 (gpuplan.readfile)
        raise SpecError(str(exc)) from None
    except SpecBoundsError as exc:
        raise SpecError(f"{path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read job spec {path}: {exc}") from exc


def parse_spec(text: str, source: str = "<spec>") -> JobSpec:
    """Validate YAML text as a JobSpec. Errors: `source:LINE: field.path: problem`, all on one line."""
    import yaml

    from gpuplan.jobs.spec_bounds import SpecBoundsError, find_nul, load_bounded
    from gpuplan.jobs.spec_errors import describe, find_duplicate_key

    try:
        node, data = load_bounded(text)  # size, depth, aliases, recursion: checked before anything walks it
    except SpecBoundsError as exc:
        raise SpecError(f"{source}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{source}{line}: not valid YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from exc  # one line
    if node is None or data is None:
        raise SpecError(f"{source}: the job spec is empty (needs at least name and command)")
    if not isinstance(data, dict):
        raise SpecError(f"{source}:{node.start_mark.line + 1}: a job spec is a mapping of keys (name:, command:, ...)")
    nul = find_nul(data)
    if nul is not None:
        raise SpecError(f"{source}: {nul!r}: contains a NUL character (\\0), which no command, name or "
                        "environment variable can carry")
    duplicate = find_duplicate_key(node)
    if duplicate is not None:
        key, key_line = duplicate
        raise SpecError(f"{source}:{key_line}: {key}: key given twice")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError("; ".join(describe(err, node, source, JobSpec) for err in exc.errors())) from None
