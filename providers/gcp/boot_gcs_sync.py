"""The boot script's gs:// checkpoint and code copies with curl alone (part of gpuplan.jobs.boot_checkpoints).

Google's images are not guaranteed to carry the Cloud SDK (and a custom image_family may have none), so the copies
use the same pieces as the outputs (gpuplan.providers.gcp.boot_gcs: `gcs_token` from the metadata server, the token
only on curl's stdin, `urlencode` for every object name) against the Cloud Storage JSON API:

- push: each regular file under the folder (`find -type f`: symlinks are never followed) by media upload,
  https://cloud.google.com/storage/docs/json_api/v1/objects/insert (`POST /upload/storage/v1/b/B/o?uploadType=media
  &name=N`), skipping files whose size and mtime match the manifest of the last push kept in the run folder;
- restore: the objects list, https://cloud.google.com/storage/docs/json_api/v1/objects/list (`GET
  /storage/v1/b/B/o?prefix=P`, following `nextPageToken`; `fields=items(name),nextPageToken` is the API's partial
  response, https://cloud.google.com/storage/docs/json_api#partial-response, so the only strings parsed are names)
  and each object's bytes, https://cloud.google.com/storage/docs/json_api/v1/objects/get (`alt=media`). A name
  that would land outside the folder (a `..` or `.` component, a leading or doubled `/`, a path through a
  symlink) is refused; a name with a JSON escape is skipped (bash alone does not decode them safely).

The list is parsed with bash's own regex matching: no jq and no python3, neither of which the script may rely on.
"""

from __future__ import annotations

