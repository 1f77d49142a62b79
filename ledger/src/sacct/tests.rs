//! Tests of the sacct row parser: layouts, ids, times, what it refuses.

use super::*;

fn utc() -> jiff::tz::TimeZone {
    jiff::tz::TimeZone::UTC
}

const HEADER: &str =
    "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment";

fn parse(line: &str) -> Result<RowOutcome, RowError> {
    Parser::from_header_line(HEADER, utc()).unwrap().parse(line)
}

fn attempt(line: &str) -> Attempt {
    match parse(line).unwrap() {
        RowOutcome::Attempt(a) => *a,
        o => panic!("{o:?}: {line}"),
    }
}

#[test]
fn elapsed_formats() {
    assert_eq!(parse_elapsed("1-12:30:45"), Ok(Some(131_445)));
    assert_eq!(parse_elapsed("45:30"), Ok(Some(2730)));
    assert_eq!(parse_elapsed("35-00:00:00"), Ok(Some(35 * 86_400)));
    assert_eq!(parse_elapsed("00:00:00"), Ok(Some(0)));
    assert_eq!(parse_elapsed("Unknown"), Ok(None));
    assert!(parse_elapsed("INVALID").is_err());
    assert!(
        parse_elapsed("10").is_err(),
        "sacct never prints bare minutes"
    );
}

#[test]
fn time_limits_raw_and_formatted() {
    assert_eq!(parse_time_limit("30", true), Ok(Some(1800)));
    assert_eq!(parse_time_limit("00:30:00", false), Ok(Some(1800)));
    assert_eq!(parse_time_limit("1-00:00:00", false), Ok(Some(86_400)));
    for none in ["UNLIMITED", "Partition_Limit", "", "Unknown"] {
        assert_eq!(parse_time_limit(none, true), Ok(None), "{none:?}");
        assert_eq!(parse_time_limit(none, false), Ok(None), "{none:?}");
    }
    assert!(parse_time_limit("00:30:00", true).is_err());
    // Either column of a dump; TimelimitRaw wins when both are there.
    let p = Parser::from_header_line(
        "JobIDRaw|Account|AllocTRES|Start|End|Timelimit|TimelimitRaw",
        utc(),
    )
    .unwrap();
    let a = match p.parse("5|a1|gres/gpu=1|100|700|00:20:00|10").unwrap() {
        RowOutcome::Attempt(a) => a,
        o => panic!("{o:?}"),
    };
    assert_eq!(a.time_limit, Some(600));
    let p =
        Parser::from_header_line("JobIDRaw|Account|AllocTRES|Start|End|Timelimit", utc()).unwrap();
    let a = match p.parse("5|a1|gres/gpu=1|100|700|00:20:00").unwrap() {
        RowOutcome::Attempt(a) => a,
        o => panic!("{o:?}"),
    };
    assert_eq!(a.time_limit, Some(1200));
    let e = p.parse("5|a1|gres/gpu=1|100|700|soon").unwrap_err();
    assert_eq!((e.field, e.value.as_str()), ("Timelimit", "soon"));
    // A dump without either: no limit known.
    assert_eq!(
        attempt("7|7|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|").time_limit,
        None
    );
}

#[test]
fn array_task_keeps_both_ids() {
    let a =
        attempt("1043074_91|1043166|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|");
    assert_eq!(a.job_id, 1_043_166);
    assert_eq!(a.label, "1043074_91");
    assert_eq!(
        a.array,
        Some(ArrayTask {
            job: 1_043_074,
            task: 91
        })
    );
    assert_eq!(a.het, None);
}

#[test]
fn pending_array_range_is_not_a_job() {
    assert_eq!(
        parse("123_[1-5%2]|123|a1|bob|gpu||100|Unknown|Unknown|00:00:00|PENDING|").unwrap(),
        RowOutcome::Skipped
    );
}

