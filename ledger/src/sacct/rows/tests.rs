//! Free text in dumps: `|`, newlines and bytes that are not UTF-8, each
//! from a small dump of our own (issue 53, items 3 and 4).

use super::super::{Attempt, Parser, RowOutcome};
use super::*;

fn parser(header: &str) -> Parser {
    Parser::from_header_line(header, jiff::tz::TimeZone::UTC).unwrap()
}

fn rows(p: &Parser, dump: &[u8]) -> Vec<DumpRow> {
    p.rows(dump, 2).collect::<std::io::Result<_>>().unwrap()
}

fn attempt(p: &Parser, row: &DumpRow) -> Attempt {
    match p.parse_row(row) {
        Ok(RowOutcome::Attempt(a)) => *a,
        o => panic!("{o:?}: {row:?}"),
    }
}

const NAMED: &str = "JobID|JobIDRaw|JobName|Account|AllocTRES|Start|End|State|AdminComment";

#[test]
fn a_bar_in_the_only_free_text_is_given_back_to_it() {
    let p = parser("JobID|JobIDRaw|JobName|Account|AllocTRES|Start|End");
    let a = match p.parse("5|5|sweep|lr=0.1|b1|gres/gpu=2|100|3700").unwrap() {
        RowOutcome::Attempt(a) => a,
        o => panic!("{o:?}"),
    };
    assert_eq!((a.account.as_str(), a.gpus, a.end), ("b1", 2, Some(3700)));
    // Three bars.
    assert!(p.parse("5|5|a|b|c|d|b1|gres/gpu=2|100|3700").is_ok());
}

#[test]
fn a_bar_in_a_job_name_leaves_the_admin_comment_whole() {
    let p = parser(NAMED);
    let r = &rows(
        &p,
        b"5|5|a|b|b1|gres/gpu=2|100|3700|COMPLETED|allot:min_runtime=600\n",
    )[0];
    let a = attempt(&p, r);
    assert_eq!((a.account.as_str(), a.min_runtime), ("b1", Some(600)));
    // An admin's `|` in AdminComment: no reading with the job name taking
    // it reads as a job, the next rank does.
    let r = &rows(
        &p,
        b"6|6|train|b1|gres/gpu=4|100|3700|COMPLETED|note a|b allot:min_runtime=1200\n",
    )[0];
    let a = attempt(&p, r);
    assert_eq!((a.gpus, a.min_runtime), (4, Some(1200)));
}

#[test]
fn readings_that_differ_are_refused_naming_the_fix() {
    // JobName and Comment around Account: `x|b2` may be the name's tail
    // (Account b2) or Account x and a Comment of `b2|...`.
    let p = parser("JobIDRaw|JobName|Account|Comment|AllocTRES|Start|End");
    let e = p.parse("7|n|x|b2|c|gres/gpu=1|100|200").unwrap_err();
    assert_eq!(e.field, "(row)");
    assert!(
        e.reason.contains("more than one way") && e.reason.contains("with them last"),
        "{e}"
    );
    // No reading at all: a shift puts text in AllocTRES.
    let p = parser(NAMED);
    let e = p.parse("8|8|a|b|b1|gres/gpu=2|x|y|COMPLETED|").unwrap_err();
    assert!(e.reason.contains("no way of placing them"), "{e}");
}

#[test]
fn more_fields_without_free_text_is_a_corrupt_row() {
    let p = parser("JobIDRaw|Account|AllocTRES|Start|End");
    let e = p.parse("9|b1|gres/gpu=1|100|200|extra").unwrap_err();
    assert!(e.reason.contains("corrupt"), "{e}");
    // Its GPU-seconds cannot be placed; a row with the header's fields but
    // a bad state still says what it held.
    assert_eq!(p.held_gpu_seconds("9|b1|gres/gpu=1|100|200|extra"), None);
    assert_eq!(p.held_gpu_seconds("9|b1|gres/gpu=3|100|200"), Some(300));
}

#[test]
fn a_newline_in_a_job_name_is_joined_back() {
    let p = parser(NAMED);
    let dump = b"10|10|eval\nstep 2|b1|gres/gpu=8|0|36000|COMPLETED|\n11|11|ok|b2|gres/gpu=1|0|3600|COMPLETED|\n";
    let r = rows(&p, dump);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].line, r[0].lines, r[1].line), (2, 2, 4));
    let a = attempt(&p, &r[0]);
    assert_eq!((a.job_id, a.account.as_str(), a.gpus), (10, "b1", 8));
    assert_eq!(attempt(&p, &r[1]).job_id, 11);
    // Two newlines, and a blank line inside the name.
    let r = rows(&p, b"12|12|a\n\nb|b1|gres/gpu=1|0|60|COMPLETED|\n");
    assert_eq!((r.len(), r[0].lines), (1, 3));
    assert_eq!(attempt(&p, &r[0]).job_id, 12);
}

