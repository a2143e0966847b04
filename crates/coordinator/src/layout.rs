//! Layout changes of a live space: the commands that add and remove
//! subspaces and local indexes, `relayout`, and the lifecycle steps that
//! the daemons' backfill reports drive (see `tessera_types::layout`).
//!
//! Every command checks everything before it changes anything: a refused
//! command leaves the state as it was (no epoch, no id handed out). A new
//! part starts *building*; [`ClusterState::part_progress`] marks it *ready*
//! once every region reports its backfill done; a removed part becomes
//! *dropping* and leaves the configuration with
//! [`ClusterState::part_dropped`] one epoch or more later. A `relayout`
//! adds the parts the new description has and the space lacks, and
//! remembers the parts it omits: they start dropping in the epoch in which
//! the last new part becomes ready, so a search always has a ready part at
//! least as good as the old layout.

use crate::placement::{part_unsettled, PlacementError, Placer};
use crate::state::{ClusterState, Command, CommandResult};
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::AdminStatus;
use tessera_types::parse::{parse_space, PARTITIONS_MAX};
use tessera_types::region::{grid_for_partitions, uniform_splits};
use tessera_types::replex::{decl_of_layouts, replex_shapes, PartShape};
use tessera_types::sortkey::order_coordinate;
use tessera_types::{
    DaemonId, DaemonState, DataType, Epoch, GlobalIndexDecl, IndexPart, ParseSpaceError, PartId,
    PartState, Region, RegionId, ReplexDecl, Space, SpaceDesc, SpaceId, SubspaceKind,
    SubspaceLayout, Value,
};

/// Why a layout change was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum LayoutChangeError {
    /// No space has this name.
    #[error("no space named {space:?}")]
    NoSpace {
        /// The name asked for.
        space: String,
    },
    /// The space has no attribute of this name.
    #[error("space {space:?} has no attribute {attr:?}")]
    NoAttribute {
        /// The space.
        space: String,
        /// The attribute asked for.
        attr: String,
    },
    /// A subspace was asked for without attributes.
    #[error("a subspace needs at least one attribute")]
    EmptySubspace,
    /// The key has its own subspace and needs no index.
    #[error("the key {attr:?} cannot be in a subspace or an index: key lookups need neither")]
    KeyAttribute {
        /// The key's name.
        attr: String,
    },
    /// A subspace lists one attribute twice.
    #[error("attribute {attr:?} is repeated in the subspace")]
    RepeatedAttribute {
        /// The attribute.
        attr: String,
    },
    /// The attribute's type has no coordinate, so it cannot be a subspace
    /// dimension.
    #[error("attribute {attr:?} has type {dtype}, which cannot be a subspace dimension (only string, int, float and timestamp can)")]
    NotHashable {
        /// The attribute.
        attr: String,
        /// Its type.
        dtype: DataType,
    },
    /// The attribute's type cannot be indexed this way.
    #[error("attribute {attr:?} has type {dtype}, which a local index cannot hold")]
    Unindexable {
        /// The attribute.
        attr: String,
        /// Its type.
        dtype: DataType,
    },
    /// A document attribute is indexed by a path inside it (`doc.path`).
    #[error("attribute {attr:?} is a document: index a path inside it, as {attr}.field")]
    DocumentWithoutPath {
        /// The attribute.
        attr: String,
    },
    /// Only documents have paths.
    #[error("attribute {attr:?} is not a document, so {attr}.{path} names nothing")]
    PathOnNonDocument {
        /// The attribute.
        attr: String,
        /// The path given.
        path: String,
    },
    /// The space has this subspace already (same attributes, any order of
    /// building or ready; a dropping one does not count).
    #[error("space {space:?} already has subspace {part} on these attributes")]
    DuplicateSubspace {
        /// The space.
        space: String,
        /// The existing subspace's id.
        part: PartId,
    },
    /// The space has this index already.
    #[error("space {space:?} already has index {part} on {attr}")]
    DuplicateIndex {
        /// The space.
        space: String,
        /// The existing index's id.
        part: PartId,
        /// What it indexes.
        attr: String,
    },
    /// The key subspace is where every object lives; it cannot go.
    #[error("subspace 0 is the key subspace, which cannot be removed")]
    KeySubspace,
    /// The space has no subspace with this id (or it is dropping already).
    #[error("space {space:?} has no subspace {part}")]
    NoSubspace {
        /// The space.
        space: String,
        /// The id asked for.
        part: PartId,
    },
    /// The space (or, unnamed, no space) has no index with this id (or it
    /// is dropping already).
    #[error("no index {part}")]
    NoIndex {
        /// The id asked for.
        part: PartId,
    },
    /// Index ids are per space, and several spaces have this one: name the
    /// space (or pass the `Index` object `list_indices` returned).
    #[error("index {part} exists in several spaces ({spaces:?}); name the space")]
    AmbiguousIndex {
        /// The id asked for.
        part: PartId,
        /// The spaces that have it.
        spaces: Vec<String>,
    },
    /// HyperDex refuses to drop an index a subspace relies on.
    #[error(
        "index {part} is on {attr:?}, which subspace {subspace} uses; remove the subspace first"
    )]
    IndexUsedBySubspace {
        /// The index.
        part: PartId,
        /// Its attribute.
        attr: String,
        /// The subspace that uses the attribute.
        subspace: PartId,
    },
    /// A global index orders values, so its attribute must be a string,
    /// an int, a float or a timestamp.
    #[error("attribute {attr:?} has type {dtype}, which a global index cannot order (only string, int, float and timestamp can)")]
    Unorderable {
        /// The attribute.
        attr: String,
        /// Its type.
        dtype: DataType,
    },
    /// A global index holds whole attributes; a path inside a document
    /// has no global index (a local path index serves it).
    #[error("a global index cannot be on a path inside a document ({attr}); use a local index")]
    GlobalOnPath {
        /// What was asked for.
        attr: String,
    },
    /// The space has a global index on this attribute already.
    #[error("space {space:?} already has global index {part} on {attr}")]
    DuplicateGlobalIndex {
        /// The space.
        space: String,
        /// The existing index's id.
        part: PartId,
        /// Its attribute.
        attr: String,
    },
    /// The space has no global index on this attribute (or it is dropping
    /// already).
    #[error("space {space:?} has no global index on {attr}")]
    NoGlobalIndex {
        /// The space.
        space: String,
        /// The attribute asked for.
        attr: String,
    },
    /// A split value that is not one of the indexed attribute's type.
    #[error(
        "cannot split the global index on {attr} ({dtype}) at {value:?}: not a value of that type"
    )]
    SplitValue {
        /// The indexed attribute.
        attr: String,
        /// Its type.
        dtype: DataType,
        /// The value given.
        value: String,
    },
    /// Every value given is already a cut of the index.
    #[error("the global index on {attr} is already cut at every value given")]
    NothingToSplit {
        /// The indexed attribute.
        attr: String,
    },
    /// A split of this index is being built; one at a time.
    #[error("a split of the global index on {attr} is being built (part {part})")]
    SplitInProgress {
        /// The indexed attribute.
        attr: String,
        /// The building index.
        part: PartId,
    },
    /// `create 0 partitions`, or more than the most a space may have.
    #[error("a global index needs 1 to {max} indexlets, not {asked}")]
    Indexlets {
        /// What was asked for.
        asked: u32,
        /// The most allowed.
        max: u32,
    },
    /// The description given to `relayout` does not parse.
    #[error("the new description is not valid")]
    BadDescription(#[source] ParseSpaceError),
    /// `relayout` keeps a space's identity: name, key, attributes, fault
    /// tolerance and authorization; only subspaces and indexes change.
    #[error(
        "relayout cannot change the space's {what}; only subspaces, replexes, hybrids and \
         indexes may change{hint}"
    )]
    RelayoutChangesSpace {
        /// What differs: `name`, `key`, `attributes`, ...
        what: &'static str,
        /// How to keep it, when a description may change it by omission
        /// (a default), else empty.
        hint: String,
    },
    /// No daemon can hold the new part's regions.
    #[error("cannot place the new part's regions")]
    Placement(#[source] PlacementError),
    /// A replex space has replexes, not subspaces or global indexes; its
    /// replexes and hybrids change by `relayout`.
    #[error(
        "space {space:?} is a replex space: it has no subspaces or global indexes; change its \
         replexes and hybrids with `relayout` (local indexes change as anywhere)"
    )]
    ReplexSpace {
        /// The space.
        space: String,
    },
    /// `relayout` keeps a replex space a replex space and any other space
    /// a space of subspaces: their copies are replicated differently (one
    /// daemon per region, against f + 1).
    #[error(
        "relayout cannot turn space {space:?} {}; create a new space with the new description \
         and copy the objects",
        if *to_replex { "into a replex space" } else { "from a replex space into a space of subspaces" }
    )]
    ReplexConversion {
        /// The space.
        space: String,
        /// Whether the new description is a replex space's.
        to_replex: bool,
    },
}

impl LayoutChangeError {
    /// The status the admin API answers with (API.md §7.1).
    pub fn status(&self) -> AdminStatus {
        use LayoutChangeError::*;
        match self {
            NoSpace { .. }
            | NoAttribute { .. }
            | NoSubspace { .. }
            | NoIndex { .. }
            | NoGlobalIndex { .. } => AdminStatus::NotFound,
            DuplicateSubspace { .. } | DuplicateIndex { .. } | DuplicateGlobalIndex { .. } => {
                AdminStatus::Duplicate
            }
            Unorderable { .. }
            | GlobalOnPath { .. }
            | Indexlets { .. }
            | SplitValue { .. }
            | NothingToSplit { .. } => AdminStatus::BadSpace,
            SplitInProgress { .. } => AdminStatus::CoordFail,
            EmptySubspace
            | KeyAttribute { .. }
            | RepeatedAttribute { .. }
            | NotHashable { .. }
            | BadDescription(_)
            | RelayoutChangesSpace { .. } => AdminStatus::BadSpace,
            Unindexable { .. }
            | DocumentWithoutPath { .. }
            | PathOnNonDocument { .. }
            | KeySubspace
            | IndexUsedBySubspace { .. }
            | AmbiguousIndex { .. }
            | Placement(_)
            | ReplexSpace { .. } => AdminStatus::CoordFail,
            ReplexConversion { .. } => AdminStatus::BadSpace,
        }
    }
}

impl From<LayoutChangeError> for CommandResult {
    fn from(e: LayoutChangeError) -> Self {
        // The reason keeps the whole chain of causes, so a BADSPACE names
        // the line and column the parser found.
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            reason.push_str(": ");
            reason.push_str(&cause.to_string());
            source = cause.source();
        }
        CommandResult::Failed {
            status: e.status(),
            reason,
        }
    }
}

