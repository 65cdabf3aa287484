"""`gpuplan models`: the model presets `--model` and a spec's `workload.model` accept, with their shapes."""

from __future__ import annotations

from dataclasses import dataclass

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table


@dataclass(frozen=True)
class ModelRow:
    """One preset as a user chooses it: its size and the dimensions FLOPs and memory are computed from."""

    name: str
    params: int
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    intermediate_size: int
    vocab_size: int
    context: int
    gated_mlp: bool


def model_rows() -> list[ModelRow]:
    """Every preset, smallest first."""
    from gpuplan.estimating.architecture import PRESETS

    rows = [ModelRow(a.name, a.param_count(), a.num_layers, a.hidden_size, a.num_heads, a.num_kv_heads,
                     a.intermediate_size, a.vocab_size, a.max_seq_len, a.gated_mlp) for a in PRESETS.values()]
    return sorted(rows, key=lambda r: (r.params, r.name))


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: a list of presets with their dimensions.")
@pass_app
def models(app: AppContext, as_json: bool) -> None:
    """List the model presets (`--model NAME`, `workload.model: NAME`) with parameters and dimensions.

    Any other model: `--model-config config.json` (a Hugging Face config) or `--params N`.
    """
    from gpuplan.units import format_size

    rows = model_rows()
    if as_json:
        emit_json(rows)
        return
    print_table(
        ["MODEL", "PARAMS", "LAYERS", "HIDDEN", "HEADS", "KV HEADS", "FFN", "VOCAB", "CONTEXT", "MLP"],
        [[r.name, format_size(r.params), r.layers, r.hidden_size, r.heads, r.kv_heads, r.intermediate_size,
          r.vocab_size, r.context, "gated" if r.gated_mlp else "plain"] for r in rows],
        justify_right=["PARAMS", "LAYERS", "HIDDEN", "HEADS", "KV HEADS", "FFN", "VOCAB", "CONTEXT"],
    )
