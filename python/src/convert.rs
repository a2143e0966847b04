//! Python values ↔ Tessera values (API.md §2.2, §2.3 and §0.2), and
//! Python predicate dicts → `(name, PredOp)` lists (API.md §6.1).
//!
//! Python → Tessera: `bytes` and `str` (UTF-8) are strings; `int` (and
//! `bool`) is int64, and an int outside its range raises Python's own
//! `OverflowError`; `float` is float; `list`, `set`/`frozenset` and `dict`
//! are list, set and map, whose elements (keys, values) must be strings,
//! ints or floats, all of one kind; `tessera.client.Document` is a document;
//! `datetime.datetime` is a timestamp (naive = UTC). Anything else is a
//! `TypeError`.
//!
//! Tessera → Python: strings come back as `str` when they are valid UTF-8,
//! else as `bytes`; timestamps as naive UTC `datetime`s; documents as
//! `Document`; list, set and map as `list`, `set` and `dict`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use tessera_client::{PredOp, Record, Value};
use tessera_types::coerce::canonicalize;

/// The pure-Python helpers of `tessera._values`, imported once.
struct Helpers {
    document: Py<PyAny>,
    datetime: Py<PyAny>,
    to_micros: Py<PyAny>,
    from_micros: Py<PyAny>,
}

static HELPERS: GILOnceCell<Helpers> = GILOnceCell::new();

fn helpers(py: Python<'_>) -> PyResult<&Helpers> {
    HELPERS.get_or_try_init(py, || {
        let values = py.import("tessera._values")?;
        let datetime = py.import("datetime")?.getattr("datetime")?;
        Ok(Helpers {
            document: values.getattr("Document")?.unbind(),
            datetime: datetime.unbind(),
            to_micros: values.getattr("_datetime_to_micros")?.unbind(),
            from_micros: values.getattr("_micros_to_datetime")?.unbind(),
        })
    })
}

/// The name of `obj`'s type, for error messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn cannot_convert(obj: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "Cannot convert object to a HyperDex type (a {})",
        type_name(obj)
    ))
}

/// The kind of a container element, for the homogeneity rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Int,
    Float,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::String => "strings",
            Kind::Int => "ints",
            Kind::Float => "floats",
        }
    }
}

/// One element of a list, set or map: a string, int or float.
fn element(obj: &Bound<'_, PyAny>) -> PyResult<(Kind, Value)> {
    let value = scalar(obj)?.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "cannot convert a {} inside a container: elements must be bytes, str, int or float",
            type_name(obj)
        ))
    })?;
    let kind = match value {
        Value::String(_) => Kind::String,
        Value::Int(_) => Kind::Int,
        _ => Kind::Float,
    };
    Ok((kind, value))
}

/// Elements of one container, all of one kind.
fn elements<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    what: &str,
) -> PyResult<Vec<Value>> {
    let mut kind = None;
    let mut out = Vec::new();
    for item in items {
        let (k, v) = element(&item)?;
        match kind {
            None => kind = Some(k),
            Some(first) if first != k => {
                return Err(PyTypeError::new_err(format!(
                    "heterogenous container: {what} mixes {} and {}",
                    first.name(),
                    k.name()
                )))
            }
            Some(_) => {}
        }
        out.push(v);
    }
    Ok(out)
}

/// A string, int or float, or `None` when `obj` is none of them.
fn scalar(obj: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Some(Value::String(b.as_bytes().to_vec())));
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(Some(Value::String(s.to_str()?.as_bytes().to_vec())));
    }
    if obj.is_instance_of::<PyInt>() {
        // `extract` raises OverflowError outside the int64 range.
        return Ok(Some(Value::Int(obj.extract::<i64>()?)));
    }
    if let Ok(f) = obj.downcast::<PyFloat>() {
        return Ok(Some(Value::Float(f.value())));
    }
    Ok(None)
}

/// A Python value as a Tessera value (API.md §2.2).
pub fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Some(v) = scalar(obj)? {
        return Ok(v);
    }
    if let Ok(d) = obj.downcast::<PyDict>() {
        let keys = elements(d.keys().iter(), "a dict's keys")?;
        let values = elements(d.values().iter(), "a dict's values")?;
        return Ok(canonicalize(Value::Map(
            keys.into_iter().zip(values).collect(),
        )));
    }
    if let Ok(l) = obj.downcast::<PyList>() {
        return Ok(Value::List(elements(l.iter(), "a list")?));
    }
    if let Ok(s) = obj.downcast::<PySet>() {
        return Ok(canonicalize(Value::Set(elements(s.iter(), "a set")?)));
    }
    if let Ok(s) = obj.downcast::<PyFrozenSet>() {
        return Ok(canonicalize(Value::Set(elements(s.iter(), "a set")?)));
    }
    let py = obj.py();
    let h = helpers(py)?;
    if obj.is_instance(h.document.bind(py))? {
        let text: String = obj.call_method0("_json")?.extract()?;
        return Ok(Value::Document(text));
    }
    if obj.is_instance(h.datetime.bind(py))? {
        let micros: i64 = h.to_micros.bind(py).call1((obj,))?.extract()?;
        return Ok(Value::Timestamp(micros));
    }
    Err(cannot_convert(obj))
}

