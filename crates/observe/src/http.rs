//! A minimal HTTP/1.1 server for a few read-only pages: one request per
//! connection, `GET` (and `HEAD`) only, the answer computed by the route's
//! handler and the connection closed after it.
//!
//! ```text
//!  TcpListener ─accept─▶ connection task ─read head (≤ 8 KiB, ≤ 5 s)─▶ parse_request
//!                          │                                        │
//!                          └◀── status line, headers, body ◀── Routes::answer
//! ```
//!
//! A scrape every few seconds needs nothing more, and no web framework is
//! worth its build time for it. Bytes that are not a request get a 400 and
//! the listener keeps serving; a client cannot make it hold more than
//! [`REQUEST_HEAD_BYTES_MAX`] per connection nor more than
//! [`CONNECTIONS_MAX`] connections.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// The longest request head (request line and headers) read.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more wait in the kernel's backlog.
pub const CONNECTIONS_MAX: usize = 64;

/// The statuses this server answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusCode {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestHeaderFieldsTooLarge,
    InternalServerError,
}

impl StatusCode {
    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            StatusCode::Ok => 200,
            StatusCode::BadRequest => 400,
            StatusCode::NotFound => 404,
            StatusCode::MethodNotAllowed => 405,
            StatusCode::RequestHeaderFieldsTooLarge => 431,
            StatusCode::InternalServerError => 500,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            StatusCode::Ok => "OK",
            StatusCode::BadRequest => "Bad Request",
            StatusCode::NotFound => "Not Found",
            StatusCode::MethodNotAllowed => "Method Not Allowed",
            StatusCode::RequestHeaderFieldsTooLarge => "Request Header Fields Too Large",
            StatusCode::InternalServerError => "Internal Server Error",
        }
    }
}

/// What a handler answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    /// A plain-text answer.
    pub fn text(status: StatusCode, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// The bytes on the wire; `HEAD` gets the headers alone.
    fn to_bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

/// Computes the answer of one route, on the connection's task: it must be
/// quick (read counters, encode them).
pub type Handler = Arc<dyn Fn() -> Response + Send + Sync>;

/// The pages a listener serves, by path.
#[derive(Clone, Default)]
pub struct Routes {
    handlers: HashMap<String, Handler>,
}

impl Routes {
    pub fn new() -> Routes {
        Routes::default()
    }

    /// Serves `handler`'s answer at `path` (e.g. `/metrics`).
    pub fn get(
        mut self,
        path: &str,
        handler: impl Fn() -> Response + Send + Sync + 'static,
    ) -> Routes {
        self.handlers.insert(path.to_string(), Arc::new(handler));
        self
    }

    /// The answer to a request head: 400 when it does not parse, 405 for a
    /// method other than `GET`/`HEAD`, 404 for an unknown path.
    pub fn answer(&self, head: &[u8]) -> (Response, bool) {
        let request = match parse_request(head) {
            Ok(request) => request,
            Err(e) => {
                return (
                    Response::text(StatusCode::BadRequest, format!("bad request: {e}\n")),
                    false,
                )
            }
        };
        let head_only = request.method == Method::Head;
        let response = match request.method {
            Method::Other => Response::text(
                StatusCode::MethodNotAllowed,
                "only GET and HEAD are served\n",
            ),
            Method::Get | Method::Head => match self.handlers.get(request.path) {
                Some(handler) => handler(),
                None => Response::text(
                    StatusCode::NotFound,
                    format!("no page at {}\n", request.path),
                ),
            },
        };
        (response, head_only)
    }
}

/// A request's method, as far as this server cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// A well-formed method this server does not serve.
    Other,
}

/// The parts of a request head this server uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// The path, without its query string.
    pub path: &'a str,
}

/// Why a request head is not an HTTP/1.x request.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseRequestError {
    /// The head is not UTF-8 (HTTP heads are ASCII).
    #[error("the request head is not text")]
    NotText,
    /// The request line lacks a method, a target or a version.
    #[error("the request line is not `METHOD TARGET HTTP/1.x`")]
    RequestLine,
    /// The method holds characters a method cannot.
    #[error("the method is not a token")]
    Method,
    /// The target is not a path starting with `/`.
    #[error("the target is not an absolute path")]
    Target,
    /// The version is not HTTP/1.0 or HTTP/1.1.
    #[error("the version is not HTTP/1.0 or HTTP/1.1")]
    Version,
    /// A header line has no colon, or a name that is not a token.
    #[error("a header line is not `name: value`")]
    Header,
}

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a request head: the request line, then header lines, up to (not
/// including) the empty line; lines end in CRLF (a bare LF is accepted).
pub fn parse_request(head: &[u8]) -> Result<Request<'_>, ParseRequestError> {
    let text = std::str::from_utf8(head).map_err(|_| ParseRequestError::NotText)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().ok_or(ParseRequestError::RequestLine)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ParseRequestError::RequestLine);
    };
    if !is_token(method) {
        return Err(ParseRequestError::Method);
    }
    if !target.starts_with('/') || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(ParseRequestError::Target);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(ParseRequestError::Version);
    }
    for header in lines.take_while(|l| !l.is_empty()) {
        match header.split_once(':') {
            Some((name, _)) if is_token(name) => {}
            _ => return Err(ParseRequestError::Header),
        }
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Ok(Request { method, path })
}

