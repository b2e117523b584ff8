"""The ``lomtree`` command line (spelling: docs/CLI.md).

Thin: ``train`` and ``predict`` hand their parameters to ``commands.run_train`` / ``run_predict``;
``inspect`` calls ``model_io.inspect_model``. numba and numpy are imported inside command bodies,
so ``lomtree --help`` is instant. The group runs every command through ``runtime.guarded``: each
``LomtreeError`` becomes one line on stderr and its exit code (1 bad data, 2 bad usage or bad
model file); a closed stdout ends ``predict`` quietly; SIGINT/SIGTERM stop at an example boundary
with a complete model and exit 130/143.
"""

from __future__ import annotations

import json
import math
import sys

import click

from . import commands
from .version import PROG, __version__
from .errors import ConfigError, LomtreeError
from .reductions.registry import DEFAULT, LARGE_K, REAL_DEFAULT, REGISTRY, default, reduction_options as registry_options, vw_aliases
from .runtime import guarded, process_start_time

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


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


#: ``lomtree train -h``: the options in VW's help sections, in VW's order; then each reduction's own
#: options under its registry title (an option two reductions share is shown under the first)
TRAIN_HELP_GROUPS = (
    ("Driver Options", ("quiet", "progress_bar", "progress_interval", "report")),
    ("Feature Options", ("bits", "hash_seed", "ignore", "ignore_linear", "keep", "noconstant", "ngram", "skips",
                         "interactions", "quadratic", "cubic", "fmt", "label_offset", "named_labels", "string_labels",
                         "multilabel")),
    ("Example Options", ("testonly", "holdout_off", "holdout_period", "early_terminate", "passes", "shuffle_passes", "loss",
                         "quantile_tau", "l1", "l2", "skip_invalid", "max_line_bytes",
                         "max_example_features", "min_prediction", "max_prediction", "vw_binary", "link")),
    ("Update Options", ("learning_rate", "power_t", "decay_learning_rate", "initial_t")),
    ("Gradient Descent Options", ("sgd", "adaptive", "normalized", "invariant", "average")),
    ("Dual Solver Options", ("solver", "cost", "dual_memory")),
    ("Weight Options", ("initial_model",)),
    ("Randomization Options", ("seed",)),
    ("Output Model Options", ("final_model", "readable_model", "invert_hash", "predict_only_model",
                              "weight_threshold", "trees")),
    ("Output Options", ("predictions",)),
    ("Input Options", ("data", "cache", "cache_file", "kill_cache", "no_stdin")),
    ("VW Run Options", ("holdout_after", "noop", "indexing", "error", "probabilities", "scores",
                        "raw_predictions", "top_k", "audit", "daemon", "port", "num_children", "foreground",
                        "pid_file", "port_file")),
    ("Reduction Options", ("reduction", "k", *vw_aliases())),
) + tuple((f"[Reduction] {spec.title} Options", tuple(o.field for o in spec.options))
          for spec in REGISTRY.values() if spec.options)


class _Command(click.Command):
    """An option that is not a list given twice (``-k 3 -k 26``) is a usage error (exit 2), not
    "the last one wins". ``train``'s help lists its options in VW's sections."""

    def format_options(self, ctx, formatter):
        if self.name != "train":
            return super().format_options(ctx, formatter)
        rows = {}
        for p in self.get_params(ctx):
            rec = p.get_help_record(ctx)
            if rec is not None:
                rows[p.name] = rec
        for title, names in TRAIN_HELP_GROUPS:
            recs = [rows.pop(n) for n in names if n in rows]
            if recs:
                with formatter.section(title):
                    formatter.write_dl(recs)
        if rows:
            with formatter.section("Other Options"):
                formatter.write_dl(list(rows.values()))

    def parse_args(self, ctx, args):
        if self.name == "train":
            from .vwopts import vw_argv

            args = vw_argv(list(args), REGISTRY)
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
    """Commands run inside ``runtime.guarded`` (one-line errors and exit statuses; a SIGINT
    while numpy loads exits 130 quietly, not with click's "Aborted!" and exit code 1). Its
    commands refuse repeated options (``_Command``)."""

    command_class = _Command

    def invoke(self, ctx):
        return guarded(lambda: super(_Group, self).invoke(ctx))


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name=PROG)
def main():
    pass


