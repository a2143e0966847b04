//! The slice of HyperDex's C client API (`include/hyperdex/client.h` in its
//! prefix) the benchmark calls, opened at run time with `dlopen` so that
//! Tessera builds and its tests run on machines without HyperDex.
//!
//! This is the one module of the crate that may use `unsafe`: every call
//! into the library is one. The safe surface is [`Api`] (the opened
//! library) and [`Client`] (one `struct hyperdex_client*`), which is neither
//! `Send` nor `Sync` because HyperDex's client is not thread-safe: it is
//! created, used and destroyed on one thread.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString, NulError};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// `enum hyperdatatype` values the benchmark writes and reads.
pub const DATATYPE_STRING: c_int = 9217;
pub const DATATYPE_INT64: c_int = 9218;

/// `enum hyperpredicate` values of the searches the benchmark sends.
pub const PREDICATE_EQUALS: c_int = 9729;
pub const PREDICATE_GREATER_EQUAL: c_int = 9731;
pub const PREDICATE_LESS_THAN: c_int = 9738;

/// `enum hyperdex_client_returncode` values the benchmark tells apart.
pub const SUCCESS: c_int = 8448;
pub const NOTFOUND: c_int = 8449;
pub const SEARCHDONE: c_int = 8450;
pub const UNKNOWNSPACE: c_int = 8512;
pub const OFFLINE: c_int = 8533;

/// How long one `hyperdex_client_loop` waits for an operation to finish, in
/// milliseconds: long enough for a loaded two-core machine, short enough
/// that a lost cluster ends the phase with an error rather than a hang.
const LOOP_TIMEOUT_MS: c_int = 30_000;

/// `struct hyperdex_client_attribute`.
#[repr(C)]
struct RawAttribute {
    attr: *const c_char,
    value: *const c_char,
    value_sz: usize,
    datatype: c_int,
}

/// `struct hyperdex_client_attribute_check`.
#[repr(C)]
struct RawCheck {
    attr: *const c_char,
    value: *const c_char,
    value_sz: usize,
    datatype: c_int,
    predicate: c_int,
}

type CreateFn = unsafe extern "C" fn(*const c_char, u16) -> *mut c_void;
type DestroyFn = unsafe extern "C" fn(*mut c_void);
type PutFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    *const c_char,
    usize,
    *const RawAttribute,
    usize,
    *mut c_int,
) -> i64;
type GetFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    *const c_char,
    usize,
    *mut c_int,
    *mut *const RawAttribute,
    *mut usize,
) -> i64;
type SearchFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    *const RawCheck,
    usize,
    *mut c_int,
    *mut *const RawAttribute,
    *mut usize,
) -> i64;
type LoopFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_int) -> i64;
type DestroyAttrsFn = unsafe extern "C" fn(*const RawAttribute, usize);
type ErrorMessageFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type ReturncodeToStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// Why `libhyperdex-client` could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LoadLibraryError {
    /// `dlopen` failed: the file is missing or one of its own libraries is.
    #[error("cannot open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
    /// The library lacks a function the benchmark calls (another version).
    #[error("{path} has no {symbol}")]
    Symbol {
        path: PathBuf,
        symbol: &'static str,
        #[source]
        source: libloading::Error,
    },
}

/// The opened client library and the functions the benchmark calls.
pub struct Api {
    create: CreateFn,
    destroy: DestroyFn,
    put: PutFn,
    get: GetFn,
    search: SearchFn,
    loop_: LoopFn,
    destroy_attrs: DestroyAttrsFn,
    error_message: ErrorMessageFn,
    returncode_to_string: ReturncodeToStringFn,
    // Last, so the function pointers above never outlive the mapping.
    _library: libloading::Library,
}