#[test]
fn job_steps_are_steps_and_garbage_is_not() {
    let p = Parser::from_header_line(HEADER, utc()).unwrap();
    for line in [
        "5101.batch|5101.batch|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|",
        "5104.0|5104.0|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|",
        "5104.extern|5104.extern|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
        "7100_3.batch|7104.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
        "93+1.0+1|94.0+1|v1|carol|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
    ] {
        assert_eq!(p.parse(line), Ok(RowOutcome::Step), "{line}");
    }
    assert!(is_step_id("5104.interactive"));
    // Garbage stays an error naming the field.
    for (line, field) in [
        (
            "5104.x|5104.x|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "JobIDRaw",
        ),
        (
            "abc.batch|abc.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "JobIDRaw",
        ),
        (
            ".batch|.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "JobIDRaw",
        ),
        (
            "5104|5104.|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "JobIDRaw",
        ),
    ] {
        assert_eq!(p.parse(line).unwrap_err().field, field, "{line}");
    }
}

#[test]
fn het_component() {
    let a = attempt("93+1|94|v1|carol|gpu|gres/gpu=4|100|110|Unknown|00:00:10|RUNNING|");
    assert_eq!(a.job_id, 94);
    assert_eq!(a.het, Some(HetComponent { job: 93, offset: 1 }));
    assert_eq!(a.end, None);
}

#[test]
fn typed_and_untyped_gpus_count_once() {
    let a = attempt("7|7|a1|alice|gpu|billing=2,cpu=2,gres/gpu:a100=2,gres/gpu=2,mem=8G,node=1|100|110|200|00:01:30|COMPLETED|");
    assert_eq!(a.gpus, 2);
    assert!(a.tres.contains(&("mem".to_string(), 8192)));
    assert!(a.tres.contains(&("gres/gpu".to_string(), 2)));
}

#[test]
fn never_started_job() {
    let a = attempt("8|8|a2|bob|gpu||100|None|Unknown|00:00:00|PENDING|");
    assert!(a.never_started());
    assert_eq!((a.start, a.end), (None, None));
    assert_eq!(a.gpus, 0);
    // Cancelled while pending: an End, but never started.
    let c = attempt("9|9|a2|bob|gpu||100|None|300|00:00:00|CANCELLED by 0|");
    assert!(c.never_started());
    assert_eq!(c.state, "CANCELLED");
}

#[test]
fn local_times_and_epochs() {
    let tz = jiff::tz::TimeZone::get("America/New_York").unwrap();
    // 2024-01-15 12:00 EST = 17:00 UTC.
    assert_eq!(
        parse_time("2024-01-15T12:00:00", &tz),
        Ok(Some(1_705_338_000))
    );
    assert_eq!(
        parse_time("2024-01-15T17:00:00", &utc()),
        Ok(Some(1_705_338_000))
    );
    assert_eq!(parse_time("1705338000", &tz), Ok(Some(1_705_338_000)));
    assert_eq!(parse_time("Unknown", &tz), Ok(None));
    assert_eq!(parse_time("None", &tz), Ok(None));
    assert!(parse_time("yesterday", &tz).is_err());
    // Fall back: 01:30 happens twice; the earlier (EDT) instant is taken.
    assert_eq!(
        parse_time("2024-11-03T01:30:00", &tz),
        Ok(Some(1_730_611_800))
    );
}

#[test]
fn header_in_any_order_and_missing_fields_named() {
    let p = Parser::from_header_line(
        "state|jobidraw|JobID|user|account|partition|alloctres|submit|start|end",
        utc(),
    )
    .unwrap();
    let RowOutcome::Attempt(a) = p
        .parse("COMPLETED|5|5|alice|a1|gpu|gres/gpu=1|1|2|3")
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (a.job_id, a.start, a.end, a.elapsed),
        (5, Some(2), Some(3), None)
    );
    let e = Parser::from_header_line("JobID|Account|User|Start", utc()).unwrap_err();
    assert_eq!(e.missing, ["AllocTRES", "End"]);
    let e = Parser::from_header_line("User|Partition|Submit|State", utc()).unwrap_err();
    assert_eq!(
        e.missing,
        [
            "JobIDRaw (or JobID)",
            "Account",
            "AllocTRES",
            "Start",
            "End"
        ]
    );
    assert!(
        e.to_string()
            .contains("lacks the field(s) JobIDRaw (or JobID), Account, AllocTRES, Start, End"),
        "{e}"
    );
}

