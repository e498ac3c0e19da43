"""YAML reading for the whole engine: PyYAML's safe loader, through libyaml when it is
there (about ten times faster; every CLI start reads the vault's memory types)."""

from __future__ import annotations

from typing import Any

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=Loader)
