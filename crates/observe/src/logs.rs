//! The log format of every server command: `tracing` events written to
//! stderr as text for people, or as one JSON object per line for log
//! collectors (`--log-format json`). Which events pass is `RUST_LOG`'s
//! choice, with a default per command.
//!
//! State changes (a daemon registered, offline, poisoned, stopping; a
//! region joined, left, led, transferred) are events with an `epoch` field,
//! so a collector can order them across processes.

use std::str::FromStr;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// Which events pass, in `RUST_LOG`'s syntax (e.g. `info,openraft=warn`).
pub use tracing_subscriber::EnvFilter as Filter;

/// How log events are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message`
    /// and the event's fields at the top level.
    Json,
}

/// Why a `--log-format` value was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?} (use text or json)")]
pub struct ParseLogFormatError(String);

impl FromStr for LogFormat {
    type Err = ParseLogFormatError;

    fn from_str(s: &str) -> Result<LogFormat, ParseLogFormatError> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(ParseLogFormatError(other.to_string())),
        }
    }
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum InitLogsError {
    /// Another subscriber was installed first.
    #[error("a log subscriber is installed already")]
    AlreadySet(#[source] tracing::subscriber::SetGlobalDefaultError),
}

/// The subscriber that writes events in `format` to `writer`, filtered by
/// `filter`, text in colour when `ansi`. [`init`] installs it for the
/// process; tests capture it.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi && format == LogFormat::Text);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .finish(),
        ),
    }
}

/// Installs the process's subscriber: events to stderr in `format`,
/// filtered by `RUST_LOG` or else by `default_filter` (e.g. `"warn"`), and
/// the [`LogBridge`] for libraries that log through `log`.
pub fn init(format: LogFormat, default_filter: &str) -> Result<(), InitLogsError> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour only for a person at a terminal, never in a file or a pipe.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing::subscriber::set_global_default(subscriber(format, filter, std::io::stderr, ansi))
        .map_err(InitLogsError::AlreadySet)?;
    // A logger set already (by an embedding program) stays.
    if log::set_logger(&LogBridge).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    Ok(())
}

/// Hands the warnings and errors of libraries that log through the `log`
/// crate to the tracing subscriber, as events of target `log` with the
/// library's own target in `origin`. fjall is one: when one of its flush
/// or compaction workers fails it poisons the engine (every later write
/// of the daemon fails, and the daemon leaves its chains) and says why
/// only through `log`. Their info and debug lines stay out: fjall writes
/// one per flush and compaction.
pub struct LogBridge;

impl log::Log for LogBridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        let origin = record.target();
        match record.level() {
            log::Level::Error => tracing::error!(target: "log", origin, "{}", record.args()),
            log::Level::Warn => tracing::warn!(target: "log", origin, "{}", record.args()),
            _ => {}
        }
    }

    fn flush(&self) {}
}

/// A writer that keeps what is logged in memory, for tests of log lines.
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Captured {
    type Writer = Captured;

    fn make_writer(&'w self) -> Captured {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON subscriber at `info`, writing into `captured`.
    fn json_into(captured: &Captured) -> Box<dyn tracing::Subscriber + Send + Sync> {
        subscriber(
            LogFormat::Json,
            EnvFilter::new("info"),
            captured.clone(),
            false,
        )
    }

    #[test]
    fn formats_parse_by_name_and_refuse_others() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!("text".parse(), Ok(LogFormat::Text));
        assert!("yaml".parse::<LogFormat>().is_err());
    }

    #[test]
    fn json_is_one_object_per_line_with_the_fields_on_top() {
        let captured = Captured::default();
        tracing::subscriber::with_default(json_into(&captured), || {
            tracing::info!(epoch = 7u64, daemon = 3u64, "daemon offline");
            tracing::debug!(epoch = 8u64, "filtered out");
            tracing::warn!(epoch = 9u64, reason = "multi\nline", "daemon stopping");
        });
        let text = captured.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["epoch"], 7);
        assert_eq!(first["daemon"], 3);
        assert_eq!(first["message"], "daemon offline");
        assert_eq!(first["level"], "INFO");
        let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(second["epoch"], 9);
        assert_eq!(second["reason"], "multi\nline");
    }

    /// A library's error through `log` reaches the subscriber with its
    /// origin; its debug lines do not.
    #[test]
    fn library_errors_through_log_are_events() {
        use log::Log as _;
        let captured = Captured::default();
        tracing::subscriber::with_default(json_into(&captured), || {
            for (level, text) in [
                (log::Level::Error, "Worker #0 crashed: disk"),
                (log::Level::Debug, "flushed a memtable"),
            ] {
                LogBridge.log(
                    &log::Record::builder()
                        .level(level)
                        .target("fjall::worker_pool")
                        .args(format_args!("{text}"))
                        .build(),
                );
            }
        });
        let text = captured.text();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["level"], "ERROR");
        assert_eq!(lines[0]["origin"], "fjall::worker_pool");
        assert_eq!(lines[0]["message"], "Worker #0 crashed: disk");
        assert!(!LogBridge.enabled(&log::Metadata::builder().level(log::Level::Info).build()));
    }

    #[test]
    fn text_is_not_json() {
        let captured = Captured::default();
        let sub = subscriber(
            LogFormat::Text,
            EnvFilter::new("info"),
            captured.clone(),
            false,
        );
        tracing::subscriber::with_default(sub, || tracing::info!(epoch = 7u64, "daemon offline"));
        let text = captured.text();
        assert!(
            text.contains("daemon offline") && text.contains("epoch=7"),
            "{text}"
        );
        assert!(serde_json::from_str::<serde_json::Value>(text.trim()).is_err());
    }
}