#[test]
fn a_row_as_first_line_is_not_a_header() {
    // A dump saved with --noheader: its first line is a job's row.
    let e = Parser::from_header_line(
        "5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|",
        utc(),
    )
    .unwrap_err();
    assert_eq!(
        e.not_a_header.as_deref(),
        Some("5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|")
    );
    let m = e.to_string();
    assert!(
        m.contains("is not a sacct --parsable2 header")
            && m.contains("the first line must be the header")
            && m.contains("sacct -a -X -D --parsable2 -S 2024-01-01 -E now -o JobID,JobIDRaw,"),
        "{m}"
    );
    assert!(!m.contains("lacks"), "{m}");
    // A long one is cut.
    let long = "9|".repeat(100);
    let e = Parser::from_header_line(&long, utc()).unwrap_err();
    assert!(e.not_a_header.unwrap().ends_with("..."));
    // A header with some known fields still says which are missing.
    let e = Parser::from_header_line("JobID|Account|User|Start", utc()).unwrap_err();
    assert_eq!(e.not_a_header, None);
}

#[test]
fn monitoring_dumps_without_jobid_and_submit() {
    // What monitoring tools save: JobIDRaw, no JobID, no Submit, epoch times.
    let p = Parser::from_header_line(
        "JobIDRaw|Start|End|Cluster|AllocTRES|AdminComment|User|Account|State|NNodes|NCPUS|ReqMem|QOS|Partition|TimelimitRaw|JobName",
        utc(),
    )
    .unwrap();
    assert!(p.keyed_by_start());
    assert!(p
        .layout_note()
        .unwrap()
        .contains("told apart by their Start"));
    let a = |line: &str| match p.parse(line).unwrap() {
        RowOutcome::Attempt(a) => *a,
        o => panic!("{o:?}"),
    };
    let first = a("5200|1700000100|1700003700|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|REQUEUED|1|4|16G|normal|gpu|60|train");
    let second = a("5200|1700003760|1700007360|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|COMPLETED|1|4|16G|normal|gpu|60|train");
    assert_eq!(
        (
            first.job_id,
            first.label.as_str(),
            first.submit,
            first.start,
            first.end
        ),
        (
            5200,
            "5200",
            1_700_000_100,
            Some(1_700_000_100),
            Some(1_700_003_700)
        )
    );
    assert_eq!(
        (second.submit, second.gpus, second.min_runtime),
        (1_700_003_760, 2, Some(600))
    );
    assert_eq!(
        (
            first.account.as_str(),
            first.user.as_str(),
            first.state.as_str()
        ),
        ("a1", "alice", "REQUEUED")
    );
    // Never started, no Submit: nothing to charge, nothing to key by.
    assert_eq!(
        p.parse("5201|Unknown|Unknown|c|||bob|a1|PENDING|1|4|16G|normal|gpu|60|x"),
        Ok(RowOutcome::Skipped)
    );
    // Only what charging needs: JobID for the number, no User or State.
    let p = Parser::from_header_line("JobID|Account|AllocTRES|Start|End", utc()).unwrap();
    assert!(p.layout_note().unwrap().contains("no User"));
    let RowOutcome::Attempt(b) = p.parse("77|b2|gres/gpu=1|100|200").unwrap() else {
        panic!()
    };
    assert_eq!(
        (
            b.job_id,
            b.submit,
            b.user.as_str(),
            b.state.as_str(),
            b.partition
        ),
        (77, 100, "", "UNKNOWN", None)
    );
    // Without JobIDRaw an array task has no job number of its own.
    let e = p.parse("7100_3|b2|gres/gpu=1|100|200").unwrap_err();
    assert_eq!((e.job_id.as_str(), e.field), ("7100_3", "JobID"));
    assert!(e.reason.contains("add JobIDRaw"), "{e}");
}

