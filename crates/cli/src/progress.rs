//! Progress of long command-line work (`wait-until-stable`, `bench`
//! phases, `backup`/`restore`, a layout change's `--wait`), on stderr so
//! stdout stays what scripts parse.
//!
//! On a terminal it is one line redrawn in place:
//!
//! ```text
//! wait-until-stable [##########----------]  50% epoch 12: 1 transfer running, 0 daemons behind
//! ```
//!
//! Anywhere else (a pipe, a file, CI) it is plain lines, one each time
//! the text changes: `wait-until-stable: epoch 12: 1 transfer running, 0
//! daemons behind ... 50%`. A bar of this kind is a dozen lines of
//! formatting, so no progress crate is pulled in for it.

use std::io::{IsTerminal, Write};
use std::time::Duration;
use tessera_client::{Admin, AdminError, Epoch};

/// The width of the drawn bar, in characters.
const BAR_WIDTH: usize = 20;

/// One task's progress report on stderr.
pub struct Progress {
    what: &'static str,
    terminal: bool,
    /// The last plain line written, so unchanged reports are not repeated.
    last: Option<String>,
}

impl Progress {
    /// A report headed `what`, drawn as a bar when stderr is a terminal.
    pub fn new(what: &'static str) -> Progress {
        Progress::with_terminal(what, std::io::stderr().is_terminal())
    }

    fn with_terminal(what: &'static str, terminal: bool) -> Progress {
        Progress {
            what,
            terminal,
            last: None,
        }
    }

    /// Whether the report is a bar redrawn in place.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// What to write for `percent` and `detail`, if anything.
    fn render(&mut self, percent: u8, detail: &str) -> Option<String> {
        let percent = percent.min(100);
        if self.terminal {
            let filled = usize::from(percent) * BAR_WIDTH / 100;
            Some(format!(
                "\r\x1b[2K{} [{}{}] {percent:>3}% {detail}",
                self.what,
                "#".repeat(filled),
                "-".repeat(BAR_WIDTH - filled)
            ))
        } else {
            let line = format!("{}: {detail} ... {percent}%\n", self.what);
            if self.last.as_deref() == Some(line.as_str()) {
                return None;
            }
            self.last = Some(line.clone());
            Some(line)
        }
    }

    /// Reports `percent` done, with a short description of the state.
    pub fn update(&mut self, percent: u8, detail: &str) {
        if let Some(text) = self.render(percent, detail) {
            write_stderr(&text);
        }
    }

    /// Ends the report: the bar's line is closed so later output starts on
    /// a line of its own.
    pub fn finish(&mut self) {
        if self.terminal {
            write_stderr("\n");
        }
    }
}

/// Progress is a courtesy: a closed stderr must not fail the command.
fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// A percentage of work done from how much is left, when the total is not
/// known in advance: the most ever seen left counts as the whole.
#[derive(Default)]
pub struct Remaining {
    most: usize,
}

impl Remaining {
    /// The percentage done when `left` units remain.
    pub fn percent(&mut self, left: usize) -> u8 {
        self.most = self.most.max(left);
        if self.most == 0 {
            return 100;
        }
        let done = (self.most - left) * 100 / self.most;
        u8::try_from(done).unwrap_or(100)
    }
}

/// `wait-until-stable` with progress: the work left is the running
/// transfers plus the daemons that have not reached the epoch.
pub async fn wait_until_stable(
    admin: &Admin,
    timeout: Duration,
    poll: Duration,
) -> Result<Epoch, AdminError> {
    let mut progress = Progress::new("wait-until-stable");
    let mut remaining = Remaining::default();
    let outcome = admin
        .wait_until_stable_watching(timeout, poll, |stability| {
            let (transfers, behind) = (stability.transfers, stability.lagging.len());
            let detail = format!(
                "epoch {}: {transfers} transfer{} running, {behind} daemon{} behind",
                stability.epoch.0,
                if transfers == 1 { "" } else { "s" },
                if behind == 1 { "" } else { "s" },
            );
            progress.update(remaining.percent(transfers + behind), &detail);
        })
        .await;
    progress.finish();
    outcome
}

