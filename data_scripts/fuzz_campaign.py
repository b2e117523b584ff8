"""A long random fuzz campaign for the VW and LIBSVM parsers (no atheris needed).

Usage::

    python -m data_scripts.fuzz_campaign [-n 100000] [--format vw|libsvm|both] [--seed 0]
                                         [--cli 2000] [--subprocess 20] [--json out.json]

For each format, ``-n`` inputs are drawn from five generators (random bytes, a "soup" of the
grammar's special bytes, grammar-valid lines, grammar-valid lines with random edits, and long
or pathological lines) with random parser options; each goes through
``fuzz.fuzz_parsers.check_input``: strict mode parses or raises a one-line ``InputError``; skip
mode equals the independent pure-Python reference parser; chunked streaming equals the whole
buffer. ``--cli N`` sends N of the inputs through ``lomtree train`` in-process (click's
CliRunner: exit code 0 or 1, one ``error:`` line, never an exception), ``--subprocess M``
through M real ``lomtree train`` processes (no ``Traceback`` on stderr, exit 0 or 1).

``--models N`` crafts N model files from small trained models of every reduction (``fuzz/models.py``:
one array entry or header value changed, an array truncated or retyped, the checksums recomputed
so the change reaches the loader's own checks) and runs ``inspect``, ``predict`` and ``train -i``
on each: a clean result or a one-line error, never a signal, a traceback or a hang (60 s).

Failures are written to ``bench/fuzz/failures/`` and counted; the exit status is 1 if any.
Prints one summary line per format (``inputs``, ``parsed``, ``errors``, ``failures``, timing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback

from data_scripts.common import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))

from fuzz.fuzz_parsers import STATS, check_input  # noqa: E402

SPECIAL = b"0123456789 \t\r\n|:'.-+eE#,ab\x00\xff"
NAMES = ["a", "b", "x_1", "0", "19", "\xe9", "\x00", "'", "#", "ns", "\u00ff\u00fe", "12345678901234567890"]
NUMS = ["0", "1", "-1", "0.5", "-2.5E+2", ".5", "5.", "1e-3", "+3", "1e38", "3.5e38", "1e-45", "1e-50",
        "123456789012345678901234567890", "0.1234567890123456789012", "-0", "1E308", "9" * 25 + "e-20"]


def _num(r: random.Random) -> str:
    k = r.randrange(5)
    if k == 0:
        return r.choice(NUMS)
    if k == 1:
        return str(r.randint(-10**6, 10**6))
    if k == 2:
        return repr(r.uniform(-1e6, 1e6))
    if k == 3:
        return "%.*e" % (r.randrange(0, 20), r.uniform(-10, 10) * 10 ** r.randint(-40, 40))
    return "%.6g" % r.gauss(0, 100)


def _name(r: random.Random) -> str:
    if r.random() < 0.3:
        return r.choice(NAMES)
    return "".join(r.choice("abcxyz_019\xe9'#\x00") for _ in range(r.randint(1, 6)))


def vw_line(r: random.Random) -> str:
    """One line of the VW grammar (docs/ALGORITHMS.md §1.1), valid unless a value overflows float32."""
    parts = []
    if r.random() < 0.15:
        parts.append(r.choice(["junk\t", "a b\t", "\t"]))
    lab = []
    if r.random() < 0.7:
        lab.append(str(r.choice([1, 2, 7, r.randint(1, 2**31 - 1)])))
        if r.random() < 0.3:
            lab.append(r.choice(["0", "1", "2.5", "0.001", "1e2", "3.", _num(r).lstrip("-+") or "1"]))
    tag = r.choice(["", "", "'t", "'", "touch"])
    if tag in ("'t", "'"):
        lab.append(tag)
    parts.append(" ".join(lab))
    if tag == "touch":
        parts.append(("" if not lab else " ") + _name(r).replace("'", "q"))
    elif lab:
        parts.append(" ")
    for _ in range(r.randint(1, 3)):
        parts.append("|")
        if r.random() < 0.5:
            parts.append(_name(r) + (":" + r.choice(["0.5", "2", "0", "1e-3", "-1", "3.25"]) if r.random() < 0.4 else ""))
        for _ in range(r.randint(0, 5)):
            parts.append(r.choice([" ", "  ", "\t", " \t "]))
            k = r.randrange(3)
            parts.append(_name(r) if k == 0 else (_name(r) + ":" + _num(r)) if k == 1 else (":" + _num(r)))
        if r.random() < 0.3:
            parts.append(r.choice([" ", "\t", "\r"]))
    return "".join(parts)


def libsvm_line(r: random.Random) -> str:
    lab = str(r.randint(-3, 2**31 + 5) if r.random() < 0.1 else r.randint(0, 50)) + r.choice(["", "", ".0"])
    pairs = [f"{r.choice([r.randint(0, 100), r.randint(0, 10**20)])}:{_num(r)}" for _ in range(r.randint(0, 6))]
    return " ".join([lab] + pairs) + r.choice(["", "", " ", " # c", "#x", "\r"])


def mutate(r: random.Random, data: bytes) -> bytes:
    d = bytearray(data)
    for _ in range(r.randint(1, 4)):
        op = r.randrange(5)
        pos = r.randint(0, len(d))
        if op == 0 and d:
            d[min(pos, len(d) - 1)] ^= 1 << r.randrange(8)
        elif op == 1:
            d[pos:pos] = bytes([r.choice(SPECIAL)])
        elif op == 2 and d:
            del d[pos:pos + r.randint(1, 3)]
        elif op == 3 and d:
            a = r.randrange(len(d))
            d[pos:pos] = d[a:a + r.randint(1, 8)]
        else:
            d[pos:pos] = r.choice([b"\n", b"\r\n", b"\xef\xbb\xbf", b"|", b":", b"'", b"\t", b"#", b","])
    return bytes(d)


def gen_input(r: random.Random, fmt: str) -> bytes:
    g = r.randrange(10)
    line = vw_line if fmt == "vw" else libsvm_line
    if g == 0:
        return r.randbytes(r.randint(0, 200))
    if g == 1:
        return bytes(r.choice(SPECIAL) for _ in range(r.randint(0, 120)))
    if g <= 5:
        return ("\n".join(line(r) for _ in range(r.randint(1, 6))) + r.choice(["", "\n", "\r\n"])).encode()
    if g <= 8:
        return mutate(r, "\n".join(line(r) for _ in range(r.randint(1, 4))).encode())
    # long / pathological lines
    return r.choice([
        b"1 | " + b"a " * r.randint(1000, 5000),
        b"1 | a:" + b"9" * r.randint(300, 3000),
        b"1 | a:0." + b"0" * r.randint(300, 3000) + b"1",
        b"|" * r.randint(100, 3000),
        b"1" * r.randint(20, 400) + b" | a",
        b"1 1:" + b"1e" + b"9" * r.randint(10, 400),
        b"\n" * r.randint(1, 2000) + line(r).encode(),
        b"\xef\xbb\xbf" * r.randint(1, 3) + line(r).encode(),
        (line(r) + "\n").encode() * r.randint(50, 300),
    ])


def random_options(r: random.Random, fmt: str) -> dict:
    return {
        "format": fmt,
        "bits": r.choice([18, 18, 5, 32, 1]),
        "hash_seed": r.choice([0, 0, 1, 2**32 - 1, r.randrange(2**32)]) if fmt == "vw" else 0,
        "noconstant": r.random() < 0.3,
        "label_offset": r.choice([0, 0, 1, 5]) if fmt == "libsvm" else 0,
        "chunk": r.choice([1, 2, 7, 64, 4096]),
    }


def cli_check(data: bytes, fmt: str, tmpdir: str, i: int, r: random.Random) -> None:
    """One input through ``lomtree train`` in-process: exit 0 or 1 with one error line."""
    from click.testing import CliRunner

    from lomtree_cli.cli import main

    path = os.path.join(tmpdir, f"in{i % 4}.{fmt}")
    with open(path, "wb") as f:
        f.write(data)
    red = r.choice(["oaa", "lomtree", "filter", "rtree", "cpt", "table"])
    args = ["train", "-r", red, "-k", "5", "-b", "10", "--format", fmt, path, "--quiet",
            "-f", os.path.join(tmpdir, "m.lt")]
    if fmt == "libsvm":
        args += ["--label-offset", "1"]
    if r.random() < 0.3:
        args.append("--skip-invalid")
    res = CliRunner().invoke(main, args)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"exception through the CLI: {res.exception!r}")
    assert res.exit_code in (0, 1), (res.exit_code, res.stderr)
    if res.exit_code == 1:
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].isprintable(), res.stderr


def subprocess_check(data: bytes, fmt: str, tmpdir: str) -> None:
    path = os.path.join(tmpdir, f"sub.{fmt}")
    with open(path, "wb") as f:
        f.write(data)
    p = subprocess.run([sys.executable, "-m", "lomtree_cli.cli", "train", "-r", "oaa", "-k", "5", "-b", "10",
                        "--format", fmt, "--label-offset", "1" if fmt == "libsvm" else "0", "--quiet", path],
                       capture_output=True, timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode in (0, 1) and "Traceback" not in err, (p.returncode, err)
    if p.returncode == 1:
        assert err.count("\n") == 1 and err.startswith("error: "), err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="inputs per format")
    ap.add_argument("--format", choices=["vw", "libsvm", "both"], default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli", type=int, default=0, help="also run this many inputs through lomtree train (in-process)")
    ap.add_argument("--subprocess", type=int, default=0, help="and this many through real subprocesses")
    ap.add_argument("--models", type=int, default=0,
                    help="also craft this many model files (one array or header value changed, checksums "
                         "recomputed) and run inspect, predict and train -i on each (fuzz/models.py)")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args(argv)
    fmts = ["vw", "libsvm"] if args.format == "both" else [args.format]
    fail_dir = REPO_ROOT / "bench" / "fuzz" / "failures"
    out = {}
    total_fail = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        for fmt in fmts:
            r = random.Random(f"{args.seed}:{fmt}")
            STATS.__init__()
            failures = 0
            cli_done = sub_done = 0
            t0 = time.time()
            for i in range(args.n):
                data = gen_input(r, fmt)
                opts = random_options(r, fmt)
                try:
                    check_input(data, **opts)
                    if cli_done < args.cli and i % max(1, args.n // max(1, args.cli)) == 0:
                        cli_check(data, fmt, tmpdir, i, r)
                        cli_done += 1
                    if sub_done < args.subprocess and i % max(1, args.n // max(1, args.subprocess)) == 0:
                        subprocess_check(data, fmt, tmpdir)
                        sub_done += 1
                except Exception:  # noqa: BLE001 - every failure is recorded, the campaign goes on
                    failures += 1
                    fail_dir.mkdir(parents=True, exist_ok=True)
                    base = fail_dir / f"{fmt}-{args.seed}-{i}"
                    base.with_suffix(".bin").write_bytes(data)
                    base.with_suffix(".txt").write_text(json.dumps(opts) + "\n" + traceback.format_exc())
                    if failures <= 5:
                        print(f"FAIL {fmt} #{i} {opts}: {traceback.format_exc(limit=2)}", file=sys.stderr)
                if (i + 1) % 20000 == 0:
                    print(f"  {fmt}: {i + 1} inputs, {failures} failures, {time.time() - t0:.0f} s", file=sys.stderr)
            secs = time.time() - t0
            res = {"inputs": args.n, "parsed": STATS.parsed, "errors": STATS.errors, "examples": STATS.examples,
                   "cli_runs": cli_done, "subprocess_runs": sub_done, "failures": failures,
                   "seconds": round(secs, 1)}
            out[fmt] = res
            total_fail += failures
            print(f"fuzz-campaign {fmt}: " + " ".join(f"{k}={v}" for k, v in res.items()), flush=True)
        if args.models:
            from fuzz.models import campaign

            t0 = time.time()
            res = campaign(args.models, args.seed, tmpdir, [sys.executable, "-m", "lomtree_cli.launch"],
                           log=lambda m: print(m, file=sys.stderr))
            res["seconds"] = round(time.time() - t0, 1)
            out["models"] = res
            total_fail += len(res["failures"])
            print(f"fuzz-campaign models: models={res['models']} runs={res['runs']} "
                  f"failures={len(res['failures'])} seconds={res['seconds']} verdicts={json.dumps(res['verdicts'])}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
