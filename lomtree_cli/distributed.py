"""Prediction and data-parallel training on Dask (``pip install lomtree[dask]``).

``lomtree predict -i MODEL FILES... --dask ADDRESS`` and ``lomtree train ... --dask ADDRESS
[--sync-every N]``; ``ADDRESS`` is a scheduler (``tcp://host:8786``) or ``local:N``, a
``LocalCluster`` of N worker processes on this machine, listening on 127.0.0.1 only. Workers must
read the input files at the same paths (a shared file system, as ``dask.bag.read_text`` assumes);
the model travels as its file's bytes (``client.scatter``: once per worker), never as a pickle of
the model's objects.

Prediction
    The inputs are cut into line-aligned byte ranges (``line_ranges``: about ``RANGE_BYTES`` each,
    at least four per worker; a compressed file is one range). A task predicts one range with the
    model loaded once per worker process (``_MODELS``), through the same ``driver.Runner`` and
    ``PredictionWriter`` as ``lomtree predict``, and returns the answer text; the client writes the
    ranges in input order: the output bytes equal a single-process ``lomtree predict``'s. With
    ``-p DIR/`` each input gets ``DIR/<its file name>.pred``. The summary (and ``--report``) adds
    up every range's counts (a multi-label model's P@k, nDCG@k, PSP@k and F1 counts too: equal to
    one process's); there is no progress table (ranges finish out of order). An XMC file's ranges
    begin after its header line.

Training (VW's AllReduce, done by the client)
    Data-parallel over W shards, W = the workers or ``--shards W`` (more shards than workers
    simulate W machines on fewer: the tasks queue, at most 2 per worker in flight, and are averaged
    exactly as W workers' models): each input file is cut into line-aligned blocks of about
    ``SHARD_BLOCK_BYTES`` and shard i takes blocks i, i + W, i + 2W, ... of every file
    (``shards_of``; a worker reads only its own blocks). In each round every unfinished shard's task
    loads the current model (bytes), runs the normal online learner (``driver.Runner``, holdout
    included) on its next N examples, and returns its model; the client averages them
    (``average_models``: the models in shard order, loaded one at a time into dense running sums)
    and starts the next round. N (``sync_interval``): in the first pass ``--sync-first`` (100)
    examples, then growing by ``--sync-growth`` (1.25: syncs after 100, 225, 381, 576, ... examples
    of each shard: log(1 + shard / 400) / log 1.25 syncs, 8 for 1,600 examples, 36 for a million;
    doubling made 5 and 14), at most ``--sync-every`` when given;
    later passes ``--sync-every`` (0: the whole shard, one sync per pass). In these early rounds
    the workers learn at ``worker_rate`` times the model's learning rate, W^(1 - power_t) for W
    shards (sqrt(W)), for tree nodes W^((1 - power_t) F / N), F = ``--sync-first``, fading as the
    rounds lengthen: an average keeps about one
    worker's progress, where one process would go about W^(1 - power_t) times as far on the same
    examples (``--plain-rate``: the model's rate). Early syncs and rates are what bring one pass on
    2 and 4 workers within 1 point of one process on Sector (bench/notes/dask.md).
    Weights are averaged (``average_models``, the rule by ``merge_rule``): OAA's as VW's
    ``accumulate_weighted_avg`` does under the adaptive update: per slot, weighted by each
    worker's adaptive sum G, and G and the normaliser N become their G-weighted means. Tree nodes'
    (Filter tree, Rtree, CPT, PLT) by increments: where a worker's G of a slot grew in the round
    (by dG_i), the slot becomes the round's start w0 plus the dG_i-weighted mean of the workers'
    changes, and G the start's plus the dG-weighted mean increment (N as VW's): a worker that did
    not train a node in the round does not pull it back to w0 (with VW's rule its stale copy
    weighs G0). Both give one shard's model from identical shards; from a zero model they agree.
    Under ``--sgd`` a plain mean. The per-regressor normaliser sums (S, T) and
    the SGD clock are averaged, node counts (Filter tree, Rtree) add up, and so do a multi-label
    model's label counts (PSP@k's propensities: those of every shard's trained examples). At the end of a pass the
    client applies the reduction's pass hook and the learning-rate decay, and keeps the best
    pass on holdout, as ``lomtree train`` does. The progressive-validation table is merged:
    every round's per-example results are added in shard order. Which reductions train here, and
    how, is their registry entry's ``dask``: ``"fixed"`` ones (OAA, Filter tree, Rtree) are
    data-parallel from the first example. ``"grown"`` ones (CPT, PLT) grow their label tree in
    pass 1, which runs the shards one after the other, each task continuing the previous one's
    model on one worker (CPT: exactly the single-process model of the input in shard order; PLT
    builds its k-means tree from the first shard's buffer); after pass 1 every label is in the
    tree, which is then frozen (a worker that changed it is an error) and the node regressors train
    data-parallel, pass 2 with the early syncs and rates. A PLT that replays its tree buffer in a
    random order (``--shuffle-buffer``: label sets from k = 4,096) instead builds its tree once,
    before pass 1 (``shared_tree``: every shard's label-centroid sums add up to the whole input's,
    so the tree is one process's when its buffer holds the input), and trains data-parallel from
    the first example; each worker reads its shard in a seeded random order of its own
    (``shard_order``; parsed once and kept in the worker, ``_shard_examples``), as the buffer's
    replay would, the same order in every pass while examples are held out, a new one per pass
    otherwise (one process's ``--shuffle-passes``). LOMtree (its swaps go on in every pass) and mtree (label re-assignment) are refused.

Averaging identical shards gives exactly the model of one shard (the weighted means of equal
float32 values are exact; with the early rates, of one shard trained at those rates);
``tests/test_dask.py`` checks it, and outputs equal to local runs.
"""

from __future__ import annotations

import io
import os
import sys
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from .errors import ConfigError, InputError, LomtreeError
from .parsing import COMPRESSED_ENDINGS
from .reductions.registry import REGISTRY

