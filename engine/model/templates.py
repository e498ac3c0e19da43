"""The one sandboxed Jinja2 environment used for every user-editable template.

Memory type YAML can come from the vault (user files), so templates run in Jinja2's
ImmutableSandboxedEnvironment: attribute escapes such as ``''.__class__.__mro__`` raise
SecurityError instead of reaching Python internals.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import PurePosixPath

from jinja2 import StrictUndefined, Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from ..errors import SchemaError
from .text import printable

__all__ = ["render_template", "compile_template", "slugify", "SecurityError"]


def slugify(value: object, max_len: int = 80) -> str:
    """Filesystem-safe slug; keeps letters of any script (CJK stays CJK). Escape sequences
    go first, whole (``printable``): their letters and digits are not the title's."""
    text = unicodedata.normalize("NFKC", printable(value)).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    text = re.sub(r"[\s_-]+", "-", text).strip("-")
    return text[:max_len].rstrip("-") or "untitled"


def _filename(uri: object) -> str:
    return PurePosixPath(str(uri)).stem


def _relative_path(uri: object) -> str:
    return str(uri)


@lru_cache(maxsize=1)
def _env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["slug"] = slugify
    env.filters["filename"] = _filename
    env.filters["relative_path"] = _relative_path
    return env


@lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    try:
        return _env().from_string(source)
    except TemplateError as exc:
        raise SchemaError(f"template does not compile: {exc}") from exc


def render_template(source: str, context: dict, what: str = "template") -> str:
    try:
        return compile_template(source).render(**context)
    except SecurityError as exc:
        raise SchemaError(f"{what} tried an unsafe operation: {exc}") from exc
    except TemplateError as exc:
        raise SchemaError(f"{what} failed to render: {exc}") from exc
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise SchemaError(f"{what} failed to render: {exc}") from exc
