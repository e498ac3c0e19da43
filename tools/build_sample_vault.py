"""Build sample_vault/ from the hand-written spec in tools/sample_vault_spec/.

The notes and links are written by hand in notes.yaml and links.yaml; this script writes
them through the engine (so bodies come from the memory type templates and every link
lands on both sides), adds the one legacy-format sidecar entry, keeps the hand-written
session logs in sample_vault/sessions/, and runs the vault's consistency checks.

    .venv/bin/python tools/build_sample_vault.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import Vault  # noqa: E402
from engine.model.uris import uri_dir  # noqa: E402

SPEC = REPO / "tools" / "sample_vault_spec"
TARGET = REPO / "sample_vault"


def build(out: Path) -> Vault:
    notes = yaml.safe_load((SPEC / "notes.yaml").read_text(encoding="utf-8"))
    links = yaml.safe_load((SPEC / "links.yaml").read_text(encoding="utf-8"))
    vault = Vault.init(out, name="Sample vault — Lena's memories")
    uris: dict[str, str] = {}
    reports = []
    for spec in notes:
        fields = {k: v.strip() if isinstance(v, str) else v for k, v in spec["fields"].items()}
        if spec["type"] == "report":
            reports.append((spec, fields))
            continue
        note = vault.write_note(spec["type"], fields, created_at=str(spec["created_at"]), updated_at=str(spec["updated_at"]))
        uris[spec["ref"]] = note.uri
    for spec, fields in reports:  # reports cite other notes by path
        fields["source_uris"] = [uris[r.removeprefix("ref:")] for r in fields.get("source_uris", [])]
        note = vault.write_note("report", fields, created_at=str(spec["created_at"]), updated_at=str(spec["updated_at"]))
        uris[spec["ref"]] = note.uri
        # A done research request points at the report that answered it.
        for cand in notes:
            if cand["type"] == "report_candidate" and cand["fields"].get("question") == fields["question"]:
                vault.write_note("report_candidate", {"report_uri": note.uri}, uri=uris[cand["ref"]],
                                 updated_at=str(spec["created_at"]))
    for spec in links:
        src, dst = uris[spec["from"]], uris[spec["to"]]
        if spec.get("legacy"):
            # The old {uris, reason} format, as earlier versions wrote it: one side only.
            path = vault.root / uri_dir(src) / ".relations.json"
            entries = json.loads(path.read_text()) if path.exists() else []
            entries.append({"id": "rel_legacy_1", "from_uri": src, "uris": [dst], "reason": spec["description"],
                            "created_at": str(spec["created_at"])})
            path.write_text(json.dumps(entries, ensure_ascii=False, indent=2) + "\n")
            continue
        vault.link(src, dst, spec["type"], weight=float(spec["weight"]), t_field=spec.get("t_field"),
                   t_line_ranges=spec.get("t_lines"), match_text=spec.get("match_text"),
                   description=spec.get("description", ""), created_at=str(spec["created_at"]))
    return vault


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "vault"
        vault = build(out)
        problems = vault.check()
        for p in problems:
            print(f"{p.severity} {p.code} {p.uri}: {p.message}")
        if problems:
            print("the sample vault does not pass its own checks; nothing written", file=sys.stderr)
            return 1
        sessions = TARGET / "sessions"
        keep = Path(tmp) / "sessions"
        shutil.copytree(sessions, keep)
        shutil.rmtree(TARGET)
        shutil.copytree(out, TARGET, ignore=shutil.ignore_patterns(".memlink"))
        shutil.rmtree(TARGET / "sessions")
        shutil.copytree(keep, TARGET / "sessions")
        print(f"sample vault: {len(vault.catalog.all())} notes, {sum(1 for _ in vault.all_links())} links")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
