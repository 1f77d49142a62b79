"""The adversarial search: strategic workloads drawn at random, the worst improved by
hill-climbing, each replayed against several honest workloads under allot, classic and Fair
Tree, and judged by checks.judge.

A candidate is a *genome*: the cluster, how many accounts the strategic team spreads over
(leaves of one group whose share equals the honest team's), and one to three *components*, each
a stream of jobs of one shape: GPUs (1 to the cluster), duration, time limit, minimum runtime
(the default, 0 = free tier, or 1 minute to the cap), an arrival pattern (steady, bursts of k
every m minutes around the sweep threshold, parallel chains of back-to-back jobs, one flood,
chains timed to contract ends), the hours it is active, and how many users submit it.
Its id replays it: `S` is the genome drawn from seed S, `S/M` that genome mutated with seed M
(and so on). Standard library only.
"""
import json, random, sys, time
from concurrent.futures import ProcessPoolExecutor

from . import checks
from .replay import H, ReplayError, replay

DAY = 24 * H
TWO = "[tree.honest]\nshare = 50\n\n[tree.gamer]\nshare = 50\n"
GPU_CHOICES = [1, 1, 2, 2, 3, 4, 6, 8, 12, 16]
PATTERNS = ["steady", "burst", "chains", "flood", "contract"]
MAX_LOAD = 2.5
# Candidates evaluated between two choices of parents: fixed, so that a seed gives the same
# candidates whatever the number of processes.
BATCH = 8


# ------------------------------------------------------------------ honest workloads

