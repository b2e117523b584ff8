"""VW's feature and label options: interactions, n-grams/skips, namespace filters, string labels and VW's spellings."""

import json
import os
import random
import subprocess
import sys

import pytest

from lomtree_cli.config import InputConfig
from lomtree_cli.errors import ConfigError, InputError
from lomtree_cli.parsing import parse_bytes
from tests.reference import features_ref as R

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]


def run(args, stdin=None):
    return subprocess.run(LOMTREE + args, input=stdin, capture_output=True, text=True, timeout=300)


def lomtree_feats(line, **kw):
    b = parse_bytes(line.encode() + b"\n", InputConfig(bits=18, noconstant=True, **kw))
    return sorted(zip(b.indices.tolist(), b.values.tolist()))


# slots read from VW 9.11's --audit output for these lines (-b 18 --noconstant); numeric namespace
# and feature names hash the same in VW and lomtree (int(name) + namespace hash)
LINE = "1 |1 5 7:2 |2 3 |3 8"
LINE4 = "1 |1 5 7:2 9 11 |2 3 4 |3 8"
VW_SLOTS = [
    (LINE, dict(interactions="12"), [(2423, 1.0), (3229, 2.0)]),
    (LINE, dict(interactions="21"), [(2007, 2.0), (2009, 1.0)]),
    (LINE, dict(interactions="12,21"), [(2423, 1.0), (3229, 2.0)]),
    (LINE, dict(interactions="11"), [(2420, 1.0), (2426, 2.0), (3216, 4.0)]),
    (LINE, dict(interactions="111"), [(188820, 2.0), (188826, 1.0), (191238, 4.0), (247480, 8.0)]),
    (LINE, dict(interactions="1:2"), [(188825, 1.0), (190032, 1.0), (190846, 1.0), (191243, 2.0), (247477, 4.0),
                                      (248684, 2.0), (252706, 2.0)]),
    (LINE4, dict(ngram="2"), [(142838, 1.0), (190450, 1.0), (238062, 1.0), (250103, 1.0)]),
    (LINE4, dict(ngram="3", skips="1"), [(36388, 1.0), (142838, 1.0), (142840, 1.0), (143926, 1.0), (190450, 1.0),
                                         (190452, 1.0), (238062, 1.0), (250103, 1.0), (250920, 1.0), (250922, 1.0)]),
]


@pytest.mark.parametrize("line,kw,generated", VW_SLOTS)
def test_slots_of_hand_worked_lines_are_vws(line, kw, generated):
    linear = [(i, v) for _, i, v in R.parse_line(line, 18)]
    keep_linear = [(i, v) for i, v in linear]
    assert lomtree_feats(line, **kw) == sorted(keep_linear + generated)
    # and the reference agrees with VW's slots too
    assert sorted(R.generate(R.parse_line(line, 18), 18, terms=[t.encode() for t in kw.get("interactions", "").split(",") if t],
                             ngram=_gram(kw.get("ngram")), skips=_gram(kw.get("skips")))) == sorted(keep_linear + generated)


def _gram(spec):
    if not spec:
        return None
    out = {}
    for s in spec.split(","):
        if s[0].isdigit():
            out[None] = int(s)
        else:
            out[ord(s[0])] = int(s[1:])
    return out


def _random_line(rng):
    parts = [str(rng.randint(1, 5))]
    for _ in range(rng.randint(1, 4)):
        ns = rng.choice(["", "a", "ab", "b", "c", "1", "cx"])
        w = rng.choice(["", ":2", ":0.5"]) if ns else ""
        feats = [rng.choice(["x", "y", "zz", "7", "123456789", "w"]) + rng.choice(["", ":3", ":-1.5", ":0.25"])
                 for _ in range(rng.randint(0, 5))]
        parts.append("|" + ns + w + (" " if feats or not ns else "") + " ".join(feats))
    return " ".join(parts)


