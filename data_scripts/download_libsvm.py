"""Download original LIBSVM multiclass datasets (for users with internet access).

Files come from the LIBSVM datasets page,
``https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/``, and are saved as
published (compressed files stay compressed: lomtree reads ``.bz2`` directly, and
``convert_libsvm`` turns them into VW text).  Nothing here runs in the tests or in
``prepare_all``; the repository's benchmarks use the copies in the shared data dir.

Label conventions (pass ``--label-offset`` to ``convert_libsvm`` / lomtree where needed):
aloi, sector, letter, pendigits and news20 are 1-based; mnist is 0-based (offset 1); check
the label range of anything else before training (lomtree needs labels >= 1).

Command line::

    python -m data_scripts.download_libsvm --list
    python -m data_scripts.download_libsvm aloi sector [--dest DIR] [--force]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import urllib.request
from pathlib import Path

from .common import DEFAULT_OUT_DIR

BASE_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/"

#: dataset name -> file paths relative to ``BASE_URL`` (train first, then test / extra splits)
FILES: dict[str, list[str]] = {
    "aloi": ["aloi.scale.bz2"],
    "sector": ["sector/sector.scale.bz2", "sector/sector.t.scale.bz2"],
    "letter": ["letter.scale", "letter.scale.t", "letter.scale.tr", "letter.scale.val"],
    "pendigits": ["pendigits", "pendigits.t"],
    "news20": ["news20.scale.bz2", "news20.t.scale.bz2"],
    "mnist": ["mnist.scale.bz2", "mnist.scale.t.bz2"],
    "rcv1": ["rcv1_train.multiclass.bz2", "rcv1_test.multiclass.bz2"],
}

#: the datasets downloaded when no name is given (those of the LOMtree paper's small-scale table we can get here)
DEFAULT_DATASETS = ("aloi", "sector", "letter", "pendigits")


def urls(names=DEFAULT_DATASETS, base_url: str = BASE_URL) -> list[tuple[str, str]]:
    """``[(url, file name), ...]`` for the given dataset names (KeyError on an unknown name).

    >>> urls(["sector"])[0]
    ('https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/sector/sector.scale.bz2', 'sector.scale.bz2')
    """
    out = []
    for name in names:
        for rel in FILES[name]:
            out.append((base_url.rstrip("/") + "/" + rel, rel.rsplit("/", 1)[-1]))
    return out


def download(url: str, dest, force: bool = False, timeout: float = 60.0) -> Path:
    """Download ``url`` to the file ``dest`` (via a ``.part`` file, renamed when complete).

    An existing ``dest`` is kept unless ``force``.  Returns ``dest``.
    """
    dest = Path(dest)
    if dest.exists() and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    req = urllib.request.Request(url, headers={"User-Agent": "lomtree-data-scripts"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp, open(part, "wb") as fh:
            shutil.copyfileobj(resp, fh, length=1 << 20)
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return dest


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m data_scripts.download_libsvm",
        description=f"Download LIBSVM multiclass datasets from {BASE_URL}",
    )
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"datasets: {', '.join(FILES)} (default: {' '.join(DEFAULT_DATASETS)})")
    ap.add_argument("--dest", default=str(DEFAULT_OUT_DIR / "libsvm"), help="download dir (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="download again even if the file exists")
    ap.add_argument("--list", action="store_true", help="print the URLs and exit (no network)")
    ap.add_argument("--base-url", default=BASE_URL, help="mirror of the LIBSVM multiclass dir")
    args = ap.parse_args(argv)
    names = args.names or list(DEFAULT_DATASETS)
    unknown = [n for n in names if n not in FILES]
    if unknown:
        ap.error(f"unknown dataset(s): {', '.join(unknown)}; known: {', '.join(FILES)}")
    todo = urls(names, args.base_url)
    if args.list:
        for url, fname in todo:
            print(f"{url}\t{Path(args.dest) / fname}")
        return 0
    status = 0
    for url, fname in todo:
        dest = Path(args.dest) / fname
        print(f"{url} -> {dest}", file=sys.stderr)
        try:
            download(url, dest, force=args.force)
        except OSError as exc:  # URLError is an OSError
            print(f"error: {url}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
