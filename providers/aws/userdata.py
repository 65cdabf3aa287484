"""EC2 user data: the boot script, gzip-compressed, and checked against EC2's size limit before any call.

The rule (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html): "User data is
limited to 16 KB, in raw form, before it is base64-encoded." RunInstances answers a larger one with
`InvalidParameterValue` "User data is limited to 16384 bytes" — after the launch has been recorded, in the first
zone, and again in every other: so gpuplan measures it first and refuses the launch instead.

gpuplan's boot script is ~13 KB before the user's command, env and secret names. cloud-init decompresses gzip
user data ("Gzip Compressed Content — content found to be gzip compressed will be uncompressed. The uncompressed
data will then be used as if it were not compressed. Compression of data is useful because user-data is limited
to 16384 bytes", https://help.ubuntu.com/community/CloudInit), and the DLAMIs gpuplan boots are Ubuntu with
cloud-init, so the script travels compressed (~4 KB) and the 16 KB limit applies to the compressed bytes.
boto3 base64-encodes `UserData` bytes itself (botocore encodes binary user data).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass

USER_DATA_LIMIT = 16384  # bytes, raw (before base64)


@dataclass(frozen=True)
class UserData:
    """The bytes RunInstances gets, and the script's own size (for the message when it does not fit)."""

    payload: bytes
    script_bytes: int


def compress(script: str) -> UserData:
    """The script gzip-compressed (mtime 0: the same script gives the same bytes, so a retried RunInstances
    with the same ClientToken sends identical parameters)."""
    raw = script.encode()
    return UserData(payload=gzip.compress(raw, compresslevel=9, mtime=0), script_bytes=len(raw))


def too_big(data: UserData) -> str | None:
    """Why `data` cannot be user data (one line for the user), or None when it fits EC2's 16,384 bytes."""
    if len(data.payload) <= USER_DATA_LIMIT:
        return None
    return (f"the boot script is too big for EC2 user data: {data.script_bytes} bytes, {len(data.payload)} "
            f"compressed, over EC2's limit of {USER_DATA_LIMIT} bytes; shorten the command or env, or move them "
            "into a file in the image")
