"""The registry of reductions is the one place a reduction (and each of its options) is declared:
the ``-r`` choice, ``-k`` rule, ``config.REDUCTIONS``, the reduction options of ``train``, their
defaults and the check against an initial model all follow from it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

import lomtree_cli
from lomtree_cli import config
from lomtree_cli.cli import main
from lomtree_cli.config import ReductionConfig
from lomtree_cli.errors import ConfigError
from lomtree_cli.reductions.registry import REGISTRY, reduction_options
from lomtree_cli.version import PROG
from tests.helpers import separable_lines
from tests.robustness_helpers import available


def test_everything_derives_from_the_registry():
    assert config.REDUCTIONS == tuple(REGISTRY)
    train = main.commands["train"]
    by_name = {p.name: p for p in train.params}
    assert list(by_name["reduction"].type.choices) == list(REGISTRY)
    names = {f.name for f in fields(ReductionConfig)}
    for field, (opt, users) in reduction_options().items():
        assert field in names, field
        assert by_name[field].default is None and set(by_name[field].opts) == set(opt.flags)
        assert by_name[field].secondary_opts == ([opt.off] if opt.off else [])
        assert all(u in REGISTRY for u in users)
    for name, spec in REGISTRY.items():
        if spec.needs_k:
            with pytest.raises(ConfigError, match="needs -k"):
                ReductionConfig(name=name)
        else:
            ReductionConfig(name=name)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_classes_take_their_entry(name):
    cls = available(name)
    assert cls.name == name and cls.needs_k == REGISTRY[name].needs_k
    assert cls.default_loss == REGISTRY[name].defaults.get("loss", "squared")


def test_a_new_entry_is_a_new_choice_and_option():
    """One entry added to REGISTRY (before the CLI is built) gives ``-r``, ``-k`` rule and options."""
    code = textwrap.dedent("""
        from lomtree_cli.reductions.registry import REGISTRY, ReductionSpec, Option
        REGISTRY["toy"] = ReductionSpec("lomtree_cli.reductions.oaa:OneAgainstAll", "Toy", "a toy reduction",
                                        needs_k=False,
                                        options=(Option("beam", ("--toy-width",), help="toy width"),))
        from click.testing import CliRunner
        from lomtree_cli.cli import main
        print(CliRunner().invoke(main, ["train", "--help"]).output)
        print(CliRunner().invoke(main, ["--help"]).output)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "declared differently" in out.stderr  # --beam is plt's and mtree's already: refused
    code = code.replace('Option("beam"', 'Option("dim"').replace("--toy-width", "--dim")
    code = code.replace('help="toy width"', 'help="width of the learned embeddings"')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "|mtree|toy]" in out.stdout and "mtree, toy: width of the learned" in out.stdout
    assert "optional for cpt, table, regression, binary, toy" in " ".join(out.stdout.split())
    assert "[Reduction] Toy Options" not in out.stdout  # its one option, --dim, is shown under mtree
    assert re.search(r"^ +toy +a toy reduction$", out.stdout, re.M)


def _sections(text: str) -> dict:
    """``--help`` text -> {section title: its text}."""
    parts = re.split(r"^(\S[^\n]*):\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_help_lists_every_reduction_and_its_options():
    """``lomtree --help`` names every registered reduction with its summary, and ``train -h`` shows
    each reduction's options under its own title (none left in "Other Options")."""
    out = CliRunner().invoke(main, ["--help"], terminal_width=100).output
    listed = re.findall(r"^ {4}(\w+) +(.+)$", out.split("Reductions (-r):")[1].split("Examples:")[0], re.M)
    assert listed == [(name, spec.summary) for name, spec in REGISTRY.items()]
    assert {"plt", "mtree"} <= {name for name, _ in listed}
    sections = _sections(CliRunner().invoke(main, ["train", "--help"], terminal_width=100).output)
    shown = set()
    for spec in REGISTRY.values():
        for o in spec.options:
            if o.field in shown:
                continue
            shown.add(o.field)
            assert o.flags[0] in sections[f"[Reduction] {spec.title} Options"], o.flags
    for field, (o, _) in reduction_options().items():
        assert o.flags[0] not in sections.get("Other Options", ""), o.flags


def test_reduction_options_given_with_an_initial_model_are_checked(tmp_path):
    available("lomtree")
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(4, 50, seed=1)) + "\n")
    m = str(tmp_path / "m.lt")
    r = CliRunner().invoke(main, ["train", "-r", "lomtree", "-k", "4", "-b", "10", str(data), "-f", m, "--quiet"])
    assert r.exit_code == 0, r.output
    for args, ok in ((["--leaf-labels", "32"], True), (["--leaf-labels", "5"], False), (["--arity", "7"], False),
                     (["--cpt-random-insert"], False)):
        r = CliRunner().invoke(main, ["train", "-i", m, str(data), "--quiet", *args])
        assert (r.exit_code == 0) == ok, (args, r.output)
        if not ok:
            assert r.exit_code == 2 and "conflicts with the initial model" in r.output


