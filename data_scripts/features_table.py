"""Markdown tables of bench/features/results.json for bench/notes/features.md.

    python -m data_scripts.features_table bench/features/results.json
"""
import json, sys

NAMES = {"book_ngram": "KJV book (66), --ngram 2", "book_q": "KJV book (66), -q ww",
         "nextword_q": "KJV next word (5,001), -q pp", "nextword_q_oaa": "KJV next word (5,001), -q pp",
         "nextword_plain": "KJV next word (5,001), no feature options",
         "nextword_q_cpt": "KJV next word (5,001), -q pp", "nextword_q_plt": "KJV next word (5,001), -q pp", "nextword_plain_cpt": "KJV next word (5,001), no feature options"}
VWNAME = {"ect": "Filter tree", "log_multi": "LOMtree", "oaa": "OAA"}
LTNAME = {"filter": "Filter tree", "lomtree": "LOMtree", "oaa": "OAA", "plt": "PLT", "cpt": "CPT"}


def main():
    r = json.load(open(sys.argv[1]))
    out = ["| task | reduction | lomtree error % | VW error % | lomtree ex/s | VW ex/s |", "| --- | --- | --- | --- | --- | --- |"]
    for task in ("book_ngram", "book_q", "nextword_q", "nextword_q_oaa", "nextword_q_cpt", "nextword_q_plt", "nextword_plain",
                 "nextword_plain_cpt"):
        rows = r.get(task, [])
        lt = {x["reduction"]: x for x in rows if x["system"] == "lomtree"}
        vw = {VWNAME[x["reduction"]]: x for x in rows if x["system"] == "vw"}
        for red, x in lt.items():
            v = vw.get(LTNAME[red])
            vs = f"{100 * v['test_error']:.2f}" if v else "(no VW counterpart)"
            vt = f"{v['examples_per_second']:,.0f}" if v else ""
            out.append(f"| {NAMES[task]} | {LTNAME[red]} | {100 * x['test_error']:.2f} | {vs} | {x['examples_per_second']:,.0f} | {vt} |")
    print("\n".join(out))
    print()
    out = ["| input | options | lomtree -r table ex/s | VW --noop ex/s |", "| --- | --- | --- | --- |"]
    rows = r.get("parse", [])
    for a, b in zip(rows[::2], rows[1::2]):
        out.append(f"| {a['data']} | {a['options'] or '(none)'} | {a['examples_per_second']:,.0f} ({a['seconds']:.2f} s) | {b['examples_per_second']:,.0f} ({b['seconds']:.2f} s) |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
