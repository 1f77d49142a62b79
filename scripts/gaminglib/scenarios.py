"""The named gaming scenarios: one strategy each, with the parameters first written for it
(docs/simulator.md, "Gaming scenarios"). Each is an example, not a proof: `search.py` draws the
same strategies with other parameters. A scenario is (cluster, tree, jobs, strategic accounts,
what); the honest team's jobs are in `jobs`. Standard library only.
"""
from .replay import H


def honest_whole_cluster(gpus):
    """The honest team's whole-cluster jobs: 4 h each, at 0:30 (the strategic team has filled
    the cluster) and at 12:30 (it has run for half a day)."""
    return [("honest", 1800, 4 * H, gpus, 4 * H, None), ("honest", 12 * H + 1800, 4 * H, gpus, 4 * H, None)]


TWO_TEAMS = "[tree.honest]\nshare = 50\n\n[tree.gamer]\nshare = 50\n"


def short_stream():
    # 32 an hour, evenly: 8 in any 15 min, under sweep_jobs = 16; 16 GPUs busy at steady state.
    jobs = [("gamer", k * H // 32, 1800, 1, H, None) for k in range(24 * 32)]
    return "2x8", TWO_TEAMS, jobs + honest_whole_cluster(16), ["gamer"], \
        "1-GPU 30-min jobs, --time=1:00:00, 32 an hour for 24 h (no sweep)"


def short_stream_sweep():
    jobs = [("gamer", h * H, 1200, 1, H, None) for h in range(24) for _ in range(64)]
    return "2x8", TWO_TEAMS, jobs + honest_whole_cluster(16), ["gamer"], \
        "64 1-GPU 20-min jobs, --time=1:00:00, at once every hour for 24 h (sweeps)"


def training_cut_short():
    # One 8-GPU node: the honest team's 8-GPU jobs are whole-cluster jobs, one every 4 h (4
    # GPUs on average: its share); the strategic team runs four chains of 2-GPU 55-min jobs.
    jobs = [("gamer", k * 3300, 3300, 2, H, None) for k in range(24 * H // 3300 + 1) for _ in range(4)]
    jobs += [("honest", 1800 + k * 4 * H, 2 * H, 8, 2 * H, None) for k in range(6)]
    return "1x8", TWO_TEAMS, jobs, ["gamer"], \
        "four chains of 2-GPU 55-min jobs with a 1-h limit vs the honest team's 8-GPU 2-h jobs every 4 h, on 1x8"


def pending_flood():
    jobs = [("gamer", 0, 2 * H, 1, 2 * H, None) for _ in range(200)]
    # Steady honest work below its share (2-GPU 2-h jobs, one an hour: 4 GPUs), so the
    # strategic team is entitled to what the honest team leaves, and no more.
    jobs += [("honest", h * H + 600, 2 * H, 2, 2 * H, None) for h in range(24)]
    return "2x8", TWO_TEAMS, jobs + honest_whole_cluster(16), ["gamer"], \
        "200 1-GPU 2-h jobs pending at once (400 GPU-h of demand) vs steady honest 2-GPU jobs"


def free_tier():
    # 1-GPU 2-h jobs, 8 an hour (16 GPUs at steady state), every one free tier.
    jobs = [("gamer", k * H // 8, 2 * H, 1, 2 * H, 0) for k in range(24 * 8)]
    return "2x8", TWO_TEAMS, jobs + honest_whole_cluster(16), ["gamer"], \
        "1-GPU 2-h jobs, 8 an hour for 24 h, all free tier (min_runtime 0)"


def max_contract():
    # Eight chains of 2-GPU 4-h jobs, each declaring the maximum contract (8 h), with an 8-h
    # limit: job_submit refuses a minimum runtime above the job's --time (a 4-h limit would cap
    # the contract at 4 h; the figures are the same either way).
    jobs = [("gamer", k * 4 * H, 4 * H, 2, 8 * H, 8 * H) for k in range(6) for _ in range(8)]
    return "2x8", TWO_TEAMS, jobs + honest_whole_cluster(16), ["gamer"], \
        "eight chains of 2-GPU 4-h jobs, each at the maximum contract (min_runtime 8 h)"


def many_accounts():
    accts = [f"g{i}" for i in range(1, 9)]
    tree = "[tree.honest]\nshare = 50\n\n[tree.gamers]\nshare = 50\n" + "".join(
        f"\n[tree.gamers.{a}]\nshare = 1\n" for a in accts)
    # The short stream of short-stream, round robin over 8 accounts (4 an hour each).
    jobs = [(accts[k % 8], k * H // 32, 1800, 1, H, None) for k in range(24 * 32)]
    return "2x8", tree, jobs + honest_whole_cluster(16), accts, \
        "the short stream spread over 8 accounts under one group (the group's share = the honest team's)"


SCENARIOS = {
    "short-stream": short_stream,
    "short-stream-sweep": short_stream_sweep,
    "training-cut-short": training_cut_short,
    "pending-flood": pending_flood,
    "free-tier": free_tier,
    "max-contract": max_contract,
    "many-accounts": many_accounts,
}
