"""The boot script names no cloud: what a machine says to its cloud comes from the provider's hooks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.jobs.bootstrap import BootPlan, render_boot_script

JOBS = Path(__file__).resolve().parents[3] / "jobs"
# What a boot script would say to AWS (SSM, S3, IMDS) or GCP (Secret Manager, GCS, the metadata server).
CLOUD_WORDS = re.compile(r"\bssm\b|\baws\b|\bs3\b|169\.254\.169\.254|imds|secretmanager|\bgcs|storage\.googleapis|"
                         r"metadata\.google|guest.attribute|Metadata-Flavor", re.IGNORECASE)


def test_the_jobs_package_says_nothing_to_a_cloud() -> None:
    """bootstrap, checkpoints and the identity step carry no cloud's API: the providers' packages do."""
    offenders = []
    for path in sorted(JOBS.glob("boot*.py")):
        body = path.read_text().split('"""', 2)[-1]  # past the module docstring (it may say which cloud does what)
        body = re.sub(r"(^|\s)#\s.*$", "", body, flags=re.MULTILINE)  # and comments (Python's and the shell's)
        offenders += [f"{path.name}: {m.group(0)}" for m in CLOUD_WORDS.finditer(body)]
    assert [o for o in offenders if not o.startswith("boot_identity.py")] == []


def test_a_script_without_a_cloud_has_only_the_neutral_hooks(tmp_path: Path) -> None:
    """No cloud: a secret by reference fails cleanly (exit 4, the reason recorded), nothing is shipped anywhere
    but a folder, and the script calls no cloud tool."""
    base = tmp_path / "base"
    plan = BootPlan(run_id="r-n", name="n", argv=["true"], base_dir=str(base), poweroff=False,
                    secret_params={"TOKEN": "/somewhere/TOKEN"}, storage_url=str(tmp_path / "shared"))
    script = render_boot_script(plan)
    assert CLOUD_WORDS.search(script) is None
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4
    assert '"reason": "cannot read secrets"' in (tmp_path / "shared" / "exit.json").read_text()
    assert "keeps no secret store: cannot read /somewhere/TOKEN" in (base / "run" / "job.log").read_text()


def test_the_clouds_hooks_replace_the_defaults_and_their_values_are_quoted(tmp_path: Path) -> None:
    """A provider's store_secret is the one the script calls; its per-run values enter quoted."""
    hooks = BootCloud(functions='store_secret() {\n  printf "%s:%sx" "$STORE_PREFIX" "$1"\n}\n',
                      assignments={"STORE_PREFIX": "it's $(touch PWNED)", "bad name": "x"})
    base = tmp_path / "base"
    plan = BootPlan(run_id="r-h", name="n", argv=["/bin/sh", "-c", 'printf "%s" "$TOKEN" > "$GPUPLAN_RUN_DIR/t"'],
                    base_dir=str(base), poweroff=False, secret_params={"TOKEN": "p/TOKEN"}, cloud=hooks)
    script = render_boot_script(plan)
    assert "bad name" not in script
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (base / "boot.log").read_text()
    assert (base / "run" / "t").read_text() == "it's $(touch PWNED):p/TOKEN"
    assert not (tmp_path / "PWNED").exists()
