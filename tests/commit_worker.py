"""`memlink commit` for the kill tests, started only once what it needs is imported: it
prints "ready" first, so the parent's random delay falls in the command's own work
rather than in Python's start-up.

Its extractor words a memory differently when the vault already holds one of that name,
as a model may when it sees the same turns again: a turn extracted twice shows as a
second note. What it writes depends only on the vault, so an uninterrupted run and a
killed one run again must end with the same notes.

Usage: python commit_worker.py VAULT SESSION"""

import sys

import engine.extract.batch
import engine.extract.inputs as inputs
import engine.index  # noqa: F401  (imported before "ready")
from engine.extract.rules import RulesExtractor
from memlink_tui.cli import main


class Rewording(RulesExtractor):
    def __init__(self, vault):
        self.vault = vault

    def extract(self, ctx, schema):
        out = super().extract(ctx, schema)
        for name in schema.model_fields:
            if name == "links":
                continue
            field = self.vault.schema(name).title_field
            titles = [e.title for e in self.vault.catalog.all(name)]
            for item in getattr(out, name):
                title = getattr(item, field, None)
                if item.page_id >= 100 and isinstance(title, str):
                    seen = sum(1 for t in titles if t.startswith(title))
                    if seen:
                        setattr(item, field, f"{title} (take {seen + 1})")
        return out


if __name__ == "__main__":
    real = inputs.choose_extractor
    inputs.choose_extractor = lambda vault, force=None: (Rewording(vault), real(vault, force)[1])
    print("ready", flush=True)
    sys.exit(main(["--vault", sys.argv[1], "commit", sys.argv[2]]))
