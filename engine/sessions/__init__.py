"""Chat sessions as memory (docs/DESIGN.md, "Session logs and events" and "Turn memory"): append-only logs, turn projection, one structured
extraction per completed turn, stable-id storage, and dual-route recall."""
