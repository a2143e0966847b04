//! The client core behind `tessera.client.Client`: requests built from
//! Python arguments (with the GIL), run on the shared tokio runtime
//! (without it), and their replies decoded back (with it).
//!
//! ```text
//!  sync  m(...)        build ─▶ release GIL ─▶ block_on(execute) ─▶ decode
//!  async async_m(...)  build ─▶ check (raise now) ─▶ spawn(execute) ─▶ Deferred
//!                                              task ends ─▶ OpTable.finish(id)
//!  Deferred.wait()     release GIL ─▶ wait for its id ─▶ decode
//!  Client.loop()       release GIL ─▶ next finished id not yet looped ─▶ its Deferred
//!  search(...)         check ─▶ spawn producer ─▶ bounded channel ─▶ Iterator.__next__
//! ```

use crate::convert::{self, record_to_py};
use crate::errors::{client_err, client_status};
use crate::runtime;
use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use tessera_client::{
    Client, ClientError, ClientOptions, Microtransaction, NumOp, Op, PredOp, Record, Status,
    UpdateFlags, Value,
};
use tokio::sync::mpsc;

/// How many search results wait in the channel between the producer task
/// and the Python iterator; the producer pauses when it is full.
const SEARCH_BUFFER: usize = 256;

type Preds = Vec<(String, PredOp)>;
type Ops = Vec<(String, Op)>;

/// One operation, its arguments converted and owned, ready to run
/// without the GIL.
pub enum Request {
    Get {
        space: String,
        key: Value,
    },
    GetPartial {
        space: String,
        key: Value,
        names: Vec<String>,
    },
    /// `X` and `cond_X`: one key.
    Update {
        space: String,
        key: Value,
        flags: UpdateFlags,
        preds: Preds,
        ops: Ops,
    },
    /// `group_X`: every object matching the predicates.
    Group {
        space: String,
        preds: Preds,
        ops: Ops,
        delete: bool,
    },
    Count {
        space: String,
        preds: Preds,
    },
    Describe {
        space: String,
        preds: Preds,
    },
    /// A microtransaction's `commit` (no predicates) or `cond_commit`.
    Commit {
        tx: Microtransaction,
        key: Value,
        preds: Preds,
    },
    GroupCommit {
        tx: Microtransaction,
        preds: Preds,
    },
}

/// What an operation returns, before decoding (API.md §3.4).
#[derive(Clone)]
pub enum Reply {
    /// `True` (SUCCESS), `False` (CMPFAIL), `None` (NOTFOUND).
    Flag(Option<bool>),
    /// A `dict`, or `None` (NOTFOUND).
    Object(Option<Record>),
    /// A count.
    Count(u64),
    /// Text (search_describe).
    Text(String),
}

impl Reply {
    fn to_py(&self, py: Python<'_>) -> PyResult<PyObject> {
        match self {
            Reply::Flag(flag) => flag.into_py_any(py),
            Reply::Object(Some(record)) => record_to_py(py, record),
            Reply::Object(None) => Ok(py.None()),
            Reply::Count(n) => n.into_py_any(py),
            Reply::Text(text) => text.into_py_any(py),
        }
    }
}

async fn execute(client: &Client, request: Request) -> Result<Reply, ClientError> {
    Ok(match request {
        Request::Get { space, key } => Reply::Object(client.get(&space, key).await?),
        Request::GetPartial { space, key, names } => {
            Reply::Object(client.get_partial(&space, key, names).await?)
        }
        Request::Update {
            space,
            key,
            flags,
            preds,
            ops,
        } => Reply::Flag(
            client
                .execute(&space, key, flags, preds, ops)
                .await?
                .as_option(),
        ),
        Request::Group {
            space,
            preds,
            delete: true,
            ..
        } => Reply::Count(client.group_del(&space, preds).await?),
        Request::Group {
            space, preds, ops, ..
        } => Reply::Count(client.group_execute(&space, preds, ops).await?),
        Request::Count { space, preds } => Reply::Count(client.count(&space, preds).await?),
        Request::Describe { space, preds } => {
            Reply::Text(client.search_describe(&space, preds).await?)
        }
        Request::Commit { tx, key, preds } if preds.is_empty() => {
            Reply::Flag(tx.commit(key).await?.as_option())
        }
        Request::Commit { tx, key, preds } => {
            Reply::Flag(tx.cond_commit(key, preds).await?.as_option())
        }
        Request::GroupCommit { tx, preds } => Reply::Count(tx.group_commit(preds).await?),
    })
}

