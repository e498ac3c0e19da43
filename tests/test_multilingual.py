"""The bundled multilingual embedding model: it loads
offline from the package folder, is chosen by `embedding.model: multilingual`, the switch
rebuilds the note and turn indexes, Chinese questions get vector hits on the sample vault's
Chinese notes and session turns, and the wheel's package data carries it."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import yaml

from engine import Vault
from engine.index import SearchIndex
from engine.index.embed import BUNDLED_MODEL, MULTILINGUAL_MODEL, bundled_model_path, bundled_name, load_embedder, nonzero
from engine.sessions.importer import import_chat, turn_extractor
from engine.sessions.recall import TurnMemory

REPO = Path(__file__).resolve().parent.parent


def use_model(v: Vault, model: str | None) -> Vault:
    cfg = yaml.safe_load((v.root / "memlink.yaml").read_text(encoding="utf-8"))
    if model is None:
        cfg.pop("embedding", None)
    else:
        cfg["embedding"] = {"model": model}
    (v.root / "memlink.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    v.close()
    return Vault.open(v.root)


def test_the_aliases_name_the_bundled_models():
    assert bundled_name("multilingual") == MULTILINGUAL_MODEL
    assert bundled_name("Multilingual ") == MULTILINGUAL_MODEL
    assert bundled_name("english") == BUNDLED_MODEL
    assert bundled_name(MULTILINGUAL_MODEL) == MULTILINGUAL_MODEL
    assert bundled_name("minishlab/potion-base-8M") is None


def test_the_multilingual_model_loads_offline_from_the_package_folder(tmp_path):
    folder = bundled_model_path(MULTILINGUAL_MODEL)
    assert folder.parent == REPO / "engine" / "models"
    assert {"model.safetensors", "tokenizer.json", "config.json", "NOTICE.md"} <= {p.name for p in folder.iterdir()}
    # A fresh process with the hub off and an empty HF cache: nothing may be fetched.
    code = ("from engine.index.embed import load_embedder, nonzero\n"
            "c = load_embedder('multilingual')\n"
            "assert c.notice is None, c.notice\n"
            "v = c.embedder.encode(['外婆听力不好', 'my grandmother is hard of hearing'])\n"
            "print(c.embedder.name, c.embedder.dims, nonzero(v).tolist())\n")
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [MULTILINGUAL_MODEL, "192", "[True,", "True]"]
    assert not (tmp_path / "hf" / "hub").exists()


def test_chinese_and_english_meet_in_one_space():
    model = load_embedder("multilingual").embedder
    zh, en, other = model.encode(["外婆听力不好，要大声说话", "my grandmother is hard of hearing", "the kiln firing schedule"])
    assert nonzero(np.stack([zh, en, other])).all()
    assert float(zh @ en) > float(zh @ other)


def test_wheel_package_data_carries_both_models():
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["engine.models"]
    models = REPO / "engine" / "models"
    for name in (BUNDLED_MODEL, MULTILINGUAL_MODEL):
        for path in (models / name).iterdir():
            rel = path.relative_to(models).as_posix()
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def test_switching_to_multilingual_rebuilds_and_chinese_questions_get_vector_hits(sample):
    SearchIndex.for_vault(sample).sync()
    v = use_model(sample, "multilingual")
    index = SearchIndex.for_vault(v)
    assert index.notice is None and index.embedder.name == MULTILINGUAL_MODEL
    report = index.last_sync
    assert report.rebuilt and "model" in report.reason
    # Chinese notes are in the vector index, and Chinese paraphrases find them by vector alone.
    for uri in ("entities/外婆.md", "events/2026/10/14/妈妈六十大寿.md", "preferences/龙井茶.md"):
        assert index.vectors.cosines(index.embed_query("外婆"), [uri])  # it has a vector
    for question, uri in (("外婆听力不好，说话要大声", "entities/外婆.md"),
                          ("生日宴一共来了几位亲戚", "events/2026/10/14/妈妈六十大寿.md")):
        assert uri in [u for u, _ in index.vector_search(question, 5)], question
    # Back to the default: rebuilt again.
    v = use_model(v, None)
    index = SearchIndex.for_vault(v)
    assert index.embedder.name == BUNDLED_MODEL and index.last_sync.rebuilt


def multilingual_turns(sample, tmp_path):
    """The sample vault on the multilingual model, its sessions imported as turn memory."""
    v = use_model(sample, "multilingual")
    jsonl = tmp_path / "sessions.jsonl"
    jsonl.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((v.root / "sessions").glob("*.jsonl"))),
                     encoding="utf-8")
    import_chat(v, jsonl, turn_extractor(v))
    return v, TurnMemory(v)


def test_chinese_session_turns_get_vector_hits(sample, tmp_path):
    v, memory = multilingual_turns(sample, tmp_path)
    assert memory.embedder.name == MULTILINGUAL_MODEL
    for question, turn in (("六十岁寿宴在哪家饭店办的", ("2026-10-15-hangzhou-evening-001", "2026-10-15-hangzhou-evening-002")),
                           ("妈妈以前在学校教哪门课", ("2026-08-11-evening-setup-019", "2026-08-11-evening-setup-020"))):
        vec = memory.embedder.encode([question])[0]
        assert turn in [tuple(memory.turns[m]["sources"]) for m, _ in memory.index.vector_hits(vec, 5)], question
    # Every Chinese question of the labelled set (benchmarks/multilingual.py) embeds to a
    # non-zero vector and gets vector hits, over notes and over turns.
    labelled = yaml.safe_load((REPO / "benchmarks" / "multilingual_queries.yaml").read_text(encoding="utf-8"))
    chinese = [q["query"] for q in labelled if q["lang"] == "zh"]
    assert len(chinese) >= 15 and nonzero(memory.embedder.encode(chinese)).all()
    index = SearchIndex.for_vault(v)
    for question in chinese:
        assert index.vector_search(question, 5), question
        assert memory.index.vector_hits(memory.embedder.encode([question])[0], 5), question


def test_the_gates_shift_for_the_multilingual_models_higher_cosines(sample, tmp_path):
    from engine.index.embed import cosine_shift
    from engine.retrieve.search import search
    from engine.sessions.recall import RecallParams

    assert cosine_shift(load_embedder(None).embedder) == 0.0
    assert cosine_shift(load_embedder("multilingual").embedder) == 0.2
    v, memory = multilingual_turns(sample, tmp_path)
    unrelated = "How many moons does Neptune have?"  # benchmarks/unrelated_questions.txt
    assert memory.recall(unrelated, k=5) == []
    assert search(v, unrelated, k=5) == []
    # Without the shift (the default gate's effective 0.7) this model would recall something.
    memory.params = RecallParams(min_evidence=0.5)
    assert memory.recall(unrelated, k=5) != []


def test_the_fast_load_makes_what_model2vecs_constructor_makes():
    """load_static_model skips StaticModel.__init__'s tokenizer copy (engine/index/embed.py,
    _static_model): for both bundled models the object is the constructor's."""
    import json

    from model2vec import __version__ as m2v_version
    from model2vec.model import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from engine.index.embed import FAST_INIT_VERSIONS, load_static_model

    texts = ["外婆听力不好，说话要大声", "The kiln is loaded by Thursday 20:00.", "", "Ünïcödé ÅÄÖ café"]
    for name in (BUNDLED_MODEL, MULTILINGUAL_MODEL):
        folder = bundled_model_path(name)
        ours = load_static_model(folder)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        theirs = StaticModel(vectors=load_file(str(folder / "model.safetensors"))["embeddings"],
                             tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")), config=config,
                             normalize=config.get("normalize", False), max_length=config.get("max_length", 512))
        if m2v_version in FAST_INIT_VERSIONS:
            a, b = vars(ours), vars(theirs)
            assert a.keys() == b.keys()
            for key in a:
                if key == "tokenizer":
                    assert a[key].to_str() == b[key].to_str()
                elif key in ("embedding", "weights", "token_mapping"):
                    assert (a[key] is None) == (b[key] is None) and (a[key] is None or np.array_equal(a[key], b[key]))
                else:
                    assert a[key] == b[key], key
        assert np.array_equal(ours.encode(texts), theirs.encode(texts))


