"""`gpuplan ui` under test: books made by real local launches, the dashboard as a child process, HTTP helpers.

The books are written the way a user writes them: `gpuplan launch` of small process jobs on the local provider
(billed at a pretend price so there are dollars to show), a budget set with `gpuplan budget set`. Two of the
jobs carry names that are HTML/JS, and their logs print some: whatever the dashboard shows of them must stay
text.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SCRIPT_NAME = "<script>window.pwned=1</script>"
IMG_NAME = '<img src=x onerror="window.pwned=2">'
LOG_SCRIPT = "<script>window.pwned=3</script>"
NOW = "2099-01-01T00:00:00Z"  # the books' clock for report/budget status, the same for the CLI and the dashboard

JOB = """\
name: {name}
runtime: process
project: {project}
labels: {{team: ml, kind: ui-test}}
workload: {{params: 1M, tokens: 4000, throughput: 2000}}
run: |
  echo 'starting {log}'
  for step in 1 2 3 4; do
    python -c "from gpuplan.jobs.metrics import log_metrics; log_metrics($step, tokens=$step * 1000, loss=2.0/$step)"
    sleep 0.3
  done
  exit {code}
"""


@dataclass(frozen=True)
class Books:
    """A database with runs in it, and the environment that points the CLI at it."""

    env: dict[str, str]

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout)

    def cli_json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def book_env(home: Path, db_url: str) -> dict[str, str]:
    return {**os.environ, "GPUPLAN_HOME": str(home), "GPUPLAN_DB": db_url, "GPUPLAN_LOCAL_PRICE_PER_HOUR": "2.50",
            "GPUPLAN_NOW": NOW}


def make_books(folder: Path, db_url: str, *, few: bool = False) -> Books:
    """Three finished runs (two succeeded with hostile names, one failed) in two projects, and two budgets;
    `few`: one run and one budget (for a second database, where only the plumbing differs)."""
    folder.mkdir(parents=True, exist_ok=True)
    books = Books(book_env(folder / "home", db_url))
    jobs = [(SCRIPT_NAME, "alpha", LOG_SCRIPT, 0), (IMG_NAME, "alpha", "<b>bold</b>", 0),
            ("plain-failing", "beta", "plain", 3)][: 1 if few else 3]
    launches = []
    for i, (name, project, log, code) in enumerate(jobs):  # side by side: each launch is mostly waiting
        spec = folder / f"job{i}.yaml"
        spec.write_text(JOB.format(name=json.dumps(name), project=project, log=log, code=code))
        launches.append((code, subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y", "--json"],
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                                env=books.env)))
    for code, proc in launches:
        out, err = proc.communicate(timeout=180)
        assert (proc.returncode == 0) == (code == 0), (proc.returncode, out, err)
    for args in (("budget", "set", "team", "--amount", "100", "--period", "total"),
                 ("budget", "set", "alpha-only", "--amount", "0.001", "--period", "total", "--project", "alpha"))[
                    : 1 if few else 2]:
        done = books.cli(*args)
        assert done.returncode == 0, done.stderr
    return books


@dataclass
class Dashboard:
    """A running `gpuplan ui` child process and its URL."""

    proc: subprocess.Popen[str]
    url: str

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def get(self, path: str, headers: dict[str, str] | None = None, method: str = "GET",
            body: str | None = None) -> tuple[int, dict[str, str], str]:
        """One request with exactly these headers (Host defaults to the dashboard's own)."""
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            sent = {"Host": self.host, **(headers or {})}
            if body is not None:
                sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
                sent["Content-Length"] = str(len(body.encode()))
            for key, value in sent.items():
                conn.putheader(key, value)
            conn.endheaders(body.encode() if body is not None else None)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            conn.close()

    def json(self, path: str) -> Any:
        status, _, body = self.get(path)
        assert status == 200, (path, status, body)
        return json.loads(body)


@contextlib.contextmanager
def dashboard(books: Books, *args: str) -> Iterator[Dashboard]:
    """`gpuplan ui --no-browser --port 0 ARGS` until the block ends, then Ctrl-C; it must exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "ui", "--no-browser", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=books.env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise AssertionError(f"no URL printed: {line!r} {proc.communicate(timeout=10)}")
    url = line.split()[2]
    try:
        yield Dashboard(proc, url)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (proc.returncode, out, err)
    assert "stopped" in out
