"""Honest shapes are not punished: workloads where every team is honest, each replayed under
allot, classic and Fair Tree, judged per team.

A *mix* is a cluster, a tree (teams and shares) and each team's honest work, drawn from the
shapes real teams submit: steady training (jobs of a share of the cluster, back to back), a
sweep (a burst of one-GPU jobs of under an hour), debug work (one-GPU jobs of a quarter hour,
a few an hour, beside training), whole-cluster jobs, and several users of one account. The
named suite covers each shape against training, and small and large shares; `random_mix(seed)`
draws a multi-team mix (2 to 4 teams, random shares and shapes) that the seed replays.

Judged (`judge_mix`): every team owed at least `MIN_OWED` GPU-hours gets, under allot, at
least the better of classic and Fair Tree minus 1 point of its owed GPU-hours; and the
cluster's owed% under allot is at least both baselines'. Standard library only.
"""
import random

from .replay import H

MIN_OWED = 100.0  # GPU-hours: a team owed less is judged on too few hours to mean anything
SHAPES = ["training", "sweep", "debug", "whole", "users"]


def work(shape, team, capacity, r=None, scale=1.0):
    """`team`'s honest jobs of one shape on a cluster of `capacity` GPUs; `r` (random.Random)
    varies sizes and times, None gives the suite's fixed ones."""
    pick = (lambda xs: r.choice(xs)) if r else (lambda xs: xs[0])
    C = capacity
    if shape == "training":
        g = pick([max(1, C // 2), max(1, C // 4), max(1, C // 8), C])
        d = pick([2 * H, 4 * H, H, 8 * H])
        n = int(24 * H / d * scale)
        return [(team, 600 + k * d, d, g, d + 600, None) for k in range(max(1, n))]
    if shape == "sweep":
        n = pick([100, 60, 200, 30])
        d = pick([2400, 1800, 3000])
        at = pick([(H, 13 * H), (2 * H,), (H, 7 * H, 13 * H)])
        return [(team, t, d, 1, H, None) for t in at for _ in range(n)]
    if shape == "debug":
        every = pick([900, 600, 1800])
        return ([(team, 300 + k * every, 900, 1, H, None) for k in range(int(24 * H / every))]
                + work("training", team, capacity, r, scale=0.5))
    if shape == "whole":
        at = pick([(3 * H, 15 * H), (H,), (2 * H, 8 * H, 14 * H)])
        d = pick([2 * H, 4 * H, H])
        return [(team, t, d, C, d, None) for t in at]
    if shape == "users":
        # Four users of one account, each a chain of quarter-cluster 2-h jobs, starting apart.
        g = max(1, C // 4)
        return [(team, 600 + u * 1800 + k * 2 * H, 2 * H, g, 2 * H + 600, None, f"u{u}")
                for u in range(4) for k in range(11)]
    raise ValueError(shape)


def tree_of(shares):
    return "".join(f"[tree.{t}]\nshare = {s}\n\n" for t, s in shares.items())


def suite():
    """The named mixes: name -> (cluster, shares, jobs)."""
    out = {}
    C = 16
    for shape in ["sweep", "debug", "whole", "users"]:
        out[f"{shape}-vs-training"] = ("2x8", {"a": 50, "b": 50},
                                       work(shape, "a", C) + work("training", "b", C))
    out["training-vs-training"] = ("2x8", {"a": 50, "b": 50}, work("training", "a", C) + work("training", "b", C))
    # Small and large shares: the small team sweeps, the large trains; and the reverse.
    out["small-sweep-large-training"] = ("2x8", {"a": 20, "b": 80}, work("sweep", "a", C) + work("training", "b", C))
    out["small-training-large-sweep"] = ("2x8", {"a": 20, "b": 80}, work("training", "a", C) + work("sweep", "b", C))
    # Three teams, each its own shape.
    out["three-shapes"] = ("4x8", {"a": 40, "b": 30, "c": 30},
                           work("whole", "a", 32) + work("sweep", "b", 32) + work("debug", "c", 32))
    return out


def random_mix(seed):
    """A random honest mix: (cluster, shares, jobs)."""
    r = random.Random(seed)
    nodes = r.choice([2, 2, 4])
    C = nodes * 8
    teams = [f"t{i}" for i in range(r.choice([2, 2, 3, 4]))]
    shares = {t: r.choice([10, 20, 30, 50, 50]) for t in teams}
    jobs = []
    for t in teams:
        for shape in r.sample(SHAPES, r.choice([1, 1, 2])):
            jobs += work(shape, t, C, r, scale=r.choice([0.5, 1.0, 1.0, 2.0]))
    return f"{nodes}x8", shares, jobs


def judge_mix(runs):
    """Per team: owed GPU-hours and owed% under each policy, and the goal's gap (points below
    the better of classic and Fair Tree, minus the 1-point allowance: positive = violated);
    the cluster's owed% and its gap."""
    teams = {}
    for pol, run in runs.items():
        for t in run["teams"]:
            teams.setdefault(t["name"], {})[pol] = (t["owed_gpu_hours"], t["owed_delivered"])
    rows, violations = {}, []
    for name, by in sorted(teams.items()):
        owed_h = by["allot"][0]
        pct = {p: round(v[1] * 100, 2) for p, v in by.items()}
        gap = max(pct["classic"], pct["fairtree"]) - pct["allot"] - 1.0
        rows[name] = {"owed_gpu_hours": round(owed_h, 1), "owed": pct, "gap": round(gap, 2),
                      "judged": owed_h >= MIN_OWED}
        if owed_h >= MIN_OWED and gap > 1e-9:
            violations.append(f"team {name}")
    total = {p: round(r["owed_delivered"] * 100, 2) for p, r in runs.items()}
    cluster_gap = max(total["classic"], total["fairtree"]) - total["allot"]
    if cluster_gap > 1e-9:
        violations.append("cluster owed%")
    return {"teams": rows, "owed": total, "cluster_gap": round(cluster_gap, 2), "violations": violations}