/// How long `--wait` waits for a layout change at most.
pub const LAYOUT_WAIT_MAX: Duration = Duration::from_secs(3600);

/// A layout change's `--wait`: polls the configuration until every part of
/// `space` is ready (nothing building or dropping), reporting the least
/// advanced building part. A space removed meanwhile ends the wait with
/// NOTFOUND; the change was abandoned with it.
// The command line measures real time: only the node and simulator code
// must take it as a parameter.
#[allow(clippy::disallowed_methods)]
pub async fn wait_layout(
    admin: &Admin,
    space: &str,
    timeout: Duration,
    poll: Duration,
) -> Result<Epoch, AdminError> {
    let mut progress = Progress::new("layout");
    let started = std::time::Instant::now();
    let outcome = loop {
        let config = match admin.config().await {
            Ok(config) => config,
            Err(e) => break Err(e),
        };
        let Some(found) = config.space(space) else {
            break Err(AdminError::new(
                tessera_client::AdminStatus::NotFound,
                format!("space {space:?} was removed; its layout change was abandoned"),
            ));
        };
        let (mut building, mut dropping, mut least) = (0usize, 0usize, 100u8);
        for part in found.parts() {
            match part.state {
                tessera_client::PartState::Building { progress } => {
                    building += 1;
                    least = least.min(progress);
                }
                tessera_client::PartState::Dropping => {
                    dropping += 1;
                    least = least.min(99);
                }
                tessera_client::PartState::Ready => {}
            }
        }
        if building == 0 && dropping == 0 {
            progress.update(100, &format!("epoch {}: every part ready", config.epoch.0));
            break Ok(config.epoch);
        }
        progress.update(
            least,
            &format!(
                "epoch {}: {building} part{} building, {dropping} dropping",
                config.epoch.0,
                if building == 1 { "" } else { "s" }
            ),
        );
        if started.elapsed() >= timeout {
            break Err(AdminError::new(
                tessera_client::AdminStatus::Timeout,
                format!(
                    "space {space:?} still changing after {} s",
                    timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(poll).await;
    };
    progress.finish();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_carry_the_percentage_and_are_not_repeated() {
        let mut p = Progress::with_terminal("job", false);
        assert_eq!(
            p.render(37, "two left").as_deref(),
            Some("job: two left ... 37%\n")
        );
        assert_eq!(p.render(37, "two left"), None);
        assert_eq!(
            p.render(250, "done").as_deref(),
            Some("job: done ... 100%\n")
        );
    }

    #[test]
    fn the_bar_fills_in_proportion() {
        let mut p = Progress::with_terminal("job", true);
        let line = p.render(50, "half").unwrap();
        // Back to the line's start and clear it, then draw.
        let drawn = line.strip_prefix("\r\x1b[2K").expect("the line is redrawn");
        let bar = drawn.split('[').nth(1).unwrap().split(']').next().unwrap();
        assert_eq!(bar.len(), BAR_WIDTH);
        assert_eq!(bar.matches('#').count(), BAR_WIDTH / 2);
        assert!(drawn.starts_with("job [") && drawn.ends_with(" 50% half"));
        // A terminal redraws even an unchanged line (it may have been
        // overwritten by a log line).
        assert!(p.render(50, "half").is_some());
    }

    #[test]
    fn remaining_work_counts_down_from_the_most_seen() {
        let mut r = Remaining::default();
        // Nothing left from the start is done; 4 left is the whole until 6
        // are seen; 2 of 6 left is 66% (rounded down).
        let expected = [(0, 100), (4, 0), (3, 25), (6, 0), (2, 66), (0, 100)];
        for (left, percent) in expected {
            assert_eq!(r.percent(left), percent, "left {left}");
        }
    }
}
