"""Listing and downloading the files under a run's durable storage (`gpuplan checkpoints`): an s3:// prefix, a
gs:// prefix, an az:// prefix (Azure Blob: gpuplan.providers.azure_blob), or a folder path (gpuplan.jobs.storage).

S3 through boto3 (ListObjectsV2 pages, GetObject; the client honours AWS_ENDPOINT_URL like the rest of gpuplan),
GCS through google-cloud-storage (`list_blobs` with the prefix; the tests' loopback endpoint via
CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE, as the GCP provider's outputs), a folder with the file system. SDKs are
imported only when used. A file's name is its path below the storage folder, never `..` or absolute: a hostile
object key cannot make a download write outside the chosen folder.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpuplan.providers.base import ProviderError


@dataclass(frozen=True)
class StoredFile:
    """One file of the storage folder: its path below it, size in bytes, and when it was last written."""

    name: str
    size: int
    modified: dt.datetime | None


def _split(url: str) -> tuple[str, str]:
    """(bucket, key prefix ending in '/') of an s3:// or gs:// URL."""
    rest = url.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    return bucket, (prefix.strip("/") + "/") if prefix.strip("/") else ""


def safe_name(name: str) -> str | None:
    """The relative POSIX path of a stored file, or None for one that would leave the folder."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("..", "") for part in name.split("/")):
        return None
    return str(path)


def list_files(url: str, region: str | None = None) -> list[StoredFile]:
    """Every file under `url`, by name."""
    try:
        if url.startswith("s3://"):
            found = list(_s3_list(url, region))
        elif url.startswith("gs://"):
            found = list(_gcs_list(url))
        elif url.startswith("az://"):
            found = list(_blob_list(url))
        else:
            found = list(_folder_list(Path(url)))
    except ProviderError:
        raise
    except Exception as exc:  # an SDK's own error: one line, never a traceback
        raise ProviderError(f"cannot list {url}: {exc}") from exc
    return sorted(found, key=lambda f: f.name)


def download(url: str, name: str, dest: Path, region: str | None = None) -> Path:
    """Copy the stored file `name` to `dest/name` (folders made as needed, written whole via a temporary file)."""
    safe = safe_name(name)
    if safe is None:
        raise ProviderError(f"refusing to download {name!r}: not a path inside the storage folder")
    target = dest / safe
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        if url.startswith("s3://"):
            bucket, prefix = _split(url)
            _s3(region).download_file(bucket, prefix + safe, str(tmp))
        elif url.startswith("gs://"):
            bucket, prefix = _split(url)
            _gcs().bucket(bucket).blob(prefix + safe).download_to_filename(str(tmp))
        elif url.startswith("az://"):
            where = _blob_where(url)
            tmp.write_bytes(_blob().get(where.account, where.container, _blob_key(where.prefix, safe)))
        else:
            tmp.write_bytes((Path(url) / safe).read_bytes())
        os.replace(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ProviderError(f"cannot download {name} from {url}: {exc}") from exc
    return target


def upload(source: Path, url: str, region: str | None = None) -> None:
    """Put the local file `source` at `url` (an object URL, or a file path for a folder storage)."""
    try:
        if url.startswith("s3://"):
            bucket, key = url.removeprefix("s3://").split("/", 1)
            _s3(region).upload_file(str(source), bucket, key)
        elif url.startswith("gs://"):
            bucket, key = url.removeprefix("gs://").split("/", 1)
            _gcs().bucket(bucket).blob(key).upload_from_filename(str(source))
        elif url.startswith("az://"):
            where = _blob_where(url)
            _blob().put(where.account, where.container, where.prefix, source.read_bytes())
        else:
            target = Path(url)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(source.read_bytes())
            os.replace(tmp, target)
    except Exception as exc:
        raise ProviderError(f"cannot upload to {url}: {exc}") from exc


def _s3(region: str | None) -> Any:
    import boto3

    return boto3.client("s3", region_name=region)


def _s3_list(url: str, region: str | None) -> Iterator[StoredFile]:
    bucket, prefix = _split(url)
    paginator = _s3(region).get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            name = safe_name(str(obj["Key"])[len(prefix):])
            if name is not None:
                yield StoredFile(name, int(obj.get("Size", 0)), obj.get("LastModified"))


def _gcs() -> Any:
    from google.auth.credentials import AnonymousCredentials

    # Not `from google.cloud import storage`: google-cloud-storage ships no py.typed, so mypy finds no
    # `storage` in the google.cloud namespace that google-cloud-compute types.
    from google.cloud.storage import Client as StorageClient

    endpoint = os.environ.get("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE")
    if endpoint and endpoint.startswith(("http://127.0.0.1", "http://localhost")):  # the tests' loopback fake
        return StorageClient(project="test", credentials=AnonymousCredentials(),
                             client_options={"api_endpoint": endpoint.rstrip("/").removesuffix("/storage/v1")})
    return StorageClient()


def _gcs_list(url: str) -> Iterator[StoredFile]:
    bucket, prefix = _split(url)
    for blob in _gcs().list_blobs(bucket, prefix=prefix):
        name = safe_name(str(blob.name)[len(prefix):])
        if name is not None:
            yield StoredFile(name, int(blob.size or 0), blob.updated)


def _blob_where(url: str) -> Any:
    from gpuplan.providers.azure_blob import BlobLocation

    return BlobLocation.parse(url)


def _blob() -> Any:
    from gpuplan.providers.azure_blob import user_blob_client

    return user_blob_client()


def _blob_key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _blob_list(url: str) -> Iterator[StoredFile]:
    where = _blob_where(url)
    prefix = f"{where.prefix}/" if where.prefix else ""
    for item in _blob().list(where.account, where.container, prefix):
        name = safe_name(item.name[len(prefix):])
        if name is not None:
            modified = None
            if item.modified:
                from email.utils import parsedate_to_datetime

                modified = parsedate_to_datetime(item.modified)
            yield StoredFile(name, item.size, modified)


def _folder_list(root: Path) -> Iterator[StoredFile]:
    if not root.is_dir():
        return
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            stat = path.stat()
            yield StoredFile(path.relative_to(root).as_posix(), stat.st_size,
                             dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc))
