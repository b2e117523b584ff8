"""The binary example cache (``lomtree_cli/cache.py``): round trip, validity key, damage."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lomtree_cli.batch import ExampleBatch
from lomtree_cli.cache import MAGIC, CacheError, ExampleCache, describe
from lomtree_cli.config import InputConfig
from lomtree_cli.errors import ConfigError, InputError
from lomtree_cli.parsing import iter_batches

HYP = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])

TEXT = (
    "1 'ex1 |a x:1.5 y |b z\n"
    "2 2.0 |a x y:-3\n"
    "\n"
    "3 'tâg |b w\n"
    "|a unlabeled\n"
    "2 |a x\n"
)


def write_lines(path, n, seed=0, bad_every=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            if bad_every and i % bad_every == bad_every - 1:
                f.write("notalabel |a x\n")
                continue
            tag = f"'t{i}" if i % 7 == 0 else ""
            f.write(f"{rng.integers(1, 4)} {tag}|a f{rng.integers(0, 50)} g:{rng.normal():.3f} |b h{i % 13}\n")
    return str(path)


def same_batch(a: ExampleBatch, b: ExampleBatch):
    for name in ("labels", "weights", "indptr", "indices", "values", "line_numbers"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name
    assert a.source == b.source
    assert a.tags == b.tags
    assert [e.message() for e in a.skipped] == [e.message() for e in b.skipped]
    assert [(e.reason, e.column) for e in a.skipped] == [(e.reason, e.column) for e in b.skipped]


def build(path, cfg, paths, **kw):
    """Open the cache; if not ready, fill it from the parser. Returns (cache, parsed batches)."""
    cache = ExampleCache.open(str(path), cfg, paths, err=kw.pop("err", None))
    batches = list(iter_batches(paths, cfg, chunk_bytes=kw.pop("chunk_bytes", 1 << 20)))
    if not cache.ready:
        w = cache.writer()
        for b in batches:
            w.add(b)
        w.close()
    return cache, batches


def test_round_trip_tags_sources_lines(tmp_path):
    f1 = tmp_path / "a.vw"
    f1.write_text(TEXT, encoding="utf-8")
    f2 = write_lines(tmp_path / "b.vw", 300)
    cfg = InputConfig(bits=12)
    cache, parsed = build(tmp_path / "c.cache", cfg, [str(f1), f2], chunk_bytes=512)
    assert cache.ready and len(parsed) > 5
    got = list(cache.read())
    assert len(got) == len(parsed)
    for a, b in zip(parsed, got):
        same_batch(a, b)
        assert b.labels.flags.writeable and b.indices.flags.aligned
    assert got[0].tags[:2] == ["ex1", None] and "tâg" in got[0].tags
    assert {b.source for b in got} == {str(f1), f2}
    # a second reading gives the same again; a second open reuses it
    for a, b in zip(parsed, cache.read()):
        same_batch(a, b)
    err = io.StringIO()
    again = ExampleCache.open(str(tmp_path / "c.cache"), cfg, [str(f1), f2], err=err)
    assert again.ready and again.reused and "reading examples from the cache" in err.getvalue()
    assert describe(str(tmp_path / "c.cache"))["n_examples"] == sum(len(b) for b in parsed)


def test_round_trip_skipped_lines(tmp_path):
    f = write_lines(tmp_path / "bad.vw", 200, bad_every=9)
    cfg = InputConfig(bits=10, skip_invalid=True)
    cache, parsed = build(tmp_path / "c.cache", cfg, [f], chunk_bytes=300)
    assert sum(len(b.skipped) for b in parsed) == 22
    for a, b in zip(parsed, cache.read(), strict=True):
        same_batch(a, b)
        assert all(isinstance(e, InputError) for e in b.skipped)


@HYP
@given(st.lists(st.tuples(st.integers(0, 5), st.lists(st.tuples(st.integers(0, 2**20 - 1),
                                                                   st.floats(-1e3, 1e3, width=32)), max_size=6),
                          st.one_of(st.none(), st.text(max_size=5))), max_size=20))
def test_round_trip_random_batches(tmp_path, rows):
    n = len(rows)
    counts = [len(r[1]) for r in rows]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    feats = [f for r in rows for f in r[1]]
    tags = [r[2] for r in rows]
    batch = ExampleBatch(
        labels=np.array([r[0] for r in rows], np.int64), weights=np.linspace(0, 2, n),
        indptr=indptr, indices=np.array([f[0] for f in feats], np.int64).reshape(-1),
        values=np.array([f[1] for f in feats], np.float32).reshape(-1), line_numbers=np.arange(1, n + 1) * 3,
        source="src", tags=tags if any(t is not None for t in tags) else None)
    path = tmp_path / "h.cache"
    if path.exists():
        path.unlink()
    cache = ExampleCache.open(str(path), InputConfig(bits=20), ["x.vw"])
    w = cache.writer()
    w.add(batch)
    w.add(ExampleBatch.empty("other"))
    w.close()
    got = list(cache.read())
    same_batch(batch, got[0])
    same_batch(ExampleBatch.empty("other"), got[1])


def test_invalidated_by_options_and_input_change(tmp_path):
    f = write_lines(tmp_path / "d.vw", 100)
    p = tmp_path / "c.cache"
    build(p, InputConfig(bits=12), [f])
    for cfg, what in [(InputConfig(bits=13), "bits 12 -> 13"), (InputConfig(bits=12, hash_seed=5), "hash-seed 0 -> 5"),
                      (InputConfig(bits=12, noconstant=True), "noconstant False -> True"),
                      (InputConfig(bits=12, skip_invalid=True), "skip-invalid")]:
        err = io.StringIO()
        c = ExampleCache.open(str(p), cfg, [f], err=err)
        assert not c.ready and what in err.getvalue() and "rebuilt" in err.getvalue()
    err = io.StringIO()
    assert ExampleCache.open(str(p), InputConfig(bits=12), [f], err=err).ready
    # other input list
    g = write_lines(tmp_path / "e.vw", 10)
    c = ExampleCache.open(str(p), InputConfig(bits=12), [f, g], err=err)
    assert not c.ready and "input files differ" in err.getvalue()
    # same name, changed content (size and mtime)
    write_lines(tmp_path / "d.vw", 101, seed=3)
    err = io.StringIO()
    c = ExampleCache.open(str(p), InputConfig(bits=12), [f], err=err)
    assert not c.ready and "input changed" in err.getvalue()
    # rebuilding gives the new content
    c, parsed = build(p, InputConfig(bits=12), [f])
    assert sum(len(b) for b in c.read()) == 101


def test_same_size_touched_file_is_stale(tmp_path):
    f = write_lines(tmp_path / "d.vw", 50)
    p = tmp_path / "c.cache"
    build(p, InputConfig(), [f])
    st_ = os.stat(f)
    os.utime(f, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    assert not ExampleCache.open(str(p), InputConfig(), [f]).ready


def test_stdin_is_always_rebuilt(tmp_path):
    p = tmp_path / "s.cache"
    c = ExampleCache.open(str(p), InputConfig(), ["-"])
    w = c.writer()
    w.add(ExampleBatch.empty())
    w.close()
    assert c.ready
    err = io.StringIO()
    assert not ExampleCache.open(str(p), InputConfig(), ["-"], err=err).ready
    assert "standard input" in err.getvalue()


@pytest.mark.parametrize("damage", ["truncate_end", "truncate_half", "flip_block", "flip_footer", "empty",
                                    "append"])
def test_damaged_cache_is_rebuilt(tmp_path, damage):
    f = write_lines(tmp_path / "d.vw", 400)
    p = tmp_path / "c.cache"
    cfg = InputConfig(bits=12)
    _, parsed = build(p, cfg, [f], chunk_bytes=2000)
    data = bytearray(p.read_bytes())
    if damage == "truncate_end":
        data = data[:-1]
    elif damage == "truncate_half":
        data = data[: len(data) // 2]
    elif damage == "flip_block":
        data[len(data) // 3] ^= 0x10
    elif damage == "flip_footer":
        data[-60] ^= 0x01
    elif damage == "empty":
        data = bytearray()
    elif damage == "append":
        data += b"\0" * 8
    p.write_bytes(bytes(data))
    err = io.StringIO()
    c = ExampleCache.open(str(p), cfg, [f], err=err)
    assert not c.ready
    if damage != "empty":
        assert "unusable" in err.getvalue() and "rebuilding" in err.getvalue()
    w = c.writer()
    for b in parsed:
        w.add(b)
    w.close()
    for a, b in zip(parsed, c.read(), strict=True):
        same_batch(a, b)


def test_corruption_during_run_is_an_error(tmp_path):
    f = write_lines(tmp_path / "d.vw", 400)
    p = tmp_path / "c.cache"
    cache, _ = build(p, InputConfig(), [f], chunk_bytes=2000)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="unreadable during the run.*checksum"):
        list(cache.read())
    p.write_bytes(bytes(data[:100]))
    with pytest.raises(CacheError, match="unreadable"):
        list(cache.read())


def test_foreign_file_is_not_overwritten(tmp_path):
    f = write_lines(tmp_path / "d.vw", 10)
    p = tmp_path / "precious.txt"
    p.write_text("do not overwrite me\n")
    with pytest.raises(ConfigError, match="not a lomtree example cache"):
        ExampleCache.open(str(p), InputConfig(), [f])
    with pytest.raises(ConfigError, match="also an input"):
        ExampleCache.open(f, InputConfig(), [f])
    with pytest.raises(ConfigError, match="also the model"):
        ExampleCache.open(str(tmp_path / "m"), InputConfig(), [f], model_path=str(tmp_path / "m"))
    assert p.read_text() == "do not overwrite me\n"
    assert MAGIC.startswith(b"LTCACHE")


def test_paths_temp_and_unfinished_writer(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    f = write_lines(tmp_path / "d.vw", 30)
    c = ExampleCache.open(None, InputConfig(), [f])
    assert c.temporary and os.path.dirname(c.path) == str(tmp_path / "tmp")
    w = c.writer()
    for b in iter_batches([f], InputConfig()):
        w.add(b)
    w.close()
    assert c.ready
    c.close()
    assert os.listdir(tmp_path / "tmp") == []
    # -c without a path: next to the model
    c = ExampleCache.open("", InputConfig(), [f], model_path=str(tmp_path / "m.lt"))
    assert c.path == str(tmp_path / "m.lt.cache") and not c.temporary
    # an unfinished writer leaves nothing behind, and does not replace the old cache
    w = c.writer()
    w.add(next(iter_batches([f], InputConfig())))
    c.close()
    assert not os.path.exists(c.path)
    assert [x for x in os.listdir(tmp_path) if "writing" in x] == []