def test_a_date_asked_in_chinese_finds_the_turn_of_that_day(vault, tmp_path):
    """Turn dates are indexed as English words ("2 May 2023"); "5月2号" in a question is
    read as the same date, so the turn of that day ranks first, not the other day's (the
    evidence gate is left out here: the question's other words are in no turn)."""
    from engine.model.text import tokenize
    from engine.sessions.extract import RulesTurnExtractor
    from engine.sessions.recall import RecallParams, TurnMemory

    assert {"2", "may"} <= set(tokenize("5月2号我们聊了什么?"))
    assert {"2", "may", "2023"} <= set(tokenize("2023年5月2日")) and "may" not in tokenize("13月5日")
    events = [("d1", "2023-05-02T09:00:00", "We talked about the kiln schedule.", "Fridays it is."),
              ("d2", "2023-06-07T09:00:00", "We talked about the glaze recipe.", "Satin base it is.")]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(
        json.dumps({"session": "s", "id": f"{sid}-{n}", "role": role, "content": text, "ts": ts}) + "\n"
        for sid, ts, q, a in events for n, (role, text) in enumerate((("user", q), ("assistant", a)))), encoding="utf-8")
    import_chat(vault, path, RulesTurnExtractor())
    params = RecallParams(vector=False, min_evidence=0.0)
    hits = TurnMemory(vault, params=params).recall("5月2号我们聊了什么?", k=1)
    assert hits and hits[0].sources == ["d1-0", "d1-1"]


