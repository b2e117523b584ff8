"""Coverage-guided fuzzing of the VW and LIBSVM parsers (atheris; ``make fuzz``).

Every input is checked four ways (``check_input``, also used by the random campaign
``data_scripts/fuzz_campaign.py`` and by ``tests/test_fuzz_parsers.py``):

1. strict mode: ``parse_bytes`` returns a batch or raises ``InputError`` whose message is one
   printable line ``source:line: detail``; nothing else may escape (no other exception, no hang);
2. ``--skip-invalid`` mode: the batch equals what the independent pure-Python parser
   (``tests/reference/parser_ref.py``) produces: labels, weights, tags, line numbers, hashed
   indices and float32 values, and the (line, reason) of every skipped line;
3. the strict error is the first bad line of the reference, with the same reason;
4. streaming the same bytes in small chunks (``_iter_stream``, the path of files and stdin)
   gives exactly the whole-buffer result.

The first input byte chooses the format and options (bits, hash seed, noconstant, label offset,
chunk size); the rest is the file content.

Usage::

    python -m fuzz.fuzz_parsers --target vw -atheris_runs=100000 [-max_len=512] [corpus_dir]
    python -m fuzz.fuzz_parsers --target libsvm -atheris_runs=100000
    NUMBA_DISABLE_JIT=1 python -m fuzz.fuzz_parsers --target vw --instrument-kernels ...

``--instrument-kernels`` (only meaningful with ``NUMBA_DISABLE_JIT=1``) also instruments the
parse kernels, so coverage guidance reaches inside the grammar; the default instruments the
Python driver layer only (jitted code is opaque to atheris) and runs the real compiled kernels.
At exit the harness prints ``fuzz-summary: target=... inputs=N parsed=... errors=...``.
"""

from __future__ import annotations

import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BITS_CHOICES = (18, 5, 32, 1)
CHUNKS = (1, 3, 7, 64)


def options_from_byte(b: int, fmt: str) -> dict:
    """Deterministic parser options from one control byte."""
    return {
        "format": fmt,
        "bits": BITS_CHOICES[b & 3],
        "hash_seed": (0, 1, 2**32 - 1, 12345)[(b >> 2) & 3] if fmt == "vw" else 0,
        "noconstant": bool((b >> 4) & 1),
        "label_offset": ((b >> 5) & 1) if fmt == "libsvm" else 0,
        "chunk": CHUNKS[(b >> 6) & 3],
    }


class Stats:
    def __init__(self):
        self.inputs = 0
        self.parsed = 0
        self.errors = 0
        self.examples = 0


STATS = Stats()


def batch_lists(batches):
    """Batches of one source as plain, comparable lists (also used by tests/test_parsing.py)."""
    out = dict(labels=[], weights=[], lines=[], tags=[], feats=[], skipped=[])
    for b in batches:
        out["labels"] += b.labels.tolist()
        out["weights"] += b.weights.tolist()
        out["lines"] += b.line_numbers.tolist()
        out["tags"] += b.tags if b.tags is not None else [None] * len(b)
        ip = b.indptr.tolist()
        idx = b.indices.tolist()
        val = b.values.tolist()
        for i in range(len(b)):
            out["feats"].append((idx[ip[i]:ip[i + 1]], val[ip[i]:ip[i + 1]]))
        out["skipped"] += [(x.line, x.reason, x.column) for x in getattr(b, "skipped", [])]
    return out


def _check_invariants(b):
    import numpy as np

    n = len(b)
    assert b.labels.dtype == np.int64 and b.labels.shape == (n,)
    assert b.weights.dtype == np.float64 and b.weights.shape == (n,)
    assert b.indptr.shape == (n + 1,) and b.indptr[0] == 0 and np.all(np.diff(b.indptr) >= 0)
    assert b.indices.shape == b.values.shape == (b.indptr[-1],)
    assert b.values.dtype == np.float32 and np.all(b.values != 0) and np.all(np.isfinite(b.values))
    assert np.all(b.weights >= 0) and np.all(np.isfinite(b.weights))
    assert np.all((b.labels >= 0) & (b.labels < 2**31))
    assert b.tags is None or len(b.tags) == n


def check_message(msg: str):
    """An error message is one printable line (no control bytes that a terminal would act on)."""
    assert msg and msg.isprintable(), f"error message is not one printable line: {msg!r}"


