"""The user's own settings (not the vault's): the theme, and the LLM provider/model
chosen in the app. One small YAML file in the user's config folder, written atomically.
A malformed file is reported and left alone — memlink never overwrites it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from platformdirs import user_config_path
from pydantic import BaseModel, ConfigDict

from engine.model.files import read_settings
from engine.model.yamlio import safe_load
from engine.storage.atomic import atomic_write_text


def config_dir() -> Path:
    env = os.environ.get("MEMLINK_CONFIG_HOME")
    return Path(env).expanduser() if env else user_config_path("memlink", appauthor=False)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    theme: str | None = None
    llm_provider: Literal["auto", "ollama", "rules"] | None = None
    llm_model: str | None = None


class SettingsFile:
    """Load once; ``update`` re-reads the file and changes only the keys it is given (so
    edits made by hand meanwhile survive), and never touches a file it cannot read."""

    def __init__(self, path: Path | None = None):
        self.path = path or config_dir() / "settings.yaml"
        self.error: str | None = None
        self.settings = self._read()

    def _read(self) -> Settings:
        try:
            raw = safe_load(read_settings(self.path))
            settings = Settings.model_validate(raw or {})
        except FileNotFoundError:
            settings = Settings()
        except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: bad UTF-8, bad keys
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.error = f"{self.path}: unreadable settings ({first}); using defaults and not saving"
            return Settings()
        self.error = None
        return settings

    def update(self, **changes) -> bool:
        """Apply and save; False (and ``error`` says why) when nothing could be written."""
        on_disk = self._read()  # a fixed file is saved to again; a broken one never
        if self.error:
            self.settings = self.settings.model_copy(update=changes)
            return False
        self.settings = on_disk.model_copy(update=changes)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, yaml.safe_dump(self.settings.model_dump(exclude_none=True),
                                                        sort_keys=True, allow_unicode=True))
        except OSError as exc:
            self.error = f"{self.path}: settings not saved ({exc})"
            return False
        return True