def test_the_english_model_does_not_embed_a_question_it_cannot_read():
    from engine.index.embed import query_vector, reads

    english, multilingual = load_embedder(None).embedder, load_embedder("multilingual").embedder
    assert reads(english, "Where do I get my flat white?") and reads(english, "Café Čapek, naïve résumé")
    assert reads(english, "What did 周秀兰 say about Sunday calls?")  # mostly Latin letters
    assert not reads(english, "饭桌上舅舅劝Tom喝酒") and not reads(english, "Что я ел вчера?")
    assert reads(multilingual, "饭桌上舅舅劝Tom喝酒")
    assert not nonzero(query_vector(english, "饭桌上舅舅劝Tom喝酒")[None, :])[0]
    assert nonzero(query_vector(multilingual, "饭桌上舅舅劝Tom喝酒")[None, :])[0]


def test_a_chinese_question_to_the_english_model_is_answered_by_its_words(sample, tmp_path):
    """The English model's vectors of Chinese text are noise: a Chinese question gets no
    vector, near-word or meaning route, the gate judges it by its words alone, and the turn
    its words find is recalled (with the noise, this one was silenced)."""
    from engine.retrieve.search import search

    jsonl = tmp_path / "sessions.jsonl"
    jsonl.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((sample.root / "sessions").glob("*.jsonl"))),
                     encoding="utf-8")
    import_chat(sample, jsonl, turn_extractor(sample))
    assert sample.config.embedding.model is None  # (a vault with notes keeps the default)
    memory = TurnMemory(sample)
    hits = memory.recall("饭桌上舅舅劝Tom喝酒", k=5)
    assert ["2026-10-15-hangzhou-evening-009", "2026-10-15-hangzhou-evening-010"] in [h.sources for h in hits]
    assert not [r for h in hits for r in h.routes if not r.startswith(("keyword", "graph"))]
    assert memory.recall("怎么修理汽车发动机", k=5) == []  # none of its words in the history
    found = search(sample, "王俊以前在哪个城市工作", k=5)
    assert found and not [r for h in found for r in h.routes if r.kind == "vector"]
    # One character in common (文 of 语文 for 文件, "file") is no match: no word of it is held.
    assert search(sample, "如何嵌入文件", k=5) == []
    assert search(sample, "... !!", k=5) == [] and search(sample, "？！", k=5) == []  # punctuation asks nothing


def chat_file(tmp_path: Path, lines: list[str], session: str = "s1") -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"session": session, "id": f"m{i}", "role": ("user", "assistant")[i % 2],
                                        "content": text, "ts": "2025-03-02T20:10:00"}, ensure_ascii=False) + "\n"
                            for i, text in enumerate(lines)), encoding="utf-8")
    return path


CHINESE_CHAT = ["我今天终于搬完家了，从福田搬到了南山，离公司走路只要十分钟。", "恭喜搬家！新房子怎么样？",
                "一室一厅，朝南，阳台能晒到太阳。房租一个月五千二。", "阳台可以种点东西。",
                "我打算种薄荷和小番茄，我妈说番茄最好养。", "好主意，薄荷长得特别快。"]


def test_the_first_chat_imported_into_an_empty_vault_chooses_a_model_that_reads_it(vault, tmp_path):
    config = vault.root / "memlink.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "# my note on this vault\n", encoding="utf-8")
    before = config.read_text(encoding="utf-8")
    report = import_chat(vault, chat_file(tmp_path, CHINESE_CHAT), turn_extractor(vault))
    assert report.model == "multilingual" and report.model_set and "set in memlink.yaml" in report.model_line()
    after = config.read_text(encoding="utf-8")
    assert after.startswith(before.rstrip()) and yaml.safe_load(after)["embedding"] == {"model": "multilingual"}
    assert vault.config.embedding.model == "multilingual"
    memory = TurnMemory(vault)
    assert memory.embedder.name == MULTILINGUAL_MODEL
    hits = memory.recall("她阳台上准备种什么", k=2)
    assert hits and any(r.startswith("vector") for r in hits[0].routes)
    reopened = Vault.open(vault.root)
    assert SearchIndex.for_vault(reopened).embedder.name == MULTILINGUAL_MODEL


