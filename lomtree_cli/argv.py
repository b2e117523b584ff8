"""``train`` and ``predict`` command lines read without click.

Importing click and building the command group costs 25-35 ms, a tenth of a short ``predict``
(the commands of the Sector benchmark run 0.2-0.4 s). ``launch.main`` therefore reads the usual
``train``/``predict`` command line itself with ``parse`` and runs ``commands.run_train`` /
``run_predict``, the same functions the click commands call. click stays the command line of
record: ``parse`` accepts only command lines whose meaning is certain and returns None for
anything else (help, an unknown or repeated option, ``--``, an option value that starts with
``-``, a value click would reject, an option of a kind not handled here such as ``-c`` with its
optional value), and click then reads the command line and reports any problem, as before.

The option table ``cli_spec.SPECS`` is generated from the click commands by ``spec_source``
(``python -m lomtree_cli.argv`` rewrites ``cli_spec.py``); a test checks the file is current,
and a property test checks that whatever ``parse`` accepts, click reads the same way (values and
which options were given).

Option kinds: ``flag`` (True when given), ``str``, ``int``, ``float`` (Python's ``int()`` /
``float()``, as click), ``choice`` (exact match), ``intrange`` (int within ``[lo, hi]``, a bound
of None is open), ``path`` (click.Path(dir_okay=False): a path that exists must not be a
directory and must be readable), ``progress`` (``-P``: a string that ``commands.progress_interval``
must accept; the parsed value is kept), ``defer`` (never read here: None).
"""

from __future__ import annotations

import os
import stat
import sys

from .cli_spec import SPECS


def _convert(kind: tuple, value: str):
    """(True, converted value) or (False, None) when click might read ``value`` otherwise."""
    tag = kind[0]
    if tag == "str":
        return True, value
    if tag == "path":
        try:
            st = os.stat(value)
        except (OSError, ValueError):
            return True, value
        if stat.S_ISDIR(st.st_mode) or not os.access(value, os.R_OK):
            return False, None
        return True, value
    if tag == "progress":
        from .commands import progress_interval

        try:
            progress_interval(value)
        except ValueError:
            return False, None
        return True, value
    try:
        if tag == "int":
            return True, int(value)
        if tag == "float":
            return True, float(value)
        if tag == "intrange":
            v = int(value)
            lo, hi = kind[1], kind[2]
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return False, None
            return True, v
    except ValueError:
        return False, None
    if tag == "choice":
        return (True, value) if value in kind[1] else (False, None)
    return False, None


def parse(command: str, args: list[str]) -> tuple[dict, set] | None:
    """``(params, given)`` for ``lomtree COMMAND ARGS``: every parameter by its click name (defaults
    filled in, positional arguments as a tuple), and the names given on the command line; None
    when click must read this command line (see the module docstring)."""
    spec = SPECS.get(command)
    if spec is None:
        return None
    by_opt = {}
    for entry in spec["options"]:
        for o in entry[1]:
            by_opt[o] = entry
    params = {entry[0]: entry[3] for entry in spec["options"]}
    given = set()
    positional = []
    i = 0
    n = len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            return None
        if a[:1] != "-" or a == "-":
            positional.append(a)
            continue
        value = None
        if a[:2] == "--":
            name, eq, rest = a.partition("=")
            entry = by_opt.get(name)
            if eq:
                value = rest
        else:
            entry = by_opt.get(a[:2])
            if len(a) > 2:
                value = a[2:]
        if entry is None:
            return None
        name, kind = entry[0], entry[2]
        if name in given:
            return None
        if kind[0] == "flag":
            if value is not None:
                return None
            params[name] = True
        elif kind[0] == "defer":
            return None
        else:
            if value is None:
                if i >= n or (args[i][:1] == "-" and args[i] != "-"):
                    return None
                value = args[i]
                i += 1
            ok, v = _convert(kind, value)
            if not ok:
                return None
            params[name] = v
        given.add(name)
    for entry in spec["options"]:
        if entry[4] and entry[0] not in given:
            return None
    params[spec["argument"]] = tuple(positional)
    if positional:
        given.add(spec["argument"])
    return params, given


# -- the table, from the click commands --------------------------------------------------------

def _kind(param) -> tuple:
    import click

    t = param.type
    if getattr(param, "is_flag", False):
        # a plain on-switch; spec_rows checks that click reads it as False / True
        return ("flag",) if param.is_bool_flag and not param.secondary_opts else ("defer",)
    if getattr(param, "_flag_needs_value", False) or param.nargs != 1:
        return ("defer",)
    if param.name == "progress_interval" and t is click.STRING:
        return ("progress",)
    if t is click.STRING:
        return ("str",)
    if t is click.INT:
        return ("int",)
    if t is click.FLOAT:
        return ("float",)
    if isinstance(t, click.IntRange):
        if t.clamp or t.min_open or t.max_open:
            return ("defer",)
        return ("intrange", t.min, t.max)
    if isinstance(t, click.Choice):
        if not t.case_sensitive or not all(isinstance(c, str) for c in t.choices):
            return ("defer",)
        return ("choice", tuple(t.choices))
    if isinstance(t, click.Path):
        if (not t.exists and t.file_okay and not t.dir_okay and t.readable and not t.writable
                and not t.executable and not t.resolve_path and not t.allow_dash and t.type is None):
            return ("path",)
        return ("defer",)
    return ("defer",)


def spec_rows(command: str) -> dict:
    """The table entry of a click command: its one positional argument (nargs=-1) and, per option,
    ``(name, opts, kind, default, required)`` with the default as click converts it."""
    import click

    from . import cli

    cmd = cli.main.commands[command]
    # the defaults as click fills them in: the params of a command line that gives only the
    # required options
    required = []
    for p in cmd.params:
        if isinstance(p, click.Option) and p.required:
            required += [p.opts[0], "x"]
    defaults = cmd.make_context(command, list(required)).params
    argument = None
    options = []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            if argument is not None or p.nargs != -1 or p.type is not click.STRING:
                raise ValueError(f"{command}: argument {p.name} is not handled by argv.parse")
            argument = p.name
            continue
        if p.count or p.envvar or p.callback is not None or p.is_eager:
            raise ValueError(f"{command}: option {p.name} is not handled by argv.parse")
        default = None if p.required else defaults[p.name]
        kind = ("defer",) if p.multiple else _kind(p)  # a list option: click reads the command line
        if kind[0] == "flag" and (default is not False
                                  or cmd.make_context(command, required + [p.opts[0]]).params[p.name] is not True):
            kind = ("defer",)
        options.append((p.name, tuple(p.opts) + tuple(p.secondary_opts), kind, default, bool(p.required)))
    return {"argument": argument, "options": options}


def spec_source() -> str:
    """The text of ``cli_spec.py`` for the current click commands."""
    lines = ['"""Generated by ``python -m lomtree_cli.argv`` from the click commands (cli.py): the option',
             'table of ``argv.parse``. Do not edit; tests/test_argv.py checks it is current."""', "",
             "SPECS = {"]
    for command in ("predict", "train"):
        rows = spec_rows(command)
        lines.append(f"    {command!r}: {{")
        lines.append(f"        'argument': {rows['argument']!r},")
        lines.append("        'options': [")
        for row in rows["options"]:
            lines.append(f"            {row!r},")
        lines.append("        ],")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli_spec.py")
    text = spec_source()
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    sys.stdout.write(f"wrote {path}\n")