impl Api {
    /// Opens `libhyperdex-client.so` at `path` and looks up its functions.
    pub fn load(path: &Path) -> Result<Arc<Api>, LoadLibraryError> {
        // SAFETY: loading runs the library's initialisers; HyperDex's are
        // C++ static constructors with no preconditions on the caller.
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|source| LoadLibraryError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        macro_rules! symbol {
            ($name:literal) => {
                // SAFETY: the type is the one `client.h` declares for this
                // name, and the pointer is used only while `_library` lives.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }.map_err(|source| {
                    LoadLibraryError::Symbol {
                        path: path.to_path_buf(),
                        symbol: $name,
                        source,
                    }
                })?
            };
        }
        Ok(Arc::new(Api {
            create: symbol!("hyperdex_client_create"),
            destroy: symbol!("hyperdex_client_destroy"),
            put: symbol!("hyperdex_client_put"),
            get: symbol!("hyperdex_client_get"),
            search: symbol!("hyperdex_client_search"),
            loop_: symbol!("hyperdex_client_loop"),
            destroy_attrs: symbol!("hyperdex_client_destroy_attrs"),
            error_message: symbol!("hyperdex_client_error_message"),
            returncode_to_string: symbol!("hyperdex_client_returncode_to_string"),
            _library: library,
        }))
    }

    /// HyperDex's name of a return code (`HYPERDEX_CLIENT_NOTFOUND`, …).
    pub fn returncode_name(&self, code: c_int) -> String {
        // SAFETY: the function returns a static string for every input.
        let name = unsafe { (self.returncode_to_string)(code) };
        if name.is_null() {
            return format!("return code {code}");
        }
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Why a call through a HyperDex client failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// `hyperdex_client_create` returned no client.
    #[error("cannot create a HyperDex client for {host}:{port}")]
    Create { host: String, port: u16 },
    /// A host, space or attribute name holds a NUL byte, which the C API
    /// cannot carry.
    #[error("{what} holds a NUL byte")]
    Nul {
        what: &'static str,
        #[source]
        source: NulError,
    },
    /// The call, or the operation it started, ended with this status.
    #[error("{call}: {name} ({message})")]
    Status {
        call: &'static str,
        code: c_int,
        name: String,
        message: String,
    },
    /// `hyperdex_client_loop` finished an operation other than the one in
    /// flight (each client has at most one).
    #[error("{call}: the client finished operation {got}, not {wanted}")]
    OtherOperation {
        call: &'static str,
        wanted: i64,
        got: i64,
    },
}

impl CallError {
    /// The HyperDex return code, for a [`CallError::Status`].
    pub fn code(&self) -> Option<c_int> {
        match self {
            CallError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// An attribute to write: its name, HyperDex datatype and value bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeIn {
    pub name: CString,
    pub datatype: c_int,
    pub value: Vec<u8>,
}

/// A search predicate on one attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckIn {
    pub name: CString,
    pub datatype: c_int,
    pub value: Vec<u8>,
    pub predicate: c_int,
}

/// An attribute as HyperDex returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeOut {
    pub name: String,
    pub datatype: c_int,
    pub value: Vec<u8>,
}

/// One HyperDex client: its own connections to the cluster, one operation
/// in flight at a time. Not `Send`: it stays on the thread that made it.
pub struct Client {
    api: Arc<Api>,
    raw: NonNull<c_void>,
}

impl Client {
    /// A client of the cluster whose coordinator is `host:port`.
    pub fn create(api: Arc<Api>, host: &str, port: u16) -> Result<Client, CallError> {
        let c_host = CString::new(host).map_err(|source| CallError::Nul {
            what: "the coordinator host",
            source,
        })?;
        // SAFETY: `c_host` is NUL-terminated and outlives the call.
        let raw = unsafe { (api.create)(c_host.as_ptr(), port) };
        let raw = NonNull::new(raw).ok_or_else(|| CallError::Create {
            host: host.to_string(),
            port,
        })?;
        Ok(Client { api, raw })
    }

    /// Writes `attrs` of the object `key` in `space` (creating it if absent).
    pub fn put(
        &mut self,
        space: &CStr,
        key: &[u8],
        attrs: &[AttributeIn],
    ) -> Result<(), CallError> {
        let raw: Vec<RawAttribute> = attrs
            .iter()
            .map(|a| RawAttribute {
                attr: a.name.as_ptr(),
                value: a.value.as_ptr().cast(),
                value_sz: a.value.len(),
                datatype: a.datatype,
            })
            .collect();
        let mut status: c_int = 0;
        // SAFETY: every pointer refers to memory (`space`, `key`, `raw` and
        // the names and values it points into) that outlives the operation,
        // which `finish` waits for before this function returns.
        let id = unsafe {
            (self.api.put)(
                self.raw.as_ptr(),
                space.as_ptr(),
                key.as_ptr().cast(),
                key.len(),
                raw.as_ptr(),
                raw.len(),
                &mut status,
            )
        };
        self.finish("put", id, &status)?;
        match status {
            SUCCESS => Ok(()),
            other => Err(self.status_error("put", other)),
        }
    }

    /// The object `key` of `space`, or `None` if there is none.
    pub fn get(
        &mut self,
        space: &CStr,
        key: &[u8],
    ) -> Result<Option<Vec<AttributeOut>>, CallError> {
        let mut status: c_int = 0;
        let mut attrs: *const RawAttribute = std::ptr::null();
        let mut attrs_sz: usize = 0;
        // SAFETY: `space` and `key` outlive the call; `status`, `attrs` and
        // `attrs_sz` outlive the operation, which `finish` waits for.
        let id = unsafe {
            (self.api.get)(
                self.raw.as_ptr(),
                space.as_ptr(),
                key.as_ptr().cast(),
                key.len(),
                &mut status,
                &mut attrs,
                &mut attrs_sz,
            )
        };
        self.finish("get", id, &status)?;
        match status {
            SUCCESS => Ok(Some(self.take_attrs(attrs, attrs_sz))),
            NOTFOUND => Ok(None),
            other => Err(self.status_error("get", other)),
        }
    }

