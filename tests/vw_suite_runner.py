"""Vowpal Wabbit's own tests (``tests/vw_suite/tests.json``: the entries of VW's
``test/core.vwtest.json`` whose options lomtree takes) run as typed through ``lomtree train``.

Each test's ``vw_command`` goes to ``lomtree train`` unchanged (split as a shell would), in a
scratch copy of ``tests/vw_suite`` (VW's tests write caches next to their data and models under
``models/``). A test agrees when it exits 0 and

- its ``average loss`` is within ``max(0.02, 15%)`` of VW's reference stderr (the hash differs,
  so the same options learn on other collisions), and
- every prediction file VW stores matches: labels exactly on at least 90% of the lines, numbers
  within the same tolerance on average.

``DIFFERENT`` lists the tests whose loss cannot mean the same, each with its reason: they must
still run as typed (exit 0) and their predictions are not compared numerically.

``python -m tests.vw_suite_runner [ID ...]`` prints each test's verdict and the count.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "vw_suite"

_MULTILABEL_LOSS = "VW's multi-label loss counts the labels predicted wrongly or missed; lomtree's is 1 - P@1"
_PLT_LOSS = "VW's --plt loss sums the logistic losses of the tree nodes trained; lomtree's is 1 - P@1"

#: tests whose average loss cannot mean the same in lomtree: they must still run as typed, and
#: their predictions are compared
DIFFERENT: dict[int, str] = {
    83: _MULTILABEL_LOSS, 350: _MULTILABEL_LOSS, 351: _MULTILABEL_LOSS, 572: _MULTILABEL_LOSS,
    613: _MULTILABEL_LOSS, 614: _MULTILABEL_LOSS,
    215: _PLT_LOSS, 216: _PLT_LOSS, 217: _PLT_LOSS, 430: _PLT_LOSS, 431: _PLT_LOSS, 432: _PLT_LOSS,
    434: _PLT_LOSS, 435: _PLT_LOSS,
    647: "every label of the input is outside --named_labels: VW counts the first example as a mistake and "
         "then its own 'unknown' predictions as right; lomtree reads them as unlabeled (no loss)",
}

_PLT_SGD = ("--plt --sgd: VW gives each tree node its own SGD clock (the node's updates so far), lomtree's "
            "learner one clock per example: the plain rule's rates differ below the root")

#: the tests that do not agree today, each with its reason
CANNOT_AGREE: dict[int, str] = {
    431: _PLT_SGD + " (it reads test 430's model)", 432: _PLT_SGD + " (it reads test 430's model)",
    360: "VW 9 turns to 0-based labels at the first label 0 of the stream (line 3), so its first two lines "
         "are 1-based; lomtree decides for the whole run, from the input files, before it starts",
    541: "--loss_function classic at -b 7: the hash's collisions (15 features in 128 slots) differ from VW's, "
         "and classic's plain step amplifies them: 0.0689 against VW's 0.0489; at -b 18 both give 0.049083",
}


_LOSS = re.compile(r"^average loss = (\S+)( h)?\s*$", re.M)


def tests() -> list[dict]:
    with open(SUITE / "tests.json", encoding="utf-8") as f:
        return json.load(f)


def reference_loss(text: str) -> float | None:
    """VW's ``average loss = X`` (``n.a.``: None; a holdout loss ends in `` h``)."""
    m = _LOSS.findall(text)
    if not m:
        return None
    v = m[-1][0]
    try:
        return float(v)
    except ValueError:
        return None


def close(ours: float | None, ref: float | None) -> bool:
    if ref is None or ours is None:
        return ref is None and ours is None
    return abs(ours - ref) <= max(0.02, 0.15 * abs(ref))


@dataclass
class Outcome:
    id: int
    command: str
    exit_code: int
    stderr: str
    stdout: str
    loss: float | None = None
    ref_loss: float | None = None
    problems: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _numbers(line: str) -> list:
    """A prediction line as a list of tokens: floats where a token is a number, else the text
    (``2:0.62,1:0.80`` -> [1.0, 0.8, 2.0, 0.62]: a set of labels or of ``label:value`` pairs is
    put in label order)."""
    fields = [f for f in re.split(r"[\s,]+", line.strip()) if f]
    if len(fields) > 1 and all(re.fullmatch(r"-?\d+(:\S+)?", f) for f in fields):
        fields.sort(key=lambda f: int(f.split(":")[0]))
    out = []
    for tok in re.split(r"[\s,:]+", " ".join(fields)):
        if not tok:
            continue
        try:
            out.append(float(tok))
        except ValueError:
            out.append(tok)
    return out


