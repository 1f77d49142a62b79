"""The checker's floor on hand-made replays (issue 51, item 3): requeue points, max_requeues = 0,
the honest team's own queued jobs one after another, and seconds counted from the first
submission. Run from scripts/: python3 -m unittest gaminglib.test_checks (scripts/test does).
"""
import unittest

from gaminglib.checks import contract_floor, judge
from gaminglib.replay import H, Rules

CONFIG = """
[contract]
default_min_runtime = "1:00:00"
max_requeues = 3
[priority]
short_max_gpus = 2
short_max_time = "1:00:00"
"""


def attempt(job, team, start, end, gpus, min_runtime=H, n=0):
    return {"job": job, "team_name": team, "start": start, "end": end, "gpus": gpus,
            "min_runtime": min_runtime, "attempt": n, "ended": "completed"}


class Floor(unittest.TestCase):
    def setUp(self):
        self.rules = Rules(CONFIG)
        # Trace ids -> (team, submit, duration, gpus, limit, min_runtime, user); the trace's
        # own clock starts at 1000: the checker counts from the first submission.
        self.by_id = {1: ("gamer", 1000, 8 * H, 16, None, None, "u"),
                      2: ("honest", 1000 + 600, 4 * H, 16, None, None, "u")}
        self.att = [attempt(1, "gamer", 0, 8 * H, 16)]

    def test_counts_from_the_first_submission(self):
        # The gamer's job started at 0 (its submission); its contract ends at 1 h.
        self.assertEqual(contract_floor(self.att, self.by_id, 1000, 2, "honest", 16, self.rules), H)

    def test_requeue_points(self):
        r = Rules(CONFIG.replace("max_requeues = 3", 'max_requeues = 3\nrequeue_period = "30:00"\nrequeue_window = "5:00"'))
        self.assertEqual((r.requeue_period, r.requeue_window), (1800, 300))
        # Past the contract (1 h) at 1 h: 3600 % 1800 = 0 is inside the window: 1 h.
        self.assertEqual(contract_floor(self.att, self.by_id, 1000, 2, "honest", 16, r), H)
        # A 70-min contract: 4200 % 1800 = 600, past the 5-min window: the next point, 90 min.
        att = [attempt(1, "gamer", 0, 8 * H, 16, min_runtime=4200)]
        self.assertEqual(contract_floor(att, self.by_id, 1000, 2, "honest", 16, r), 5400)

    def test_max_requeues_zero_means_never(self):
        self.rules.max_requeues = 0
        self.assertEqual(contract_floor(self.att, self.by_id, 1000, 2, "honest", 16, self.rules), 8 * H)

    def test_a_job_that_used_its_requeues_runs_to_its_end(self):
        att = [attempt(1, "gamer", 0, 8 * H, 16, n=3)]
        self.assertEqual(contract_floor(att, self.by_id, 1000, 2, "honest", 16, self.rules), 8 * H)

    def test_the_free_tier_goes_at_once(self):
        att = [attempt(1, "gamer", 0, 8 * H, 16, min_runtime=0)]
        self.assertEqual(contract_floor(att, self.by_id, 1000, 2, "honest", 16, self.rules), 600)

    def test_own_queued_jobs_run_one_after_another(self):
        # Two of the honest team's own 16-GPU 1-h jobs queued ahead: they run first, one after
        # the other (the sum, not the longest), from the gamer's contract end.
        by_id = dict(self.by_id)
        by_id[2] = ("honest", 1000 + 100, H, 16, None, None, "u")
        by_id[3] = ("honest", 1000 + 200, H, 16, None, None, "u")
        by_id[4] = ("honest", 1000 + 600, 4 * H, 16, None, None, "u")
        self.assertEqual(contract_floor(self.att, by_id, 1000, 4, "honest", 16, self.rules), 3 * H)


class Judge(unittest.TestCase):
    def test_owed_gap_and_violations(self):
        rules = Rules(CONFIG)
        rules.allowance = 2.0

        def run(owed, excess=0.0):
            return {"span_s": 24 * H,
                    "teams": [{"name": "honest", "owed_delivered": owed},
                              {"name": "gamer", "owed_delivered": 1.0, "excess_gpu_hours": excess * 24,
                               "excess_peak_gpus": excess}]}
        runs = {"allot": run(0.90, excess=3.0), "classic": run(0.95), "fairtree": run(0.93)}
        v = judge(runs, {"allot": []}, {}, 0, "honest", ["gamer"], 16, rules, {"honest": 1, "gamer": 1})
        self.assertAlmostEqual(v["gaps"]["owed"], 4.0)
        self.assertAlmostEqual(v["gaps"]["excess"], 1.0)
        self.assertEqual(sorted(v["violations"]), ["excess", "owed"])
        runs["allot"] = run(0.945)
        v = judge(runs, {"allot": []}, {}, 0, "honest", ["gamer"], 16, rules, {"honest": 1, "gamer": 1})
        self.assertEqual(v["violations"], [])


if __name__ == "__main__":
    unittest.main()
