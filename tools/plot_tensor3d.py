#!/usr/bin/python3
"""Draws the 3D (AxoNN) tensor split's groups for docs/parallelism.md.

The tensor group's ranks as comm/grid.cpp numbers them (x fastest, then y, then depth z:
rank = (z * Y + y) * X + x), one panel per depth rank, with one X group, one Y group and
one depth group outlined, and what each rank holds of the residual stream and of a
block's two kinds of linear.

    /usr/bin/python3 tools/plot_tensor3d.py [--x 2 --y 2 --depth 2] [--out docs/tensor3d_groups.png]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--x", type=int, default=2)
    ap.add_argument("--y", type=int, default=2)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--out", default="docs/tensor3d_groups.png")
    a = ap.parse_args()
    X, Y, Z = a.x, a.y, a.depth
    fig, axes = plt.subplots(1, Z, figsize=(3.2 * Z + 1.5, 3.4), squeeze=False)
    colours = {"x": "tab:blue", "y": "tab:orange", "depth": "tab:green"}
    for z in range(Z):
        ax = axes[0][z]
        ax.set_xlim(-0.6, X - 0.4)
        ax.set_ylim(Y - 0.4, -0.9)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"depth z = {z}: batch block {z}", fontsize=10)
        for y in range(Y):
            for x in range(X):
                rank = (z * Y + y) * X + x
                ax.add_patch(Rectangle((x - 0.46, y - 0.4), 0.92, 0.8, facecolor="white", edgecolor="black"))
                ax.text(x, y - 0.12, f"rank {rank}", ha="center", va="center", fontsize=9, weight="bold")
                ax.text(x, y + 0.16, f"C block {x}\nheads block {y}", ha="center", va="center", fontsize=6.5)
        for x in range(X):
            ax.text(x, -0.65, f"x = {x}", ha="center", fontsize=8)
        for y in range(Y):
            ax.text(-0.55, y, f"y = {y}", ha="right", va="center", fontsize=8)
        if z == 0:  # an X group: one row; a Y group: one column
            ax.add_patch(FancyBboxPatch((-0.47, -0.47), X - 0.06, 0.94, boxstyle="round,pad=0.02", fill=False,
                                        edgecolor=colours["x"], linewidth=2.5))
            ax.add_patch(FancyBboxPatch((X - 1 - 0.44, -0.44), 0.88, Y - 0.12, boxstyle="round,pad=0.02",
                                        fill=False, edgecolor=colours["y"], linewidth=2.5, linestyle="--"))
        # the depth group of rank (0, 0, z): the same corner in every panel
        ax.add_patch(Rectangle((-0.36, -0.36), 0.72, 0.72, fill=False, edgecolor=colours["depth"], linewidth=2,
                               linestyle=":"))
    handles = [
        plt.Line2D([], [], color=colours["x"], linewidth=2.5, label="an X group: the stream's C split; "
                   "qkv/fc sum over it, proj/fc_proj split their output"),
        plt.Line2D([], [], color=colours["y"], linewidth=2.5, linestyle="--", label="a Y group: heads and hidden "
                   "units split; proj/fc_proj sum over it"),
        plt.Line2D([], [], color=colours["depth"], linewidth=2, linestyle=":", label="a depth group: batch split, "
                   "every weight block sharded by rows"),
    ]
    fig.legend(handles=handles, loc="lower center", fontsize=8, frameon=False, ncol=1)
    fig.suptitle(f"3D tensor split X x Y x depth = {X} x {Y} x {Z}: rank = (z Y + y) X + x", fontsize=11)
    fig.subplots_adjust(bottom=0.28, top=0.82)
    fig.savefig(a.out, dpi=110)
    print(f"plot_tensor3d: {a.out}")


if __name__ == "__main__":
    main()