#: ``lomtree --help``: the reductions are listed from the registry, so a new entry shows up here
main.help = "\n".join([
    "lomtree: streaming multiclass learning with logarithmic-time trees.", "", "\b", "Reductions (-r):",
    *(f"  {name:<8} {spec.summary}" for name, spec in REGISTRY.items()), "", "\b", "Examples:",
    "  lomtree train -r oaa -k 105 --format libsvm sector.train -f sector.model",
    "  lomtree predict -i sector.model --format libsvm sector.test -p -",
    "  cat data.vw | lomtree train -k 1000 -f m.lt && lomtree inspect m.lt"])


def _names(has) -> str:
    """The reductions whose registry entry satisfies ``has``, for help texts."""
    return ", ".join(n for n, spec in REGISTRY.items() if has(spec))


def _defaults_text(key: str, base, names=REGISTRY) -> str:
    """``[base; r1, r2: other]``: the default of ``key`` for the reductions ``names``, naming those
    whose entry sets another."""
    values = {r: default(r, key, base) for r in names}
    large = {f"{r} with -k >= {LARGE_K}": v for r in names if (v := default(r, key, base, k=LARGE_K)) != values[r]}
    if len(set(values.values())) == 1 and not large:
        return f"[{next(iter(values.values()))}]"
    other: dict = {}
    for r, v in {**values, **large}.items():
        if v != base:
            other.setdefault(v, []).append(r)
    return "[" + "; ".join([f"{base}"] + [f"{', '.join(rs)}: {v}" for v, rs in other.items()]) + "]"


def reduction_options(f):
    """The reductions' own options, from their registry entries: help names the reductions that
    take each one and its defaults. Not given, an option is None (``commands`` fills in the
    reduction's default)."""
    from dataclasses import fields

    from .config import ReductionConfig

    base = {x.name: x.default for x in fields(ReductionConfig)}
    for name, (o, users) in reversed(list(registry_options().items())):
        text = f"{', '.join(users)}: {o.help}".rstrip(": ")
        if o.type is bool:
            spell = (f"{o.flags[0]}/{o.off}",) if o.off else o.flags
            flag = {} if o.off else {"is_flag": True, "flag_value": o.flag_value}
            f = click.option(*spell, name, default=None, help=text, **flag)(f)
            continue
        if base[name] is not None:
            text += " " + _defaults_text(name, base[name], users)
        kind = click.Choice(o.type) if isinstance(o.type, tuple) else o.type
        f = click.option(*o.flags, name, type=kind, default=None, help=text)(f)
    return f


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
    f = click.option("--max-example-features", "max_example_features", type=click.IntRange(min=1, max=1 << 32),
                     default=1 << 22, show_default=True,
                     help="An example that -q/--cubic/--interactions/--ngram/--skips expand to more features "
                          "is malformed.")(f)
    return f