/// The checks `execute` would make before sending, made now.
async fn check(client: &Client, request: &Request) -> Result<(), ClientError> {
    let none: &[(String, PredOp)] = &[];
    let (space, key, preds, ops): (&str, Option<&Value>, &[(String, PredOp)], &[_]) = match request
    {
        Request::Get { space, key } | Request::GetPartial { space, key, .. } => {
            (space, Some(key), none, &[])
        }
        Request::Update {
            space,
            key,
            preds,
            ops,
            ..
        } => (space, Some(key), preds, ops),
        Request::Group {
            space, preds, ops, ..
        } => (space, None, preds, ops),
        Request::Count { space, preds } | Request::Describe { space, preds } => {
            (space, None, preds, &[])
        }
        Request::Commit { tx, key, preds } => (tx.space(), Some(key), preds, &[]),
        Request::GroupCommit { tx, preds } => (tx.space(), None, preds, &[]),
    };
    client
        .check(space, key, preds.iter().cloned(), ops, None)
        .await
}

// ------------------------------------------------------------ operations table

/// The asynchronous operations of one client that `wait()` has not retired
/// yet, and the order in which they finished (for `loop()`).
#[derive(Default)]
pub struct OpTable {
    state: Mutex<TableState>,
    changed: Condvar,
}

#[derive(Default)]
struct TableState {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    /// Ids in the order their operations finished; `loop()` pops them.
    finished: VecDeque<u64>,
}

struct Entry {
    result: Option<Result<Reply, ClientError>>,
    /// `loop()` returned this operation already.
    looped: bool,
    /// The Python object `loop()` returns (taken by it).
    deferred: Option<Py<Deferred>>,
}

