//! Secondary indexes inside each region, so that a search reads only the
//! objects its checks can match instead of the whole region.
//!
//! What is indexed: in every region of a space, every attribute that a
//! subspace or an `index` clause names and whose type has a coordinate
//! (string, int, float, timestamp) — [`indexed_attrs`] — and, in every
//! region, the value at the path of every local index on a document path
//! ([`region_slots`]). An entry is `slot (u32 BE) ++ coordinate (u64 BE) ++
//! storage key`, where the slot is the attribute's position or, for a path
//! index, `0x8000_0000 | part id` ([`Slot`], [`PATH_SLOT_BASE`]); ints,
//! floats and timestamps have order-preserving coordinates, so a range of
//! values is a range of entries, and a string's coordinate is its hash, so
//! string equality is one short range too (hash collisions are filtered
//! out). A path index holds the strings, ints and floats found at its path
//! (as a check on that path sees them), with the same coordinates.
//!
//! How it stays right: [`IndexedEngine`] wraps the storage engine and, for
//! every object it writes, computes the entries the old and the new record
//! imply and writes the difference in the same atomic batch as the object —
//! so a crash leaves both or neither, and state transfer (which writes
//! through the same engine) indexes what it copies. Dropping a region drops
//! its entries. Readers never trust an entry alone: the page readers
//! ([`key_order_page`], [`sorted_page`]) load the object an entry names,
//! skip it unless its current value still has the entry's coordinate, and
//! evaluate every check on it.
//!
//! Which index a search uses is pure ([`choose_access`]): an equality
//! first, then the walk of the sort attribute in order when a sorted search
//! has a limit and nothing else narrows, then the narrowest range, else the
//! whole region. A check whose interval covers this region's whole cell
//! (its subspace already confines every object to it) narrows nothing.

mod access;
mod engine;
mod entry;
mod page;
mod slot;

pub use access::{choose_access, place_in, place_of, walk_is_bounded, Access, RegionPlace, Walk};
pub use engine::IndexedEngine;
pub use entry::{entry, entry_bounds, entry_parts, object_entries, ordered_entry};
pub use page::{
    key_order_page, sorted_page, stored_object, Keep, Match, PageBounds, ReadPageError,
};
pub use slot::{path_slot, path_slots, Slot, ORDERED_SLOT_BASE, PATH_SLOT_BASE};
use tessera_types::{Space, SubspaceKind};

/// The slots every region of subspace `subspace` (its position) of `space`
/// indexes: in a global index's indexlets, the one ordered slot of its
/// attribute; elsewhere the attributes of [`indexed_attrs`], then every
/// path index the configuration holds, whatever its state — a building one
/// must receive every write, and a dropping one keeps its entries until it
/// leaves the configuration, when the engine purges them.
pub fn region_slots(space: &Space, subspace: usize) -> Vec<Slot> {
    if let Some(layout) = space.subspaces.get(subspace) {
        if layout.kind == SubspaceKind::GlobalIndex {
            return layout.attrs.iter().copied().map(Slot::Ordered).collect();
        }
    }
    indexed_attrs(space, subspace)
        .into_iter()
        .map(Slot::Attr)
        .chain(path_slots(space, |_| true))
        .collect()
}

/// The attributes the regions of subspace `subspace` (0: the key subspace)
/// index, ascending: in the key subspace every indexed attribute of the
/// space ([`SpaceDesc::indexed_attrs`]: those a subspace or an `index`
/// clause names); in another subspace its own attributes and the `index`
/// clauses' (hashable ones only); in a global index's indexlets none (they
/// keep an ordered slot, [`region_slots`]). A search goes to one
/// subspace's regions: to the subspace of the attribute its checks narrow,
/// or to the key subspace when none narrows — so each put writes entries
/// in proportion to its subspaces, not to their square.
///
/// [`SpaceDesc::indexed_attrs`]: tessera_types::SpaceDesc::indexed_attrs
pub fn indexed_attrs(space: &Space, subspace: usize) -> Vec<usize> {
    let desc = &space.desc;
    if subspace == 0 {
        return desc.indexed_attrs();
    }
    match space.subspaces.get(subspace) {
        Some(layout) if layout.kind.holds_objects() => {
            desc.indexable(layout.attrs.iter().chain(&desc.indexes))
        }
        Some(_) => Vec::new(),
        None => desc.indexable(&desc.indexes),
    }
}
