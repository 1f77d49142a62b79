//! The rows of a `--parsable2` dump: bytes to rows, and a row's fields to
//! their columns when free text holds a `|` or a newline.
//!
//! sacct prints free text ([`FREE_TEXT_FIELDS`]: `JobName`, `Comment`,
//! `AdminComment`, `WorkDir`, `SubmitLine`, `Constraints`, ...) as it was
//! typed: with `--parsable2` a `|` inside it adds a field, a newline cuts
//! the row in two, and its bytes need not be UTF-8. Rules:
//! - **Bytes.** A line is read as bytes. One that is not UTF-8 is decoded
//!   with U+FFFD for each bad sequence ([`DumpRow::not_utf8`]). A field allot
//!   reads that holds such bytes makes the row unreadable, named by line and
//!   field ([`Parser::parse_row`]); in a field allot does not read (and in
//!   `AdminComment`, whose token is ASCII) they are left alone: they never
//!   stop an import.
//! - **A `|` in free text.** A row with k fields more than the header is
//!   read in every way of giving the k extra `|` back to the header's
//!   free-text columns ([`Parser::readings`], at most [`MAX_READINGS`]).
//!   Ways that leave admin-written text ([`ADMIN_TEXT_FIELDS`]) whole are
//!   tried first; the row is what the ways of the first rank that reads as
//!   a job agree on (a shifted row puts text where `AllocTRES` or a time
//!   is, and does not read). When two ways of that rank read as different
//!   jobs (a field allot reads between two free-text columns), or none
//!   reads, the row is unreadable and the message says the fix (save the
//!   dump without free-text fields, or with them last).
//! - **A newline in free text.** A line with fewer fields than the header,
//!   whose last field is a free-text column, is joined with the lines that
//!   follow until the row has the header's fields. Only lines that are not
//!   whole rows themselves (fewer fields than the header) are taken, at most
//!   [`MAX_JOINED_LINES`], except after a line that holds only the first
//!   column, free text (a dump with `JobName` first): the line after it
//!   completes the row exactly and is taken, since nothing allot reads
//!   comes before the cut. When the join never completes, each line stays a
//!   row of its own (each unreadable, named by its line).
//! - **What an unreadable row held.** [`Parser::held_gpu_seconds`] reads the
//!   GPUs, start and end of a row that could not be read, where they can
//!   still be placed, so an import that leaves rows out says how many
//!   GPU-hours they held.
//!
//! Line numbers are those of the file: the header is line 1.

use std::collections::VecDeque;
use std::io::BufRead;

use super::{parse_time, Parser, RowError};

/// Columns sacct fills with text a user or an admin typed, which may hold
/// `|`, newlines and bytes that are not UTF-8 (case-insensitive names).
/// `Constraints` is here because a feature expression uses `|` for "or".
pub const FREE_TEXT_FIELDS: &[&str] = &[
    "JobName",
    "Comment",
    "AdminComment",
    "SystemComment",
    "WorkDir",
    "SubmitLine",
    "StdIn",
    "StdOut",
    "StdErr",
    "Constraints",
    "Extra",
    "Container",
    "WCKey",
];

/// Free-text columns written by allot or an admin, not by the job's user
/// (`job_submit/allot` writes its contract token into `AdminComment`): a
/// reading that leaves them whole is preferred.
pub const ADMIN_TEXT_FIELDS: &[&str] = &["AdminComment", "SystemComment"];

/// The most ways one row's extra `|` are placed ([`Parser::readings`]).
pub const MAX_READINGS: usize = 64;

/// One way to read a row: a field per header column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reading<'a> {
    /// Extra `|` it gives to admin-written text (preferred: 0).
    pub admin_extra: usize,
    /// The fields, one per header column.
    pub fields: Vec<&'a str>,
}

/// The most physical lines one row is joined from (a job name with more
/// newlines than this is left unread, named).
pub const MAX_JOINED_LINES: usize = 16;

/// One row of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpRow {
    /// Its first line in the file (the header is line 1).
    pub line: u64,
    /// How many lines it was joined from (1 unless free text held a
    /// newline).
    pub lines: u64,
    /// Its text, the lines joined with `\n`, without the trailing newline
    /// or carriage return.
    pub text: String,
    /// True when its bytes were not all UTF-8 (each bad sequence is
    /// U+FFFD in `text`).
    pub not_utf8: bool,
}