# Shell functions (defined with the others only for a run with gs:// storage; variables only inside double quotes).
GCS_SYNC_FUNCTIONS = r"""gcs_split() {
  # gs://BUCKET/OBJECT -> "BUCKET" and "OBJECT" (no leading or trailing slash) on two lines.
  local rest=${1#gs://} bucket object
  bucket=${rest%%/*}
  object=${rest#"$bucket"}
  object=${object#/}
  printf '%s\n%s\n' "$bucket" "${object%/}"
}

gcs_put() {
  # File $1 to gs://BUCKET/OBJECT $2 (media upload); token $3 only on curl's stdin. The run's outputs are typed by
  # name, so a browser opening one from the console shows it (a log as text, the exit record as JSON).
  local parts bucket object type=application/octet-stream
  mapfile -t parts < <(gcs_split "$2")
  bucket=${parts[0]}
  object=${parts[1]:-}
  case "$object" in
    *.jsonl) type=application/x-ndjson ;;
    *.json) type=application/json ;;
    *.log) type=text/plain ;;
    *) ;;
  esac
  printf 'Authorization: Bearer %s\n' "$3" | curl -fsS -m 600 --retry 3 -o /dev/null -X POST -H @- \
    -H "Content-Type: $type" --data-binary "@$1" \
    "$GCS_ENDPOINT/upload/storage/v1/b/$(urlencode "$bucket")/o?uploadType=media&name=$(urlencode "$object")"
}

gcs_get() {
  # gs://BUCKET/OBJECT $1 to file $2 (objects.get alt=media), replaced whole: a half download never shows.
  local parts bucket object tmp="$2.gcs-part"
  mapfile -t parts < <(gcs_split "$1")
  bucket=${parts[0]}
  object=${parts[1]:-}
  if [ -z "$object" ] || [ -d "$2" ]; then
    return 1
  fi
  if printf 'Authorization: Bearer %s\n' "$3" | curl -fsS -m 600 --retry 3 -o "$tmp" -H @- \
    "$GCS_ENDPOINT/storage/v1/b/$(urlencode "$bucket")/o/$(urlencode "$object")?alt=media"; then
    mv -f "$tmp" "$2"
  else
    rm -f "$tmp"
    return 1
  fi
}

gcs_file() {
  # storage_file for gs://: one file up ($2 is gs://) or down ($1 is gs://).
  local token
  token=$(gcs_token) || return 1
  case "$2" in
    gs://*) gcs_put "$1" "$2" "$token" ;;
    *) mkdir -p "$(dirname "$2")" && gcs_get "$1" "$2" "$token" ;;
  esac
}

gcs_manifest() {
  # "size mtime relative-path" of each regular file under $1, NUL-separated; symlinks are not followed.
  find "$1" -type f ! -name '*.gcs-part' -printf '%s %T@ %P\0' 2>/dev/null
}

gcs_push_dir() {
  # Folder $1 to gs:// prefix $2: files changed since the last push (the manifest in the run folder) only.
  local dir=$1 url=${2%/} token entry rel failed=0 manifest="$RUN_DIR/.gcs-pushed" next
  local -A pushed=()
  [ -d "$dir" ] || return 0
  if [ -f "$manifest" ]; then
    while IFS= read -r -d '' entry; do pushed[$entry]=1; done <"$manifest"
  fi
  next="$manifest.$BASHPID"
  : >"$next"
  while IFS= read -r -d '' entry; do
    rel=${entry#* }
    rel=${rel#* }
    # A token per object: the metadata server hands out its cached token, which may have only ~4 minutes left
    # (the shortest cache it keeps), so one token for a long pass would run out part way.
    if [ -z "${pushed[$entry]:-}" ] && ! { token=$(gcs_token) && gcs_put "$dir/$rel" "$url/$rel" "$token"; }; then
      failed=1
      continue
    fi
    printf '%s\0' "$entry" >>"$next"
  done < <(gcs_manifest "$dir")
  mv -f "$next" "$manifest"
  return "$failed"
}

gcs_safe_target() {
  # Succeeds when relative name $1 stays inside folder $2 (no ./.. components, no absolute or empty parts, no
  # symlinked folder on the way) and prints the file's path.
  local rel=$1 root=$2 dir real top
  case "/$rel/" in
    *'/../'* | *'/./'* | *'//'*) return 1 ;;
    *) ;;
  esac
  dir=$(dirname "$root/$rel")
  mkdir -p "$dir" || return 1
  top=$(cd -- "$root" && pwd -P) || return 1
  real=$(cd -- "$dir" && pwd -P) || return 1
  case "$real/" in
    "$top/"*) printf '%s' "$root/$rel" ;;
    *) return 1 ;;
  esac
}

gcs_pull_dir() {
  # gs:// prefix $1 into folder $2: every object under it (all pages of the list), each to its relative name.
  local parts bucket prefix token body page='' name rel target failed=0 pattern token_pattern query
  mapfile -t parts < <(gcs_split "$1")
  bucket=${parts[0]}
  prefix=${parts[1]:+${parts[1]}/}
  mkdir -p "$2" || return 1
  pattern='"name"[[:space:]]*:[[:space:]]*"([^"\\]*(\\.[^"\\]*)*)"'
  token_pattern='"nextPageToken"[[:space:]]*:[[:space:]]*"([^"\\]*)"'
  while :; do
    query="prefix=$(urlencode "$prefix")&fields=$(urlencode 'items(name),nextPageToken')"
    if [ -n "$page" ]; then
      query+="&pageToken=$(urlencode "$page")"
    fi
    token=$(gcs_token) || return 1  # fresh per page and per object (see gcs_push_dir)
    body=$(printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 60 --retry 3 -H @- \
      "$GCS_ENDPOINT/storage/v1/b/$(urlencode "$bucket")/o?$query") || return 1
    page=''
    if [[ $body =~ $token_pattern ]]; then
      page=${BASH_REMATCH[1]}
    fi
    while [[ $body =~ $pattern ]]; do
      name=${BASH_REMATCH[1]}
      body=${body#*"${BASH_REMATCH[0]}"}
      rel=${name#"$prefix"}
      case "$name" in
        *\\*) log "skipped checkpoint object with an escaped name: $name"; continue ;;
        "$prefix"*) ;;
        *) continue ;;
      esac
      case "$rel" in
        '' | */) continue ;;  # the prefix itself, a folder placeholder
        *) ;;
      esac
      if ! target=$(gcs_safe_target "$rel" "$2"); then
        log "refused checkpoint object outside the checkpoint folder: $name"
        failed=1
        continue
      fi
      { token=$(gcs_token) && gcs_get "gs://$bucket/$name" "$target" "$token"; } || failed=1
    done
    [ -n "$page" ] || break
  done
  # What was just restored need not go back up at the next push.
  if [ "$failed" = 0 ]; then
    gcs_manifest "$2" >"$RUN_DIR/.gcs-pushed"
  fi
  return "$failed"
}
"""