#: target size of a prediction range
RANGE_BYTES = 8 << 20
#: training shards: target size of the blocks a file is cut into (shard i takes blocks i, i + W, ...)
SHARD_BLOCK_BYTES = 1 << 16
#: training shards: at most this many blocks of a file per shard (larger files, larger blocks)
MAX_SHARD_BLOCKS = 4096
#: ``--sync-first``: in the first pass the workers' models are averaged after this many examples of
#: each shard, then at intervals growing by ``--sync-growth`` (bench/notes/dask.md)
SYNC_FIRST = 100
#: ``--sync-growth``: the factor between two early sync intervals (2 would double them: fewer syncs,
#: but the Filter tree and Rtree on 4 workers stay more than 1 point behind one process)
SYNC_GROWTH = 1.25
#: most local workers (``local:N``)
MAX_LOCAL_WORKERS = 64
#: reduction state arrays that count examples: the workers' increments add up when averaging
COUNTS = ("node_counts", "gamma_stats")


# -- the cluster ----------------------------------------------------------------------------------

def _import_dask():
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("--dask needs Dask: pip install 'lomtree[dask]'") from None
    return Client, LocalCluster


@contextmanager
def connect(address: str):
    """A ``dask.distributed.Client`` for ``address`` (closed on exit): ``local:N`` starts a
    LocalCluster of N single-threaded worker processes on 127.0.0.1; the scheduler's HTTP server
    (which it always starts) listens on 127.0.0.1 at a free port, not on the shared 8787."""
    Client, LocalCluster = _import_dask()
    import logging

    cluster = None
    if address.startswith("local:"):
        try:
            n = int(address[len("local:"):])
        except ValueError:
            n = 0
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise ConfigError(f"--dask local:N: N must be in 1..{MAX_LOCAL_WORKERS}, got {address!r}")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
        client = Client(cluster)
    else:
        _probe_scheduler(address)
        try:
            client = Client(address, timeout="10s")
        except (OSError, TimeoutError, ValueError) as e:
            raise ConfigError(f"--dask: cannot reach the scheduler at {address}: {e}") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _probe_scheduler(address: str, wait: float = 5.0) -> None:
    """ConfigError unless something at the TCP ``address`` speaks first, as a dask scheduler
    does (it sends its handshake on every connection): dask's client waits without limit for
    a handshake that a server of another protocol (HTTP) never sends."""
    import socket

    rest = address[len("tcp://"):] if address.startswith("tcp://") else address
    if "://" in rest:
        return  # tls://, ucx://, ...: left to dask
    host, _, port = rest.rpartition(":")
    try:
        port_no = int(port.split("/")[0])
    except ValueError:
        raise ConfigError(f"--dask {address}: expected tcp://HOST:PORT or local:N") from None
    host = host.strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, port_no), timeout=wait) as s:
            s.settimeout(wait)
            got = s.recv(8)
    except socket.timeout:
        raise ConfigError(f"--dask {address}: no dask scheduler answers there (a server accepted the connection "
                          f"but sent no handshake within {wait:g} s)") from None
    except OSError as e:
        raise ConfigError(f"--dask: cannot reach the scheduler at {address}: {e.strerror or e}") from None
    if not got:
        raise ConfigError(f"--dask {address}: no dask scheduler answers there (the connection was closed)")


def n_workers(client) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))


# -- inputs ---------------------------------------------------------------------------------------

def check_inputs(paths: list) -> None:
    if not paths or "-" in paths:
        raise ConfigError("--dask reads input files (the workers open them): standard input cannot be split")
    for p in paths:
        if not os.path.isfile(p):
            raise ConfigError(f"--dask: input {p} is not a file")


def body_start(path: str, cfg) -> int:
    """Where the examples of ``path`` begin: after an XMC file's header line (``N F L``, checked
    here: InputError), else 0 (in a compressed file: of its decompressed bytes)."""
    if cfg.format != "xmc":
        return 0
    from .parsing import open_input, read_xmc_header

    f, name = open_input(path)
    with f:
        read_xmc_header(f, name)
        return f.tell()


def line_ranges(path: str, parts: int, begin: int = 0) -> list:
    """``[(start, end), ...]``: ``path`` from byte ``begin`` on cut into at most ``parts`` byte
    ranges, each ending just after a newline (or at the end of the file); a compressed file is one
    range ``(begin, -1)``."""
    if path.endswith(COMPRESSED_ENDINGS):
        return [(begin, -1)]
    size = os.path.getsize(path)
    cuts = [begin]
    with open(path, "rb") as f:
        for i in range(1, max(1, parts)):
            target = begin + (size - begin) * i // parts
            if target <= cuts[-1]:
                continue
            f.seek(target - 1)
            pos = target - 1
            while True:
                block = f.read(1 << 16)
                if not block:
                    pos = size
                    break
                j = block.find(b"\n")
                if j >= 0:
                    pos += j + 1
                    break
                pos += len(block)
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:]))