/// The rows of a dump read from `input` ([`Parser::rows`]): an iterator of
/// `io::Result<DumpRow>` that skips blank lines.
pub struct DumpRows<'p, R> {
    parser: &'p Parser,
    input: R,
    /// The number of the next line read from `input`.
    next_line: u64,
    /// Lines read ahead by a join that did not complete: (line number,
    /// text, not UTF-8).
    pending: VecDeque<(u64, String, bool)>,
    done: bool,
}

impl Parser {
    /// The rows of `input`, whose first line is line `first_line` of the
    /// file (2 when the header was read from it).
    pub fn rows<R: BufRead>(&self, input: R, first_line: u64) -> DumpRows<'_, R> {
        DumpRows {
            parser: self,
            input,
            next_line: first_line,
            pending: VecDeque::new(),
            done: false,
        }
    }

    /// [`Parser::parse`] of one row read by [`Parser::rows`]: the error
    /// names its line, and a field allot reads that held bytes that are not
    /// UTF-8 is an error naming that field.
    ///
    /// # Errors
    /// [`RowError`] with `line` set.
    pub fn parse_row(&self, row: &DumpRow) -> Result<super::RowOutcome, RowError> {
        self.parse_text(&row.text, row.not_utf8).map_err(|mut e| {
            e.line = Some(row.line);
            e
        })
    }

    /// Each column allot reads, with its name: the columns whose text must
    /// be UTF-8.
    pub(super) fn read_columns(&self) -> Vec<(usize, &'static str)> {
        let mut cols = vec![
            (self.job_id, "JobID"),
            (self.job_id_raw, "JobIDRaw"),
            (self.account, "Account"),
            (self.alloc_tres, "AllocTRES"),
            (self.start, "Start"),
            (self.end, "End"),
        ];
        for (i, name) in [
            (self.user, "User"),
            (self.partition, "Partition"),
            (self.submit, "Submit"),
            (self.state, "State"),
            (self.elapsed, "Elapsed"),
            (self.time_limit.map(|t| t.0), "TimelimitRaw"),
            (self.admin_comment, "AdminComment"),
            (self.cluster, "Cluster"),
        ] {
            if let Some(i) = i {
                cols.push((i, name));
            }
        }
        cols
    }

    /// The ways to read one row (no trailing newline) as one field per
    /// header column, in order of preference (module docs): one when it
    /// has the header's fields; with k more, each way of giving the k extra
    /// `|` back to the free-text columns, those that leave admin-written
    /// text ([`ADMIN_TEXT_FIELDS`]) whole first.
    ///
    /// # Errors
    /// A row with fewer fields than the header; with more, a header
    /// without free text or more than [`MAX_READINGS`] ways.
    pub(super) fn readings<'a>(&self, line: &'a str) -> Result<Vec<Reading<'a>>, RowError> {
        let spans = field_spans(line);
        let (n, w) = (spans.len(), self.width);
        if n == w {
            return Ok(vec![Reading {
                admin_extra: 0,
                fields: spans.iter().map(|s| &line[s.0..s.1]).collect(),
            }]);
        }
        // The JobID, where it stands before any free text (and the cut).
        let placed = self.free_text.first().is_none_or(|(c, _)| self.job_id < *c)
            && (n >= w || self.job_id + 1 < n);
        let label = if placed {
            line[spans[self.job_id].0..spans[self.job_id].1].trim()
        } else {
            "?"
        }
        .to_string();
        let err = |reason: String| row_error(&label, line, reason);
        let free = self.free_text_names();
        if n < w {
            let cut = if free.is_empty() {
                String::new()
            } else {
                format!(
                    " (a newline inside free text ({}) that could not be joined back cuts a row in two; {})",
                    free.join(", "),
                    free_text_fix()
                )
            };
            return Err(err(format!("{n} fields, the header has {w}{cut}")));
        }
        if free.is_empty() {
            return Err(err(format!(
                "{n} fields, more than the header's {w}, and the header has no free-text field that could hold a `|`; the row is corrupt"
            )));
        }
        let k = n - w;
        let ways = compositions(k, self.free_text.len(), MAX_READINGS).ok_or_else(|| {
            err(format!(
                "{k} `|` more than the header's {w} fields, in the free-text fields {}: more than {MAX_READINGS} ways to place them; {}",
                free.join(", "),
                free_text_fix()
            ))
        })?;
        let mut readings: Vec<Reading<'a>> = ways
            .into_iter()
            .map(|extra| {
                let mut fields = Vec::with_capacity(w);
                let mut admin_extra = 0;
                let mut p = 0;
                for i in 0..w {
                    let e = match self.free_text.iter().position(|(c, _)| *c == i) {
                        Some(j) => {
                            if ADMIN_TEXT_FIELDS.contains(&self.free_text[j].1) {
                                admin_extra += extra[j];
                            }
                            extra[j]
                        }
                        None => 0,
                    };
                    fields.push(&line[spans[p].0..spans[p + e].1]);
                    p += e + 1;
                }
                Reading {
                    admin_extra,
                    fields,
                }
            })
            .collect();
        readings.sort_by_key(|r| r.admin_extra); // stable: the order of `compositions` within a rank
        Ok(readings)
    }

    /// The first readable one of several readings of a row, in their
    /// order of preference: within the first rank (extra `|` given to
    /// admin-written text) where some reading parses, all that parse must
    /// agree.
    ///
    /// # Errors
    /// No reading parses, or two of one rank parse differently.
    pub(super) fn parse_readings(
        &self,
        line: &str,
        readings: &[Reading<'_>],
        not_utf8: bool,
    ) -> Result<super::RowOutcome, RowError> {
        let extra = field_spans(line).len() - self.width;
        let free = self.free_text_names().join(", ");
        // The JobID as the first reading places it (what `placed` says).
        let label = readings
            .first()
            .map_or("?", |r| r.fields[self.job_id])
            .trim()
            .to_string();
        let err = |reason: String| row_error(&label, line, reason);
        let mut first_err: Option<RowError> = None;
        for rank in readings.chunk_by(|a, b| a.admin_extra == b.admin_extra) {
            let mut found: Option<super::RowOutcome> = None;
            for r in rank {
                match self.parse_fields(&r.fields, not_utf8, true) {
                    Ok(o) => match &found {
                        Some(f) if *f != o => {
                            return Err(err(format!(
                                "{extra} `|` more than the header's {} fields, in the free-text fields {free}, can be placed in more than one way that reads as a job, and the ways differ; {}",
                                self.width,
                                free_text_fix()
                            )))
                        }
                        Some(_) => {}
                        None => found = Some(o),
                    },
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if let Some(o) = found {
                return Ok(o);
            }
        }
        let first = first_err.map_or_else(String::new, |e| {
            format!(
                " (the first reading: field {} = {:?}: {})",
                e.field, e.value, e.reason
            )
        });
        Err(err(format!(
            "{extra} `|` more than the header's {} fields, in the free-text fields {free}: no way of placing them reads as a job{first}; {}",
            self.width,
            free_text_fix()
        )))
    }

    /// The header's free-text columns, by name.
    pub(super) fn free_text_names(&self) -> Vec<&'static str> {
        self.free_text.iter().map(|(_, name)| *name).collect()
    }

    /// The text of column `i` in `line`, where it can be told even in a row
    /// that cannot be read: in a row with the header's fields, its field;
    /// in one cut short, a field before the cut; in one with more, its
    /// field in the first reading ([`Parser::readings`]).
    pub(super) fn placed<'a>(&self, line: &'a str, i: usize) -> Option<&'a str> {
        let spans = field_spans(line);
        if spans.len() < self.width {
            return (i + 1 < spans.len()).then(|| &line[spans[i].0..spans[i].1]);
        }
        self.readings(line).ok()?.first()?.fields.get(i).copied()
    }

    /// GPU-seconds an unreadable row held: its GPUs (`AllocTRES`) times
    /// `End - Start`, from the first reading of the row where the three
    /// can be read (module docs); `None` when none can (a row cut before
    /// them, a running attempt, text that is not a time).
    pub fn held_gpu_seconds(&self, line: &str) -> Option<u64> {
        match self.readings(line) {
            Ok(readings) => readings
                .iter()
                .find_map(|r| self.held_by(|i| r.fields.get(i).copied())),
            Err(_) => self.held_by(|i| self.placed(line, i)),
        }
    }

    /// GPUs times `End - Start` with the fields that `field` gives.
    fn held_by<'a>(&self, field: impl Fn(usize) -> Option<&'a str>) -> Option<u64> {
        let gpus = fairshare::tres::gpu_count(field(self.alloc_tres)?.trim()).ok()?;
        let start = parse_time(field(self.start)?, &self.tz).ok()??;
        let end = parse_time(field(self.end)?, &self.tz).ok()??;
        let secs = u64::try_from(end.checked_sub(start)?).ok()?;
        Some(gpus.saturating_mul(secs))
    }

    /// True when a physical line of `n` fields ends inside a free-text
    /// column, so that a newline in that text may have cut the row there.
    fn cut_in_free_text(&self, n: usize) -> bool {
        n < self.width && self.free_text.iter().any(|(i, _)| *i == n - 1)
    }
}