#[test]
fn bad_rows_name_job_and_field() {
    let e = parse("12|12|a1|alice|gpu|gres/gpu=x|100|110|200|00:01:30|COMPLETED|").unwrap_err();
    assert_eq!((e.job_id.as_str(), e.field), ("12", "AllocTRES"));
    let e = parse("13|13|a1|alice|gpu|gres/gpu=1|100|noon|200|00:01:30|COMPLETED|").unwrap_err();
    assert_eq!((e.job_id.as_str(), e.field), ("13", "Start"));
    assert!(parse("14|14|a1")
        .unwrap_err()
        .to_string()
        .contains("job 14"));
    let e = parse("15|15||alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|").unwrap_err();
    assert_eq!(e.field, "Account");
}

#[test]
fn impossible_times_are_refused_not_charged() {
    // End before Start.
    let e = parse("16|16|a1|alice|gpu|gres/gpu=1|100|7200|3600|00:00:00|COMPLETED|").unwrap_err();
    assert_eq!((e.job_id.as_str(), e.field), ("16", "End"));
    assert!(e.reason.contains("before Start (7200)"), "{e}");
    assert!(
        !e.reason.contains("daylight saving"),
        "epochs: no DST hint: {e}"
    );
    // Local times (no offset): the hour DST's end repeats is named.
    let e = parse("16|16|a1|alice|gpu|gres/gpu=1|2026-10-25T02:00:00|2026-10-25T02:30:00|2026-10-25T02:10:00|00:00:00|COMPLETED|").unwrap_err();
    assert!(e.reason.contains("end of daylight saving time"), "{e}");
    assert!(fields::is_local_time("2026-10-25T02:10:00"));
    for t in [
        "1796000000",
        "2026-10-25T02:10:00+0100",
        "2026-10-25T02:10:00-05:00",
        "2026-10-25T02:10:00Z",
        "Unknown",
    ] {
        assert!(!fields::is_local_time(t), "{t}");
    }
    // A far-future epoch: refused before any hourly bucket is made
    // (found by a newcomer: one such row made `sync --from` use 24 GiB).
    let e = parse(
        "17|17|a2|bob|gpu|gres/gpu=1|9999999999999|9999999999999|99999999999999|01:00:00|COMPLETED|",
    )
    .unwrap_err();
    assert_eq!(e.field, "Submit");
    assert!(e.reason.contains("not a plausible time"), "{e}");
    // Plausible times, but a 6-year attempt.
    let six_years = 6 * 365 * 86_400;
    let e = parse(&format!(
        "18|18|a2|bob|gpu|gres/gpu=1|1000|1000|{}|01:00:00|COMPLETED|",
        1000 + six_years
    ))
    .unwrap_err();
    assert!(e.reason.contains("more than 5 years"), "{e}");
    // The boundary: exactly 5 years is an attempt.
    assert!(parse(&format!(
        "19|19|a2|bob|gpu|gres/gpu=1|1000|1000|{}|01:00:00|COMPLETED|",
        1000 + MAX_PLAUSIBLE_RUN_SECS as i64
    ))
    .is_ok());
}

#[test]
fn multibyte_alloc_tres_count_is_not_a_crash() {
    // Regression (fuzz target `sacct`): a TRES count ending in a
    // multi-byte character made `fairshare::tres::counts` slice inside it
    // and panic, killing `allot sync --from`.
    let a = attempt("17|17|a1|alice|gpu|gres/gpu=1,mem=7\u{e9}|100|110|200|00:01:30|COMPLETED|");
    assert_eq!(a.gpus, 1);
    assert!(!a.tres.iter().any(|(n, _)| n == "mem"));
}

