//! Pure pieces of the chain protocol: evaluating an update at the point
//! leader, and building its value-dependent chain.

use crate::ops::UpdateRefused;
use tessera_protocol::{CmpFailKind, Hop, HopWrite, UpdateRequest};
use tessera_types::coerce::coerce_value;
use tessera_types::{
    Configuration, DaemonId, Object, PartState, Region, RegionId, Space, Value, Version,
};

/// Evaluates `request` against the key's current object (`None` when absent)
/// and returns the object after the update (`None` when it erases).
/// Runs once, at the point leader; replicas receive only the result.
///
/// The flags decide NOTFOUND and CMPFAIL first (API.md §3.5); the checks
/// are evaluated only when the object exists; then every mutation is
/// applied in order to a copy of the object ([`crate::ops::apply`]), so
/// that one failing mutation (CMPFAIL with its [`CmpFailKind`], or
/// WRONGTYPE) leaves nothing changed. The reason then names the attribute.
pub fn evaluate(
    space: &Space,
    current: Option<&Object>,
    request: &UpdateRequest,
) -> Result<Option<Object>, UpdateRefused> {
    let desc = &space.desc;
    let flags = request.flags;
    match current {
        None if flags.must_exist || flags.erase => return Err(UpdateRefused::NotFound),
        Some(_) if flags.must_not_exist => {
            return Err(UpdateRefused::CmpFail {
                kind: CmpFailKind::Exists,
                reason: "an object with this key exists".into(),
            })
        }
        Some(object) => {
            if let Some(check) = request.checks.iter().find(|c| !c.matches(object)) {
                let name = desc.attrs.get(check.attr).map_or("?", |a| a.name.as_str());
                let at = check
                    .path
                    .as_ref()
                    .map_or(String::new(), |p| format!(".{p}"));
                return Err(UpdateRefused::CmpFail {
                    kind: CmpFailKind::Predicate,
                    reason: format!(
                        "the predicate {} on `{name}{at}` does not hold",
                        check.op.name()
                    ),
                });
            }
        }
        None => {}
    }
    if flags.erase {
        return Ok(None);
    }
    let mut object = match current {
        Some(object) => object.clone(),
        None => Object {
            values: std::iter::once(request.key.clone())
                .chain(desc.attrs[1..].iter().map(|a| a.dtype.default_value()))
                .collect(),
        },
    };
    for mutation in &request.mutations {
        if mutation.attr == 0 {
            return Err(UpdateRefused::ChangesKey);
        }
        let Some(attr) = desc.attrs.get(mutation.attr) else {
            return Err(UpdateRefused::UnknownAttr(mutation.attr));
        };
        let value = crate::ops::apply(
            attr.dtype,
            &object.values[mutation.attr],
            mutation.path.as_deref(),
            &mutation.action,
        )
        .map_err(|r| r.reworded(|reason| format!("attribute `{}`: {reason}", attr.name)))?;
        object.values[mutation.attr] = value;
    }
    Ok(Some(object))
}

/// Checks that `key` has the key attribute's type exactly (after coercion it
/// must be unchanged, so that one key has one encoding).
pub fn check_key(space: &Space, key: &Value) -> Result<(), UpdateRefused> {
    let dtype = space.desc.attrs[0].dtype;
    match coerce_value(dtype, key.clone()) {
        Ok(k) if &k == key => Ok(()),
        _ => Err(UpdateRefused::WrongType(format!(
            "the key must be of type {dtype}, not {}",
            key.kind()
        ))),
    }
}

/// The key-subspace region holding `key`.
pub fn key_region<'a>(space: &'a Space, key: &Value) -> Option<&'a Region> {
    space.key_region(key).ok()
}

/// Appends `region`'s replicas; an empty chain (every replica lost, the
/// coordinator waits for the last one to return) is an error: an update
/// that skipped it would leave the region stale for good.
fn push_chain(
    hops: &mut Vec<Hop>,
    region: &Region,
    write: HopWrite,
    after: Option<Version>,
) -> Result<(), RegionId> {
    if region.chain.is_empty() {
        return Err(region.id);
    }
    hops.extend(region.chain.iter().map(|&daemon| Hop {
        daemon,
        region: region.id,
        write,
        after,
    }));
    Ok(())
}