def vw_options(f):
    """VW's spellings and feature options; see features.py and labels.py."""
    opts = [
        (("-d", "--data", "data"), dict(multiple=True, help="Input file (VW's -d; same as a positional INPUT).")),
        (("-t", "--testonly", "testonly"), dict(is_flag=True, help="Test only (VW's -t): with -i MODEL, as "
                                                                  "`lomtree predict -i MODEL`.")),
        *(((f"--{a}",) + ((f"--{a.replace('_', '-')}",) if "_" in a else ()) + (a,),
           dict(type=int, help=f"VW's --{a} K: -r {r} -k K{' --multilabel' if ml else ''}."))
          for a, (r, ml) in vw_aliases().items()),
        (("--cache_file", "--cache-file", "cache_file"), dict(type=str, help="VW's --cache_file PATH: -c PATH.")),
        (("-q", "--quadratic", "quadratic"), dict(multiple=True, help="Cross namespaces ab (first letters; ':' = any).")),
        (("--cubic", "cubic"), dict(multiple=True, help="Cross three namespaces abc.")),
        (("--interactions", "interactions"), dict(multiple=True, help="Cross two or more namespaces ab[c...].")),
        (("--ngram", "ngram"), dict(multiple=True, help="N-grams of the features of every namespace (N) or of "
                                                       "one (aN).")),
        (("--skips", "skips"), dict(multiple=True, help="Skip-grams: up to K skipped tokens (K or aK).")),
        (("--ignore", "ignore"), dict(multiple=True, help="Drop the namespaces starting with these letters.")),
        (("--keep", "keep"), dict(multiple=True, help="Keep only the namespaces starting with these letters.")),
        (("--ignore_linear", "--ignore-linear", "ignore_linear"),
         dict(multiple=True, help="No linear terms for these namespaces (they are still crossed).")),
        (("--named-labels", "--named_labels", "named_labels"),
         dict(type=str, help="Class names a,b,c (VW's --named_labels): k = their number.")),
        (("--string-labels", "string_labels"), dict(is_flag=True, help="Labels are strings, numbered in order of "
                                                                     f"appearance ({_names(lambda s: not s.needs_k)}; others with -k).")),
        (("--multilabel", "multilabel"), dict(is_flag=True, help="Each example has a set of labels l1,l2,... "
                                                               f"({_names(lambda s: s.label_sets)}); stored in the model.")),
        (("--readable_model", "--readable-model", "readable_model"),
         dict(type=str, help="Write the weights as text (per regressor / tree node).")),
        (("--invert_hash", "--invert-hash", "invert_hash"),
         dict(type=str, help="As --readable_model, with the feature names of the training data.")),
        (("--predict_only_model", "--predict-only-model", "predict_only_model"),
         dict(is_flag=True, help="-f writes a predict-only model: the weights without the optimiser state "
                                 "(smaller; it predicts as the full model, -i cannot train on it).")),
        (("--trees", "trees"), dict(type=int, default=1, show_default=True, metavar="N",
                                    help="Train N models with --seed S, S+1, ... (trees from different k-means "
                                         "seeds) into one -f file; predict ranks by their mean score.")),
        (("--weight-threshold", "--weight_threshold", "weight_threshold"),
         dict(type=float, default=None, metavar="T", help="--predict_only_model or --trees: weights with |w| < T "
                                                           "are written as 0 (a smaller model) [0].")),
    ]
    for decl, kw in reversed(opts):
        f = click.option(*decl, **kw)(f)
    return f