impl OpTable {
    fn lock(&self) -> MutexGuard<'_, TableState> {
        // A panic while holding the lock leaves plain data behind; go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(
        &self,
        py: Python<'_>,
        make: impl FnOnce(u64) -> PyResult<Py<Deferred>>,
    ) -> PyResult<Py<Deferred>> {
        let id = {
            let mut state = self.lock();
            state.next_id += 1;
            state.next_id
        };
        let deferred = make(id)?;
        self.lock().entries.insert(
            id,
            Entry {
                result: None,
                looped: false,
                deferred: Some(deferred.clone_ref(py)),
            },
        );
        Ok(deferred)
    }

    fn finish(&self, id: u64, result: Result<Reply, ClientError>) {
        let mut state = self.lock();
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.result = Some(result);
            state.finished.push_back(id);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Blocks until operation `id` has finished, stores its result in
    /// `cell` and retires it. Returns the table's reference to the Python
    /// object, to be dropped with the GIL held.
    fn retire(&self, id: u64, cell: &OnceLock<Result<Reply, ClientError>>) -> Option<Py<Deferred>> {
        let mut state = self.lock();
        loop {
            if cell.get().is_some() {
                // Another thread retired it.
                return None;
            }
            let ready = state
                .entries
                .get(&id)
                .is_some_and(|entry| entry.result.is_some());
            if ready {
                let entry = state.entries.remove(&id)?;
                let _ = cell.set(entry.result.expect("checked above"));
                return entry.deferred;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks until some operation not yet returned by `loop()` finishes
    /// and returns its Python object; `None` when there is none left.
    fn next_finished(&self) -> Option<Py<Deferred>> {
        let mut state = self.lock();
        loop {
            while let Some(id) = state.finished.pop_front() {
                if let Some(entry) = state.entries.get_mut(&id) {
                    if !entry.looped {
                        entry.looped = true;
                        if let Some(deferred) = entry.deferred.take() {
                            return Some(deferred);
                        }
                    }
                }
            }
            if !state.entries.values().any(|e| !e.looped) {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

// ------------------------------------------------------------ shared state

/// What a client's Python objects and background tasks share.
pub struct Shared {
    coordinator: String,
    /// Plain TCP, or TLS with the CA given as `tls_ca=`.
    options: ClientOptions,
    client: tokio::sync::OnceCell<Client>,
    table: OpTable,
}

impl Shared {
    /// The connected client; connects on first use (API.md §3.1: no network
    /// activity until the first call).
    async fn client(&self) -> Result<&Client, ClientError> {
        self.client
            .get_or_try_init(|| {
                Client::connect_with([self.coordinator.as_str()], self.options.clone())
            })
            .await
    }

    async fn run(&self, request: Request, auth: &Authorization) -> Result<Reply, ClientError> {
        execute(&auth.apply(self.client().await?), request).await
    }
}

/// The `auth=` and `secret=` of one call (API.md §10): serialized
/// macaroons (the Python layer serializes pymacaroons objects) and the
/// secret a put gives its object.
#[derive(Clone, Default)]
pub struct Authorization {
    macaroons: Option<Vec<Vec<u8>>>,
    secret: Option<Vec<u8>>,
}

impl Authorization {
    /// A client handle whose requests carry this authorization.
    fn apply(&self, client: &Client) -> Client {
        let mut client = client.clone();
        if let Some(macaroons) = &self.macaroons {
            client = client.with_auth(macaroons.iter().cloned());
        }
        if let Some(secret) = &self.secret {
            client = client.with_secret(secret.clone());
        }
        client
    }
}

/// Runs `future` on the shared runtime with the GIL released.
pub fn block_on<T: Send>(py: Python<'_>, future: impl std::future::Future<Output = T> + Send) -> T {
    py.allow_threads(|| runtime().block_on(future))
}

// ------------------------------------------------------------ Python classes

/// The Rust half of `tessera.client.Client` (the Python class adds the
/// named methods and their docstrings).
#[pyclass(frozen, module = "tessera._core")]
pub struct ClientCore {
    shared: Arc<Shared>,
}

#[pymethods]
impl ClientCore {
    /// `tls_ca`: the PEM file of the cluster's CA, to connect with TLS
    /// (docs/design/tls.md); the file is read here, so a bad one raises
    /// at once.
    #[new]
    #[pyo3(signature = (host, port, tls_ca=None))]
    fn new(host: &str, port: u16, tls_ca: Option<std::path::PathBuf>) -> PyResult<ClientCore> {
        let options = ClientOptions {
            transport: crate::admin::transport(tls_ca)?,
            ..ClientOptions::default()
        };
        Ok(ClientCore {
            shared: Arc::new(Shared {
                coordinator: format!("{host}:{port}"),
                options,
                client: tokio::sync::OnceCell::new(),
                table: OpTable::default(),
            }),
        })
    }

    /// Runs one operation (`get`, `count`, `put`, `cond_atomic_add`,
    /// `group_del` …) and returns its decoded result.
    /// `auth` (serialized macaroons) and `secret` as API.md §10.
    #[pyo3(signature = (op, space, key, predicates, arg, auth=None, secret=None))]
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        op: &str,
        space: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        predicates: Option<&Bound<'_, PyAny>>,
        arg: Option<&Bound<'_, PyAny>>,
        auth: Option<Vec<Vec<u8>>>,
        secret: Option<Vec<u8>>,
    ) -> PyResult<PyObject> {
        let request = request(op, space, key, predicates, arg)?;
        let auth = Authorization {
            macaroons: auth,
            secret,
        };
        run(py, &self.shared, request, auth)
    }

    /// `call`, started in the background: a `Deferred`.
    #[pyo3(signature = (op, space, key, predicates, arg, auth=None, secret=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        op: &str,
        space: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        predicates: Option<&Bound<'_, PyAny>>,
        arg: Option<&Bound<'_, PyAny>>,
        auth: Option<Vec<Vec<u8>>>,
        secret: Option<Vec<u8>>,
    ) -> PyResult<Py<Deferred>> {
        let request = request(op, space, key, predicates, arg)?;
        let auth = Authorization {
            macaroons: auth,
            secret,
        };
        spawn(py, &self.shared, request, auth)
    }

    /// A search as a lazy iterator; `sort` is `(attribute, limit,
    /// descending)` for a sorted search.
    #[pyo3(signature = (space, predicates, sort=None, auth=None))]
    fn search(
        &self,
        py: Python<'_>,
        space: &Bound<'_, PyAny>,
        predicates: &Bound<'_, PyAny>,
        sort: Option<(Bound<'_, PyAny>, u64, bool)>,
        auth: Option<Vec<Vec<u8>>>,
    ) -> PyResult<SearchIter> {
        let auth = Authorization {
            macaroons: auth,
            secret: None,
        };
        let space = convert::name(space)?;
        let preds = convert::predicates(predicates)?;
        let sort = match sort {
            Some((by, limit, descending)) => Some((convert::name(&by)?, limit, descending)),
            None => None,
        };
        let shared = self.shared.clone();
        // Pre-send errors (unknown space, attribute, wrong types) raise here.
        block_on(py, async {
            let client = shared.client().await?;
            client
                .check(
                    &space,
                    None,
                    preds.iter().cloned(),
                    &[],
                    sort.as_ref().map(|(by, _, _)| by.as_str()),
                )
                .await
        })
        .map_err(|e| client_err(py, &e))?;
        let (tx, rx) = mpsc::channel(SEARCH_BUFFER);
        runtime().spawn(produce(shared, space, preds, sort, auth, tx));
        Ok(SearchIter {
            rx: Mutex::new(rx),
            peeked: Mutex::new(None),
        })
    }

    /// The next finished operation started with `start`/`start_commit` that
    /// `loop` has not returned yet; NONEPENDING when there is none.
    #[pyo3(name = "loop")]
    fn loop_(&self, py: Python<'_>) -> PyResult<Py<Deferred>> {
        let shared = self.shared.clone();
        match py.allow_threads(|| shared.table.next_finished()) {
            Some(deferred) => Ok(deferred),
            None => Err(client_status(
                py,
                Status::NonePending,
                "loop() called with no outstanding operation",
            )),
        }
    }

    /// A microtransaction on `space` (UNKNOWNSPACE raises here).
    fn microtransaction(&self, py: Python<'_>, space: &Bound<'_, PyAny>) -> PyResult<TxCore> {
        let space = convert::name(space)?;
        let shared = self.shared.clone();
        let tx = block_on(py, async {
            shared.client().await?.microtransaction(&space).await
        })
        .map_err(|e| client_err(py, &e))?;
        Ok(TxCore {
            shared: self.shared.clone(),
            tx: Mutex::new(Some(tx)),
        })
    }
}

/// Runs `request` with the GIL released and decodes its reply.
fn run(
    py: Python<'_>,
    shared: &Arc<Shared>,
    request: Request,
    auth: Authorization,
) -> PyResult<PyObject> {
    match block_on(py, shared.run(request, &auth)) {
        Ok(reply) => reply.to_py(py),
        Err(e) => Err(client_err(py, &e)),
    }
}

/// Checks `request` (raising what would fail before sending), then starts
/// it in the background and returns its `Deferred`.
fn spawn(
    py: Python<'_>,
    shared: &Arc<Shared>,
    request: Request,
    auth: Authorization,
) -> PyResult<Py<Deferred>> {
    let checked = shared.clone();
    let request = block_on(py, async move {
        let client = checked.client().await?;
        check(client, &request).await.map(|()| request)
    })
    .map_err(|e| client_err(py, &e))?;
    let deferred = shared.table.insert(py, |id| {
        Py::new(
            py,
            Deferred {
                id,
                shared: shared.clone(),
                result: OnceLock::new(),
            },
        )
    })?;
    let id = deferred.get().id;
    let task = shared.clone();
    runtime().spawn(async move {
        let result = task.run(request, &auth).await;
        task.table.finish(id, result);
    });
    Ok(deferred)
}

/// Sends the results of one search into `tx`, in order, until the search
/// ends or the iterator is dropped. The client's `SearchStream` fetches
/// each region's pages lazily, so with the bounded channel a search holds
/// a few pages per region and the results waiting for Python, however many
/// objects match.
async fn produce(
    shared: Arc<Shared>,
    space: String,
    preds: Preds,
    sort: Option<(String, u64, bool)>,
    auth: Authorization,
    tx: mpsc::Sender<Result<Record, ClientError>>,
) {
    let client = match shared.client().await {
        Ok(client) => auth.apply(client),
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    let mut stream = match &sort {
        None => client.search_stream(&space, preds),
        Some((by, limit, descending)) => {
            client.sorted_search_stream(&space, preds, by, *limit, *descending)
        }
    };
    while let Some(item) = stream.next().await {
        let last = item.is_err(); // an error ends the stream
        if tx.send(item).await.is_err() || last {
            return; // the iterator is gone, or the search failed
        }
    }
}

/// An operation started in the background (`async_*`): `wait()` returns
/// its result as the synchronous method would, or raises its error.
///
/// Thread-safe: `wait()` may be called from any thread, and more than once
/// (it returns the same result again).
#[pyclass(frozen, module = "tessera.client")]
pub struct Deferred {
    id: u64,
    shared: Arc<Shared>,
    result: OnceLock<Result<Reply, ClientError>>,
}

#[pymethods]
impl Deferred {
    /// Blocks (with the GIL released) until the operation finishes, then
    /// returns its result — `True`/`False`/`None`, a `dict`, a count or a
    /// text, as the synchronous form of the method would — or raises its
    /// `ClientError`.
    fn wait(&self, py: Python<'_>) -> PyResult<PyObject> {
        if self.result.get().is_none() {
            let table_ref = py.allow_threads(|| self.shared.table.retire(self.id, &self.result));
            drop(table_ref);
        }
        match self.result.get() {
            Some(Ok(reply)) => reply.to_py(py),
            Some(Err(e)) => Err(client_err(py, e)),
            None => Err(client_status(
                py,
                Status::Internal,
                "the operation has no result",
            )),
        }
    }

    fn __repr__(&self) -> String {
        let state = if self.result.get().is_some() {
            "finished"
        } else {
            "outstanding"
        };
        format!("<tessera.client.Deferred #{} {state}>", self.id)
    }
}

/// The results of a search, streamed: `for obj in it`, `it.hasNext()`,
/// `it.next()`. Each result is a `dict` including the key. An error after
/// the search started is yielded as a `ClientError` object (not raised),
/// and ends the iteration.
#[pyclass(frozen, module = "tessera.client", name = "Iterator")]
pub struct SearchIter {
    rx: Mutex<mpsc::Receiver<Result<Record, ClientError>>>,
    /// A result taken by `hasNext()`; `Some(None)` means the end.
    peeked: Mutex<Option<Option<Result<Record, ClientError>>>>,
}

impl SearchIter {
    fn take(&self, py: Python<'_>) -> Option<Result<Record, ClientError>> {
        if let Some(item) = self.peeked.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return item;
        }
        py.allow_threads(|| {
            self.rx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .blocking_recv()
        })
    }

    fn decode(py: Python<'_>, item: Result<Record, ClientError>) -> PyResult<PyObject> {
        match item {
            Ok(record) => record_to_py(py, &record),
            Err(e) => Ok(client_err(py, &e).into_value(py).into_any()),
        }
    }
}

#[pymethods]
impl SearchIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        match self.take(py) {
            Some(item) => Self::decode(py, item).map(Some),
            None => Ok(None),
        }
    }

    /// Whether another result follows (blocks until it is known).
    #[pyo3(name = "hasNext")]
    fn has_next(&self, py: Python<'_>) -> bool {
        let item = self.take(py);
        let more = item.is_some();
        *self.peeked.lock().unwrap_or_else(|p| p.into_inner()) = Some(item);
        more
    }

    /// The next result; `StopIteration` at the end.
    fn next(&self, py: Python<'_>) -> PyResult<PyObject> {
        match self.take(py) {
            Some(item) => Self::decode(py, item),
            None => Err(PyStopIteration::new_err(())),
        }
    }
}

/// The Rust half of `tessera.client.Microtransaction`.
#[pyclass(frozen, module = "tessera._core")]
pub struct TxCore {
    shared: Arc<Shared>,
    tx: Mutex<Option<Microtransaction>>,
}

/// The error of a microtransaction used after its commit.
fn committed_already() -> PyErr {
    PyValueError::new_err("this microtransaction was committed already (single use)")
}

impl TxCore {
    fn take(&self) -> PyResult<Microtransaction> {
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(committed_already)
    }

    fn request(
        &self,
        key: Option<&Bound<'_, PyAny>>,
        predicates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let preds = optional_predicates(predicates)?;
        let tx = self.take()?;
        Ok(match key {
            Some(key) => Request::Commit {
                tx,
                key: convert::to_value(key)?,
                preds,
            },
            None => Request::GroupCommit { tx, preds },
        })
    }
}

#[pymethods]
impl TxCore {
    /// Collects `op` (`put`, `atomic_add`, `string_append` …) of each
    /// attribute; invalid operations raise at once.
    fn add(&self, py: Python<'_>, op: &str, attributes: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ops = ops_for(op, attributes)?;
        let mut guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = guard.as_mut().ok_or_else(committed_already)?;
        for (name, op) in ops {
            tx.add(&name, op).map_err(|e| client_err(py, &e))?;
        }
        Ok(true)
    }

    /// Commits to `key` (with `predicates`: only if they hold); with no
    /// key, to every object matching `predicates`.
    #[pyo3(signature = (key, predicates))]
    fn commit(
        &self,
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        predicates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        run(
            py,
            &self.shared,
            self.request(key, predicates)?,
            Authorization::default(),
        )
    }

    /// `commit`, started in the background: a `Deferred`.
    #[pyo3(signature = (key, predicates))]
    fn start_commit(
        &self,
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        predicates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Deferred>> {
        spawn(
            py,
            &self.shared,
            self.request(key, predicates)?,
            Authorization::default(),
        )
    }
}

// ------------------------------------------------------------ requests

/// The request of a client method: `op` is its name (`get`, `count`,
/// `put`, `cond_put_or_create`, `group_map_add`, `del` …); `arg` is the
/// attribute names of `get_partial`, the attributes of an update.
fn request(
    op: &str,
    space: &Bound<'_, PyAny>,
    key: Option<&Bound<'_, PyAny>>,
    predicates: Option<&Bound<'_, PyAny>>,
    arg: Option<&Bound<'_, PyAny>>,
) -> PyResult<Request> {
    let space = convert::name(space)?;
    let preds = optional_predicates(predicates)?;
    Ok(match op {
        "get" => Request::Get {
            space,
            key: required_key(op, key)?,
        },
        "get_partial" => {
            let names = arg
                .ok_or_else(|| PyValueError::new_err("get_partial needs attribute names"))?
                .try_iter()?
                .map(|n| convert::name(&n?))
                .collect::<PyResult<Vec<String>>>()?;
            Request::GetPartial {
                space,
                key: required_key(op, key)?,
                names,
            }
        }
        "count" => Request::Count { space, preds },
        "search_describe" => Request::Describe { space, preds },
        _ => update_request(op, space, key, preds, arg)?,
    })
}

fn required_key(op: &str, key: Option<&Bound<'_, PyAny>>) -> PyResult<Value> {
    convert::to_value(key.ok_or_else(|| PyValueError::new_err(format!("{op} needs a key")))?)
}

fn optional_predicates(predicates: Option<&Bound<'_, PyAny>>) -> PyResult<Preds> {
    match predicates {
        Some(p) => convert::predicates(p),
        None => Ok(Vec::new()),
    }
}

/// The request of an update family method.
fn update_request(
    op: &str,
    space: String,
    key: Option<&Bound<'_, PyAny>>,
    preds: Preds,
    attributes: Option<&Bound<'_, PyAny>>,
) -> PyResult<Request> {
    let (form, base) = if let Some(base) = op.strip_prefix("cond_") {
        (Form::Cond, base)
    } else if let Some(base) = op.strip_prefix("group_") {
        (Form::Group, base)
    } else {
        (Form::Plain, op)
    };
    let ops = match (base, attributes) {
        ("del", _) => Vec::new(),
        (_, Some(attributes)) => ops_for(base, attributes)?,
        (_, None) => return Err(PyValueError::new_err(format!("{op} needs attributes"))),
    };
    if form == Form::Group {
        return Ok(Request::Group {
            space,
            preds,
            ops,
            delete: base == "del",
        });
    }
    let key = required_key(op, key)?;
    let flags = match (form, base) {
        (Form::Plain, "put") | (Form::Cond, "put_or_create") => UpdateFlags::default(),
        (Form::Plain, "put_if_not_exist") => UpdateFlags {
            must_not_exist: true,
            ..UpdateFlags::default()
        },
        (_, "del") => UpdateFlags {
            must_exist: true,
            erase: true,
            ..UpdateFlags::default()
        },
        _ => UpdateFlags {
            must_exist: true,
            ..UpdateFlags::default()
        },
    };
    Ok(Request::Update {
        space,
        key,
        flags,
        preds,
        ops,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Plain,
    Cond,
    Group,
}

fn num_op(name: &str) -> Option<NumOp> {
    Some(match name {
        "add" => NumOp::Add,
        "sub" => NumOp::Sub,
        "mul" => NumOp::Mul,
        "div" => NumOp::Div,
        "mod" => NumOp::Mod,
        "and" => NumOp::And,
        "or" => NumOp::Or,
        "xor" => NumOp::Xor,
        "min" => NumOp::Min,
        "max" => NumOp::Max,
        _ => return None,
    })
}

/// The operations of one family method over its attributes (or, for the
/// `map_*` methods taking map attributes, over attribute → {map key:
/// operand}).
pub fn ops_for(base: &str, attributes: &Bound<'_, PyAny>) -> PyResult<Ops> {
    let pairs = convert::attributes(attributes)?;
    let unknown = || PyValueError::new_err(format!("unknown operation {base:?}"));
    let map_op: Option<fn(Value, Value) -> Op> = match base {
        "map_add" => Some(Op::MapAdd),
        "map_string_prepend" => Some(Op::MapStringPrepend),
        "map_string_append" => Some(Op::MapStringAppend),
        _ => None,
    };
    let map_num = base.strip_prefix("map_atomic_").map(num_op);
    if map_op.is_some() || map_num.is_some() {
        let mut out = Vec::new();
        for (name, inner) in pairs {
            for (k, v) in convert::attributes_any(&inner)? {
                let (k, v) = (convert::to_value(&k)?, convert::to_value(&v)?);
                let op = match (map_op, map_num) {
                    (Some(make), _) => make(k, v),
                    (None, Some(Some(n))) => Op::MapAtomic(n, k, v),
                    _ => return Err(unknown()),
                };
                out.push((name.clone(), op));
            }
        }
        return Ok(out);
    }
    let make: Box<dyn Fn(Value) -> Op> = match base {
        "put" | "put_if_not_exist" | "put_or_create" => Box::new(Op::Put),
        "string_prepend" => Box::new(Op::StringPrepend),
        "string_append" => Box::new(Op::StringAppend),
        "string_ltrim" => Box::new(Op::StringLtrim),
        "string_rtrim" => Box::new(Op::StringRtrim),
        "list_lpush" => Box::new(Op::ListLpush),
        "list_rpush" => Box::new(Op::ListRpush),
        "set_add" => Box::new(Op::SetAdd),
        "set_remove" => Box::new(Op::SetRemove),
        "set_union" => Box::new(Op::SetUnion),
        "set_intersect" => Box::new(Op::SetIntersect),
        "map_remove" => Box::new(Op::MapRemove),
        "document_rename" => Box::new(Op::DocumentRename),
        "document_unset" => {
            // The value is ignored (API.md §3.6).
            return Ok(pairs
                .into_iter()
                .map(|(name, _)| (name, Op::DocumentUnset))
                .collect());
        }
        other => match other.strip_prefix("atomic_").and_then(num_op) {
            Some(n) => Box::new(move |v| Op::Atomic(n, v)),
            None => return Err(unknown()),
        },
    };
    pairs
        .into_iter()
        .map(|(name, v)| Ok((name, make(convert::to_value(&v)?))))
        .collect()
}
