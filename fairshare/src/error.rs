//! Configuration errors. Each message names where the problem is (a dotted
//! path such as `tree.nlp.a2` or `contract.max_min_runtime`) and how to fix it.

use std::fmt;

use crate::duration::DurationError;

/// One problem in `allot.toml`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid TOML, or a top-level table has a key of the
    /// wrong type or an unknown key (toml's message has line and column).
    #[error("{0}")]
    Syntax(String),
    /// A tree node without `share`.
    #[error("{path}: share is missing; add `share = N` (a whole number, relative to its siblings: 35 of 100 is 35%)")]
    ShareMissing {
        /// Node path.
        path: String,
    },
    /// A negative share.
    #[error("{path}: share cannot be negative (found {found}); give a whole number > 0 relative to its siblings, or 0 for a node that should never be served")]
    ShareNegative {
        /// Node path.
        path: String,
        /// The value as written.
        found: String,
    },
    /// A fractional or non-numeric share.
    #[error("{path}: share must be a whole number (found {found}); shares are relative, so scale the siblings (2.5 and 7.5 -> 25 and 75)")]
    ShareNotInteger {
        /// Node path.
        path: String,
        /// The value as written.
        found: String,
    },
    /// A share above [`crate::tree::MAX_SHARE`].
    #[error("{path}: share {found} is too large (at most 1000000); shares are relative, so scale the siblings down")]
    ShareTooLarge {
        /// Node path.
        path: String,
        /// The value as written.
        found: i64,
    },
    /// Every child of a node (or every top-level node) has share 0.
    #[error("{path}: every child has share 0, so nothing below it could ever be served; give at least one child a share > 0")]
    AllSharesZero {
        /// Path of the parent.
        path: String,
    },
    /// A Slurm account listed in two leaves.
    #[error("account {account:?} is in two leaves, {first} and {second}; a Slurm account must belong to exactly one leaf")]
    DuplicateAccount {
        /// The account.
        account: String,
        /// The first leaf that lists it.
        first: String,
        /// The second.
        second: String,
    },
    /// `accounts = []` on a leaf.
    #[error("{path}: accounts is empty; list at least one Slurm account, or drop the key to use the node's name")]
    EmptyAccounts {
        /// Node path.
        path: String,
    },
    /// An account name Slurm cannot hold.
    #[error("{path}: invalid account name {name:?}: {reason}")]
    BadAccountName {
        /// Node path.
        path: String,
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `accounts` on a node that has children.
    #[error("{path}: a node with children cannot have accounts; only leaves map to Slurm accounts (move them into a child node)")]
    AccountsOnInterior {
        /// Node path.
        path: String,
    },
    /// A key a tree node does not take.
    #[error("{path}: unknown key `{key}`; a node takes `share`, `accounts` and child tables such as [{path}.child]")]
    UnknownKey {
        /// Node path.
        path: String,
        /// The key.
        key: String,
    },
    /// A value of the wrong type.
    #[error("{path}: expected {expected} (found {found})")]
    WrongType {
        /// Key path.
        path: String,
        /// What was expected, with an example.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// `window` parses to 0 seconds.
    #[error("window: must be longer than 0; write e.g. window = \"7-0\" (7 days)")]
    WindowZero,
    /// A duration that does not parse.
    #[error("{path}: {source}")]
    Duration {
        /// Key path.
        path: String,
        /// The parse error (it says what to write).
        source: DurationError,
    },
    /// A default minimum runtime above the cap.
    #[error(
        "{path}: {min} is longer than contract.max_min_runtime ({max}); lower it or raise the cap"
    )]
    MinAboveMax {
        /// Key path.
        path: String,
        /// The default, Slurm-formatted.
        min: String,
        /// The cap, Slurm-formatted.
        max: String,
    },
    /// No node under `[tree]`.
    #[error("tree: no nodes; add at least one, e.g. [tree.team] with share = 1")]
    EmptyTree,
    /// More leaves than priorities can rank.
    #[error("tree: {count} leaves; at most {max} are supported (a priority holds the account rank in 14 bits)")]
    TooManyLeaves {
        /// Leaves found.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A negative or non-finite TRES weight.
    #[error("{path}: a weight must be a finite number >= 0 (found {found})")]
    BadWeight {
        /// Key path, e.g. `charge."gres/gpu"`.
        path: String,
        /// The value.
        found: f64,
    },
    /// Every TRES weight is 0.
    #[error("charge: every weight is 0, so nothing would be charged; give \"gres/gpu\" (or another TRES) a weight > 0")]
    ChargeAllZero,
    /// Any other out-of-range value.
    #[error("{path}: {message}")]
    Invalid {
        /// Key path.
        path: String,
        /// What is wrong and the fix.
        message: String,
    },
}

/// Every problem found in one file (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<Vec<ConfigError>> for ConfigErrors {
    fn from(v: Vec<ConfigError>) -> Self {
        ConfigErrors(v)
    }
}
