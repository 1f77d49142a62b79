//! The text of `/metrics`: its content types, OpenMetrics turned into
//! Prometheus' text format 0.0.4 for clients that do not ask for
//! OpenMetrics, and a parser of either (for tests and checks).

use std::collections::BTreeMap;

/// The `Content-Type` of `/metrics` for a client that accepts OpenMetrics
/// (Prometheus does).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of `/metrics` for other clients (curl, promtool):
/// Prometheus' text format 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text -> Prometheus text format 0.0.4: a counter's HELP and
/// TYPE lines name its `_total` series, and there is no `# EOF` or `# UNIT`.
pub fn to_text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Parsed exposition: (metric name, sorted (label, value) pairs) -> value.
pub type Exposition = BTreeMap<(String, Vec<(String, String)>), f64>;

/// Values of an OpenMetrics/Prometheus text exposition: (name, sorted
/// labels) -> value. For tests and checks; `+Inf`/`inf` parse as infinity.
pub fn parse_exposition(text: &str) -> Exposition {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = match line.rsplit_once(' ') {
            Some(x) => x,
            None => continue,
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let body = rest.trim_end_matches('}');
                let mut labels = Vec::new();
                // Label values here never hold `",` (names, paths, kinds).
                for part in body.split("\",") {
                    if let Some((k, v)) = part.split_once("=\"") {
                        labels.push((k.to_string(), v.trim_end_matches('"').to_string()));
                    }
                }
                labels.sort();
                (n.to_string(), labels)
            }
            None => (series.to_string(), Vec::new()),
        };
        let v = match value.to_ascii_lowercase().as_str() {
            "+inf" | "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => match other.parse() {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        out.insert((name, labels), v);
    }
    out
}
