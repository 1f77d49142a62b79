#!/usr/bin/env python3
"""Helper of scripts/calibrate: makes a slice's workload, and compares the
simulator's prediction with what the testbed did.

  calibrate.py workload --slice K --span S --nodes N --gpus-per-node G --out DIR TRACE
  calibrate.py report --dir DIR --allot BIN --json FILE
"""
import argparse
import datetime
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys

# Five Philly virtual clusters play the five teams of examples/allot.toml.
VCS = {"6214e9": "a1", "6c71a0": "b1", "11cb48": "a2", "ee9e8c": "b2", "ed69ec": "vision"}
KINDS = ["mixed", "preempt", "drain"]
# Every job gets this time limit (Slurm's limits are whole minutes): jobs of
# at most 2 GPUs are then in the short band on the testbed exactly as in the
# simulator, which takes a trace job's runtime as its time limit.
TIME_LIMIT = "1:00"
COLUMNS = "id,submit,duration,gpus,team,min_runtime,partition,class,time_limit"


def die(msg):
    print(f"calibrate: error: {msg}", file=sys.stderr)
    sys.exit(1)


def workload(a):
    kind = KINDS[(a.slice - 1) % len(KINDS)]
    rng = random.Random(a.slice)
    by_team = {t: [] for t in VCS.values()}
    with open(a.trace) as f:
        next(f)
        for line in f:
            ts, dur, gpus, _, vc = line.strip().split(",")
            if vc in VCS:
                by_team[VCS[vc]].append((ts, float(dur), int(gpus)))
    scale = a.nodes * a.gpus_per_node / 32
    want = {"a1": 26, "b1": 16, "a2": 13, "b2": 11, "vision": 11}
    if kind == "preempt":
        want = {"a1": 22, "a2": 14, "b1": 18, "b2": 16, "vision": 12}
    jobs = []
    for team, n in want.items():
        rows = sorted(by_team[team])
        if kind == "preempt" and team in ("a1", "a2"):
            # nlp's jobs here are its training jobs: they fill the cluster.
            rows = [r for r in rows if r[2] > 1 or r[1] > 600]
        if not rows:
            die(f"{a.trace}: no jobs of team {team}'s virtual cluster")
        start = rng.randrange(len(rows))
        n = max(1, round(n * scale))
        for k in range(n):
            ts, dur, gpus = rows[(start + k) % len(rows)]
            jobs.append((team, dur, gpus))
    rng.shuffle(jobs)
    out = []
    other = 0
    nlp = [j for j in jobs if j[0] in ("a1", "a2")]
    per = [j for j in jobs if j[0] not in ("a1", "a2")]
    if kind == "preempt":
        # nlp's jobs arrive in the first quarter and fill the cluster;
        # perception's over the rest, preempting them once contracts end.
        timed = [(int(i * a.span / 4 / len(nlp)), j) for i, j in enumerate(nlp)]
        timed += [(int(a.span / 4 + i * a.span * 3 / 4 / len(per)), j) for i, j in enumerate(per)]
    else:
        timed = [(int(i * a.span / len(jobs)), j) for i, j in enumerate(jobs)]
    timed.sort(key=lambda x: x[0])
    for i, (submit, (team, dur, gpus)) in enumerate(timed):
        dur = max(dur, 10.0)
        d = min(45, int(5 + 8 * math.log10(dur / 10)))
        if kind == "preempt" and not (gpus == 1 and dur <= 600):
            d = max(d, 30)   # long training runs: they outlive their contracts
        g = min(gpus, a.gpus_per_node)
        g = 2 if g == 3 else (4 if 4 < g < 8 else g)
        if not (g == 1 and dur <= 600):
            # A training job on a 32-GPU cluster: twice the GPUs of the
            # trace's (which ran on an 8-GPU slice), at most a node.
            g = min(2 * g, a.gpus_per_node)
        if g == 1 and dur <= 600:
            cls, mr, part = "debug", 5, "debug"
        else:
            other += 1
            part = "gpu"
            if other % 6 == 0:
                cls, mr = "free", 0
            elif kind == "preempt":
                # Contracts of a third of the run: most of each job is
                # preemptable, and the two groups take GPUs back and forth.
                cls, mr = "train", max(5, d // 3)
            else:
                cls, mr = "train", min(30, max(5, int(2 * d / 3)))
        out.append(f"{i + 1},{submit},{d},{g},{team},{mr},{part},{cls},{TIME_LIMIT}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "workload.csv"), "w") as f:
        f.write(COLUMNS + "\n" + "\n".join(out) + "\n")
    with open(os.path.join(a.out, "kind"), "w") as f:
        f.write(kind + "\n")
    if kind == "drain":
        with open(os.path.join(a.out, "drain_at"), "w") as f:
            f.write(f"{int(a.span * 0.4)}\n")
    gs = {}
    for row in out:
        f_ = row.split(",")
        gs[f_[4]] = gs.get(f_[4], 0) + int(f_[2]) * int(f_[3])
    print(f"slice {a.slice} ({kind}): {len(out)} jobs, GPU-s asked: {gs}", file=sys.stderr)


def parse_sacct(path):
    """Attempts: (jobid, name, account, state, submit, start, elapsed, gpus)."""
    rows = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("|")
            if len(p) < 9:
                continue
            gpus = 0
            for t in p[8].split(","):
                if t.startswith("gres/gpu="):
                    gpus = int(t.split("=")[1])
            num = lambda x: int(x) if x.isdigit() else None
            rows.append(dict(id=p[0], name=p[1], account=p[2], state=p[3], submit=num(p[4]),
                             start=num(p[5]), elapsed=int(p[7] or 0), gpus=gpus))
    return rows


def sim_config(base, timing):
    """The testbed's allot.toml plus a [sim] section with its timing."""
    t = timing
    sim = f"""
[sim]
cluster = "{t['cluster']}"
backfill_interval = {dur(t['bf_interval_s'])}
backfill_depth = {t['bf_max_job_test']}
resumable = false
checkpoint_interval = "0"
"""
    extra = os.environ.get("CALIB_SIM_EXTRA", "")
    timing_keys = timing.get("sim_keys", {})
    for k, v in timing_keys.items():
        sim += f"{k} = {v}\n"
    return base + sim + extra.replace("\\n", "\n") + "\n"


def dur(seconds):
    """Seconds as a quoted Slurm duration, H:MM:SS (a bare number would be minutes)."""
    return f'"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"'


def sim_keys(timing):
    """The [sim] timing settings the testbed's values give (docs/simulator.md)."""
    keys = {"requeue_delay": dur(timing["cred_expire_s"] + 1),
            "backfill_reserve": '"all"',
            # sched/backfill's plan is a map of node bitmaps: a reservation
            # takes its whole nodes (DebugFlags=Backfill log, docs/simulator.md).
            "backfill_hold": '"nodes"',
            "backfill_preempt": '"all"',
            "placement": f'"{os.environ.get("CALIB_PLACEMENT", "cons_tres")}"'}
    if keys["placement"] == '"cons_tres"':
        # scripts/testbed gives each node 16 CPUs; each job takes one.
        keys["node_cpus"] = str(timing.get("node_cpus", 16))
    keys["sched_interval"] = dur(timing["sched_interval_s"])
    # slurmctld leaves a preemptor pending until a later pass, and kills
    # no more for it for KillWait + MessageTimeout (node_scheduler.c).
    keys["preemptor_start"] = '"next_pass"'
    # The preempt plugin bounds a one-node preemptor's victims per node.
    keys["victim_budget"] = '"node"'
    # cons_tres's will-run test counts a job's preemption candidates free
    # when it plans the job's start (cons_common _will_run_test).
    keys["backfill_candidates"] = '"free"'
    # The slices' short 2-GPU jobs run in `gpu` with the rest (and the
    # testbed's `debug` partition shares its nodes): one that cannot start
    # stops the main pass like any job (job_scheduler.c fail_this_part).
    keys["short_partition"] = '"shared"'
    # The backfill agent skips a pass when no job or node changed since
    # the second of its last one (backfill.c _more_work).
    keys["backfill_idle"] = '"skip"'
    if timing.get("plugin_timer") == "clock":
        # The plugins rebuild their engine on the clock, half a second after
        # allot sync's pass at each whole multiple of sync.interval
        # (fairshare::timer): a start or end of an earlier second is in the
        # ledger the rebuild reads, one of the rebuild's own second is not.
        keys["snapshot_phase"] = '"clock"'
        keys["ledger_lag"] = dur(1)
    else:
        # Runs saved before the plugins' timer ran on the clock: it drifted
        # from when slurmctld loaded them, at a phase no log gives (each
        # seed draws one), and the ranks in slurmctld's InitPrio agree best
        # with the simulator's ledger 2-3 s behind (docs/simulator.md).
        keys["snapshot_phase"] = '"seeded"'
        keys["ledger_lag"] = dur(3)
    if "kill_wait_s" in timing:
        keys["repreempt_delay"] = dur(timing["kill_wait_s"] + timing["msg_timeout_s"])
    if "pass_miss_ms" in timing:
        keys["pass_miss_ms"] = str(timing["pass_miss_ms"])
    if "attempt_overhead_ms" in timing:
        keys["attempt_overhead_ms"] = str(timing["attempt_overhead_ms"])
    if "attempt_jitter_ms" in timing:
        keys["attempt_jitter_ms"] = str(timing["attempt_jitter_ms"])
    if "drain_pass_ms" in timing:
        # The sidecar acts on a drain at its passes (docs/simulator.md).
        keys["drain_pass_ms"] = str(timing["drain_pass_ms"])
    if "victim_complete_ms" in timing:
        # A victim's GPUs are free once it stops COMPLETING (docs/simulator.md).
        keys["victim_complete_ms"] = str(timing["victim_complete_ms"])
    # CALIB_SIM_DROP=key,...: leave settings out, to see what each does.
    dropped = {k.strip() for k in os.environ.get("CALIB_SIM_DROP", "").split(",")} - {""}
    for k in dropped:
        keys.pop(k, None)
    # `timing = "slurmctld"` (sim/src/settings/preset.rs) sets slurmctld's
    # behaviour: the keys above with its very value go, the measured and
    # slurm.conf ones stay and win over its. Leaving out (CALIB_SIM_DROP) a
    # key the preset sets means no preset: every key written, less it.
    if not dropped & PRESET_KEYS:
        keys = {"timing": '"slurmctld"', **{k: v for k, v in keys.items() if PRESET_SAME.get(k) != v}}
    return keys


# Every key `[sim] timing = "slurmctld"` sets (docs/simulator.md), and those
# of them whose value calibrate gives as the preset does.
PRESET_KEYS = {"sched_interval", "backfill_interval", "backfill_depth", "backfill_resolution",
               "requeue_delay", "repreempt_delay", "backfill_reserve", "backfill_hold",
               "backfill_candidates", "backfill_idle", "backfill_preempt", "will_run_window",
               "preemptor_start", "placement", "short_partition", "victim_budget", "snapshot_phase",
               "ledger_lag", "main_phase_ms", "pass_miss_ms", "attempt_overhead_ms", "attempt_jitter_ms", "victim_complete_ms",
               "drain_pass_ms"}
PRESET_SAME = {"backfill_reserve": '"all"', "backfill_hold": '"nodes"', "backfill_preempt": '"all"',
               "placement": '"cons_tres"', "preemptor_start": '"next_pass"', "victim_budget": '"node"',
               "backfill_candidates": '"free"', "short_partition": '"shared"', "backfill_idle": '"skip"',
               "snapshot_phase": '"clock"', "ledger_lag": dur(1)}


def read_workload(sdir):
    """A slice's workload.csv: its rows (lists of fields) by job name, the
    first field."""
    wl = {}
    with open(os.path.join(sdir, "workload.csv")) as f:
        next(f)
        for line in f:
            p = line.strip().split(",")
            wl[p[0]] = p
    return wl


def ctld_waits(path):
    """KillWait and MessageTimeout (seconds) from `scontrol show config`
    ("KillWait = 2 sec"), if recorded."""
    out = {}
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.partition("=")
            key = {"KillWait": "kill_wait_s", "MessageTimeout": "msg_timeout_s"}.get(k.strip())
            if key and v.split() and v.split()[0].isdigit():
                out[key] = int(v.split()[0])
    return out if len(out) == 2 else {}


def measure(d, slices):
    """What the runs themselves show of slurmctld's timing: how much longer
    than its `sleep` a completed attempt is recorded (launch, end report and
    the whole-second clock), in milliseconds; and how often a job is first
    looked at in the second after its submission."""
    extra, quick = [], []
    for sd in slices:
        sdir = os.path.join(d, sd)
        wl = read_workload(sdir)
        for rd in os.listdir(sdir):
            rdir = os.path.join(sdir, rd)
            if not rd.startswith("run-") or not os.path.exists(os.path.join(rdir, "sacct.psv")):
                continue
            ids = dict(line.split()[::-1] for line in open(os.path.join(rdir, "jobids.txt")))
            att = parse_sacct(os.path.join(rdir, "sacct.psv"))
            for r in att:
                if r["state"] == "COMPLETED" and r["id"] in ids:
                    extra.append(r["elapsed"] - int(wl[ids[r["id"]]][2]))
            first = {}
            for r in att:
                if r["start"] is not None and r["submit"] is not None:
                    w = r["start"] - r["submit"]
                    first[r["id"]] = min(first.get(r["id"], w), w)
            quick.extend(w for w in first.values() if w in (0, 1))
    # The backfill pass's offset into the second, from each slice's
    # slurmctld.log ("sched/backfill: _start_job" lines, millisecond stamps).
    phase = []
    for sd in slices:
        log = os.path.join(d, sd, "slurmctld.log")
        if os.path.exists(log):
            for line in open(log, errors="replace"):
                if "sched/backfill: _start_job: Started" in line and line.startswith("[") and "." in line[:25]:
                    phase.append(int(line[1:24].split(".")[1]))
    out = {}
    if phase:
        out["backfill_phase_ms_median"] = int(statistics.median(phase))
    # The sidecar's draining pass: when into its second it requeued a
    # drained node's job (its "requeued:" lines, microsecond stamps), for
    # the simulator's drain_pass_ms.
    drain_ms = []
    for sd in slices:
        sdir = os.path.join(d, sd)
        for rd in os.listdir(sdir):
            log = os.path.join(sdir, rd, "sync.log")
            if rd.startswith("run-") and os.path.exists(log):
                for line in open(log, errors="replace"):
                    m = re.match(r"\S+T\d\d:\d\d:\d\d\.(\d{3})\d*Z +INFO \S+: requeued: ", line)
                    if m:
                        drain_ms.append(int(m.group(1)))
    if drain_ms and os.environ.get("CALIB_DRAIN_PASS", "1") != "0":
        out["drain_pass_ms"] = int(statistics.median(drain_ms))
        out["measured_drain_requeues"] = len(drain_ms)
    # A victim's completion: slurmctld requeues it at once ("preempted
    # JobId=V has been requeued to reclaim resources for JobId=P") but its
    # GPUs are free only when it is no longer COMPLETING ("Requeuing
    # JobId=V", batch_requeue_fini), for victim_complete_ms. (No pass
    # follows from it: the testbed's "sched: Allocate" lines all fall on
    # the sched_interval cadence.)
    done_ms = []
    for sd in slices:
        log = os.path.join(d, sd, "slurmctld.log")
        if not os.path.exists(log):
            continue
        preempted = {}
        for line in open(log, errors="replace"):
            m = re.search(r"preempted JobId=(\d+) has been requeued to reclaim resources for JobId=(\d+)", line)
            if m:
                preempted[m.group(1)] = (stamp_ms(line), m.group(2))
                continue
            m = re.search(r"Requeuing JobId=(\d+)$", line.rstrip())
            if m and m.group(1) in preempted:
                at, _ = preempted.pop(m.group(1))
                done_ms.append(stamp_ms(line) - at)
    if done_ms and os.environ.get("CALIB_VICTIM_DONE", "1") != "0":
        out["victim_complete_ms"] = int(statistics.median(done_ms))
        out["measured_victim_completions"] = len(done_ms)
    # The pass is not at a fixed offset (bf_interval counts from the end of
    # the last pass): measure how often a job that found GPUs free started
    # only in the second after its submission.
    if quick:
        miss = round(1000 * sum(1 for w in quick if w == 1) / len(quick))
        out["pass_miss_ms"] = int(os.environ.get("CALIB_PASS_MISS_MS", miss))
        out["measured_quick_starts"] = {"same_second": quick.count(0), "next_second": quick.count(1)}
    if not extra:
        return out
    ms = round(1000 * statistics.mean(extra))
    hist = {str(k): extra.count(k) for k in sorted(set(extra))}
    out["measured_attempt_extra_s"] = hist
    # Each completed attempt's overhead to the millisecond, where the logs
    # give it: from its start to its end report, less its `sleep`. Uniform
    # within attempt_overhead_ms +- attempt_jitter_ms has the log's p10 and
    # p90 (a uniform's p10 and p90 are 0.8 of its half-width from its
    # middle); the whole-second mean above is the fallback.
    held = []
    for sd in slices:
        held += logged_overheads(os.path.join(d, sd), read_workload(os.path.join(d, sd)))
    jitter = 0
    if len(held) >= 20 and os.environ.get("CALIB_JITTER", "1") != "0":
        held.sort()
        q = lambda p: held[min(len(held) - 1, int(p * len(held)))]
        ms = round((q(0.1) + q(0.9)) / 2)
        jitter = round((q(0.9) - q(0.1)) / 1.6)
        out["measured_attempt_overhead_ms"] = {"attempts": len(held), "p10": q(0.1), "p50": q(0.5), "p90": q(0.9)}
    override = os.environ.get("CALIB_OVERHEAD_MS")
    out["attempt_overhead_ms"] = int(override) if override else max(0, min(ms, 60000))
    out["attempt_jitter_ms"] = max(0, min(jitter, out["attempt_overhead_ms"], 60000))
    return out


def logged_overheads(sdir, wl):
    """Milliseconds each completed attempt of a slice held its GPUs beyond
    its `sleep`: from its start (`sched: Allocate` or the backfill's
    `_start_job` line) to its end report (`_job_complete: ... WEXITSTATUS
    0`) in the slice's slurmctld.log, for the jobs of its runs."""
    log = os.path.join(sdir, "slurmctld.log")
    if not os.path.exists(log):
        return []
    name = {}
    for rd in os.listdir(sdir):
        ids = os.path.join(sdir, rd, "jobids.txt")
        if rd.startswith("run-") and os.path.exists(ids):
            name.update(dict(line.split()[::-1] for line in open(ids)))
    start, out = {}, []
    for line in open(log, errors="replace"):
        m = re.search(r"(?:_start_job: Started|sched: Allocate) JobId=(\d+)", line)
        if m:
            start[m.group(1)] = stamp_ms(line)
            continue
        m = re.search(r"_job_complete: JobId=(\d+) WEXITSTATUS 0", line)
        if m and m.group(1) in start and name.get(m.group(1)) in wl:
            t0, t1 = start.pop(m.group(1)), stamp_ms(line)
            if t0 is not None and t1 is not None:
                out.append(t1 - t0 - 1000 * int(wl[name[m.group(1)]][2]))
    return out


def circular_median(values, period):
    """The value of `values` (mod `period`) with the least total circular
    distance to the others: a pass's offset, robust to a few passes that
    ran off the beat."""
    best, cost = None, None
    for c in values:
        d = sum(min((v - c) % period, (c - v) % period) for v in values)
        if cost is None or d < cost:
            best, cost = c, d
    return best


def seen_passes(stamps, period_us, anchor_us, loop=False):
    """The instants (µs since second 0) one series of passes was seen at,
    from the log lines of the jobs they started (`stamps`): the first line
    of each pass (lines within a third of a period of it are the same
    pass), and only those on the series' beat: within 100 ms of the fitted
    series (`anchor_us` plus whole periods of `period_us`) for the first,
    then within 20 ms plus 3 ms a second of the last one kept plus whole
    periods (the drift between them is uneven). With `loop` (the main
    pass, run from a loop of a second and a little: `period_us`) the next
    one kept is instead whole seconds after the last one kept plus 0-15 ms
    a second (the loop's drift: 5 ms a second in one stretch of a run, 12
    in another), at most 300 ms in all. slurmctld also runs its main
    scheduler on events, off the beat; those are left out."""
    out, last = [], None
    for us in sorted(stamps):
        if last is not None and us - last < period_us / 3:
            continue
        last = us
        base = out[-1] if out else anchor_us
        if out and loop:
            k = max(1, round((us - base) / 1_000_000))
            extra = us - base - k * 1_000_000
            if 0 <= extra <= min(15_000 * k, 300_000):
                out.append(us)
            continue
        k = round((us - base) / period_us)
        miss = abs(us - (base + k * period_us))
        if miss <= (20_000 + 3 * abs(us - base) / 1000 if out else 100_000):
            out.append(us)
    return out


def stamp_ms(line):
    """A slurmctld.log line's stamp (local time, to the millisecond) as
    epoch milliseconds, or None for a line without one."""
    try:
        return round(datetime.datetime.fromisoformat(line[1:24]).timestamp() * 1000)
    except ValueError:
        return None


def log_timing(log, t0, t1, sched_s, bf_s):
    """The [sim] phase keys of one run, from its slurmctld.log between t0
    and t1 (epoch seconds; t0 is the trace's second 0), and each
    submission's millisecond, or None without a log or passes in it.

    slurmctld stamps its log in milliseconds. The backfill's starts
    ("sched/backfill: _start_job") and the main scheduler's allocations
    ("sched: Allocate") give each pass's offset into its second; both grow
    by a little each second (the backfill sleeps bf_interval after each
    pass ends, so it starts later by that pass's run time): the slope of
    the backfill's offsets is `pass_drift_us`, and the main pass's own
    (`main_drift_us`) the median excess of the gaps between its passes
    over whole `sched_interval`s. Then each series is one
    first pass plus whole periods of (interval s + drift): its circular
    median gives the main pass's second (`sched_offset`) and offset
    (`main_phase_ms`) and the backfill's offset (`pass_miss_ms` = 1000 -
    it) at second 0. `submit_ms` maps job ids to the millisecond of their
    submission ("_slurm_rpc_submit_batch_job"), and "drain" to that of the
    drain ("state set to DRAINING"); `init_prio` job ids to the priority
    the plugin gave them then ("InitPrio="). `main_passes_us` and
    `backfill_passes_us` are the passes seen (`seen_passes`): the
    simulator spreads its passes evenly between them, so the uneven drift
    the fitted series misses is the log's wherever a pass started a job."""
    if not os.path.exists(log):
        return None
    main, backfill, submit, init_prio = [], [], {}, {}
    for line in open(log, errors="replace"):
        if not line.startswith("["):
            continue
        try:
            # slurmctld stamps its log in local time, as a naive datetime is.
            stamp = datetime.datetime.fromisoformat(line[1:24])
        except ValueError:
            continue
        t = int(stamp.timestamp())
        if not t0 <= t <= t1:
            continue
        # Microseconds since the trace's second 0.
        us = (t - t0) * 1_000_000 + stamp.microsecond // 1000 * 1000
        if "sched: Allocate" in line:
            main.append(us)
        elif "sched/backfill: _start_job: Started" in line:
            backfill.append(us)
        elif "_slurm_rpc_submit_batch_job: JobId=" in line:
            jid = line.split("JobId=")[1].split()[0]
            submit[jid] = stamp.microsecond // 1000
            if "InitPrio=" in line:
                init_prio[jid] = int(line.split("InitPrio=")[1].split()[0])
        elif "state set to DRAINING" in line:
            submit["drain"] = stamp.microsecond // 1000
    if len(backfill) < 2 or not main:
        return None
    # The drift: the least-squares slope of the backfill's offsets, each
    # step unwrapped to the nearest (-500, 500] ms.
    xs, ys, y = [], [], None
    for us in backfill:
        off = us % 1_000_000
        if y is None:
            y = off
        else:
            step = (off - ys[-1] % 1_000_000) % 1_000_000
            y = ys[-1] + (step - 1_000_000 if step > 500_000 else step)
        xs.append(us // 1_000_000)
        ys.append(y)
    mx, my = statistics.mean(xs), statistics.mean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    drift = 0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var
    drift = int(min(max(round(drift), 0), 100_000))
    # The main pass runs from a loop of a little over a second (controller.c
    # `_slurmctld_background`; the simulator's sim/src/run/main_loop.rs),
    # which drifts at its own rate (about 5 ms a loop here, where the
    # backfill drifts 2-3 ms a second): the median excess over whole
    # seconds of the gaps between its passes, per loop, those off the loop
    # (over 25 ms a loop) left out; without such gaps the backfill's.
    firsts = [us for k, us in enumerate(main) if k == 0 or us - main[k - 1] >= 500_000]
    excess = []
    for a_, b_ in zip(firsts, firsts[1:]):
        k = round((b_ - a_) / 1_000_000)
        if k >= 1:
            e = ((b_ - a_) - k * 1_000_000) / k
            if abs(e) <= 25_000:
                excess.append(e)
    main_drift = int(min(max(round(statistics.median(excess)), 0), 100_000)) if excess else drift
    mp = sched_s * (1_000_000 + main_drift)
    first_main = circular_median([us % mp for us in main], mp)
    # A period is a little longer than sched_s seconds: an offset in that
    # last bit is the next period's start, a few ms early.
    first_main %= sched_s * 1_000_000
    bp = bf_s * (1_000_000 + drift)
    first_bf = circular_median([us % bp for us in backfill], bp) % 1_000_000
    return dict(sched_offset=first_main // 1_000_000, main_phase_ms=first_main % 1_000_000 // 1000,
                pass_miss_ms=1000 - first_bf // 1000, pass_drift_us=drift, main_drift_us=main_drift,
                submit_ms=submit,
                init_prio=init_prio,
                main_passes_us=seen_passes(main, 1_000_000 + main_drift, first_main, loop=True),
                backfill_passes_us=seen_passes(backfill, bp, first_bf))


def logged_preemptions(log, t0, t1, ids):
    """slurmctld's preemptions from t0 to t1 (epoch seconds) as (seconds
    since t0, preemptor, victim), workload ids (`ids`: job id -> workload
    id): the "preempted JobId=V has been requeued to reclaim resources for
    JobId=P" lines."""
    out = []
    if not os.path.exists(log):
        return out
    for line in open(log, errors="replace"):
        if "to reclaim resources for JobId=" not in line or not line.startswith("["):
            continue
        try:
            t = datetime.datetime.fromisoformat(line[1:24]).timestamp()
        except ValueError:
            continue
        victim = line.split("preempted JobId=")[1].split()[0]
        preemptor = line.split("resources for JobId=")[1].split()[0]
        if t0 <= t <= t1 + 1 and victim in ids and preemptor in ids:
            out.append((t - t0, ids[preemptor], ids[victim]))
    return out


def duration_s(text):
    """Seconds of a duration written M:SS (the workload's time limits, the
    testbed's sync.interval "0:02"), H:MM:SS or D-H:MM:SS."""
    days, _, clock = text.rpartition("-")
    total = 0
    for part in clock.split(":"):
        total = total * 60 + int(part)
    return int(days or 0) * 86400 + total


# Simulator seeds per testbed run (CALIB_SEEDS, default 9).
SEEDS = int(os.environ.get("CALIB_SEEDS", "9") or "9")


def median(xs):
    return statistics.median(xs) if xs else 0.0


def report(a):
    if not os.path.exists(os.path.join(a.dir, "timing.json")):
        die(f"{a.dir}: no timing.json; give the --out DIR of a scripts/calibrate run")
    with open(os.path.join(a.dir, "timing.json")) as f:
        timing = json.load(f)
    with open(os.path.join(a.dir, "allot.toml")) as f:
        base = f.read()
    slices = sorted((d for d in os.listdir(a.dir) if d.startswith("slice-")), key=lambda d: int(d[6:]))
    if not slices:
        die(f"{a.dir}: no slice-K directories; run scripts/calibrate first")
    timing.update(measure(a.dir, slices))
    timing.update(ctld_waits(os.path.join(a.dir, "scontrol-config.txt")))
    if os.environ.get("CALIB_NO_TIMING") != "1":
        timing["sim_keys"] = sim_keys(timing)
    conf = os.path.join(a.dir, "sim.toml")
    with open(conf, "w") as f:
        f.write(sim_config(base, timing))
    result = {"timing": timing, "slices": []}
    for sd in slices:
        sdir = os.path.join(a.dir, sd)
        kind = open(os.path.join(sdir, "kind")).read().strip()
        wl = read_workload(sdir)
        runs = sorted((d for d in os.listdir(sdir) if d.startswith("run-")), key=lambda d: int(d[4:]))
        per_run = []
        for rd in runs:
            rdir = os.path.join(sdir, rd)
            sacct = os.path.join(rdir, "sacct.psv")
            if not os.path.exists(sacct):
                continue
            att = parse_sacct(sacct)
            if not att:
                die(f"{sacct}: no job attempts; the run recorded nothing")
            ids = {}
            with open(os.path.join(rdir, "jobids.txt")) as f:
                for line in f:
                    wid, jid = line.split()
                    ids[jid] = wid
            sub, first = {}, {}
            for r in att:
                if r["submit"] is not None:
                    sub[r["id"]] = min(sub.get(r["id"], r["submit"]), r["submit"])
                if r["start"] is not None and r["elapsed"] >= 0 and r["state"] not in ("PENDING", "CANCELLED"):
                    first[r["id"]] = min(first.get(r["id"], r["start"]), r["start"])
            t0 = min(sub.values())
            last = max((r["start"] + r["elapsed"] for r in att if r["start"] is not None), default=t0)
            # slurmctld's passes and each submission's millisecond, from the
            # slice's log (older saved runs without sched_interval: none).
            lt = None
            # CALIB_PHASES=0: no phases from the log (each run's
            # sched_offset from the epoch, the measured pass_miss_ms).
            if "sched_interval" in timing.get("sim_keys", {}) and os.environ.get("CALIB_PHASES") != "0":
                lt = log_timing(os.path.join(sdir, "slurmctld.log"), t0, last,
                                timing["sched_interval_s"], timing["bf_interval_s"])
            sub_ms = lt["submit_ms"] if lt else {}
            trace = ["id,submit,duration,gpus,team,min_runtime,partition,class,requeue,resumable,kind,node,time_limit,submit_ms"]
            for jid, wid in sorted(ids.items(), key=lambda x: (sub.get(x[0], 0), int(x[1]))):
                p = wl[wid]
                # CALIB_NO_TIMING=1: the simulator as it was before its
                # timing settings (no time limits either), for comparison.
                limit = "" if os.environ.get("CALIB_NO_TIMING") == "1" else duration_s(p[8])
                trace.append(f"{wid},{sub[jid] - t0},{p[2]},{p[3]},{p[4]},{p[5]},{p[6]},{p[7]},yes,false,job,,{limit},{sub_ms.get(jid, '')}")
            dfile = os.path.join(rdir, "drain.txt")
            if os.path.exists(dfile):
                ds, de = map(int, open(dfile).read().split())
                trace.append(f"0,{ds - t0},{max(1, de - ds)},0,a1,0,gpu,maintenance,yes,false,drain,0,,{sub_ms.get('drain', '')}")
            # This run's pass phases (they follow slurmctld's start and
            # drift, so each run has its own) and the backfill's
            # reservations rounded to bf_resolution of the epoch.
            run_conf = conf
            if "sched_interval" in timing.get("sim_keys", {}):
                run_conf = os.path.join(rdir, "sim.toml")
                with open(conf) as src, open(run_conf, "w") as dst:
                    text = src.read().rstrip("\n")
                    extra = "\n"
                    if lt:
                        text = "\n".join(l for l in text.split("\n") if not l.startswith("pass_miss_ms"))
                        extra += "".join(f"{k} = {lt[k]}\n" for k in
                                         ("sched_offset", "main_phase_ms", "pass_miss_ms", "pass_drift_us",
                                          "main_drift_us"))
                        # Each pass seen in the log (CALIB_SEEN=0: the
                        # fitted series alone, as before 2026-12-02 16:00).
                        if os.environ.get("CALIB_SEEN") != "0":
                            extra += "".join(f"{k} = {lt[k]}\n" for k in
                                             ("main_passes_us", "backfill_passes_us"))
                    else:
                        iv = timing["sched_interval_s"]
                        extra += f"sched_offset = {(iv - t0 % iv) % iv}\n"
                        if "timing" in timing["sim_keys"]:
                            extra += "main_phase_ms = 0\n"  # not the preset's mid-second
                    # bf_resolution (60 s unless set; older saved runs
                    # did not record it) rounds reservations on the epoch.
                    r = timing.get("bf_resolution_s", 60)
                    extra += f"backfill_resolution = {dur(r)}\nresolution_offset = {t0 % r}\n"
                    # select/cons_tres's will-run test takes running jobs
                    # off in windows of 30 s and more, on the epoch
                    # (job_test.c _will_run_test; CALIB_WILL_RUN=0: exact).
                    if os.environ.get("CALIB_WILL_RUN", "1") != "0":
                        extra += f"will_run_window = {dur(30)}\nwill_run_offset = {t0 % 30}\n"
                    elif "timing" in timing["sim_keys"]:
                        extra += f"will_run_window = {dur(0)}\n"
                    if timing.get("plugin_timer") == "clock":
                        # The plugins rebuild at whole multiples of
                        # sync.interval on the epoch (fairshare::timer).
                        siv = duration_s(timing["sync_interval"])
                        extra += f"sync_offset = {(siv - t0 % siv) % siv}\n"
                    dst.write(text + extra)
            tpath = os.path.join(rdir, "replayed.csv")
            with open(tpath, "w") as f:
                f.write("\n".join(trace) + "\n")
            # One replay per seed (sub-second phases the log does not give
            # are seeded); the prediction is the median, and the spread over
            # seeds stands beside the testbed's.
            seeds = ",".join(str(k) for k in range(1, SEEDS + 1))
            plog = os.path.join(rdir, "preemptions.jsonl")
            prlog = os.path.join(rdir, "priorities.jsonl")
            out = subprocess.run([a.allot, "sim", "--trace", tpath, "--config", run_conf, "--cluster",
                                  timing["cluster"], "--policy", "allot", "--json",
                                  "--sweep", f"seed={seeds}", "--preemptions", plog,
                                  "--priorities", prlog],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                die(f"allot sim on {tpath}: {out.stderr.strip()}")
            with open(os.path.join(rdir, "prediction.json"), "w") as f:
                f.write(out.stdout)
            preds = json.loads(out.stdout)["runs"]
            # Per seeded replay: GPU-h by team, waits by class.
            hours = [{t["name"]: t["gpu_hours"] for t in r["teams"]} for r in preds]
            waits = [{w["class"]: w for w in r["waits"]} for r in preds]
            pred = dict(
                teams=[dict(name=t, gpu_hours=median([h.get(t, 0.0) for h in hours]))
                       for t in sorted({t for h in hours for t in h})],
                preemptions=median([r["preemptions"] for r in preds]),
                preemptions_seeds=sorted(r["preemptions"] for r in preds),
                # A class no job of which started has null waits: left out.
                waits=[{"class": c,
                        "p50_s": median([w[c]["p50_s"] for w in waits if c in w and w[c]["jobs"]]),
                        "p90_s": median([w[c]["p90_s"] for w in waits if c in w and w[c]["jobs"]])}
                       for c in sorted({c for w in waits for c in w})])
            # One by one: slurmctld's preemptions (preemptor and victim,
            # from the log) that the first seeded replay makes too, within
            # 5 s.
            observed_pairs = logged_preemptions(os.path.join(sdir, "slurmctld.log"), t0, last, ids)
            predicted_pairs = []
            with open(plog) as f:
                for line in f:
                    p = json.loads(line)
                    if p["run"] == "allot seed=1":
                        predicted_pairs.append((p["time"], str(p["preemptor"]), str(p["victim"])))
            matched = 0
            for t, o, v in observed_pairs:
                hit = next((q for q in predicted_pairs if q[1:] == (o, v) and abs(q[0] - t) <= 5), None)
                if hit:
                    predicted_pairs.remove(hit)
                    matched += 1
            # Submit-time priorities: slurmctld's InitPrio (band: bits
            # 31-30, rank: bits 29-16) against each seeded replay's; the
            # median over the replays of how many agree.
            init = {ids[j]: p for j, p in (lt["init_prio"] if lt else {}).items() if j in ids}
            agree = {}
            if init:
                with open(prlog) as f:
                    for line in f:
                        p = json.loads(line)
                        want = init.get(str(p["job"]))
                        if want is None:
                            continue
                        c = agree.setdefault(p["run"], [0, 0, 0])
                        c[0] += 1
                        c[1] += (want >> 30) == p["band"]
                        c[2] += ((want >> 16) & 0x3FFF) == p["rank"]
            held = {}
            for r in att:
                held[r["account"]] = held.get(r["account"], 0.0) + r["elapsed"] * r["gpus"] / 3600
            waits = sorted(first[j] - sub[j] for j, w in ids.items() if j in first and int(wl[w][3]) <= 2)
            pw = {w["class"]: w for w in pred["waits"]}.get("debug", {"p50_s": 0, "p90_s": 0})
            load = open(os.path.join(rdir, "load-after.txt")).read().split("load average:")[-1].strip() \
                if os.path.exists(os.path.join(rdir, "load-after.txt")) else ""
            per_run.append(dict(
                pred={t["name"]: t["gpu_hours"] for t in pred["teams"]},
                obs=held,
                pred_pre=pred["preemptions"],
                pred_pre_seeds=pred["preemptions_seeds"],
                pairs_logged=len(observed_pairs), pairs_matched=matched,
                prio_jobs=median([c[0] for c in agree.values()]),
                prio_band=median([c[1] for c in agree.values()]),
                prio_rank=median([c[2] for c in agree.values()]),
                obs_pre=sum(1 for r in att if r["state"].startswith("PREEMPTED")),
                pred_p50=pw["p50_s"], pred_p90=pw["p90_s"],
                obs_p50=pct(waits, 50), obs_p90=pct(waits, 90),
                load=load, incomplete=os.path.exists(os.path.join(rdir, "incomplete"))))
        if not per_run:
            print(f"calibrate: {sdir}: no run with a sacct dump yet; skipped", file=sys.stderr)
            continue
        teams = sorted({t for r in per_run for t in list(r["pred"]) + list(r["obs"])})
        trows = []
        spread = 0.0
        for t in teams:
            obs = [r["obs"].get(t, 0.0) for r in per_run]
            pr = [r["pred"].get(t, 0.0) for r in per_run]
            mo = median(obs)
            if mo > 0:
                spread = max(spread, (max(obs) - min(obs)) / mo)
            trows.append(dict(team=t, predicted_gpu_hours=round(median(pr), 5),
                              observed_gpu_hours=round(mo, 5),
                              error=round((median(pr) - mo) / mo, 4) if mo > 0 else None,
                              observed_runs=[round(x, 5) for x in obs]))
        result["slices"].append(dict(
            slice=int(sd[6:]), kind=kind, runs=len(per_run),
            teams=trows,
            predicted_preemptions=median([r["pred_pre"] for r in per_run]),
            observed_preemptions=median([r["obs_pre"] for r in per_run]),
            observed_preemptions_runs=[r["obs_pre"] for r in per_run],
            # The counts over all runs: slurmctld's preemptions added up,
            # against each run's mean over its seeded replays added up. A
            # median of a few small counts moves in whole steps (2 or 3 is
            # +-50%); the sum over runs is the count's own estimate, with
            # every run's preemptions in it.
            predicted_preemptions_total=round(sum(statistics.mean(r["pred_pre_seeds"]) for r in per_run), 2),
            observed_preemptions_total=sum(r["obs_pre"] for r in per_run),
            preemptions_testbed_spread=count_spread([r["obs_pre"] for r in per_run]),
            predicted_preemptions_seeds=[r["pred_pre_seeds"] for r in per_run],
            # slurmctld.log's preemptions (all runs) and how many of them
            # the first seeded replay of each run makes too, one by one.
            preemptions_logged=sum(r["pairs_logged"] for r in per_run),
            preemptions_matched=sum(r["pairs_matched"] for r in per_run),
            debug_wait_p50_s=dict(predicted=median([r["pred_p50"] for r in per_run]),
                                  observed=median([r["obs_p50"] for r in per_run])),
            debug_wait_p90_s=dict(predicted=median([r["pred_p90"] for r in per_run]),
                                  observed=median([r["obs_p90"] for r in per_run])),
            # Jobs with slurmctld's InitPrio, and how many of them the
            # simulator gives the same band and the same rank at submission
            # (per run the median over its seeded replays; summed).
            submit_priorities=dict(jobs=sum(r["prio_jobs"] for r in per_run),
                                   band_agrees=sum(r["prio_band"] for r in per_run),
                                   rank_agrees=sum(r["prio_rank"] for r in per_run)),
            testbed_spread=round(spread, 4),
            load_average=[r["load"] for r in per_run],
            incomplete_runs=sum(1 for r in per_run if r["incomplete"])))
    if not result["slices"]:
        die(f"{a.dir}: no run of any slice has a sacct dump; nothing to compare")
    show(result)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nJSON: {a.json}")


def count_spread(counts):
    """The testbed's own spread of a count over its runs: (largest -
    smallest) / median, as a fraction; None where the median is 0."""
    m = median(counts)
    return round((max(counts) - min(counts)) / m, 4) if counts and m > 0 else None


def within(pred, obs, tol):
    """pred within tol (a fraction) of obs; equal counts are, 0 included."""
    return pred == obs or (obs > 0 and abs(pred - obs) / obs <= tol)


def pct(sorted_xs, p):
    """The simulator's percentile: the ceil(p% * n)-th smallest."""
    if not sorted_xs:
        return 0
    k = max(1, math.ceil(p / 100 * len(sorted_xs)))
    return sorted_xs[min(k, len(sorted_xs)) - 1]


def show(result):
    t = result["timing"]
    print(f"testbed timing: sched_interval={t['sched_interval_s']}s bf_interval={t['bf_interval_s']}s "
          f"bf_max_job_test={t['bf_max_job_test']} cred_expire={t['cred_expire_s']}s sync={t['sync_interval']} "
          f"cluster={t['cluster']}; sim: {t.get('sim_keys', {})}")
    for s in result["slices"]:
        print(f"\nslice {s['slice']} ({s['kind']}), {s['runs']} run(s), testbed spread {100 * s['testbed_spread']:.1f}%"
              f", load {'; '.join(s['load_average'])}")
        print(f"  {'team':8} {'pred GPU-h':>11} {'obs GPU-h':>11} {'error':>8}  observed per run")
        for r in s["teams"]:
            e = f"{100 * r['error']:+.1f}%" if r["error"] is not None else "-"
            print(f"  {r['team']:8} {r['predicted_gpu_hours']:11.4f} {r['observed_gpu_hours']:11.4f} {e:>8}  {r['observed_runs']}")
        pp, op = s["predicted_preemptions"], s["observed_preemptions"]
        pe = f"{100 * (pp - op) / op:+.0f}%" if op else "-"
        # Per run: the median of its seeded replays (with every pass phase
        # read from the log the seeds change nothing), and their range.
        per = s.get("predicted_preemptions_seeds", [])
        seeds = [x for r in per for x in r]
        over = ""
        if per:
            over = f"; predicted per run {[statistics.median(r) for r in per]}"
            if any(min(r) != max(r) for r in per):
                over += f", over {len(seeds)} seeded replays {min(seeds)}-{max(seeds)}"
        print(f"  preemptions (median over runs): predicted {pp}, observed {op} ({pe}); observed per run {s['observed_preemptions_runs']}{over}")
        tp, to = s["predicted_preemptions_total"], s["observed_preemptions_total"]
        te = f"{100 * (tp - to) / to:+.0f}%" if to else "-"
        sp_ = s["preemptions_testbed_spread"]
        print(f"  preemptions (all runs): predicted {tp:g}, observed {to} ({te});"
              f" the testbed's own spread of the count {'-' if sp_ is None else f'{100 * sp_:.0f}%'}")
        if s.get("preemptions_logged"):
            print(f"  one by one: {s['preemptions_matched']} of slurmctld's {s['preemptions_logged']} preemptions"
                  f" predicted (same preemptor and victim, within 5 s)")
        sp = s.get("submit_priorities", {})
        if sp.get("jobs"):
            print(f"  priorities at submission (slurmctld's InitPrio): band agrees for {sp['band_agrees']:g},"
                  f" rank for {sp['rank_agrees']:g} of {sp['jobs']:g} jobs")
        waits_ok = True
        for q in ("p50", "p90"):
            w = s[f"debug_wait_{q}_s"]
            ratio = w["predicted"] / w["observed"] if w["observed"] else None
            shown = f"x{ratio:.2f}" if ratio is not None else "observed 0 s: no ratio"
            print(f"  debug wait {q}: predicted {w['predicted']} s, observed {w['observed']} s ({shown})")
            # Within 2x, or both within the clock's resolution (1 s).
            waits_ok &= (max(w["predicted"], w["observed"]) <= 1
                         or (ratio is not None and 0.5 <= ratio <= 2))
        gpu_ok = all(r["error"] is None or abs(r["error"]) <= 0.05 for r in s["teams"])
        # The count goal is judged on all runs' preemptions; the medians'
        # verdict stands beside it.
        pre_ok = within(tp, to, 0.2)
        med_ok = within(pp, op, 0.2)
        yn = lambda b: "yes" if b else "NO"
        s["goals_met"] = {"gpu_hours_5pct": gpu_ok, "preemptions_20pct": pre_ok,
                          "preemptions_20pct_medians": med_ok, "debug_waits_2x": waits_ok}
        print(f"  goals: every team's GPU-h within 5%: {yn(gpu_ok)}; preemptions within 20%: {yn(pre_ok)}"
              f" (medians: {yn(med_ok)}); debug p50/p90 within 2x (or both <= 1 s): {yn(waits_ok)}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload")
    w.add_argument("--slice", type=int, required=True)
    w.add_argument("--span", type=int, required=True)
    w.add_argument("--nodes", type=int, required=True)
    w.add_argument("--gpus-per-node", type=int, required=True)
    w.add_argument("--out", required=True)
    w.add_argument("trace")
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--allot", required=True)
    r.add_argument("--json", required=True)
    a = ap.parse_args()
    workload(a) if a.cmd == "workload" else report(a)


if __name__ == "__main__":
    main()