def test_plt_defaults_from_large_k_on():
    """Single-label plt with k >= LARGE_K: power_t 0.75, no leaf negatives, path weight 1, arity 8
    (16 from k = 32,769 on), beam 4; multi-label plt: no leaf negatives, path weight 1 and arity 8 only; below LARGE_K the
    other defaults; a given option still wins."""
    from lomtree_cli.commands import new_model_configs
    from lomtree_cli.reductions.registry import LARGE_K, default

    def configs(k, **given):
        p = {f: None for f in reduction_options()}
        p.update(reduction="plt", k=k, seed=0, learning_rate=None, sgd=False, initial_t=0.0, power_t=None,
                 loss=None, quantile_tau=0.5, decay_learning_rate=None, l1=0.0, l2=0.0, passes=1)
        p.update(given)
        return new_model_configs(p)

    rcfg, lcfg = configs(LARGE_K)
    assert (lcfg.power_t, rcfg.leaf_negatives, rcfg.path_weight, rcfg.arity, rcfg.beam) == (0.75, False, 1.0, 8, 4)
    rcfg, lcfg = configs(LARGE_K - 1)
    assert (lcfg.power_t, rcfg.leaf_negatives, rcfg.path_weight, rcfg.arity, rcfg.beam) == (0.5, True, -1.0, 32, 10)
    rcfg, lcfg = configs(LARGE_K, multilabel=True)
    assert (lcfg.power_t, rcfg.leaf_negatives, rcfg.path_weight, rcfg.arity, rcfg.beam) == (0.5, True, 0.5, 8, 16)
    assert configs(LARGE_K, multilabel=True, path_weight=1.0)[0].path_weight == 1.0
    assert (lcfg.average, lcfg.learning_rate) == (False, 0.5)  # late labels: no averaging
    # the buffer replayed shuffled: label sets from LARGE_K on only
    assert rcfg.shuffle_buffer and not configs(LARGE_K - 1, multilabel=True)[0].shuffle_buffer
    assert not configs(LARGE_K)[0].shuffle_buffer and not configs(LARGE_K, multilabel=True,
                                                                   shuffle_buffer=False)[0].shuffle_buffer
    rcfg, lcfg = configs(LARGE_K - 1, multilabel=True)
    assert (lcfg.power_t, rcfg.leaf_negatives, rcfg.path_weight, rcfg.arity, rcfg.beam) == (0.1, True, -1.0, 32, 16)
    assert lcfg.average and not configs(LARGE_K - 1)[1].average  # one pass over label sets averages
    rcfg, lcfg = configs(LARGE_K, multilabel=True, passes=10)
    assert (lcfg.power_t, lcfg.learning_rate, rcfg.leaf_negatives, rcfg.arity, lcfg.average) == (0.25, 0.1, True, 8,
                                                                                                  False)
    # fewer passes: rates between one pass's (0.5, 0.5) and ten's, geometric in log N; by hand for two
    # passes: 0.5 * 0.2 ** log10(2) = 0.5 * 0.61601 = 0.30801, 0.5 * 0.81171 = 0.40586
    lcfg = configs(LARGE_K, multilabel=True, passes=2)[1]
    assert (lcfg.learning_rate, lcfg.power_t) == (pytest.approx(0.30801, abs=1e-4), pytest.approx(0.40586, abs=1e-4))
    rates = [configs(LARGE_K, multilabel=True, passes=n)[1].learning_rate for n in (1, 2, 3, 5, 10, 20)]
    assert rates == sorted(rates, reverse=True) and rates[-1] == 0.1
    assert configs(LARGE_K, multilabel=True, passes=3, learning_rate=0.7)[1].learning_rate == 0.7
    # below LARGE_K, and oaa's label sets: the pass defaults whatever the passes
    assert (configs(LARGE_K - 1, multilabel=True, passes=2)[1].learning_rate, default("oaa", "learning_rate", 0.5,
            True, 2, LARGE_K)) == (0.1, 0.1)
    rcfg, lcfg = configs(2 * LARGE_K, power_t=0.5, leaf_negatives=True)
    assert (lcfg.power_t, rcfg.leaf_negatives, rcfg.path_weight) == (0.5, True, 1.0)
    assert default("cpt", "power_t", 0.5, k=LARGE_K) == 0.75 and default("oaa", "power_t", 0.5, k=10 ** 6) == 0.5
    # at most 5 levels: 8^5 = 32,768 classes, then 16 (label sets keep 8); a given arity wins
    assert [configs(k)[0].arity for k in (32768, 32769, 100001, 2 ** 20, 2 ** 20 + 1)] == [8, 16, 16, 16, 32]
    assert configs(100001, multilabel=True)[0].arity == 8 and configs(100001, arity=8)[0].arity == 8
    assert default("mtree", "arity", 32, k=100001) == 8