/// Builds the value-dependent chain of an update that turns `old` (at
/// `prev_version`) into `new`:
///
/// ```text
///  key region replicas ─▶ subspace 1: old region ─▶ new region ─▶ subspace 2 … ─▶ tail
///                                     (only when the object relocates; else its one region)
/// ```
///
/// The key region always comes first, so its head — the point leader —
/// orders every update of the key. A region that held the old object must
/// apply `prev_version` before this one (`after`); a region the object moves
/// into takes it fresh. A subspace that is still building gets the update
/// too but waits for nothing: its regions may never have seen
/// `prev_version` (the backfill has not reached the key), and versions
/// alone keep a late backfill from undoing this update. Fails with the
/// first region on the way that has no replica.
pub fn build_hops(
    _config: &Configuration,
    space: &Space,
    key: &Value,
    old: Option<&Object>,
    new: Option<&Object>,
    prev_version: Option<Version>,
) -> Result<Vec<Hop>, RegionId> {
    draw_hops(space, key, old, new, prev_version, &mut push_chain)
}

/// [`build_hops`] for an update that must be drawn even while a region on
/// its way has no replica (a rebuilt point leader's update, see
/// `core::rebuild`): such a region is drawn as one hop naming
/// `placeholder`, and the second value says whether there was one. The
/// update then waits blocked; [`rechain`] draws every region from its
/// replicas once they all have one, so the placeholder is never sent to.
pub fn sketch_hops(
    space: &Space,
    key: &Value,
    old: Option<&Object>,
    new: Option<&Object>,
    prev_version: Option<Version>,
    placeholder: DaemonId,
) -> (Vec<Hop>, bool) {
    let mut blocked = false;
    let mut push = |hops: &mut Vec<Hop>, region: &Region, write, after| {
        if region.chain.is_empty() {
            blocked = true;
            hops.push(Hop {
                daemon: placeholder,
                region: region.id,
                write,
                after,
            });
            return Ok(());
        }
        push_chain(hops, region, write, after)
    };
    let hops = draw_hops(space, key, old, new, prev_version, &mut push)
        .expect("a placeholder stands for every region without replicas");
    (hops, blocked)
}

/// How a region joins a chain being drawn.
type PushChain<'a> =
    dyn FnMut(&mut Vec<Hop>, &Region, HopWrite, Option<Version>) -> Result<(), RegionId> + 'a;

fn draw_hops(
    space: &Space,
    key: &Value,
    old: Option<&Object>,
    new: Option<&Object>,
    prev_version: Option<Version>,
    push_chain: &mut PushChain<'_>,
) -> Result<Vec<Hop>, RegionId> {
    let mut hops = Vec::new();
    if let Some(region) = key_region(space, key) {
        let write = if new.is_some() {
            HopWrite::Put
        } else {
            HopWrite::Remove
        };
        push_chain(&mut hops, region, write, prev_version)?;
    }
    for layout in space.subspaces.iter().skip(1) {
        let prev_version = match layout.state {
            PartState::Building { .. } => None,
            PartState::Ready | PartState::Dropping => prev_version,
        };
        let old_region = old.map(|o| layout.region_of(o));
        let new_region = new.map(|o| layout.region_of(o));
        match (old_region, new_region) {
            (Some(o), Some(n)) if o.id == n.id => {
                push_chain(&mut hops, n, HopWrite::Put, prev_version)?
            }
            (o, n) => {
                if let Some(o) = o {
                    push_chain(&mut hops, o, HopWrite::Remove, prev_version)?;
                }
                if let Some(n) = n {
                    push_chain(&mut hops, n, HopWrite::Put, None)?;
                }
            }
        }
    }
    Ok(hops)
}

/// The chain of anti-entropy's repair of `key` (see
/// `ReplicaCore::on_held`): the key region writes the committed `object`
/// again after `prev_version`; `stray`, a non-key region that holds the key
/// apart from the key subspace, drops it unless the object belongs there;
/// and every subspace puts the object where it belongs. Regions other than
/// the key region take the repair whatever they applied before (versions
/// keep it from undoing anything newer), so a region that missed a write
/// is repaired too instead of waiting for it.
pub fn repair_hops(
    space: &Space,
    key: &Value,
    object: Option<&Object>,
    stray: RegionId,
    prev_version: Option<Version>,
) -> Result<Vec<Hop>, RegionId> {
    let mut hops = key_region_hops(space, key, object, prev_version)?;
    for layout in space.subspaces.iter().skip(1) {
        let home = object.map(|o| layout.region_of(o));
        if let Some(stray) = layout.regions.iter().find(|r| r.id == stray) {
            if home.is_none_or(|h| h.id != stray.id) {
                push_chain(&mut hops, stray, HopWrite::Remove, None)?;
            }
        }
        if let Some(home) = home {
            push_chain(&mut hops, home, HopWrite::Put, None)?;
        }
    }
    Ok(hops)
}

