"""Draws the PNG plots of docs/BENCHMARKS.md from `tessera bench … --json` files.

Run through scripts/bench-plots, which provides matplotlib in a venv.

    bench_plots.py --compare compare.json --subspaces subspaces.json \
                   --search-vs-scan svs.json --out docs/bench
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "tessera f=1": "#1f77b4",
    "tessera f=0": "#17becf",
    "tessera f=1 fsync": "#9467bd",
    "redis": "#d62728",
    "etcd": "#2ca02c",
    "etcd-3": "#98df8a",
    "postgres": "#ff7f0e",
}


def load(path):
    with open(path) as f:
        return json.load(f)


def cdf_axes(ax, title):
    ax.set_xscale("log")
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("fraction of operations ≤ latency")
    ax.set_ylim(0, 1.0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)


def plot_cdfs(compare, out):
    """One panel per (phase, op) pair: every system's latency CDF."""
    panels = [
        ("read", "READ", "point read (get)"),
        ("update", "UPDATE", "one-field update (put)"),
        ("search-eq", "SEARCH-EQ", "equality on the secondary attribute"),
        ("range10", "SCAN", "10-record range on the secondary attribute"),
    ]
    size = compare.get("size", {})
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for ax, (phase, op, title) in zip(axes.flat, panels):
        for r in compare["results"]:
            if r["phase"] != phase or op not in r["ops"]:
                continue
            stats = r["ops"][op]
            cdf = stats.get("cdf") or []
            if not cdf:
                continue
            xs = [max(us, 1) for _, us in cdf]
            ys = [q for q, _ in cdf]
            ax.step(xs, ys, where="post", label=f"{r['store']} (p50 {stats['p50_us']} µs)",
                    color=COLORS.get(r["store"]))
        cdf_axes(ax, title)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"Latency CDFs, {size.get('records', '?')} records, {size.get('workers', '?')} in flight "
        "(tessera bench compare)")
    fig.tight_layout()
    path = os.path.join(out, "latency-cdf.png")
    fig.savefig(path, dpi=110)
    print("wrote", path)


def plot_subspaces(data, out):
    rows = []
    for r in data["results"]:
        k = int(r["phase"].split("=")[1])
        stats = r["ops"].get("INSERT") or next(iter(r["ops"].values()))
        rows.append((k, stats["mean_us"], stats["p50_us"], stats["p99_us"], r["throughput"]))
    rows.sort()
    ks = [r[0] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    ax1.plot(ks, [r[1] / 1000 for r in rows], "o-", label="mean")
    ax1.plot(ks, [r[2] / 1000 for r in rows], "s--", label="p50")
    ax1.plot(ks, [r[3] / 1000 for r in rows], "^:", label="p99")
    ax1.set_xlabel("non-key subspaces")
    ax1.set_ylabel("put latency (ms)")
    ax1.set_title("put latency vs subspaces (each adds 2 replicas to the chain)")
    ax1.set_xticks(ks)
    ax1.grid(True, alpha=0.3)
    ax1.legend()
    ax2.plot(ks, [r[4] for r in rows], "o-", color="#2ca02c")
    ax2.set_xlabel("non-key subspaces")
    ax2.set_ylabel("puts per second")
    ax2.set_title("put throughput vs subspaces")
    ax2.set_xticks(ks)
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "subspaces.png")
    fig.savefig(path, dpi=110)
    print("wrote", path)


def plot_search_vs_scan(data, out):
    runs = [("recno subspace:\n1 region, its index", data["with_subspace"]),
            ("no recno subspace:\nevery region scanned", data["without_subspace"])]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [l for l, _ in runs]
    stats = [next(iter(r["ops"].values())) for _, r in runs]
    width = 0.25
    xs = range(len(runs))
    for i, (key, name) in enumerate([("p50_us", "p50"), ("mean_us", "mean"), ("p99_us", "p99")]):
        ax1.bar([x + (i - 1) * width for x in xs], [max(s[key], 1) / 1000 for s in stats], width,
                label=name)
    ax1.set_yscale("log")
    ax1.set_xticks(list(xs))
    ax1.set_xticklabels(labels)
    ax1.set_ylabel("search latency (ms, log scale)")
    ax1.set_title("equality search on recno")
    ax1.legend()
    ax1.grid(True, axis="y", which="both", alpha=0.3)
    ax2.bar(list(xs), [r["throughput"] for _, r in runs], color=["#1f77b4", "#d62728"])
    ax2.set_xticks(list(xs))
    ax2.set_xticklabels(labels)
    ax2.set_yscale("log")
    ax2.set_ylabel("searches per second (log scale)")
    ax2.set_title(f"throughput ratio {data['throughput_ratio']:.1f}×")
    ax2.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "search-vs-scan.png")
    fig.savefig(path, dpi=110)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--compare")
    p.add_argument("--subspaces")
    p.add_argument("--search-vs-scan")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--out", default=os.path.join(repo, "docs", "bench"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.compare:
        plot_cdfs(load(a.compare), a.out)
    if a.subspaces:
        plot_subspaces(load(a.subspaces), a.out)
    if a.search_vs_scan:
        plot_search_vs_scan(load(a.search_vs_scan), a.out)


if __name__ == "__main__":
    main()