#[test]
fn admin_comment_token() {
    // What the record parser accepts and refuses: fairshare::record.
    let min = |admin: &str| {
        attempt(&format!(
            "16|16|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|{admin}"
        ))
        .min_runtime
    };
    assert_eq!(min("allot:min_runtime=1:30:00;y"), Some(5400));
    assert_eq!(
        min("min_runtime=90"),
        None,
        "the user's --comment key is not a record"
    );
    assert_eq!(min("allot:min_runtime=soon"), None);
    // A '|' inside the last field (AdminComment) is kept in it.
    let a = attempt(
        "16|16|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|a|b allot:min_runtime=600",
    );
    assert_eq!(a.min_runtime, Some(600));
}

/// `sacct -M all` adds a `Cluster` column; job ids are per cluster.
const TWO_CLUSTERS: &str = "Cluster|JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment
alpha|700|700|a1|alice|gpu|gres/gpu=2|1700000000|1700000000|1700003600|01:00:00|COMPLETED|
alpha|701|701|a1|alice|gpu|gres/gpu=4|1700000000|1700000000|1700003600|01:00:00|COMPLETED|
beta|700|700|b1|bob|gpu|gres/gpu=1|1700000000|1700000000|1700003600|01:00:00|COMPLETED|
beta|701|701|b1|bob|gpu|gres/gpu=4|1700000000|1700000000|1700003600|01:00:00|COMPLETED|
beta|702|702|b1|bob|gpu|gres/gpu=4|1700000000|1700000000|1700003600|01:00:00|COMPLETED|
";

#[test]
fn a_dump_of_several_clusters_is_refused_naming_them() {
    let mut lines = TWO_CLUSTERS.lines();
    let p = Parser::from_header_line(lines.next().unwrap(), utc()).unwrap();
    assert!(p.has_cluster());
    let e = one_cluster(&p, lines).unwrap_err();
    assert_eq!(
        e.clusters,
        vec![("alpha".to_string(), 2), ("beta".to_string(), 3)]
    );
    let m = e.to_string();
    assert!(
        m.contains("2 clusters: alpha (2 rows), beta (3 rows)")
            && m.contains("sacct -M <cluster>")
            && m.contains("nothing was read"),
        "{m}"
    );
}

#[test]
fn a_dump_of_one_cluster_or_without_the_column_is_fine() {
    let mut lines = TWO_CLUSTERS.lines();
    let header = lines.next().unwrap();
    let p = Parser::from_header_line(header, utc()).unwrap();
    let alpha: Vec<&str> = lines.filter(|l| l.starts_with("alpha|")).collect();
    assert_eq!(
        one_cluster(&p, alpha.iter().copied()),
        Ok(Some("alpha".into()))
    );
    // Empty or placeholder clusters are not a second cluster.
    assert_eq!(
        one_cluster(&p, ["|9|9|a|u|gpu||1|1|1|00:00:00|COMPLETED|", "alpha|x"]),
        Ok(Some("alpha".into()))
    );
    // No Cluster column: nothing to check.
    let p = Parser::live(utc());
    assert!(!p.has_cluster());
    assert_eq!(
        one_cluster(&p, ["700|700|a|u|gpu||1|1|1|00:00:00|COMPLETED|"]),
        Ok(None)
    );
}