OPTION_SETS = [
    dict(interactions="ab"), dict(interactions="aa"), dict(interactions="abc,ba"), dict(interactions="::"),
    dict(interactions="a:"), dict(interactions="aab,c a"), dict(interactions="aba"), dict(interactions="abac"),
    dict(ngram="2"), dict(ngram="3", skips="2"), dict(ngram="a2,c3"), dict(ngram="2", interactions="ac"),
    dict(interactions="ab", ignore="c"), dict(interactions="ab", keep="ab"), dict(interactions="ab", ignore_linear="a"),
    dict(ngram="2", skips="1", interactions="a:", ignore_linear="b"),
]


@pytest.mark.parametrize("kw", OPTION_SETS)
def test_generation_matches_the_reference(kw):
    rng = random.Random(hash(tuple(sorted(kw.items()))) & 0xFFFF)
    lines = [_random_line(rng) for _ in range(60)]
    cfg = InputConfig(bits=18, noconstant=True, **kw)
    batch = parse_bytes(("\n".join(lines) + "\n").encode(), cfg)
    terms = [t.encode() for t in kw.get("interactions", "").split(",") if t]
    seen = sorted({ns for ln in lines for ns, _, _ in R.parse_line(ln, 18)} - set(kw.get("ignore", "").encode()))
    for i, ln in enumerate(lines):
        got = sorted(zip(batch.indices[batch.indptr[i]:batch.indptr[i + 1]].tolist(),
                         batch.values[batch.indptr[i]:batch.indptr[i + 1]].tolist()))
        want = sorted(R.generate(R.parse_line(ln, 18), 18, terms=terms, ngram=_gram(kw.get("ngram")),
                                 skips=_gram(kw.get("skips")), ignore=kw.get("ignore", "").encode(),
                                 keep=kw.get("keep", "").encode(), ignore_linear=kw.get("ignore_linear", "").encode(),
                                 seen=seen))
        assert got == want, ln


def test_constant_is_last_and_never_crossed():
    b = parse_bytes(b"1 |a x |b y\n", InputConfig(bits=18, interactions="::"))
    assert b.indices[-1] == InputConfig().constant_index & ((1 << 18) - 1)
    assert len(b.indices) == 2 + 3 + 1  # x, y, (x,x) (x,y) (y,y), constant


@pytest.mark.parametrize("kw", [dict(interactions="a"), dict(ngram="x"), dict(skips="1"), dict(ignore="a", keep="b"),
                                dict(named_labels="a,,b"), dict(named_labels="a,a")])
def test_bad_feature_options_are_config_errors(kw):
    with pytest.raises(ConfigError):
        InputConfig(**kw)


def test_named_labels_parse_and_unknown_label():
    cfg = InputConfig(named_labels="cat,dog")
    b = parse_bytes(b"dog |a x\ncat 2 |a y\n|a z\n", cfg)
    assert b.labels.tolist() == [2, 1, 0] and b.weights.tolist() == [1.0, 2.0, 1.0]
    with pytest.raises(InputError) as e:
        parse_bytes(b"dog |a x\nfish |a y\n", cfg, source="f.vw")
    assert e.value.line == 2 and "fish" in str(e.value)
    skip = parse_bytes(b"dog |a x\nfish |a y\ncat |a\n", InputConfig(named_labels="cat,dog", skip_invalid=True))
    assert skip.labels.tolist() == [2, 1] and len(skip.skipped) == 1


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    rng = random.Random(0)
    names = ["cat", "dog", "bird", "fish"]
    lines = []
    for _ in range(400):
        y = rng.randrange(4)
        lines.append(f"{names[y]} |a f{y} g{rng.randrange(3)} |b h{y}")
    (d / "train.vw").write_text("\n".join(lines) + "\n")
    return d