    /// Every object of `space` matching all of `checks` (HyperDex's
    /// `search`: unordered, unlimited).
    pub fn search(
        &mut self,
        space: &CStr,
        checks: &[CheckIn],
    ) -> Result<Vec<Vec<AttributeOut>>, CallError> {
        let raw: Vec<RawCheck> = checks
            .iter()
            .map(|c| RawCheck {
                attr: c.name.as_ptr(),
                value: c.value.as_ptr().cast(),
                value_sz: c.value.len(),
                datatype: c.datatype,
                predicate: c.predicate,
            })
            .collect();
        let mut status: c_int = 0;
        let mut attrs: *const RawAttribute = std::ptr::null();
        let mut attrs_sz: usize = 0;
        // SAFETY: as in `get`; `raw` and what it points into outlive the
        // search, whose every result the loop below waits for.
        let id = unsafe {
            (self.api.search)(
                self.raw.as_ptr(),
                space.as_ptr(),
                raw.as_ptr(),
                raw.len(),
                &mut status,
                &mut attrs,
                &mut attrs_sz,
            )
        };
        let mut found = Vec::new();
        loop {
            self.finish("search", id, &status)?;
            match status {
                SUCCESS => {
                    found.push(self.take_attrs(attrs, attrs_sz));
                    attrs = std::ptr::null();
                    attrs_sz = 0;
                }
                SEARCHDONE => return Ok(found),
                other => return Err(self.status_error("search", other)),
            }
        }
    }

    /// Waits until operation `id` (the return of the call that started it)
    /// reports; `status` is the operation's own status, set by the library
    /// when the call itself failed (`id < 0`).
    fn finish(&mut self, call: &'static str, id: i64, status: &c_int) -> Result<(), CallError> {
        if id < 0 {
            return Err(self.status_error(call, *status));
        }
        let mut loop_status: c_int = 0;
        // SAFETY: the client is ours and `loop_status` outlives the call.
        let done =
            unsafe { (self.api.loop_)(self.raw.as_ptr(), LOOP_TIMEOUT_MS, &mut loop_status) };
        if done < 0 {
            return Err(self.status_error(call, loop_status));
        }
        if done != id {
            return Err(CallError::OtherOperation {
                call,
                wanted: id,
                got: done,
            });
        }
        Ok(())
    }

    /// Copies the attributes the library returned and frees its array.
    fn take_attrs(&self, attrs: *const RawAttribute, attrs_sz: usize) -> Vec<AttributeOut> {
        if attrs.is_null() {
            return Vec::new();
        }
        // SAFETY: on SUCCESS the library set `attrs` to an array of
        // `attrs_sz` attributes that stays valid until `destroy_attrs`.
        let slice = unsafe { std::slice::from_raw_parts(attrs, attrs_sz) };
        let out = slice
            .iter()
            .map(|a| AttributeOut {
                // SAFETY: attribute names are NUL-terminated strings inside
                // the array's allocation.
                name: unsafe { CStr::from_ptr(a.attr) }
                    .to_string_lossy()
                    .into_owned(),
                datatype: a.datatype,
                value: if a.value_sz == 0 {
                    Vec::new()
                } else {
                    // SAFETY: `value` points at `value_sz` bytes inside the
                    // array's allocation.
                    unsafe { std::slice::from_raw_parts(a.value.cast::<u8>(), a.value_sz) }.to_vec()
                },
            })
            .collect();
        // SAFETY: the array came from this library and is freed once.
        unsafe { (self.api.destroy_attrs)(attrs, attrs_sz) };
        out
    }

    fn status_error(&self, call: &'static str, code: c_int) -> CallError {
        // SAFETY: the client is ours; the message lives in the client until
        // its next call, and is copied here.
        let message = unsafe {
            let m = (self.api.error_message)(self.raw.as_ptr());
            if m.is_null() {
                String::new()
            } else {
                CStr::from_ptr(m).to_string_lossy().into_owned()
            }
        };
        CallError::Status {
            call,
            code,
            name: self.api.returncode_name(code),
            message,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: made by `create`, destroyed once, on the thread that owns it.
        unsafe { (self.api.destroy)(self.raw.as_ptr()) };
    }
}