/// The byte span of each `|`-separated field of `line` (at least one).
fn field_spans(line: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    for (i, _) in line.match_indices('|') {
        spans.push((from, i));
        from = i + 1;
    }
    spans.push((from, line.len()));
    spans
}

/// An error about a whole row (field `(row)`, its text the value).
fn row_error(label: &str, line: &str, reason: String) -> RowError {
    RowError {
        job_id: label.to_string(),
        field: "(row)",
        value: line.to_string(),
        reason,
        line: None,
    }
}

/// The fix said for a row that free text cut or split.
fn free_text_fix() -> String {
    format!(
        "save the dump without free-text fields, or with them last (as `allot sync` asks: -o {})",
        super::LIVE_FIELDS.join(",")
    )
}

/// Every way of giving `k` extra `|` to `f` free-text columns (each a
/// count per column), the first column's largest count first; `None` when
/// there are more than `cap`.
fn compositions(k: usize, f: usize, cap: usize) -> Option<Vec<Vec<usize>>> {
    fn go(
        k: usize,
        f: usize,
        prefix: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
        cap: usize,
    ) -> bool {
        if f == 1 {
            prefix.push(k);
            out.push(prefix.clone());
            prefix.pop();
            return out.len() <= cap;
        }
        for first in (0..=k).rev() {
            prefix.push(first);
            let ok = go(k - first, f - 1, prefix, out, cap);
            prefix.pop();
            if !ok {
                return false;
            }
        }
        true
    }
    let mut out = Vec::new();
    go(k, f.max(1), &mut Vec::new(), &mut out, cap).then_some(out)
}

