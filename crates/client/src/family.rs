//! The operation families of API.md §3.6 on [`Client`] and
//! [`BlockingClient`]: `put`, `put_if_not_exist`, `cond_put`,
//! `cond_put_or_create`, `del`, `cond_del`, `get_partial`, each mutator
//! family as `X`, `cond_X` and `group_X`, `group_put`, `group_del`, group
//! updates and microtransactions.
//!
//! Results (API.md §3.4), the same for every single-key write: an
//! [`Outcome`] — `Done` (SUCCESS, HyperDex's `True`), `NotFound` (no
//! object where one must exist: `None`), or `CmpFail` (nothing changed:
//! `False`) with the precise reason: a predicate failed, the object exists
//! (`put_if_not_exist`), or a mutation could not be applied (overflow,
//! division by zero, a bad document path …; [`crate::CmpFailKind`]).
//! [`Outcome::as_option`] gives HyperDex's `True` / `None` / `False`. Every
//! other status is an error. A group operation returns the number of
//! objects it changed, after every one of those updates has been applied.

use crate::attempt::owned;
use crate::blocking::BlockingClient;
use crate::client::Client;
use crate::error::ClientError;
use crate::ops::{Op, Outcome};
use crate::record::Record;
use tessera_protocol::{NumOp, Status, UpdateFlags};
use tessera_types::{PredOp, Value};

/// The flags of every mutator but the puts: the object must exist.
fn must_exist() -> UpdateFlags {
    UpdateFlags {
        must_exist: true,
        ..UpdateFlags::default()
    }
}

/// The flags of the deletes.
fn erase() -> UpdateFlags {
    UpdateFlags {
        must_exist: true,
        erase: true,
        ..UpdateFlags::default()
    }
}

/// Attribute values of a put as operations.
fn put_ops<K: AsRef<str>>(attrs: impl IntoIterator<Item = (K, Value)>) -> Vec<(String, Op)> {
    attr_ops(attrs, Op::Put)
}

/// One operation per (attribute, operand).
fn attr_ops<K: AsRef<str>>(
    attrs: impl IntoIterator<Item = (K, Value)>,
    make: impl Fn(Value) -> Op,
) -> Vec<(String, Op)> {
    attrs
        .into_iter()
        .map(|(n, v)| (n.as_ref().to_string(), make(v)))
        .collect()
}

/// One operation per (map attribute, map key, operand).
fn map_ops<K: AsRef<str>>(
    mattrs: impl IntoIterator<Item = (K, Vec<(Value, Value)>)>,
    make: impl Fn(Value, Value) -> Op,
) -> Vec<(String, Op)> {
    let mut out = Vec::new();
    for (name, entries) in mattrs {
        for (k, v) in entries {
            out.push((name.as_ref().to_string(), make(k, v)));
        }
    }
    out
}

/// No predicates.
fn always() -> Vec<(String, PredOp)> {
    Vec::new()
}

/// How many per-object updates of a group operation run at once.
const GROUP_IN_FLIGHT: usize = 32;

