#!/usr/bin/env python3
"""Validate the hand-written sample vault spec (notes.yaml, links.yaml) and the
chat session logs in sample_vault/sessions/*.jsonl.

Usage: python3 tools/sample_vault_spec/validate_spec.py [--quiet]
Exit code 0 when clean, 1 when any error was found. Prints a summary of counts.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NOTES = HERE / "notes.yaml"
LINKS = HERE / "links.yaml"
SESSIONS = ROOT / "sample_vault" / "sessions"

PERIOD = (dt.date(2026, 8, 10), dt.date(2026, 11, 28))
OLD_CUTOFF = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)

FIELDS = {
    "profile": {"name", "aliases", "location", "occupation", "content"},
    "preference": {"topic", "category", "sentiment", "content"},
    "entity": {"name", "kind", "aliases", "content"},
    "event": {"event_name", "date", "participants", "location", "content"},
    "report": {"question", "answer", "source_uris", "conflicts"},
    "report_candidate": {"question", "user_requirement", "status"},
    "source": {"title", "kind", "origin", "content"},
}
MINIMUM = {"profile": 1, "preference": 12, "entity": 18, "event": 28,
           "report": 2, "report_candidate": 3, "source": 2}
EXACT = {"profile": 1, "report": 2, "report_candidate": 3, "source": 2}
SENTIMENTS = {"like", "dislike", "neutral"}
ENTITY_KINDS = {"person", "place", "project", "organisation", "thing", "concept"}
SOURCE_KINDS = {"email", "meeting", "article", "document", "web"}
LINK_TYPES = {"related_to", "belongs_to", "caused_by", "derived_from", "contradicts", "evolved_from"}
LINK_KEYS_REQ = {"from", "to", "type", "weight", "match_text", "description", "t_field", "created_at"}
LINK_KEYS_OPT = {"t_lines", "legacy"}
SESSION_KEYS = {"session", "id", "role", "content", "ts"}
CJK = re.compile(r"[\u4e00-\u9fff]")
REF_RE = re.compile(r"^[a-z][a-z0-9_]*$")
LINES_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")

errors: list[str] = []
warnings: list[str] = []


def err(msg: str) -> None:
    errors.append(msg)


def warn(msg: str) -> None:
    warnings.append(msg)


def parse_ts(value, where: str):
    if not isinstance(value, str):
        err(f"{where}: timestamp must be a quoted string, got {type(value).__name__}")
        return None
    try:
        ts = dt.datetime.fromisoformat(value)
    except ValueError:
        err(f"{where}: not ISO 8601: {value!r}")
        return None
    if ts.tzinfo is None:
        err(f"{where}: timestamp has no UTC offset: {value!r}")
        return None
    return ts


def text_lines(text: str) -> list[str]:
    return text.splitlines()


def parse_line_ranges(spec: str, where: str) -> list[tuple[int, int]] | None:
    if not LINES_RE.match(spec):
        err(f"{where}: bad t_lines {spec!r}")
        return None
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        if lo < 1 or hi < lo:
            err(f"{where}: bad range {part!r}")
            return None
        out.append((lo, hi))
    return out


# ------------------------------------------------------------------ notes
def check_notes(notes) -> dict:
    by_ref: dict[str, dict] = {}
    if not isinstance(notes, list):
        err("notes.yaml: top level must be a list")
        return by_ref
    for i, n in enumerate(notes):
        where = f"note[{i}]"
        if not isinstance(n, dict):
            err(f"{where}: not a mapping")
            continue
        if set(n) != {"ref", "type", "created_at", "updated_at", "fields"}:
            err(f"{where}: keys {sorted(n)}")
        ref = n.get("ref")
        where = f"note {ref}"
        if not isinstance(ref, str) or not REF_RE.match(ref):
            err(f"{where}: ref must be ascii snake_case")
        if ref in by_ref:
            err(f"{where}: duplicate ref")
        by_ref[ref] = n
        typ = n.get("type")
        if typ not in FIELDS:
            err(f"{where}: unknown type {typ!r}")
            continue
        c = parse_ts(n.get("created_at"), f"{where}.created_at")
        u = parse_ts(n.get("updated_at"), f"{where}.updated_at")
        if c and u and u < c:
            err(f"{where}: updated_at < created_at")
        n["_created"], n["_updated"] = c, u
        f = n.get("fields") or {}
        if set(f) != FIELDS[typ]:
            err(f"{where}: fields {sorted(f)} != {sorted(FIELDS[typ])}")
            continue
        for key in ("content",):
            if key in f:
                txt = f[key]
                if not isinstance(txt, str) or not txt.strip():
                    err(f"{where}: empty content")
                    continue
                limit = 15 if typ == "source" else 6
                nl = len(text_lines(txt.rstrip("\n")))
                if not 1 <= nl <= limit:
                    err(f"{where}: content has {nl} lines (1-{limit})")
                if "[[" in txt or re.search(r"\]\(", txt) or re.search(r"^\s*[#*-] ", txt, re.M):
                    err(f"{where}: content looks like markdown / wiki links")
        for key in ("aliases", "participants", "source_uris", "conflicts"):
            if key in f and not (isinstance(f[key], list) and all(isinstance(x, str) for x in f[key])):
                err(f"{where}: {key} must be a list of strings")
        for key, val in f.items():
            if key not in ("aliases", "participants", "source_uris", "conflicts") and not isinstance(val, str):
                err(f"{where}: field {key} must be a string, got {type(val).__name__}")
        if typ == "preference" and f.get("sentiment") not in SENTIMENTS:
            err(f"{where}: bad sentiment {f.get('sentiment')!r}")
        if typ == "entity" and f.get("kind") not in ENTITY_KINDS:
            err(f"{where}: bad entity kind {f.get('kind')!r}")
        if typ == "source" and f.get("kind") not in SOURCE_KINDS:
            err(f"{where}: bad source kind {f.get('kind')!r}")
        if typ == "report_candidate" and f.get("status") not in ("pending", "done"):
            err(f"{where}: bad status {f.get('status')!r}")
        if typ == "event":
            try:
                d = dt.date.fromisoformat(f.get("date", ""))
                if not PERIOD[0] <= d <= PERIOD[1]:
                    err(f"{where}: event date {d} outside period")
            except (TypeError, ValueError):
                err(f"{where}: bad event date {f.get('date')!r}")
        if c and not (dt.datetime(2026, 8, 10, tzinfo=dt.UTC) <= c
                      <= dt.datetime(2026, 11, 29, tzinfo=dt.UTC)):
            err(f"{where}: created_at {c} outside period")

    types = Counter(n.get("type") for n in by_ref.values())
    for t, m in MINIMUM.items():
        if types[t] < m:
            err(f"need >= {m} {t} notes, have {types[t]}")
    for t, m in EXACT.items():
        if types[t] != m:
            err(f"need exactly {m} {t} notes, have {types[t]}")

    # uniqueness rules
    def uniq(typ, key_fn, label):
        seen = Counter(key_fn(n["fields"]) for n in by_ref.values() if n.get("type") == typ and "fields" in n)
        for k, v in seen.items():
            if v > 1:
                err(f"duplicate {label}: {k!r}")
    uniq("preference", lambda f: f.get("topic"), "preference topic")
    uniq("entity", lambda f: f.get("name"), "entity name")
    uniq("event", lambda f: (f.get("event_name"), f.get("date")), "event (name, date)")
    uniq("source", lambda f: f.get("title"), "source title")
    uniq("report", lambda f: f.get("question"), "report question")

    old = [r for r, n in by_ref.items() if n.get("_created") and n["_created"] < OLD_CUTOFF]
    if len(old) < 8:
        err(f"need >= 8 notes created before 2026-09-01, have {len(old)}")
    long_updated = [r for r, n in by_ref.items()
                    if n.get("_created") and n.get("_updated") and (n["_updated"] - n["_created"]).days >= 30]
    if len(long_updated) < 3:
        err(f"need several notes updated long after creation, have {len(long_updated)}")
    chinese = [r for r, n in by_ref.items() if CJK.search(json.dumps(n.get("fields", {}), ensure_ascii=False, default=str))
               and CJK.search(n.get("fields", {}).get("content", "") or "")]
    if len(chinese) < 4:
        err(f"need >= 4 notes written in Chinese, have {len(chinese)}")

    # reports / candidates
    cands = [n for n in by_ref.values() if n.get("type") == "report_candidate"]
    status = Counter(n["fields"].get("status") for n in cands if "fields" in n)
    if status["pending"] != 2 or status["done"] != 1:
        err(f"report candidates need 2 pending + 1 done, have {dict(status)}")
    report_qs = {n["fields"]["question"] for n in by_ref.values() if n.get("type") == "report"}
    for n in cands:
        if n["fields"].get("status") == "done" and n["fields"]["question"] not in report_qs:
            err(f"done candidate {n['ref']} has no report with the same question")
    for n in by_ref.values():
        if n.get("type") == "report":
            for uri in n["fields"].get("source_uris", []):
                if not uri.startswith("ref:") or uri[4:] not in by_ref:
                    err(f"report {n['ref']}: source_uri {uri!r} does not resolve")
    return {"by_ref": by_ref, "types": types, "old": old, "long_updated": long_updated, "chinese": chinese}


# ------------------------------------------------------------------ links
def check_links(links, by_ref) -> dict:
    if not isinstance(links, list):
        err("links.yaml: top level must be a list")
        return {}
    seen = set()
    linked = set()
    types = Counter()
    with_match = 0
    low_weight = 0
    legacy = []
    edges = defaultdict(set)  # type -> {(from, to)}
    for i, l in enumerate(links):
        where = f"link[{i}] {l.get('from')}->{l.get('to')}"
        keys = set(l)
        if not LINK_KEYS_REQ <= keys or keys - LINK_KEYS_REQ - LINK_KEYS_OPT:
            err(f"{where}: keys {sorted(keys)}")
        a, b = l.get("from"), l.get("to")
        if a not in by_ref or b not in by_ref:
            err(f"{where}: unresolved ref")
            continue
        if a == b:
            err(f"{where}: self-link")
        typ = l.get("type")
        if typ not in LINK_TYPES:
            err(f"{where}: bad type {typ!r}")
        types[typ] += 1
        edges[typ].add((a, b))
        linked.update((a, b))
        w = l.get("weight")
        if not isinstance(w, (int, float)) or not 0 <= w <= 1:
            err(f"{where}: bad weight {w!r}")
        elif w < 0.3:
            low_weight += 1
        if not isinstance(l.get("description"), str) or not l["description"].strip():
            err(f"{where}: missing description")
        src_fields = by_ref[a].get("fields", {})
        m = l.get("match_text")
        if m is not None:
            with_match += 1
            body = src_fields.get("content")
            if not isinstance(body, str):
                err(f"{where}: from note has no content field, match_text must be null")
            elif not isinstance(m, str) or not m or m not in body:
                err(f"{where}: match_text {m!r} not in from note content")
        tf = l.get("t_field")
        target_text = by_ref[b].get("fields", {}).get(tf)
        if not isinstance(target_text, str):
            err(f"{where}: t_field {tf!r} is not a text field of {b}")
            target_text = ""
        tl = l.get("t_lines")
        if tl is not None:
            ranges = parse_line_ranges(str(tl), where)
            n_lines = len(text_lines(target_text.rstrip("\n")))
            for _lo, hi in ranges or []:
                if hi > n_lines:
                    err(f"{where}: t_lines {tl} beyond {n_lines} lines of {b}.{tf}")
        key = (a, b, tf, tl)
        if key in seen:
            err(f"{where}: duplicate (from, to, t_field, t_lines)")
        seen.add(key)
        ts = parse_ts(l.get("created_at"), f"{where}.created_at")
        ca, cb = by_ref[a].get("_created"), by_ref[b].get("_created")
        if ts and ca and cb and ts < max(ca, cb):
            err(f"{where}: created_at {ts} earlier than a linked note's created_at")
        if l.get("legacy") is not None:
            if l["legacy"] is not True:
                err(f"{where}: legacy must be true when present")
            else:
                legacy.append(l)

    if set(types) != LINK_TYPES:
        err(f"link types missing: {sorted(LINK_TYPES - set(types))}")
    if len(links) < 95:
        err(f"need >= 95 links, have {len(links)}")
    contradict_pairs = {frozenset(p) for p in edges["contradicts"]}
    if len(contradict_pairs) < 4:
        err(f"need >= 4 contradicts pairs, have {len(contradict_pairs)}")
    if low_weight == 0:
        err("no link with weight below 0.3")

    # evolved_from chains: maximal paths following newer -> older
    evo = defaultdict(list)
    for a, b in edges["evolved_from"]:
        evo[a].append(b)
    targets = {b for _, b in edges["evolved_from"]}

    def longest(node, seen_nodes):
        best = [node]
        for nxt in evo.get(node, []):
            if nxt in seen_nodes:
                err(f"evolved_from cycle at {nxt}")
                continue
            cand = [node] + longest(nxt, seen_nodes | {nxt})
            if len(cand) > len(best):
                best = cand
        return best
    chains = [longest(h, {h}) for h in evo if h not in targets]
    long_chains = [c for c in chains if len(c) - 1 >= 2]
    if len(long_chains) < 2:
        err(f"need >= 2 evolved_from chains of length >= 2, have {len(long_chains)}")

    # reports derive from each of their sources
    for r, n in by_ref.items():
        if n.get("type") == "report":
            for uri in n["fields"]["source_uris"]:
                if (r, uri[4:]) not in edges["derived_from"]:
                    err(f"report {r}: no derived_from link to {uri}")

    orphans = sorted(set(by_ref) - linked)
    if len(orphans) > 2:
        err(f"too many orphan notes: {orphans}")
    if len(legacy) != 1:
        err(f"need exactly one legacy link, have {len(legacy)}")
    elif legacy[0]["type"] != "related_to" or legacy[0]["weight"] != 1.0:
        err("legacy link must be related_to with weight 1.0")
    ratio = with_match / len(links) if links else 0
    if not 0.5 <= ratio <= 0.75:
        warn(f"match_text ratio {ratio:.0%} is not about 60%")
    return {"types": types, "contradicts": sorted(tuple(sorted(p)) for p in contradict_pairs),
            "chains": long_chains, "ratio": ratio, "orphans": orphans, "low_weight": low_weight}


# ------------------------------------------------------------------ sessions
def check_sessions() -> dict:
    files = sorted(SESSIONS.glob("*.jsonl"))
    if len(files) < 3:
        err(f"need >= 3 session files, have {len(files)}")
    total_turns = 0
    per_file = {}
    all_ids = set()
    for path in files:
        stem = path.stem
        if not re.match(r"^\d{4}-\d{2}-\d{2}-[a-z0-9-]+$", stem):
            err(f"{path.name}: file name should look like 2026-09-03-morning-planning.jsonl")
        prev_ts = None
        prev_num = 0
        roles = []
        for ln, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.name}:{ln}"
            if not raw.strip():
                err(f"{where}: blank line")
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                err(f"{where}: invalid JSON ({e})")
                continue
            if set(obj) != SESSION_KEYS:
                err(f"{where}: keys {sorted(obj)}")
                continue
            if obj["session"] != stem:
                err(f"{where}: session {obj['session']!r} != file stem")
            m = re.match(rf"^{re.escape(stem)}-(\d{{3}})$", obj["id"])
            if not m:
                err(f"{where}: id {obj['id']!r} should be <session>-<nnn>")
            else:
                num = int(m.group(1))
                if num <= prev_num:
                    err(f"{where}: id not increasing")
                prev_num = num
            if obj["id"] in all_ids:
                err(f"{where}: duplicate id")
            all_ids.add(obj["id"])
            if obj["role"] not in ("user", "assistant"):
                err(f"{where}: bad role")
            roles.append(obj["role"])
            if not isinstance(obj["content"], str) or not obj["content"].strip():
                err(f"{where}: empty content")
            ts = parse_ts(obj["ts"], where)
            if ts and prev_ts and ts <= prev_ts:
                err(f"{where}: ts not increasing")
            prev_ts = ts or prev_ts
        turns = 0
        for i in range(0, len(roles) - 1, 2):
            if roles[i] == "user" and roles[i + 1] == "assistant":
                turns += 1
            else:
                err(f"{path.name}: roles must alternate user/assistant (message {i + 1})")
                break
        if len(roles) % 2:
            err(f"{path.name}: odd number of messages")
        per_file[path.name] = turns
        total_turns += turns
    if total_turns < 32:
        err(f"need >= 32 turns across sessions, have {total_turns}")
    return {"files": per_file, "turns": total_turns}


def main() -> int:
    quiet = "--quiet" in sys.argv
    try:
        notes = yaml.safe_load(NOTES.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        print(f"notes.yaml does not parse: {e}")
        return 1
    try:
        links = yaml.safe_load(LINKS.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        print(f"links.yaml does not parse: {e}")
        return 1
    ns = check_notes(notes)
    ls = check_links(links, ns.get("by_ref", {})) if ns else {}
    ss = check_sessions()

    if not quiet:
        print("notes per type:", dict(sorted(ns["types"].items())), "total", sum(ns["types"].values()))
        print("created before 2026-09-01:", len(ns["old"]), "| updated >= 30 days after creation:",
              len(ns["long_updated"]), "| notes with Chinese content:", len(ns["chinese"]))
        if ls:
            print("links per type:", dict(sorted(ls["types"].items())), "total", sum(ls["types"].values()))
            print(f"match_text ratio: {ls['ratio']:.0%} | weight < 0.3: {ls['low_weight']} | orphans: {ls['orphans']}")
            print("contradicts pairs:", len(ls["contradicts"]))
            for p in ls["contradicts"]:
                print("   ", " <-> ".join(p))
            print("evolved_from chains (length >= 2):", len(ls["chains"]))
            for c in ls["chains"]:
                print("   ", " -> ".join(c))
        print("sessions:", ss["files"], "total turns", ss["turns"])
    for w in warnings:
        print("WARNING:", w)
    for e in errors:
        print("ERROR:", e)
    print("OK" if not errors else f"{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
