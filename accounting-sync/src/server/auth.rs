//! Who is asking: a request to the sidecar is attributed to a user by a
//! munge credential, as Slurm attributes its own RPCs (docs/researchers.md).
//!
//! `allot explain` and `allot report`, run by a user who cannot read the
//! ledger, ask munged for a credential whose payload names the request
//! (`allot GET /api/v1/jobs/42`) and send it as `Authorization: Munge
//! CRED`. The sidecar decodes it with `unmunge`: munged vouches for the
//! UID of the process that encoded it, refuses a credential older than its
//! TTL (300 s by default) and one decoded before (replay), and the payload
//! must name this very request, so a credential cannot be reused for
//! another. A request without the header is anonymous (a browser).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The header scheme: `Authorization: Munge CRED`.
pub const SCHEME: &str = "Munge ";

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// No credential (a browser, `curl`).
    Anonymous,
    /// Attributed by munge.
    User {
        /// The user's name (from the UID, through the passwd database).
        name: String,
        /// The UID munged vouched for.
        uid: u32,
    },
}

impl Identity {
    /// The user's name, `None` when anonymous.
    pub fn name(&self) -> Option<&str> {
        match self {
            Identity::Anonymous => None,
            Identity::User { name, .. } => Some(name),
        }
    }
}

/// Why a credential was refused (the request is answered 401).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// unmunge refused it (expired, replayed, invalid, munged down).
    #[error("the munge credential was refused: {0}")]
    Refused(String),
    /// Its payload names another request.
    #[error("the munge credential was made for {0:?}, not for this request")]
    WrongRequest(String),
    /// unmunge cannot be run.
    #[error("cannot run unmunge on the sidecar's host: {0}; install munge there")]
    NoUnmunge(std::io::Error),
}

/// The payload a credential for `GET path_and_query` carries.
pub fn payload(path_and_query: &str) -> String {
    format!("allot GET {path_and_query}")
}

fn socket_args(socket: Option<&str>) -> Vec<String> {
    socket
        .map(|s| vec!["--socket".to_string(), s.to_string()])
        .unwrap_or_default()
}

/// Encodes a credential for `GET path_and_query` with `munge` (the
/// client's side).
///
/// # Errors
/// munge missing or munged unreachable: the message names the socket and
/// the fix.
pub fn encode(socket: Option<&str>, path_and_query: &str) -> anyhow::Result<String> {
    let out = Command::new("munge")
        .args(socket_args(socket))
        .args(["--string", &payload(path_and_query)])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot run munge ({e}): allot proves who you are to the sidecar with munge, which every Slurm host runs; install munge, or ask an admin"
            )
        })?;
    if !out.status.success() {
        anyhow::bail!(
            "munge failed: {} (is munged running? [server] munge_socket in allot.toml names its socket: {})",
            String::from_utf8_lossy(&out.stderr).trim(),
            socket.unwrap_or("munge's default")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The UID and payload in unmunge's output (`-k STATUS,UID`):
/// `STATUS: Success (0)`, `UID: alice (1001)` (`UID: 1001` when the
/// passwd database has no name), a blank line, then the payload.
pub fn parse_unmunge(out: &str) -> Option<(u32, String)> {
    let (meta, payload) = out.split_once("\n\n").unwrap_or((out, ""));
    let uid = meta.lines().find_map(|l| l.strip_prefix("UID:"))?.trim();
    let uid = match uid.rsplit_once('(') {
        Some((_, n)) => n.trim_end_matches(')'),
        None => uid,
    }
    .parse()
    .ok()?;
    Some((uid, payload.trim_end_matches('\n').to_string()))
}

/// The user's name of `uid` (its number when the passwd database has no
/// entry).
pub fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, both valid for the
    // lengths given, and sets `result` to `pwd` or null; the name is read
    // only when `result` is non-null, while `buf` lives.
    unsafe {
        let rc = libc::getpwuid_r(
            uid,
            pwd.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc == 0 && !result.is_null() {
            let name = std::ffi::CStr::from_ptr((*result).pw_name);
            return name.to_string_lossy().into_owned();
        }
    }
    uid.to_string()
}

/// Attributes a request (`authorization`: its `Authorization` header,
/// `path_and_query`: its target) by decoding the credential with
/// `unmunge` (the sidecar's side).
///
/// # Errors
/// [`AuthError`]: a refused credential, one made for another request, no
/// unmunge.
pub fn attribute(
    socket: Option<&str>,
    authorization: Option<&str>,
    path_and_query: &str,
) -> Result<Identity, AuthError> {
    // The scheme is case-insensitive (RFC 9110); an empty credential is
    // no credential.
    let Some(cred) = authorization
        .and_then(|a| a.split_once(' '))
        .filter(|(scheme, cred)| {
            scheme.eq_ignore_ascii_case(SCHEME.trim()) && !cred.trim().is_empty()
        })
        .map(|(_, cred)| cred)
    else {
        return Ok(Identity::Anonymous);
    };
    let mut child = Command::new("unmunge")
        .args(socket_args(socket))
        .args(["--keys", "STATUS,UID"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(AuthError::NoUnmunge)?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(cred.trim().as_bytes());
    }
    let out = child.wait_with_output().map_err(AuthError::NoUnmunge)?;
    if !out.status.success() {
        // A replayed or expired credential: unmunge says why only in its
        // STATUS line ("Replayed credential (17)"), not on stderr.
        let stdout = String::from_utf8_lossy(&out.stdout);
        let status = stdout
            .lines()
            .find_map(|l| l.strip_prefix("STATUS:"))
            .map(str::trim)
            .unwrap_or("");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = [status, stderr.trim()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(AuthError::Refused(if why.is_empty() {
            format!("unmunge exited with {}", out.status)
        } else {
            why
        }));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (uid, got) = parse_unmunge(&text)
        .ok_or_else(|| AuthError::Refused(format!("unreadable unmunge output {text:?}")))?;
    if got != payload(path_and_query) {
        return Err(AuthError::WrongRequest(got));
    }
    Ok(Identity::User {
        name: user_name(uid),
        uid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmunge_output_gives_the_uid_and_the_payload() {
        for out in [
            "STATUS:           Success (0)\nUID:              alice (1001)\n\nallot GET /api/v1/jobs/7",
            "STATUS:           Success (0)\nUID:              1001\n\nallot GET /api/v1/jobs/7\n",
        ] {
            assert_eq!(
                parse_unmunge(out),
                Some((1001, "allot GET /api/v1/jobs/7".into())),
                "{out}"
            );
        }
        assert_eq!(parse_unmunge("STATUS: x\n"), None);
        assert_eq!(user_name(0), "root");
    }

    #[test]
    fn no_header_is_anonymous() {
        assert_eq!(attribute(None, None, "/").unwrap(), Identity::Anonymous);
        for h in ["Bearer x", "Munge ", "Munge"] {
            assert_eq!(
                attribute(None, Some(h), "/").unwrap(),
                Identity::Anonymous,
                "{h}"
            );
        }
    }
}
