"""The one sandboxed Jinja2 environment used for every user-editable template.

Memory type YAML can come from the vault (user files), so templates run in Jinja2's
ImmutableSandboxedEnvironment: attribute escapes such as ``''.__class__.__mro__`` raise
SecurityError instead of reaching Python internals. The sandbox bounds no work or memory,
so this one does (docs/DESIGN.md, "Vault format"): one render makes at most MAX_STEPS
loop turns and calls, builds no text or list past MAX_VALUE (checked before ``*``, ``+``
and ``**``, after each ``~``), writes at most MAX_OUTPUT characters, and has none of the
filters and methods that multiply text by an argument (``center``, ``indent``, ``format``…).
Whatever a render raises is a SchemaError naming the template.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, nodes, pass_eval_context
from jinja2.filters import do_join, do_replace
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError, safe_range
from jinja2.visitor import NodeTransformer

from ..errors import SchemaError
from .text import printable

__all__ = ["render_template", "compile_template", "slugify", "SecurityError"]

MAX_STEPS = 250_000  # loop turns and calls of one render
MAX_VALUE = 1 << 24  # characters of one text, items of one list
MAX_OUTPUT = 1 << 25  # characters one render writes
MAX_BITS = 1 << 16  # of a number made by * or **
_GROWING_FILTERS = ("center", "indent", "wordwrap", "format", "batch", "slice", "pprint", "urlize", "xmlattr")
_GROWING_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
_steps: ContextVar[list[int] | None] = ContextVar("template_steps", default=None)  # [left] in this render


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


def _step(n: int = 1) -> None:
    left = _steps.get()
    if left is not None:
        left[0] -= n
        if left[0] < 0:
            raise SecurityError(f"more than {MAX_STEPS:,} loop turns and calls")


def _sized(value: Any) -> Any:
    if isinstance(value, (str, list, tuple)) and len(value) > MAX_VALUE:
        raise SecurityError(f"a value of more than {MAX_VALUE:,} characters or items")
    return value


def _counted(items: Iterable[Any]) -> Iterator[Any]:
    """A loop's items, each a step."""
    for item in items:
        _step()
        yield item


@pass_eval_context
def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if len(str(d)) * len(items) > MAX_VALUE:
        raise SecurityError(f"a value of more than {MAX_VALUE:,} characters")
    return _sized(do_join(eval_ctx, items, d, attribute))


@pass_eval_context
def _replace(eval_ctx: Any, s: str, old: str, new: str, count: int | None = None) -> str:
    if len(str(new)) > len(str(old)) and len(str(s)) + str(s).count(str(old)) * len(str(new)) > MAX_VALUE:
        raise SecurityError(f"a value of more than {MAX_VALUE:,} characters")
    return do_replace(eval_ctx, s, old, new, count)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple)) else 0


class _Bounded(NodeTransformer):
    """Each loop's items counted, each ``~`` checked for size."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "_counted", [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(node, "_sized", [], [], None, None, lineno=node.lineno)


class _Environment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        return _Bounded().visit(super()._parse(source, name, filename))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if _size(seq) and isinstance(n, int) and _size(seq) * n > MAX_VALUE:
                    raise SecurityError(f"a value of more than {MAX_VALUE:,} characters or items")
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_BITS:
                raise SecurityError("a number too large")
        elif operator == "+" and _size(left) + _size(right) > MAX_VALUE:
            raise SecurityError(f"a value of more than {MAX_VALUE:,} characters or items")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and \
                abs(right) * max(left.bit_length(), 1) > MAX_BITS:
            raise SecurityError("a number too large")
        elif operator == "%" and isinstance(left, str):
            raise SecurityError("text formatting with % is not available in templates")
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Any:
        """``str.format`` and ``format_map``: a field's width can be any number."""
        if getattr(value, "__name__", None) in ("format", "format_map") and isinstance(getattr(value, "__self__", None), str):
            def refused(*_args: Any, **_kwargs: Any) -> str:
                raise SecurityError(f"str.{value.__name__} is not available in templates")
            return refused
        return None

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (as the sandbox's)
        _step()
        if getattr(__obj, "__name__", None) in _GROWING_METHODS and isinstance(getattr(__obj, "__self__", None), str):
            raise SecurityError(f"str.{__obj.__name__} is not available in templates")
        return _sized(super().call(__context, __obj, *args, **kwargs))


def _range(*args: int) -> range:
    """``range`` as the sandbox allows it, its numbers charged as steps when it is made."""
    numbers = safe_range(*args)
    _step(len(numbers))
    return numbers


@lru_cache(maxsize=1)
def _env() -> ImmutableSandboxedEnvironment:
    env = _Environment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    for name in _GROWING_FILTERS:
        del env.filters[name]
    del env.globals["lipsum"]
    env.globals["range"] = _range
    env.filters["join"] = _join
    env.filters["replace"] = _replace
    env.filters["_counted"] = _counted
    env.filters["_sized"] = _sized
    env.filters["slug"] = slugify
    env.filters["filename"] = _filename
    env.filters["relative_path"] = _relative_path
    return env


@lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    try:
        return _env().from_string(source)
    except TemplateError as exc:
        raise SchemaError(f"template does not compile: {exc}") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # a template nested past what the compiler can take
        raise SchemaError(f"template does not compile: {type(exc).__name__}") from None


def render_template(source: str, context: dict, what: str = "template") -> str:
    """``source`` rendered with ``context``, within the bounds above; ``what`` names the
    template (and its file) in the SchemaError that anything going wrong becomes."""
    steps = _steps.set([MAX_STEPS])
    try:
        parts, written = [], 0
        for part in compile_template(source).generate(**context):
            written += len(part)
            if written > MAX_OUTPUT:
                raise SecurityError(f"more than {MAX_OUTPUT:,} characters written")
            parts.append(part)
        return "".join(parts)
    except SchemaError:
        raise
    except SecurityError as exc:
        raise SchemaError(f"{what} tried an unsafe operation: {_first_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 (a user's template: whatever it raises is its error, not a traceback)
        raise SchemaError(f"{what} failed to render: {_first_line(exc) or type(exc).__name__}") from None
    finally:
        _steps.reset(steps)


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return printable(text.splitlines()[0][:300] if text else "")
