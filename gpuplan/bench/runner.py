"""The step loop: real forward + backward + AdamW steps on synthetic tokens, timed the way a GPU needs.

Timing rules (why the numbers can be trusted):
- warm-up steps first (allocator, autotuning, lazy init, torch.compile's compilation), untimed;
- on CUDA, each step is bracketed by CUDA events recorded on the stream and read after ONE synchronisation
  at the end, so timing never stalls the GPU; on the CPU, work is synchronous and perf_counter is exact;
- the step includes zero_grad, forward, loss, backward and the optimizer step, nothing else: no `.item()`
  (a hidden sync) until the loop is over; the synthetic batch is made once, before timing.

FLOPs are counted once on an untimed step (gpuplan.bench.flops). Nothing here touches the database: the
command stores the result only after the whole run completes, so Ctrl-C leaves no half-written record.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from gpuplan.bench import device as dev
from gpuplan.bench.flops import count_step_flops
from gpuplan.bench.model import attention_flops_per_token, build_gpt, count_parameters
from gpuplan.bench.result import BenchResult
from gpuplan.bench.spec import BenchSettings, BenchTarget
from gpuplan.errors import UserError
from gpuplan.hardware.peaks import canonical_gpu, peak_tflops

# Mixed-precision Adam keeps fp32 weights, gradients and two moments (16 bytes/param, ZeRO paper §3);
# below this much free memory the bench would die in an out-of-memory error half-way, so refuse up front.
BYTES_PER_PARAM_TRAINING = 16


class StepObserver(Protocol):
    """Told about progress (the command draws a progress bar); must be cheap, it is called every step."""

    def phase(self, name: str, total: int) -> None: ...

    def step(self) -> None: ...


class _Silent:
    def phase(self, name: str, total: int) -> None:
        pass

    def step(self) -> None:
        pass


@dataclass
class PreparedBench:
    """A model built (or loaded) and placed on its device, ready to run: the slow-to-fail part done first."""

    target: BenchTarget
    settings: BenchSettings
    info: dev.DeviceInfo
    precision: str
    model: nn.Module
    params: int
    vocab_size: int
    arch_attention: int | None  # analytic attention FLOPs of one step, when the shape is known
    layers: int | None


def prepare_bench(target: BenchTarget, settings: BenchSettings) -> PreparedBench:
    """Resolve the device and precision, build the GPT or import the user's module, and move it to the device.

    Every bad-input error (no such device, module that does not import, model too big) surfaces here, before
    any progress bar is drawn.
    """
    info = dev.resolve_device(settings.device)
    precision = dev.resolve_precision(settings.precision, info)
    seq_len, micro_batch = int(settings.seq_len or 0), settings.micro_batch
    arch = target.run_arch
    model: nn.Module
    if arch is not None:
        _check_memory(arch.param_count(), info, target)
        try:
            model = build_gpt(arch, seq_len)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        attention: int | None = int(attention_flops_per_token(arch, seq_len) * micro_batch * seq_len)
        vocab, layers = arch.vocab_size, arch.num_layers
    else:
        model = load_module(str(target.module))
        attention, vocab, layers = None, module_vocab_size(model), None
    params = count_parameters(model)
    return PreparedBench(target, settings, info, precision, model.to(info.device), params, vocab, attention, layers)


def run_prepared(prepared: PreparedBench, observer: StepObserver | None = None) -> BenchResult:
    """Count one step's FLOPs, warm up, time `settings.steps` steps, and summarise."""
    observer = observer or _Silent()
    target, settings, info, precision = prepared.target, prepared.settings, prepared.info, prepared.precision
    seq_len, micro_batch = int(settings.seq_len or 0), settings.micro_batch
    train_step, count_step = make_train_step(prepared.model, info, precision, prepared.vocab_size, micro_batch,
                                             seq_len, compile_model=settings.compile)

    flops = count_step_flops(count_step, analytic_attention=prepared.arch_attention)
    observer.phase("warm-up", settings.warmup)
    for _ in range(settings.warmup):
        train_step()
        observer.step()
    dev.synchronize(info)
    dev.reset_peak_memory(info)

    observer.phase("steps", settings.steps)
    times, loss = time_steps(train_step, settings.steps, info, observer.step)
    final_loss = float(loss.detach().float().item())
    memory_gb, memory_kind = dev.peak_memory(info)

    total_time = sum(times)
    tokens_per_s = settings.steps * micro_batch * seq_len / total_time
    achieved = flops.model * settings.steps / total_time / 1e12
    gpu = canonical_gpu(info.name) if info.kind == "cuda" else None
    peak, peak_source = _peak(settings.peak_tflops, gpu, precision)
    return BenchResult(
        model_name=target.name, model_kind=target.kind, model_signature=target.signature, params=prepared.params,
        layers=prepared.layers, full_layers=target.arch.num_layers if target.arch else None,
        device=str(info.device), device_name=info.name, gpu=gpu, host=socket.gethostname(), precision=precision,
        seq_len=seq_len, micro_batch=micro_batch, steps=settings.steps, warmup=settings.warmup,
        compiled=settings.compile, tokens_per_s=tokens_per_s, samples_per_s=tokens_per_s / seq_len,
        step_time_p50_s=statistics.median(times), step_time_p90_s=_percentile(times, 0.9),
        step_time_mean_s=total_time / len(times), flops_per_step=flops.model,
        hardware_flops_per_step=flops.hardware, attention_flops_per_step=flops.attention_model,
        attention_flops_source=flops.attention_source, achieved_tflops=achieved, peak_tflops=peak,
        peak_tflops_source=peak_source, mfu=achieved / peak if peak else None, peak_memory_gb=memory_gb,
        peak_memory_kind=memory_kind, final_loss=final_loss, torch_version=torch.__version__,
    )


