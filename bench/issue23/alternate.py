"""KJV book, one pass, -b 24: lomtree and VW trained alternately 5 times each (the machine is shared;
alternating spreads its load over both). Prints the median and fastest seconds of each."""
import subprocess, time, statistics, sys
LT="/work/wt23/.venv/bin/lomtree"; VW=["/work/main/.venv/bin/python","-m","vowpalwabbit"]
D="/work/main/bench/data/kjv_book.train.vw"
pairs={"filter":"ect","lomtree":"log_multi","oaa":"oaa"}
for opt in (["-q","ww"],["--ngram","2"]):
  for red,v in pairs.items():
    a=[];b=[]
    for i in range(5):
        t=time.time(); subprocess.run([LT,"train","-r",red,"-k","66","-b","24",D,"--quiet"]+opt,check=True); a.append(time.time()-t)
        t=time.time(); subprocess.run(VW+["--"+v,"66","-b","24","-d",D,"--quiet"]+opt,check=True,capture_output=True); b.append(time.time()-t)
    print(" ".join(opt), red, "lomtree median %.2f min %.2f" % (statistics.median(a), min(a)), "| vw", v, "median %.2f min %.2f" % (statistics.median(b), min(b)), flush=True)