/// A Tessera value as a Python value (API.md §2.3).
pub fn to_py(py: Python<'_>, value: &Value) -> PyResult<PyObject> {
    Ok(match value {
        Value::String(b) => match std::str::from_utf8(b) {
            Ok(s) => PyString::new(py, s).into_any().unbind(),
            Err(_) => PyBytes::new(py, b).into_any().unbind(),
        },
        Value::Int(i) => i.into_py_any(py)?,
        Value::Float(f) => f.into_py_any(py)?,
        Value::Timestamp(m) => helpers(py)?.from_micros.bind(py).call1((*m,))?.unbind(),
        Value::Document(text) => helpers(py)?
            .document
            .bind(py)
            .call_method1("_from_json", (text.as_str(),))?
            .unbind(),
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Set(items) => {
            let set = PySet::empty(py)?;
            for item in items {
                set.add(to_py(py, item)?)?;
            }
            set.into_any().unbind()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(to_py(py, k)?, to_py(py, v)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// An object's attributes as a dict (the key included when the record
/// has it: search results do, `get` results do not).
pub fn record_to_py(py: Python<'_>, record: &Record) -> PyResult<PyObject> {
    let dict = PyDict::new(py);
    for (name, value) in &record.attrs {
        dict.set_item(name, to_py(py, value)?)?;
    }
    Ok(dict.into_any().unbind())
}

/// A space or attribute name: `str`, or `bytes` holding UTF-8.
pub fn name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes())
            .map(str::to_string)
            .map_err(|_| PyValueError::new_err("a name given as bytes must be UTF-8"));
    }
    Err(PyTypeError::new_err(format!(
        "a name must be str or bytes, not {}",
        type_name(obj)
    )))
}

/// `(name, value)` pairs of an attributes dict.
pub fn attributes<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let dict = obj.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("attributes must be a dict of attribute name to value")
    })?;
    dict.iter().map(|(k, v)| Ok((name(&k)?, v))).collect()
}

/// The predicates of a dict (API.md §6.1): each entry maps an attribute
/// name (or document path) to a value (equality), a 2-tuple `(lo, hi)` of
/// one type (inclusive range), a predicate object, or a list of these (all
/// must hold).
pub fn predicates(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(String, PredOp)>> {
    let dict = obj.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("predicates must be a dict of attribute name to predicate")
    })?;
    let mut out = Vec::new();
    for (k, v) in dict.iter() {
        let name = name(&k)?;
        predicate(&name, &v, &mut out)?;
    }
    Ok(out)
}

fn predicate(name: &str, obj: &Bound<'_, PyAny>, out: &mut Vec<(String, PredOp)>) -> PyResult<()> {
    if let Ok(list) = obj.downcast::<PyList>() {
        for item in list.iter() {
            predicate(name, &item, out)?;
        }
        return Ok(());
    }
    if let Ok(tuple) = obj.downcast::<PyTuple>() {
        if tuple.len() != 2 {
            return Err(PyValueError::new_err(format!(
                "a range for {name:?} is a 2-tuple (lo, hi), not a {}-tuple",
                tuple.len()
            )));
        }
        let (lo, hi) = (tuple.get_item(0)?, tuple.get_item(1)?);
        if !lo.get_type().is(&hi.get_type()) {
            return Err(PyTypeError::new_err(format!(
                "a range (lo, hi) for {name:?} needs two values of the same type"
            )));
        }
        out.push((name.to_string(), PredOp::Ge(to_value(&lo)?)));
        out.push((name.to_string(), PredOp::Le(to_value(&hi)?)));
        return Ok(());
    }
    if obj.hasattr("_tessera_checks")? {
        let checks = obj.call_method0("_tessera_checks")?;
        for item in checks.try_iter()? {
            let (op, operand): (String, Bound<'_, PyAny>) = item?.extract()?;
            out.push((name.to_string(), pred_op(&op, &operand)?));
        }
        return Ok(());
    }
    out.push((name.to_string(), PredOp::Eq(to_value(obj)?)));
    Ok(())
}

fn pred_op(op: &str, operand: &Bound<'_, PyAny>) -> PyResult<PredOp> {
    let length = || -> PyResult<u64> {
        operand.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "a length predicate needs a non-negative int, not {operand}"
            ))
        })
    };
    Ok(match op {
        "eq" => PredOp::Eq(to_value(operand)?),
        "lt" => PredOp::Lt(to_value(operand)?),
        "le" => PredOp::Le(to_value(operand)?),
        "gt" => PredOp::Gt(to_value(operand)?),
        "ge" => PredOp::Ge(to_value(operand)?),
        "contains" => PredOp::Contains(to_value(operand)?),
        "regex" => match to_value(operand)? {
            Value::String(bytes) => PredOp::Regex(
                String::from_utf8(bytes)
                    .map_err(|_| PyValueError::new_err("a regex pattern must be valid UTF-8"))?,
            ),
            _ => return Err(PyTypeError::new_err("a regex pattern must be str or bytes")),
        },
        "len_eq" => PredOp::LenEq(length()?),
        "len_le" => PredOp::LenLe(length()?),
        "len_ge" => PredOp::LenGe(length()?),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown predicate operator {other:?}"
            )))
        }
    })
}

/// The `(key, value)` pairs of a dict whose keys are values (a map
/// attribute's entries in `map_add` and friends).
pub fn attributes_any<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let dict = obj.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("map operations take a dict of map key to operand per attribute")
    })?;
    Ok(dict.iter().collect())
}
