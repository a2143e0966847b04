//! What every Tessera server shows of itself while it runs.
//!
//! - [`http`]: a small HTTP/1.1 listener that answers `GET` on a table of
//!   routes. Each server serves its Prometheus metrics at `/metrics` on
//!   the address of its `--metrics` flag; the coordinator adds its
//!   dashboard (`/` and `/api/cluster`) to the same table.
//! - [`scrape`]: a bounded `GET` of another server's page and a reader of
//!   the samples on it, for the dashboard's per-daemon load.
//! - [`logs`]: the `--log-format` of every server command (`text` or
//!   `json`, one JSON object per line) over `tracing`.
//!
//! What it is not: it holds no metric of its own (each server's shell
//! builds its [`prometheus_client::registry::Registry`]), knows no Tessera
//! type, and never sits on a request's path: a scrape reads counters the
//! servers keep anyway.

pub mod http;
pub mod logs;
pub mod scrape;

pub use prometheus_client;

/// The content type of [`prometheus_client::encoding::text::encode`]'s
/// output (OpenMetrics text, which Prometheus reads).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The path every server serves its metrics at.
pub const METRICS_PATH: &str = "/metrics";

/// The URL a scraper reads the metrics of a listener bound at `addr` from.
pub fn metrics_url(addr: std::net::SocketAddr) -> String {
    format!("http://{addr}{METRICS_PATH}")
}

/// The path of the coordinator's dashboard page, on its metrics listener.
pub const DASHBOARD_PATH: &str = "/";

/// The dashboard's URL on the listener whose metrics are at `metrics_url`
/// (`http://host:port/metrics` → `http://host:port/`); `None` for a URL
/// that does not end in [`METRICS_PATH`].
pub fn dashboard_url(metrics_url: &str) -> Option<String> {
    metrics_url
        .strip_suffix(METRICS_PATH)
        .map(|base| format!("{base}{DASHBOARD_PATH}"))
}

/// Sets a gauge to a count (gauges hold `i64`; a count beyond it, which
/// no real count reaches, shows as `i64::MAX`).
pub fn set_gauge(gauge: &prometheus_client::metrics::gauge::Gauge, value: u64) {
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
}

/// The text of `registry` as a response to a scrape.
pub fn metrics_response(registry: &prometheus_client::registry::Registry) -> http::Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, registry) {
        Ok(()) => http::Response {
            status: http::StatusCode::Ok,
            content_type: METRICS_CONTENT_TYPE,
            body,
        },
        // Encoding into a String fails only on a label that cannot be
        // written; the scraper sees why instead of a half page.
        Err(e) => http::Response::text(
            http::StatusCode::InternalServerError,
            format!("cannot encode the metrics: {e}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dashboard_sits_beside_the_metrics() {
        let metrics = super::metrics_url("127.0.0.1:9100".parse().unwrap());
        assert_eq!(
            super::dashboard_url(&metrics).as_deref(),
            Some("http://127.0.0.1:9100/")
        );
        assert_eq!(super::dashboard_url("http://127.0.0.1:9100/other"), None);
    }
}
