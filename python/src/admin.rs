//! The admin core behind `tessera.admin.Admin`: coordinator requests run on
//! the shared runtime with the GIL released, answers as plain Python
//! values that `tessera/admin.py` wraps.

use crate::client::block_on;
use crate::errors::{admin_err, admin_status};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::time::Duration;
use tessera_client::{Admin, AdminError, AdminStatus, Configuration, DaemonId};
use tessera_types::value::split_attr_path;
use tessera_types::DaemonState;

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

#[pymethods]
impl AdminCore {
    #[new]
    fn new(host: &str, port: u16) -> AdminCore {
        AdminCore {
            admin: Admin::new(&format!("{host}:{port}")),
        }
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

    /// `(identifier, [attribute names])` per subspace, the key subspace
    /// (0) first; `[]` for an unknown space.
    fn list_subspaces(&self, py: Python<'_>, space: &str) -> PyResult<Vec<(usize, Vec<String>)>> {
        let config = self.config(py)?;
        let Some(space) = config.space(space) else {
            return Ok(Vec::new());
        };
        let desc = &space.desc;
        Ok(desc
            .all_subspaces()
            .into_iter()
            .enumerate()
            .map(|(i, attrs)| {
                (
                    i,
                    attrs.iter().map(|&a| desc.attrs[a].name.clone()).collect(),
                )
            })
            .collect())
    }

    /// `(identifier, attribute name)` per attribute the daemons index in
    /// every region of the space: the non-key attributes of a hashable type
    /// (string, int, float, timestamp) named in a subspace or an `index`
    /// clause, ascending (`SpaceDesc::indexed_attrs`, which the daemons use).
    /// The identifier is the attribute's position in the schema. `[]` for
    /// an unknown space.
    fn list_indices(&self, py: Python<'_>, space: &str) -> PyResult<Vec<(usize, String)>> {
        let config = self.config(py)?;
        let Some(space) = config.space(space) else {
            return Ok(Vec::new());
        };
        let desc = &space.desc;
        let attrs = desc.indexed_attrs();
        Ok(attrs
            .into_iter()
            .map(|a| (a, desc.attrs[a].name.clone()))
            .collect())
    }

    /// Whether `attribute` (or `attr.path`) names an attribute of `space`:
    /// NOTFOUND for an unknown space or attribute.
    fn check_attribute(&self, py: Python<'_>, space: &str, attribute: &str) -> PyResult<()> {
        let config = self.config(py)?;
        let Some(found) = config.space(space) else {
            return Err(admin_status(
                py,
                AdminStatus::NotFound,
                &format!("space {space:?} does not exist"),
            ));
        };
        let attr = split_attr_path(attribute).map_or(attribute, |(attr, _)| attr);
        if found.desc.attr_index(attr).is_none() {
            return Err(admin_status(
                py,
                AdminStatus::NotFound,
                &format!("space {space:?} has no attribute {attr:?}"),
            ));
        }
        Ok(())
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
