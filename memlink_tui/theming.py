"""Themes are YAML files: the bundled ones in ``themes/`` and the user's own in
``<config>/themes/``. Each file is validated; a bad file is skipped with a reason."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from textual.color import Color, ColorParseError
from textual.theme import Theme

from engine.model.files import read_settings
from engine.model.yamlio import safe_load

from .settings import config_dir

DEFAULT_THEME = "memlink-dark"


class ThemeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    primary: str
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    dark: bool = True
    ansi: bool = False
    variables: dict[str, str] = Field(default_factory=dict)


def _check_variable(name: str, value: str) -> None:
    """Theme variables are colours (optionally with an alpha like ``35%``, or ``auto`` /
    ``initial``), except the ``*style`` ones, which take Textual's style words."""
    from textual.css.constants import VALID_STYLE_FLAGS

    words = value.split()
    if "style" in name.split("-"):
        if not words or not set(words) <= set(VALID_STYLE_FLAGS):
            raise ValueError(f"variables.{name}: {value!r} is not a text style")
        return
    if words and words[-1].endswith("%") and words[-1][:-1].replace(".", "", 1).isdigit():
        words = words[:-1]
    if len(words) == 1 and words[0] in ("auto", "initial"):
        return
    try:
        Color.parse(" ".join(words))
    except ColorParseError:
        raise ValueError(f"variables.{name}: {value!r} is not a colour") from None


def load_theme(path: Path) -> Theme:
    """One theme file → a Textual theme; ValueError with the file, the field and why."""
    try:
        spec = ThemeFile.model_validate(safe_load(read_settings(path)) or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise ValueError(f"{path.name}: {where}: {first['msg']}") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"{path.name}: {str(exc).strip().splitlines()[0]}") from None
    for field in ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
                  "surface", "panel", "boost"):
        value = getattr(spec, field)
        if value:
            try:
                Color.parse(value)
            except ColorParseError:
                raise ValueError(f"{path.name}: {field}: {value!r} is not a colour") from None
    for name, value in spec.variables.items():
        try:
            _check_variable(name, value)
        except ValueError as exc:
            raise ValueError(f"{path.name}: {exc}") from None
    return Theme(**spec.model_dump())


def theme_files() -> list[Path]:
    bundled = Path(str(resources.files("themes")))
    user = config_dir() / "themes"
    files = sorted(bundled.glob("*.yaml"))
    if user.is_dir():
        files += sorted(user.glob("*.yaml"))
    return files


def load_themes() -> tuple[list[Theme], list[str]]:
    """(themes, problems). A user theme with a bundled theme's name replaces it."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for path in theme_files():
        try:
            theme = load_theme(path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        themes[theme.name] = theme
    return list(themes.values()), problems
