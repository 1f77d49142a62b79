//! The trace formats read back: each format's columns, units and refusals.

use super::*;

#[test]
fn absurd_years_are_not_times() {
    // Regression (fuzz target `trace`): the day count overflowed.
    assert_eq!(parse_datetime("24294967296017-10-17 23:58:13"), None);
    assert_eq!(parse_datetime("-99999999999999-01-01 00:00:00"), None);
    assert!(parse_datetime("9999-12-31 23:59:59").is_some());
    let t = "timestamp,duration,num_gpus,gpu_time,cluster\n24294967296017-10-17 23:58:13,92982.0,1,92982.0,ed69ec\n";
    assert!(parse(t, None).map_or(true, |t| t.jobs.is_empty()));
}

#[test]
fn allot_csv_submit_ms_is_a_millisecond_of_the_second() {
    let t = parse(
        "submit,duration,gpus,team,submit_ms\n0,10,1,a,999\n1,10,1,a,\n2,10,1,a,1000\n3,10,1,a,0.5\n",
        None,
    )
    .unwrap();
    let ms: Vec<Option<u16>> = t.jobs.iter().map(|j| j.submit_ms).collect();
    assert_eq!(ms, [Some(999), None], "empty: a seeded phase");
    let e: Vec<String> = t.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(e.len(), 2, "{e:?}");
    for e in e {
        assert!(e.contains("submit_ms") && e.contains("0-999"), "{e}");
    }
}

#[test]
fn allot_csv_ids_are_whole_and_unique() {
    let t = parse(
        "id,submit,duration,gpus,team\nabc,0,10,1,a\n1234_7,0,10,1,a\n1,0,10,1,a\n1,5,10,1,b\n,6,10,1,a\n",
        None,
    )
    .unwrap();
    let ids: Vec<(u64, u32)> = t.jobs.iter().map(|j| (j.id, j.line)).collect();
    assert_eq!(ids, [(1, 4), (6, 6)], "an empty id is the line number");
    let e: Vec<String> = t.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        e,
        [
            "line 2: column `id`: \"abc\" is not a job id; write a whole number (e.g. 4242), or leave the column empty to number the jobs by their line",
            "line 3: column `id`: \"1234_7\" is not a job id; write a whole number (e.g. 4242), or leave the column empty to number the jobs by their line",
            "line 5: column `id`: job id 1 is already line 4's; each row is one job: give it its own id, or leave the column empty to number the jobs by their line",
        ]
    );
}