impl Client {
    /// Creates or updates the object under `key`: the named attributes take
    /// the given values, the others keep theirs (or their type's default on
    /// creation). `Done`, or `CmpFail` when a document-path put cannot be
    /// applied (a path through a non-object); never `NotFound`.
    pub async fn put<K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.put_with(space, key, UpdateFlags::default(), always(), attrs)
            .await
    }

    /// Creates the object only when `key` holds none: `Done`, or `CmpFail`
    /// (kind `Exists`) when it exists.
    pub async fn put_if_not_exist<K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        let flags = UpdateFlags {
            must_not_exist: true,
            ..UpdateFlags::default()
        };
        self.put_with(space, key, flags, always(), attrs).await
    }

    /// Updates the object under `key` only if every predicate holds on it,
    /// atomically: `Done`, `CmpFail` (a predicate failed, or a path put
    /// could not be applied), or `NotFound` when there is no object.
    pub async fn cond_put<K: AsRef<str>, P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.put_with(space, key, must_exist(), owned(predicates), attrs)
            .await
    }

    /// Creates the object if `key` has none (ignoring the predicates),
    /// else updates it only if every predicate holds: `Done` or `CmpFail`.
    pub async fn cond_put_or_create<P: AsRef<str>, K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        let flags = UpdateFlags::default();
        self.put_with(space, key, flags, owned(predicates), attrs)
            .await
    }

    /// A put under `flags`; naming an attribute twice is DUPEATTR.
    async fn put_with<K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        flags: UpdateFlags,
        predicates: Vec<(String, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        let ops = put_ops(attrs);
        self.update(space, key.into(), flags, predicates, ops, true)
            .await
    }

    /// Deletes the object under `key`: `Done`, or `NotFound` when there is
    /// none.
    pub async fn del(&self, space: &str, key: impl Into<Value>) -> Result<Outcome, ClientError> {
        self.update(space, key.into(), erase(), always(), Vec::new(), false)
            .await
    }

    /// Deletes the object under `key` only if every predicate holds:
    /// `Done`, `CmpFail` or `NotFound`.
    pub async fn cond_del<P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Outcome, ClientError> {
        self.update(
            space,
            key.into(),
            erase(),
            owned(predicates),
            Vec::new(),
            false,
        )
        .await
    }

    /// The named attributes of the object under `key` (not the key);
    /// `None` when there is none. Naming the key is DONTUSEKEY; an unknown
    /// name UNKNOWNATTR.
    pub async fn get_partial<N: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        names: impl IntoIterator<Item = N>,
    ) -> Result<Option<Record>, ClientError> {
        let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_string()).collect();
        let desc = self.space(space).await?;
        let indexes = crate::ops::partial_attrs(&desc, &names)?;
        let Some(record) = self.get(space, key).await? else {
            return Ok(None);
        };
        let attrs = indexes
            .into_iter()
            .map(|i| {
                let name = &desc.attrs[i].name;
                let value = record.get(name).cloned().ok_or_else(|| {
                    ClientError::new(Status::ServerError, format!("no value for {name:?}"))
                })?;
                Ok((name.clone(), value))
            })
            .collect::<Result<_, ClientError>>()?;
        Ok(Some(Record {
            version: record.version,
            attrs,
        }))
    }

    /// Puts `attrs` into every object matching the predicates; the count
    /// of objects changed.
    pub async fn group_put<P: AsRef<str>, K: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<u64, ClientError> {
        self.group_execute(space, predicates, put_ops(attrs)).await
    }

    /// Deletes every object matching the predicates (`[]` empties the
    /// space); the count deleted.
    pub async fn group_del<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        self.group_update(space, owned(predicates), erase(), Vec::new())
            .await
    }

    /// Applies `ops` to every object matching the predicates: a search,
    /// then one conditional update per match that re-checks the predicates
    /// at the object's point leader, atomically with its write. Returns
    /// after every per-object update has finished, with the number applied
    /// (objects that stopped matching or vanished meanwhile are not
    /// counted). Not atomic across objects. An error of any per-object
    /// update is returned after the others finish.
    pub async fn group_execute<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: Vec<(String, Op)>,
    ) -> Result<u64, ClientError> {
        self.group_update(space, owned(predicates), must_exist(), ops)
            .await
    }

    async fn group_update(
        &self,
        space: &str,
        predicates: Vec<(String, PredOp)>,
        flags: UpdateFlags,
        ops: Vec<(String, Op)>,
    ) -> Result<u64, ClientError> {
        // Refuse what can be refused before touching anything.
        let desc = self.space(space).await?;
        crate::ops::mutations(&desc, &ops, false)?;
        // Only the keys travel; the point leader re-checks the predicates.
        let mut keys = self.stream(
            space,
            predicates.clone(),
            None,
            None,
            crate::stream::Want::Keys(tessera_protocol::AuthOp::Write),
        );
        let mut tasks = tokio::task::JoinSet::new();
        let mut applied = 0u64;
        let mut first_error = None;
        let mut settle = |r: Result<Result<Outcome, ClientError>, tokio::task::JoinError>| match r {
            Ok(Ok(Outcome::Done)) => applied += 1,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(ClientError::new(Status::Internal, e.to_string()));
            }
        };
        let mut search_error = None;
        while let Some(key) = keys.next_key().await {
            let key = match key {
                Ok(key) => key,
                Err(e) => {
                    search_error = Some(e);
                    break;
                }
            };
            while tasks.len() >= GROUP_IN_FLIGHT {
                if let Some(r) = tasks.join_next().await {
                    settle(r);
                }
            }
            let (client, space, predicates, ops) = (
                self.clone(),
                space.to_string(),
                predicates.clone(),
                ops.clone(),
            );
            tasks.spawn(async move {
                client
                    .update(&space, key, flags, predicates, ops, false)
                    .await
            });
        }
        while let Some(r) = tasks.join_next().await {
            settle(r);
        }
        match search_error.or(first_error) {
            Some(e) => Err(e),
            None => Ok(applied),
        }
    }

    /// A microtransaction on `space`: mutations collected locally (each
    /// checked at once) and committed to one key atomically.
    pub async fn microtransaction(&self, space: &str) -> Result<Microtransaction, ClientError> {
        let desc = self.space(space).await?;
        Ok(Microtransaction {
            client: self.clone(),
            space: space.to_string(),
            desc,
            ops: Vec::new(),
        })
    }
}

