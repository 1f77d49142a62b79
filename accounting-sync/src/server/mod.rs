//! The sidecar's read-only HTTP service for researchers and Prometheus
//! (`allot sync --follow --listen ADDR:PORT`): [`http`] (the bounded
//! listener), [`site`] (the routes, over a snapshot taken each pass),
//! [`forecasts`] (pending jobs' start forecasts, off the request path),
//! [`pages`] (the HTML), [`auth`] (who asks: munge) and [`privacy`]
//! (Slurm's PrivateData). docs/researchers.md says what each route shows.

pub mod auth;
pub mod forecasts;
pub mod http;
pub mod pages;
pub mod privacy;
pub mod site;

#[doc(hidden)]
pub mod fixture;
#[cfg(test)]
mod tests;