/// An index asked for by `attr` or `docattr.path`, resolved.
struct IndexTarget {
    attr: usize,
    path: Option<String>,
}

/// Names a global index in the description, once per attribute: while a
/// dropping index (or a split's old part) is still there, a new one on the
/// same attribute only takes over its indexlet count.
fn name_global_index(desc: &mut SpaceDesc, decl: GlobalIndexDecl) {
    match desc.global_indexes.iter_mut().find(|g| g.attr == decl.attr) {
        Some(named) => *named = decl,
        None => desc.global_indexes.push(decl),
    }
}

/// Whether a part counts for duplicates and relayouts: a dropping part is
/// on its way out and may be added again.
fn live(state: PartState) -> bool {
    state != PartState::Dropping
}

impl ClusterState {
    fn space_index(&self, name: &str) -> Result<usize, LayoutChangeError> {
        self.spaces
            .iter()
            .position(|s| s.desc.name == name)
            .ok_or_else(|| LayoutChangeError::NoSpace {
                space: name.to_string(),
            })
    }

    /// The position of space `name`, refusing a replex space (see
    /// [`LayoutChangeError::ReplexSpace`]).
    fn plain_space_index(&self, name: &str) -> Result<usize, LayoutChangeError> {
        let si = self.space_index(name)?;
        if self.spaces[si].desc.replex.is_some() {
            return Err(LayoutChangeError::ReplexSpace {
                space: name.to_string(),
            });
        }
        Ok(si)
    }

    fn placer(&self) -> Result<Placer, LayoutChangeError> {
        let available = self
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .map(|d| d.id);
        Placer::new(available, &self.spaces).map_err(LayoutChangeError::Placement)
    }

    /// A part id `space` has never used (1, 2, …; 0 is the key subspace).
    pub(crate) fn fresh_part(&mut self, space: SpaceId) -> PartId {
        let next = self.part_id_next.entry(space).or_insert(1);
        let id = PartId(*next);
        *next += 1;
        id
    }

    /// A layout for a subspace on `attrs` of a space with `desc`'s
    /// partitions and tolerance, regions numbered from the region counter.
    pub(crate) fn new_layout(
        &mut self,
        desc: &SpaceDesc,
        attrs: Vec<usize>,
        part: PartId,
        state: PartState,
        placer: &mut Placer,
    ) -> SubspaceLayout {
        let splits: Vec<Vec<u64>> = if part == PartId(0) {
            vec![uniform_splits(desc.partitions)]
        } else {
            grid_for_partitions(desc.partitions, attrs.len())
                .into_iter()
                .map(uniform_splits)
                .collect()
        };
        self.place_layout(
            desc,
            attrs,
            splits,
            part,
            state,
            SubspaceKind::Subspace,
            placer,
        )
    }

