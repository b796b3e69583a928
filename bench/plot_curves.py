#!/usr/bin/python3
"""Training loss curves of bench/run-amp-curves.sh's runs, fp32, bf16 and fp16 side by side
(three panels, one line a seed), as an SVG written with the standard library alone; prints the
mean evaluation accuracy per precision from the TSV.
    bench/plot_curves.py RUNS_DIR OUT.svg CURVES.tsv"""
import csv
import json
import statistics
import sys
from pathlib import Path

runs, out, tsv = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
precisions = [("off", "fp32"), ("bf16", "bf16"), ("fp16", "fp16")]
colours = ["#1b9e77", "#d95f02", "#7570b3"]
curves = {}
for amp, _ in precisions:
    for seed in (1, 2, 3):
        m = runs / f"{amp}-{seed}" / "bert-small" / "latest" / "metrics.jsonl"
        points = [(l["step"], l["train/loss"]) for l in map(json.loads, open(m)) if "train/loss" in l]
        curves[amp, seed] = points
top = max(y for c in curves.values() for _, y in c)
bottom = min(y for c in curves.values() for _, y in c)
W, H, pad = 300, 220, 40
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * W}" height="{H + 30}" font-family="sans-serif" '
       f'font-size="11">']
for i, (amp, label) in enumerate(precisions):
    x0 = i * W
    svg.append(f'<text x="{x0 + W / 2}" y="14" text-anchor="middle">bert-small, {label}: training loss</text>')
    svg.append(f'<rect x="{x0 + pad}" y="20" width="{W - pad - 10}" height="{H - pad}" fill="none" stroke="#999"/>')
    for frac in (0, 0.5, 1):
        y = 20 + (H - pad) * (1 - frac)
        svg.append(f'<text x="{x0 + pad - 4}" y="{y + 4}" text-anchor="end">{bottom + frac * (top - bottom):.2f}</text>')
    for frac in (0, 0.5, 1):
        svg.append(f'<text x="{x0 + pad + frac * (W - pad - 10)}" y="{H - 5}" text-anchor="middle">{int(300 * frac)}</text>')
    for seed in (1, 2, 3):
        pts = " ".join(f"{x0 + pad + s / 300 * (W - pad - 10):.1f},{20 + (H - pad) * (1 - (l - bottom) / (top - bottom)):.1f}"
                       for s, l in curves[amp, seed])
        svg.append(f'<polyline points="{pts}" fill="none" stroke="{colours[seed - 1]}" stroke-width="1.2"/>')
    svg.append(f'<text x="{x0 + W - 12}" y="{H - pad + 10}" text-anchor="end" fill="#555">seeds 1, 2, 3</text>')
svg.append("</svg>")
out.write_text("\n".join(svg) + "\n")
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
for amp, label in precisions:
    acc = [float(r["eval_accuracy"]) for r in rows if r["amp"] == amp]
    print(f"{label}: eval accuracy {', '.join(f'{a:.4f}' for a in acc)}; mean {statistics.mean(acc):.4f}")
