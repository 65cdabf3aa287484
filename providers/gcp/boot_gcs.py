"""The boot script's Cloud Storage calls with curl alone (GCP's boot hooks,
gpuplan.providers.gcp.boot): no gsutil or gcloud needed.

The VM's service-account token comes from the metadata server and reaches curl only on stdin (never a command
line, a file or a log line); uploads use the GCS JSON API's media upload
(https://cloud.google.com/storage/docs/uploading-objects#uploading-an-object, `uploadType=media`), with the
object name percent-encoded byte by byte so it is never read as a path.
"""

from __future__ import annotations

# Shell functions (defined with the others; refer to variables only inside double quotes; no user text).
GCS_FUNCTIONS = r"""gcs_token() {
  # GCP: an OAuth access token of the VM's service account, from the metadata server. It lives only in shell
  # variables: never in a file, a log line or a command line (curl gets it on stdin).
  local body
  body=$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' \
    "$METADATA_URL/instance/service-accounts/default/token" 2>/dev/null) || return 1
  access_token_of "$body"
}

urlencode() {
  # Percent-encode one URL component, byte by byte (LC_ALL=C), so an object name is never read as a path.
  local LC_ALL=C s=$1 out='' c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case "$c" in
      [A-Za-z0-9._~-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c"; out+=$c ;;
    esac
  done
  printf '%s' "$out"
}
"""