    /// The layout of global index `decl`: one dimension, the attribute's
    /// order coordinate, cut into `decl`'s indexlet count. The cuts are
    /// uniform over the coordinate axis until splits move them to where
    /// the data lies (`docs/design/global-indexes.md`).
    pub(crate) fn new_global_layout(
        &mut self,
        desc: &SpaceDesc,
        decl: GlobalIndexDecl,
        part: PartId,
        state: PartState,
        placer: &mut Placer,
    ) -> SubspaceLayout {
        let splits = vec![uniform_splits(decl.indexlets(desc))];
        self.place_layout(
            desc,
            vec![decl.attr],
            splits,
            part,
            state,
            SubspaceKind::GlobalIndex,
            placer,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn place_layout(
        &mut self,
        desc: &SpaceDesc,
        attrs: Vec<usize>,
        splits: Vec<Vec<u64>>,
        part: PartId,
        state: PartState,
        kind: SubspaceKind,
        placer: &mut Placer,
    ) -> SubspaceLayout {
        let replicas = desc.replicas_per_region();
        // The grid's cells: the product of each dimension's intervals.
        let cells: usize = splits.iter().map(|s| s.len() + 1).product();
        let regions = placer
            .place_subspace(cells, replicas)
            .into_iter()
            .map(|chain| {
                let id = RegionId(self.region_id_next);
                self.region_id_next += 1;
                Region { id, chain }
            })
            .collect();
        SubspaceLayout {
            attrs,
            splits,
            regions,
            part,
            state,
            kind,
        }
    }

    /// Resolves a subspace's attribute names against `desc`.
    fn subspace_attrs(desc: &SpaceDesc, names: &[String]) -> Result<Vec<usize>, LayoutChangeError> {
        if names.is_empty() {
            return Err(LayoutChangeError::EmptySubspace);
        }
        let mut attrs = Vec::with_capacity(names.len());
        for name in names {
            let i = desc
                .attr_index(name)
                .ok_or_else(|| LayoutChangeError::NoAttribute {
                    space: desc.name.clone(),
                    attr: name.clone(),
                })?;
            if i == 0 {
                return Err(LayoutChangeError::KeyAttribute { attr: name.clone() });
            }
            let dtype = desc.attrs[i].dtype;
            if !dtype.is_hashable() {
                return Err(LayoutChangeError::NotHashable {
                    attr: name.clone(),
                    dtype,
                });
            }
            if attrs.contains(&i) {
                return Err(LayoutChangeError::RepeatedAttribute { attr: name.clone() });
            }
            attrs.push(i);
        }
        Ok(attrs)
    }

    /// Resolves `attr` or `docattr.path` against `desc` (API.md §7.1
    /// `add_index`). The attribute's own name wins over a path reading,
    /// so an attribute whose name holds no dot is never split.
    fn index_target(desc: &SpaceDesc, spec: &str) -> Result<IndexTarget, LayoutChangeError> {
        let (attr, path) = match desc.attr_index(spec) {
            Some(i) => (i, None),
            None => match spec.split_once('.') {
                Some((name, path)) if desc.attr_index(name).is_some() => (
                    desc.attr_index(name).expect("checked"),
                    Some(path.to_string()),
                ),
                _ => {
                    return Err(LayoutChangeError::NoAttribute {
                        space: desc.name.clone(),
                        attr: spec.to_string(),
                    })
                }
            },
        };
        let name = desc.attrs[attr].name.clone();
        let dtype = desc.attrs[attr].dtype;
        if attr == 0 {
            return Err(LayoutChangeError::KeyAttribute { attr: name });
        }
        match (dtype, path) {
            (DataType::Document, None) => {
                Err(LayoutChangeError::DocumentWithoutPath { attr: name })
            }
            (DataType::Document, Some(path)) if path.is_empty() => {
                Err(LayoutChangeError::DocumentWithoutPath { attr: name })
            }
            (DataType::Document, Some(path)) => Ok(IndexTarget {
                attr,
                path: Some(path),
            }),
            (_, Some(path)) => Err(LayoutChangeError::PathOnNonDocument { attr: name, path }),
            (dtype, None) if !dtype.is_hashable() => {
                Err(LayoutChangeError::Unindexable { attr: name, dtype })
            }
            (_, None) => Ok(IndexTarget { attr, path: None }),
        }
    }

    /// `add-subspace`: a new building subspace on `attrs` (names).
    pub(crate) fn add_subspace(
        &mut self,
        space: &str,
        attrs: &[String],
    ) -> Result<PartId, LayoutChangeError> {
        let si = self.plain_space_index(space)?;
        let desc = self.spaces[si].desc.clone();
        let attrs = Self::subspace_attrs(&desc, attrs)?;
        if let Some(existing) = self.spaces[si]
            .subspaces
            .iter()
            .find(|l| live(l.state) && l.attrs == attrs && l.kind == SubspaceKind::Subspace)
        {
            return Err(LayoutChangeError::DuplicateSubspace {
                space: space.to_string(),
                part: existing.part,
            });
        }
        let mut placer = self.placer()?;
        let part = self.fresh_part(self.spaces[si].id);
        let layout = self.new_layout(
            &desc,
            attrs.clone(),
            part,
            PartState::Building { progress: 0 },
            &mut placer,
        );
        let space = &mut self.spaces[si];
        space.desc.subspaces.push(attrs);
        space.subspaces.push(layout);
        self.bump();
        Ok(part)
    }

    /// Resolves a global index's attribute against `desc`.
    fn global_target(desc: &SpaceDesc, attr: &str) -> Result<usize, LayoutChangeError> {
        let Some(i) = desc.attr_index(attr) else {
            return Err(match attr.split_once('.') {
                Some((doc, _)) if desc.attr_index(doc).is_some() => {
                    LayoutChangeError::GlobalOnPath {
                        attr: attr.to_string(),
                    }
                }
                _ => LayoutChangeError::NoAttribute {
                    space: desc.name.clone(),
                    attr: attr.to_string(),
                },
            });
        };
        if i == 0 {
            return Err(LayoutChangeError::KeyAttribute {
                attr: attr.to_string(),
            });
        }
        let dtype = desc.attrs[i].dtype;
        if !dtype.is_hashable() {
            return Err(LayoutChangeError::Unorderable {
                attr: attr.to_string(),
                dtype,
            });
        }
        Ok(i)
    }

    /// `add-index --global`: a new building global index on `attr` with
    /// `partitions` indexlets (default: the space's partitions).
    pub(crate) fn add_global_index(
        &mut self,
        space: &str,
        attr: &str,
        partitions: Option<u32>,
    ) -> Result<PartId, LayoutChangeError> {
        let si = self.plain_space_index(space)?;
        let desc = self.spaces[si].desc.clone();
        let i = Self::global_target(&desc, attr)?;
        if let Some(asked) = partitions.filter(|n| *n == 0 || *n > PARTITIONS_MAX) {
            return Err(LayoutChangeError::Indexlets {
                asked,
                max: PARTITIONS_MAX,
            });
        }
        if let Some(existing) = self.spaces[si]
            .subspaces
            .iter()
            .find(|l| l.kind == SubspaceKind::GlobalIndex && live(l.state) && l.attrs == [i])
        {
            return Err(LayoutChangeError::DuplicateGlobalIndex {
                space: space.to_string(),
                part: existing.part,
                attr: attr.to_string(),
            });
        }
        let mut placer = self.placer()?;
        let part = self.fresh_part(self.spaces[si].id);
        let decl = GlobalIndexDecl {
            attr: i,
            partitions,
        };
        let layout = self.new_global_layout(
            &desc,
            decl,
            part,
            PartState::Building { progress: 0 },
            &mut placer,
        );
        let space = &mut self.spaces[si];
        name_global_index(&mut space.desc, decl);
        space.subspaces.push(layout);
        self.bump();
        Ok(part)
    }

    /// `rm-index --global`: the global index on `attr` starts dropping
    /// (with the split of it being built, if any).
    pub(crate) fn rm_global_index(
        &mut self,
        space: &str,
        attr: &str,
    ) -> Result<(), LayoutChangeError> {
        let si = self.plain_space_index(space)?;
        let i = Self::global_target(&self.spaces[si].desc, attr)?;
        let parts: Vec<PartId> = self.spaces[si]
            .subspaces
            .iter_mut()
            .filter(|l| l.kind == SubspaceKind::GlobalIndex && live(l.state) && l.attrs == [i])
            .map(|layout| {
                layout.state = PartState::Dropping;
                layout.part
            })
            .collect();
        if parts.is_empty() {
            return Err(LayoutChangeError::NoGlobalIndex {
                space: space.to_string(),
                attr: attr.to_string(),
            });
        }
        for part in parts {
            self.forget_pending_drop(si, part);
        }
        self.bump();
        Ok(())
    }

    /// `split-index`: the global index on `attr` is cut again at `at` (and
    /// where it is cut already). The new cuts make a new global index part,
    /// built like any (the point leaders walk their keys through it) while
    /// the old one serves every lookup; the epoch that makes it ready drops
    /// the old one, so no lookup ever reads a part that is incomplete, and
    /// a lookup running across that epoch continues on the new indexlets
    /// after what it returned (their order is the same). Moving a hot
    /// indexlet is the same command with the cuts it already has: its
    /// indexlets get fresh placements.
    pub(crate) fn split_global_index(
        &mut self,
        space: &str,
        attr: &str,
        at: &[String],
    ) -> Result<PartId, LayoutChangeError> {
        let si = self.plain_space_index(space)?;
        let desc = self.spaces[si].desc.clone();
        let i = Self::global_target(&desc, attr)?;
        let indexed = self.spaces[si]
            .subspaces
            .iter()
            .any(|l| l.kind == SubspaceKind::GlobalIndex && live(l.state) && l.attrs == [i]);
        if !indexed {
            return Err(LayoutChangeError::NoGlobalIndex {
                space: space.to_string(),
                attr: attr.to_string(),
            });
        }
        let dtype = desc.attrs[i].dtype;
        let mut cuts = Vec::with_capacity(at.len());
        for text in at {
            let parsed = match dtype {
                DataType::String => Some(Value::String(text.as_bytes().to_vec())),
                DataType::Int => text.trim().parse().ok().map(Value::Int),
                DataType::Timestamp(_) => text.trim().parse().ok().map(Value::Timestamp),
                DataType::Float => text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| !f.is_nan())
                    .map(Value::Float),
                _ => None,
            };
            let coerced = parsed.ok_or_else(|| LayoutChangeError::SplitValue {
                attr: attr.to_string(),
                dtype,
                value: text.clone(),
            })?;
            cuts.extend(order_coordinate(&coerced));
        }
        self.split_cuts(si, i, &cuts)
    }

    /// `SplitGlobalIndexAt`: global index `part` of space `space` is cut
    /// again at `cuts` (order coordinates), as `split-index` does; the
    /// leader proposes it for indexlets grown past their threshold.
    pub(crate) fn split_global_index_at(
        &mut self,
        space: SpaceId,
        part: PartId,
        cuts: &[u64],
    ) -> Result<PartId, LayoutChangeError> {
        let si = self
            .spaces
            .iter()
            .position(|s| s.id == space)
            .ok_or_else(|| LayoutChangeError::NoSpace {
                space: space.to_string(),
            })?;
        let attr = self.spaces[si]
            .subspaces
            .iter()
            .find(|l| l.part == part && l.kind == SubspaceKind::GlobalIndex && live(l.state))
            .and_then(|l| l.attrs.first().copied())
            .ok_or_else(|| LayoutChangeError::NoSubspace {
                space: self.spaces[si].desc.name.clone(),
                part,
            })?;
        self.split_cuts(si, attr, cuts)
    }

    /// The split itself: a new building part on attribute `i` of space
    /// `si`, cut where the live one is and at `cuts`; the live one drops in
    /// the epoch that makes the new one ready.
    fn split_cuts(
        &mut self,
        si: usize,
        i: usize,
        cuts: &[u64],
    ) -> Result<PartId, LayoutChangeError> {
        let desc = self.spaces[si].desc.clone();
        let attr = desc.attrs[i].name.clone();
        let layouts: Vec<&SubspaceLayout> = self.spaces[si]
            .subspaces
            .iter()
            .filter(|l| l.kind == SubspaceKind::GlobalIndex && live(l.state) && l.attrs == [i])
            .collect();
        // One live part per attribute but while a split builds.
        if let Some(building) = layouts
            .iter()
            .find(|l| !l.state.is_ready())
            .or(layouts.get(1))
        {
            return Err(LayoutChangeError::SplitInProgress {
                attr,
                part: building.part,
            });
        }
        let Some(old) = layouts.first() else {
            return Err(LayoutChangeError::NoGlobalIndex {
                space: desc.name.clone(),
                attr,
            });
        };
        let old_splits = old.splits.first().cloned().unwrap_or_default();
        let mut splits: BTreeSet<u64> = old_splits.iter().copied().collect();
        // A cut at coordinate 0 would leave the first indexlet empty.
        splits.extend(cuts.iter().copied().filter(|c| *c > 0));
        let splits: Vec<u64> = splits.into_iter().collect();
        if splits == old_splits && !cuts.is_empty() {
            return Err(LayoutChangeError::NothingToSplit { attr });
        }
        let asked = u32::try_from(splits.len() + 1).unwrap_or(u32::MAX);
        if asked > PARTITIONS_MAX {
            return Err(LayoutChangeError::Indexlets {
                asked,
                max: PARTITIONS_MAX,
            });
        }
        let mut placer = self.placer()?;
        let part = self.fresh_part(self.spaces[si].id);
        let layout = self.place_layout(
            &desc,
            vec![i],
            vec![splits],
            part,
            PartState::Building { progress: 0 },
            SubspaceKind::GlobalIndex,
            &mut placer,
        );
        let space = &mut self.spaces[si];
        // The description names the index once; it keeps the count of
        // indexlets (a restore recreates that many, cut uniformly).
        if let Some(decl) = space.desc.global_indexes.iter_mut().find(|g| g.attr == i) {
            decl.partitions = Some(asked);
        }
        // The old part drops when this one is ready (`replace_split`).
        space.subspaces.push(layout);
        self.bump();
        Ok(part)
    }

    /// `rm-subspace`: subspace `part` starts dropping.
    pub(crate) fn rm_subspace(
        &mut self,
        space: &str,
        part: PartId,
    ) -> Result<(), LayoutChangeError> {
        let si = self.plain_space_index(space)?;
        if part == PartId(0) {
            return Err(LayoutChangeError::KeySubspace);
        }
        let layout = self.spaces[si]
            .subspaces
            .iter_mut()
            .skip(1)
            .find(|l| l.part == part && live(l.state) && l.kind == SubspaceKind::Subspace)
            .ok_or_else(|| LayoutChangeError::NoSubspace {
                space: space.to_string(),
                part,
            })?;
        layout.state = PartState::Dropping;
        self.forget_pending_drop(si, part);
        self.bump();
        Ok(())
    }

    /// `add-index`: a new building local index on `attr` (or `doc.path`).
    pub(crate) fn add_index(
        &mut self,
        space: &str,
        attr: &str,
    ) -> Result<PartId, LayoutChangeError> {
        let si = self.space_index(space)?;
        let target = Self::index_target(&self.spaces[si].desc, attr)?;
        if let Some(existing) = self.spaces[si]
            .indexes
            .iter()
            .find(|ix| live(ix.state) && ix.attr == target.attr && ix.path == target.path)
        {
            return Err(LayoutChangeError::DuplicateIndex {
                space: space.to_string(),
                part: existing.id,
                attr: attr.to_string(),
            });
        }
        let part = self.fresh_part(self.spaces[si].id);
        let space = &mut self.spaces[si];
        if target.path.is_none() {
            space.desc.indexes.push(target.attr);
        }
        space.indexes.push(IndexPart {
            id: part,
            attr: target.attr,
            path: target.path,
            state: PartState::Building { progress: 0 },
        });
        self.bump();
        Ok(part)
    }

    /// `rm-index`: index `part` of `space` starts dropping; without a
    /// space, of the one space that has a live index `part`.
    pub(crate) fn rm_index(
        &mut self,
        space: Option<&str>,
        part: PartId,
    ) -> Result<(), LayoutChangeError> {
        let only = match space {
            Some(name) => Some(self.space_index(name)?),
            None => None,
        };
        let found: Vec<(usize, usize)> = self
            .spaces
            .iter()
            .enumerate()
            .filter(|(si, _)| only.is_none_or(|o| o == *si))
            .filter_map(|(si, s)| {
                s.indexes
                    .iter()
                    .position(|ix| ix.id == part && live(ix.state))
                    .map(|ii| (si, ii))
            })
            .collect();
        let (si, ii) = match found.as_slice() {
            [] => return Err(LayoutChangeError::NoIndex { part }),
            [one] => *one,
            several => {
                return Err(LayoutChangeError::AmbiguousIndex {
                    part,
                    spaces: several
                        .iter()
                        .map(|&(si, _)| self.spaces[si].desc.name.clone())
                        .collect(),
                })
            }
        };
        let space = &self.spaces[si];
        let index = &space.indexes[ii];
        if index.path.is_none() {
            if let Some(sub) = space.subspaces.iter().skip(1).find(|l| {
                live(l.state) && l.kind == SubspaceKind::Subspace && l.attrs.contains(&index.attr)
            }) {
                return Err(LayoutChangeError::IndexUsedBySubspace {
                    part,
                    attr: space.desc.attrs[index.attr].name.clone(),
                    subspace: sub.part,
                });
            }
        }
        self.spaces[si].indexes[ii].state = PartState::Dropping;
        self.forget_pending_drop(si, part);
        self.bump();
        Ok(())
    }

    /// `relayout`: builds every part of `description` the space lacks, and
    /// drops the parts it omits once the new ones are ready (at once when
    /// nothing new is building).
    pub(crate) fn relayout(
        &mut self,
        space: &str,
        description: &str,
    ) -> Result<(), LayoutChangeError> {
        let si = self.space_index(space)?;
        let new = parse_space(description).map_err(LayoutChangeError::BadDescription)?;
        let old = &self.spaces[si].desc;
        if old.replex.is_some() != new.replex.is_some() {
            return Err(LayoutChangeError::ReplexConversion {
                space: space.to_string(),
                to_replex: new.replex.is_some(),
            });
        }
        let replex_differs = |old: &ReplexDecl, new: &ReplexDecl| {
            if old.relaxed != new.relaxed {
                Some("placement (`with relaxed placement`)")
            } else {
                None
            }
        };
        let differs = if new.name != old.name {
            Some("name")
        } else if new.attrs.first() != old.attrs.first() {
            Some("key")
        } else if new.attrs != old.attrs {
            Some("attributes")
        } else if new.fault_tolerance != old.fault_tolerance {
            Some("fault tolerance")
        } else if new.authorization != old.authorization {
            Some("authorization")
        } else if let (Some(o), Some(n)) = (&old.replex, &new.replex) {
            // A replex space's parts are cut by its partitions, and a
            // hybrid's groups divide them: they stay.
            if new.partitions != old.partitions {
                Some("partitions")
            } else {
                replex_differs(o, n)
            }
        } else {
            None
        };
        if let Some(what) = differs {
            // Without `tolerate` a description takes the default (in a
            // replex space, copies − 1): say how to keep the space's.
            let hint = if what == "fault tolerance" {
                let f = old.fault_tolerance;
                format!(
                    " (the space tolerates {f}, the description {}; write `tolerate {f} \
                     failure{}` to keep it)",
                    new.fault_tolerance,
                    if f == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            };
            return Err(LayoutChangeError::RelayoutChangesSpace { what, hint });
        }
        let current = &self.spaces[si];
        let has = |kind: SubspaceKind, attrs: &[usize]| {
            current
                .subspaces
                .iter()
                .any(|l| live(l.state) && l.kind == kind && l.attrs == attrs)
        };
        let missing_subspaces: Vec<Vec<usize>> = new
            .subspaces
            .iter()
            .filter(|attrs| !has(SubspaceKind::Subspace, attrs))
            .cloned()
            .collect();
        let missing_globals: Vec<GlobalIndexDecl> = new
            .global_indexes
            .iter()
            .filter(|g| !has(SubspaceKind::GlobalIndex, &[g.attr]))
            .copied()
            .collect();
        // A replex space's replexes and hybrids, each as the new
        // description cuts it (kind, attributes and cuts name a part).
        let new_shapes = replex_shapes(&new);
        let shaped = |l: &SubspaceLayout, s: &PartShape| {
            l.kind == s.kind && l.attrs == s.attrs && l.splits == s.splits
        };
        // Replexes before hybrids: a replex may share objects with every
        // region of another replex, a hybrid region only with some, so
        // the replexes take their daemons first (as a new space's do).
        let mut missing_shapes: Vec<PartShape> = new_shapes
            .iter()
            .skip(1)
            .filter(|s| {
                !current
                    .subspaces
                    .iter()
                    .any(|l| live(l.state) && shaped(l, s))
            })
            .cloned()
            .collect();
        missing_shapes.sort_by_key(|s| s.kind == SubspaceKind::Hybrid);
        let missing_indexes: Vec<usize> = new
            .indexes
            .iter()
            .filter(|&&a| {
                !current
                    .indexes
                    .iter()
                    .any(|ix| live(ix.state) && ix.path.is_none() && ix.attr == a)
            })
            .copied()
            .collect();
        let kept = |l: &SubspaceLayout| match l.kind {
            SubspaceKind::Subspace => new.subspaces.contains(&l.attrs),
            SubspaceKind::GlobalIndex => new.global_indexes.iter().any(|g| l.attrs == [g.attr]),
            SubspaceKind::Replex | SubspaceKind::Hybrid => new_shapes.iter().any(|s| shaped(l, s)),
        };
        let mut omitted: BTreeSet<PartId> = current
            .subspaces
            .iter()
            .skip(1)
            .filter(|l| live(l.state) && !kept(l))
            .map(|l| l.part)
            .collect();
        omitted.extend(
            current
                .indexes
                .iter()
                .filter(|ix| {
                    live(ix.state) && (ix.path.is_some() || !new.indexes.contains(&ix.attr))
                })
                .map(|ix| ix.id),
        );
        if missing_subspaces.is_empty()
            && missing_globals.is_empty()
            && missing_shapes.is_empty()
            && missing_indexes.is_empty()
            && omitted.is_empty()
        {
            return Ok(());
        }
        // New replexes and hybrids: one daemon per region, beside no
        // region able to hold the same object where a daemon allows (the
        // rest move before the part is ready, see `repair`).
        let mut next_region = RegionId(self.region_id_next);
        let mut added: Vec<SubspaceLayout> = missing_shapes
            .into_iter()
            .map(|shape| {
                // The part id is given below, once nothing can fail.
                shape.into_layout(
                    PartId(0),
                    PartState::Building { progress: 0 },
                    &mut next_region,
                )
            })
            .collect();
        if !added.is_empty() {
            let mut placer = self.placer()?;
            let beside = placer.place_added_replex_parts(
                &self.spaces[si],
                &mut added,
                &self.rebuilds,
                &self.transfers,
            );
            if beside > 0 {
                tracing::warn!(
                    space,
                    regions = beside,
                    "relayout: new regions sit beside other copies of their objects until \
                     daemons that may hold them are found; their parts stay building until \
                     then (add daemons if none holds no region of the other replexes)"
                );
            }
            self.region_id_next = next_region.0;
        }
        let mut placer = if missing_subspaces.is_empty() && missing_globals.is_empty() {
            None
        } else {
            Some(self.placer()?)
        };
        // Nothing can fail from here on.
        let mut desc = self.spaces[si].desc.clone();
        desc.partitions = new.partitions;
        let mut layouts = Vec::new();
        let id = self.spaces[si].id;
        for attrs in missing_subspaces {
            let part = self.fresh_part(id);
            let placer = placer.as_mut().expect("made when a subspace is missing");
            layouts.push(self.new_layout(
                &desc,
                attrs,
                part,
                PartState::Building { progress: 0 },
                placer,
            ));
        }
        for decl in missing_globals {
            let part = self.fresh_part(id);
            let placer = placer
                .as_mut()
                .expect("made when a global index is missing");
            layouts.push(self.new_global_layout(
                &desc,
                decl,
                part,
                PartState::Building { progress: 0 },
                placer,
            ));
        }
        for mut layout in added {
            layout.part = self.fresh_part(id);
            layouts.push(layout);
        }
        let mut indexes = Vec::new();
        for attr in missing_indexes {
            indexes.push(IndexPart {
                id: self.fresh_part(id),
                attr,
                path: None,
                state: PartState::Building { progress: 0 },
            });
        }
        let space = &mut self.spaces[si];
        for layout in layouts {
            match layout.kind {
                SubspaceKind::Subspace => space.desc.subspaces.push(layout.attrs.clone()),
                SubspaceKind::GlobalIndex => {
                    let decl = new
                        .global_indexes
                        .iter()
                        .find(|g| layout.attrs == [g.attr])
                        .copied()
                        .expect("built from the new description");
                    name_global_index(&mut space.desc, decl);
                }
                // The description is derived from the parts, below.
                SubspaceKind::Replex | SubspaceKind::Hybrid => {}
            }
            space.subspaces.push(layout);
        }
        if let Some(decl) = &space.desc.replex {
            space.desc.replex = decl_of_layouts(&space.subspaces, decl.relaxed);
        }
        for index in indexes {
            space.desc.indexes.push(index.attr);
            space.indexes.push(index);
        }
        // A later relayout replaces an earlier one's plan: what it omits
        // is what goes.
        if omitted.is_empty() {
            self.pending_drops.remove(&id);
        } else {
            self.pending_drops.insert(id, omitted);
        }
        self.start_pending_drops(si);
        self.bump();
        Ok(())
    }

    /// A part's backfill moved on: `progress` percent, or `done` when every
    /// region holds every object. A done part becomes ready, and a space
    /// left with nothing building starts dropping what a `relayout` omitted.
    /// Reports about parts that are gone or not building change nothing
    /// (the report raced with a removal or an earlier report).
    pub(crate) fn part_progress(
        &mut self,
        space: SpaceId,
        part: PartId,
        progress: u8,
        done: bool,
    ) -> bool {
        let Some(si) = self.spaces.iter().position(|s| s.id == space) else {
            return false;
        };
        // A region of a new replex or hybrid still beside another copy of
        // its objects keeps the part building: it is no copy until moved.
        let done = done && !part_unsettled(&self.spaces[si], part, &self.rebuilds, &self.transfers);
        let Some(state) = self.spaces[si].part_state_mut(part) else {
            return false;
        };
        let PartState::Building { progress: before } = *state else {
            return false;
        };
        let next = if done {
            PartState::Ready
        } else {
            PartState::Building {
                progress: progress.min(99).max(before),
            }
        };
        if next == *state {
            return false;
        }
        *state = next;
        if done {
            self.replace_split(si, part);
            self.start_pending_drops(si);
        }
        true
    }

    /// A global index part that became ready replaces any other live part
    /// on its attribute (the one a split cut again): that one drops now,
    /// whatever else of the space still builds.
    fn replace_split(&mut self, si: usize, part: PartId) {
        let space = &mut self.spaces[si];
        let Some(attrs) = space
            .subspaces
            .iter()
            .find(|l| l.part == part && l.kind == SubspaceKind::GlobalIndex)
            .map(|l| l.attrs.clone())
        else {
            return;
        };
        let replaced: Vec<PartId> = space
            .subspaces
            .iter_mut()
            .filter(|l| {
                l.part != part
                    && l.kind == SubspaceKind::GlobalIndex
                    && l.attrs == attrs
                    && live(l.state)
            })
            .map(|l| {
                l.state = PartState::Dropping;
                l.part
            })
            .collect();
        for old in replaced {
            self.forget_pending_drop(si, old);
        }
    }

    /// A dropping part leaves the configuration (its regions with it);
    /// false when it is not dropping (already gone, or never dropped).
    pub(crate) fn part_dropped(&mut self, space: SpaceId, part: PartId) -> bool {
        let Some(si) = self.spaces.iter().position(|s| s.id == space) else {
            return false;
        };
        if !self.may_remove_parts(&self.spaces[si]) {
            return false; // The leader proposes it again once it may.
        }
        let s = &mut self.spaces[si];
        if let Some(pos) = s
            .subspaces
            .iter()
            .position(|l| l.part == part && l.state == PartState::Dropping)
        {
            let layout = s.subspaces.remove(pos);
            // The description lists the part once per live or dropping
            // layout with these attributes; any one of those entries goes.
            match layout.kind {
                SubspaceKind::Subspace => {
                    if let Some(at) = s.desc.subspaces.iter().position(|a| *a == layout.attrs) {
                        s.desc.subspaces.remove(at);
                    }
                }
                SubspaceKind::GlobalIndex => {
                    // A split leaves two parts on one attribute for a
                    // while; the description names it until both are gone.
                    let another = s
                        .subspaces
                        .iter()
                        .any(|l| l.kind == SubspaceKind::GlobalIndex && l.attrs == layout.attrs);
                    let on = |g: &GlobalIndexDecl| layout.attrs == [g.attr];
                    if let Some(at) = s
                        .desc
                        .global_indexes
                        .iter()
                        .position(on)
                        .filter(|_| !another)
                    {
                        s.desc.global_indexes.remove(at);
                    }
                }
                // Handled below, once the part is out.
                SubspaceKind::Replex | SubspaceKind::Hybrid => {}
            }
            let mut gone: BTreeSet<RegionId> = layout.regions.iter().map(|r| r.id).collect();
            if let Some(relaxed) = s.desc.replex.as_ref().map(|r| r.relaxed) {
                // A relayout that drops a replex drops every hybrid on it
                // too (the new description names none); whichever leaves
                // first takes the other with it, so the description always
                // names parts that exist.
                let firsts: BTreeSet<usize> = s
                    .subspaces
                    .iter()
                    .filter(|l| l.kind == SubspaceKind::Replex)
                    .filter_map(|l| l.attrs.first().copied())
                    .chain([0])
                    .collect();
                let (orphaned, kept): (Vec<SubspaceLayout>, Vec<SubspaceLayout>) =
                    std::mem::take(&mut s.subspaces).into_iter().partition(|l| {
                        l.kind == SubspaceKind::Hybrid
                            && l.state == PartState::Dropping
                            && !l.attrs.iter().all(|a| firsts.contains(a))
                    });
                s.subspaces = kept;
                gone.extend(orphaned.iter().flat_map(|h| h.regions.iter().map(|r| r.id)));
                s.desc.replex = decl_of_layouts(&s.subspaces, relaxed);
            }
            self.orphans.retain(|r, _| !gone.contains(r));
            return true;
        }
        if let Some(pos) = s
            .indexes
            .iter()
            .position(|ix| ix.id == part && ix.state == PartState::Dropping)
        {
            let index = s.indexes.remove(pos);
            if index.path.is_none() {
                let at = s
                    .desc
                    .indexes
                    .iter()
                    .position(|&a| a == index.attr)
                    .expect("an index without a path is in desc.indexes");
                s.desc.indexes.remove(at);
            }
            return true;
        }
        false
    }

    /// Whether a dropping part of `space` may leave the configuration. In
    /// a replex space only while the space is whole — every region has its
    /// daemon and none is being rebuilt: until then a dropping replex or
    /// hybrid may hold the only copy a rebuild needs (a region lost beyond
    /// f is still found through it), and a rebuild planned before it
    /// dropped may be reading it (simulator seed 150001597). Checked where
    /// the removal applies, so that a proposal made before a region lost
    /// its daemon changes nothing.
    pub(crate) fn may_remove_parts(&self, space: &Space) -> bool {
        space.desc.replex.is_none()
            || space
                .subspaces
                .iter()
                .flat_map(|l| &l.regions)
                .all(|r| !r.chain.is_empty() && !self.rebuilds.iter().any(|b| b.region == r.id))
    }

    /// The parts of `space` that are dropping, for the leader to remove.
    pub fn dropping_parts(space: &Space) -> Vec<PartId> {
        space
            .parts()
            .iter()
            .filter(|p| p.state == PartState::Dropping)
            .map(|p| p.id)
            .collect()
    }

    fn forget_pending_drop(&mut self, si: usize, part: PartId) {
        let id = self.spaces[si].id;
        if let Some(pending) = self.pending_drops.get_mut(&id) {
            pending.remove(&part);
            if pending.is_empty() {
                self.pending_drops.remove(&id);
            }
        }
    }

    /// Marks dropping what a `relayout` of space `si` omitted, once nothing
    /// in the space is building any more.
    fn start_pending_drops(&mut self, si: usize) {
        let space = &mut self.spaces[si];
        let building = space
            .parts()
            .iter()
            .any(|p| matches!(p.state, PartState::Building { .. }));
        if building {
            return;
        }
        let Some(pending) = self.pending_drops.remove(&space.id) else {
            return;
        };
        for layout in space.subspaces.iter_mut().skip(1) {
            if pending.contains(&layout.part) && live(layout.state) {
                layout.state = PartState::Dropping;
            }
        }
        for index in &mut space.indexes {
            if pending.contains(&index.id) && live(index.state) {
                index.state = PartState::Dropping;
            }
        }
    }
}

/// The leader's soft state about building and dropping parts: which
/// daemons reported which regions done, and which epoch each daemon runs.
/// Pure: the coordinator's shell and the simulator feed it reports and
/// heartbeats and write the commands it proposes. A new leader starts
/// empty; daemons report again (they repeat their reports until the part
/// is ready).
#[derive(Clone, Debug)]
pub struct LayoutTally {
    /// Per building part, the key regions some point leader walked.
    keys_done: BTreeMap<(SpaceId, PartId), BTreeSet<RegionId>>,
    /// Per building part, the (daemon, region) pairs whose index entries
    /// are complete.
    entries_done: BTreeMap<(SpaceId, PartId), BTreeSet<(DaemonId, RegionId)>>,
    /// The epoch each daemon last said it runs.
    epochs: BTreeMap<DaemonId, Epoch>,
    /// The epoch in which the leader first saw each part dropping.
    dropping_since: BTreeMap<(SpaceId, PartId), Epoch>,
    /// The progress last proposed per part, so that a report that moves
    /// nothing proposes nothing.
    proposed: BTreeMap<(SpaceId, PartId), u8>,
    /// Per indexlet, its head's last report: entries and the order
    /// coordinate of the middle entry's value.
    indexlets: BTreeMap<RegionId, (u64, Option<u64>)>,
    /// An indexlet with at least this many entries is split at its middle
    /// value ([`DEFAULT_INDEXLET_SPLIT_ENTRIES`] unless configured).
    split_entries: u64,
    /// Per indexlet and replica, the lookup pages per second its last
    /// `IndexletLoad` reported, in thousandths.
    loads: BTreeMap<(RegionId, DaemonId), u64>,
    /// An indexlet whose replicas together serve at least this many lookup
    /// pages per second is split at its middle value too (0: never).
    split_pages_per_s: u64,
}

/// The entries at which the leader splits an indexlet by default: small
/// enough that moving half of one stays quick, large enough that small
/// indexes never split.
pub const DEFAULT_INDEXLET_SPLIT_ENTRIES: u64 = 1_000_000;

impl Default for LayoutTally {
    fn default() -> LayoutTally {
        LayoutTally::with_split_entries(DEFAULT_INDEXLET_SPLIT_ENTRIES)
    }
}

/// Progress proposals move in steps of this many percent, so a backfill
/// costs a handful of epochs, not one per report.
const PROGRESS_STEP: u8 = 10;

impl LayoutTally {
    /// A tally that splits indexlets of `split_entries` entries or more
    /// (0 never splits).
    pub fn with_split_entries(split_entries: u64) -> LayoutTally {
        LayoutTally {
            keys_done: BTreeMap::new(),
            entries_done: BTreeMap::new(),
            epochs: BTreeMap::new(),
            dropping_since: BTreeMap::new(),
            proposed: BTreeMap::new(),
            indexlets: BTreeMap::new(),
            split_entries,
            loads: BTreeMap::new(),
            split_pages_per_s: 0,
        }
    }

    /// Splits indexlets serving `pages_per_s` lookup pages per second or
    /// more as well (0 never splits by load).
    pub fn with_split_load(mut self, pages_per_s: u64) -> LayoutTally {
        self.split_pages_per_s = pages_per_s;
        self
    }

    /// The lookup pages per second indexlet `region` serves, in
    /// thousandths, over the replicas' last reports.
    fn load_milli(&self, region: RegionId) -> u64 {
        self.loads
            .range((region, DaemonId(0))..=(region, DaemonId(u64::MAX)))
            .map(|(_, rate)| rate)
            .sum()
    }

    /// Whether the indexlet's last reports call for a split: its size, or
    /// the lookups its replicas serve.
    fn too_big_or_busy(&self, region: RegionId, entries: u64) -> bool {
        let busy = self.split_pages_per_s > 0
            && self.load_milli(region) >= self.split_pages_per_s.saturating_mul(1000);
        (self.split_entries > 0 && entries >= self.split_entries) || busy
    }

    /// Takes what a request to the leader tells about layouts: a
    /// `BackfillReport`, or the epoch a `Heartbeat` reports. Other
    /// requests tell nothing.
    pub fn on_request(&mut self, request: &tessera_protocol::CoordRequest) {
        use tessera_protocol::CoordRequest;
        match request {
            CoordRequest::BackfillReport {
                daemon,
                space,
                part,
                keys_done,
                entries_done,
            } => self.on_report(*daemon, *space, *part, keys_done, entries_done),
            CoordRequest::Heartbeat { id, epoch } => self.on_epoch(*id, *epoch),
            CoordRequest::IndexletReport {
                region,
                entries,
                median,
                ..
            } => {
                self.indexlets.insert(*region, (*entries, *median));
            }
            CoordRequest::IndexletLoad {
                daemon,
                region,
                pages,
                window_ms,
                ..
            } => {
                let rate = pages.saturating_mul(1_000_000) / (*window_ms).max(1);
                self.loads.insert((*region, *daemon), rate);
            }
            _ => {}
        }
    }

    /// Splits of global indexes whose indexlets grew past the threshold:
    /// each such indexlet is cut at its middle value, when that lies
    /// strictly inside it (a run of one value, or of strings sharing their
    /// first eight bytes, cannot be cut). None while a split of the same
    /// index builds; reports of indexlets no longer in the configuration
    /// are forgotten.
    fn splits(&mut self, state: &ClusterState) -> Vec<Command> {
        let mut out = Vec::new();
        let mut present = BTreeSet::new();
        for space in &state.spaces {
            for layout in &space.subspaces {
                if layout.kind != SubspaceKind::GlobalIndex {
                    continue;
                }
                present.extend(layout.regions.iter().map(|r| r.id));
                // Another live part on the attribute: a split builds.
                let building = space.subspaces.iter().any(|l| {
                    l.kind == SubspaceKind::GlobalIndex
                        && l.attrs == layout.attrs
                        && l.part != layout.part
                        && live(l.state)
                });
                let never = self.split_entries == 0 && self.split_pages_per_s == 0;
                if never || !layout.state.is_ready() || building {
                    continue;
                }
                let cuts: Vec<u64> = layout
                    .regions
                    .iter()
                    .enumerate()
                    .filter_map(|(i, region)| {
                        let &(entries, median) = self.indexlets.get(&region.id)?;
                        let median = median.filter(|_| self.too_big_or_busy(region.id, entries))?;
                        let (lo, hi) = layout.cell_bounds(i)[0];
                        (lo < median && median <= hi).then_some(median)
                    })
                    .collect();
                if !cuts.is_empty() {
                    out.push(Command::SplitGlobalIndexAt {
                        space: space.id,
                        part: layout.part,
                        cuts,
                    });
                }
            }
        }
        self.indexlets.retain(|region, _| present.contains(region));
        self.loads.retain(|(region, _), _| present.contains(region));
        out
    }

    /// A daemon's report (see `CoordRequest::BackfillReport`).
    pub fn on_report(
        &mut self,
        daemon: DaemonId,
        space: SpaceId,
        part: PartId,
        keys_done: &[RegionId],
        entries_done: &[RegionId],
    ) {
        self.keys_done
            .entry((space, part))
            .or_default()
            .extend(keys_done.iter().copied());
        self.entries_done
            .entry((space, part))
            .or_default()
            .extend(entries_done.iter().map(|r| (daemon, *r)));
    }

    /// A daemon runs `epoch` (from its heartbeat).
    pub fn on_epoch(&mut self, daemon: DaemonId, epoch: Epoch) {
        self.epochs.insert(daemon, epoch);
    }

    /// The commands the leader should propose now: progress or readiness
    /// of building parts, and the removal of dropping parts that every
    /// available daemon knows as dropping (so none still sends them
    /// writes drawn before).
    pub fn proposals(&mut self, state: &ClusterState) -> Vec<Command> {
        let mut out = Vec::new();
        let mut live = BTreeSet::new();
        for space in &state.spaces {
            for view in space.parts() {
                let id = (space.id, view.id);
                live.insert(id);
                match view.state {
                    PartState::Building { progress } => {
                        let (done, total) = self.coverage(space, view.id, view.kind);
                        // A new replex region still beside another copy of
                        // its objects waits for its move (`repair`).
                        let unsettled =
                            part_unsettled(space, view.id, &state.rebuilds, &state.transfers);
                        if done == total && !unsettled {
                            out.push(Command::PartProgress {
                                space: space.id,
                                part: view.id,
                                progress: 100,
                                done: true,
                            });
                            continue;
                        }
                        let percent = (done * 100 / total.max(1)).min(99) as u8;
                        let step = percent / PROGRESS_STEP * PROGRESS_STEP;
                        let last = self.proposed.get(&id).copied().unwrap_or(progress);
                        if step > last {
                            self.proposed.insert(id, step);
                            out.push(Command::PartProgress {
                                space: space.id,
                                part: view.id,
                                progress: step,
                                done: false,
                            });
                        }
                    }
                    PartState::Dropping => {
                        let since = *self.dropping_since.entry(id).or_insert(state.epoch);
                        let everyone_knows = state
                            .daemons
                            .values()
                            .filter(|d| d.state == DaemonState::Available)
                            .all(|d| self.epochs.get(&d.id).is_some_and(|e| *e >= since));
                        if everyone_knows && state.may_remove_parts(space) {
                            out.push(Command::PartDropped {
                                space: space.id,
                                part: view.id,
                            });
                        }
                    }
                    PartState::Ready => {}
                }
            }
        }
        out.extend(self.splits(state));
        // Forget parts that are gone or settled.
        let building = |id: &(SpaceId, PartId)| live.contains(id);
        self.keys_done.retain(|id, _| building(id));
        self.entries_done.retain(|id, _| building(id));
        self.dropping_since.retain(|id, _| building(id));
        self.proposed.retain(|id, _| building(id));
        out
    }

    /// How many of the pieces `part` waits for are reported done, of how
    /// many: each key region walked (a subspace), and each replica of each
    /// region that keeps entries of its attributes.
    fn coverage(
        &self,
        space: &Space,
        part: PartId,
        kind: tessera_types::PartKind,
    ) -> (usize, usize) {
        let id = (space.id, part);
        let empty_keys = BTreeSet::new();
        let empty_entries = BTreeSet::new();
        let keys = self.keys_done.get(&id).unwrap_or(&empty_keys);
        let entries = self.entries_done.get(&id).unwrap_or(&empty_entries);
        let mut total = 0;
        let mut done = 0;
        if kind.built_by_key_walk() {
            for region in space.subspaces.first().map_or(&[][..], |l| &l.regions[..]) {
                total += 1;
                done += usize::from(keys.contains(&region.id));
            }
        }
        for (_, region) in space.entry_regions(part) {
            for daemon in &region.chain {
                total += 1;
                done += usize::from(entries.contains(&(*daemon, region.id)));
            }
        }
        (done, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::PartKind;

    const SPACE: &str = "space s key k attributes a, int b, c, document d, list(int) l \
                         subspace a create 4 partitions";

    fn cluster() -> ClusterState {
        let mut state = ClusterState::default();
        for i in 0..3 {
            state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("127.0.0.1:{}", 2012 + i),
                metrics: None,
                installed: None,
            });
        }
        let added = state.apply(Command::AddSpace {
            description: SPACE.to_string(),
        });
        assert!(
            matches!(added, CommandResult::SpaceAdded { .. }),
            "{added:?}"
        );
        state
    }

    fn parts(state: &ClusterState) -> Vec<(PartId, PartKind, Vec<usize>, PartState)> {
        state.spaces[0]
            .parts()
            .iter()
            .map(|p| (p.id, p.kind, p.attrs.to_vec(), p.state))
            .collect()
    }

    fn added(result: CommandResult) -> PartId {
        match result {
            CommandResult::PartAdded { part } => part,
            other => panic!("expected a new part, got {other:?}"),
        }
    }

    /// Applies `command`, requires it refused with `status`, and requires
    /// the state unchanged (same epoch, same ids to hand out, same spaces).
    fn refused(state: &mut ClusterState, command: Command, status: AdminStatus) -> String {
        let before = state.clone();
        match state.apply(command.clone()) {
            CommandResult::Failed {
                status: got,
                reason,
            } => {
                assert_eq!(got, status, "{command:?}: {reason}");
                assert_eq!(*state, before, "{command:?} changed the state");
                reason
            }
            other => panic!("{command:?} was not refused: {other:?}"),
        }
    }

    fn building() -> PartState {
        PartState::Building { progress: 0 }
    }

    #[test]
    fn a_new_space_numbers_its_parts_key_first_and_every_part_ready() {
        let state = cluster();
        assert_eq!(
            parts(&state),
            vec![
                (PartId(0), PartKind::Key, vec![0], PartState::Ready),
                (PartId(1), PartKind::Subspace, vec![1], PartState::Ready),
            ]
        );
    }

    #[test]
    fn add_subspace_builds_a_new_part_with_fresh_regions_in_one_epoch() {
        let mut state = cluster();
        let epoch = state.epoch;
        let regions_before: BTreeSet<RegionId> = state.spaces[0]
            .subspaces
            .iter()
            .flat_map(|l| l.regions.iter().map(|r| r.id))
            .collect();
        let part = added(state.apply(Command::AddSubspace {
            space: "s".into(),
            attrs: vec!["b".into(), "c".into()],
        }));
        assert_eq!(state.epoch.0, epoch.0 + 1);
        let space = &state.spaces[0];
        assert_eq!(space.desc.subspaces, vec![vec![1], vec![2, 3]]);
        let layout = space.subspaces.last().expect("added");
        assert_eq!((layout.part, layout.state), (part, building()));
        assert_eq!(layout.regions.len(), 4);
        assert!(layout.regions.iter().all(|r| r.chain.len() == 2));
        assert!(layout
            .regions
            .iter()
            .all(|r| !regions_before.contains(&r.id)));
        // Not searchable until ready.
        assert!(!space.subspace_searchable(2));
    }

    #[test]
    fn every_bad_layout_command_is_a_typed_refusal_that_changes_nothing() {
        let mut state = cluster();
        let add_sub = |attrs: &[&str]| Command::AddSubspace {
            space: "s".into(),
            attrs: attrs.iter().map(|a| a.to_string()).collect(),
        };
        let add_index = |attr: &str| Command::AddIndex {
            space: "s".into(),
            attr: attr.into(),
        };
        use AdminStatus::*;
        refused(
            &mut state,
            Command::AddSubspace {
                space: "nope".into(),
                attrs: vec!["a".into()],
            },
            NotFound,
        );
        refused(&mut state, add_sub(&["a"]), Duplicate);
        refused(&mut state, add_sub(&[]), BadSpace);
        refused(&mut state, add_sub(&["k"]), BadSpace);
        refused(&mut state, add_sub(&["zz"]), NotFound);
        refused(&mut state, add_sub(&["b", "b"]), BadSpace);
        refused(&mut state, add_sub(&["l"]), BadSpace);
        refused(&mut state, add_sub(&["d"]), BadSpace);
        refused(
            &mut state,
            Command::RmSubspace {
                space: "s".into(),
                part: PartId(0),
            },
            CoordFail,
        );
        refused(
            &mut state,
            Command::RmSubspace {
                space: "s".into(),
                part: PartId(77),
            },
            NotFound,
        );
        refused(&mut state, add_index("zz"), NotFound);
        refused(&mut state, add_index("k"), BadSpace);
        refused(&mut state, add_index("d"), CoordFail);
        refused(&mut state, add_index("d."), CoordFail);
        refused(&mut state, add_index("b.x"), CoordFail);
        refused(&mut state, add_index("l"), CoordFail);
        refused(
            &mut state,
            Command::RmIndex {
                space: None,
                part: PartId(1),
            },
            NotFound,
        );
        refused(
            &mut state,
            Command::RmIndex {
                space: Some("s".into()),
                part: PartId(99),
            },
            NotFound,
        );
        // An index whose attribute a subspace uses stays (HyperDex's rule).
        let on_a = added(state.apply(add_index("a")));
        refused(
            &mut state,
            Command::RmIndex {
                space: None,
                part: on_a,
            },
            CoordFail,
        );
        refused(&mut state, add_index("a"), Duplicate);
        let on_path = added(state.apply(add_index("d.x.y")));
        refused(&mut state, add_index("d.x.y"), Duplicate);
        let relayout = |description: &str| Command::Relayout {
            space: "s".into(),
            description: description.into(),
        };
        let reason = refused(&mut state, relayout("space s key k"), BadSpace);
        assert!(reason.contains("attributes"), "{reason}");
        refused(
            &mut state,
            relayout("space s key k attributes a,"),
            BadSpace,
        );
        refused(
            &mut state,
            relayout("space t key k attributes a, int b, c, document d, list(int) l"),
            BadSpace,
        );
        refused(
            &mut state,
            relayout("space s key int k attributes a, int b, c, document d, list(int) l"),
            BadSpace,
        );
        refused(
            &mut state,
            relayout(
                "space s key k attributes a, int b, c, document d, list(int) l tolerate 2 failures",
            ),
            BadSpace,
        );
        refused(
            &mut state,
            Command::Relayout {
                space: "nope".into(),
                description: SPACE.into(),
            },
            NotFound,
        );
        // Index ids are per space: with two spaces holding an index of the
        // same id, the id alone is ambiguous.
        let other = state.apply(Command::AddSpace {
            description: "space t key k attributes a, c subspace a index c".into(),
        });
        assert!(
            matches!(other, CommandResult::SpaceAdded { .. }),
            "{other:?}"
        );
        let shared = state.spaces[1].indexes[0].id;
        assert_eq!(shared, on_a, "both spaces number their first index 2");
        let reason = refused(
            &mut state,
            Command::RmIndex {
                space: None,
                part: shared,
            },
            CoordFail,
        );
        assert!(reason.contains("several spaces"), "{reason}");
        // And the path index is found by its id alone.
        assert_eq!(
            state.apply(Command::RmIndex {
                space: None,
                part: on_path
            }),
            CommandResult::Done
        );
    }

    #[test]
    fn a_new_part_becomes_ready_on_done_and_a_dropped_one_leaves_the_next_epoch() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let sub = added(state.apply(Command::AddSubspace {
            space: "s".into(),
            attrs: vec!["b".into()],
        }));
        let progress = |state: &mut ClusterState, progress: u8, done: bool| {
            state.apply(Command::PartProgress {
                space,
                part: sub,
                progress,
                done,
            })
        };
        let epoch = state.epoch;
        progress(&mut state, 37, false);
        assert_eq!(state.epoch.0, epoch.0 + 1);
        assert_eq!(
            state.spaces[0].part_state(sub),
            Some(PartState::Building { progress: 37 })
        );
        // A stale, smaller report changes nothing and moves no epoch.
        progress(&mut state, 10, false);
        assert_eq!(state.epoch.0, epoch.0 + 1);
        progress(&mut state, 100, true);
        assert_eq!(state.spaces[0].part_state(sub), Some(PartState::Ready));
        assert!(state.spaces[0].subspace_searchable(2));
        let epoch = state.epoch;
        // Late reports about a ready part are ignored.
        progress(&mut state, 50, false);
        assert_eq!(state.epoch, epoch);

        assert_eq!(
            state.apply(Command::RmSubspace {
                space: "s".into(),
                part: sub,
            }),
            CommandResult::Done
        );
        assert_eq!(state.spaces[0].part_state(sub), Some(PartState::Dropping));
        assert!(!state.spaces[0].subspace_searchable(2));
        // Dropping twice: there is no such live subspace any more.
        refused(
            &mut state,
            Command::RmSubspace {
                space: "s".into(),
                part: sub,
            },
            AdminStatus::NotFound,
        );
        state.apply(Command::PartDropped { space, part: sub });
        assert_eq!(state.spaces[0].part_state(sub), None);
        assert_eq!(state.spaces[0].desc.subspaces, vec![vec![1]]);
        // The id is never handed out again.
        let next = added(state.apply(Command::AddIndex {
            space: "s".into(),
            attr: "b".into(),
        }));
        assert!(next.0 > sub.0);
        let epoch = state.epoch;
        state.apply(Command::PartDropped { space, part: sub });
        assert_eq!(state.epoch, epoch, "a second drop changes nothing");
    }

    #[test]
    fn relayout_builds_the_new_parts_then_drops_the_omitted_ones_once_they_are_ready() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let old_sub = PartId(1);
        let old_index = added(state.apply(Command::AddIndex {
            space: "s".into(),
            attr: "c".into(),
        }));
        state.apply(Command::PartProgress {
            space,
            part: old_index,
            progress: 100,
            done: true,
        });
        let epoch = state.epoch;
        let result = state.apply(Command::Relayout {
            space: "s".into(),
            description: "space s key k attributes a, int b, c, document d, list(int) l \
                          subspace b subspace a index b create 4 partitions"
                .into(),
        });
        assert_eq!(result, CommandResult::Done);
        assert_eq!(state.epoch.0, epoch.0 + 1, "one epoch for the whole change");
        let now = parts(&state);
        // Kept: key, subspace a. New: subspace b, index b. Index c waits.
        let new: Vec<PartId> = now
            .iter()
            .filter(|p| p.3 == building())
            .map(|p| p.0)
            .collect();
        assert_eq!(new.len(), 2, "{now:?}");
        assert_eq!(state.spaces[0].part_state(old_sub), Some(PartState::Ready));
        assert_eq!(
            state.spaces[0].part_state(old_index),
            Some(PartState::Ready)
        );
        for (i, part) in new.iter().enumerate() {
            state.apply(Command::PartProgress {
                space,
                part: *part,
                progress: 100,
                done: true,
            });
            let expect = if i + 1 == new.len() {
                PartState::Dropping
            } else {
                PartState::Ready
            };
            assert_eq!(state.spaces[0].part_state(old_index), Some(expect));
        }
        assert_eq!(state.spaces[0].part_state(old_sub), Some(PartState::Ready));
        // The same description again changes nothing at all.
        let epoch = state.epoch;
        let again = state.apply(Command::Relayout {
            space: "s".into(),
            description: "space s key k attributes a, int b, c, document d, list(int) l \
                          subspace b subspace a index b create 4 partitions"
                .into(),
        });
        assert_eq!(again, CommandResult::Done);
        assert_eq!(state.epoch, epoch);
    }

