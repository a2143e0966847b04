//! The admin core behind `tessera.admin.Admin`: coordinator requests run on
//! the shared runtime with the GIL released, answers as plain Python
//! values that `tessera/admin.py` wraps.

use crate::client::block_on;
use crate::errors::{admin_err, admin_status};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use std::time::Duration;
use tessera_client::backup::BackupError;
use tessera_client::{
    index_infos, Admin, AdminError, AdminStatus, AdminToken, Configuration, CoordLink, DaemonId,
    PartId, PartState, TlsFiles, Transport,
};
use tessera_types::DaemonState;

/// How long an admin call tries the coordinator group (as `Admin::new`).
const ADMIN_GIVE_UP: Duration = Duration::from_secs(10);

/// Plain TCP, or TLS trusting the CA in `tls_ca`; a file that cannot be
/// used raises `ValueError` naming it.
pub fn transport(tls_ca: Option<PathBuf>) -> PyResult<Transport> {
    match tls_ca {
        None => Ok(Transport::plain()),
        Some(ca) => Transport::tls(&TlsFiles {
            ca,
            cert: None,
            key: None,
        })
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string())),
    }
}

/// The Rust half of `tessera.admin.Admin`.
#[pyclass(frozen, module = "tessera._core")]
pub struct AdminCore {
    admin: Admin,
}

impl AdminCore {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        future: impl std::future::Future<Output = Result<T, AdminError>> + Send,
    ) -> PyResult<T> {
        block_on(py, future).map_err(|e| admin_err(py, &e))
    }

    fn config(&self, py: Python<'_>) -> PyResult<Configuration> {
        self.run(py, self.admin.config())
    }
}

