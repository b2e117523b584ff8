"""The ``lomtree`` command line (spelling: ../shared/docs/CLI.md).

Thin: ``train`` and ``predict`` hand their parameters to ``commands.run_train`` / ``run_predict``
(which ``launch.main`` also calls directly when ``argv.parse`` could read the command line without
click); ``inspect`` and ``serve`` call ``model_io.inspect_model`` / ``server.serve``.
numba and numpy are imported inside command bodies, so ``lomtree --help`` is instant. Every
``LomtreeError`` becomes one line on stderr and its exit code (1 bad data, 2 bad usage or bad
model file); a closed stdout ends ``predict`` quietly; SIGINT/SIGTERM stop at an example boundary
with a complete model and exit 130/143.
"""

from __future__ import annotations

import json
import math
import os
import sys

import click

from . import __version__, commands
from .errors import ConfigError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _run(fn):
    """Run a command body: one-line errors, quiet closed pipes, signal exit codes."""
    return commands.guarded(fn)


def _given(ctx: click.Context) -> set:
    """Names of the parameters the user gave on the command line (not defaults)."""
    out = set()
    for n in ctx.params:
        src = ctx.get_parameter_source(n)
        if src is not None and src.name == "COMMANDLINE":
            out.add(n)
    return out


def _progress_interval(value: str) -> float | int:
    try:
        return commands.progress_interval(value)
    except ValueError:
        raise click.BadParameter(commands.PROGRESS_INTERVAL_RULE) from None


class _Command(click.Command):
    """An option that is not a list given twice (``-k 3 -k 26``) is a usage error (exit 2), not
    "the last one wins"."""

    def parse_args(self, ctx, args):
        if not ctx.resilient_parsing:
            try:
                order = self.make_parser(ctx).parse_args(args=list(args))[2]
            except click.UsageError:
                order = []  # click reports it below
            seen = set()
            for p in order:
                if isinstance(p, click.Option) and not (p.multiple or p.count):
                    if p.name in seen:
                        raise click.UsageError(f"option {'/'.join(p.opts)} given more than once", ctx)
                    seen.add(p.name)
        return super().parse_args(ctx, args)


class _Group(click.Group):
    """A SIGINT before a command body runs (while numpy/numba import) exits 130 quietly, not with
    click's "Aborted!" and exit code 1. Its commands refuse repeated options (``_Command``)."""

    command_class = _Command

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="lomtree")
def main():
    """lomtree: streaming multiclass learning with logarithmic-time trees.

    \b
    Reductions: lomtree (Choromanska & Langford 2015), filter (filter tree / ECT), rtree (random
    balanced tree), oaa (one-against-all, O(k)), cpt (conditional probability tree, P(y|x)),
    table (label-frequency baseline).

    \b
    Examples:
      lomtree train -r oaa -k 105 --format libsvm sector.train -f sector.model
      lomtree predict -i sector.model --format libsvm sector.test -p -
      cat data.vw | lomtree train -k 1000 -f m.lt && lomtree inspect m.lt
    """


def common_run_options(f):
    f = click.option("--report", type=click.Path(dir_okay=False), help="Write the run summary as JSON.")(f)
    f = click.option("-P", "--progress-interval", "progress_interval", default="2.0", show_default=True,
                     help="Table lines at doubling counts (float, multiplicative) or every N (integer).")(f)
    f = click.option("--progress", "progress_bar", is_flag=True,
                     help="Show a tqdm progress bar instead of the table.")(f)
    f = click.option("--quiet", is_flag=True, help="No table, no summary on stderr.")(f)
    f = click.option("--skip-invalid", "--skip_invalid", "skip_invalid", is_flag=True,
                     help="Skip malformed lines (counted in the summary) instead of stopping.")(f)
    f = click.option("--chunk-bytes", type=click.IntRange(min=64, max=1 << 30), default=1 << 20, hidden=True)(f)
    f = click.option("--max-line-bytes", "max_line_bytes", type=click.IntRange(min=1, max=1 << 34),
                     default=32 << 20, show_default=True,
                     help="A longer line is malformed (an error, or skipped with --skip-invalid).")(f)
    return f


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, type=str)
@click.option("-r", "--reduction", type=click.Choice(["oaa", "lomtree", "filter", "rtree", "cpt", "table", "plt", "mtree"]),
              default="lomtree", show_default=True, help="The reduction.")
