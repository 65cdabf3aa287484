"""The AWS part of the boot script (gpuplan.jobs.boot_cloud hooks): SSM secrets, S3 copies, the spot notice.

- Secrets: `aws ssm get-parameter --with-decryption` in the machine's own region (IMDSv2 `placement/region`),
  so user data (readable by anyone who may describe the instance) holds only parameter names.
  https://docs.aws.amazon.com/cli/latest/reference/ssm/get-parameter.html
- Storage: the AWS CLI on the Deep Learning AMIs (`aws s3 cp`, `aws s3 sync`).
- Interruption: IMDSv2 `spot/instance-action` (404 until EC2 schedules the interruption, then `{"action": ...}`
  two minutes ahead; AWS recommends checking every 5 seconds):
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
- EFA (multi-node p4d/p5: gpuplan.providers.aws.network): when the machine has EFA devices (/dev/infiniband), the
  container gets them and unlimited locked memory (libfabric pins its buffers), or NCCL falls back to TCP sockets;
  and the job log says when the image lacks the aws-ofi-nccl plugin (libnccl-net*.so) NCCL needs to use EFA
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html). GPUPLAN_EFA_DEVICES moves the device
  folder for the tests.
- `imds_get KEY` (IMDSv2: a session token first) also serves the multi-node identity (gpuplan.jobs.boot_identity).
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html
"""

from __future__ import annotations

from gpuplan.jobs.boot_cloud import BootCloud

# The EC2 instance metadata service (a link-local address on every instance).
DEFAULT_IMDS_URL = "http://169.254.169.254"

AWS_HOOKS = r"""imds_get() {
  # One item of this instance's metadata, e.g. placement/region (IMDSv2: a session token first).
  local token
  token=$(curl -fsS -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \
    "$IMDS_URL/latest/api/token" 2>/dev/null) || return 1
  curl -fsS -m 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS_URL/latest/meta-data/$1" 2>/dev/null
}

store_secret() {
  # SSM Parameter Store, in this machine's region; the value is printed with a guard character, never logged.
  local region value
  region=${AWS_REGION:-$(imds_get placement/region || true)}
  value=$(aws ssm get-parameter --with-decryption ${region:+--region "$region"} \
    --name "$1" --query Parameter.Value --output text) || return 1
  printf '%sx' "$value"
}

instance_tag() {
  # Instance tags in metadata are enabled at launch (gpuplan.providers.aws.ranks):
  # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/work-with-tags-in-IMDS.html
  imds_get "tags/instance/$1"
}

launch_index() {
  imds_get ami-launch-index
}

cloud_put() {
  aws s3 cp --only-show-errors -- "$1" "$2"
}

cloud_get() {
  mkdir -p "$(dirname "$2")" && aws s3 cp --only-show-errors "$1" "$2" >/dev/null 2>&1
}

cloud_sync() {
  aws s3 sync --only-show-errors --no-progress "$1" "$2"
}

fabric_run_args() {
  local devices=${GPUPLAN_EFA_DEVICES:-/dev/infiniband}
  if [ -d "$devices" ]; then
    printf '%s\n' --device "$devices" --ulimit memlock=-1:-1
  fi
}

fabric_note() {
  local libs="/opt/amazon/ofi-nccl/lib*/libnccl-net* /opt/aws-ofi-nccl/lib*/libnccl-net*"
  libs="$libs /usr/local/lib/libnccl-net* /usr/lib/*/libnccl-net*"
  [ -d "${GPUPLAN_EFA_DEVICES:-/dev/infiniband}" ] || return 0
  if ! "$1" run --rm --entrypoint /bin/sh "$2" -c "ls $libs" >/dev/null 2>&1; then
    echo "gpuplan: note: image $2 has no aws-ofi-nccl plugin (libnccl-net*.so): NCCL will not use EFA"
  fi
}

interruption_notice() {
  local token body
  token=$(curl -fsS -m 3 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \
    "$IMDS_URL/latest/api/token" 2>/dev/null) || return 1
  body=$(curl -fsS -m 3 -H "X-aws-ec2-metadata-token: $token" \
    "$IMDS_URL/latest/meta-data/spot/instance-action" 2>/dev/null) || return 1
  case "$body" in
    *'"action"'*) printf '%s' "$body" ;;
    *) return 1 ;;
  esac
}
"""


def aws_boot_cloud(imds_url: str | None = None) -> BootCloud:
    """The hooks of an EC2 machine; `imds_url` moves the metadata service (the tests' loopback fake)."""
    # AWS gives two minutes' notice: a job has a minute to save before its checkpoints are copied as they are.
    return BootCloud(functions=AWS_HOOKS, notice_source="aws",
                     assignments={"IMDS_URL": (imds_url or DEFAULT_IMDS_URL).rstrip("/"), "NOTICE_BUDGET": "60"})
