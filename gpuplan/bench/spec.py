"""What to bench and how, resolved and validated from the command line before torch is imported.

Validating here (pure Python) means a typo in `--model` or `--layers 0` fails in milliseconds with exit 2,
instead of after torch's 1.7 s import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpuplan.errors import UserError
from gpuplan.estimating.architecture import Architecture, load_hf_config, preset

PRECISIONS = ("bf16", "fp16", "fp32")
DEFAULT_MODEL = "gpt-tiny"
DEFAULT_SEQ_LEN_CAP = 1024  # a preset's full context (8k-32k for Llama/Mistral) is rarely what a proxy needs
DEFAULT_MODULE_SEQ_LEN = 512
_MODULE_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+|mps)$")


@dataclass(frozen=True)
class BenchTarget:
    """The model to bench: a preset or config (with its full architecture), or a user's module factory.

    `arch` is the full model; `layers` (if set) is the shallower depth actually run as a quick proxy. Records
    keep the full model's signature so a proxy's MFU can serve an estimate for the full model, labelled so.
    """

    kind: str  # "preset" | "config" | "module"
    name: str
    arch: Architecture | None = None
    layers: int | None = None
    module: str | None = None

    @property
    def run_arch(self) -> Architecture | None:
        """The architecture actually built: the full one, or its first `layers` layers."""
        if self.arch is None:
            return None
        if self.layers is None or self.layers == self.arch.num_layers:
            return self.arch
        return self.arch.with_layers(self.layers)

    @property
    def signature(self) -> str:
        if self.arch is not None:
            return self.arch.signature()
        return f"module:{self.module}"


@dataclass(frozen=True)
class BenchSettings:
    """How to run: device, precision (None = pick for the device), shape, step counts."""

    device: str = "auto"
    precision: str | None = None
    seq_len: int | None = None
    micro_batch: int = 8
    steps: int = 20
    warmup: int = 5
    compile: bool = False
    peak_tflops: float | None = None


def resolve_target(model: str | None, model_config: str | None, module: str | None,
                   layers: int | None) -> BenchTarget:
    """Exactly one of --model / --model-config / --module (none: the gpt-tiny preset)."""
    given = [flag for flag, value in (("--model", model), ("--model-config", model_config), ("--module", module))
             if value]
    if len(given) > 1:
        raise UserError(f"give only one of {' / '.join(given)}")
    if layers is not None and layers <= 0:
        raise UserError(f"--layers must be at least 1, not {layers}")
    if module:
        if not _MODULE_RE.match(module):
            raise UserError(f"--module must look like pkg.mod:factory, not {module!r}")
        if layers is not None:
            raise UserError("--layers shrinks a preset or config; it cannot change a --module's depth")
        return BenchTarget("module", module, module=module)
    try:
        if model_config:
            arch, kind, name = load_hf_config(Path(model_config)), "config", str(model_config)
        else:
            arch = preset(model or DEFAULT_MODEL)
            kind, name = "preset", arch.name
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if layers is not None and layers > arch.num_layers:
        raise UserError(f"--layers {layers} is more than {arch.name}'s {arch.num_layers} layers")
    return BenchTarget(kind, name, arch=arch, layers=layers)


def validate_settings(settings: BenchSettings, target: BenchTarget) -> BenchSettings:
    """Check every number and name; fill the default sequence length from the model."""
    if not _DEVICE_RE.match(settings.device):
        raise UserError(f"--device must be auto, cpu, cuda or cuda:N, not {settings.device!r}")
    if settings.precision is not None and settings.precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, not {settings.precision!r}")
    for flag, value, least in (("--micro-batch", settings.micro_batch, 1), ("--steps", settings.steps, 1),
                               ("--warmup", settings.warmup, 0)):
        if value < least:
            raise UserError(f"{flag} must be at least {least}, not {value}")
    if settings.peak_tflops is not None and not settings.peak_tflops > 0:
        raise UserError(f"--peak-tflops must be greater than zero, not {settings.peak_tflops}")
    seq_len = settings.seq_len
    arch = target.arch
    if seq_len is None:
        seq_len = DEFAULT_MODULE_SEQ_LEN if arch is None else min(arch.max_seq_len, DEFAULT_SEQ_LEN_CAP)
    if seq_len < 1:
        raise UserError(f"--seq-len must be at least 1, not {seq_len}")
    if arch is not None and arch.learned_positions and seq_len > arch.max_seq_len:
        raise UserError(f"--seq-len {seq_len} exceeds {arch.name}'s {arch.max_seq_len} learned positions")
    return BenchSettings(settings.device, settings.precision, seq_len, settings.micro_batch, settings.steps,
                         settings.warmup, settings.compile, settings.peak_tflops)
