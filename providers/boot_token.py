"""The boot scripts' one reader of a metadata server's token answer, shared by the clouds whose VMs get an OAuth
access token as JSON from their metadata service (GCP's service account, Azure's managed identity).

The JSON is cut with shell parameter expansion, not jq or python (the image may have neither), and the token
lives only in shell variables: never a file, a log line or a command line.
"""

from __future__ import annotations

# A shell function (fixed text, no user input): the `access_token` of the JSON in $1, or status 1.
ACCESS_TOKEN_FUNCTION = r"""access_token_of() {
  local body=$1
  case "$body" in
    *'"access_token"'*) ;;
    *) return 1 ;;
  esac
  body=${body#*\"access_token\"}
  body=${body#*\"}
  body=${body%%\"*}
  [ -n "$body" ] || return 1
  printf '%s' "$body"
}
"""