#[test]
fn allot_csv_gpus_are_whole() {
    let t = parse(
        "id,submit,duration,gpus,team\n1,0,10,4.5,a\n2,0,10,4.0,a\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs.iter().map(|j| j.gpus).collect::<Vec<_>>(), [4]);
    assert_eq!(
        t.errors[0].to_string(),
        "line 2: column `gpus`: \"4.5\" is not a whole GPU count; a job holds whole GPUs: write 4 or 5"
    );
}

#[test]
fn allot_csv_time_limits_are_seconds() {
    let t = parse(
        "submit,duration,gpus,team,time_limit\n0,10,1,a,60\n1,10,1,a,\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs[0].time_limit, Some(60));
    assert_eq!(
        t.jobs[1].time_limit, None,
        "empty: the runtime stands for it"
    );
    let t = parse(
        "submit,duration,gpus,team,time_limit\n0,10,1,a,0\n0,10,1,a,1:00\n",
        None,
    )
    .unwrap();
    assert!(t.jobs.is_empty());
    let e: Vec<String> = t.errors.iter().map(|e| e.to_string()).collect();
    assert!(
        e[0].contains("time_limit") && e[0].contains("time limit of 0"),
        "{e:?}"
    );
    assert!(e[1].contains("whole number"), "{e:?}");
}

#[test]
fn philly_rows_are_sorted_and_normalised() {
    let t = parse(
        "timestamp,duration,num_gpus,gpu_time,cluster\n\
         2017-10-09 07:01:55,66.0,1,66.0,11cb48\n\
         2017-10-09 06:13:03,2951.0,8,2951.0,6214e9\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs.len(), 2);
    assert_eq!(
        (t.jobs[0].team.as_str(), t.jobs[0].submit, t.jobs[0].gpus),
        ("6214e9", 0, 8)
    );
    assert_eq!(t.jobs[1].submit, 48 * 60 + 52);
    assert_eq!(t.jobs[1].line, 2);
    assert_eq!(parse_datetime("1970-01-02 00:00:01"), Some(86_401));
    assert_eq!(parse_datetime("2017-10-09T07:01:55"), Some(1_507_532_515));
}

#[test]
fn malformed_rows_have_line_numbers() {
    let t = parse(
        "submit,duration,gpus,team\n0,10,1,a\n5,ten,1,a\n# comment\n7,10,x,b\n9,10,0,b\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs.len(), 1);
    assert_eq!(t.errors.len(), 2);
    assert_eq!(t.errors[0].line, 3);
    assert!(
        t.errors[0]
            .to_string()
            .starts_with("line 3: column `duration`"),
        "{}",
        t.errors[0]
    );
    assert_eq!(t.errors[1].line, 5);
    assert_eq!(t.skipped, vec![("no GPUs".to_string(), 1)]);
}

#[test]
fn mixed_clocks_are_rejected() {
    let e = parse(
        "submit,duration,gpus,team\n1506638472,10,1,a\n2017-10-09 06:13:03,10,1,a\n",
        None,
    )
    .unwrap_err();
    assert!(matches!(e, TraceError::MixedClocks { line: 3, .. }), "{e}");
    let e = parse(
        "submit,duration,gpus,team\n1506638472,10,1,a\n60,10,1,a\n",
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("relative seconds"), "{e}");
}

#[test]
fn absurd_times_are_refused_before_the_replay() {
    // Found by a breaker: one such row made `allot sim` abort on a
    // 939 MB allocation (hourly metrics over millennia).
    let t = parse(
        "submit,duration,gpus,team\n1506638472,99999999999,1,a\n1506638472,10,1,a\n99999999999,10,1,a\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs.len(), 1);
    let msgs: Vec<String> = t.errors.iter().map(|e| e.to_string()).collect();
    assert!(msgs[0].contains("longer than 5 years"), "{msgs:?}");
    assert!(msgs[1].contains("after 2199"), "{msgs:?}");
    let e = parse(
        "submit,duration,gpus,team\n1506638472,10,1,a\n4506638472,10,1,a\n",
        None,
    )
    .unwrap_err();
    assert!(
        matches!(e, TraceError::TooLong { line: 3, years: 95 }),
        "{e}"
    );
}

#[test]
fn allot_csv_with_events_and_contracts() {
    let t = parse(
        "id,team,submit,duration,gpus,min_runtime,resumable,kind,node\n\
         7,a,100,3600,2,0,false,,\n\
         ,,150,600,0,,,drain,3\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs[0].id, 7);
    assert_eq!(t.jobs[0].min_runtime, Some(0));
    assert_eq!(t.jobs[0].resumable, Some(false));
    assert_eq!(
        t.events,
        vec![NodeEvent {
            node: 3,
            at: 50,
            duration: 600,
            kind: NodeEventKind::Drain,
            at_ms: None,
        }]
    );
}

#[test]
fn alibaba_and_helios() {
    let t = parse(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n\
         openb-pod-0002,6000,12288,0,0,,BE,Running,427061,12902960,427061\n\
         openb-pod-0003,6000,12288,1,1000,,BE,Pending,427062,12902960,\n\
         openb-pod-0004,6000,12288,1,1000,,BE,Running,427062,427070,427080\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs.len(), 1);
    assert_eq!(
        (t.jobs[0].team.as_str(), t.jobs[0].id, t.jobs[0].duration),
        ("ls", 1, 12_475_899)
    );
    let skipped: Vec<(&str, u64)> = t.skipped.iter().map(|(w, n)| (w.as_str(), *n)).collect();
    assert_eq!(
        skipped,
        [
            ("deleted before it was scheduled", 1),
            ("never scheduled", 1),
            ("no GPUs", 1)
        ]
    );
    let t = parse(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration\n\
         j1,u1,vcA,4,16,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 01:00:00,3590\n",
        None,
    )
    .unwrap();
    assert_eq!(
        (t.jobs[0].team.as_str(), t.jobs[0].gpus, t.jobs[0].id),
        ("vca", 4, 1)
    );
    assert!(!t.classes_only);
}

/// InternLM's AcmeTrace schema: no `vc`, the tenant is `user`, times
/// with a UTC offset. Every state that ran is replayed as it held its
/// GPUs; a job cancelled before it started (duration 0) and a CPU job
/// are skipped.
#[test]
fn acme_traces_read_user_as_the_team_and_honour_offsets() {
    let text = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue\n\
        dlc101x,uA1,1,8,64,Pretrain,COMPLETED,2023-03-01 08:00:00+08:00,2023-03-01 08:00:10+08:00,2023-03-01 09:00:10+08:00,3600,10\n\
        dlc102x,uB2,2,16,128,SFT,FAILED,2023-03-01 08:10:00+08:00,2023-03-01 08:10:05+08:00,2023-03-01 08:40:05+08:00,1800,5\n\
        dlc103x,uA1,1,1,8,Debug,CANCELLED,2023-03-01 08:20:00+08:00,2023-03-01 08:20:30+08:00,2023-03-01 08:22:30+08:00,120,30\n\
        dlc104x,uB2,1,4,32,Evaluation,CANCELLED,2023-03-01 08:25:00+08:00,,2023-03-01 08:30:00+08:00,0,\n\
        dlc105x,uC3,1,0,4,Other,COMPLETED,2023-03-01 08:26:00+08:00,2023-03-01 08:26:00+08:00,2023-03-01 08:36:00+08:00,600,0\n\
        dlc106x,uC3,1,2,16,SFT,COMPLETED,2023-03-01 00:30:00+00:00,2023-03-01 00:30:00+00:00,2023-03-01 00:45:00+00:00,900,0\n\
        dlc107x,uA1,1,8,64,Pretrain,TIMEOUT,2023-02-28 19:45:00-05:00,2023-02-28 19:45:00-05:00,2023-02-28 21:45:00-05:00,7200,0\n";
    for format in [None, Some(TraceFormat::Acme)] {
        let t = parse(text, format).unwrap();
        assert_eq!(t.format, Some(TraceFormat::Acme));
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        let jobs: Vec<(u64, &str, u64, u64, u32)> = t
            .jobs
            .iter()
            .map(|j| (j.id, j.team.as_str(), j.submit, j.duration, j.gpus))
            .collect();
        // 00:30 at +00:00 is 08:30 at +08:00; 19:45 (the day before)
        // at -05:00 is 00:45 UTC, 08:45 at +08:00.
        assert_eq!(
            jobs,
            [
                (101, "ua1", 0, 3600, 8),
                (102, "ub2", 600, 1800, 16),
                (103, "ua1", 1200, 120, 1),
                (106, "uc3", 1800, 900, 2),
                (107, "ua1", 2700, 7200, 8),
            ]
        );
        // 2023-03-01 08:00:00+08:00 is 2023-03-01 00:00:00 UTC.
        assert_eq!(t.origin, 1_677_628_800);
        assert_eq!(
            t.skipped,
            [("no GPUs".to_string(), 1), ("zero runtime".to_string(), 1)]
        );
    }
    // Named `helios`, the Acme header lacks `vc`.
    let e = parse(text, Some(TraceFormat::Helios)).unwrap_err();
    assert_eq!(e.to_string(), "the Helios header lacks column `vc`");
}

#[test]
fn utc_offsets_are_honoured_and_never_mixed_with_civil_times() {
    let noon = parse_datetime("2023-03-01 12:00:00").unwrap();
    for (text, want) in [
        ("2023-03-01 12:00:00+08:00", noon - 8 * 3600),
        ("2023-03-01T12:00:00+0800", noon - 8 * 3600),
        ("2023-03-01 12:00:00+08", noon - 8 * 3600),
        ("2023-03-01 12:00:00-05:30", noon + 5 * 3600 + 1800),
        ("2023-03-01T12:00:00Z", noon),
        ("2023-03-01 12:00:30", noon + 30),
    ] {
        assert_eq!(parse_datetime(text), Some(want), "{text}");
    }
    for bad in [
        "2023-03-01 12:00:00+8:0",
        "2023-03-01 12:00:00+24:00",
        "2023-03-01 12:00:00+ab:cd",
        "2023-03-01 12:00:0x",
        // Regression (fuzz target `trace`): a four-byte offset holding a
        // multi-byte character was split inside it.
        "2017-10-16 17:30:0-1\u{FFFD}",
    ] {
        assert_eq!(parse_datetime(bad), None, "{bad}");
    }
    let t = parse(
        "submit,duration,gpus,team\n2023-03-01 12:00:00+08:00,60,1,a\nbad+08:00,60,1,a\n",
        None,
    )
    .unwrap();
    assert!(
        t.errors[0].to_string().contains("UTC offset (+08:00)"),
        "{}",
        t.errors[0]
    );
    let e = parse(
        "submit,duration,gpus,team\n2023-03-01 12:00:00+08:00,60,1,a\n2023-03-01 12:00:00,60,1,a\n",
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("line 3 gives a date-time but line 2 gave a date-time with a UTC offset"),
        "{e}"
    );
}

#[test]
fn team_names_are_lower_cased_in_every_format() {
    // Slurm stores account names lower-cased; public traces use mixed case.
    let teams = |text: &str| -> Vec<String> {
        parse(text, None)
            .unwrap()
            .jobs
            .into_iter()
            .map(|j| j.team)
            .collect()
    };
    assert_eq!(
        teams("submit,duration,gpus,team\n0,10,1,NLP\n1,10,1,Vision-A\n"),
        ["nlp", "vision-a"]
    );
    assert_eq!(
        teams("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 06:13:03,60,1,60,6214E9\n"),
        ["6214e9"]
    );
    assert_eq!(
        teams("job_id,user,vc,gpu_num,submit_time,duration\n1,u,vcAB,1,0,60\n2,u,vcCd,1,5,60\n"),
        ["vcab", "vccd"]
    );
    let t = parse(
        "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n\
         p-1,1,1000,Burstable,0,100,0\n",
        None,
    )
    .unwrap();
    assert_eq!(t.jobs[0].team, "burstable");
    assert!(
        t.classes_only,
        "the Alibaba pod list has classes, not tenants"
    );
}

#[test]
fn quoted_fields() {
    assert_eq!(
        split_fields(r#"a,"b,c","d""e""#, ','),
        vec!["a", "b,c", "d\"e"]
    );
}
