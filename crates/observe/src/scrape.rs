//! Reading another server's `/metrics` page: a bounded `GET` over plain
//! TCP and a reader of the Prometheus text format's samples.
//!
//! The coordinator's dashboard reads each daemon's page once a second
//! while someone watches; this is all the HTTP client it needs (one
//! request, `Connection: close`, the answer read to its end), so no HTTP
//! client crate is pulled in for it.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest answer read; a metrics page of a daemon is a few KiB.
pub const ANSWER_BYTES_MAX: usize = 4 << 20;

/// Why a page could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL is not `http://host:port/path`.
    #[error("{0:?} is not an http://host:port/path URL")]
    Url(String),
    /// Connecting, sending or reading failed.
    #[error("cannot read {url}: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// The whole exchange took longer than the timeout.
    #[error("{url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// The answer is longer than [`ANSWER_BYTES_MAX`].
    #[error("{url} answered more than {ANSWER_BYTES_MAX} bytes")]
    TooLarge { url: String },
    /// The answer is not an HTTP response with status 200 and a text body.
    #[error("{url} answered {status:?}")]
    Status { url: String, status: String },
}

/// `GET url` within `timeout`; the body of a 200 answer.
pub async fn fetch(url: &str, timeout: Duration) -> Result<String, FetchError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| FetchError::Url(url.to_string()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    if authority.is_empty() || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(FetchError::Url(url.to_string()));
    }
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        // One byte past the bound tells a page at the bound from a longer one.
        (&mut stream)
            .take(ANSWER_BYTES_MAX as u64 + 1)
            .read_to_end(&mut answer)
            .await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = match tokio::time::timeout(timeout, exchange).await {
        Err(_) => {
            return Err(FetchError::Timeout {
                url: url.to_string(),
                timeout,
            })
        }
        Ok(Err(source)) => {
            return Err(FetchError::Io {
                url: url.to_string(),
                source,
            })
        }
        Ok(Ok(answer)) => answer,
    };
    if answer.len() > ANSWER_BYTES_MAX {
        return Err(FetchError::TooLarge {
            url: url.to_string(),
        });
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_ref(), ""));
    let status_line = head.lines().next().unwrap_or("");
    let mut words = status_line.split(' ');
    match (words.next(), words.next()) {
        (Some(version), Some("200")) if version.starts_with("HTTP/1.") => Ok(body.to_string()),
        _ => Err(FetchError::Status {
            url: url.to_string(),
            status: status_line.chars().take(80).collect(),
        }),
    }
}

/// One sample line of a metrics page: `name{labels} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    /// The series name (with its `_total`, `_sum`, `_bucket` … suffix).
    pub name: &'a str,
    /// The label set between the braces, unparsed (empty without one).
    pub labels: &'a str,
    pub value: f64,
}

/// The samples of a page in the Prometheus or OpenMetrics text format;
/// comments, blank lines and lines that do not parse are passed over (a
/// dashboard shows what it can read rather than nothing).
pub fn samples(page: &str) -> impl Iterator<Item = Sample<'_>> {
    page.lines().filter_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(open) => {
                let close = open + line[open..].rfind('}')?;
                (&line[..open], &line[open + 1..close], &line[close + 1..])
            }
            None => {
                let space = line.find(' ')?;
                (&line[..space], "", &line[space..])
            }
        };
        // A timestamp may follow the value; the value is the first word.
        let value = rest.split_whitespace().next()?.parse().ok()?;
        Some(Sample {
            name,
            labels,
            value,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_and_without_labels() {
        let page = "# HELP x_total X\n# TYPE x counter\nx_total{op=\"get\",status=\"SUCCESS\"} 3\n\
                    y 2.5 1700000000\n\nz_bucket{le=\"+Inf\"} 7\nbroken{ 1\nnot_a_number abc\n# EOF\n";
        let read: Vec<Sample<'_>> = samples(page).collect();
        assert_eq!(
            read,
            vec![
                Sample {
                    name: "x_total",
                    labels: "op=\"get\",status=\"SUCCESS\"",
                    value: 3.0
                },
                Sample {
                    name: "y",
                    labels: "",
                    value: 2.5
                },
                Sample {
                    name: "z_bucket",
                    labels: "le=\"+Inf\"",
                    value: 7.0
                },
            ]
        );
    }

    #[test]
    fn arbitrary_text_never_panics_the_sample_reader() {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let alphabet = "a_{}=\" 1.e+#\n\u{e9}";
        let chars: Vec<char> = alphabet.chars().collect();
        for len in 0..3000usize {
            let text: String = (0..len % 61)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    chars[(state % chars.len() as u64) as usize]
                })
                .collect();
            for sample in samples(&text) {
                assert!(!sample.name.contains('\n'));
            }
        }
    }

    #[tokio::test]
    async fn fetch_reads_a_page_and_types_its_failures() {
        let routes = crate::http::Routes::new().get("/metrics", || {
            crate::http::Response::text(crate::http::StatusCode::Ok, "up 1\n")
        });
        let (addr, task) = crate::http::spawn("127.0.0.1:0".parse().unwrap(), routes)
            .await
            .unwrap();
        let timeout = Duration::from_secs(10);
        let body = fetch(&format!("http://{addr}/metrics"), timeout)
            .await
            .unwrap();
        assert_eq!(body, "up 1\n");
        assert!(matches!(
            fetch(&format!("http://{addr}/nothing"), timeout).await,
            Err(FetchError::Status { status, .. }) if status.contains("404")
        ));
        assert!(matches!(
            fetch("https://example/metrics", timeout).await,
            Err(FetchError::Url(_))
        ));
        task.abort();
        // Nothing listens on the port once the listener is gone.
        let _ = task.await;
        assert!(matches!(
            fetch(&format!("http://{addr}/metrics"), timeout).await,
            Err(FetchError::Io { .. })
        ));
    }
}
