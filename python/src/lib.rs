//! `tessera._core`: the PyO3 extension behind the Python package `tessera`.
//!
//! What it is: the Rust half of `tessera.client` and `tessera.admin` —
//! value and predicate conversion (`convert`), the client core with its
//! background operations, `Deferred`, `loop()` and streaming search
//! iterators (`client`), the admin core (`admin`) and the exceptions
//! (`errors`). The Python modules in `python/tessera/` name the methods,
//! document them and hold the pure-Python classes (`Document`, the
//! predicates, the exceptions).
//!
//! What it is not: it implements no protocol of its own; every operation
//! goes through `tessera-client`. Every call that waits on the network
//! releases the GIL. All operations run on one tokio runtime per process,
//! started on first use (so create clients after any `fork()`).

use pyo3::prelude::*;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

mod admin;
mod client;
mod convert;
mod errors;

/// The process's runtime, shared by every client and admin object.
pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(2, 4);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("tessera-python")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime of the tessera package")
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::ClientCore>()?;
    m.add_class::<client::Deferred>()?;
    m.add_class::<client::SearchIter>()?;
    m.add_class::<client::TxCore>()?;
    m.add_class::<admin::AdminCore>()?;
    m.add_function(wrap_pyfunction!(admin::validate_space, m)?)?;
    Ok(())
}