def vw_run_options(f):
    """VW's run-control and output options of ``train`` (their meaning: docs/CLI.md, VW spellings)."""
    opts = [
        (("--kill_cache", "--kill-cache", "kill_cache"), dict(is_flag=True, help="Do not reuse an existing "
                                                                               "example cache: write it again (VW's -k).")),
        (("--no_stdin", "--no-stdin", "no_stdin"), dict(is_flag=True, help="Without inputs, read nothing (not stdin).")),
        (("--holdout_after", "--holdout-after", "holdout_after"),
         dict(type=click.IntRange(min=1), help="Hold out the examples after the first N of each pass (even with "
                                               "one pass), instead of every --holdout-period-th.")),
        (("--noop", "noop"), dict(is_flag=True, help="Learn nothing: predict with the new model's zero weights.")),
        (("--indexing", "indexing"), dict(type=click.Choice(["0", "1"]), help="Labels are 0-based (0) or "
                                                                            "1-based (1) [--oaa: 0 if a label 0 is in the input files]")),
        (("--error", "error"), dict(type=click.IntRange(min=0), help="VW's ECT error count: --ect is the "
                                                                    "single-elimination filter tree (0).")),
        (("--probabilities", "probabilities"), dict(is_flag=True, help="-p: every class's probability "
                                                                     "(1:0.25 2:0.75), VW's format.")),
        (("--scores", "scores"), dict(is_flag=True, help="-p: every class's score (-r oaa), VW's format.")),
        (("--raw_predictions", "--raw-predictions", "raw_predictions"),
         dict(type=str, help="VW's -r FILE: every class's score (-r oaa), one line per example.")),
        (("--top_k", "--top-k", "top_k"), dict(type=click.IntRange(min=1), help="-p: the N most probable labels "
                                                                             "(label sets, VW's --top_k).")),
        (("--audit", "audit"), dict(is_flag=True, help="Accepted for VW's command lines; prints nothing more.")),
        (("--daemon", "daemon"), dict(is_flag=True, help="With -t -i MODEL: `lomtree predict -i MODEL --daemon`.")),
        (("--port", "port"), dict(type=click.IntRange(min=0, max=65535), help="--daemon: TCP port [26542].")),
        (("--num_children", "--num-children", "num_children"),
         dict(type=click.IntRange(min=1), help="--daemon: accepted (one process answers, a thread per connection).")),
        (("--foreground", "foreground"), dict(is_flag=True, help="--daemon: stay in the foreground (else the "
                                                               "daemon detaches once it listens).")),
        (("--pid_file", "--pid-file", "pid_file"), dict(type=str, help="--daemon: write the daemon's process id here.")),
        (("--port_file", "--port-file", "port_file"), dict(type=str, help="--daemon: write the port it listens on here.")),
        (("--vw-named-labels", "vw_named_labels"), dict(is_flag=True, hidden=True)),
    ]
    for decl, kw in reversed(opts):
        f = click.option(*decl, **kw)(f)
    return f


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, type=str)
@click.option("-r", "--reduction", type=click.Choice(list(REGISTRY)), default=DEFAULT,
              help=f"The reduction [{DEFAULT}; with no class count (-k, --named-labels, --oaa K, ...), no label "
                   f"sets and no string labels: {REAL_DEFAULT}, VW's default learner].")
@click.option("-k", "--classes", "k", type=int,
              help=f"Number of classes (labels 1..K); optional for {_names(lambda s: not s.needs_k)}.")
@click.option("-f", "--final-model", "final_model", type=click.Path(dir_okay=False), help="Write the model here.")
@click.option("-i", "--initial-model", "initial_model", type=str, help="Start from this model.")
@click.option("-p", "--predictions", type=str, help="Progressive predictions, one per line ('-' = stdout).")
@click.option("--format", "fmt", type=click.Choice(["vw", "libsvm", "xmc"]), default="vw", show_default=True,
              help="Input format; xmc: the Extreme Classification Repository's (header N F L, 0-based, label sets).")
@click.option("-b", "--bits", type=int, default=None,
              help="Hash bits [18; plt with label sets and -k >= 4,096: 26].")
@click.option("-l", "--learning-rate", "learning_rate", type=float, help="Learning rate [0.5; lomtree: 0.25; mtree: 1140 T^-0.6 in 0.05..2.5 for "
              "T = passes x lines with --passes > 1 over files, else 0.5; --sgd: 10].")
@click.option("--power-t", "--power_t", "power_t", type=float, default=None, help=_defaults_text("power_t", 0.5))
@click.option("--initial-t", "--initial_t", "initial_t", type=float, help="[0; --sgd: 1]")
@click.option("--loss-function", "--loss_function", "loss",
              type=click.Choice(["squared", "logistic", "hinge", "quantile", "squared-hinge", "classic", "poisson"]),
              help="[squared; --solver dual: hinge, with label sets squared-hinge] (squared-hinge: --solver dual "
                   "only; classic: squared without the importance-invariant update; poisson: -r regression)")