def check_input(data: bytes, format: str = "vw", bits: int = 18, hash_seed: int = 0,  # noqa: A002
                noconstant: bool = False, label_offset: int = 0, chunk: int = 7, reference: bool = True) -> str:
    """Run every check on one input; returns 'parsed' or 'error' (strict mode); AssertionError on a failure."""
    from lomtree_cli.config import InputConfig
    from lomtree_cli.errors import InputError
    from lomtree_cli.parsing import _iter_stream, parse_bytes

    kw = dict(format=format, bits=bits, hash_seed=hash_seed, noconstant=noconstant, label_offset=label_offset)
    strict = InputConfig(**kw)
    skip = InputConfig(skip_invalid=True, **kw)
    STATS.inputs += 1
    # 1. strict
    try:
        sb = parse_bytes(data, strict, source="f")
        outcome = "parsed"
        _check_invariants(sb)
        strict_err = None
    except InputError as e:
        outcome = "error"
        msg = str(e)
        check_message(msg)
        assert msg.startswith(f"f:{e.line}: "), msg
        assert e.line >= 1 and e.reason, msg
        strict_err = (e.line, e.reason)
    # 2. skip mode vs the reference
    whole = parse_bytes(data, skip, source="f")
    _check_invariants(whole)
    for e in whole.skipped:
        check_message(e.message())
    got = batch_lists([whole])
    if strict_err is None:
        assert not whole.skipped and batch_lists([sb]) == got
    else:
        assert whole.skipped and (whole.skipped[0].line, whole.skipped[0].reason) == strict_err
    if reference:
        from tests.reference.parser_ref import Bad, parse_ref

        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)  # the reference uses int() on digit strings of any length
        try:
            ref = parse_ref(data, fmt=format, bits=bits, seed=hash_seed, noconstant=noconstant,
                            label_offset=label_offset)
        finally:
            sys.set_int_max_str_digits(limit)
        ex = [r for r in ref if not isinstance(r, Bad)]
        assert [(s[0], s[1]) for s in got["skipped"]] == [(r.line, r.reason) for r in ref if isinstance(r, Bad)], \
            ("skipped lines differ from the reference", data)
        assert got["labels"] == [e.label for e in ex], ("labels differ", data)
        assert got["weights"] == [e.weight for e in ex], ("weights differ", data)
        assert got["lines"] == [e.line for e in ex], ("line numbers differ", data)
        assert got["tags"] == [None if e.tag is None else e.tag.decode("utf-8", "replace") for e in ex], \
            ("tags differ", data)
        assert got["feats"] == [(e.indices, [float(v) for v in e.values]) for e in ex], ("features differ", data)
    # 4. streaming in small chunks = whole buffer
    streamed = list(_iter_stream(io.BufferedReader(io.BytesIO(data)), "f", skip, chunk, False))
    for b in streamed:
        _check_invariants(b)
    assert batch_lists(streamed) == got, ("chunked parse differs", chunk, data)
    if outcome == "parsed":
        STATS.parsed += 1
    else:
        STATS.errors += 1
    STATS.examples += len(whole)
    return outcome


def make_target(fmt_choice: str):
    fmts = ("vw", "libsvm") if fmt_choice == "both" else (fmt_choice,)

    def test_one_input(data: bytes):
        if not data:
            return
        ctl = data[0]
        fmt = fmts[ctl % len(fmts)] if len(fmts) > 1 else fmts[0]
        check_input(data[1:], **options_from_byte(ctl, fmt))

    return test_one_input


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    target = "both"
    if "--target" in argv:
        i = argv.index("--target")
        target = argv[i + 1]
        del argv[i:i + 2]
    instrument_kernels = "--instrument-kernels" in argv
    if instrument_kernels:
        argv.remove("--instrument-kernels")
    import atheris

    if not instrument_kernels:
        # jitted kernels must be imported uninstrumented: numba cannot compile atheris' hooks
        import lomtree_cli.kernels.parse  # noqa: F401
    with atheris.instrument_imports(include=["lomtree_cli"]):
        import lomtree_cli.parsing  # noqa: F401
    import atexit

    def report():
        print(f"fuzz-summary: target={target} inputs={STATS.inputs} parsed={STATS.parsed} "
              f"errors={STATS.errors} examples={STATS.examples}", flush=True)

    atexit.register(report)
    atheris.Setup(argv, make_target(target))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