/// An error and its causes, one sentence after another.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[pymethods]
impl AdminCore {
    /// `tls_ca`: the cluster CA's PEM file, to connect with TLS;
    /// `admin_token_file`: the admin credential a coordinator that
    /// requires one expects on configuration changes
    /// (docs/design/tls.md). Both files are read here, so a bad one
    /// raises at once.
    #[new]
    #[pyo3(signature = (host, port, tls_ca=None, admin_token_file=None))]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        tls_ca: Option<PathBuf>,
        admin_token_file: Option<PathBuf>,
    ) -> PyResult<AdminCore> {
        let admin_token = admin_token_file
            .map(|path| AdminToken::from_file(&path))
            .transpose()
            .map_err(|e| admin_status(py, AdminStatus::LocalError, &e.to_string()))?;
        let link = CoordLink {
            transport: transport(tls_ca)?,
            admin_token,
        };
        Ok(AdminCore {
            admin: Admin::with_link([format!("{host}:{port}")], ADMIN_GIVE_UP, link),
        })
    }

    fn add_space(&self, py: Python<'_>, description: &str) -> PyResult<bool> {
        self.run(py, self.admin.add_space(description))?;
        Ok(true)
    }

    fn rm_space(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        self.run(py, self.admin.rm_space(name))?;
        Ok(true)
    }

    fn list_spaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, self.admin.list_spaces())
    }

    /// `(identifier, [attribute names])` per subspace (or replex, or
    /// hybrid: every part holding whole objects), the key subspace (0) first, then the others by their stable part id (what
    /// `rm_subspace` takes); a dropping subspace is not listed. `[]` for an
    /// unknown space.
    fn list_subspaces(&self, py: Python<'_>, space: &str) -> PyResult<Vec<(u64, Vec<String>)>> {
        let config = self.config(py)?;
        let Some(space) = config.space(space) else {
            return Ok(Vec::new());
        };
        let desc = &space.desc;
        Ok(space
            .subspaces
            .iter()
            .filter(|layout| layout.state != PartState::Dropping && layout.kind.holds_objects())
            .map(|layout| {
                let names = layout
                    .attrs
                    .iter()
                    .map(|&a| desc.attrs[a].name.clone())
                    .collect();
                (layout.part.0, names)
            })
            .collect())
    }

    /// `(identifier, attribute name, state)` per local index of the space
    /// (its `index` clauses and those added since), dropping ones left out;
    /// the state is `building 37%`, `ready`. `[]` for an unknown space.
    fn list_indices(&self, py: Python<'_>, space: &str) -> PyResult<Vec<(u64, String, String)>> {
        let config = self.config(py)?;
        let Some(space) = config.space(space) else {
            return Ok(Vec::new());
        };
        Ok(index_infos(space)
            .into_iter()
            .filter(|index| index.state != PartState::Dropping && !index.global)
            .map(|index| (index.id.0, index.attribute, index.state.to_string()))
            .collect())
    }

    /// A new subspace on `attrs`, built live; its identifier.
    fn add_subspace(&self, py: Python<'_>, space: &str, attrs: Vec<String>) -> PyResult<u64> {
        Ok(self.run(py, self.admin.add_subspace(space, &attrs))?.0)
    }

    fn rm_subspace(&self, py: Python<'_>, space: &str, part: u64) -> PyResult<bool> {
        self.run(py, self.admin.rm_subspace(space, PartId(part)))?;
        Ok(true)
    }

    /// A new local index on `attribute` (or `attr.path`), built live; its
    /// identifier.
    fn add_index(&self, py: Python<'_>, space: &str, attribute: &str) -> PyResult<u64> {
        Ok(self.run(py, self.admin.add_index(space, attribute))?.0)
    }

    /// A new global index on `attribute` with `partitions` indexlets
    /// (default: the space's partitions), built live; its part id.
    #[pyo3(signature = (space, attribute, partitions=None))]
    fn add_global_index(
        &self,
        py: Python<'_>,
        space: &str,
        attribute: &str,
        partitions: Option<u32>,
    ) -> PyResult<u64> {
        let added = self.admin.add_global_index(space, attribute, partitions);
        Ok(self.run(py, added)?.0)
    }

    fn rm_global_index(&self, py: Python<'_>, space: &str, attribute: &str) -> PyResult<bool> {
        self.run(py, self.admin.rm_global_index(space, attribute))?;
        Ok(true)
    }

    /// Drops index `part` of `space` (any space with such an index when
    /// `None`).
    #[pyo3(signature = (part, space=None))]
    fn rm_index(&self, py: Python<'_>, part: u64, space: Option<&str>) -> PyResult<bool> {
        self.run(py, self.admin.rm_index(space, PartId(part)))?;
        Ok(true)
    }

    fn relayout(&self, py: Python<'_>, space: &str, description: &str) -> PyResult<bool> {
        self.run(py, self.admin.relayout(space, description))?;
        Ok(true)
    }

    /// `{'cluster', 'version', 'servers': [{'id', 'location', 'state'}],
    /// 'read_only', 'spaces'}`.
    fn dump_config(&self, py: Python<'_>) -> PyResult<PyObject> {
        let config = self.config(py)?;
        let dict = PyDict::new(py);
        // Tessera has no cluster identifier; HyperDex's key is kept.
        dict.set_item("cluster", 0)?;
        dict.set_item("version", config.epoch.0)?;
        let servers = PyList::empty(py);
        for daemon in config.daemons.values() {
            let server = PyDict::new(py);
            server.set_item("id", daemon.id.0)?;
            server.set_item("location", &daemon.addr)?;
            let state = match daemon.state {
                DaemonState::Available => "AVAILABLE",
                DaemonState::Offline => "NOT_AVAILABLE",
            };
            server.set_item("state", state)?;
            servers.append(server)?;
        }
        dict.set_item("servers", servers)?;
        dict.set_item("read_only", config.read_only)?;
        let spaces: Vec<&str> = config.spaces.iter().map(|s| s.desc.name.as_str()).collect();
        dict.set_item("spaces", spaces)?;
        Ok(dict.into_any().unbind())
    }

    /// Blocks until the cluster is stable; TIMEOUT after `timeout` seconds.
    fn wait_until_stable(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let timeout = Duration::try_from_secs_f64(timeout).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err("timeout must be a non-negative number")
        })?;
        self.run(
            py,
            self.admin
                .wait_until_stable(timeout, Duration::from_millis(200)),
        )?;
        Ok(true)
    }

    /// A consistent backup of the whole cluster into the directory `path`
    /// (which must not exist, or be empty): `{'epoch', 'pause_ms',
    /// 'objects', 'regions', 'bytes'}`. A failure is LOCALERROR (HyperDex's
    /// code for a backup that could not be written) unless the coordinator
    /// gave its own status.
    fn backup(&self, py: Python<'_>, path: &str) -> PyResult<PyObject> {
        let admin = self.admin.clone();
        let dir = std::path::PathBuf::from(path);
        let report =
            block_on(py, async move { admin.backup(&dir, &mut |_| {}).await }).map_err(|e| {
                let error = match e {
                    BackupError::Admin(e) => e,
                    other => AdminError::new(AdminStatus::LocalError, error_chain(&other)),
                };
                admin_err(py, &error)
            })?;
        let dict = PyDict::new(py);
        dict.set_item("epoch", report.epoch.0)?;
        dict.set_item("pause_ms", report.pause.as_secs_f64() * 1e3)?;
        dict.set_item("objects", report.objects)?;
        dict.set_item("regions", report.regions)?;
        dict.set_item("bytes", report.bytes)?;
        Ok(dict.into_any().unbind())
    }

    fn set_read_only(&self, py: Python<'_>, read_only: bool) -> PyResult<bool> {
        self.run(py, self.admin.set_read_only(read_only))?;
        Ok(true)
    }

    /// `op` is `offline`, `online`, `kill` or `forget`.
    fn server(&self, py: Python<'_>, op: &str, id: u64) -> PyResult<bool> {
        let id = DaemonId(id);
        match op {
            "offline" => self.run(py, self.admin.server_offline(id))?,
            "online" => self.run(py, self.admin.server_online(id))?,
            "kill" => self.run(py, self.admin.server_kill(id))?,
            "forget" => self.run(py, self.admin.server_forget(id))?,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown server operation {other:?}"
                )))
            }
        }
        Ok(true)
    }
}

/// Parses and validates a space description locally: `True`, or
/// `AdminError(BADSPACE)` naming the problem with its line and column.
#[pyfunction]
pub fn validate_space(py: Python<'_>, description: &str) -> PyResult<bool> {
    match tessera_types::parse::parse_space(description) {
        Ok(_) => Ok(true),
        Err(e) => Err(admin_status(py, AdminStatus::BadSpace, &e.to_string())),
    }
}