@click.option("--quantile-tau", "--quantile_tau", "quantile_tau", type=float, default=0.5, show_default=True)
@click.option("--l1", "l1", type=float, default=0.0, show_default=True,
              help="L1 regularisation: truncated gradient on the weights an update touches.")
@click.option("--l2", "l2", type=float, default=0.0, show_default=True,
              help="L2 regularisation: the weights an update touches shrink by 1 - l2 * rate.")
@click.option("--sgd", is_flag=True, help="Plain SGD instead of adaptive+normalized+invariant updates.")
@click.option("--adaptive", is_flag=True, help="VW's flag: naming any of --adaptive, --normalized, --invariant turns "
                                               "on only those parts of the default update.")
@click.option("--normalized", is_flag=True, help="VW's flag: per-feature normalized updates (see --adaptive).")
@click.option("--invariant", is_flag=True, help="VW's flag: importance-invariant updates (see --adaptive).")
@click.option("--binary", "vw_binary", is_flag=True, help="VW's --binary: -r binary (labels -1/1, the sign predicted, "
                                                       "0/1 loss).")
@click.option("--link", type=click.Choice(["identity", "logistic", "poisson", "glf1"]), default=None,
              help="-r binary/regression: the link of the prediction [identity].")
@click.option("--min-prediction", "--min_prediction", "min_prediction", type=float, default=None,
              help="-r binary/regression: lowest score predicted [the labels' range seen; logistic, poisson: -50].")
@click.option("--max-prediction", "--max_prediction", "max_prediction", type=float, default=None,
              help="-r binary/regression: highest score predicted [the labels' range seen; logistic, poisson: 50].")
@click.option("--average/--no-average", "average", default=None,
              help="Predict with the weights averaged over all trained examples (averaged SGD) "
                   f"[off; {_names(lambda s: 'average' in s.label_set_defaults)} with label sets, one pass and -k below "
                   f"{LARGE_K}: on].")
@click.option("--solver", type=click.Choice(["online", "dual"]), default=None,
              help="online: the per-example updates; dual: dual coordinate descent over the cached passes, "
                   f"a linear SVM (--loss-function squared-hinge or hinge) solved as liblinear's dual solvers do "
                   f"({_names(lambda s: s.dual)}) [online].")
@click.option("--cost", type=float, default=None,
              help="--solver dual: C, the weight of the losses against |w|^2/2 (liblinear's -c) [2; label sets: 0.01].")
@click.option("--dual-memory", "dual_memory", type=float, default=None, metavar="MB",
              help="--solver dual: most MB its dual variables may take, 4 bytes per example and class; a "
                   "larger input is refused before training [1024].")
@click.option("--decay-learning-rate", "--decay_learning_rate", "decay_learning_rate", type=float,
              default=None, help="Learning-rate factor applied after each pass [1; multi-label "
                                 f"{_names(lambda s: 'decay_learning_rate' in s.label_set_pass_defaults)} with "
                                 "--passes > 1: 0.6, 1 when the later passes are shuffled (--shuffle-passes)].")
@click.option("--passes", type=int, default=1, show_default=True)
@click.option("--shuffle-passes/--no-shuffle-passes", "shuffle_passes", default=None,
              help="Read the cached passes 2..N in a random order seeded by --seed and the pass (windows of "
                   "the cache when it is large); not with holdout, whose examples are every Nth of a pass "
                   "[off; on with -r plt label sets and -k >= 4096, where the first pass is shuffled].")
@click.option("-c", "--cache", "cache", is_flag=False, flag_value="", default=None,
              help="Keep the binary example cache at PATH (default: MODEL.cache next to -f) and reuse it "
                   "while inputs and options match. Without -c, --passes > 1 uses a temporary cache.")