def honest_workloads(capacity):
    """The honest team's workloads each candidate is replayed against: name -> jobs."""
    C, half, quarter = capacity, max(1, capacity // 2), max(1, capacity // 4)
    return {
        # Whole-cluster jobs after the strategic team has filled the cluster, and half a day on.
        "whole-cluster": [("honest", 1800, 4 * H, C, 4 * H, None), ("honest", 12 * H + 1800, 4 * H, C, 4 * H, None)],
        # Steady training at its share: one half-cluster 2-h job every 2 h.
        "training": [("honest", 600 + k * 2 * H, 2 * H, half, 2 * H + 600, None) for k in range(12)],
        # A hyper-parameter sweep: 100 one-GPU 40-min jobs (1-h limit), twice.
        "sweep": [("honest", t, 2400, 1, H, None) for t in (H, 13 * H) for _ in range(100)],
        # Debug work (4 an hour, 1 GPU, 15 min, 1-h limit) beside quarter-cluster 3-h training.
        "debug": [("honest", 300 + k * 900, 900, 1, H, None) for k in range(96)]
                 + [("honest", 600 + k * 3 * H, 3 * H, quarter, 3 * H + 600, None) for k in range(8)],
        # The issue's: whole-cluster jobs beside quarter-cluster training.
        "mixed": [("honest", 3 * H, 2 * H, C, 2 * H, None), ("honest", 15 * H, 2 * H, C, 2 * H, None)]
                 + [("honest", 600 + k * 3 * H, 3 * H, quarter, 3 * H + 600, None) for k in range(8)],
    }


# ------------------------------------------------------------------ genomes

def draw_component(r, capacity, cap_s):
    dur = int(min(12 * H, max(120, r.lognormvariate(7.8, 1.1))))  # median ~40 min
    limit = r.choice(["exact", "exact", "x1.1", "x2", "hour", "none"])
    minrt = r.choice(["default", "default", "free", "value", "cap", "limit"])
    return {
        "gpus": min(capacity, r.choice(GPU_CHOICES)),
        "dur": dur,
        "limit": limit,
        "minrt": minrt,
        "minrt_s": int(r.uniform(60, cap_s)),
        "pattern": r.choice(PATTERNS),
        "every_min": r.choice([1, 2, 5, 10, 14, 15, 16, 30, 45, 55, 60, 90, 120, 240]),
        "k": r.choice([1, 2, 4, 8, 15, 16, 17, 24, 32, 64]),
        "chains": r.randint(1, 16),
        "start_h": r.choice([0, 0, 0, 1, 2, 4, 6, 8, 12]),
        "stop_h": r.choice([24, 24, 24, 6, 12, 16, 20]),
        "users": r.randint(1, 4),
    }


def draw(seed, capacity=16, cap_s=8 * H):
    r = random.Random(seed)
    return {
        "cluster": f"{capacity // 8}x8",
        "accounts": r.choice([1, 1, 1, 2, 4, 8]),
        "components": [draw_component(r, capacity, cap_s) for _ in range(r.choice([1, 1, 2, 2, 3]))],
    }


def mutate(genome, seed, cap_s=8 * H):
    g = json.loads(json.dumps(genome))
    r = random.Random(seed)
    capacity = int(g["cluster"].split("x")[0]) * 8
    what = r.random()
    if what < 0.08 and len(g["components"]) < 3:
        g["components"].append(draw_component(r, capacity, cap_s))
    elif what < 0.14 and len(g["components"]) > 1:
        g["components"].pop(r.randrange(len(g["components"])))
    elif what < 0.2:
        g["accounts"] = r.choice([1, 2, 4, 8])
    else:
        c = r.choice(g["components"])
        key = r.choice(["gpus", "dur", "limit", "minrt", "minrt_s", "pattern", "every_min", "k", "chains",
                        "start_h", "stop_h", "users"])
        if key in ("dur", "minrt_s", "every_min", "k", "chains"):
            lo = {"dur": 60, "minrt_s": 60, "every_min": 1, "k": 1, "chains": 1}[key]
            hi = {"dur": 12 * H, "minrt_s": cap_s, "every_min": 480, "k": 128, "chains": 32}[key]
            c[key] = int(min(hi, max(lo, round(c[key] * r.choice([0.5, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 2]))
                                     + r.choice([-1, 0, 1]))))
        else:
            fresh = draw_component(r, capacity, cap_s)
            c[key] = fresh[key]
    return g


def genome_of(cid, capacity=16):
    """The genome an id names (`S`, `S/M`, `S/M/M2`, ...)."""
    parts = [int(p) for p in str(cid).split("/")]
    g = draw(parts[0], capacity)
    for m in parts[1:]:
        g = mutate(g, m)
    return g


def accounts_of(genome):
    n = genome["accounts"]
    return ["gamer"] if n == 1 else [f"g{i + 1}" for i in range(n)]


def tree_of(genome):
    n = genome["accounts"]
    if n == 1:
        return TWO
    return "[tree.honest]\nshare = 50\n\n[tree.gamers]\nshare = 50\n" + "".join(
        f"\n[tree.gamers.g{i + 1}]\nshare = 1\n" for i in range(n))


def jobs_of(genome, rules):
    """The strategic team's jobs: (account, submit, duration, gpus, limit, min_runtime, user)."""
    accts = accounts_of(genome)
    out = []
    n = 0
    for ci, c in enumerate(genome["components"]):
        dur = c["dur"]
        limit = {"exact": dur, "x1.1": int(dur * 1.1), "x2": dur * 2, "hour": max(dur, H), "none": None}[c["limit"]]
        cap = limit if limit is not None else None
        minrt = {"default": None, "free": 0, "value": c["minrt_s"], "cap": rules.max_min_runtime,
                 "limit": cap if cap is not None else rules.max_min_runtime}[c["minrt"]]
        if minrt is not None and limit is not None:
            minrt = min(minrt, limit)  # job_submit refuses more than the time limit
        t0, t1 = c["start_h"] * H, max(c["start_h"] + 1, c["stop_h"]) * H
        every = c["every_min"] * 60
        times = []
        if c["pattern"] == "steady":
            times = list(range(t0, t1, every))
        elif c["pattern"] == "burst":
            times = [t for t in range(t0, t1, every) for _ in range(c["k"])]
        elif c["pattern"] == "chains":
            times = [t for t in range(t0, t1, max(60, dur)) for _ in range(c["chains"])]
        elif c["pattern"] == "flood":
            times = [t0] * (c["k"] * c["chains"])
        elif c["pattern"] == "contract":
            step = max(60, rules.min_runtime(minrt, limit))
            times = [t for t in range(t0, t1, step) for _ in range(c["chains"])]
        for t in times:
            out.append((accts[n % len(accts)], t, dur, c["gpus"], limit, minrt, f"s{ci}u{n % c['users']}"))
            n += 1
    # At most MAX_LOAD days of the whole cluster's work, the earliest submissions kept: demand
    # beyond that only lengthens the replay (the honest team's work ends within a day).
    capacity = int(genome["cluster"].split("x")[0]) * 8
    out.sort(key=lambda j: j[1])
    budget, kept = MAX_LOAD * capacity * DAY, []
    for j in out:
        budget -= j[2] * j[3]
        if budget < 0:
            break
        kept.append(j)
    return kept


# ------------------------------------------------------------------ evaluation

class Context:
    def __init__(self, allot, head, rules, workloads=None):
        self.allot, self.head, self.rules = allot, head, rules
        self.workloads = workloads


def evaluate(ctx, cid):
    """Replays candidate `cid` against every honest workload; returns its record."""
    g = genome_of(cid)
    capacity = int(g["cluster"].split("x")[0]) * 8
    strategic = accounts_of(g)
    gjobs = jobs_of(g, ctx.rules)
    if not gjobs:
        return {"id": cid, "badness": -99, "per_honest": {}, "genome": g, "jobs": 0}
    shares = {"honest": 50, "gamer": 50} if len(strategic) == 1 else {"honest": 50, **{a: 50 / len(strategic) for a in strategic}}
    per = {}
    for name, hjobs in honest_workloads(capacity).items():
        if ctx.workloads and name not in ctx.workloads:
            continue
        try:
            runs, att, by_id, offset = replay(ctx.allot, ctx.head, g["cluster"], tree_of(g), gjobs + hjobs,
                                              name=f"c{abs(hash(str(cid))) % 10**8}-{name}")
        except ReplayError as e:
            per[name] = {"error": str(e), "badness": 99, "violations": ["replay"]}
            continue
        if len(strategic) > 1:
            # The team is the group: what each leaf held counts as the group's.
            shares_g = {"honest": 50, "gamers": 50}
            for pol in att:
                for a in att[pol]:
                    if a["team_name"] != "honest":
                        a["team_name"] = "gamers"
        else:
            shares_g = shares
        per[name] = checks.judge(runs, att, by_id, offset, "honest", strategic, capacity, ctx.rules, shares_g)
        per[name]["span_h"] = round(runs["allot"]["span_s"] / H, 1)
    worst = max(per.values(), key=lambda v: v["badness"])
    return {"id": cid, "badness": worst["badness"], "per_honest": per, "genome": g, "jobs": len(gjobs)}


def _eval(args):
    ctx, cid = args
    return evaluate(ctx, cid)


def search(ctx, n, seed, procs=2, out=sys.stderr, progress=True, initial=None):
    """Evaluates `n` candidates: a quarter drawn at random, the rest mutations of the worst so
    far (a tournament among the ten worst). Returns every record, worst first."""
    r = random.Random(seed)
    seen, recs = set(), []
    initial = max(1, n // 4) if initial is None else initial
    base = seed * 1_000_003
    todo = [str(base + i) for i in range(initial)]
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=procs) as pool:
        while len(recs) < n:
            batch = [c for c in todo if c not in seen][: max(1, min(n - len(recs), BATCH))]
            todo = todo[len(batch):]
            if not batch:
                top = sorted(recs, key=lambda x: -x["badness"])[:10]
                batch = []
                while len(batch) < min(n - len(recs), BATCH):
                    parent = max(r.sample(top, min(3, len(top))), key=lambda x: x["badness"])
                    child = f"{parent['id']}/{r.randrange(1, 10**6)}"
                    if child.count("/") > 12:
                        child = str(base + r.randrange(10**6, 10**7))
                    if child not in seen:
                        batch.append(child)
            seen.update(batch)
            for rec in pool.map(_eval, [(ctx, c) for c in batch]):
                recs.append(rec)
            if progress:
                worst = max(recs, key=lambda x: x["badness"])
                bad = sum(1 for x in recs if x["badness"] > 0)
                print(f"\r  {len(recs)}/{n} candidates, {bad} violating, worst {worst['badness']:.2f} "
                      f"({worst['id']}), {time.time() - t0:.0f} s", end="", file=out, flush=True)
    if progress:
        print(file=out)
    return sorted(recs, key=lambda x: -x["badness"])


def describe(g):
    """One line per component of a genome."""
    parts = []
    for c in g["components"]:
        lim = {"exact": "limit=runtime", "x1.1": "limit=1.1x", "x2": "limit=2x", "hour": "limit>=1h",
               "none": "no limit"}[c["limit"]]
        mr = {"default": "default contract", "free": "free tier", "value": f"min_runtime {c['minrt_s'] // 60} min",
              "cap": "the contract cap", "limit": "contract = limit"}[c["minrt"]]
        pat = {"steady": f"one every {c['every_min']} min", "burst": f"{c['k']} every {c['every_min']} min",
               "chains": f"{c['chains']} chains back to back", "flood": f"{c['k'] * c['chains']} at once",
               "contract": f"{c['chains']} chains timed to contract ends"}[c["pattern"]]
        parts.append(f"{c['gpus']}-GPU {c['dur'] // 60}-min jobs, {lim}, {mr}, {pat}, "
                     f"hours {c['start_h']}-{max(c['start_h'] + 1, c['stop_h'])}, {c['users']} user(s)")
    acc = "" if g["accounts"] == 1 else f" over {g['accounts']} accounts"
    return f"{g['cluster']}{acc}: " + "; ".join(parts)
