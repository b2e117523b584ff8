"""Parser fuzzing, the fast part; extends ``test_parsing.py`` rather than repeating it.

``test_parsing.py`` already compares the kernel with the reference on grammar lines and on a byte
"soup". Here every input goes through ``fuzz.fuzz_parsers.check_input`` (the same checker as the
atheris target and ``data_scripts/fuzz_campaign.py``): strict mode parses or raises one printable
``InputError`` line for the first bad line of the reference; skip mode equals the reference;
streaming in small chunks equals the whole buffer; with random options (bits 1..32, hash seeds,
noconstant, label offsets). Inputs: arbitrary bytes, and grammar lines with random edits. Then the
CLI: random bytes through ``lomtree train`` give exit 0 or 1 with one line, never a traceback.
Pathological lines (megabyte tokens, huge exponents) finish quickly. Long campaigns: ``make fuzz``
(atheris) and ``python -m data_scripts.fuzz_campaign`` (>= 100,000 inputs per parser).
"""

from __future__ import annotations

import os
import time

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.fuzz_parsers import CHUNKS, check_input, check_message, make_target, options_from_byte
from lomtree_cli.config import InputConfig
from lomtree_cli.errors import InputError
from lomtree_cli.parsing import parse_bytes
from tests.robustness_helpers import run_cli
from tests.test_parsing import libsvm_line, vw_line

#: with NUMBA_DISABLE_JIT=1 (make test-nojit) the kernels run as Python: smaller pathological inputs
JIT = os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
BIG = 1_000_000 if JIT else 20_000

FUZZ = settings(deadline=None, max_examples=120, suppress_health_check=list(HealthCheck))

options = st.fixed_dictionaries({
    "bits": st.sampled_from([18, 1, 5, 32]),
    "noconstant": st.booleans(),
    "chunk": st.sampled_from(CHUNKS),
})


@st.composite
def mutated(draw, line_strategy):
    """A few grammar lines, then 1-4 random edits (flip, insert a special byte, delete, duplicate)."""
    data = bytearray("\n".join(draw(st.lists(line_strategy, min_size=1, max_size=4))).encode())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 3))
        pos = draw(st.integers(0, len(data)))
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif op == 1:
            data[pos:pos] = draw(st.sampled_from([b"|", b":", b"'", b"\t", b"\n", b"\r", b"#", b",", b"\x00",
                                                  b"\xef\xbb\xbf", b"e", b"-", b".", b"9" * 30, b"\x1b"]))
        elif op == 2:
            del data[pos:pos + draw(st.integers(1, 3))]
        else:
            data[pos:pos] = data[max(0, pos - 8):pos]
    return bytes(data)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["vw", "libsvm"]), options, st.integers(0, 2**32 - 1),
       st.integers(0, 3))
def test_arbitrary_bytes(data, fmt, opts, seed, offset):
    if fmt == "vw":
        check_input(data, format=fmt, hash_seed=seed, **opts)
    else:
        check_input(data, format=fmt, label_offset=offset, **opts)


@FUZZ
@given(mutated(vw_line()), options, st.integers(0, 2**32 - 1))
def test_mutated_vw_grammar_lines(data, opts, seed):
    check_input(data, format="vw", hash_seed=seed, **opts)


@FUZZ
@given(mutated(libsvm_line()), options, st.integers(0, 3))
def test_mutated_libsvm_lines(data, opts, offset):
    check_input(data, format="libsvm", label_offset=offset, **opts)


def test_harness_runs_without_atheris():
    target = make_target("both")
    for seed in (b"\x00" + b"1 | a b:2\n", b"\x01" + b"3 1:0.5 7:2 # c\n", b"\x07|||:\n", b"\xff" + bytes(range(256))):
        target(seed)
    assert options_from_byte(0xFF, "libsvm")["label_offset"] == 1


@pytest.mark.parametrize("data", [
    b"1 | a:1\x1b[2J\x1b[31mred",       # terminal escape sequences
    b"x\x0c | a",                      # form feed in a label
    "1 | a:1\u2028".encode(),          # unicode line separator in a value
    b"1 2 3 \x85 | a",                 # NEL
    b"\x07 | a",
])
def test_error_messages_are_one_printable_line(data):
    for fmt in ("vw", "libsvm"):
        with pytest.raises(InputError) as ei:
            parse_bytes(data, InputConfig(format=fmt))
        check_message(str(ei.value))