@click.option("--holdout-period", "--holdout_period", "holdout_period", type=int, default=10, show_default=True)
@click.option("--holdout-off", "--holdout_off", "holdout_off", is_flag=True)
@click.option("--early-terminate", "--early_terminate", "early_terminate", type=int, default=3, show_default=True)
@reduction_options
@click.option("--seed", "--random_seed", "seed", type=int, default=0, show_default=True)
@click.option("--hash-seed", "--hash_seed", "hash_seed", type=int, default=0, show_default=True)
@click.option("--noconstant", is_flag=True, help="No constant (bias) feature.")
@click.option("--label-offset", "label_offset", type=int, default=0, show_default=True,
              help="Added to every label (1 for 0-based data, VW's --indexing 0); predictions take it off again.")
@vw_options
@vw_run_options
@click.option("--dask", "dask", type=str, default=None, metavar="ADDRESS|local:N",
              help=f"Train data-parallel on Dask ({_names(lambda s: s.dask == 'fixed')}; "
                   f"{_names(lambda s: s.dask == 'grown')} after a first pass): a scheduler address, or local:N "
                   "worker processes on this machine. Needs pip install 'lomtree[dask]'.")
@click.option("--sync-every", "sync_every", type=click.IntRange(min=0), default=0, show_default=True,
              help="--dask: average the workers' models every N examples of each shard (0 = after every pass).")
@click.option("--sync-first", "sync_first", type=click.IntRange(min=0), default=100, show_default=True,
              help="--dask: in the first pass also average after N examples of each shard, then at growing "
                   "intervals (N, F N, F^2 N, ..., F = --sync-growth, at most --sync-every); 0 = no early "
                   "averaging.")
@click.option("--sync-growth", "sync_growth", type=click.FloatRange(min=1.0), default=1.25, show_default=True,
              help="--dask: the factor F between two early sync intervals (2: doubling, fewer syncs).")
@click.option("--plain-rate", "plain_rate", is_flag=True,
              help="--dask: workers keep the learning rate in the early rounds (by default they learn at "
                   "W^(1-power_t) times it, W workers, for tree nodes fading as the rounds lengthen: an "
                   "average of W workers goes less far than one process).")
@click.option("--threads", type=click.IntRange(min=0), default=1, show_default=True,
              help="-r plt: threads that learn parts of each batch at once on the shared weights, Hogwild "
                   "style (0 = one per CPU, at most 4); with more than 1 a run is not repeatable.")
@click.option("--shards", "shards", type=click.IntRange(min=1), default=None,
              help="--dask: split the data into N shards [one per worker]; more shards than workers run "
                   "a few at a time (N machines simulated on fewer).")
@common_run_options
@click.pass_context
def train(ctx, **params):
    """Train on INPUT files ('-' or none = stdin) with progressive validation.

    \b
    Examples:
      lomtree train -r lomtree -k 105 --format libsvm sector.scale -f m.lt
      lomtree train -r oaa -k 26 --passes 10 letter.vw -c -f m.lt --report run.json
      zcat big.vw.gz | lomtree train -r filter -k 5001 -b 24 -f m.lt
      lomtree train -r oaa -k 105 --format libsvm part1 part2 --dask local:2 --sync-every 10000 -f m.lt
    """
    start = process_start_time()
    params = dict(params, progress_interval=_progress_interval(params["progress_interval"]))
    commands.run_train(params, _given(ctx), start)


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, type=str)
@click.option("-d", "--data", "data", multiple=True, help="Input file (VW's -d; same as a positional INPUT).")
@click.option("-i", "--initial-model", "--model", "model", required=True, type=str, multiple=True,
              help="The model file; several -i: one prediction from the mean of their probabilities (an ensemble).")
@click.option("-p", "--predictions", type=str, default="-", show_default=True,
              help="Where predictions go, one per line ('-' = stdout).")
@click.option("--probabilities", is_flag=True, help="Print label:probability (and p(label) of the true label).")
@click.option("--top-k", "top_k", type=click.IntRange(min=1), default=None, help="Print the N most probable labels.")
@click.option("--threshold", type=click.FloatRange(min=0.0, max=1.0), default=None,
              help="Multi-label models: print every label with P(label|x) >= T [0.5; not with --top-k].")
