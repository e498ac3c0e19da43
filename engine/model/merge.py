"""Field merge operations ("MergeOp"; a note's fields: docs/DESIGN.md, "Vault format"): patch, sum, immutable.

- patch: replace the value; for text, a ``{"search": s, "replace": r}`` edit (or a list of
  them) changes just that passage. The search text must occur exactly once.
- sum: add numbers; union lists (order kept, duplicates dropped).
- immutable: may be set once; a different value later is rejected.
"""

from __future__ import annotations

from typing import Any

from ..errors import MergeError
from .schema import FieldType, MemoryField, MemoryTypeSchema, MergeOp, coerce_value


def is_edit(value: Any) -> bool:
    if isinstance(value, dict):
        return set(value) == {"search", "replace"}
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and set(v) == {"search", "replace"} for v in value)


def _apply_edits(current: Any, edits: Any, where: str) -> str:
    if not isinstance(current, str):
        raise MergeError(f"{where}: a search/replace edit needs existing text")
    text = current
    for edit in edits if isinstance(edits, list) else [edits]:
        search, replace = edit["search"], edit["replace"]
        if not isinstance(search, str) or not isinstance(replace, str) or not search:
            raise MergeError(f"{where}: search and replace must be text, search not empty")
        count = text.count(search)
        if count == 0:
            raise MergeError(f"{where}: search text not found: {search[:60]!r}")
        if count > 1:
            raise MergeError(f"{where}: search text is ambiguous ({count} matches): {search[:60]!r}")
        text = text.replace(search, replace, 1)
    return text


def merge_value(field: MemoryField, current: Any, patch: Any, type_name: str = "") -> Any:
    where = f"{type_name}.{field.name}" if type_name else field.name
    op = field.merge_op
    if op is MergeOp.PATCH:
        if is_edit(patch):
            if field.field_type is not FieldType.STRING:
                raise MergeError(f"{where}: search/replace edits only apply to text fields")
            return _apply_edits(current, patch, where)
        return coerce_value(field, patch, type_name)
    patch = coerce_value(field, patch, type_name)
    if op is MergeOp.IMMUTABLE:
        if current is not None and patch is not None and current != patch:
            raise MergeError(f"{where} is immutable: cannot change {current!r} to {patch!r}")
        return current if current is not None else patch
    # SUM
    if patch is None:
        return current
    if current is None:
        return patch
    if field.field_type is FieldType.LIST:
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    return current + patch


def merge_fields(schema: MemoryTypeSchema, current: dict[str, Any] | None, patch: dict[str, Any]) -> dict[str, Any]:
    """Merge ``patch`` into ``current`` field by field, per each field's merge_op."""
    if not isinstance(patch, dict):
        raise MergeError(f"{schema.memory_type}: fields must be a mapping")
    result = dict(current or {})
    for name, value in patch.items():
        if name not in schema.field_names:
            raise MergeError(
                f"{schema.memory_type}: unknown field {name!r} (known: {', '.join(schema.field_names)})"
            )
        field = schema.field(name)
        merged = merge_value(field, result.get(name), value, schema.memory_type)
        if merged is None:
            result.pop(name, None)
        else:
            result[name] = merged
    return result
