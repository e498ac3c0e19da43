"""Keys typed faster than the app takes them. A terminal hands the app what is typed fast
or pasted all at once; the app passes each key to the focused field, which takes it in
its own turn, while a key bound with priority (ctrl+s, tab) acts at once. Such a key
waits here before it reads a field, so it reads what the person typed just before it."""

from __future__ import annotations

import asyncio

from textual.widget import Widget


async def keys_taken(*fields: Widget) -> None:
    """Return once every one of ``fields`` has taken the keys already passed to it."""
    waits = []
    for field in fields:
        taken = asyncio.Event()
        if field.call_later(taken.set):  # (False: the field is gone, nothing to wait for)
            waits.append(taken.wait())
    await asyncio.gather(*waits)