def compare_predictions(ours: str, ref: str) -> str | None:
    """None when the prediction texts agree (see the module docstring), else why not."""
    a, b = _lines(ours), _lines(ref)
    if len(b) == 2 * len(a) and all(x == " " for x in b[1::2]):  # VW's multilabel_oaa: a " " line after each
        b = b[0::2]
    if len(a) != len(b):
        return f"{len(a)} prediction lines, VW {len(b)}"
    if not b:
        return None
    same_labels = 0
    diffs, scale = [], []
    for x, y in zip(a, b):
        tx, ty = _numbers(x), _numbers(y)
        if len(tx) != len(ty):
            continue
        nums = [(u, v) for u, v in zip(tx, ty) if isinstance(u, float) and isinstance(v, float)]
        texts = [(u, v) for u, v in zip(tx, ty) if not (isinstance(u, float) and isinstance(v, float))]
        if any(u != v for u, v in texts):
            continue
        if _is_labels(x, y):
            if all(u == v for u, v in nums):
                same_labels += 1
            continue
        same_labels += 1
        for u, v in nums:
            diffs.append(abs(u - v))
            scale.append(abs(v))
    if same_labels < 0.9 * len(b):
        return f"{len(b) - same_labels} of {len(b)} prediction lines differ in form or label"
    if diffs:
        mean_diff = sum(diffs) / len(diffs)
        mean_ref = sum(scale) / len(scale)
        if mean_diff > max(0.02, 0.15 * mean_ref):
            return f"predictions differ by {mean_diff:.4f} on average (VW's mean {mean_ref:.4f})"
    return None


def _lines(text: str) -> list:
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


def _is_labels(x: str, y: str) -> bool:
    """A line of labels (``3``, ``0,1``, ``cat tag``): integers only, no ``:`` or decimal point."""
    return ":" not in y and "." not in y and "." not in x


def run_one(t: dict, workdir: Path) -> Outcome:
    """Run test ``t`` in ``workdir`` (in this process) and check it."""
    from tests.helpers import cli

    args = shlex.split(t["vw_command"])
    old = os.getcwd()
    os.chdir(workdir)
    try:
        stdin = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
        try:
            code, out, err = cli("train", *args)
        finally:
            sys.stdin = stdin
    finally:
        os.chdir(old)
    o = Outcome(t["id"], t["vw_command"], code, err, out)
    if code != 0:
        o.problems.append(f"exit {code}: {err.strip().splitlines()[-1] if err.strip() else ''}")
        return o
    diff = t.get("diff_files", {})
    o.loss = reference_loss(err)
    if "stderr" in diff:
        o.ref_loss = reference_loss((SUITE / diff["stderr"]).read_text(encoding="utf-8"))
    if "stderr" in diff and t["id"] not in DIFFERENT and not close(o.loss, o.ref_loss):
        o.problems.append(f"average loss {o.loss}, VW {o.ref_loss}")
    for name, ref in diff.items():
        if name in ("stderr", "stdout") or not ref.startswith("pred-sets/") and not ref.endswith(".predict"):
            continue
        path = workdir / name
        if not path.exists():
            o.problems.append(f"no {name}")
            continue
        why = compare_predictions(path.read_text(encoding="utf-8", errors="replace"),
                                  (SUITE / ref).read_text(encoding="utf-8"))
        if why:
            o.problems.append(f"{name}: {why}")
    return o


def prepare(workdir: Path) -> None:
    """A scratch copy of the suite's data (VW's tests write caches next to their inputs)."""
    for d in ("train-sets", "test-sets", "pred-sets"):
        shutil.copytree(SUITE / d, workdir / d, dirs_exist_ok=True)
    (workdir / "models").mkdir(exist_ok=True)


def run_all(workdir: Path, ids=None) -> list[Outcome]:
    prepare(workdir)
    out = []
    for t in tests():
        if ids and t["id"] not in ids and not any(t["id"] in _deps(x) for x in ids):
            continue
        out.append(run_one(t, workdir))
    return out


def _deps(i: int) -> set:
    by_id = {t["id"]: t for t in tests()}
    seen, todo = set(), list(by_id[i].get("depends_on", []))
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(by_id[j].get("depends_on", []))
    return seen


def main(argv: list[str]) -> int:
    import tempfile

    ids = {int(a) for a in argv}
    with tempfile.TemporaryDirectory() as d:
        res = run_all(Path(d), ids or None)
    good = 0
    for o in res:
        tag = "ok  " if o.ok else ("xf  " if o.id in CANNOT_AGREE else "FAIL")
        if o.ok and o.id in DIFFERENT:
            tag = "diff"
        good += o.ok
        print(f"{tag} {o.id:4d} loss {o.loss} (VW {o.ref_loss})  {'; '.join(o.problems)}")
        if not o.ok and ids:
            print("    " + o.command)
            print("    " + o.stderr.replace("\n", "\n    ")[-2000:])
    print(f"{good} of {len(res)} VW tests run as typed and agree "
          f"({sum(1 for o in res if o.ok and o.id in DIFFERENT)} of them in the list of different losses)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
