"""Draw discovery time against the number of skills, log-log, with matplotlib.

    python bench/bench_env/chart.py SERIES.json OUT.png

SERIES.json maps a label to {"sizes": [...], "seconds": [...]}; run in the bench environment,
the only one with matplotlib.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt


def main() -> None:
    series = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    figure, axes = plt.subplots(figsize=(8, 5.5), dpi=120)
    markers = "osD^v<>ph*"
    for index, (label, points) in enumerate(series.items()):
        milliseconds = [seconds * 1000 for seconds in points["seconds"]]
        style = "--" if points.get("baseline") else "-"
        axes.plot(
            points["sizes"],
            milliseconds,
            style,
            marker=markers[index % len(markers)],
            label=label,
            linewidth=2.4 if points.get("ours") else 1.4,
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("skills (bundles of about 12 KB)")
    axes.set_ylabel("milliseconds (median of fresh processes)")
    axes.set_title("Skill discovery time against the number of skills")
    axes.grid(True, which="both", linewidth=0.4, alpha=0.5)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