@click.option("-k", "--classes", "k", type=int, help="Number of classes (labels 1..K); optional for cpt.")
@click.option("-f", "--final-model", "final_model", type=click.Path(dir_okay=False), help="Write the model here.")
@click.option("-i", "--initial-model", "initial_model", type=str, help="Start from this model.")
@click.option("-p", "--predictions", type=str, help="Progressive predictions, one per line ('-' = stdout).")
@click.option("--format", "fmt", type=click.Choice(["vw", "libsvm"]), default="vw", show_default=True)
@click.option("-b", "--bits", type=int, default=18, show_default=True, help="Hash bits.")
@click.option("-l", "--learning-rate", "learning_rate", type=float, help="Learning rate [0.5; --sgd: 10].")
@click.option("--power-t", "--power_t", "power_t", type=float, default=None, help="[0.5; lomtree, cpt: 0.75]")
@click.option("--initial-t", "--initial_t", "initial_t", type=float, help="[0; --sgd: 1]")
@click.option("--loss-function", "--loss_function", "loss",
              type=click.Choice(["squared", "logistic", "hinge", "quantile"]),
              help="[squared]")
@click.option("--quantile-tau", "--quantile_tau", "quantile_tau", type=float, default=0.5, show_default=True)
@click.option("--sgd", is_flag=True, help="Plain SGD instead of adaptive+normalized+invariant updates.")
@click.option("--decay-learning-rate", "--decay_learning_rate", "decay_learning_rate", type=float,
              default=1.0, show_default=True, help="Learning-rate factor applied after each pass.")
@click.option("--passes", type=int, default=1, show_default=True)
@click.option("-c", "--cache", "cache", is_flag=False, flag_value="", default=None,
              help="Keep the binary example cache at PATH (default: MODEL.cache next to -f) and reuse it "
                   "while inputs and options match. Without -c, --passes > 1 uses a temporary cache.")
@click.option("--holdout-period", "--holdout_period", "holdout_period", type=int, default=10, show_default=True)
@click.option("--holdout-off", "--holdout_off", "holdout_off", is_flag=True)
@click.option("--early-terminate", "--early_terminate", "early_terminate", type=int, default=3, show_default=True)
@click.option("--max-internal-nodes", "--lom_max_internal", "max_internal_nodes", type=int,
              help="lomtree: maximum internal nodes T [k-1].")
@click.option("--swap-resistance", "--swap_resistance", "swap_resistance", type=int, default=4, show_default=True)
@click.option("--leaf-labels", "leaf_labels", type=int, default=None,
              help="lomtree: candidate labels kept per leaf, rescored one-against-some (0 = the leaf's "
                   "majority label) [32].")
@click.option("--candidates-up", "candidates_up", type=int, default=None,
              help="lomtree: take the candidate labels from the node this many levels above the leaf [2].")
@click.option("--cpt-alpha", "--cpt_alpha", "cpt_alpha", type=float, default=0.5, show_default=True)
@click.option("--cpt-predict", "--cpt_predict", "cpt_predict", type=click.Choice(["exact", "greedy"]),
              default="exact", show_default=True)
@click.option("--cpt-random-insert", "--cpt_random_insert", "cpt_random_insert", is_flag=True,
              help="cpt baseline: insert new labels on a random side.")
@click.option("--arity", type=int, default=32, show_default=True, help="plt: most children of a node.")
@click.option("--beam", type=int, default=10, show_default=True, help="plt: beam width of the prediction search.")
@click.option("--tree-buffer", "tree_buffer", type=int, default=100_000, show_default=True,
              help="plt: examples buffered to build the label tree by k-means (0 = grow it online).")
@click.option("--path-weight", "path_weight", type=float, default=0.25, show_default=True,
              help="plt: weight of the parent path's log probability in a candidate's score (1 = pure PLT).")
@click.option("--no-leaf-negatives", "no_leaf_negatives", is_flag=True,
              help="plt: train leaves against their siblings only, not against every beam candidate.")
@click.option("--dim", type=int, default=100, show_default=True, help="mtree: width of the learned embeddings.")
@click.option("--depth", type=int, default=0, show_default=True,
              help="mtree: tree depth (0 = a flat softmax when k <= 4 arity, else the least with arity^depth >= k).")
@click.option("--reassign-after", "reassign_after", type=int, default=1000, show_default=True,
              help="mtree: trained examples before the first label re-assignment, then at each doubling "
                   "(0 = keep the initial random tree).")
@click.option("--seed", "--random_seed", "seed", type=int, default=0, show_default=True)
@click.option("--hash-seed", "--hash_seed", "hash_seed", type=int, default=0, show_default=True)
@click.option("--noconstant", is_flag=True, help="No constant (bias) feature.")
@click.option("--label-offset", "label_offset", type=int, default=0, show_default=True,
              help="Added to every label (1 for 0-based data, VW's --indexing 0).")