def test_lomtree_internal_nodes_from_large_k_on():
    """Single-label lomtree with k >= LARGE_K: T = 1,023 internal nodes (k-1 below it: None, the
    reduction's own rule), 64 candidates from 2 levels up, the label's own update weighted 16, the
    16 best-scored candidates trained; a given value still wins; the model's T follows."""
    from lomtree_cli.commands import new_model_configs
    from lomtree_cli.reductions.lomtree import LomTree
    from lomtree_cli.reductions.registry import LARGE_K

    def rcfg(k, **given):
        p = {f: None for f in reduction_options()}
        p.update(reduction="lomtree", k=k, seed=0, learning_rate=None, sgd=False, initial_t=0.0, power_t=None,
                 loss=None, quantile_tau=0.5, decay_learning_rate=None, l1=0.0, l2=0.0, passes=1)
        p.update(given)
        return new_model_configs(p)[0]

    assert rcfg(LARGE_K).max_internal_nodes == 1023 and LomTree.max_internal(rcfg(20001)) == 1023
    assert rcfg(LARGE_K - 1).max_internal_nodes is None and LomTree.max_internal(rcfg(LARGE_K - 1)) == LARGE_K - 2
    assert rcfg(2 * LARGE_K, max_internal_nodes=5000).max_internal_nodes == 5000
    big, small = rcfg(LARGE_K), rcfg(LARGE_K - 1)
    assert (big.leaf_labels, big.candidates_up, big.leaf_positive_weight, big.trained_candidates) == (64, 2, 16.0, 16)
    assert (small.leaf_labels, small.candidates_up, small.leaf_positive_weight, small.trained_candidates) == (32, 3, 1.0, 0)
    assert rcfg(LARGE_K, leaf_positive_weight=2.0).leaf_positive_weight == 2.0
    assert rcfg(LARGE_K, leaf_labels=32).leaf_labels == 32


PACKAGE = Path(lomtree_cli.__file__).parent


def _names_spelled(path: Path) -> list:
    """(line, name) of every string constant of a Python file that is a reduction's name."""
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in REGISTRY]


def test_reduction_names_only_in_the_registry_and_their_modules(tmp_path):
    """What a reduction can do is a field of its entry (or a method of its class), not a list of
    names elsewhere: outside the registry and each reduction's own module no module of the package
    spells a reduction's name (``version.PROG``, the program's name, is the one other "lomtree")."""
    own = {PACKAGE / "reductions" / "registry.py"} | \
        {PACKAGE.parent / (spec.target.split(":")[0].replace(".", "/") + ".py") for spec in REGISTRY.values()}
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if path not in own for line, name in _names_spelled(path)
             if not (path == PACKAGE / "version.py" and name == PROG)]
    assert found == []
    probe = tmp_path / "probe.py"
    probe.write_text('if name in ("filter", "rtree"):\n    x = f"-r {name}"  # "oaa" in a comment\n')
    assert _names_spelled(probe) == [(1, "filter"), (1, "rtree")]


def _kernels_defined(path: Path) -> list:
    """Names of the functions of a Python file decorated as numba kernels (``kernel``, ``jit``, ``njit``)."""
    out = []
    for f in ast.walk(ast.parse(path.read_text())):
        for d in getattr(f, "decorator_list", ()) if isinstance(f, ast.FunctionDef) else ():
            d = d.func if isinstance(d, ast.Call) else d
            if (d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")) in ("kernel", "jit", "njit"):
                out.append(f.name)
    return out


def test_numba_kernels_live_in_kernels(tmp_path):
    """A reduction's module holds its class; its numba kernels are in ``lomtree_cli/kernels/``."""
    assert [f"{p.name}: {k}" for p in sorted((PACKAGE / "reductions").glob("*.py")) for k in _kernels_defined(p)] == []
    assert "lomtree_process" in _kernels_defined(PACKAGE / "kernels" / "lomtree_kernels.py")
    probe = tmp_path / "probe.py"
    probe.write_text("@kernel(nogil=True)\ndef a():\n    pass\n\n\n@numba.njit\ndef b():\n    pass\n")
    assert _kernels_defined(probe) == ["a", "b"]