def test_named_labels_round_trip(named):
    m = str(named / "m.lt")
    p = run(["train", "-r", "oaa", "--named-labels", "cat,dog,bird,fish", "-q", "ab", str(named / "train.vw"), "-f", m,
             "--quiet"])
    assert p.returncode == 0, p.stderr
    p = run(["predict", "-i", m, str(named / "train.vw"), "--quiet"])
    assert p.returncode == 0, p.stderr
    preds = p.stdout.split()
    truth = [ln.split()[0] for ln in (named / "train.vw").read_text().splitlines()]
    assert set(preds) <= {"cat", "dog", "bird", "fish"}
    assert sum(a == b for a, b in zip(preds, truth)) > 0.9 * len(truth)
    p = run(["predict", "-i", m, str(named / "train.vw"), "--quiet", "--top-k", "2"])
    assert p.stdout.split("\n")[0].split()[1].split(":")[0] in {"cat", "dog", "bird", "fish"}
    info = json.loads(run(["inspect", "--json", m]).stdout)
    assert info["label_names"] == {"1": "cat", "2": "dog", "3": "bird", "4": "fish"}
    assert info["interactions"] == "ab"
    p = run(["predict", "-i", m, "-p", "/dev/null"], stdin="cow |a f1\n")
    assert p.returncode == 1 and p.stderr.startswith("error: <stdin>:1:") and "cow" in p.stderr
    assert "Traceback" not in p.stderr


def test_string_labels_grow_and_are_stored(named):
    m = str(named / "cpt.lt")
    p = run(["train", "-r", "cpt", "--string-labels", str(named / "train.vw"), "-f", m, "--quiet", "--passes", "2"])
    assert p.returncode == 0, p.stderr
    p = run(["predict", "-i", m, str(named / "train.vw"), "--quiet", "--probabilities"])
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.split(":")[0] in {"cat", "dog", "bird", "fish"} and "p(" in first
    info = json.loads(run(["inspect", "--json", m]).stdout)
    assert sorted(info["label_names"].values()) == ["bird", "cat", "dog", "fish"]
    # an unseen label at predict is a mistake, not an error (the dictionary is open)
    p = run(["predict", "-i", m, "-p", "-", "--quiet"], stdin="cow |a f1 |b h1\n")
    assert p.returncode == 0 and p.stdout.strip() in {"cat", "dog", "bird", "fish"}


def _preds(args, data):
    p = run(args + ["-p", "-", "--quiet", str(data)])
    assert p.returncode == 0, p.stderr
    return p.stdout


def _int_data(named):
    """``named``'s training file with the labels as integers 1-4 (written once)."""
    data = named / "int.vw"
    if not data.exists():
        m = {"cat": "1", "dog": "2", "bird": "3", "fish": "4"}
        data.write_text("".join(m[ln.split()[0]] + ln[ln.index(" "):] + "\n"
                                for ln in (named / "train.vw").read_text().splitlines()))
    return data


@pytest.mark.parametrize("alias,plain", [
    (["--oaa", "4"], ["-r", "oaa", "-k", "4"]),
    (["--ect", "4"], ["-r", "filter", "-k", "4"]),
    # VW's log_multi: the plain LOMtree at VW's rates and loss (lomtree's own defaults stay on -r lomtree)
    (["--log_multi", "4"], ["-r", "lomtree", "-k", "4", "--leaf-labels", "0", "--candidates-up", "0",
                            "--power_t", "0.5", "-l", "0.5", "--loss_function", "quantile", "--no-average"]),
])
def test_aliases_read_as_their_r_forms(named, alias, plain):
    data = _int_data(named)
    assert _preds(["train"] + alias, data) == _preds(["train"] + plain, data)


def test_d_t_and_cache_file(named, tmp_path):
    data = named / "train.vw"
    m = str(tmp_path / "m.lt")
    a = run(["train", "--named-labels", "cat,dog,bird,fish", "-r", "oaa", "-d", str(data), "-f", m, "--quiet",
             "--passes", "2", "--cache_file", str(tmp_path / "c.cache")])
    assert a.returncode == 0, a.stderr and os.path.exists(tmp_path / "c.cache")
    t = run(["train", "-t", "-i", m, "-d", str(data), "-p", "-", "--quiet"])
    p = run(["predict", "-i", m, str(data), "-p", "-", "--quiet"])
    assert t.returncode == 0 and t.stdout == p.stdout and t.stdout


@pytest.mark.parametrize("args", [["-q", "abc"], ["--cubic", "ab"], ["--ignore", "a", "--keep", "b"],
                                  ["--skips", "1"], ["--oaa", "3", "--ect", "3"], ["--oaa", "3", "-r", "filter"],
                                  ["--named-labels", "a,b", "-k", "3"]])
