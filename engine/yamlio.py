"""YAML reading for the whole engine: PyYAML's safe loader, through libyaml when it is
there (about ten times faster; every CLI start reads the vault's memory types)."""

from __future__ import annotations

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str):
    return yaml.load(text, Loader=Loader)