/// Where the request head ends (after its empty line), if it has.
fn head_end(buf: &[u8]) -> Option<usize> {
    (0..buf.len()).find_map(|i| {
        if buf[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if buf[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// What reading a request head came to.
enum Head {
    /// The head, without the empty line that ends it.
    Complete(Vec<u8>),
    /// More than [`REQUEST_HEAD_BYTES_MAX`] without an end.
    TooLarge,
    /// The client closed, or sent nothing in time.
    Gone,
}

async fn read_head(stream: &mut TcpStream) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let read = tokio::time::timeout(REQUEST_READ_TIMEOUT, stream.read(&mut chunk)).await;
        let n = match read {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return Head::Gone,
            Ok(Ok(n)) => n,
        };
        // Search from just before the new bytes: the end may straddle reads.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf[from..]) {
            buf.truncate(from + end);
            return Head::Complete(buf);
        }
        if buf.len() > REQUEST_HEAD_BYTES_MAX {
            return Head::TooLarge;
        }
    }
}

async fn serve_connection(mut stream: TcpStream, routes: Arc<Routes>) {
    let (response, head_only) = match read_head(&mut stream).await {
        Head::Complete(head) => routes.answer(&head),
        Head::TooLarge => (
            Response::text(
                StatusCode::RequestHeaderFieldsTooLarge,
                format!("the request head exceeds {REQUEST_HEAD_BYTES_MAX} bytes\n"),
            ),
            false,
        ),
        Head::Gone => return,
    };
    if let Err(e) = stream.write_all(&response.to_bytes(head_only)).await {
        tracing::debug!("http: writing a response failed: {e}");
        return;
    }
    let _ = stream.shutdown().await;
}

/// Serves `routes` on `listener` until the future is dropped.
pub async fn serve(listener: TcpListener, routes: Routes) {
    let routes = Arc::new(routes);
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return; // the semaphore is never closed
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let routes = routes.clone();
                tokio::spawn(async move {
                    serve_connection(stream, routes).await;
                    drop(slot);
                });
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                tracing::warn!("http: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Binds `addr` and serves `routes` there in a task of the current
/// runtime; returns the bound address (a port 0 becomes a real one) and
/// the task, which stops when aborted.
pub async fn spawn(
    addr: std::net::SocketAddr,
    routes: Routes,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, tokio::spawn(serve(listener, routes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Routes {
        Routes::new().get("/metrics", || Response::text(StatusCode::Ok, "up 1\n"))
    }

    #[test]
    fn a_get_of_a_known_path_is_answered_by_its_handler() {
        let (response, head_only) =
            routes().answer(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n");
        assert_eq!(response.status, StatusCode::Ok);
        assert_eq!(response.body, "up 1\n");
        assert!(!head_only);
        let bytes = String::from_utf8(response.to_bytes(false)).unwrap();
        assert!(bytes.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(bytes.contains("Content-Length: 5\r\n"));
        assert!(bytes.ends_with("\r\n\r\nup 1\n"));
    }

    #[test]
    fn head_gets_the_headers_without_the_body() {
        let (response, head_only) = routes().answer(b"HEAD /metrics HTTP/1.0\n");
        assert!(head_only);
        let bytes = String::from_utf8(response.to_bytes(head_only)).unwrap();
        assert!(bytes.ends_with("Connection: close\r\n\r\n"), "{bytes}");
    }

    #[test]
    fn unknown_paths_and_methods_are_refused_by_status() {
        let routes = routes();
        assert_eq!(
            routes.answer(b"GET /nothing HTTP/1.1\r\n").0.status,
            StatusCode::NotFound
        );
        assert_eq!(
            routes.answer(b"POST /metrics HTTP/1.1\r\n").0.status,
            StatusCode::MethodNotAllowed
        );
    }

    #[test]
    fn malformed_heads_get_a_typed_error() {
        let cases: [(&[u8], ParseRequestError); 7] = [
            (b"\xff\xfe GET", ParseRequestError::NotText),
            (b"GET /metrics", ParseRequestError::RequestLine),
            (b"GET /a HTTP/1.1 extra", ParseRequestError::RequestLine),
            (b"G(T /a HTTP/1.1", ParseRequestError::Method),
            (b"GET metrics HTTP/1.1", ParseRequestError::Target),
            (b"GET /a HTTP/2", ParseRequestError::Version),
            (
                b"GET /a HTTP/1.1\r\nno colon here\r\n",
                ParseRequestError::Header,
            ),
        ];
        for (head, error) in cases {
            assert_eq!(parse_request(head), Err(error), "{head:?}");
            assert_eq!(routes().answer(head).0.status, StatusCode::BadRequest);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parser() {
        // A fixed linear congruential sequence: reproducible, no RNG needed.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2000usize {
            let head: Vec<u8> = (0..len % 97)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                    // Mostly request-like bytes, so the parser gets past its first checks.
                    b"GET /metrics HTTP/1.1\r\n:x \xff"[(state >> 33) as usize % 27]
                })
                .collect();
            let (response, _) = routes().answer(&head);
            assert!(matches!(
                response.status,
                StatusCode::Ok
                    | StatusCode::BadRequest
                    | StatusCode::NotFound
                    | StatusCode::MethodNotAllowed
            ));
        }
    }

    #[test]
    fn the_end_of_a_head_is_found_across_line_endings() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[tokio::test]
    async fn a_listener_answers_over_tcp_and_survives_garbage() {
        let (addr, task) = spawn("127.0.0.1:0".parse().unwrap(), routes())
            .await
            .unwrap();
        async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(request).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        }
        let garbage = exchange(addr, b"\x00\x01garbage\r\n\r\n").await;
        assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
        let big = vec![b'a'; REQUEST_HEAD_BYTES_MAX + 10];
        let too_large = exchange(addr, &big).await;
        assert!(too_large.starts_with("HTTP/1.1 431 "), "{too_large}");
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.ends_with("up 1\n"));
        task.abort();
    }
}