/// The number of `|`-separated fields of `line`.
fn field_count(line: &str) -> usize {
    line.bytes().filter(|b| *b == b'|').count() + 1
}

impl<R: BufRead> DumpRows<'_, R> {
    /// The next physical line: (number, text, not UTF-8), `None` at the end.
    fn next_line(&mut self) -> Option<std::io::Result<(u64, String, bool)>> {
        if let Some(l) = self.pending.pop_front() {
            return Some(Ok(l));
        }
        if self.done {
            return None;
        }
        let mut buf = Vec::new();
        match self.input.read_until(b'\n', &mut buf) {
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(_) => {
                while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    buf.pop();
                }
                let n = self.next_line;
                self.next_line += 1;
                Some(Ok(match String::from_utf8(buf) {
                    Ok(s) => (n, s, false),
                    Err(e) => (n, String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
                }))
            }
        }
    }
}

impl<R: BufRead> Iterator for DumpRows<'_, R> {
    type Item = std::io::Result<DumpRow>;

    fn next(&mut self) -> Option<Self::Item> {
        let (line, mut text, mut not_utf8) = loop {
            match self.next_line()? {
                Err(e) => return Some(Err(e)),
                Ok(l) if l.1.trim().is_empty() => continue,
                Ok(l) => break l,
            }
        };
        let mut n = field_count(&text);
        if !self.parser.cut_in_free_text(n) {
            return Some(Ok(DumpRow {
                line,
                lines: 1,
                text,
                not_utf8,
            }));
        }
        // A newline in free text: join the lines that follow.
        let mut taken: Vec<(u64, String, bool)> = Vec::new();
        let first_len = text.len();
        let first_utf8 = not_utf8;
        while self.parser.cut_in_free_text(n) && taken.len() + 1 < MAX_JOINED_LINES {
            let next = match self.next_line() {
                None => break,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(l)) => l,
            };
            let m = field_count(&next.1);
            // A whole row of its own is never taken into another, unless
            // what was read is only the free text of the first column (a
            // job name first in the dump): its continuation then completes
            // the row exactly, and no field allot reads comes from before
            // the cut.
            let completes_first = n == 1 && m == self.parser.width;
            if m >= self.parser.width && !completes_first {
                self.pending.push_front(next);
                break;
            }
            text.push('\n');
            text.push_str(&next.1);
            not_utf8 |= next.2;
            n += m - 1;
            taken.push(next);
        }
        if n >= self.parser.width && !taken.is_empty() {
            return Some(Ok(DumpRow {
                line,
                lines: taken.len() as u64 + 1,
                text,
                not_utf8,
            }));
        }
        // The join did not complete: each line is a row of its own.
        for l in taken.into_iter().rev() {
            self.pending.push_front(l);
        }
        text.truncate(first_len);
        Some(Ok(DumpRow {
            line,
            lines: 1,
            text,
            not_utf8: first_utf8,
        }))
    }
}

#[cfg(test)]
mod tests;
