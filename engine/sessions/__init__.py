"""Chat sessions as memory (seed 002): append-only logs, turn projection, one structured
extraction per completed turn, stable-id storage, and dual-route recall."""