@pytest.mark.parametrize("data", [
    b"1 | a:" + b"9" * BIG,
    b"1 | a:0." + b"0" * BIG + b"1",
    b"1 | a:1e" + b"9" * (BIG // 10),
    b"1 | a:1e-" + b"9" * (BIG // 10),
    b"|" * BIG,
    b"1" * BIG + b" | a",
    b"1 | " + b"ab " * (BIG // 3),
    b"1 1:" + b"9" * BIG,
    b"\n" * BIG + b"1 | a",
    b":" * BIG,
    b"1 | " + b":1 " * (BIG // 3),
], ids=lambda d: repr(d[:12]))
def test_pathological_lines_finish_quickly(data):
    t0 = time.time()
    for fmt in ("vw", "libsvm"):
        try:
            parse_bytes(data, InputConfig(format=fmt))
        except InputError as e:
            check_message(str(e))
            assert len(str(e)) < 300  # the offending token is shortened
    assert time.time() - t0 < 10


def test_cli_huge_digit_strings(tmp_path):
    """Labels, values, indices of 5,000+ digits (beyond Python's int() limit) are plain data errors."""
    from lomtree_cli.cli import main

    for fmt, line in (("vw", b"7" * 5000 + b" | a"), ("vw", b"1 | " + b"7" * 5000 + b":1"),
                      ("libsvm", b"1 " + b"7" * 5000 + b":1"), ("libsvm", b"9" * 5000 + b" 1:1")):
        f = tmp_path / "in.txt"
        f.write_bytes(b"1 | a\n" + line + b"\n" if fmt == "vw" else b"1 1:1\n" + line + b"\n")
        res = CliRunner().invoke(main, ["train", "-r", "oaa", "-k", "5", "--format", fmt, str(f), "--quiet"])
        assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        assert res.exit_code in (0, 1)
        if res.exit_code == 1:
            assert res.stderr.startswith(f"error: {f}:2: ") and res.stderr.count("\n") == 1, res.stderr


@settings(deadline=None, max_examples=40, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200) | mutated(vw_line()), st.sampled_from(["oaa", "lomtree", "cpt", "table"]),
       st.booleans())
def test_cli_train_on_random_bytes_exits_0_or_1_with_one_line(tmp_path_factory, data, reduction, skip):
    from lomtree_cli.cli import main
    from tests.robustness_helpers import available

    available(reduction)
    f = tmp_path_factory.mktemp("cli") / "in.vw"
    f.write_bytes(data)
    args = ["train", "-r", reduction, "-k", "5", "-b", "10", str(f), "--quiet"] + (["--skip-invalid"] if skip else [])
    res = CliRunner().invoke(main, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 1), (res.exit_code, res.stderr)
    if res.exit_code == 1:
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {f}:") and lines[0].isprintable(), res.stderr


def test_cli_subprocess_random_bytes_no_traceback(tmp_path):
    import random

    r = random.Random(8)
    data = b"1 | a\n" + r.randbytes(3000) + b"\n2 | b:\x1b[31m\n"
    f = tmp_path / "in.vw"
    f.write_bytes(data)
    for args, stdin in ((["--format", "vw", str(f)], None), (["--format", "libsvm", "--skip-invalid"], data)):
        p = run_cli(["train", "-r", "oaa", "-k", "5", "--quiet"] + args, stdin=stdin)
        err = p.stderr.decode("utf-8", "replace")
        assert p.returncode in (0, 1) and "Traceback" not in err, err
        if p.returncode == 1:
            assert err.count("\n") == 1 and err.startswith("error: ") and err.rstrip("\n").isprintable(), err


@pytest.mark.slow
def test_long_random_campaign():
    from data_scripts.fuzz_campaign import main

    assert main(["-n", "20000", "--cli", "200", "--subprocess", "4", "--seed", "99"]) == 0
