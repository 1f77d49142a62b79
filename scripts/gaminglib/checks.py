"""What a replay is judged by: the issue's goals, computed from the replay's own records
(`allot sim --json` and `--attempts`), never from the engine's rules.

- **owed**: the honest team's owed GPU-hours delivered under allot, against the better of
  classic and Fair Tree (at most 1 point below);
- **excess**: what the strategic team held above its entitlement (the tree's water-fill of each
  hour's capacity against every team's demand), GPUs averaged over the replay's span, against
  the allowance (`[preempt] allowance`);
- **whole-cluster waits**: each of the honest team's whole-cluster jobs submitted while its team
  had held less than its share (GPU-hours held before, against its share of the tree) starts
  within `short_max_time` + 5 min of its *contract floor* under allot;
- **requeues**: no allocated job is requeued more than `[contract] max_requeues` times.

The contract floor of a whole-cluster job is the earliest second a scheduler that keeps every
contract could start it, given what ran when it was submitted: another team's allocated job
lets its GPUs go at its first requeue point past its minimum runtime (the contract's terms:
minimum runtime, requeue points, and `max_requeues`: a job requeued that often, or any
allocated job with `max_requeues = 0`, runs to its end), a free-tier job at once, a job of the
honest team's own at its end; and the honest team's own jobs queued ahead of it (submitted
before it, not running then) start first, in order, each as soon as the GPUs so let go and
the earlier ones' ends allow, and run to their end. Nothing of the engine's own choices (which
victims it prefers, how much a preemption may uncover) enters it: a wait the engine adds past
the floor counts against the engine.
"""
from .replay import H

FIVE_MIN = 300


def running_at(attempts, t):
    """The attempts running at second t (start <= t < end)."""
    return [a for a in attempts if a["start"] <= t < (a["end"] if a["end"] is not None else float("inf"))]


def release(a, team, at, rules):
    """When attempt `a` (running at `at`) lets its GPUs go for a job of `team` under the
    contract's terms (module doc)."""
    end = a["end"] if a["end"] is not None else float("inf")
    if a["team_name"] == team:
        return end
    if a["min_runtime"] == 0:
        return at
    if rules.max_requeues == 0 or a["attempt"] >= rules.max_requeues:
        return end
    return min(end, rules.first_requeue_point(a["start"], a["min_runtime"], at))


def contract_floor(attempts, by_id, offset, job, team, capacity, rules):
    """The contract floor (module doc) of `job` (a trace id of `team`, asking for `capacity`
    GPUs, the whole cluster), in seconds since the first submission; `by_id`, `offset`: what
    replay.replay returns."""
    submit = by_id[job][1] - offset
    now = running_at(attempts, submit)
    # GPUs let go over time: (second, GPUs).
    events = sorted((max(submit, release(a, team, submit, rules)), a["gpus"]) for a in now if a["job"] != job)
    free = capacity - sum(a["gpus"] for a in now if a["job"] != job)
    running_ids = {a["job"] for a in now}
    done = {a["job"] for a in attempts if a["ended"] == "completed" and a["end"] is not None and a["end"] <= submit}
    # Queued ahead: submitted before it, neither running nor done then (never started, or
    # requeued and waiting again).
    ahead = [i for i, j in sorted(by_id.items(), key=lambda kv: (kv[1][1], kv[0]))
             if j[0] == team and (j[1] - offset, i) < (submit, job) and i not in running_ids and i not in done]
    # The queued jobs of its own team, in order, on the GPU count: each starts once enough are
    # free (never before the one ahead of it) and gives them back at its end.
    t = submit
    pending = list(events)
    for i in ahead:
        need, dur = by_id[i][3], by_id[i][2]
        while free < need and pending:
            at, g = pending.pop(0)
            t, free = max(t, at), free + g
        if free < need:
            return float("inf")
        free -= need
        pending.append((t + dur, need))
        pending.sort()
    return max([submit] + [at for at, _ in pending])


def held_before(attempts, t):
    """GPU-hours each team's attempts held before second t."""
    out = {}
    for a in attempts:
        end = a["end"] if a["end"] is not None else t
        if a["start"] < t:
            out[a["team_name"]] = out.get(a["team_name"], 0) + a["gpus"] * (min(end, t) - a["start"]) / H
    return out