@common_run_options
@click.pass_context
def train(ctx, inputs, reduction, k, final_model, initial_model, predictions, fmt, bits, learning_rate, power_t,
          initial_t, loss, quantile_tau, sgd, decay_learning_rate, passes, cache, holdout_period, holdout_off,
          early_terminate, max_internal_nodes, swap_resistance, leaf_labels, candidates_up, cpt_alpha, cpt_predict,
          cpt_random_insert, arity, beam, tree_buffer, path_weight, no_leaf_negatives, dim, depth,
          reassign_after, seed,
          hash_seed, noconstant, label_offset, skip_invalid, quiet, progress_bar, progress_interval, report,
          chunk_bytes, max_line_bytes):
    """Train on INPUT files ('-' or none = stdin) with progressive validation.

    \b
    Examples:
      lomtree train -r lomtree -k 105 --format libsvm sector.scale -f m.lt
      lomtree train -r oaa -k 26 --passes 10 letter.vw -c -f m.lt --report run.json
      zcat big.vw.gz | lomtree train -r filter -k 5001 -b 24 -f m.lt
    """
    from .driver import process_start_time

    start = process_start_time()
    params = dict(ctx.params, progress_interval=_progress_interval(progress_interval))
    commands.run_train(params, _given(ctx), start, warn=lambda m: click.echo(m, err=True))


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, type=str)
@click.option("-i", "--initial-model", "--model", "model", required=True, type=str, help="The model file.")
@click.option("-p", "--predictions", type=str, default="-", show_default=True,
              help="Where predictions go, one per line ('-' = stdout).")
@click.option("--probabilities", is_flag=True, help="Print label:probability (and p(label) of the true label).")
@click.option("--top-k", "top_k", type=click.IntRange(min=1), default=None, help="Print the N most probable labels.")
@click.option("--flush", is_flag=True, help="Flush each prediction as soon as its line is read (co-process).")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads that parse chunks and predict parts of each batch at once (0 = one per "
                   "CPU, at most 4; prediction in parallel for OAA, LOMtree, Filter tree, Rtree). "
                   "Predictions do not depend on it.")
@common_run_options
@click.pass_context
def predict(ctx, inputs, model, predictions, probabilities, top_k, flush, skip_invalid, quiet, progress_bar,
            progress_interval, report, chunk_bytes, threads, max_line_bytes):
    """Predict INPUT lines ('-' or none = stdin) with MODEL; nothing in the model changes.

    \b
    Examples:
      lomtree predict -i m.lt test.vw -p preds.txt
      cat test.vw | lomtree predict -i m.lt -p - | head -3
      lomtree predict -i cpt.lt test.vw --top-k 5
    """
    from .driver import process_start_time

    start = process_start_time()
    commands.run_predict(dict(ctx.params, progress_interval=_progress_interval(progress_interval)), start)


@main.command(context_settings=CONTEXT)
@click.argument("model", type=str)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--gini-c", "gini_c", type=float, default=1.0, show_default=True,
              help="Constant C of the modified Gini entropy sum sqrt(pi (C - pi)).")
def inspect(model, as_json, gini_c):
    """Describe MODEL: reduction, k, bits, sizes; for trees depth, nodes, leaves, swaps, purity/balance,
    and the Shannon, Gini and modified Gini entropies of the leaves (whole tree and per level)."""

    def body():
        from .model_io import inspect_model

        if not (math.isfinite(gini_c) and gini_c >= 1.0):
            raise ConfigError(f"--gini-c must be >= 1, got {gini_c}")
        info = inspect_model(model, gini_c)
        if as_json:
            click.echo(json.dumps(info, indent=2, sort_keys=False, default=_jsonable))
        else:
            for key, value in info.items():
                if isinstance(value, (list, dict)):
                    click.echo(f"{key}:")
                    items = value.items() if isinstance(value, dict) else enumerate(value)
                    for k2, v2 in items:
                        click.echo(f"  {k2}: {json.dumps(v2, default=_jsonable)}")
                else:
                    click.echo(f"{key}: {value}")

    _run(body)


@main.command(context_settings=CONTEXT)
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False),
              help="Unix socket to listen on [$LOMTREE_SERVER, else /tmp/lomtree-<uid>/server.sock].")
@click.option("--idle-timeout", type=float, default=0.0, show_default=True,
              help="Exit after this many seconds without a command (0: never).")
def serve(socket_path, idle_timeout):
    """Keep a warm lomtree process (numba kernels loaded) that runs commands for clients.

    \b
    With LOMTREE_SERVER set to its socket, every lomtree command is handed to the server and
    starts in a few milliseconds instead of about half a second; output, errors and exit codes
    are the same. Without a reachable server, commands run in their own process as usual.
      lomtree serve --socket /tmp/lt.sock --idle-timeout 3600 &
      export LOMTREE_SERVER=/tmp/lt.sock
      lomtree predict -i m.lt small.vw -p -
    """

    def body():
        from .launch import SERVER_ENV
        from .server import default_socket_path, serve as run_server

        path = socket_path or os.environ.get(SERVER_ENV) or default_socket_path()
        if idle_timeout < 0:
            raise ConfigError("--idle-timeout must be >= 0")
        return run_server(path, idle_timeout, announce=lambda m: click.echo(m, err=True))

    sys.exit(_run(body) or 0)


def _jsonable(o):
    try:
        return o.item()
    except AttributeError:
        return str(o)


if __name__ == "__main__":  # pragma: no cover
    main()
