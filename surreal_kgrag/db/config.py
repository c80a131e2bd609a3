"""Where a store lives and how to sign in (``StoreConfig``), and the checks on what a user gives:
database URLs, embedded paths, namespace and database names, integers rendered into SurrealQL.
Nothing here opens a connection.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import ConfigurationError, StoreNotFoundError

DEFAULT_URL = "surrealkv://.surreal-kgrag"
EMBEDDED_SCHEMES = frozenset({"mem", "memory", "surrealkv", "surrealkv+versioned", "file"})
REMOTE_SCHEMES = frozenset({"ws", "wss", "http", "https"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


def url_scheme(url: str) -> str:
    return "memory" if url == "memory" else urlparse(url).scheme.lower()


def is_memory(url: str) -> bool:
    return url_scheme(url) in ("mem", "memory")


class StoreConfig(BaseModel):
    """Where the knowledge graph lives and how to sign in.

    ``from_env()`` reads ``SURREAL_KGRAG_URL``, ``SURREAL_KGRAG_NS``, ``SURREAL_KGRAG_DB``,
    ``SURREAL_KGRAG_USER`` and ``SURREAL_KGRAG_PASS``; explicit arguments win over the environment.
    """

    model_config = ConfigDict(frozen=True)

    url: str = Field(DEFAULT_URL, description="mem://, surrealkv://path, ws(s)://host:port or http(s)://host:port")
    namespace: str = "kgrag"
    database: str = "kgrag"
    username: str | None = Field(None, description="root (system) user; with `access`, ignored")
    password: SecretStr | None = None
    access: str | None = Field(None, description="name of a DEFINE ACCESS ... TYPE RECORD to sign in as a record user")
    access_variables: dict[str, Any] | None = Field(None, description="signin variables for the record access")
    create: bool = Field(
        True, description="open an embedded path that holds no store yet (False: such a path is an error, nothing is created)"
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        scheme = url_scheme(url)
        if scheme not in EMBEDDED_SCHEMES | REMOTE_SCHEMES:
            known = ", ".join(sorted(f"{s}://" for s in EMBEDDED_SCHEMES | REMOTE_SCHEMES))
            raise ValueError(f"unsupported database URL {url!r}: use one of {known}")
        if scheme in EMBEDDED_SCHEMES and not is_memory(url) and not embedded_path(url):
            raise ValueError(
                f"{url!r} names no path: write the store's folder after the scheme, e.g. surrealkv://kg "
                "(relative to the working directory) or surrealkv:///abs/path/kg"
            )
        return url

    @field_validator("namespace", "database")
    @classmethod
    def _check_identifier(cls, value: str) -> str:
        return validate_identifier(value)

    @property
    def embedded(self) -> bool:
        return url_scheme(self.url) in EMBEDDED_SCHEMES

    @classmethod
    def from_env(cls, **overrides: Any) -> StoreConfig:
        env = {
            "url": os.environ.get("SURREAL_KGRAG_URL"),
            "namespace": os.environ.get("SURREAL_KGRAG_NS"),
            "database": os.environ.get("SURREAL_KGRAG_DB"),
            "username": os.environ.get("SURREAL_KGRAG_USER"),
            "password": os.environ.get("SURREAL_KGRAG_PASS"),
        }
        values = {k: v for k, v in env.items() if v}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def embedded_path(url: str) -> str:
    """The folder of an embedded ``surrealkv://`` / ``file://`` URL, as the engine reads it."""
    rest = url.split("://", 1)[1] if "://" in url else ""
    return rest.split("?", 1)[0]


def check_embedded_path(config: StoreConfig) -> None:
    """Refuse to turn a folder that is not a store into one, and with ``create=False`` to create
    one at all: a mistyped path must fail, not leave an empty store behind."""
    if not config.embedded or is_memory(config.url):
        return
    path = Path(embedded_path(config.url))
    if path.is_file():
        raise StoreNotFoundError(f"{config.url}: {path} is a file, not a store folder")
    is_store = (path / "manifest").is_dir()
    if path.is_dir() and not is_store and any(path.iterdir()):
        raise StoreNotFoundError(
            f"{config.url}: {path.resolve()} is a folder that holds no surreal-kgrag store; "
            "use an empty or new folder for a store (e.g. --db surrealkv://kg)"
        )
    if not is_store and not config.create:
        raise StoreNotFoundError(
            f"no store at {config.url} ({path.resolve()} {'is empty' if path.is_dir() else 'does not exist'}). "
            "Check the path, or create the store by ingesting documents into it "
            f"(surreal-kgrag ingest PATH --db {config.url})"
        )


def validate_identifier(value: str) -> str:
    if not _IDENTIFIER.match(value):
        raise ConfigurationError(
            f"invalid name {value!r}: use letters, digits, '_' or '-', starting with a letter or '_' (64 at most)"
        )
    return value


def checked_int(name: str, value: Any, *, minimum: int = 1, maximum: int = 100_000) -> int:
    """An integer that may be rendered into SurrealQL text (KNN k and ef, HNSW settings)."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigurationError(f"{name} must be an integer between {minimum} and {maximum}, got {value!r}")
    return value