def below_share(held, team, shares):
    """True if `team` held less than its share of what every team held (`held`: GPU-hours by
    team; `shares`: each team's share of the tree, any scale); nothing held yet counts as
    below."""
    total = sum(held.values())
    if total <= 0:
        return True
    return held.get(team, 0.0) / total < shares[team] / sum(shares.values()) - 1e-9


def first_starts(attempts):
    first = {}
    for a in attempts:
        first[a["job"]] = min(first.get(a["job"], a["start"]), a["start"])
    return first


def whole_cluster_jobs(runs_attempts, by_id, offset, team, capacity, rules, shares):
    """Per policy, each whole-cluster job of `team`: its wait, floor, whether its team was below
    its share when it was submitted, and the bound on its wait (floor + short_max_time + 5 min)."""
    whole = sorted((i for i, j in by_id.items() if j[0] == team and j[3] >= capacity), key=lambda i: by_id[i][1])
    out = {}
    for pol, att in runs_attempts.items():
        first = first_starts(att)
        rows = []
        for i in whole:
            sub = by_id[i][1] - offset
            floor = contract_floor(att, by_id, offset, i, team, capacity, rules)
            held = held_before(att, sub)
            rows.append({
                "job": i, "submit_s": sub,
                "wait_s": first[i] - sub if i in first else None,
                "floor_s": floor - sub,
                "below_share": below_share(held, team, shares),
                "bound_s": floor - sub + rules.short_max_time + FIVE_MIN,
                "held_before_gpu_hours": {k: round(v, 1) for k, v in sorted(held.items())},
            })
        out[pol] = rows
    return out


def most_requeues(attempts):
    """The most times one allocated job was requeued (free-tier jobs have no bound)."""
    return max((a["attempt"] for a in attempts if a["min_runtime"] > 0), default=0)


def excess_gpus(run, strategic):
    """GPUs the `strategic` teams (one leaf, or every leaf of one group) held above their
    entitlement, averaged over the replay's span, and in their worst hour."""
    span_h = run["span_s"] / H
    teams = {t["name"]: t for t in run["teams"]}
    if len(strategic) == 1:
        t = teams[strategic[0]]
        over, peak = t["excess_gpu_hours"], t["excess_peak_gpus"]
    else:
        g = next((g for g in run.get("groups", []) if sorted(g["teams"]) == sorted(strategic)), None)
        if g is None:
            raise ValueError(f"no group of the tree holds exactly {strategic}")
        over, peak = g["excess_gpu_hours"], g["excess_peak_gpus"]
    return (over / span_h if span_h > 0 else 0.0), peak


def judge(runs, attempts, by_id, offset, honest, strategic, capacity, rules, shares):
    """Every goal of the module doc for one replay. Returns a dict with the figures, each
    goal's margin (`gap`: positive = violated, in points for owed, GPUs for excess, seconds for
    waits, requeues for requeues) and `badness`: the largest gap on one scale (1 = one owed
    point, 0.2 GPUs of excess, 10 minutes of wait, 0.1 requeue), positive when a goal is
    violated."""
    owed = {p: next(t["owed_delivered"] for t in r["teams"] if t["name"] == honest) for p, r in runs.items()}
    best = max(owed["classic"], owed["fairtree"])
    excess, peak = excess_gpus(runs["allot"], strategic)
    whole = whole_cluster_jobs({"allot": attempts.get("allot", [])}, by_id, offset, honest, capacity, rules,
                               shares)["allot"]
    late = [j["wait_s"] - j["bound_s"] if j["wait_s"] is not None else float("inf")
            for j in whole if j["below_share"]]
    wait_gap = max(late, default=-float("inf"))
    requeues = most_requeues(attempts.get("allot", []))
    gaps = {
        "owed": (best - owed["allot"]) * 100 - 1.0,
        "excess": excess - rules.allowance,
        "wait": wait_gap,
        "requeues": requeues - rules.max_requeues if rules.max_requeues > 0 else 0,
    }
    scaled = [gaps["owed"], gaps["excess"] * 5, gaps["wait"] / 600 if wait_gap > -float("inf") else -99,
              gaps["requeues"] * 10]
    return {
        "owed": {p: round(v * 100, 2) for p, v in owed.items()},
        "excess_gpus": round(excess, 3), "excess_peak_gpus": round(peak, 2),
        "whole_cluster_jobs": whole, "most_requeues": requeues,
        "gaps": gaps, "badness": max(scaled),
        "violations": [k for k, v in gaps.items() if v > 1e-9],
    }