@click.option("--flush", is_flag=True, help="Flush each prediction as soon as its line is read (co-process).")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads that parse chunks and predict parts of each batch at once (0 = one per "
                   "CPU, at most 4; prediction in parallel for OAA, PLT, LOMtree, Filter tree, Rtree). "
                   "Predictions do not depend on it.")
@click.option("--daemon", is_flag=True,
              help="Serve predictions over a socket: example lines in, one answer line out per line.")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=None,
              help="--daemon: TCP port [26542; 0 = any free port, printed on stderr].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="--daemon: address to listen on (loopback unless you say otherwise).")
@click.option("--idle-timeout", "idle_timeout", type=click.FloatRange(min=0.01, max=86400), default=60.0,
              show_default=True, help="--daemon: close a connection that sends nothing (or reads no answer) "
                                      "for this many seconds.")
@click.option("--socket", "socket_path", type=str, default=None,
              help="--daemon: listen on this Unix socket (mode 0600) instead of TCP.")
@click.option("--dask", "dask", type=str, default=None, metavar="ADDRESS|local:N",
              help="Predict the input files in line-aligned ranges on Dask (a scheduler address, or "
                   "local:N worker processes); output identical to one process. -p DIR/: one file per input.")
@common_run_options
@click.pass_context
def predict(ctx, **params):
    """Predict INPUT lines ('-' or none = stdin) with MODEL; nothing in the model changes.

    \b
    Examples:
      lomtree predict -i m.lt test.vw -p preds.txt
      cat test.vw | lomtree predict -i m.lt -p - | head -3
      lomtree predict -i cpt.lt test.vw --top-k 5
      lomtree predict -i m.lt --daemon --port 26542 &   # then: nc 127.0.0.1 26542 < test.vw
      lomtree predict -i m.lt big1.vw big2.vw --dask local:2 -p preds/
    """
    start = process_start_time()
    params = dict(params, progress_interval=_progress_interval(params["progress_interval"]))
    data = params.pop("data")
    if data:
        params["inputs"] = tuple(params["inputs"]) + tuple(data)
    commands.run_predict(params, _given(ctx) - {"data"}, start)


@main.command(context_settings=CONTEXT)
@click.argument("model", type=str)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--gini-c", "gini_c", type=float, default=1.0, show_default=True,
              help="Constant C of the modified Gini entropy sum sqrt(pi (C - pi)).")
def inspect(model, as_json, gini_c):
    """Describe MODEL: reduction, k, bits, sizes; for trees depth, nodes, leaves, swaps, purity/balance,
    and the Shannon, Gini and modified Gini entropies of the leaves (whole tree and per level)."""
    from .model_io import inspect_model

    if not (math.isfinite(gini_c) and gini_c >= 1.0):
        raise ConfigError(f"--gini-c must be >= 1, got {gini_c}")
    info = inspect_model(model, gini_c)
    if as_json:
        lines = [json.dumps(info, indent=2, sort_keys=False, default=_jsonable)]
    else:
        lines = []
        for key, value in info.items():
            if isinstance(value, (list, dict)):
                lines.append(f"{key}:")
                items = value.items() if isinstance(value, dict) else enumerate(value)
                lines.extend(f"  {k2}: {json.dumps(v2, default=_jsonable)}" for k2, v2 in items)
            else:
                lines.append(f"{key}: {value}")
    try:
        click.echo("\n".join(lines))
        sys.stdout.flush()  # a full disk shows at the flush: named here, not as a bare OSError
    except BrokenPipeError:
        raise
    except OSError as e:
        raise LomtreeError(f"cannot write to standard output: {e.strerror or e}") from None


def _jsonable(o):
    try:
        return o.item()
    except AttributeError:
        return str(o)


if __name__ == "__main__":  # pragma: no cover
    main()
