//! `account,gpu_seconds` rows: the usage file of `allot shares`.
//!
//! One row per line; blank lines and lines starting with `#` are skipped; a
//! first row `account,gpu_seconds` (any case) is a header. GPU-seconds are a
//! number >= 0 (fractions allowed). An account on several rows is summed.

/// A bad row, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CsvError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and what to write.
    pub message: String,
}

/// One parsed row.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// 1-based line number.
    pub line: usize,
    /// Slurm account.
    pub account: String,
    /// Charged GPU-seconds.
    pub gpu_seconds: f64,
}

/// Parses the whole file.
///
/// # Errors
/// The first bad row: wrong number of fields, an empty account, or
/// GPU-seconds that are not a finite number >= 0.
pub fn parse(text: &str) -> Result<Vec<UsageRow>, CsvError> {
    // A spreadsheet's UTF-8 byte-order mark is not part of the header.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rows = Vec::new();
    let mut first = true;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = l.split(',').map(str::trim).collect();
        let was_first = std::mem::replace(&mut first, false);
        if was_first && fields.len() == 2 && fields[0].eq_ignore_ascii_case("account") {
            continue; // header
        }
        let err = |message: String| CsvError { line, message };
        let [account, secs] = fields[..] else {
            return Err(err(format!(
                "expected 2 fields `account,gpu_seconds` (found {}): {l:?}",
                fields.len()
            )));
        };
        if account.is_empty() {
            return Err(err("empty account name".into()));
        }
        let gpu_seconds: f64 = secs
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                err(format!(
                    "gpu_seconds must be a number >= 0, e.g. 3600 (found {secs:?})"
                ))
            })?;
        rows.push(UsageRow {
            line,
            account: account.to_string(),
            gpu_seconds,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_comments_and_rows() {
        let rows = parse("account,gpu_seconds\n# note\n\na1, 3600\nb2,0.5\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].line, rows[0].account.as_str(), rows[0].gpu_seconds),
            (4, "a1", 3600.0)
        );
        assert_eq!(rows[1].gpu_seconds, 0.5);
        assert_eq!(parse("a1,1\n").unwrap().len(), 1, "header optional");
    }

    #[test]
    fn bad_rows_name_the_line() {
        assert_eq!(parse("a1,1\nb1\n").unwrap_err().line, 2);
        let e = parse("account,gpu_seconds\na1,lots\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string()
                .starts_with("line 2: gpu_seconds must be a number >= 0"),
            "{e}"
        );
        assert_eq!(parse("a1,-5").unwrap_err().line, 1);
        assert_eq!(parse("a1,NaN").unwrap_err().line, 1);
        assert_eq!(parse("a1,1,2").unwrap_err().line, 1);
        assert_eq!(parse(",1").unwrap_err().line, 1);
        assert!(
            parse("account,gpu_seconds\naccount,gpu_seconds").is_err(),
            "only the first row may be a header"
        );
    }
}
