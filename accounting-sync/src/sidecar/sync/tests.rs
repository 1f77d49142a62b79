//! The sync against fake sacct programs and saved dumps: retries and
//! backoff, preemption records, steps, clusters.

mod backoff {
    use super::super::*;

    #[test]
    fn the_summary_counts_steps_once() {
        let mut s = ImportStats {
            rows: 8,
            steps: 4,
            bad: 1,
            ..Default::default()
        };
        s.written.inserted = 3;
        assert_eq!(
            s.summary(),
            "8 rows: 3 new attempts, 0 updated, 0 unchanged, 0 not jobs, 4 job steps (skipped: their jobs' rows are charged), 1 unreadable (logged, holding 0.0 GPU-h)"
        );
        s.steps = 1;
        assert!(s.summary().contains(", 1 job step (skipped"));
        s.steps = 0;
        assert!(!s.summary().contains("step"));
        assert!(!s.summary().contains("preemption"));
        s.preemptions = 2;
        assert!(s
            .summary()
            .ends_with("(logged, holding 0.0 GPU-h); 2 preemptions recorded"));
        s.written.corrected = 2;
        assert!(s.summary().contains(
            "; 2 ended attempts corrected in slurmdbd (charged as corrected; each logged)"
        ));
        s.written.corrected = 0;
        s.written.superseded = 1;
        assert!(s.summary().contains(
            "(logged, holding 0.0 GPU-h); 1 row settled by another row of the same attempt (a later row, or one that ended it; conflicts logged); 2 preemptions recorded"
        ));
    }

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(10));
        let got: Vec<u64> = (0..6).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10]);
        b.reset();
        assert_eq!(b.next_delay().as_secs(), 1);
        let mut tiny = Backoff::new(Duration::from_millis(300));
        assert_eq!(tiny.next_delay(), Duration::from_millis(300));
    }

    /// Options running `body` as sacct (a shell script written at `path`).
    fn fake_sacct(path: &std::path::Path, body: &str) -> SyncOptions {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        SyncOptions {
            sacct: path.display().to_string(),
            overlap: 3600,
            first_start: 0,
            batch: 100,
        }
    }

    #[test]
    fn retries_a_failing_sacct_until_it_works() {
        let dir = std::env::temp_dir().join(format!("allot-retry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A sacct that fails twice (slurmdbd down), then lists one job.
        let counter = dir.join("calls");
        let sacct = dir.join("sacct");
        let opts = fake_sacct(
            &sacct,
            &format!(
                "n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}\n\
                 if [ $n -lt 2 ]; then echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1; fi\n\
                 echo '7|7|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED||'\n",
                c = counter.display()
            ),
        );
        let mut ledger = Ledger::open(&dir.join("ledger.sqlite")).unwrap();
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        let t0 = std::time::Instant::now();
        let stats = sync_with_retry(
            &mut ledger,
            &charging,
            &opts,
            || 1000,
            Duration::from_secs(30),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(stats.written.inserted, 1);
        assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "3");
        assert!(
            t0.elapsed() >= Duration::from_secs(2),
            "waited 1 s + 1 s between tries"
        );
        assert_eq!(ledger.watermark().unwrap(), Some(1000));
        // Down for longer than retry_for: the error, and the watermark stays.
        std::fs::write(&counter, "-100").unwrap();
        let e = sync_with_retry(
            &mut ledger,
            &charging,
            &opts,
            || 2000,
            Duration::from_millis(1500),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("Connection refused"), "{e:#}");
        assert_eq!(ledger.watermark().unwrap(), Some(1000));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pass_stores_the_plugins_preemption_records_once() {
        let dir = std::env::temp_dir().join(format!("allot-precords-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let opts = fake_sacct(&dir.join("sacct"), "exit 0");
        let path = dir.join("ledger.sqlite");
        let mut ledger = Ledger::open(&path).unwrap();
        let record = allot_ledger::preemptions::Preemption {
            time: 900,
            victim: 7,
            victim_account: "a1".into(),
            preemptor: 8,
            preemptor_account: "b1".into(),
            rule: "net_gain".into(),
            grounds: serde_json::json!({"gain": 4.0}),
        };
        let log = allot_ledger::preemptions::log_path(&path);
        allot_ledger::preemptions::append_to_log(&log, std::slice::from_ref(&record)).unwrap();
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        let stats = sync_once(
            &mut ledger,
            &charging,
            &opts,
            1000,
            &mut LiveContracts::from_squeue(),
        )
        .unwrap();
        assert_eq!(stats.preemptions, 1);
        assert_eq!(
            sync_once(
                &mut ledger,
                &charging,
                &opts,
                1010,
                &mut LiveContracts::from_squeue()
            )
            .unwrap()
            .preemptions,
            0
        );
        let got = ledger.reader().unwrap().preemptions_of(7).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].preemption, record);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

mod dump {
    use super::super::*;

    /// A fresh ledger in a directory of its own (removed by the caller).
    fn temp_ledger(prefix: &str) -> (std::path::PathBuf, Ledger) {
        let dir = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ledger = Ledger::open(&dir.join("ledger.sqlite")).unwrap();
        (dir, ledger)
    }

    /// `import_dump` of `dump` (UTC times, batches of 100) with the default
    /// contract policy.
    fn dump_into(ledger: &mut Ledger, dump: &[u8]) -> anyhow::Result<ImportStats> {
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        import_dump(ledger, &charging, dump, jiff::tz::TimeZone::UTC, 100)
    }

    #[test]
    fn steps_in_a_dump_without_x_are_counted_not_unreadable() {
        let (dir, mut ledger) = temp_ledger("allot-steps-");
        let dump = "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
            5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n\
            5101.batch|5101.batch|a1|alice||cpu=1,gres/gpu=1|110|110|3710|01:00:00|COMPLETED|\n\
            5104|5104|a1|alice|gpu|gres/gpu=2|100|110|3710|01:00:00|COMPLETED|\n\
            5104.extern|5104.extern|a1|alice||gres/gpu=2|110|110|3710|01:00:00|COMPLETED|\n\
            5104.0|5104.0|a1|alice||gres/gpu=2|110|110|3710|01:00:00|COMPLETED|\n\
            7100_3|7104|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n\
            7100_3.batch|7104.batch|a1|alice||gres/gpu=1|110|110|3710|01:00:00|COMPLETED|\n\
            x9|x9|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n";
        let stats = dump_into(&mut ledger, dump.as_bytes()).unwrap();
        assert_eq!(
            (stats.rows, stats.written.inserted, stats.steps, stats.bad),
            (8, 3, 4, 1)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn monitoring_dumps_import_keyed_by_start() {
        let (dir, mut ledger) = temp_ledger("allot-nosubmit-");
        // Two attempts of job 5200 (requeued), told apart by their Start.
        let dump = "JobIDRaw|Start|End|Cluster|AllocTRES|AdminComment|User|Account|State|NNodes|NCPUS|ReqMem|QOS|Partition|TimelimitRaw|JobName\n\
            5200|1700000100|1700003700|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|REQUEUED|1|4|16G|normal|gpu|60|train\n\
            5200|1700003760|1700007360|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|COMPLETED|1|4|16G|normal|gpu|60|train\n\
            5201|Unknown|Unknown|c|||bob|a1|PENDING|1|4|16G|normal|gpu|60|x\n";
        let stats = dump_into(&mut ledger, dump.as_bytes()).unwrap();
        assert_eq!(
            (stats.rows, stats.written.inserted, stats.skipped, stats.bad),
            (3, 2, 1, 0)
        );
        // Re-importing is a no-op: the key (job, Start) is stable.
        let again = dump_into(&mut ledger, dump.as_bytes()).unwrap();
        assert_eq!((again.written.inserted, again.written.unchanged), (0, 2));
        // A dump without what charging needs is refused, naming it.
        let e = dump_into(
            &mut ledger,
            "JobName|User|Account|Start\nx|alice|a1|100\n".as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("lacks the field(s) JobIDRaw (or JobID), AllocTRES, End"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dump_of_several_clusters_writes_nothing() {
        let (dir, mut ledger) = temp_ledger("allot-clusters-");
        let one = "Cluster|JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
            alpha|700|700|a1|alice|gpu|gres/gpu=2|1700000000|1700000000|1700003600|01:00:00|COMPLETED|\n\
            alpha|701|701|a1|alice|gpu|gres/gpu=4|1700000000|1700000000|1700003600|01:00:00|COMPLETED|\n";
        // One cluster with the column: imported as before.
        let stats = dump_into(&mut ledger, one.as_bytes()).unwrap();
        assert_eq!(stats.written.inserted, 2);
        let before = ledger.reader().unwrap().dump().unwrap();
        // Another cluster's 700 and 701 (other submit times, so not
        // "unchanged"): today they would become a second attempt of 700
        // and replace 701. In batches of one, the first row would be
        // written before the second cluster is seen.
        let two = format!(
            "{one}beta|700|700|b1|bob|gpu|gres/gpu=1|1700000500|1700000500|1700004100|01:00:00|COMPLETED|\n\
             beta|701|701|b1|bob|gpu|gres/gpu=4|1700000000|1700000000|1700003600|01:00:00|COMPLETED|\n"
        );
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        let e = import_dump(
            &mut ledger,
            &charging,
            two.as_bytes(),
            jiff::tz::TimeZone::UTC,
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("2 clusters: alpha (2 rows), beta (2 rows)")
                && e.contains("sacct -M <cluster>"),
            "{e}"
        );
        assert_eq!(
            ledger.reader().unwrap().dump().unwrap(),
            before,
            "ledger untouched"
        );
        assert_eq!(ledger.reader().unwrap().attempt_count().unwrap(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A reader that fails after `ok` bytes (a dump on a disk that
    /// errors, a pipe that breaks).
    struct Breaks {
        data: Vec<u8>,
        at: usize,
        ok: usize,
    }

    impl std::io::Read for Breaks {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.at >= self.ok {
                return Err(std::io::Error::other("disk error"));
            }
            let n = buf
                .len()
                .min(self.ok - self.at)
                .min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// A dump of `n` 1-GPU, 1-hour jobs whose job `bad` is named with
    /// bytes that are not UTF-8.
    fn latin1_dump(n: u64, bad: u64) -> Vec<u8> {
        let mut d =
            b"JobID|JobIDRaw|JobName|Account|User|AllocTRES|Submit|Start|End|State\n".to_vec();
        for j in 1..=n {
            let name: &[u8] = if j == bad { b"r\xe9sum\xe9" } else { b"train" };
            d.extend_from_slice(format!("{j}|{j}|").as_bytes());
            d.extend_from_slice(name);
            d.extend_from_slice(
                b"|a1|alice|gres/gpu=1|1700000000|1700000000|1700003600|COMPLETED\n",
            );
        }
        d
    }

    #[test]
    fn bytes_that_are_not_utf8_in_a_job_name_stop_no_import() {
        let (dir, mut ledger) = temp_ledger("allot-latin1-");
        // Batches of 100: the bad row is in the third.
        let stats = dump_into(&mut ledger, &latin1_dump(250, 230)).unwrap();
        assert_eq!(
            (stats.rows, stats.written.inserted, stats.bad),
            (250, 250, 0)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_import_that_fails_midway_writes_nothing() {
        let (dir, mut ledger) = temp_ledger("allot-midway-");
        let data = latin1_dump(250, 0);
        let ok = data.len() * 9 / 10; // past two batches of 100
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        let input = std::io::BufReader::new(Breaks { data, at: 0, ok });
        let e =
            import_dump(&mut ledger, &charging, input, jiff::tz::TimeZone::UTC, 100).unwrap_err();
        assert!(format!("{e:#}").contains("disk error"), "{e:#}");
        assert_eq!(
            ledger.reader().unwrap().attempt_count().unwrap(),
            0,
            "nothing written"
        );
        // The ledger is usable afterwards, and the whole dump imports.
        let stats = dump_into(&mut ledger, &latin1_dump(250, 0)).unwrap();
        assert_eq!(stats.written.inserted, 250);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rows_cut_by_free_text_are_read_or_say_what_they_held() {
        let (dir, mut ledger) = temp_ledger("allot-freetext-");
        // JobName before the fields allot reads, AdminComment last: a `|`
        // and a newline in names are read back; a row that no reading
        // makes a job (its AllocTRES is text) is counted with what it held.
        let dump =
            "JobID|JobIDRaw|JobName|Account|User|AllocTRES|Submit|Start|End|State|AdminComment\n\
            1|1|sweep|lr=0.1|a1|alice|gres/gpu=8|0|0|36000|COMPLETED|allot:min_runtime=600\n\
            2|2|eval\nstep 2|a1|alice|gres/gpu=8|0|0|36000|COMPLETED|\n\
            3|3|plain|a1|alice|gres/gpu=8|0|0|36000|COMPLETED|\n\
            4|4|x|y|a1|alice|gpu|0|0|36000|COMPLETED|\n";
        let stats = dump_into(&mut ledger, dump.as_bytes()).unwrap();
        assert_eq!((stats.rows, stats.written.inserted, stats.bad), (4, 3, 1));
        assert!(
            stats.first_bad.as_deref().unwrap().contains("at line 6"),
            "{stats:?}"
        );
        assert!(
            stats.summary().contains(
                "1 unreadable (logged, holding 0.0 GPU-h and 1 row whose GPU-hours cannot be read"
            ),
            "{}",
            stats.summary()
        );
        // Job 1 kept its contract and account despite the `|`.
        let all = ledger.reader().unwrap().all_attempts().unwrap();
        let one = &all.iter().find(|a| a.record.job_id == 1).unwrap().record;
        assert_eq!(
            (one.account.as_str(), one.gpus, one.min_runtime),
            ("a1", 8, 600)
        );
        let two = &all.iter().find(|a| a.record.job_id == 2).unwrap().record;
        assert_eq!((two.account.as_str(), two.end), ("a1", Some(36000)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 53, item 5: jobs on shared GPUs (`gres/shard`, `gres/mps`)
    /// with the default weights are charged 0 and warned, naming the
    /// weights; with them set, a share is charged.
    #[test]
    fn gpu_shares_without_a_weight_are_warned_with_the_weights_to_set() {
        let (dir, mut ledger) = temp_ledger("allot-shard-");
        let dump = "JobIDRaw|Account|User|AllocTRES|Submit|Start|End|State\n\
            1|a1|alice|cpu=1,gres/shard=2,mem=1G,node=1|0|0|3600|COMPLETED\n\
            2|a1|alice|cpu=1,gres/mps=50,node=1|0|0|3600|COMPLETED\n\
            3|a1|alice|cpu=1,gres/gpu=1,gres/shard=1|0|0|3600|COMPLETED\n";
        let stats = dump_into(&mut ledger, dump.as_bytes()).unwrap();
        assert_eq!(stats.shared_unweighted, 2);
        assert!(stats
            .summary()
            .contains("; 2 attempts on shared GPUs (gres/shard, gres/mps) charged 0"));
        let w = stats.sharing_warning().unwrap();
        assert!(
            w.contains("\"gres/shard\" = 1 / the shards per GPU")
                && w.contains("\"gres/mps\" = 1 / the MPS count"),
            "{w}"
        );
        // With the weights: 2 shards of 4 per GPU = half a GPU, 50 MPS of
        // 100 = half a GPU; no warning.
        let weights = fairshare::charge::ChargeWeights::new(std::collections::BTreeMap::from([
            ("gres/gpu".to_string(), 1.0),
            ("gres/shard".to_string(), 0.25),
            ("gres/mps".to_string(), 0.01),
        ]))
        .unwrap();
        let charging = Charging::new(fairshare::ContractPolicy::default(), weights);
        let stats = import_dump(
            &mut ledger,
            &charging,
            dump.as_bytes(),
            jiff::tz::TimeZone::UTC,
            100,
        )
        .unwrap();
        assert_eq!(
            (stats.shared_unweighted, stats.sharing_warning()),
            (0, None)
        );
        let rates: Vec<u64> = ledger
            .reader()
            .unwrap()
            .all_attempts()
            .unwrap()
            .iter()
            .map(|a| a.record.rate)
            .collect();
        assert_eq!(rates, [500, 500, 1250]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