#[test]
fn utc_offsets_are_honoured_and_the_zone_applies_only_without_one() {
    let paris = jiff::tz::TimeZone::get("Europe/Paris").unwrap();
    // 2026-01-10T00:00:00Z: 20463 days after 1970-01-01 (56 years with 14
    // leap days, 1972..2024: 56*365 + 14 = 20454, then 9 days of January)
    // x 86400 = 1_768_003_200. 23:30 is + 84_600 = 1_768_087_800 (UTC).
    let utc_2330 = 1_768_087_800;
    // +0100 (sacct's %z): 23:30 at UTC+1 is 22:30 UTC = 23:30 UTC - 3600.
    assert_eq!(
        parse_time("2026-01-10T23:30:00+0100", &paris),
        Ok(Some(utc_2330 - 3600))
    );
    // -05:00: 23:30 at UTC-5 is 04:30 UTC on the 11th = 23:30 UTC + 18000.
    assert_eq!(
        parse_time("2026-01-10T23:30:00-05:00", &paris),
        Ok(Some(utc_2330 + 18_000))
    );
    // The offset wins over --timezone whatever the zone.
    assert_eq!(
        parse_time("2026-01-10T23:30:00-05:00", &utc()),
        Ok(Some(utc_2330 + 18_000))
    );
    // Z is UTC: 1_768_087_800; z and +01 (hours only) too.
    assert_eq!(
        parse_time("2026-01-10T23:30:00Z", &paris),
        Ok(Some(utc_2330))
    );
    assert_eq!(
        parse_time("2026-01-10T23:30:00z", &paris),
        Ok(Some(utc_2330))
    );
    assert_eq!(
        parse_time("2026-01-10T23:30:00+01", &utc()),
        Ok(Some(utc_2330 - 3600))
    );
    // No offset: local time of --timezone. Paris is UTC+1 in January, so
    // 23:30 there is 22:30 UTC = utc_2330 - 3600; in UTC, utc_2330.
    assert_eq!(
        parse_time("2026-01-10T23:30:00", &paris),
        Ok(Some(utc_2330 - 3600))
    );
    assert_eq!(
        parse_time("2026-01-10T23:30:00", &utc()),
        Ok(Some(utc_2330))
    );
    // An offset that is not one is refused, not dropped.
    for bad in [
        "2026-01-10T23:30:00+1",
        "2026-01-10T23:30:00+01:0",
        "2026-01-10T23:30:00 +0100x",
        "2026-01-10T23:30:00+99:00",
    ] {
        assert!(parse_time(bad, &paris).is_err(), "{bad}");
    }
}

#[test]
fn rows_with_offsets_charge_the_right_instants() {
    let p = Parser::from_header_line(
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment",
        jiff::tz::TimeZone::get("Asia/Tokyo").unwrap(),
    )
    .unwrap();
    let row = |submit: &str, start: &str, end: &str| match p
        .parse(&format!(
            "1|1|a1|u|gpu|gres/gpu=1|{submit}|{start}|{end}|01:00:00|COMPLETED|"
        ))
        .unwrap()
    {
        RowOutcome::Attempt(a) => (a.submit, a.start.unwrap(), a.end.unwrap()),
        o => panic!("{o:?}"),
    };
    // Submit 23:00+0100 = 22:00Z = 1_768_087_800 - 5400 = 1_768_082_400;
    // start 23:30+0100 = 22:30Z = 1_768_084_200; end 18:30-05:00 = 23:30Z
    // = 1_768_087_800: one hour of run, across two offsets (read as Tokyo
    // local times, End would fall before Start).
    assert_eq!(
        row(
            "2026-01-10T23:00:00+0100",
            "2026-01-10T23:30:00+0100",
            "2026-01-10T18:30:00-05:00"
        ),
        (1_768_082_400, 1_768_084_200, 1_768_087_800)
    );
    // Z rows: the same instants, the Tokyo zone unused.
    assert_eq!(
        row(
            "2026-01-10T22:00:00Z",
            "2026-01-10T22:30:00Z",
            "2026-01-10T23:30:00Z"
        ),
        (1_768_082_400, 1_768_084_200, 1_768_087_800)
    );
    // No offset: Tokyo (UTC+9), so 07:30 on the 11th there is 22:30Z.
    assert_eq!(
        row(
            "2026-01-11T07:00:00",
            "2026-01-11T07:30:00",
            "2026-01-11T08:30:00"
        ),
        (1_768_082_400, 1_768_084_200, 1_768_087_800)
    );
}

#[test]
fn ended_states_are_the_nine_after_the_open_ones() {
    assert_eq!(ENDED_STATES.first(), Some(&"COMPLETED"));
    assert_eq!(ENDED_STATES.last(), Some(&"OUT_OF_MEMORY"));
    assert!(!ENDED_STATES.contains(&"RUNNING") && ENDED_STATES.contains(&"NODE_FAIL"));
}
