//! One reader for the ledger and the replay (issue 53, item 6): for random
//! sacct dumps, the GPU-hours `allot sim --trace` replays per account equal
//! the GPU-hours (occupancy) `allot sync --from` stores, and each job keeps
//! its time limit.

use std::collections::BTreeMap;

use super::input::sacct_trace;

/// xorshift64*: a fixed, dependency-free stream of test values.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// A dump of random jobs: requeued attempts (same GPUs), resized runs
/// (segments of their own GPUs), suspended jobs (`Elapsed` shorter than
/// wall time), never-started ones, steps, and ids Slurm reused for
/// another user years later.
fn random_dump(rng: &mut Rng) -> String {
    let mut d = String::from(
        "JobID|JobIDRaw|Account|User|AllocTRES|Submit|Start|End|Elapsed|State|TimelimitRaw\n",
    );
    let t0 = 1_700_000_000i64;
    let elapsed = |s: i64| format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    for job in 1..=(5 + rng.below(25)) {
        let account = ["a1", "a2", "b1"][rng.below(3) as usize];
        let user = ["alice", "bob"][rng.below(2) as usize];
        let limit = 10 + rng.below(3000); // minutes
        let mut submit = t0 + rng.below(86_400) as i64;
        let mut gpus = 1 + rng.below(8);
        if rng.below(8) == 0 {
            d += &format!(
                "{job}|{job}|{account}|{user}||{submit}|Unknown|Unknown|00:00:00|PENDING|{limit}\n"
            );
            continue;
        }
        let attempts = 1 + rng.below(3);
        for i in 0..attempts {
            let start = submit + rng.below(3600) as i64;
            let wall = 60 + rng.below(20_000) as i64;
            let end = start + wall;
            let last = i + 1 == attempts;
            let state = match (last, rng.below(3)) {
                (true, _) => "COMPLETED",
                (false, 0) => "RESIZING",
                _ => "REQUEUED",
            };
            // A suspended job: Elapsed counts only its run time.
            let shown = if rng.below(4) == 0 { wall / 2 } else { wall };
            d += &format!(
                "{job}|{job}|{account}|{user}|cpu=4,gres/gpu={gpus}|{submit}|{start}|{end}|{}|{state}|{limit}\n",
                elapsed(shown)
            );
            if rng.below(2) == 0 {
                d += &format!(
                    "{job}.batch|{job}.batch|{account}||cpu=4,gres/gpu={gpus}|{submit}|{start}|{end}|{}|{state}|\n",
                    elapsed(shown)
                );
            }
            if state == "RESIZING" {
                gpus = 1 + rng.below(gpus);
            }
            submit = end;
        }
        if rng.below(6) == 0 {
            // The id again, three years later, for bob.
            let later = t0 + 3 * 365 * 86_400 + rng.below(86_400) as i64;
            d += &format!(
                "{job}|{job}|{account}|bob|gres/gpu=2|{later}|{later}|{}|01:00:00|COMPLETED|{limit}\n",
                later + 3600
            );
        }
    }
    d
}

#[test]
fn the_replay_reads_a_dump_as_the_ledger_does() {
    let dir = std::env::temp_dir().join(format!("allot-one-reader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let charging = allot_ledger::charge::Charging::new(
        fairshare::ContractPolicy::default(),
        Default::default(),
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..40 {
        let dump = random_dump(&mut rng);
        let path = dir.join(format!("ledger-{case}.sqlite"));
        let mut ledger = allot_ledger::Ledger::open(&path).unwrap();
        allot_sync::sidecar::sync::import_dump(
            &mut ledger,
            &charging,
            dump.as_bytes(),
            jiff::tz::TimeZone::UTC,
            7,
        )
        .unwrap();
        let stored: BTreeMap<String, u64> = ledger
            .reader()
            .unwrap()
            .usage(0, 2_000_000_000)
            .unwrap()
            .into_iter()
            .map(|((account, _), u)| (account, u.gpu_seconds))
            .fold(BTreeMap::new(), |mut m, (a, s)| {
                *m.entry(a).or_default() += s;
                m
            });
        let trace = sacct_trace(dump.as_bytes()).unwrap();
        assert!(trace.errors.is_empty(), "case {case}: {:?}", trace.errors);
        let mut replayed: BTreeMap<String, u64> = BTreeMap::new();
        for j in &trace.jobs {
            *replayed.entry(j.team.clone()).or_default() += u64::from(j.gpus) * j.duration;
            assert!(
                j.time_limit.is_some(),
                "case {case}: job {} lost its time limit",
                j.id
            );
        }
        assert_eq!(replayed, stored, "case {case}:\n{dump}");
        drop(ledger);
        std::fs::remove_file(&path).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
