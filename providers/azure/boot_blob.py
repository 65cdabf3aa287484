"""The boot script's Blob storage calls with curl alone (the Azure boot hooks, gpuplan.providers.azure.boot).

A storage URL `az://ACCOUNT/CONTAINER/PREFIX` is the blob `https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX`
(`$BLOB_ENDPOINT` replaces the host part in tests: `$BLOB_ENDPOINT/ACCOUNT/CONTAINER/...`, the emulator's path
style). Calls use the managed identity's token for `https://storage.azure.com/` with `x-ms-version` 2021-08-06
(OAuth needs 2017-11-09 or later: https://learn.microsoft.com/rest/api/storageservices/authorize-with-azure-active-directory):
- upload: Put Blob, `x-ms-blob-type: BlockBlob` (https://learn.microsoft.com/rest/api/storageservices/put-blob);
- download: Get Blob (https://learn.microsoft.com/rest/api/storageservices/get-blob);
- a folder: List Blobs `?restype=container&comp=list&prefix=P&marker=M`, following `NextMarker`
  (https://learn.microsoft.com/rest/api/storageservices/list-blobs).
Blob names are percent-encoded byte by byte (`/` kept) so a name is never read as a query or a path trick, and a
listed name that would leave the target folder (`..`, an absolute path) is skipped.
"""

from __future__ import annotations

BLOB_FUNCTIONS = r"""blob_url() {
  # az://ACCOUNT/CONTAINER/PATH -> the blob's https URL (PATH percent-encoded, `/` kept).
  local rest=${1#az://} account container path out='' c i LC_ALL=C
  account=${rest%%/*}; rest=${rest#*/}; container=${rest%%/*}; path=${rest#"$container"}; path=${path#/}
  for ((i = 0; i < ${#path}; i++)); do
    c=${path:i:1}
    case "$c" in
      [A-Za-z0-9._~/-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c"; out+=$c ;;
    esac
  done
  if [ -n "${BLOB_ENDPOINT:-}" ]; then
    printf '%s/%s/%s/%s' "$BLOB_ENDPOINT" "$account" "$container" "$out"
  else
    printf 'https://%s.blob.core.windows.net/%s/%s' "$account" "$container" "$out"
  fi
}

cloud_put() {
  local token
  token=$(azure_token https://storage.azure.com/) || return 1
  printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 300 --retry 3 -X PUT -H @- \
    -H 'x-ms-version: 2021-08-06' -H 'x-ms-blob-type: BlockBlob' --data-binary @"$1" "$(blob_url "$2")" \
    >/dev/null
}

cloud_get() {
  local token
  token=$(azure_token https://storage.azure.com/) || return 1
  printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 300 --retry 3 -H @- \
    -H 'x-ms-version: 2021-08-06' -o "$2" "$(blob_url "$1")" 2>/dev/null
}

blob_names() {
  # Every blob name under az://ACCOUNT/CONTAINER/PREFIX/, one a line, page by page.
  local url=$1 token prefix container_url marker='' page names next
  prefix=${url#az://*/*/}; prefix=${prefix%/}/
  container_url=$(blob_url "${url%%"$prefix"*}"); container_url=${container_url%/}
  token=$(azure_token https://storage.azure.com/) || return 1
  while :; do
    page=$(printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 60 -G -H @- \
      -H 'x-ms-version: 2021-08-06' --data-urlencode restype=container --data-urlencode comp=list \
      --data-urlencode "prefix=$prefix" ${marker:+--data-urlencode "marker=$marker"} "$container_url") \
      || return 1
    names=$(printf '%s' "$page" | sed -e 's/<Name>/\n<Name>/g' | sed -n 's/^<Name>\([^<]*\)<\/Name>.*/\1/p')
    [ -n "$names" ] && printf '%s\n' "$names"
    next=$(printf '%s' "$page" | sed -n 's/.*<NextMarker>\([^<]*\)<\/NextMarker>.*/\1/p')
    [ -n "$next" ] || return 0
    marker=$next
  done
}

cloud_sync() {
  # A folder to az:// (every file) or from az:// (every blob under the prefix) — one side is the URL.
  local from=$1 to=$2 file rel name prefix
  case "$to" in
    az://*)
      (cd "$from" && find . -type f -print) | while IFS= read -r file; do
        rel=${file#./}
        cloud_put "$from/$rel" "${to%/}/$rel" || return 1
      done
      ;;
    *)
      prefix=${from#az://*/*/}; prefix=${prefix%/}/
      blob_names "$from" | while IFS= read -r name; do
        rel=${name#"$prefix"}
        case "/$rel/" in
          */../*|*/./*|//*) continue ;;
        esac
        mkdir -p "$(dirname "$to/$rel")"
        cloud_get "${from%/}/$rel" "$to/$rel" || return 1
      done
      ;;
  esac
}
"""