def make_train_step(model: nn.Module, info: dev.DeviceInfo, precision: str, vocab_size: int, micro_batch: int,
                    seq_len: int, *, compile_model: bool = False,
                    ) -> tuple[Callable[[], torch.Tensor], Callable[[], None]]:
    """(one full training step returning the loss, one forward + backward for the flop counter).

    Also used by bench/bench_overhead.py, so the overhead measured there is the overhead of this loop.
    """
    tokens = torch.randint(0, vocab_size, (micro_batch, seq_len + 1), device=info.device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                                  fused=True if info.kind == "cuda" else None)  # None: torch's own default
    amp_dtype = dev.autocast_dtype(precision)
    scaler = torch.amp.GradScaler(info.kind) if precision == "fp16" else None
    compiled = _compile(model) if compile_model else model

    def autocast() -> contextlib.AbstractContextManager[Any]:
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=info.kind, dtype=amp_dtype)

    def forward_backward(net: nn.Module) -> torch.Tensor:
        with autocast():
            loss = lm_loss(net(inputs), targets)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        return loss

    def train_step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = forward_backward(compiled)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        return loss

    def count_step() -> None:
        # The eager model: the flop counter sees through it reliably, and the maths are the compiled model's.
        forward_backward(model)
        optimizer.zero_grad(set_to_none=True)

    return train_step, count_step


def time_steps(train_step: Callable[[], torch.Tensor], steps: int, info: dev.DeviceInfo,
               on_step: Callable[[], None]) -> tuple[list[float], torch.Tensor]:
    """Seconds of each of `steps` steps, and the last loss (still on the device)."""
    loss = torch.zeros(())
    if info.kind == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        events[0].record()
        for i in range(steps):
            loss = train_step()
            events[i + 1].record()
            on_step()
        torch.cuda.synchronize(info.device)
        return [events[i].elapsed_time(events[i + 1]) / 1000 for i in range(steps)], loss
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = train_step()
        dev.synchronize(info)  # a no-op on the CPU; MPS queues work like CUDA
        times.append(time.perf_counter() - start)
        on_step()
    return times, loss


def lm_loss(output: Any, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy from logits, or the module's own loss (a scalar, or an object with `.loss`)."""
    if hasattr(output, "logits"):  # Hugging Face ModelOutput
        output = output.logits
    elif isinstance(output, (tuple, list)):
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise UserError(f"the module returned {type(output).__name__}; expected logits (batch, seq, vocab)")
    if output.dim() == 0:
        return output
    if output.dim() != 3 or output.shape[:2] != targets.shape:
        raise UserError(f"the module returned shape {tuple(output.shape)}; expected logits "
                        f"({targets.shape[0]}, {targets.shape[1]}, vocab)")
    return F.cross_entropy(output.float().flatten(0, 1), targets.flatten())


def load_module(spec: str) -> nn.Module:
    """Import `pkg.mod:factory` (the current directory is importable, as with `python -m`) and call it."""
    module_name, attr = spec.split(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise UserError(f"--module {spec}: cannot import {module_name}: {exc}") from exc
    except AttributeError as exc:
        raise UserError(f"--module {spec}: {module_name} has no {attr}") from exc
    try:  # the user's code: whatever it raises (`json:dumps` wants an argument) is their module, not a crash
        model = factory() if callable(factory) and not isinstance(factory, nn.Module) else factory
    except SystemExit as exc:  # `sys:exit` would end gpuplan itself, silently, with its status
        raise UserError(f"--module {spec}: calling {attr}() exited ({exc.code!r}) instead of building a model") \
            from None
    except Exception as exc:
        raise UserError(f"--module {spec}: calling {attr}() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise UserError(f"--module {spec} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def module_vocab_size(model: nn.Module) -> int:
    """The token-id range a user's module accepts: `vocab_size`, `config.vocab_size`, or its first Embedding."""
    for holder in (model, getattr(model, "config", None)):
        value = getattr(holder, "vocab_size", None)
        if isinstance(value, int) and value > 0:
            return value
    for sub in model.modules():
        if isinstance(sub, nn.Embedding):
            return int(sub.num_embeddings)
    raise UserError("the module has no vocab_size attribute and no nn.Embedding: cannot make synthetic tokens")


def _check_memory(params: int, info: dev.DeviceInfo, target: BenchTarget) -> None:
    needed = params * BYTES_PER_PARAM_TRAINING
    available = dev.available_memory_bytes(info)
    if available is not None and needed > available:
        hint = "" if target.arch is None else f"; try --layers {max(1, min(2, target.arch.num_layers))}"
        raise UserError(f"{target.name} needs ~{needed / 1e9:.1f} GB for weights, gradients and AdamW state; "
                        f"{info.name} has {available / 1e9:.1f} GB free{hint}")


def _compile(model: nn.Module) -> nn.Module:
    try:
        compiled = torch.compile(model)
    except Exception as exc:  # torch.compile raises many kinds (missing compiler, unsupported platform)
        raise UserError(f"--compile failed: {exc}") from exc
    # A module compiles to an OptimizedModule (an nn.Module); torch.compile's annotation is the generic callable.
    if not isinstance(compiled, nn.Module):
        raise UserError(f"--compile returned {type(compiled).__name__}, not a module")
    return compiled


def _peak(explicit: float | None, gpu: str | None, precision: str) -> tuple[float | None, str | None]:
    if explicit is not None:
        return explicit, "user"
    value = peak_tflops(gpu, precision)
    return (value, "gpu_table") if value else (None, None)


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@contextlib.contextmanager
def quiet_warnings() -> Iterator[None]:
    """Silence torch's user warnings (e.g. about CPU autocast) so --json output and bars stay clean."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
