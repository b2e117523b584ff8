"""The progressive-validation table (docs/ALGORITHMS.md §4.2)."""

import io

import numpy as np

from lomtree_cli.metrics import HEADER, Progress, format_row


def test_first_line_matches_spec_vector():
    assert format_row(1.0, 1.0, 1, 1.0, 3, 1, 5) == \
        "1.000000 1.000000            1            1.0              3              1        5"


def test_header_is_verbatim():
    assert HEADER.splitlines()[0].startswith("average  since         example")


def test_doubling_points_and_averages():
    out = io.StringIO()
    pr = Progress(out)
    n = 10
    labels = np.arange(1, n + 1, dtype=np.int64)
    preds = labels.copy()
    preds[::2] = 0
    losses = (preds != labels).astype(float)
    pr.add_batch(labels, np.ones(n), preds, losses, np.full(n, 3), np.zeros(n, bool))
    rows = out.getvalue().splitlines()[2:]
    assert [int(r.split()[2]) for r in rows] == [1, 2, 4, 8]
    assert pr.average_loss == 0.5
    assert rows[0].startswith("1.000000 1.000000")


def test_unlabeled_examples_show_unknown_and_na():
    out = io.StringIO()
    pr = Progress(out)
    pr.add_batch(np.zeros(1, np.int64), np.ones(1), np.ones(1, np.int64), np.zeros(1), np.ones(1, np.int64),
                 np.zeros(1, bool))
    assert "unknown" in out.getvalue() and "n.a." in out.getvalue()