    #[test]
    fn removing_the_space_abandons_its_relayout() {
        let mut state = cluster();
        state.apply(Command::Relayout {
            space: "s".into(),
            description: "space s key k attributes a, int b, c, document d, list(int) l \
                          subspace b"
                .into(),
        });
        assert_eq!(state.pending_drops.len(), 1);
        state.apply(Command::RmSpace { name: "s".into() });
        assert!(state.pending_drops.is_empty());
        assert!(state.spaces.is_empty());
    }

    #[test]
    fn a_global_index_is_a_layout_part_added_filled_by_key_walks_and_dropped() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let epoch = state.epoch;
        let add = |attr: &str, partitions| Command::AddGlobalIndex {
            space: "s".into(),
            attr: attr.into(),
            partitions,
        };
        let part = added(state.apply(add("c", Some(3))));
        assert!(state.epoch > epoch);
        let layout = state.spaces[0].subspaces.last().expect("the index").clone();
        assert_eq!(layout.kind, SubspaceKind::GlobalIndex);
        assert_eq!((layout.part, layout.attrs.clone()), (part, vec![3]));
        assert_eq!(layout.regions.len(), 3);
        assert!(layout.regions.iter().all(|r| r.chain.len() == 2));
        assert_eq!(
            state.spaces[0].desc.global_indexes,
            vec![GlobalIndexDecl {
                attr: 3,
                partitions: Some(3)
            }]
        );
        assert_eq!(state.spaces[0].part_state(part), Some(building()));
        // A subspace on the same attribute is another part: both may exist.
        added(state.apply(Command::AddSubspace {
            space: "s".into(),
            attrs: vec!["c".into()],
        }));
        state.check_invariants().expect("invariants");