def _read(path: str, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of ``path``; a compressed file (``end`` -1): its decompressed bytes from ``start``."""
    if end < 0:
        from .parsing import open_input

        f, _ = open_input(path)
        with f:
            return f.read()[start:]
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def _lines_before(path: str, start: int) -> int:
    """Newlines before byte ``start`` of ``path`` (decompressed), for messages only."""
    from .parsing import open_input

    n = 0
    f, _ = open_input(path)
    with f:
        left = start
        while left > 0:
            b = f.read(min(left, 1 << 20))
            if not b:
                break
            n += b.count(b"\n")
            left -= len(b)
    return n


def _parse(raw: bytes, cfg, path: str, start: int):
    """(batch, error) of the complete lines ``raw``, which start at byte ``start`` of ``path``. The
    batch's line numbers count from ``raw``'s first line (1); error messages name the file's lines.
    In strict mode the batch holds the lines before the first bad one and ``error`` is its
    InputError (else None)."""
    from . import parsing

    if start == 0 and raw.startswith(parsing.BOM):
        raw = raw[3:]
    batch, errs = parsing.parse_chunk(raw, cfg, path)
    if errs and start > 0:
        off = _lines_before(path, start)
        errs = [InputError(e.source, e.line + off, e.reason, e.detail, e.column) for e in errs]
    if errs and not cfg.skip_invalid:
        return batch, errs[0]  # the lines before the bad one, then the error (as the CLI's reader)
    batch.skipped = errs
    return batch, None


def _batches(raw: bytes, cfg, path: str, start: int, chunk: int = 1 << 20):
    """``(batch, chunk start, chunk bytes)`` of ``raw`` (complete lines from byte ``start`` of
    ``path``) in chunks of about ``chunk`` bytes."""
    pos = 0
    n = len(raw)
    while pos < n:
        cut = n if n - pos <= chunk else raw.rfind(b"\n", pos, pos + chunk) + 1
        if cut <= pos:  # a line longer than chunk
            cut = raw.find(b"\n", pos + chunk)
            cut = n if cut < 0 else cut + 1
        piece = raw[pos:cut]
        batch, err = _parse(piece, cfg, path, start + pos)
        if len(batch) or batch.skipped:
            yield batch, start + pos, piece
        if err is not None:
            raise err
        pos = cut


# -- worker side ------------------------------------------------------------------------------------

#: worker process: a shard's examples parsed, for the rounds of a shuffled pass (``_shard_examples``)
_SHARDS: dict = {}
#: most feature entries the worker keeps parsed over its shards (the oldest shard is dropped first)
SHARD_CACHE_ENTRIES = 1 << 25
#: examples a worker learns at a time from a shard read in a random order
ORDER_STEP = 4096


def _shard_examples(shard: list, cfg):
    """(Worker) ``(batch, skipped messages)``: every example of ``shard`` in file order as one
    batch, parsed once per worker process and kept (``_SHARDS``, keyed by the ranges, the files'
    sizes and times and the input options) for the rounds after; an InputError as ``_batches``."""
    from .passorder import concat

    key = (tuple(tuple(r) for r in shard), tuple(_file_stamp(p) for p, _, _ in shard), repr(cfg))
    hit = _SHARDS.pop(key, None)
    if hit is None:
        batches, skipped = [], []
        for path, start, end in shard:
            for batch, _, _ in _batches(_read(path, start, end), cfg, path, start):
                skipped.extend(e.message() for e in batch.skipped)
                if len(batch):
                    batches.append(batch)
        hit = (concat(batches) if batches else None, skipped)
    _SHARDS[key] = hit  # the newest last
    total = sum(0 if b is None else int(b.indptr[-1]) for b, _ in _SHARDS.values())
    while len(_SHARDS) > 1 and total > SHARD_CACHE_ENTRIES:
        b, _ = _SHARDS.pop(next(iter(_SHARDS)))
        total -= 0 if b is None else int(b.indptr[-1])
    return hit


def _file_stamp(path: str) -> tuple:
    st = os.stat(path)
    return (path, st.st_size, st.st_mtime_ns)


def shard_order(n: int, order: tuple) -> np.ndarray:
    """The random order of a shard's ``n`` examples for ``order`` = (seed, pass key, shard index):
    every worker that reads the shard draws the same one."""
    seed, pass_key, shard_index = order
    return np.random.default_rng([int(seed) & (2**64 - 1), int(pass_key), int(shard_index)]).permutation(n)


def shard_label_counts(shard: list, cfg, k: int):
    """(Worker) how many examples of ``shard`` carry each label 0..k (a ``_Failure`` on bad input)."""
    try:
        batch, _ = _shard_examples(shard, cfg)
    except LomtreeError as e:
        return _failure(e)
    if batch is None:
        return np.zeros(k + 1, dtype=np.int64)
    return np.bincount(batch.label_sets()[1], minlength=k + 1)[:k + 1].astype(np.int64)


def shard_label_sketch(shard: list, cfg, k: int, seen: np.ndarray, bits: int):
    """(Worker) ``plt.label_sketch`` of every example of ``shard``: the label-centroid sums and
    counts, which add up over the shards to those of the whole input."""
    from .reductions.plt import _label_pairs, label_sketch

    try:
        batch, _ = _shard_examples(shard, cfg)
    except LomtreeError as e:
        return _failure(e)
    if batch is None:
        return np.zeros((seen.size, 1 << bits)), np.zeros(seen.size)
    return label_sketch([batch], [_label_pairs(batch, np.ones(len(batch), dtype=bool))], seen, k, bits)


#: worker process: model key -> LoadedModel (the last model used: loaded once per worker)
_MODELS: dict = {}


def _worker_model(key: str, data: bytes, predict_only: bool):
    from . import model_io

    m = _MODELS.get((key, predict_only))
    if m is None:
        m = model_io.load_model(io.BytesIO(data), predict_only=predict_only)
        _MODELS.clear()
        _MODELS[(key, predict_only)] = m
    return m


class _Recorder:
    """Stands in for ``metrics.Progress`` on a worker: keeps the per-example results so that the
    client can add them to its merged table."""

    def __init__(self):
        self.parts = []
        self.skipped = 0
        self.holdout_reporting = False

    def add_batch(self, labels, weights, preds, losses, nfeat, holdout, zero_one=None, shown=None, shown_pred=None):
        self.parts.append((labels, weights, preds, losses, nfeat, holdout, zero_one))

    def start(self):
        pass

    def record(self):
        if not self.parts:
            return None
        cols = list(zip(*self.parts))
        out = [np.concatenate(c) for c in cols[:6]]
        out.append(None if any(z is None for z in cols[6]) else np.concatenate(cols[6]))
        return out


@dataclass
class _Failure:
    """A ``LomtreeError`` met by a task, returned (not raised: no traceback in the workers' logs)."""

    message: str
    exit_code: int

    def throw(self):
        from .errors import LomtreeError

        e = LomtreeError(self.message)
        e.exit_code = self.exit_code
        raise e


def _failure(e) -> _Failure:
    return _Failure(str(e), int(getattr(e, "exit_code", 1)))


@dataclass
class _PredictResult:
    text: str
    progress: dict
    low_labels: int
    skipped_messages: list
    warned_range: str | None
    failure: _Failure | None = None
    scores: object = None  # a multi-label model's mlmetrics.MultilabelScores of the range (None: none scored)


def predict_range(key: str, data: bytes, path: str, start: int, end: int, skip_invalid: bool,
                  probabilities: bool, top_k: int, max_line_bytes, max_example_features=None,
                  threshold: float | None = None) -> _PredictResult:
    """(Worker) predict the lines of ``path[start:end]`` (``end`` -1: the whole, compressed file)."""
    from .core import Learner
    from .driver import RunOptions, Runner, predict_input
    from .multilabel import set_predictor
    from .output import PredictionWriter
    from .runtime import StopFlag

    loaded = _worker_model(key, data, True)
    opts = RunOptions(quiet=False, probabilities=probabilities, top_k=top_k, max_line_bytes=max_line_bytes,
                      max_example_features=max_example_features,
                      err=io.StringIO(), progress_interval=float("inf"))
    cfg = predict_input(loaded.input_config, skip_invalid, opts)
    runner = Runner(cfg, Learner.of(loaded), opts, learn=False)
    runner.sets = set_predictor(loaded.reduction, top_k, threshold, runner.names, probabilities)
    writer = PredictionWriter(None, label_dict=runner.names)
    writer.f = io.StringIO()
    failure = None
    try:
        raw = _read(path, max(start, 0), end)
        runner.run_pass((b for b, _, _ in _batches(raw, cfg, path, max(start, 0))), 0, False, writer, StopFlag())
    except LomtreeError as e:  # the predictions before it are kept, as by the CLI
        failure = _failure(e)
    pr = runner.progress
    stats = {name: getattr(pr, name) for name in _PROGRESS_SUMS}
    messages = [ln for ln in opts.err.getvalue().splitlines() if ln.startswith("skipping ")]
    warned = next((ln for ln in opts.err.getvalue().splitlines() if ln.startswith("warning: ")), None)
    scores = runner.sets.scores if runner.sets is not None and runner.sets.scored else None
    return _PredictResult(writer.f.getvalue(), stats, runner.low_labels, messages, warned, failure, scores)


#: ``metrics.Progress`` totals that add up over ranges
_PROGRESS_SUMS = ("wl", "wu", "L", "ex", "feats", "wh", "Lh", "skipped", "zero_one")


@dataclass
class _Segment:
    model: bytes
    cursor: tuple  # (range index, byte offset, holdout counter)
    done: bool
    record: list | None
    skipped: list


def train_segment(*args):
    """(Worker) ``_train_segment``, a ``LomtreeError`` returned as a ``_Failure``."""
    try:
        return _train_segment(*args)
    except LomtreeError as e:
        return _failure(e)


def _train_segment(data: bytes, shard: list, cursor: tuple, limit: int, holdout: bool, holdout_period: int,
                   skip_invalid: bool, max_line_bytes: int, rate: float = 1.0, order: tuple | None = None) -> _Segment:
    """(Worker) train the model ``data`` on shard ``shard`` (``[(path, start, end), ...]``) from
    ``cursor`` for ``limit`` examples (0: to the shard's end) with the normal online learner, its
    learning rate times ``rate`` (the model returned keeps its own rate). With ``order`` (seed, pass
    key, shard index) the shard is read in that random order (``shard_order``; the cursor's first
    member is then the position in it)."""
    from . import model_io
    from .core import Learner
    from .driver import RunOptions, Runner
    from .output import PredictionWriter
    from .runtime import StopFlag

    loaded = model_io.load_model(io.BytesIO(data))
    eta = loaded.learner.eta
    if rate != 1.0:
        loaded.learner.set_eta(eta * rate)
    cfg = replace(loaded.input_config, skip_invalid=skip_invalid, max_line_bytes=max_line_bytes)
    opts = RunOptions(quiet=True, holdout_period=holdout_period, err=io.StringIO())
    runner = Runner(cfg, Learner.of(loaded), opts, learn=True)
    runner.progress = rec = _Recorder()
    loaded.reduction.set_need_predictions(True)
    r, offset, counter = cursor
    runner.holdout_counter = counter
    writer = PredictionWriter(None)
    if order is not None:
        from .passorder import take

        batch, skipped = _shard_examples(shard, cfg)
        n = 0 if batch is None else len(batch)
        stop = n if limit <= 0 else min(n, r + limit)
        if r < stop:
            perm = shard_order(n, order)
            for a in range(r, stop, ORDER_STEP):
                runner.run_pass(iter([take(batch, perm[a:min(stop, a + ORDER_STEP)])]), 0, holdout, writer,
                                StopFlag())
        loaded.learner.set_eta(eta)
        model = model_io.model_bytes(loaded.input_config, loaded.learner, loaded.reduction, loaded.passes_done)
        return _Segment(model, (stop, 0, runner.holdout_counter), stop >= n, rec.record(),
                        list(skipped) if r == 0 else [])
    seen = 0
    skipped = []
    while r < len(shard) and (limit <= 0 or seen < limit):
        path, start, end = shard[r]
        raw = _read(path, offset, end if end < 0 else max(end, offset))
        for batch, at, piece in _batches(raw, cfg, path, offset):
            skipped.extend(e.message() for e in batch.skipped)
            after = at + len(piece)
            if limit > 0 and seen + len(batch) > limit:
                keep = limit - seen
                nl = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
                line = int(batch.line_numbers[keep - 1])  # 1-based in piece
                after = at + (int(nl[line - 1]) + 1 if line - 1 < nl.shape[0] else len(piece))
                batch = batch.slice(0, keep)
            runner.run_pass(iter([batch]), 0, holdout, writer, StopFlag())
            seen += len(batch)
            offset = after
            if limit > 0 and seen >= limit:
                break
        else:
            r += 1
            offset = shard[r][1] if r < len(shard) else 0
            continue
        if end >= 0 and offset >= end:
            r += 1
            offset = shard[r][1] if r < len(shard) else 0
    done = r >= len(shard)
    loaded.learner.set_eta(eta)
    model = model_io.model_bytes(loaded.input_config, loaded.learner, loaded.reduction, loaded.passes_done)
    return _Segment(model, (r, offset, runner.holdout_counter), done, rec.record(), skipped)


# -- averaging ----------------------------------------------------------------------------------------

def merge_rule(reduction: str) -> str:
    """``average_models``'s rule for a reduction: VW's ``"average"`` where each regressor is a
    class's (OAA: every regressor trains on every example), ``"increments"`` where it is a tree
    node's (a node trains on the examples that reach it: a worker may barely train it in a round)."""
    return "average" if REGISTRY[reduction].regressors in ("class", "model") else "increments"


def average_models(models, base, rule: str = "increments", work: dict | None = None) -> None:
    """Replace the state of ``base`` (a ``LoadedModel``) by the average of ``models`` (LoadedModels
    trained from ``base``'s state), by ``rule``: ``"increments"`` (the default) or ``"average"``
    (VW's AllReduce averaging; always under ``--sgd``), module docstring. ``models`` is any
    iterable, consumed one model at a time: only running sums over the union of the models'
    non-zero slots are kept (float64, in order of first appearance; a 2^bits int32 array maps a
    slot to its column), so many shards' models never sit in memory at once. ``work`` (a dict the
    caller keeps from one call to the next) keeps those arrays for the next call: a dense model's
    sums are hundreds of MB, and fresh memory costs far more than reused memory (bench/notes/dask.md:
    PyPI names' OAA, 16.7 M slots); a model whose slots are the sums' first columns in order (a
    dense model's always are) is added by slices, its products through one reused buffer."""
    if rule not in ("increments", "average"):
        raise ValueError(f"average_models: unknown rule {rule!r}")
    size = 1 << base.learner.bits
    sgd = base.learner.config.sgd
    increments = rule == "increments" and not sgd
    table0 = base.learner.arrays.table  # the round's start (zeroed only once every model is read)
    work = {} if work is None else work
    n_rows = 1 if sgd else 9 if increments else 6
    row_of = work.pop("row_of", None)  # all -1 between calls
    if row_of is None or row_of.shape[0] != size:
        row_of = np.full(size, -1, dtype=np.int32)
    # the slot of each column of acc; its rows: w (, G, N, Gw, GG, GN; and with "increments" dG, dG dw,
    # dG dG: each model's G increment since base, times its change of w, squared)
    acc, slots = work.pop("acc", None), work.pop("slots", None)
    if acc is None or acc.shape[0] != n_rows:
        acc, slots = np.zeros((n_rows, 0)), np.zeros(0, dtype=np.int64)
    else:
        acc.fill(0.0)
    tmp = work.pop("tmp", np.zeros(0))
    used = 0
    count = 0
    S = T = meta = red_meta = None
    sgd_t = 0.0
    # the reduction: node counts add up (each model's counts since base), the rest must agree; so
    # do a multi-label model's label counts (PSP@k's propensities: those of all the shards' examples)
    before = base.reduction.state()
    red_first, red_counts = {}, {}
    labels0 = base.reduction.label_counts
    labels0 = None if labels0 is None else labels0.copy()
    label_counts = labels0
    try:
        for mm in models:
            s = mm.learner.state()
            nz = s["nz"]  # no repeats: fancy-index += is a per-slot sum
            n = nz.shape[0]
            if n <= used and np.array_equal(slots[:n], nz):
                rows = slice(0, n)
            else:
                first = used == 0
                new = nz[row_of[nz] < 0]
                if new.shape[0]:
                    if used + new.shape[0] > acc.shape[1]:
                        # room for as many again (at most every slot): the next models' few new
                        # slots then need no copy of the sums
                        cap = min(size, max(2 * acc.shape[1], 2 * (used + new.shape[0])))
                        acc = np.concatenate([acc[:, :used], np.zeros((acc.shape[0], cap - used))], axis=1)
                        slots = np.concatenate([slots[:used], np.zeros(cap - used, dtype=np.int64)])
                    row_of[new] = np.arange(used, used + new.shape[0], dtype=np.int32)
                    slots[used:used + new.shape[0]] = new
                    used += new.shape[0]
                # (the first model: its slots, in order, are the first columns)
                rows = slice(0, n) if first else row_of[nz]
            if tmp.shape[0] < n:
                tmp = np.empty(n)
            t = tmp[:n]

            def add(i, x):
                """acc[i, rows] += x (x float32 or float64, summed in float64)"""
                if isinstance(rows, slice):
                    np.add(acc[i, rows], x, out=acc[i, rows], dtype=np.float64)
                else:
                    acc[i, rows] += x

            def add_product(i, x, y):
                np.multiply(x, y, out=t, dtype=np.float64)
                add(i, t)

            w32 = s["w"]
            add(0, w32)
            if not sgd:
                G32, N32 = s["G"], s["N"]
                add(1, G32)
                add(2, N32)
                add_product(3, G32, w32)
                add_product(4, G32, G32)
                add_product(5, G32, N32)
                if increments:
                    w, G = w32.astype(np.float64), G32.astype(np.float64)
                    b = table0[nz]
                    dG = np.maximum(G - b[:, 1], 0.0)
                    add(6, dG)
                    add(7, dG * (w - b[:, 0]))
                    add(8, dG * dG)
            S = s["model_S"].copy() if S is None else S + s["model_S"]
            T = s["model_T"].copy() if T is None else T + s["model_T"]
            sgd_t += mm.learner.meta()["sgd_t"]
            if meta is None:
                meta, red_meta = dict(mm.learner.meta()), mm.reduction.meta()
            elif hasattr(base.reduction, "merge_meta"):  # -r binary/regression: the union of the label ranges
                red_meta = base.reduction.merge_meta(red_meta, mm.reduction.meta())
            if labels0 is not None:
                label_counts = label_counts + (mm.reduction.label_counts - labels0)
            state = mm.reduction.state()
            for name, a0 in before.items():
                g = state[name]
                counted = name in COUNTS and g.shape == a0.shape
                if counted:
                    red_counts[name] = red_counts.get(name, 0) + (g - a0)
                if name not in red_first:
                    red_first[name] = g
                elif not counted and not np.array_equal(g, red_first[name]):
                    raise ConfigError(f"{base.reduction.name}: the workers changed the label structure ({name}): "
                                      f"the model cannot be averaged")
            del s, mm
            count += 1
    finally:
        row_of[slots[:used]] = -1
        work.update(row_of=row_of, acc=acc, slots=slots, tmp=tmp)
    if count == 0:
        raise ValueError("average_models: no models")
    nz = slots[:used].copy()
    if used > 1 and np.any(nz[1:] < nz[:-1]):  # (the first model's slots come sorted: often all of them)
        order = np.argsort(nz, kind="stable")
        nz = nz[order]
        acc = acc[:, order]
    else:
        acc = acc[:, :used]
    out = {"nz": nz, "size": np.array([size], dtype=np.int64), "model_S": S / count, "model_T": T / count}
    if sgd:
        out["w"] = (acc[0] / count).astype(np.float32)
    else:
        # in place in the sums (kept for the next call, which zeroes them)
        sumG = acc[1]
        pos = sumG > 0
        rest = ~pos
        w, G, N = acc[3], acc[4], acc[5]
        np.divide(w, sumG, out=w, where=pos)
        np.divide(G, sumG, out=G, where=pos)
        np.divide(N, sumG, out=N, where=pos)
        if rest.any():
            w[rest] = acc[0][rest] / count
            G[rest] = 0.0
            N[rest] = acc[2][rest] / count
        out["N"] = N.astype(np.float32)
        if increments:  # where some model trained the slot (its G grew): base + the dG-weighted mean change
            b = table0[nz]
            dG = acc[6]
            moved = dG > 0
            safe = np.where(moved, dG, 1.0)
            w = np.where(moved, b[:, 0] + acc[7] / safe, w)
            G = np.where(moved, b[:, 1] + acc[8] / safe, G)
        out["w"] = w.astype(np.float32)
        out["G"] = G.astype(np.float32)
    meta["sgd_t"] = sgd_t / count
    del acc
    base.learner.arrays.table[:] = 0
    base.learner.load_state(out, meta)
    arrays = {name: (a0 + red_counts[name] if name in red_counts else red_first[name]) for name, a0 in before.items()}
    base.reduction.load_state(arrays, red_meta)
    if labels0 is not None:
        base.reduction.load_label_set_state({"label_counts": label_counts})


# -- client side ----------------------------------------------------------------------------------------

def _model_key(data: bytes) -> str:
    import xxhash

    return xxhash.xxh3_128_hexdigest(data)


def predict(model_path: str, opts, address: str, skip_invalid: bool = False) -> dict:
    """``lomtree predict --dask``: predictions equal to ``driver.predict``'s (module docstring)."""
    import time

    from . import model_io
    from .core import Learner
    from .driver import Runner, predict_input
    from .output import PredictionWriter, finish, summary

    start_t = opts.start_time or time.time()
    paths = list(opts.inputs)
    check_inputs(paths)
    loaded = model_io.load_model(model_path, predict_only=True)  # the CLI's messages for a bad file
    try:
        with open(model_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise model_io.ModelFormatError(f"{model_path}: cannot read the model file: {e.strerror or e}") from None
    if model_io.load_model(io.BytesIO(data), predict_only=True, skip_unused=True).header != loaded.header:
        raise model_io.ModelFormatError(f"{model_path}: the model file changed while it was read")
    from .multilabel import set_predictor

    # the one that adds up the ranges' scores; a threshold without label sets fails here
    sets = set_predictor(loaded.reduction, opts.top_k, opts.threshold, None, opts.probabilities)
    if sets is None and (opts.probabilities or opts.top_k):
        from .batch import ExampleBatch

        loaded.reduction.predict_top(ExampleBatch.empty(), max(1, opts.top_k))  # unsupported: fail now
    outputs = prediction_paths(opts.predictions, paths)
    key = _model_key(data)
    err = opts.err if opts.err is not None else sys.stderr
    input_cfg = predict_input(loaded.input_config, skip_invalid, opts)
    runner = Runner(input_cfg, Learner.of(loaded), replace(opts, quiet=True), learn=False)
    with connect(address) as client:
        w = n_workers(client)
        jobs = []
        for p in paths:
            size = os.path.getsize(p)
            parts = max(4 * w, -(-size // RANGE_BYTES))
            jobs += [(p, s, e) for s, e in line_ranges(p, parts, body_start(p, input_cfg))]
        shared = client.scatter(data, broadcast=True, hash=False)
        futures = [client.submit(predict_range, key, shared, p, s, e, skip_invalid, opts.probabilities,
                                 opts.top_k, opts.max_line_bytes, opts.max_example_features, opts.threshold,
                                 pure=False) for p, s, e in jobs]
        writers = {}
        shown = 0
        try:
            for (p, _, _), fut in zip(jobs, futures):
                res = fut.result()
                fut.release()
                target = outputs[p]
                if target not in writers:
                    writers[target] = PredictionWriter(target)
                wr = writers[target]
                if wr.f is not None and res.text:
                    try:
                        wr.f.write(res.text)
                    except BrokenPipeError:
                        wr.broken, wr.f = True, None
                if res.failure is not None:
                    res.failure.throw()
                if res.scores is not None:
                    sets.scores.merge(res.scores)
                    sets.scored = True
                for name in _PROGRESS_SUMS:
                    setattr(runner.progress, name, getattr(runner.progress, name) + res.progress[name])
                runner.low_labels += res.low_labels
                if not opts.quiet:
                    for msg in res.skipped_messages:
                        if shown < 10:
                            err.write(msg + "\n")
                            shown += 1
                    if res.warned_range and not runner.warned_range:
                        err.write(res.warned_range + "\n")
                        runner.warned_range = True
        finally:
            for wr in writers.values():
                wr.close()
    report = summary(runner.progress, loaded.reduction, input_cfg, 1, start_t, None)
    if sets is not None:
        report.update(sets.result())
    if runner.low_labels:
        report["labels_below_1"] = runner.low_labels
    report["dask_workers"] = w
    report["dask_ranges"] = len(jobs)
    finish(err, opts, report)
    return report


def prediction_paths(predictions: str | None, paths: list) -> dict:
    """input path -> where its predictions go: ``-p DIR/`` (or an existing directory) gives
    ``DIR/<file name>.pred`` per input (the directory is made if need be), otherwise every input
    goes to ``predictions``. ``run_predict`` checks these paths before anything is read."""
    if predictions is None:
        return {p: None for p in paths}
    if predictions != "-" and (predictions.endswith(os.sep) or os.path.isdir(predictions)):
        try:
            os.makedirs(predictions, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"-p {predictions}: cannot make the directory: {e.strerror or e}") from None
        out = {p: os.path.join(predictions, os.path.basename(p) + ".pred") for p in paths}
        if len(set(out.values())) != len(out):
            raise ConfigError("-p DIR/: two inputs have the same file name (their predictions would share a file)")
        return out
    return {p: predictions for p in paths}


def shards_of(paths: list, w: int, cfg=None) -> list:
    """W shards ``[[(path, start, end), ...], ...]``, interleaved: each file is cut into line-aligned
    blocks of about ``SHARD_BLOCK_BYTES`` (a multiple of W of them, at least W, at most
    ``MAX_SHARD_BLOCKS`` per shard: larger blocks for larger files) and shard i takes blocks i, i + W,
    i + 2W, ... in file order. A file smaller than W blocks is cut into W ranges (shard i: range i),
    and a file in fewer ranges than W (a compressed file is one) gives them to the shards in turn.

    Interleaving, not W contiguous parts: a file's order need not be random (Sector's is not),
    and with contiguous parts the workers learn from different regions of it between two syncs; with
    blocks they are at about the same place of the file (bench/notes/dask.md: 15.65 % against 14.47 % in
    one pass, 20.58 against 13.72 with a sync every 100 examples)."""
    shards = [[] for _ in range(w)]
    turn = 0
    for p in paths:
        size = 0 if p.endswith(COMPRESSED_ENDINGS) else os.path.getsize(p)
        per_shard = max(1, min(MAX_SHARD_BLOCKS, size // (w * SHARD_BLOCK_BYTES)))
        ranges = line_ranges(p, w * per_shard, 0 if cfg is None else body_start(p, cfg))
        for j, (s, e) in enumerate(ranges):
            shards[(turn + j) % w].append((p, s, e))
        turn += len(ranges)
    return shards


def sync_interval(round_index: int, first_pass: bool, sync_first: int, sync_every: int,
                  growth: float = SYNC_GROWTH) -> int:
    """Examples of each shard in round ``round_index`` (0-based) of a pass, 0 = to the shard's end.
    In the first pass with ``sync_first`` N > 0 the intervals grow from N by ``growth`` (N, 1.25 N,
    1.56 N, ... rounded: about log(shard / N) / log(growth) syncs), at most ``sync_every`` when that
    is > 0; otherwise ``sync_every``.

    >>> [sync_interval(r, True, 100, 0) for r in range(5)], sync_interval(9, True, 100, 500)
    ([100, 125, 156, 195, 244], 500)
    >>> [sync_interval(r, True, 100, 0, 2.0) for r in range(4)], sync_interval(3, False, 100, 0)
    ([100, 200, 400, 800], 0)
    >>> sync_interval(3, True, 0, 250)
    250
    """
    if first_pass and sync_first > 0:
        n = max(1, round(sync_first * growth ** round_index))
        return min(n, sync_every) if sync_every > 0 else n
    return sync_every


def worker_rate(limit: int, sync_first: int, workers: int, power_t: float, fade: bool = True) -> float:
    """The workers' learning-rate multiplier in an early round of ``limit`` examples of each of
    ``workers`` shards: ``workers ** (1 - power_t)``, with ``fade`` (tree nodes) raised to
    ``sync_first / limit``: the first round's, fading as the rounds lengthen. Averaging W workers'
    changes keeps about one worker's progress where one process on their examples would go about
    W^(1 - power_t) times as far (the adaptive rate's steps of W T examples against T); from a
    young model that loss is what keeps tree nodes behind (bench/notes/dask.md). A tree node's
    later, longer rounds start from a node trained on its few examples, and a boosted rate there
    costs more than it gains; a class regressor (OAA) trains on every example and keeps it.

    >>> worker_rate(100, 100, 4, 0.5), worker_rate(400, 100, 4, 0.5), worker_rate(400, 100, 4, 0.5, False)
    (2.0, 1.189207115002721, 2.0)
    >>> worker_rate(100, 100, 1, 0.5), worker_rate(0, 100, 4, 0.5)
    (1.0, 1.0)
    """
    if limit <= 0 or sync_first <= 0 or workers < 2:
        return 1.0
    return workers ** (max(0.0, 1.0 - power_t) * (min(1.0, sync_first / limit) if fade else 1.0))


def shared_tree(client, shards: list, cfg, reduction, w: int) -> int:
    """Build a PLT's label tree once, before its first pass, from every shard's label-centroid
    sums (``shard_label_counts``, then ``shard_label_sketch``: they add up to the whole input's),
    so that the first pass is data-parallel over a tree every worker shares; returns the bytes
    the sums moved (0: no label in the input, the tree is left to grow)."""
    from .reductions.plt import sketch_bits

    def each(fn, *args):
        """``fn(shard, *args)`` of every non-empty shard, at most 2 W in flight, in shard order."""
        live = deque(sh for sh in shards if sh)
        waiting = deque(client.submit(fn, live.popleft(), *args, pure=False) for _ in range(min(len(live), 2 * w)))
        while waiting:
            fut = waiting.popleft()
            r = fut.result()
            fut.release()
            if live:
                waiting.append(client.submit(fn, live.popleft(), *args, pure=False))
            if isinstance(r, _Failure):
                r.throw()
            yield r

    counts = None
    for c in each(shard_label_counts, cfg, reduction.k):
        counts = c if counts is None else counts + c
    seen = np.flatnonzero(counts[1:]) + 1 if counts is not None else np.zeros(0, dtype=np.int64)
    if seen.size == 0:
        return 0
    X = cnt = None
    moved = 0
    for x, c in each(shard_label_sketch, cfg, reduction.k, seen, sketch_bits(seen.size, reduction.multilabel)):
        moved += x.nbytes
        if X is None:
            X, cnt = x, c
        else:
            X += x
            cnt += c
    reduction.tree_from_sketch(seen, X, cnt)
    return moved


def train(input_cfg, learner_cfg, red_cfg, opts, address: str, sync_every: int = 0,
          initial_model: str | None = None, final_model: str | None = None, explicit: dict | None = None,
          shards: int = 0, sync_first: int = SYNC_FIRST, sync_growth: float = SYNC_GROWTH,
          plain_rate: bool = False) -> dict:
    """``lomtree train --dask``: data-parallel training (module docstring); returns the summary."""
    import math
    import time

    from . import model_io
    from .core import Learner
    from .driver import Holdout, Runner, check_train_options, continued_model, end_of_pass
    from .output import finish, preamble, summary

    start_t = opts.start_time or time.time()
    err = opts.err if opts.err is not None else sys.stderr
    check_train_options(opts)
    paths = list(opts.inputs)
    check_inputs(paths)
    if sync_every < 0:
        raise ConfigError("--sync-every must be >= 0")
    if sync_first < 0:
        raise ConfigError("--sync-first must be >= 0")
    if not sync_growth >= 1.0:
        raise ConfigError("--sync-growth must be >= 1")
    if shards < 0:
        raise ConfigError("--shards must be >= 0")
    if opts.predictions is not None:
        raise ConfigError("-p (progressive predictions) cannot be used with --dask: shards run at once, "
                          "not in input order")
    if initial_model is None:
        model = Learner.new(input_cfg, learner_cfg, red_cfg)
    else:
        model = continued_model(initial_model, input_cfg, explicit or {})
    input_cfg, learner, reduction, passes_before = model.input_config, model.base, model.reduction, model.passes_done
    if learner.averaging:  # a new model's option or a continued model's
        raise ConfigError("--average cannot be used with --dask (workers merge the online weights only; a model "
                          "trained with --average cannot continue there): train in one process")
    mode = REGISTRY[reduction.name].dask
    if mode is None:
        able = [n for n, spec in REGISTRY.items() if spec.dask is not None]
        raise ConfigError(f"--dask trains {', '.join(able)}; -r {reduction.name} "
                          f"grows its tree from the data and is not distributed yet")
    rule = merge_rule(reduction.name)
    current = model_io.LoadedModel({"passes_done": passes_before}, input_cfg, learner, reduction)
    runner = Runner(input_cfg, model, opts, learn=True)
    if not opts.quiet:
        preamble(err, input_cfg, learner, reduction, paths)
    holdout = Holdout(opts.passes > 1 and not opts.holdout_off, opts.early_terminate)
    kept = {}

    def save(passes_done: int) -> bool:
        kept["bytes"] = model_io.model_bytes(input_cfg, current.learner, current.reduction, passes_before + passes_done)
        return True

    shown = 0
    passes_used = 0
    rounds = 0
    moved = 0  # model bytes sent: to each worker at the start of a round, back from each task
    sums = {}  # average_models's arrays, reused from one sync to the next
    with connect(address) as client:
        w = n_workers(client)
        n_shards = shards or w
        shards_list = shards_of(paths, n_shards, input_cfg)
        runner.progress.start()
        # a PLT whose one-process run replays its buffer (the whole input, up to --tree-buffer) in a
        # random order: the tree is built once from every shard's labels, and each worker reads its
        # shard in a random order of its own, as the buffer's replay would
        tree_first = (mode == "grown" and passes_before == 0 and bool(getattr(reduction, "shuffle", False))
                      and hasattr(reduction, "tree_from_sketch") and not reduction.built)
        if tree_first:
            sent = shared_tree(client, shards_list, input_cfg, reduction, w)
            moved += sent
            tree_first = sent > 0
        grown_first = mode == "grown" and passes_before == 0 and not tree_first
        later_shuffled = bool(opts.shuffle_passes if opts.shuffle_passes is not None
                              else getattr(reduction, "shuffle", False))
        seed = int(getattr(reduction.config, "seed", 0))
        for p in range(opts.passes):
            runner.progress.holdout_reporting = p > 0 and holdout.active
            passes_used = p + 1
            # a growing pass: the shards one after the other, each task continuing the last one's
            # model (the same examples held out as in the data-parallel passes after it)
            grow = p == 0 and grown_first
            # the early syncs (and rates) belong to the first data-parallel pass
            early = p == (1 if grown_first else 0)
            # the order a shard is read in: a random one in the first pass after a shared tree (the
            # buffer's replay), the same one later while examples are held out (the held-out ones stay
            # the same), a new one per pass as one process's --shuffle-passes; else the file's
            pass_key = (0 if tree_first and (p == 0 or holdout.active)
                        else p if p > 0 and later_shuffled and not holdout.active else None)
            tasks = shards_list
            cursors = {i: (0, tasks[i][0][1] if tasks[i] else 0, 0) for i in range(len(tasks)) if tasks[i]}
            round_index = 0
            while cursors:
                limit = 0 if grow else sync_interval(round_index, early, sync_first, sync_every, sync_growth)
                round_index += 1
                data = model_io.model_bytes(input_cfg, current.learner, current.reduction)
                shared = client.scatter(data, broadcast=True, hash=False)
                moved += len(data) * w
                live = [min(cursors)] if grow else sorted(cursors)
                rate = 1.0 if plain_rate or not early else worker_rate(limit, sync_first, len(live),
                                                                       learner.config.power_t,
                                                                       rule == "increments")
                done = []

                def submit(i):
                    return client.submit(train_segment, shared, tasks[i], cursors[i], limit,
                                         holdout.active, opts.holdout_period, input_cfg.skip_invalid,
                                         input_cfg.max_line_bytes, rate,
                                         None if pass_key is None else (seed, pass_key, i), pure=False)

                def results():
                    """The round's models in shard order, loaded one at a time; at most 2 W tasks
                    (and their models) in flight, so that many shards on few workers stay bounded."""
                    waiting = deque((i, submit(i)) for i in live[:2 * w])
                    later = deque(live[2 * w:])
                    while waiting:
                        i, fut = waiting.popleft()
                        r = fut.result()
                        fut.release()
                        if later:
                            j = later.popleft()
                            waiting.append((j, submit(j)))
                        if isinstance(r, _Failure):
                            r.throw()
                        model, r.model = r.model, None
                        done.append((i, r, len(model)))
                        yield model_io.load_model(io.BytesIO(model))

                if len(live) == 1:  # one worker's model is the model (a growing pass, a last shard)
                    only = next(results())
                    current.learner, current.reduction = only.learner, only.reduction
                    model.base, model.reduction = current.learner, current.reduction
                else:
                    average_models(results(), current, rule, sums)
                rounds += 1
                for i, r, size in done:
                    moved += size
                    if r.record is not None:
                        runner.progress.add_batch(*r.record)
                    for msg in r.skipped:
                        runner.progress.skipped += 1
                        if shown < 10 and not opts.quiet:
                            err.write(f"skipping {msg}\n")
                            shown += 1
                    if r.done:
                        del cursors[i]
                    else:
                        cursors[i] = r.cursor
            if end_of_pass(runner, holdout, p, opts, save):
                break
    if not holdout.saved:
        save(passes_used)
    if final_model is not None:
        best = model_io.load_model(io.BytesIO(kept["bytes"]))
        model_io.save_model(final_model, input_cfg, best.learner, best.reduction, best.passes_done,
                            compact=opts.compact)
    report = summary(runner.progress, current.reduction, input_cfg, passes_used, start_t,
                     holdout.best if holdout.active and math.isfinite(holdout.best) else None)
    if holdout.active:
        report["best_pass"] = holdout.best_pass
        report["holdout_losses"] = holdout.losses
    report["dask_workers"] = w
    report["dask_syncs"] = rounds
    report["dask_model_bytes"] = moved
    report["dask_shards"] = n_shards
    finish(err, opts, report)
    return report
