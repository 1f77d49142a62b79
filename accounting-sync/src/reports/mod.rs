//! What `allot report` prints:
//! - [`budget`]: the budget report (text, `--parsable2`, `--json`);
//! - [`budget_page`]: the HTML budget page (`--html`);
//! - [`health`]: the health report (`--health`): GPU health events, drains,
//!   automatic requeues.

pub mod budget;
pub mod budget_page;
pub mod health;