        // Every refusal is typed and changes nothing.
        refused(&mut state, add("c", None), AdminStatus::Duplicate);
        refused(&mut state, add("k", None), AdminStatus::BadSpace);
        refused(&mut state, add("d", None), AdminStatus::BadSpace);
        refused(&mut state, add("d.x", None), AdminStatus::BadSpace);
        refused(&mut state, add("l", None), AdminStatus::BadSpace);
        refused(&mut state, add("zz", None), AdminStatus::NotFound);
        refused(&mut state, add("b", Some(0)), AdminStatus::BadSpace);
        refused(
            &mut state,
            add("b", Some(PARTITIONS_MAX + 1)),
            AdminStatus::BadSpace,
        );
        // `rm-subspace` does not take a global index's part id.
        refused(
            &mut state,
            Command::RmSubspace {
                space: "s".into(),
                part,
            },
            AdminStatus::NotFound,
        );

        // Filled by the point leaders' key walks alone: its own regions
        // index what the chain writes there.
        let mut tally = LayoutTally::default();
        for region in &state.spaces[0].subspaces[0].regions.clone() {
            assert!(tally.proposals(&state).iter().all(
                |c| !matches!(c, Command::PartProgress { done: true, part: p, .. } if *p == part)
            ));
            tally.on_report(region.chain[0], space, part, &[region.id], &[]);
        }
        for command in tally.proposals(&state) {
            state.apply(command);
        }
        assert_eq!(state.spaces[0].part_state(part), Some(PartState::Ready));