#[test]
fn a_line_cut_short_never_swallows_the_next_row() {
    let p = parser(NAMED);
    // A dump cut inside job 13's name, then whole rows: 13 stays alone
    // (unreadable, named by its line) and 14 and 15 are read.
    let dump = b"13|13|trunc\n14|14|a|b1|gres/gpu=1|0|60|COMPLETED|\n15|15|b|b1|gres/gpu=1|0|60|COMPLETED|\n";
    let r = rows(&p, dump);
    assert_eq!(r.iter().map(|r| r.line).collect::<Vec<_>>(), vec![2, 3, 4]);
    let e = p.parse_row(&r[0]).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(
        e.to_string().contains("at line 2") && e.reason.contains("3 fields"),
        "{e}"
    );
    assert_eq!(attempt(&p, &r[1]).job_id, 14);
    assert_eq!(attempt(&p, &r[2]).job_id, 15);
    // Pieces that never make a row: each line stays its own.
    let r = rows(&p, b"16|16|x\ny\n");
    assert_eq!(r.len(), 2);
    // At most MAX_JOINED_LINES lines make one row.
    let mut long = b"17|17|n".to_vec();
    for _ in 0..MAX_JOINED_LINES {
        long.extend_from_slice(b"\nmore");
    }
    long.extend_from_slice(b"|b1|gres/gpu=1|0|60|COMPLETED|\n");
    assert!(rows(&p, &long).len() > 1);
}

#[test]
fn bytes_that_are_not_utf8_stop_nothing_but_a_field_allot_reads() {
    let p = parser(NAMED);
    let r = rows(
        &p,
        b"20|20|caf\xe9 \xff|b1|gres/gpu=2|0|3600|COMPLETED|allot:min_runtime=60 \xfe\n",
    );
    assert!(r[0].not_utf8);
    let a = attempt(&p, &r[0]);
    assert_eq!((a.gpus, a.min_runtime), (2, Some(60)));
    // In Account: the row is named by line and field, and what it held is
    // still counted.
    let r = rows(&p, b"21|21|x|b\xe91|gres/gpu=2|0|3600|COMPLETED|\n");
    let e = p.parse_row(&r[0]).unwrap_err();
    assert_eq!((e.field, e.line), ("Account", Some(2)));
    assert!(e.reason.contains("not UTF-8"), "{e}");
    assert_eq!(p.held_gpu_seconds(&r[0].text), Some(7200));
    // Valid UTF-8 in a name is not "not UTF-8".
    let r = rows(&p, "22|22|café|b1|gres/gpu=1|0|60|COMPLETED|\n".as_bytes());
    assert!(!r[0].not_utf8);
}

#[test]
fn compositions_count_every_placement() {
    assert_eq!(compositions(1, 2, 64), Some(vec![vec![1, 0], vec![0, 1]]));
    assert_eq!(compositions(2, 3, 64).map(|c| c.len()), Some(6));
    assert_eq!(compositions(3, 1, 64), Some(vec![vec![3]]));
    assert_eq!(compositions(20, 4, 64), None);
}

#[test]
fn carriage_returns_and_blank_lines_are_not_rows() {
    let p = parser(NAMED);
    let r = rows(&p, b"\r\n30|30|a|b1|gres/gpu=1|0|60|COMPLETED|\r\n\n");
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].line, attempt(&p, &r[0]).account.as_str()), (3, "b1"));
}

#[test]
fn a_newline_in_a_job_name_of_the_first_column_is_joined_back() {
    let p = parser("JobName|JobIDRaw|Account|AllocTRES|Start|End");
    let r = rows(
        &p,
        b"eval\nstep 2|10|b1|gres/gpu=8|0|36000\nok|11|b1|gres/gpu=1|0|60\n",
    );
    assert_eq!(
        r.iter().map(|r| (r.line, r.lines)).collect::<Vec<_>>(),
        [(2, 2), (4, 1)]
    );
    assert_eq!(attempt(&p, &r[0]).gpus, 8);
    assert_eq!(attempt(&p, &r[1]).job_id, 11);
}
