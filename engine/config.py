"""`memlink.yaml`: the vault's settings. Unknown keys are errors, so typos surface."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import VaultError

CONFIG_FILE = "memlink.yaml"


class VaultConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "memlink vault"
    lock_timeout: float = Field(30.0, ge=0, description="seconds a writer waits for the vault lock")


def load_config(root: Path) -> VaultConfig:
    path = Path(root) / CONFIG_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise VaultError(f"{root} is not a memlink vault (no {CONFIG_FILE}); create one with `memlink init`") from None
    except yaml.YAMLError as exc:
        raise VaultError(f"{CONFIG_FILE}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise VaultError(f"{CONFIG_FILE}: must be a YAML mapping")
    # The environment may shorten or lengthen the lock wait (e.g. for a cron job).
    if os.environ.get("MEMLINK_LOCK_TIMEOUT"):
        data = {**data, "lock_timeout": os.environ["MEMLINK_LOCK_TIMEOUT"]}
    try:
        return VaultConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise VaultError(f"{CONFIG_FILE}: {loc}: {first['msg']}") from exc


def dump_config(config: VaultConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), allow_unicode=True, sort_keys=False)
