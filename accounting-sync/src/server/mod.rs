//! The sidecar's read-only HTTP service for researchers and Prometheus
//! (`allot sync --follow --listen ADDR:PORT`), by job: [`http`] (the
//! bounded server: listener, request, response), [`site`] (finds each
//! request's route, snapshot and viewer), [`routes`] (one function a
//! route), [`snapshot`] (what the sidecar knew at its last pass),
//! [`forecasts`] (pending jobs' start forecasts, off the request path),
//! [`pages`] (the HTML), [`auth`] (who asks: munge) and [`privacy`]
//! (Slurm's PrivateData). docs/researchers.md says what each route shows.

pub mod auth;
pub mod forecasts;
pub mod http;
pub mod pages;
pub mod privacy;
pub mod routes;
pub mod site;
pub mod snapshot;

#[doc(hidden)]
pub mod fixture;
#[cfg(test)]
mod tests;