def test_an_english_chat_a_second_chat_or_a_model_already_named_changes_no_setting(tmp_path):
    for name, setting, chats in (("english", "", [["We moved to Utrecht today.", "Congratulations!"]]),
                                 ("second", "", [["We moved to Utrecht today.", "Congratulations!"], CHINESE_CHAT]),
                                 ("named", "embedding:\n  model: english\n", [CHINESE_CHAT])):
        v = Vault.init(tmp_path / name)
        config = v.root / "memlink.yaml"
        config.write_text(config.read_text(encoding="utf-8") + setting, encoding="utf-8")
        v.close()
        v = Vault.open(tmp_path / name)
        before = config.read_bytes()
        for n, lines in enumerate(chats):
            folder = tmp_path / f"{name}-{n}"
            folder.mkdir()
            report = import_chat(v, chat_file(folder, lines, f"s{n}"), turn_extractor(v))
            assert not report.model_set
            # A Chinese chat into a vault with a history: the import says what would read it.
            assert report.model == ("multilingual" if lines is CHINESE_CHAT and name == "second" else ""), name
            assert ("`embedding: {model: multilingual}`" in report.model_line()) == bool(report.model)
        assert config.read_bytes() == before, name
        v.close()


def test_naming_the_model_keeps_the_settings_file_as_written_or_leaves_it():
    from engine.model.config import with_embedding_model

    assert with_embedding_model("name: v\n# mine\n", "multilingual", "why") == "name: v\n# mine\nembedding:\n  model: multilingual  # why\n"
    assert with_embedding_model("", "multilingual", "why") == "embedding:\n  model: multilingual  # why\n"
    for text in ("name: v\nembedding:\n  model: english\n", "name: v\nembedding:\n", "{name: v}\n", "name: v\n...\n"):
        assert with_embedding_model(text, "multilingual", "why") is None, text


def test_the_first_pages_imported_into_an_empty_vault_choose_the_model_too(vault, sample, tmp_path):
    from engine.extract.batch import ingest_batch

    folder = tmp_path / "笔记"
    folder.mkdir()
    for i, text in enumerate(CHINESE_CHAT):
        (folder / f"第{i}篇.md").write_text(f"# 第{i}篇\n\n{text}\n", encoding="utf-8")
    result = ingest_batch(vault, [folder], wiki=False)
    assert result.model == "multilingual" and result.model_set and "set in memlink.yaml" in result.model_line()
    assert yaml.safe_load((vault.root / "memlink.yaml").read_text(encoding="utf-8"))["embedding"] == {"model": "multilingual"}
    # A vault with notes keeps its model, and the import says which one would read the pages.
    before = (sample.root / "memlink.yaml").read_bytes()
    result = ingest_batch(sample, [folder], wiki=False)
    assert result.model == "multilingual" and not result.model_set and "`embedding: {model: multilingual}`" in result.model_line()
    assert (sample.root / "memlink.yaml").read_bytes() == before
    # One file (the app's import screen) says it too.
    from engine.extract.batch import ingest

    one = Vault.init(tmp_path / "one")
    assert "set in memlink.yaml" in ingest(one, folder / "第0篇.md", wiki=False).model_note


def test_a_settings_file_that_cannot_be_written_does_not_stop_the_import(vault, tmp_path, monkeypatch):
    import errno

    import engine.storage.vault as vault_module

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(vault_module, "atomic_write_text", full)
    before = (vault.root / "memlink.yaml").read_bytes()
    report = import_chat(vault, chat_file(tmp_path, CHINESE_CHAT), turn_extractor(vault))
    assert report.turns and report.model == "multilingual" and not report.model_set
    assert "`embedding: {model: multilingual}`" in report.model_line()
    assert (vault.root / "memlink.yaml").read_bytes() == before and vault.config.embedding.model is None


def test_a_change_of_model_leaves_one_vector_snapshot_of_each_index(sample):
    """The indexes rebuilt for another model write new snapshots; the old model's go (at
    100k notes one is over 100 MB)."""
    def snapshots(v: Vault) -> list[str]:
        return sorted(p.name.split("-vectors-")[0] for p in (v.state_dir / "index").glob("*-vectors-*.bin"))

    SearchIndex.for_vault(sample)
    TurnMemory.for_vault(sample).recall("kiln")
    assert snapshots(sample) == ["notes", "turns"]
    switched = use_model(sample, "multilingual")
    assert SearchIndex.for_vault(switched).embedder.name == MULTILINGUAL_MODEL
    TurnMemory.for_vault(switched).recall("kiln")
    assert snapshots(switched) == ["notes", "turns"]