/// Several mutations of one key, applied together or not at all
/// (API.md §3.6 "Microtransactions"). A commit creates the object if
/// missing.
pub struct Microtransaction {
    client: Client,
    space: String,
    desc: tessera_types::SpaceDesc,
    ops: Vec<(String, Op)>,
}

impl Microtransaction {
    /// Adds one operation on `name` (an attribute or document path);
    /// WRONGTYPE, UNKNOWNATTR or DONTUSEKEY at once if it cannot apply.
    pub fn add(&mut self, name: &str, op: Op) -> Result<&mut Self, ClientError> {
        crate::ops::mutation(&self.desc, name, &op)?;
        self.ops.push((name.to_string(), op));
        Ok(self)
    }

    /// `put` of each attribute.
    pub fn put<K: AsRef<str>>(
        &mut self,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<&mut Self, ClientError> {
        for (k, v) in attrs {
            self.add(k.as_ref(), Op::Put(v))?;
        }
        Ok(self)
    }

    /// `atomic_OP` of each attribute.
    pub fn atomic<K: AsRef<str>>(
        &mut self,
        op: NumOp,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<&mut Self, ClientError> {
        for (k, v) in attrs {
            self.add(k.as_ref(), Op::Atomic(op, v))?;
        }
        Ok(self)
    }

    /// The space the microtransaction writes to.
    pub fn space(&self) -> &str {
        &self.space
    }

    /// The operations collected so far.
    pub fn ops(&self) -> &[(String, Op)] {
        &self.ops
    }

    /// Applies everything to `key` (creating the object if missing):
    /// `Done`, or `CmpFail` when a mutation cannot be applied.
    pub async fn commit(self, key: impl Into<Value>) -> Result<Outcome, ClientError> {
        self.cond_commit(key, always()).await
    }

    /// Applies everything to `key` if every predicate holds on its object
    /// (a missing object is created, as by `commit`): `Done` or `CmpFail`.
    pub async fn cond_commit<P: AsRef<str>>(
        self,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Outcome, ClientError> {
        self.client
            .update(
                &self.space,
                key.into(),
                UpdateFlags::default(),
                owned(predicates),
                self.ops,
                false,
            )
            .await
    }

    /// Applies everything to each object matching the predicates.
    pub async fn group_commit<P: AsRef<str>>(
        self,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        self.client
            .group_execute(&self.space, predicates, self.ops)
            .await
    }
}

/// `X`, `cond_X` and `group_X` on [`Client`] and [`BlockingClient`] for
/// each listed operation. `$arg` is the operand given per attribute (a
/// value, or map-key → value pairs); `$ops` turns the operands into
/// operations with the operation's `$make`.
macro_rules! family {
    ($arg:ty, $ops:ident; $( $plain:ident, $cond:ident, $group:ident, $doc:literal, $make:expr; )*) => {
        impl Client {
            $(
                #[doc = $doc]
                #[doc = ""]
                #[doc = "On the object under `key`, which must exist: `Done`, `NotFound`, or `CmpFail` when the mutation cannot be applied."]
                pub async fn $plain<K: AsRef<str>>(
                    &self,
                    space: &str,
                    key: impl Into<Value>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<Outcome, ClientError> {
                    self.$cond(space, key, always(), attrs).await
                }

                #[doc = $doc]
                #[doc = ""]
                #[doc = "Only if every predicate holds on the object, atomically; `CmpFail` when one does not."]
                pub async fn $cond<P: AsRef<str>, K: AsRef<str>>(
                    &self,
                    space: &str,
                    key: impl Into<Value>,
                    predicates: impl IntoIterator<Item = (P, PredOp)>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<Outcome, ClientError> {
                    let ops = $ops(attrs, $make);
                    self.update(space, key.into(), must_exist(), owned(predicates), ops, false).await
                }

                #[doc = $doc]
                #[doc = ""]
                #[doc = "On every object matching the predicates; the number changed."]
                pub async fn $group<P: AsRef<str>, K: AsRef<str>>(
                    &self,
                    space: &str,
                    predicates: impl IntoIterator<Item = (P, PredOp)>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<u64, ClientError> {
                    self.group_execute(space, predicates, $ops(attrs, $make)).await
                }
            )*
        }

        impl BlockingClient {
            $(
                #[doc = $doc]
                pub fn $plain<K: AsRef<str>>(
                    &self,
                    space: &str,
                    key: impl Into<Value>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<Outcome, ClientError> {
                    self.block_on(self.client().$plain(space, key, attrs))
                }

                #[doc = $doc]
                pub fn $cond<P: AsRef<str>, K: AsRef<str>>(
                    &self,
                    space: &str,
                    key: impl Into<Value>,
                    predicates: impl IntoIterator<Item = (P, PredOp)>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<Outcome, ClientError> {
                    self.block_on(self.client().$cond(space, key, predicates, attrs))
                }

                #[doc = $doc]
                pub fn $group<P: AsRef<str>, K: AsRef<str>>(
                    &self,
                    space: &str,
                    predicates: impl IntoIterator<Item = (P, PredOp)>,
                    attrs: impl IntoIterator<Item = (K, $arg)>,
                ) -> Result<u64, ClientError> {
                    self.block_on(self.client().$group(space, predicates, attrs))
                }
            )*
        }
    };
}

family! {
    Value, attr_ops;
    atomic_add, cond_atomic_add, group_atomic_add, "Adds the operand (checked for ints).", |v| Op::Atomic(NumOp::Add, v);
    atomic_sub, cond_atomic_sub, group_atomic_sub, "Subtracts the operand (checked for ints).", |v| Op::Atomic(NumOp::Sub, v);
    atomic_mul, cond_atomic_mul, group_atomic_mul, "Multiplies by the operand (checked for ints).", |v| Op::Atomic(NumOp::Mul, v);
    atomic_div, cond_atomic_div, group_atomic_div, "Divides by the operand (truncating for ints; ÷0 fails for ints).", |v| Op::Atomic(NumOp::Div, v);
    atomic_mod, cond_atomic_mod, group_atomic_mod, "Remainder (ints only; ÷0 fails).", |v| Op::Atomic(NumOp::Mod, v);
    atomic_and, cond_atomic_and, group_atomic_and, "Bitwise and (ints only).", |v| Op::Atomic(NumOp::And, v);
    atomic_or, cond_atomic_or, group_atomic_or, "Bitwise or (ints only).", |v| Op::Atomic(NumOp::Or, v);
    atomic_xor, cond_atomic_xor, group_atomic_xor, "Bitwise xor (ints only).", |v| Op::Atomic(NumOp::Xor, v);
    atomic_min, cond_atomic_min, group_atomic_min, "Stores the minimum of the value and the operand.", |v| Op::Atomic(NumOp::Min, v);
    atomic_max, cond_atomic_max, group_atomic_max, "Stores the maximum of the value and the operand.", |v| Op::Atomic(NumOp::Max, v);
    string_prepend, cond_string_prepend, group_string_prepend, "Concatenates the operand at the front.", Op::StringPrepend;
    string_append, cond_string_append, group_string_append, "Concatenates the operand at the back.", Op::StringAppend;
    string_ltrim, cond_string_ltrim, group_string_ltrim, "Drops N bytes from the start (clamped).", Op::StringLtrim;
    string_rtrim, cond_string_rtrim, group_string_rtrim, "Drops N bytes from the end (clamped).", Op::StringRtrim;
    list_lpush, cond_list_lpush, group_list_lpush, "Pushes one element at the front.", Op::ListLpush;
    list_rpush, cond_list_rpush, group_list_rpush, "Pushes one element at the back.", Op::ListRpush;
    set_add, cond_set_add, group_set_add, "Adds one element to a set.", Op::SetAdd;
    set_remove, cond_set_remove, group_set_remove, "Removes one element from a set (absent: no change).", Op::SetRemove;
    set_union, cond_set_union, group_set_union, "Stores the union with the operand set.", Op::SetUnion;
    set_intersect, cond_set_intersect, group_set_intersect, "Stores the intersection with the operand set.", Op::SetIntersect;
    map_remove, cond_map_remove, group_map_remove, "Removes the entry with the given map key (absent: no change).", Op::MapRemove;
    document_rename, cond_document_rename, group_document_rename, "Moves the field at the path to the new path given (relative to the document root); a missing source fails.", Op::DocumentRename;
    document_unset, cond_document_unset, group_document_unset, "Removes the field at the path (the operand is ignored); a missing field fails.", |_: Value| Op::DocumentUnset;
}

family! {
    Vec<(Value, Value)>, map_ops;
    map_add, cond_map_add, group_map_add, "Inserts or overwrites map entries.", Op::MapAdd;
    map_atomic_add, cond_map_atomic_add, group_map_atomic_add, "Adds to the value under each map key (absent: from 0).", |k, v| Op::MapAtomic(NumOp::Add, k, v);
    map_atomic_sub, cond_map_atomic_sub, group_map_atomic_sub, "Subtracts from the value under each map key.", |k, v| Op::MapAtomic(NumOp::Sub, k, v);
    map_atomic_mul, cond_map_atomic_mul, group_map_atomic_mul, "Multiplies the value under each map key.", |k, v| Op::MapAtomic(NumOp::Mul, k, v);
    map_atomic_div, cond_map_atomic_div, group_map_atomic_div, "Divides the value under each map key.", |k, v| Op::MapAtomic(NumOp::Div, k, v);
    map_atomic_mod, cond_map_atomic_mod, group_map_atomic_mod, "Remainder of the value under each map key (int values).", |k, v| Op::MapAtomic(NumOp::Mod, k, v);
    map_atomic_and, cond_map_atomic_and, group_map_atomic_and, "Bitwise and on the value under each map key (int values).", |k, v| Op::MapAtomic(NumOp::And, k, v);
    map_atomic_or, cond_map_atomic_or, group_map_atomic_or, "Bitwise or on the value under each map key (int values).", |k, v| Op::MapAtomic(NumOp::Or, k, v);
    map_atomic_xor, cond_map_atomic_xor, group_map_atomic_xor, "Bitwise xor on the value under each map key (int values).", |k, v| Op::MapAtomic(NumOp::Xor, k, v);
    map_atomic_min, cond_map_atomic_min, group_map_atomic_min, "Minimum of the value under each map key and the operand.", |k, v| Op::MapAtomic(NumOp::Min, k, v);
    map_atomic_max, cond_map_atomic_max, group_map_atomic_max, "Maximum of the value under each map key and the operand.", |k, v| Op::MapAtomic(NumOp::Max, k, v);
    map_string_prepend, cond_map_string_prepend, group_map_string_prepend, "Prepends to the string under each map key (absent: from \"\").", Op::MapStringPrepend;
    map_string_append, cond_map_string_append, group_map_string_append, "Appends to the string under each map key (absent: from \"\").", Op::MapStringAppend;
}

impl BlockingClient {
    /// See [`Client::execute`].
    pub fn execute<P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        flags: UpdateFlags,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: Vec<(String, Op)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(self.client().execute(space, key, flags, predicates, ops))
    }

    /// See [`Client::group_execute`].
    pub fn group_execute<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: Vec<(String, Op)>,
    ) -> Result<u64, ClientError> {
        self.block_on(self.client().group_execute(space, predicates, ops))
    }

    /// See [`Client::get_partial`].
    pub fn get_partial<N: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        names: impl IntoIterator<Item = N>,
    ) -> Result<Option<Record>, ClientError> {
        self.block_on(self.client().get_partial(space, key, names))
    }

    /// See [`Client::cond_put_or_create`].
    pub fn cond_put_or_create<P: AsRef<str>, K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(
            self.client()
                .cond_put_or_create(space, key, predicates, attrs),
        )
    }

    /// See [`Client::cond_del`].
    pub fn cond_del<P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(self.client().cond_del(space, key, predicates))
    }

    /// See [`Client::group_put`].
    pub fn group_put<P: AsRef<str>, K: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<u64, ClientError> {
        self.block_on(self.client().group_put(space, predicates, attrs))
    }

    /// See [`Client::group_del`].
    pub fn group_del<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        self.block_on(self.client().group_del(space, predicates))
    }

    /// See [`Client::put`].
    pub fn put<K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(self.client().put(space, key, attrs))
    }

    /// See [`Client::put_if_not_exist`].
    pub fn put_if_not_exist<K: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(self.client().put_if_not_exist(space, key, attrs))
    }