def test_option_errors_are_usage_errors(named, args):
    _int_data(named)
    p = run(["train", "-k", "4"] + args + [str(named / "int.vw"), "--quiet"] if "-k" not in args and "--oaa" not in args
            else ["train"] + args + [str(named / "int.vw"), "--quiet"])
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr


def test_interaction_model_needs_nothing_else_at_predict(named, tmp_path):
    data = _int_data(named)
    m = str(tmp_path / "q.lt")
    tr = run(["train", "--oaa", "4", "-q", "ab", "--ngram", "a2", "--skips", "a1", str(data), "-f", m, "--quiet",
              "--report", str(tmp_path / "r.json")])
    assert tr.returncode == 0, tr.stderr
    r = json.load(open(tmp_path / "r.json"))
    n = len(data.read_text().splitlines())
    assert r["total_features"] > 4 * n  # crossed and n-gram features are counted
    p = run(["predict", "-i", m, str(data), "-p", "/dev/null", "--report", str(tmp_path / "p.json"), "--quiet"])
    assert p.returncode == 0
    assert json.load(open(tmp_path / "p.json"))["total_features"] == r["total_features"]


def test_train_help_has_vws_sections():
    p = run(["train", "-h"])
    assert p.returncode == 0
    text = p.stdout
    order = [text.index(s) for s in ("Feature Options:", "Example Options:", "Update Options:", "Output Model Options:",
                                      "Reduction Options:")]
    assert order == sorted(order)
    feat = text[text.index("Feature Options:"):text.index("Example Options:")]
    assert "-q, --quadratic" in feat and "--ngram" in feat and "--named-labels" in feat


def test_readable_model_and_invert_hash(named, tmp_path):
    _int_data(named)
    m = str(tmp_path / "m.lt")
    p = run(["train", "--oaa", "4", str(named / "int.vw"), "-f", m, "--quiet", "--invert_hash", str(tmp_path / "ih.txt")])
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "ih.txt").read_text()
    assert "regressor 0 (class 1):" in text and "a^f0:" in text and "Constant:" in text
    p = run(["train", "--oaa", "4", str(named / "int.vw"), "-f", m, "--quiet", "--readable_model", str(tmp_path / "r.txt")])
    assert p.returncode == 0 and "slots" in (tmp_path / "r.txt").read_text()
    # without -f (VW's usage): the text is written, and the model it came from is not left behind
    (tmp_path / "r.txt").unlink()
    p = run(["train", "--oaa", "4", str(named / "int.vw"), "--quiet", "--readable_model", str(tmp_path / "r.txt")])
    assert p.returncode == 0 and "slots" in (tmp_path / "r.txt").read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ih.txt", "m.lt", "r.txt"]


def test_wildcards_with_parallel_parsing(tmp_path):
    # namespaces appear chunk by chunk; parse threads must each cross what their chunk holds
    rng = random.Random(3)
    lines = []
    for i in range(3000):
        nss = "abcdefgh"[: 1 + i * 8 // 3000]
        lines.append(f"{1 + i % 3} " + " ".join(f"|{c} t{rng.randrange(5)} u{rng.randrange(5)}" for c in nss))
    data = tmp_path / "d.vw"
    data.write_text("\n".join(lines) + "\n")
    m = str(tmp_path / "w.lt")
    assert run(["train", "--oaa", "3", "-q", "::", str(data), "-f", m, "--quiet"]).returncode == 0
    outs = []
    for threads in ("1", "4"):
        p = run(["predict", "-i", m, str(data), "-p", "-", "--quiet", "--threads", threads, "--chunk-bytes", "4096",
                 "--report", str(tmp_path / f"r{threads}.json")])
        assert p.returncode == 0, p.stderr
        outs.append((p.stdout, json.load(open(tmp_path / f"r{threads}.json"))["total_features"]))
    assert outs[0] == outs[1]
    want = sum(len(R.generate(R.parse_line(ln, 18), 18, terms=[b"::"], seen=sorted({ns for ns, _, _ in R.parse_line(ln, 18)})))
               + 1 for ln in lines)
    assert outs[0][1] == want