        // Dropped by attribute; the description forgets it when it leaves.
        let rm = |attr: &str| Command::RmGlobalIndex {
            space: "s".into(),
            attr: attr.into(),
        };
        refused(&mut state, rm("b"), AdminStatus::NotFound);
        assert_eq!(state.apply(rm("c")), CommandResult::Done);
        assert_eq!(state.spaces[0].part_state(part), Some(PartState::Dropping));
        refused(&mut state, rm("c"), AdminStatus::NotFound);
        // Added again while the old one drops: a new part.
        let again = added(state.apply(add("c", None)));
        assert_ne!(again, part);
        assert!(state.part_dropped(space, part));
        assert_eq!(
            state.spaces[0].desc.global_indexes,
            vec![GlobalIndexDecl {
                attr: 3,
                partitions: None
            }]
        );
        state.check_invariants().expect("invariants");
    }

    #[test]
    fn a_split_builds_the_new_cuts_then_drops_the_old_part() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let old = added(state.apply(Command::AddGlobalIndex {
            space: "s".into(),
            attr: "b".into(),
            partitions: Some(1),
        }));
        let split = |at: &[&str]| Command::SplitGlobalIndex {
            space: "s".into(),
            attr: "b".into(),
            at: at.iter().map(|v| v.to_string()).collect(),
        };
        let ready = |state: &mut ClusterState, part| {
            state.apply(Command::PartProgress {
                space,
                part,
                progress: 100,
                done: true,
            })
        };
        // Not while the index itself is building.
        refused(&mut state, split(&["0"]), AdminStatus::CoordFail);
        ready(&mut state, old);
        refused(&mut state, split(&["ten"]), AdminStatus::BadSpace);
        refused(
            &mut state,
            Command::SplitGlobalIndex {
                space: "s".into(),
                attr: "c".into(),
                at: vec!["x".into()],
            },
            AdminStatus::NotFound,
        );
        let new = added(state.apply(split(&["-5", "5", "5"])));
        let layout = |state: &ClusterState, part| {
            state.spaces[0]
                .subspaces
                .iter()
                .find(|l| l.part == part)
                .cloned()
        };
        let cuts = layout(&state, new).expect("the new part").splits;
        assert_eq!(
            cuts,
            vec![vec![
                tessera_types::coordinate::int_coordinate(-5),
                tessera_types::coordinate::int_coordinate(5)
            ]]
        );
        assert_eq!(state.spaces[0].part_state(old), Some(PartState::Ready));
        refused(&mut state, split(&["7"]), AdminStatus::CoordFail);
        state.check_invariants().expect("invariants");
        // Ready: the old part drops in the same epoch, and leaves.
        ready(&mut state, new);
        assert_eq!(state.spaces[0].part_state(old), Some(PartState::Dropping));
        assert!(state.part_dropped(space, old));
        assert_eq!(
            state.spaces[0].desc.global_indexes,
            vec![GlobalIndexDecl {
                attr: 2,
                partitions: Some(3)
            }]
        );
        // The same cuts again: nothing to split.
        refused(&mut state, split(&["5", "-5"]), AdminStatus::BadSpace);
        state.check_invariants().expect("invariants");
    }

    #[test]
    fn the_leader_splits_an_indexlet_that_grew_past_the_threshold_at_its_middle() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let part = added(state.apply(Command::AddGlobalIndex {
            space: "s".into(),
            attr: "b".into(),
            partitions: Some(2),
        }));
        let mut tally = LayoutTally::with_split_entries(100);
        let indexlets = |state: &ClusterState, part| {
            state.spaces[0]
                .subspaces
                .iter()
                .find(|l| l.part == part)
                .map(|l| l.regions.iter().map(|r| r.id).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        let report = |region, entries, median| tessera_protocol::CoordRequest::IndexletReport {
            space,
            part,
            region,
            entries,
            median,
        };
        let splits = |tally: &mut LayoutTally, state: &ClusterState| -> Vec<Command> {
            tally
                .proposals(state)
                .into_iter()
                .filter(|c| matches!(c, Command::SplitGlobalIndexAt { .. }))
                .collect()
        };
        let [first, second] = indexlets(&state, part)[..] else {
            panic!("two indexlets")
        };
        let middle = tessera_types::coordinate::int_coordinate(-7);
        tally.on_request(&report(first, 500, Some(middle)));
        // Still building: no split yet.
        assert!(splits(&mut tally, &state).is_empty());
        state.apply(Command::PartProgress {
            space,
            part,
            progress: 100,
            done: true,
        });
        // Below the threshold, or a middle on the indexlet's lower bound
        // (all one value there): nothing.
        tally.on_request(&report(second, 99, Some(1 << 63 | 5)));
        tally.on_request(&report(first, 500, Some(0)));
        assert!(splits(&mut tally, &state).is_empty());
        tally.on_request(&report(first, 500, Some(middle)));
        let proposed = splits(&mut tally, &state);
        assert_eq!(
            proposed,
            vec![Command::SplitGlobalIndexAt {
                space,
                part,
                cuts: vec![middle]
            }]
        );
        let new = added(state.apply(proposed[0].clone()));
        assert_eq!(
            state.spaces[0]
                .subspaces
                .iter()
                .find(|l| l.part == new)
                .map(|l| l.splits.clone()),
            Some(vec![vec![middle, 1 << 63]])
        );
        // While the split builds, the same report proposes nothing more.
        tally.on_request(&report(first, 500, Some(middle)));
        assert!(splits(&mut tally, &state).is_empty());
        state.check_invariants().expect("invariants");
        // A threshold of 0 never splits.
        let mut never = LayoutTally::with_split_entries(0);
        never.on_request(&report(first, u64::MAX, Some(middle)));
        assert!(splits(&mut never, &state).is_empty());
    }

    #[test]
    fn the_leader_splits_an_indexlet_its_replicas_report_busy() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let part = added(state.apply(Command::AddGlobalIndex {
            space: "s".into(),
            attr: "b".into(),
            partitions: Some(1),
        }));
        state.apply(Command::PartProgress {
            space,
            part,
            progress: 100,
            done: true,
        });
        let region = state.spaces[0]
            .subspaces
            .iter()
            .find(|l| l.part == part)
            .map(|l| l.regions[0].id)
            .expect("the indexlet");
        let middle = tessera_types::coordinate::int_coordinate(3);
        let load = |daemon, pages| tessera_protocol::CoordRequest::IndexletLoad {
            daemon: DaemonId(daemon),
            space,
            part,
            region,
            pages,
            window_ms: 10_000,
        };
        let splits = |tally: &mut LayoutTally| -> Vec<Command> {
            tally
                .proposals(&state)
                .into_iter()
                .filter(|c| matches!(c, Command::SplitGlobalIndexAt { .. }))
                .collect()
        };
        // Size alone never splits it (100 entries < 1,000,000); 50 pages/s.
        let mut tally = LayoutTally::with_split_entries(1_000_000).with_split_load(50);
        tally.on_request(&tessera_protocol::CoordRequest::IndexletReport {
            space,
            part,
            region,
            entries: 100,
            median: Some(middle),
        });
        // 30 + 19.9 pages/s over two replicas: under the threshold.
        tally.on_request(&load(1, 300));
        tally.on_request(&load(2, 199));
        assert!(splits(&mut tally).is_empty());
        // A newer report replaces a replica's last one: 30 + 20 pages/s.
        tally.on_request(&load(2, 200));
        assert_eq!(
            splits(&mut tally),
            vec![Command::SplitGlobalIndexAt {
                space,
                part,
                cuts: vec![middle]
            }]
        );
        // Without a load threshold the same reports split nothing.
        let mut by_size = LayoutTally::with_split_entries(1_000_000);
        for request in [load(1, 10_000), load(2, 10_000)] {
            by_size.on_request(&request);
        }
        assert!(splits(&mut by_size).is_empty());
    }

    #[test]
    fn relayout_adds_and_drops_global_indexes_like_any_part() {
        let mut state = cluster();
        let with_global = format!("{SPACE} global index b create 2 partitions");
        let with_global = with_global.replace(
            " create 4 partitions global index b create 2 partitions",
            " global index b create 2 partitions create 4 partitions",
        );
        assert_eq!(
            state.apply(Command::Relayout {
                space: "s".into(),
                description: with_global,
            }),
            CommandResult::Done
        );
        let global: Vec<(PartKind, Vec<usize>, usize)> = state.spaces[0]
            .parts()
            .iter()
            .filter(|p| p.kind == PartKind::GlobalIndex)
            .map(|p| {
                (
                    p.kind,
                    p.attrs.to_vec(),
                    p.layout.map_or(0, |l| l.regions.len()),
                )
            })
            .collect();
        assert_eq!(global, vec![(PartKind::GlobalIndex, vec![2], 2)]);
        assert_eq!(state.spaces[0].global_indexlets(), BTreeMap::from([(2, 2)]));
        state.check_invariants().expect("invariants");
        let part = state.spaces[0].subspaces.last().expect("the index").part;
        state.apply(Command::PartProgress {
            space: state.spaces[0].id,
            part,
            progress: 100,
            done: true,
        });
        // Back to the old description: the global index is omitted, so it
        // drops (at once: nothing new is building).
        assert_eq!(
            state.apply(Command::Relayout {
                space: "s".into(),
                description: SPACE.into(),
            }),
            CommandResult::Done
        );
        let states: Vec<PartState> = state.spaces[0]
            .parts()
            .iter()
            .filter(|p| p.kind == PartKind::GlobalIndex)
            .map(|p| p.state)
            .collect();
        assert_eq!(states, vec![PartState::Dropping]);
    }

    #[test]
    fn the_tally_marks_a_subspace_ready_only_when_every_region_and_replica_reported() {
        let mut state = cluster();
        let space = state.spaces[0].id;
        let part = added(state.apply(Command::AddSubspace {
            space: "s".into(),
            attrs: vec!["b".into()],
        }));
        let key_regions: Vec<(RegionId, Vec<DaemonId>)> = state.spaces[0].subspaces[0]
            .regions
            .iter()
            .map(|r| (r.id, r.chain.clone()))
            .collect();
        let mut tally = LayoutTally::default();
        assert!(tally.proposals(&state).is_empty(), "nothing reported");
        // Every key region walked, every replica but the last indexed.
        let (last_region, last_chain) = key_regions.last().cloned().expect("regions");
        for (region, chain) in &key_regions {
            for (i, daemon) in chain.iter().enumerate() {
                let entries = if *region == last_region && i + 1 == chain.len() {
                    vec![]
                } else {
                    vec![*region]
                };
                tally.on_report(*daemon, space, part, &[*region], &entries);
            }
        }
        let proposals = tally.proposals(&state);
        assert!(
            matches!(
                proposals.as_slice(),
                [Command::PartProgress {
                    done: false,
                    progress: 90,
                    ..
                }]
            ),
            "{proposals:?}"
        );
        for command in proposals {
            state.apply(command);
        }
        assert!(tally.proposals(&state).is_empty(), "no step, no proposal");
        let daemon = *last_chain.last().expect("a replica");
        tally.on_report(daemon, space, part, &[], &[last_region]);
        let proposals = tally.proposals(&state);
        assert_eq!(
            proposals,
            vec![Command::PartProgress {
                space,
                part,
                progress: 100,
                done: true
            }]
        );
        for command in proposals {
            state.apply(command);
        }
        assert_eq!(state.spaces[0].part_state(part), Some(PartState::Ready));

        // Dropping: removed only once every available daemon runs an
        // epoch in which the part is dropping.
        state.apply(Command::RmSubspace {
            space: "s".into(),
            part,
        });
        let daemons: Vec<DaemonId> = state.daemons.keys().copied().collect();
        for d in &daemons[1..] {
            tally.on_epoch(*d, state.epoch);
        }
        tally.on_epoch(daemons[0], Epoch(state.epoch.0 - 1));
        assert!(tally.proposals(&state).is_empty(), "one daemon lags");
        tally.on_epoch(daemons[0], state.epoch);
        assert_eq!(
            tally.proposals(&state),
            vec![Command::PartDropped { space, part }]
        );
    }
}