    /// See [`Client::cond_put`].
    pub fn cond_put<K: AsRef<str>, P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(self.client().cond_put(space, key, predicates, attrs))
    }

    /// See [`Client::del`].
    pub fn del(&self, space: &str, key: impl Into<Value>) -> Result<Outcome, ClientError> {
        self.block_on(self.client().del(space, key))
    }

    /// See [`Client::microtransaction`]; finish it with
    /// [`BlockingClient::commit`], [`BlockingClient::cond_commit`] or
    /// [`BlockingClient::group_commit`].
    pub fn microtransaction(&self, space: &str) -> Result<Microtransaction, ClientError> {
        self.block_on(self.client().microtransaction(space))
    }

    /// See [`Microtransaction::commit`].
    pub fn commit(
        &self,
        tx: Microtransaction,
        key: impl Into<Value>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(tx.commit(key))
    }

    /// See [`Microtransaction::cond_commit`].
    pub fn cond_commit<P: AsRef<str>>(
        &self,
        tx: Microtransaction,
        key: impl Into<Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Outcome, ClientError> {
        self.block_on(tx.cond_commit(key, predicates))
    }

    /// See [`Microtransaction::group_commit`].
    pub fn group_commit<P: AsRef<str>>(
        &self,
        tx: Microtransaction,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        self.block_on(tx.group_commit(predicates))
    }
}
