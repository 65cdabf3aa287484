"""Parameter counts of the presets match the published model sizes."""

from __future__ import annotations

import json

import pytest

from gpuplan.estimating.architecture import PRESETS, from_hf_config, load_hf_config, preset

# Published parameter counts (model cards / Hugging Face `num_parameters()`).
PUBLISHED = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096,
}


@pytest.mark.parametrize(("name", "count"), sorted(PUBLISHED.items()))
def test_preset_param_counts_are_exact(name: str, count: int) -> None:
    assert PRESETS[name].param_count() == count


def test_unknown_preset_suggests() -> None:
    with pytest.raises(ValueError, match="llama-2-7b"):
        preset("llama2-7b")


def test_hf_config_gpt2_and_llama(tmp_path) -> None:
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
            "n_positions": 1024}
    assert from_hf_config(gpt2).param_count() == PUBLISHED["gpt2"]
    llama = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
             "hidden_act": "silu", "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama))
    assert load_hf_config(path).param_count() == PUBLISHED["llama-3-8b"]


def test_bad_config_file(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_hf_config(path)
    path.write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(ValueError, match="lacks"):
        load_hf_config(path)


@pytest.mark.parametrize(("raw", "shown"), [("1e999", "inf"), ("NaN", "nan"), ("Infinity", "inf"),
                                            ("4096.5", "4096.5"), ('"many"', "'many'")])
def test_a_config_size_that_is_not_a_whole_number_is_exit_2(tmp_path, raw: str, shown: str) -> None:
    """JSON's NaN/Infinity/1e999 crashed `estimate --model-config` with OverflowError (exit 1)."""
    from support.clihelp import run_cli

    path = tmp_path / "config.json"
    rest = '"num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10'
    path.write_text(f'{{"hidden_size": {raw}, {rest}}}')
    result = run_cli("estimate", "--gpu", "H100", "--model-config", str(path), "--tokens", "1B")
    assert result.exit_code == 2, result.stderr
    assert result.stderr == f"error: model config: hidden_size must be a whole number, not {shown}\n"
    path.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                "vocab_size": 10, "max_position_embeddings": "128"}))
    assert load_hf_config(path).max_seq_len == 128
