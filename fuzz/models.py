"""Crafted model files: one array or header value changed, the checksums recomputed, so the
change reaches the loader's own checks (``make fuzz``, ``data_scripts.fuzz_campaign --models``).

``read(path)`` -> (header dict, {member: array}); ``write(path, header, arrays)`` writes them as
a model file with fresh checksums; ``mutations(header, arrays, rng)`` yields ``(what, header,
arrays)`` variants: a float array's entry set to NaN/inf/huge/negative, an integer array's entry
set to an extreme or off-by-one value, an array truncated, grown or of another dtype, a header
field given another type or an extreme value.
"""

from __future__ import annotations

import copy
import json
import random

import numpy as np

from lomtree_cli.model_io import _digest

FLOATS = [float("nan"), float("inf"), float("-inf"), 3.4e38, -1e30, 0.0, -1.0]
INTS = [-1, 0, 1, 2**31 - 1, 2**31, -2**63, 2**63 - 1, 10**6]
HEADER_VALUES = [None, True, -1, 0, 2**40, 1e308, "x", "", [], {}, [1, 2], 0.5]


def read(path: str) -> tuple[dict, dict]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    header = json.loads(arrays.pop("header").tobytes().decode("utf-8"))
    return header, arrays


def write(path: str, header: dict, arrays: dict) -> None:
    header = dict(header, checksums={n: _digest(a) for n, a in arrays.items()})
    blob = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, header=blob, **arrays)


def _header_leaves(header: dict):
    """(section, key) of every scalar field of the header's objects (checksums excluded)."""
    for sec, v in header.items():
        if sec == "checksums":
            continue
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(x, (dict, list)):
                    yield sec, k
        elif not isinstance(v, list):
            yield sec, None


def mutation(header: dict, arrays: dict, rng: random.Random):
    """One random variant: ``(what, header, arrays)``."""
    if rng.random() < 0.35:
        leaves = list(_header_leaves(header))
        sec, key = rng.choice(leaves)
        value = rng.choice(HEADER_VALUES)
        h = copy.deepcopy(header)
        if key is None:
            h[sec] = value
        else:
            h[sec][key] = value
        return f"header {sec}{'.' + key if key else ''} = {value!r}", h, arrays
    name = rng.choice(sorted(arrays))
    a = arrays[name]
    out = dict(arrays)
    k = rng.randrange(4)
    if k == 0 and a.size:  # one entry changed
        b = a.copy()
        flat = b.reshape(-1)
        i = rng.randrange(flat.shape[0])
        v = rng.choice(FLOATS) if a.dtype.kind == "f" else rng.choice(INTS)
        try:
            flat[i] = v
        except (OverflowError, ValueError):
            flat[i] = -1
        out[name] = b
        return f"{name}[{i}] = {v!r}", header, out
    if k == 1 and a.dtype.kind == "f" and a.size:  # every entry non-finite
        out[name] = np.full_like(a, rng.choice(FLOATS[:3]))
        return f"{name} all {out[name].reshape(-1)[0]!r}", header, out
    if k == 2 and a.ndim >= 1 and a.shape[0]:  # truncated or grown
        out[name] = a[: rng.randrange(a.shape[0])] if rng.random() < 0.5 else np.concatenate([a, a[:1]])
        return f"{name} shape {a.shape} -> {out[name].shape}", header, out
    new = rng.choice([np.float64, np.float32, np.int32, np.int64, np.uint8])
    out[name] = a.astype(new)
    return f"{name} dtype {a.dtype} -> {np.dtype(new)}", header, out


REDUCTIONS = {"oaa": [], "lomtree": [], "filter": [], "rtree": [], "cpt": [], "table": [], "plt": [],
              "mtree": ["--dim", "4"], "plt-multilabel": ["--multilabel"]}


def _seed_models(tmpdir: str, lomtree: list) -> dict:
    """A small trained model of every reduction: {name: (model path, data path)}."""
    import os
    import subprocess

    lines = [f"{1 + i % 5} |a f{i % 7} g{i % 3} |b h{i % 11}:0.5" for i in range(200)]
    data = os.path.join(tmpdir, "d.vw")
    with open(data, "w") as f:
        f.write("\n".join(lines) + "\n")
    ml = os.path.join(tmpdir, "ml.vw")
    with open(ml, "w") as f:
        f.write("\n".join(f"{1 + i % 5},{1 + (i * 3) % 5} |a f{i % 7}" for i in range(200)) + "\n")
    out = {}
    for name, extra in REDUCTIONS.items():
        red = name.split("-")[0]
        src = ml if "multilabel" in name else data
        path = os.path.join(tmpdir, f"{name}.lt")
        p = subprocess.run(lomtree + ["train", "-r", red, "-k", "5", "-b", "10", src, "-f", path, "--quiet"] + extra,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"seed model {name}: {p.stderr}")
        out[name] = (path, src)
    return out


def verdict(returncode: int, stderr: str) -> str:
    """'clean' (exit 0), 'error' (exit 1 or 2 with one ``error:`` line, no traceback), else what
    went wrong: 'signal N', 'traceback', 'exit N', 'lines'."""
    if returncode < 0:
        return f"signal {-returncode}"
    if "Traceback" in stderr:
        return "traceback"
    if returncode == 0:
        return "clean"
    if returncode not in (1, 2):
        return f"exit {returncode}"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("error: ")]
    return "error" if len(errs) == 1 and lines[-1] == errs[0] else "lines"


def campaign(n: int, seed: int, tmpdir: str, lomtree: list, timeout: float = 60.0, workers: int = 2,
             log=None) -> dict:
    """``n`` crafted models (one change each, checksums recomputed) through ``inspect``,
    ``predict`` and ``train -i``; returns the counts of verdicts per command and the failures."""
    import os
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    seeds = _seed_models(tmpdir, lomtree)
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        name = rng.choice(sorted(seeds))
        path, data = seeds[name]
        header, arrays = read(path)
        what, h, a = mutation(header, arrays, rng)
        crafted = os.path.join(tmpdir, f"c{i}.lt")
        write(crafted, h, a)
        out = os.path.join(tmpdir, f"o{i}.lt")
        for cmd in (["inspect", crafted], ["predict", "-i", crafted, data, "-p", os.devnull],
                    ["train", "-i", crafted, data, "-f", out, "--quiet"]):
            jobs.append((i, name, what, cmd))

    def one(job):
        i, name, what, cmd = job
        try:
            p = subprocess.run(lomtree + cmd, capture_output=True, text=True, timeout=timeout)
            return job, verdict(p.returncode, p.stderr), p.stderr[-400:]
        except subprocess.TimeoutExpired:
            return job, "hang", ""

    counts: dict = {}
    failures = []
    with ThreadPoolExecutor(workers) as pool:
        for (i, name, what, cmd), v, err in pool.map(one, jobs):
            counts.setdefault(cmd[0], {}).setdefault(v, 0)
            counts[cmd[0]][v] += 1
            if v not in ("clean", "error"):
                failures.append({"model": name, "change": what, "command": cmd[0], "verdict": v, "stderr": err})
                if log is not None:
                    log(f"FAIL {name} {what}: {cmd[0]} -> {v}\n{err}")
    return {"models": n, "runs": len(jobs), "verdicts": counts, "failures": failures}
