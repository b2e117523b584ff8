"""Several models predicting as one (``lomtree predict -i A -i B``, ``lomtree_cli/ensemble.py``):
the combination against a slow reference, the CLI against its single models' own answers, the
refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.ensemble import WIDTH, combine
from tests.helpers import cli, one_error, separable_lines


def slow_combine(answers, n):
    """Per row: the mean over members of each label's ranking score (its probability when a member
    gives none), best first, ties to the smaller label, each shown with its mean probability."""
    m = len(answers[0][0])
    labs, probs = np.zeros((m, n), np.int64), np.zeros((m, n))
    for i in range(m):
        score: dict = {}
        prob: dict = {}
        for a in answers:
            for lab, p, r in zip(a[0][i], a[1][i], a[-1][i]):
                if lab > 0:
                    score[int(lab)] = score.get(int(lab), 0.0) + float(r) / len(answers)
                    prob[int(lab)] = prob.get(int(lab), 0.0) + float(p) / len(answers)
        best = sorted(score.items(), key=lambda t: (-t[1], t[0]))[:n]
        for j, (lab, _) in enumerate(best):
            labs[i, j], probs[i, j] = lab, prob[lab]
    return labs, probs


@st.composite
def member_answers(draw):
    rows, width, members = draw(st.integers(0, 6)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    ranked = draw(st.booleans())  # members that rank by scores of their own (plt's path weight)
    answers = []
    for _ in range(members):
        la = np.zeros((rows, width), np.int64)
        pa = np.zeros((rows, width))
        ra = np.zeros((rows, width))
        for i in range(rows):
            labs = draw(st.lists(st.integers(1, 9), unique=True, max_size=width))
            la[i, :len(labs)] = labs
            # probabilities and scores on a coarse grid, so that ties happen
            pa[i, :len(labs)] = [draw(st.integers(0, 4)) / 4 for _ in labs]
            ra[i, :len(labs)] = [draw(st.integers(0, 4)) / 4 for _ in labs]
        answers.append((la, pa, ra) if ranked else (la, pa))
    return answers, draw(st.integers(1, 6))


@settings(max_examples=200, deadline=None)
@given(member_answers())
def test_combine_is_the_mean_of_the_members_probabilities(case):
    answers, n = case
    labs, probs = combine(answers, n)
    want_l, want_p = slow_combine(answers, n)
    np.testing.assert_array_equal(labs, want_l)
    np.testing.assert_allclose(probs, want_p, rtol=0, atol=1e-12)


def test_combine_by_hand():
    a = (np.array([[3, 1, 0]]), np.array([[0.6, 0.3, 0.0]]))
    b = (np.array([[1, 2, 3]]), np.array([[0.5, 0.3, 0.1]]))
    labs, probs = combine([a, b], 4)
    assert labs.tolist() == [[1, 3, 2, 0]]  # 1: (0.3 + 0.5) / 2 = 0.4, 3: 0.35, 2: 0.15
    np.testing.assert_allclose(probs, [[0.4, 0.35, 0.15, 0.0]])
    # ranked by the mean ranking score, shown with the mean probability
    a = (np.array([[3, 1]]), np.array([[0.2, 0.1]]), np.array([[0.5, 0.6]]))
    b = (np.array([[1, 2]]), np.array([[0.3, 0.4]]), np.array([[0.55, 0.5]]))
    labs, probs = combine([a, b], 3)
    assert labs.tolist() == [[1, 2, 3]]  # 1: (0.6 + 0.55) / 2, 2: 0.25, 3: 0.25 (a tie: smaller label first)
    np.testing.assert_allclose(probs, [[0.2, 0.2, 0.1]])


def test_plt_ranking_scores_order_its_answer_and_are_its_probabilities_at_path_weight_1():
    """``rank_top``: the answer is in the order of its ranking scores, each ``P(leaf | parent)
    P(parent path)^gamma`` in 0..1, at least the path probability for gamma < 1 and that
    probability itself (up to the raw score's tie-break factor) for gamma = 1."""
    from tests.helpers import make_batch
    from tests.test_plt import make_plt, run, stream

    test = stream(30, 200, seed=6)
    batch = make_batch([list(zip(e[2], e[3])) for e in test], [e[0] for e in test], [e[1] for e in test], bits=12)
    for gamma in (1.0, 0.5, 0.0):
        red = make_plt(30, arity=4, beam=4, tree_buffer=0, path_weight=gamma)
        run(red, stream(30, 1500, seed=5))
        labs, probs, ranks, _ = red.rank_top(batch, 6)
        assert (labs > 0).all() and (np.diff(ranks, axis=1) <= 1e-12).all()
        assert ((0 < ranks) & (ranks <= 1)).all()
        if gamma == 1.0:
            np.testing.assert_allclose(ranks, probs, rtol=1e-5)
        else:
            assert (ranks >= probs * (1 - 1e-5)).all() and (ranks > probs * 1.01).any()


def _train(tmp_path, name, *opts, lines=None, k=12):
    data = tmp_path / "train.vw"
    if not data.exists():
        data.write_text("\n".join(lines or separable_lines(k, 1500, seed=3, noise_feats=4, vocab=30)) + "\n")
    code, _, err = cli("train", "-k", k, data, "-f", tmp_path / name, "--quiet", *opts)
    assert code == 0, err
    return tmp_path / name


def _top(text):
    """(labels, probabilities) of ``--top-k`` lines ``label:p label:p ...``."""
    rows = [[tok.split(":") for tok in line.split()] for line in text.splitlines()]
    return [[int(t[0]) for t in r] for r in rows], [[float(t[1]) for t in r] for r in rows]


@pytest.mark.parametrize("reductions", [("plt", "plt"), ("plt", "cpt", "oaa")])
def test_cli_ensemble_averages_its_models_answers(tmp_path, reductions):
    """``predict -i A -i B --top-k 3`` is the mean of each model's own ``--top-k WIDTH`` answer
    (read from the CLI, rounded to its 6 printed digits), and its report's error is that of its
    first labels."""
    # plt ranks by the probabilities it prints at path weight 1 (otherwise by scores it does not print)
    models = [_train(tmp_path, f"m{i}.lt", "-r", r, "--seed", i, *(("--path-weight", 1) if r == "plt" else ()))
              for i, r in enumerate(reductions)]
    test = tmp_path / "test.vw"
    test.write_text("\n".join(separable_lines(12, 200, seed=4, noise_feats=4, vocab=30)) + "\n")
    answers = []
    for m in models:
        code, out, err = cli("predict", "-i", m, test, "--top-k", WIDTH, "--quiet")
        assert code == 0, err
        la, pa = _top(out)
        width = max(len(r) for r in la)
        answers.append((np.array([r + [0] * (width - len(r)) for r in la]),
                        np.array([r + [0.0] * (width - len(r)) for r in pa])))
    want_l, want_p = slow_combine(answers, 3)
    args = [a for m in models for a in ("-i", m)]
    code, out, err = cli("predict", *args, test, "--top-k", 3, "--quiet", "--report", tmp_path / "r.json")
    assert code == 0, err
    got_l, got_p = _top(out)
    np.testing.assert_allclose(np.array(got_p), want_p, atol=1e-5)
    # a label whose rounded mean ties another's may swap with it: compare where the scores differ
    clear = np.abs(np.diff(want_p, axis=1)) > 1e-5
    assert all(got_l[i][0] == want_l[i, 0] for i in range(len(got_l)) if clear[i, 0])
    report = json.loads((tmp_path / "r.json").read_text())
    y = [int(line.split()[0]) for line in test.read_text().splitlines()]
    err_rate = np.mean([g[0] != t for g, t in zip(got_l, y)])
    assert report["average_loss"] == pytest.approx(err_rate)
    assert report["reduction"] == "+".join(reductions) and report["ensemble"] == len(models)
    code, plain, err = cli("predict", *args, test, "-p", "-", "--quiet")
    assert [int(v) for v in plain.split()] == [g[0] for g in got_l]


def test_an_ensemble_of_one_model_is_the_model(tmp_path):
    """Two copies of a model predict as the model: the same probabilities, in the same order, and
    the same labels wherever a probability is not tied with its neighbours' (ties go to the
    smaller label in an ensemble; plt floors unlikely labels at the same tiny probability and
    keeps its own order among them; ``--path-weight 1`` makes plt rank by the probabilities it
    prints, which an ensemble averages); the same file given twice is one model, not an ensemble."""
    import shutil

    m = _train(tmp_path, "a.lt", "-r", "plt", "--path-weight", 1)
    copy = tmp_path / "b.lt"
    shutil.copyfile(m, copy)
    test = tmp_path / "train.vw"
    code, one, err = cli("predict", "-i", m, test, "--top-k", 5, "--quiet")
    assert code == 0, err
    code, two, err = cli("predict", "-i", m, "-i", copy, test, "--top-k", 5, "--quiet", "--report", tmp_path / "two.json")
    assert code == 0, err
    (l1, p1), (l2, p2) = _top(one), _top(two)
    assert p1 == p2
    compared = 0
    for la, lb, pr in zip(l1, l2, p1):
        for j, p in enumerate(pr):
            # the last one may tie with the first label past the cut
            if (j == 0 or pr[j - 1] != p) and j + 1 < len(pr) and pr[j + 1] != p:
                assert la[j] == lb[j]
                compared += 1
    assert compared > len(l1)  # most answers hold untied labels
    assert json.loads((tmp_path / "two.json").read_text())["ensemble"] == 2
    cli("predict", "-i", m, "-i", m, test, "--quiet", "--report", tmp_path / "once.json")
    once = json.loads((tmp_path / "once.json").read_text())
    assert once["reduction"] == "plt" and "ensemble" not in once


def _label_set_models(tmp_path, n, seed):
    """``n`` lines of one or two labels of 1..8 (a feature per label, one of noise) and the plt
    and oaa label-set models trained on them: (lines, plt model, oaa model)."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        labs = sorted(set(int(v) for v in rng.integers(1, 9, size=2)))
        lines.append(",".join(map(str, labs)) + " | " + " ".join(f"f{v}" for v in labs) + f" n{rng.integers(9)}")
    a = _train(tmp_path, "a.lt", "-r", "plt", "--multilabel", lines=lines, k=8)
    b = _train(tmp_path, "b.lt", "-r", "oaa", "--multilabel", lines=lines, k=8)
    return lines, a, b


def test_multilabel_ensemble_thresholds_the_mean_marginals(tmp_path):
    lines, a, b = _label_set_models(tmp_path, 800, seed=0)
    test = tmp_path / "train.vw"
    outs = []
    for m in (a, b):
        code, out, err = cli("predict", "-i", m, test, "--top-k", 8, "--quiet")
        assert code == 0, err
        outs.append([dict((int(t.split(":")[0]), float(t.split(":")[1])) for t in line.split()) for line in out.splitlines()])
    code, out, err = cli("predict", "-i", a, "-i", b, test, "--threshold", 0.4, "--quiet")
    assert code == 0, err
    for line, pa, pb in zip(out.splitlines(), *outs):
        mean = {lab: (pa.get(lab, 0.0) + pb.get(lab, 0.0)) / 2 for lab in set(pa) | set(pb)}
        want = {lab for lab, p in mean.items() if p >= 0.4 + 1e-5}
        maybe = {lab for lab, p in mean.items() if abs(p - 0.4) <= 1e-5}
        got = {int(t.split(":")[0]) for t in line.replace(",", " ").split()}
        assert want <= got <= want | maybe


def test_ensembles_refuse_what_cannot_be_averaged(tmp_path):
    plt_model = _train(tmp_path, "p.lt", "-r", "plt")
    test = tmp_path / "train.vw"
    filt = _train(tmp_path, "f.lt", "-r", "filter")
    line = one_error(*cli("predict", "-i", plt_model, "-i", filt, test, "--quiet")[::2], 2)
    assert "f.lt" in line and "no probabilities" in line
    bits = _train(tmp_path, "b.lt", "-r", "plt", "-b", 20)
    line = one_error(*cli("predict", "-i", plt_model, "-i", bits, test, "--quiet")[::2], 2)
    assert "b.lt" in line and "bits" in line
    other_k = _train(tmp_path, "k.lt", "-r", "plt", k=13)
    line = one_error(*cli("predict", "-i", plt_model, "-i", other_k, test, "--quiet")[::2], 2)
    assert "13 classes" in line
    line = one_error(*cli("predict", "-i", plt_model, "-i", str(plt_model) + "x", test, "--quiet")[::2], 2)
    assert "x" in line
    line = one_error(*cli("predict", "-i", plt_model, "-i", bits, "--daemon", "--port", 0)[::2], 2)
    assert "b.lt" in line and "bits" in line  # the daemon loads an ensemble as predict does
    line = one_error(*cli("predict", "-i", plt_model, "-i", bits, test, "--dask", "local:1")[::2], 2)
    assert "--dask" in line


# -- the Python API's Ensemble ------------------------------------------------------------------

def test_api_ensemble_predicts_as_the_cli_ensemble(tmp_path):
    """``Ensemble([Classifier.load(a), Classifier.load(b)])`` answers what ``lomtree predict -i a
    -i b`` prints: the same top labels and probabilities (to the CLI's 6 digits), the same first
    labels; ``predict_proba`` rows are distributions whose best column is ``predict``'s label,
    and ``score`` is the accuracy of ``predict``."""
    from lomtree_cli import Classifier, Ensemble

    models = [_train(tmp_path, f"m{i}.lt", "-r", r, "--seed", i) for i, r in enumerate(("plt", "cpt"))]
    test = tmp_path / "test.vw"
    lines = separable_lines(12, 150, seed=5, noise_feats=4, vocab=30)
    test.write_text("\n".join(lines) + "\n")
    args = [a for m in models for a in ("-i", m)]
    code, out, err = cli("predict", *args, test, "--top-k", 3, "--quiet")
    assert code == 0, err
    want_l, want_p = _top(out)
    code, plain, err = cli("predict", *args, test, "-p", "-", "--quiet")
    assert code == 0, err
    ens = Ensemble([Classifier.load(str(m)) for m in models])
    labs, probs = ens.predict_top(lines, 3)
    np.testing.assert_allclose(probs, np.array(want_p), atol=1e-5)
    clear = np.abs(np.diff(np.array(want_p), axis=1)) > 1e-5
    assert all(labs[i][0] == want_l[i][0] for i in range(len(lines)) if clear[i, 0])
    first = ens.predict(lines)
    assert first.tolist() == [int(v) for v in plain.split()]
    proba = ens.predict_proba(lines)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (np.asarray(ens.classes_)[proba.argmax(axis=1)] == first)[clear[:, 0]].all()
    y = [int(line.split()[0]) for line in lines]
    assert ens.score(lines, y) == pytest.approx(np.mean(first == np.array(y)))
    assert "2 members" in repr(ens)


def test_api_ensemble_refuses_what_cannot_be_averaged(tmp_path):
    from lomtree_cli import Classifier, Ensemble

    a = Classifier.load(str(_train(tmp_path, "a.lt", "-r", "plt")))
    with pytest.raises(ValueError, match=r"members\[1\]: reduction filter gives no probabilities"):
        Ensemble([a, Classifier.load(str(_train(tmp_path, "f.lt", "-r", "filter")))])
    with pytest.raises(ValueError, match=r"members\[1\]: its input options differ from members\[0\]'s \(bits"):
        Ensemble([a, Classifier.load(str(_train(tmp_path, "b.lt", "-r", "plt", "-b", 20)))])
    with pytest.raises(ValueError, match=r"members\[1\]: it has 13 classes"):
        Ensemble([a, Classifier.load(str(_train(tmp_path, "k.lt", "-r", "plt", k=13)))])
    with pytest.raises(ValueError, match="at least one"):
        Ensemble([])
    with pytest.raises(TypeError, match=r"members\[1\] is a str"):
        Ensemble([a, "b.lt"])
    with pytest.raises(ValueError, match="not fitted"):  # NotFittedError (scikit-learn's when loaded)
        Ensemble([a, Classifier(reduction="plt", classes=12)])
    # no learning: an Ensemble has no fit
    assert not hasattr(Ensemble([a]), "fit")


def test_api_ensemble_of_label_set_models_thresholds_as_the_cli(tmp_path):
    """Multi-label members: ``Ensemble.predict(lines, threshold=0.4)`` gives the label sets that
    ``lomtree predict -i a -i b --threshold 0.4`` prints."""
    from lomtree_cli import Classifier, Ensemble

    lines, a, b = _label_set_models(tmp_path, 600, seed=1)
    code, out, err = cli("predict", "-i", a, "-i", b, tmp_path / "train.vw", "--threshold", 0.4, "--quiet")
    assert code == 0, err
    want = [sorted(int(t) for t in line.replace(",", " ").split()) for line in out.splitlines()]
    got = Ensemble([Classifier.load(str(a)), Classifier.load(str(b))]).predict(lines, threshold=0.4)
    assert [sorted(int(v) for v in s) for s in got] == want
    assert any(len(s) > 1 for s in want) and any(len(s) == 1 for s in want)
