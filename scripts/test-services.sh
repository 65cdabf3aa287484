#!/usr/bin/env bash
# Install the Debian packages the test suite talks to, where they are missing (CI starts from a fresh machine).
# PostgreSQL is started by the pytest session fixture itself (tests/conftest.py); moto and the fake GCP
# server run inside the tests. Add a package here when a test needs a real service from Debian.
set -euo pipefail

PACKAGES=(
  # Jobs: podman + runc run containers (tests/unit/jobs/test_runner.py, test_bootstrap.py); shellcheck lints boot
  # scripts.
  podman runc busybox-static shellcheck
  # Containers run with an init as PID 1 (`--init`): podman's catatonit, docker's tini (tests/unit/jobs/
  # test_container_signals.py). A real OCI registry on 127.0.0.1 answers the image-platform lookups
  # (tests/unit/jobs/test_image_platforms.py); skopeo pushes images to it.
  catatonit tini docker-registry skopeo
  # The GCP boot script uploads to GCS with curl (tests/unit/providers/gcp/test_gcs_outputs.py runs it against a
  # loopback fake).
  curl
  # The docs' examples pick a run id out of `--json` output with jq, as a user would (tests/docs/test_examples.py).
  jq
  # Slurm: tests/support/slurmhelp.py starts a throwaway one-node cluster (scripts/start_slurm.sh); slurmdbd and MariaDB
  # give it accounting so the sacct path is tested too.
  slurm-wlm munge slurmdbd mariadb-server
  # `gpuplan ui` in a real browser: tests/e2e/test_ui_browser.py drives headless Chromium through Selenium and
  # Debian's chromedriver (named explicitly, so Selenium Manager never downloads one).
  chromium chromium-driver
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "test-services: cannot install ${missing[*]} (need root and apt-get); the tests that need them skip" >&2
    exit 0
  fi
  echo "test-services: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -o DPkg::Lock::Timeout=300 -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# podman's default runtime (crun) fails on these machines; runc with cgroupfs works (tests also point
# CONTAINERS_CONF at this file, so they work where /etc is not ours to change).
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null && [ ! -e /etc/containers/containers.conf ]; then
  install -D -m 0644 "$(dirname "$0")/podman-containers.conf" /etc/containers/containers.conf
fi
