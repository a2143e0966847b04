//! Rust errors as the Python exceptions `tessera.client.ClientError` and
//! `tessera.admin.AdminError` (defined in `tessera/_errors.py`), carrying
//! the HyperDex status number, symbol and message.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use tessera_client::{AdminError, AdminStatus, ClientError, Status};

static CLIENT_ERROR: GILOnceCell<Py<PyAny>> = GILOnceCell::new();
static ADMIN_ERROR: GILOnceCell<Py<PyAny>> = GILOnceCell::new();

fn class<'py>(
    py: Python<'py>,
    cell: &'static GILOnceCell<Py<PyAny>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    let class = cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("tessera._errors")?.getattr(name)?.unbind())
    })?;
    Ok(class.bind(py))
}

fn make(
    py: Python<'_>,
    cell: &'static GILOnceCell<Py<PyAny>>,
    name: &str,
    status: u16,
    symbol: &str,
    message: &str,
) -> PyErr {
    match class(py, cell, name).and_then(|c| c.call1((status, symbol, message))) {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// A client error as a `ClientError` exception.
pub fn client_err(py: Python<'_>, e: &ClientError) -> PyErr {
    make(
        py,
        &CLIENT_ERROR,
        "ClientError",
        e.status.code(),
        e.symbol(),
        e.message(),
    )
}

/// A `ClientError` of this status, made here (e.g. NONEPENDING).
pub fn client_status(py: Python<'_>, status: Status, message: &str) -> PyErr {
    client_err(py, &ClientError::new(status, message))
}

/// An admin error as an `AdminError` exception.
pub fn admin_err(py: Python<'_>, e: &AdminError) -> PyErr {
    make(
        py,
        &ADMIN_ERROR,
        "AdminError",
        e.status.code(),
        e.symbol(),
        e.message(),
    )
}

/// An `AdminError` of this status, made here.
pub fn admin_status(py: Python<'_>, status: AdminStatus, message: &str) -> PyErr {
    admin_err(py, &AdminError::new(status, message))
}
