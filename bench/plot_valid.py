#!/usr/bin/env python3
"""Plots a run's held-out perplexity and training loss against the step (SVG).

Reads a `baton train --metrics` file of a run with --valid (its
`valid_perplexity` lines and each step's `loss`) and writes an SVG with no
plotting library: the training loss (grey) and the held-out perplexity's
logarithm, the held-out loss (blue), on one axis of nats.

    python3 bench/plot_valid.py quality.jsonl quality.svg
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lines = [json.loads(line) for line in open(sys.argv[1])]
    train = [(r["step"], r["loss"]) for r in lines if "loss" in r and "step" in r]
    valid = [(r["step"], r["valid_loss"]) for r in lines if "valid_loss" in r]
    if not valid:
        sys.exit(f"{sys.argv[1]} has no valid_loss lines (train with --valid)")
    width, height, margin = 640, 360, 50
    steps = max(s for s, _ in train + valid)
    top = max(v for _, v in train + valid)
    bottom = min(v for _, v in train + valid)

    def x(step):
        return margin + (width - 2 * margin) * step / steps

    def y(value):
        return height - margin - (height - 2 * margin) * (value - bottom) / (top - bottom or 1)

    def path(points):
        return " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(points))

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<line x1="{margin}" y1="{height - margin}" x2="{width - margin}" y2="{height - margin}" stroke="black"/>',
           f'<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{height - margin}" stroke="black"/>',
           f'<path d="{path(train)}" fill="none" stroke="#999" stroke-width="1"/>',
           f'<path d="{path(valid)}" fill="none" stroke="#1f5fbf" stroke-width="2"/>']
    for s, v in valid:
        svg.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="3" fill="#1f5fbf"/>')
    svg.append(f'<text x="{margin}" y="{margin - 10}">loss (nats): training (grey), held-out (blue); '
               f'perplexity {valid[0][1] and round(2.718281828 ** valid[0][1])} to '
               f'{round(2.718281828 ** valid[-1][1])}</text>')
    svg.append(f'<text x="{width - margin}" y="{height - margin + 20}" text-anchor="end">step {steps}</text>')
    svg.append(f'<text x="{margin - 5}" y="{y(top) + 4:.1f}" text-anchor="end">{top:.1f}</text>')
    svg.append(f'<text x="{margin - 5}" y="{y(bottom) + 4:.1f}" text-anchor="end">{bottom:.1f}</text>')
    svg.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(svg) + "\n")
    print(f"wrote {sys.argv[2]}: {len(valid)} held-out points, {len(train)} steps")


if __name__ == "__main__":
    main()
