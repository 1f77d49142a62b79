"""Replaying a small workload under allot, classic and Fair Tree with `allot sim`, and reading
back what the replay says (its JSON summary and its attempts).

A workload is a list of jobs; a job is a tuple
    (team, submit s, duration s, gpus, time_limit s or None, min_runtime s or None)
or the same with a seventh field, the user. Teams are Slurm accounts of the tree the caller
gives (TOML `[tree...]` tables). Standard library only.
"""
import json, os, re, subprocess, tempfile

POLICIES = ("allot", "classic", "fairtree")
H = 3600


def slurm_seconds(v):
    """A Slurm duration ("1:00:00", "30:00", "2-0", "0") as seconds."""
    v = str(v).strip()
    days = 0
    if "-" in v:
        d, v = v.split("-", 1)
        days = int(d)
        parts = [int(x) for x in v.split(":")] if v else [0]
        parts += [0] * (3 - len(parts))  # D-HH[:MM[:SS]]
        h, m, s = parts[:3]
    else:
        parts = [int(x) for x in v.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0  # minutes
        elif len(parts) == 2:
            h, (m, s) = 0, parts
        else:
            h, m, s = parts[-3:]
    return days * 86400 + h * 3600 + m * 60 + s


def config_section(text, name):
    """The config's [name] table as a dict (Python < 3.11, without tomllib: its integer and
    string keys, read by hand)."""
    try:
        import tomllib
        return tomllib.loads(text).get(name, {})
    except ImportError:
        sec = re.search(rf"^\[{name}\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        return {k: v.strip('"') if v.startswith('"') else int(v)
                for k, v in re.findall(r"^\s*(\w+)\s*=\s*(\"[^\"]*\"|\d+)", sec.group(1) if sec else "", re.M)}


class Rules:
    """The contract and priority settings of a config that the checks read: `short_max_time`
    (s), `max_requeues` (0: an allocated job is never preempted, as the engine reads it),
    `requeue_period` and `requeue_window` (s; period 0: no requeue points),
    `default_min_runtime` and `max_min_runtime` (s), and `allowance`: GPUs a team may hold
    above its entitlement on average over a replay (not a setting of allot: the checker's
    bound, `scripts/gaming --allowance`, default 1)."""

    def __init__(self, text):
        c = config_section(text, "contract")
        p = config_section(text, "priority")
        self.short_max_gpus = int(p.get("short_max_gpus", 0))
        self.short_max_time = slurm_seconds(p.get("short_max_time", "1:00:00"))
        self.max_requeues = int(c.get("max_requeues", 3))
        self.requeue_period = slurm_seconds(c.get("requeue_period", "0"))
        self.requeue_window = slurm_seconds(c.get("requeue_window", "0"))
        self.default_min_runtime = slurm_seconds(c.get("default_min_runtime", "1:00:00"))
        self.max_min_runtime = slurm_seconds(c.get("max_min_runtime", "8:00:00"))
        self.allowance = 1.0  # GPUs; scripts/gaming --allowance

    def min_runtime(self, declared, time_limit):
        """The contract a job of the trace gets (fairshare::contract::job_min_runtime): its
        declared minimum runtime, else the default, never above its time limit."""
        m = self.default_min_runtime if declared is None else min(declared, self.max_min_runtime)
        return m if time_limit is None else min(m, time_limit)

    def first_requeue_point(self, start, min_runtime, at):
        """The first second at or after `at` when an allocated job started at `start` with
        `min_runtime` may be preempted by its contract: past its minimum runtime and, with
        requeue points, inside the first `requeue_window` of a `requeue_period` of its running
        time (fairshare::contract::RequeuePoints)."""
        t = max(at, start + min_runtime)
        if self.requeue_period <= 0:
            return t
        into = (t - start) % self.requeue_period
        return t if into < self.requeue_window else t + self.requeue_period - into


def without_tree(text):
    """The config without what names its accounts: its [tree...] tables (or a top-level
    `tree = {...}` / `tree.x...` key), [sim.accounts] and each [[sim.rule]] with `teams`; every
    other table kept, wherever it is. Returns (text, what was dropped besides the tree)."""
    out, dropped, block, top = [], [], [], True
    kind = None  # what the current table is: None (kept), "tree", "accounts" or "rule"

    def flush():
        # A [[sim.rule]] block is dropped only when it names teams.
        if kind == "rule" and any(re.match(r"^\s*teams\s*=", l) for l in block):
            dropped.append("a [[sim.rule]] naming teams")
        elif kind in (None, "rule"):
            out.extend(block)
        elif kind == "accounts":
            dropped.append("[sim.accounts]")
        block.clear()

    for line in text.splitlines(keepends=True):
        m = re.match(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"'-]+)\s*\]\]?\s*(#.*)?$", line)
        if m:
            flush()
            top = False
            key = m.group(2).strip("\"'").replace(" ", "")
            if key == "tree" or key.startswith("tree."):
                kind = "tree"
            elif key == "sim.accounts" or key.startswith("sim.accounts."):
                kind = "accounts"
            elif m.group(1) == "[[" and key == "sim.rule":
                kind = "rule"
            else:
                kind = None
        elif top and re.match(r"^\s*tree\s*[.=]", line):
            continue  # the tree as a top-level key
        block.append(line)
    flush()
    return "".join(out), sorted(set(dropped))


def with_cluster(head, cluster):
    """`head` (a config without its tree) with `[sim] cluster` set to `cluster`."""
    text, n = re.subn(r'^(\s*)cluster\s*=\s*"[^"]*"', rf'\g<1>cluster = "{cluster}"', head, count=1, flags=re.M)
    return text if n else head


def write_trace(path, jobs):
    """Writes an allot CSV trace; returns its jobs by trace id (1, 2, ... in submission order,
    each as (team, submit, duration, gpus, time_limit, min_runtime, user))."""
    jobs = [(tuple(j) + ("u0",))[:7] for j in jobs]
    jobs.sort(key=lambda j: j[1])  # stable: jobs of one second keep the caller's order
    with open(path, "w") as f:
        f.write("id,team,user,submit,duration,gpus,time_limit,min_runtime\n")
        for i, (team, submit, dur, gpus, limit, minrt, user) in enumerate(jobs):
            f.write(f"{i + 1},{team},{user},{submit},{dur},{gpus},{'' if limit is None else limit},"
                    f"{'' if minrt is None else minrt}\n")
    return {i + 1: j for i, j in enumerate(jobs)}


class ReplayError(RuntimeError):
    pass


def replay(allot, head, cluster, tree, jobs, policies=POLICIES, d=None, name="w"):
    """Replays `jobs` on `cluster` ("2x8") with the tree `tree` (TOML) and every other setting of
    `head`. Returns (runs by policy: the JSON of `allot sim --json`, attempts by policy: lists of
    `--attempts` objects with `submit` (s since the first submission) added, jobs by trace id,
    the offset: the first submission's second in the caller's times)."""
    own = d is None
    if own:
        tmp = tempfile.TemporaryDirectory()
        d = tmp.name
    try:
        cfg, trace = os.path.join(d, f"{name}.toml"), os.path.join(d, f"{name}.csv")
        att_path = os.path.join(d, f"{name}.attempts.jsonl")
        open(cfg, "w").write(with_cluster(head, cluster).rstrip() + "\n\n" + tree)
        by_id = write_trace(trace, jobs)
        cmd = [allot, "sim", "--trace", trace, "--config", cfg, "--cluster", cluster, "--json",
               "--attempts", att_path, "--threads", "1"]
        for p in policies:
            cmd += ["--policy", p]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except OSError as e:
            raise ReplayError(f"{name}: cannot run {allot}: {e}")
        except subprocess.TimeoutExpired:
            raise ReplayError(f"{name}: allot sim ran past 600 s")
        if p.returncode != 0:
            raise ReplayError(f"{name}: allot sim failed (exit {p.returncode}): "
                              f"{(p.stderr or p.stdout).strip()[-400:] or 'no message'}")
        try:
            runs = {r["policy"]: r for r in json.loads(p.stdout)["runs"]}
            attempts = {}
            offset = min(j[1] for j in by_id.values())
            with open(att_path) as f:
                for line in f:
                    a = json.loads(line)
                    a["submit"] = by_id[a["job"]][1] - offset
                    attempts.setdefault(a["run"], []).append(a)
            missing = [pol for pol in policies if pol not in runs]
            if missing:
                raise ValueError(f"no run of {', '.join(missing)}")
        except (ValueError, KeyError, TypeError, OSError) as e:
            raise ReplayError(f"{name}: {allot} sim did not give what allot sim --json and --attempts give "
                              f"({e}): is --allot an allot binary?")
        return runs, attempts, by_id, offset
    finally:
        if own:
            tmp.cleanup()
