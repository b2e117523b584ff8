"""Dev check (not a test): lomtree's generated slots vs VW's --audit on hand-worked lines with
numeric namespace/feature names (where lomtree's hash equals VW's: int(name) + namespace hash).

    python -m data_scripts.features_cmp_vw   (after `make dev`)
"""
import os, subprocess, sys, re, tempfile
from lomtree_cli.config import InputConfig
from lomtree_cli.parsing import parse_bytes
VW = [sys.executable, "-m", "vowpalwabbit"]
lines = ["1 |1 5 7:2 9 11 |2 3 4 |3 8", "1 |1 5 7:2 |2 3 |3 8", "1 | 5 6 |2 3:0.5 4"]
cases = [("-q 12", dict(interactions="12")), ("-q 21", dict(interactions="21")), ("-q 12 -q 21", dict(interactions="12,21")),
         ("-q ::", dict(interactions="::")), ("-q 1:", dict(interactions="1:")), ("--cubic 111", dict(interactions="111")),
         ("--interactions 1:2", dict(interactions="1:2")), ("--interactions 2121", dict(interactions="2121")),
         ("--interactions 1223", dict(interactions="1223")),
         ("--ngram 2", dict(ngram="2")), ("--ngram 3 --skips 1", dict(ngram="3", skips="1")), ("--ngram 4 --skips 2", dict(ngram="4", skips="2")),
         ("--ngram 2 -q 12", dict(ngram="2", interactions="12")), ("-q 12 --ignore 2", dict(interactions="12", ignore="2")),
         ("-q 12 --keep 1", dict(interactions="12", keep="1")), ("-q 12 --keep 12", dict(interactions="12", keep="12")),
         ("--ngram 2 --cubic 123", dict(ngram="2", interactions="123"))]


def main():
    LINE = os.path.join(tempfile.mkdtemp(), "l.vw")
    bad = 0
    for line in lines:
        open(LINE, "w").write(line + "\n")
        for opts, kw in cases:
            out = subprocess.run(VW + ["-d", LINE, "--audit", "-b", "18", "--noconstant"] + opts.split(),
                                 capture_output=True, text=True).stdout
            vw = []
            for ln in out.splitlines():
                if ln.startswith("\t"):
                    for f in ln.strip().split("\t"):
                        parts = f.rsplit(":", 3)
                        vw.append((int(parts[1]), float(parts[2])))
            b = parse_bytes(line.encode() + b"\n", InputConfig(bits=18, noconstant=True, **kw))
            lt = list(zip(b.indices.tolist(), b.values.tolist()))
            ok = sorted(vw) == sorted(lt)
            bad += not ok
            print("OK " if ok else "BAD", repr(line), opts, len(vw), len(lt))
            if not ok:
                print("  vw", sorted(vw)); print("  lt", sorted(lt))
    print("mismatches:", bad)


if __name__ == "__main__":
    main()
