#!/usr/bin/python3
"""tally-sim's plots (run by tally-sim with Debian's /usr/bin/python3).

  plot.py sweep CSV OUTDIR     throughput and scaling efficiency against
                               GPUs, one line per method, per model and net
  plot.py latency CSV OUTDIR   samples/s against per-hop latency and
                               against bandwidth, per model and GPU count
"""
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def sweep(rows, out):
    for model in sorted({r["model"] for r in rows}):
        for net in sorted({r["net"] for r in rows}):
            sel = [r for r in rows if r["model"] == model and r["net"] == net]
            if not sel:
                continue
            fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
            for m in dict.fromkeys(r["method"] for r in sel):
                pts = sorted((int(r["gpus"]), float(r["samples_per_s"]),
                              float(r["scaling_efficiency"]))
                             for r in sel if r["method"] == m)
                g = [p[0] for p in pts]
                ax[0].plot(g, [p[1] for p in pts], marker="o", label=m)
                ax[1].plot(g, [p[2] for p in pts], marker="o", label=m)
            for a, yl in zip(ax, ("samples/s", "scaling efficiency")):
                a.set_xscale("log", base=2)
                a.set_xlabel("GPUs (4 per host above 4)")
                a.set_ylabel(yl)
                a.grid(True, alpha=0.3)
            ax[0].set_yscale("log")
            ax[1].set_ylim(0, 1.05)
            ax[1].legend(fontsize=8)
            fig.suptitle(f"tally-sim: {model}, {net}")
            fig.tight_layout()
            path = os.path.join(out, f"sim-{model}-{net}.png")
            fig.savefig(path, dpi=90)
            plt.close(fig)
            print(f"written: {path}")


def latency(rows, out):
    for model in sorted({r["model"] for r in rows}):
        for gpus in sorted({int(r["gpus"]) for r in rows}):
            fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
            for k, (sw, x, xl) in enumerate((
                    ("latency", "latency_us", "one-way latency, us (10 Gb/s)"),
                    ("bandwidth", "gbps", "bandwidth, Gb/s (25 us)"))):
                sel = [r for r in rows if r["model"] == model and
                       int(r["gpus"]) == gpus and r["sweep"] == sw]
                for m in dict.fromkeys(r["method"] for r in sel):
                    pts = sorted((float(r[x]), float(r["scaling_efficiency"]))
                                 for r in sel if r["method"] == m)
                    ax[k].plot([p[0] for p in pts], [p[1] for p in pts],
                               marker="o", label=m)
                ax[k].set_xscale("log")
                ax[k].set_xlabel(xl)
                ax[k].set_ylabel("scaling efficiency")
                ax[k].set_ylim(0, 1.05)
                ax[k].grid(True, alpha=0.3)
            ax[1].legend(fontsize=8)
            fig.suptitle(f"tally-sim: {model}, {gpus} GPUs")
            fig.tight_layout()
            path = os.path.join(out, f"sim-latency-{model}-{gpus}.png")
            fig.savefig(path, dpi=90)
            plt.close(fig)
            print(f"written: {path}")


def main():
    kind, path, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    {"sweep": sweep, "latency": latency}[kind](rows, out)


if __name__ == "__main__":
    main()