/// The key region's hops of a repair or a backfill: it writes `object`
/// (or its tombstone) again after `prev_version`.
fn key_region_hops(
    space: &Space,
    key: &Value,
    object: Option<&Object>,
    prev_version: Option<Version>,
) -> Result<Vec<Hop>, RegionId> {
    let mut hops = Vec::new();
    if let Some(region) = key_region(space, key) {
        let write = if object.is_some() {
            HopWrite::Put
        } else {
            HopWrite::Remove
        };
        push_chain(&mut hops, region, write, prev_version)?;
    }
    Ok(hops)
}

/// The chain of a backfill sent again for a key whose update was drawn
/// before a part being built existed (`DaemonNode::revisit`): the key
/// region writes the committed `object` (or its tombstone) again after
/// `prev_version`, every part puts the object home, and every part being
/// built also removes it from each of its other regions. Such a region
/// may hold an older version of the object that no update will remove —
/// the update's chain did not include the part —: one a rebuild of the
/// region copied from the other parts while the update was under way
/// (simulator seed 155001241, a replex added by `relayout`).
pub fn revisit_hops(
    space: &Space,
    key: &Value,
    object: Option<&Object>,
    prev_version: Option<Version>,
) -> Result<Vec<Hop>, RegionId> {
    let mut hops = key_region_hops(space, key, object, prev_version)?;
    for layout in space.subspaces.iter().skip(1) {
        let home = object.map(|o| layout.region_of(o).id);
        if matches!(layout.state, PartState::Building { .. }) {
            for region in layout.regions.iter().filter(|r| Some(r.id) != home) {
                push_chain(&mut hops, region, HopWrite::Remove, None)?;
            }
        }
        if let Some(home) = home.and_then(|id| layout.regions.iter().find(|r| r.id == id)) {
            push_chain(&mut hops, home, HopWrite::Put, None)?;
        }
    }
    Ok(hops)
}

/// Why a pending update cannot be drawn in a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unchained {
    /// A region on its way was removed with its space.
    Gone,
    /// A region on its way has no replica now; the update waits for one.
    Unavailable(RegionId),
}

/// The chain of a pending update as `config` draws it: each run of hops in
/// one region is replaced by that region's current replica chain, keeping
/// the run's write and `after`. Regions themselves never move, so the
/// object's old and new regions stay the same; only their members change.
///
/// The first run is the key region's: when it is gone, so is the space.
/// A later run whose region is gone belonged to a part the coordinator
/// dropped: the update no longer goes there.
pub fn rechain(config: &Configuration, hops: &[Hop]) -> Result<Vec<Hop>, Unchained> {
    let mut out = Vec::with_capacity(hops.len());
    let mut i = 0;
    while i < hops.len() {
        let run = hops[i];
        match config.region(run.region) {
            Some((_, _, region)) => push_chain(&mut out, region, run.write, run.after)
                .map_err(Unchained::Unavailable)?,
            None if i == 0 => return Err(Unchained::Gone),
            None => {}
        }
        while i < hops.len() && hops[i].region == run.region {
            i += 1;
        }
    }
    Ok(out)
}

/// Whether an update with chain `next` may be sent while one with chain
/// `pending` is still unacknowledged: only when both travel the same
/// daemons and regions and neither removes anything (a delete or a
/// relocation must be acknowledged before the key moves on).
pub fn can_pipeline(pending: &[Hop], next: &[Hop]) -> bool {
    pending.len() == next.len()
        && pending.iter().zip(next).all(|(a, b)| {
            a.daemon == b.daemon
                && a.region == b.region
                && a.write == HopWrite::Put
                && b.write == HopWrite::Put
        })
}

/// Whether `daemon` appears in the chain at all.
pub fn in_chain(hops: &[Hop], daemon: DaemonId) -> bool {
    hops.iter().any(|h| h.daemon == daemon)
}
