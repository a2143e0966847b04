//! `show-config` and `list-subspaces`: the configuration as text.

use serde_json::{json, Value as Json};
use std::fmt::Write;
use tessera_types::{Configuration, DaemonState, PartKind, PartState, Space, SubspaceKind};

/// The configuration for humans: epoch, coordinators, daemons with their
/// state, running state transfers, and every space's subspaces with each
/// region's bounds and replica chain (head first).
pub fn config_text(config: &Configuration) -> String {
    let mut out = String::new();
    let mode = if config.read_only {
        "read-only"
    } else {
        "read-write"
    };
    let _ = writeln!(out, "epoch {} ({mode})", config.epoch.0);
    let _ = writeln!(out, "coordinators:");
    for member in &config.coordinators {
        let _ = writeln!(
            out,
            "  {} {}{}",
            member.id,
            member.addr,
            metrics_text(&member.metrics)
        );
    }
    let _ = writeln!(out, "daemons:");
    for daemon in config.daemons.values() {
        let state = daemon_state(daemon.state);
        let _ = writeln!(
            out,
            "  {} {state} {}{}",
            daemon.id,
            daemon.addr,
            metrics_text(&daemon.metrics)
        );
    }
    if !config.transfers.is_empty() {
        let _ = writeln!(out, "transfers:");
        for t in &config.transfers {
            let _ = writeln!(
                out,
                "  t{} region {}: {} -> {}",
                t.id, t.region, t.from, t.to
            );
        }
    }
    let _ = writeln!(out, "spaces:");
    for space in &config.spaces {
        space_text(&mut out, config, space);
    }
    out
}

/// ` metrics URL` when a process serves metrics.
fn metrics_text(url: &Option<String>) -> String {
    url.as_deref()
        .map(|u| format!(" metrics {u}"))
        .unwrap_or_default()
}

fn space_text(out: &mut String, config: &Configuration, space: &Space) {
    let desc = &space.desc;
    let attrs: Vec<String> = desc.attrs[1..]
        .iter()
        .map(|a| format!("{} {}", a.dtype, a.name))
        .collect();
    let _ = writeln!(
        out,
        "  space {} ({}): key {} {}; attributes [{}]; tolerate {} failure{}; {} partitions{}",
        desc.name,
        space.id,
        desc.key().dtype,
        desc.key().name,
        attrs.join(", "),
        desc.fault_tolerance,
        if desc.fault_tolerance == 1 { "" } else { "s" },
        desc.partitions,
        if desc.authorization {
            "; with authorization"
        } else {
            ""
        }
    );
    for subspace in &space.subspaces {
        let names: Vec<&str> = subspace
            .attrs
            .iter()
            .map(|&a| desc.attrs[a].name.as_str())
            .collect();
        let (what, regions) = match subspace.kind {
            SubspaceKind::Subspace => ("subspace", "regions"),
            SubspaceKind::GlobalIndex => ("global index", "indexlets"),
        };
        let _ = writeln!(
            out,
            "    {what} {} ({}): {}, {} {regions}",
            subspace.part.0,
            names.join(", "),
            subspace.state,
            subspace.regions.len()
        );
        for (region_index, region) in subspace.regions.iter().enumerate() {
            let bounds: Vec<String> = subspace
                .cell_bounds(region_index)
                .into_iter()
                .map(|(lo, hi)| format!("[{lo:016x}, {hi:016x}]"))
                .collect();
            let chain: Vec<String> = region
                .chain
                .iter()
                .map(|d| match config.daemon_addr(*d) {
                    Some(addr) => format!("{d}@{addr}"),
                    None => d.to_string(),
                })
                .collect();
            let chain = if chain.is_empty() {
                "(no replica)".to_string()
            } else {
                chain.join(" -> ")
            };
            let _ = writeln!(out, "      {} {} {chain}", region.id, bounds.join(" x "));
        }
    }
    // The global indexes were listed with the subspaces, indexlets and all.
    for index in tessera_client::index_infos(space) {
        if !index.global {
            let _ = writeln!(out, "    index {}", index_line(index));
        }
    }
}

fn daemon_state(state: DaemonState) -> &'static str {
    match state {
        DaemonState::Available => "available",
        DaemonState::Offline => "offline",
    }
}

/// The names of `attrs` (indexes into the space's attributes).
fn attr_names<'a>(space: &'a Space, attrs: &[usize]) -> Vec<&'a str> {
    attrs
        .iter()
        .map(|&a| space.desc.attrs.get(a).map_or("?", |x| x.name.as_str()))
        .collect()
}

/// `list-subspaces`: one line `N: a, b` per subspace, N being its part id
/// (what `rm-subspace` takes; 0 is the key subspace, first). A dropping
/// subspace is on its way out and is not listed, nor is a global index
/// (`list-indices` lists those).
pub fn subspaces_text(space: &Space) -> String {
    let mut out = String::new();
    for subspace in space
        .subspaces
        .iter()
        .filter(|l| l.state != PartState::Dropping && l.kind == SubspaceKind::Subspace)
    {
        let names = attr_names(space, &subspace.attrs);
        let _ = writeln!(out, "{}: {}", subspace.part.0, names.join(", "));
    }
    out
}

/// `list-indices`: one line `N: attr state` per local index, N being its
/// id (what `rm_index` takes); a document index shows `attr.path`. Then
/// one line `N: attr global state, K indexlets` per global index.
pub fn indices_text(space: &Space) -> String {
    let mut out = String::new();
    for index in tessera_client::index_infos(space) {
        let _ = writeln!(out, "{}", index_line(index));
    }
    out
}

fn index_line(index: tessera_client::IndexInfo) -> String {
    let name = match &index.path {
        Some(path) => format!("{}.{path}", index.attribute),
        None => index.attribute,
    };
    if index.global {
        format!(
            "{}: {name} global {}, {} indexlets",
            index.id.0, index.state, index.indexlets
        )
    } else {
        format!("{}: {name} {}", index.id.0, index.state)
    }
}

/// The dashboard's URL: every coordinator member with a metrics listener
/// serves the dashboard on it; the first one's.
pub fn dashboard_url(config: &Configuration) -> Option<String> {
    config.coordinators.iter().find_map(|c| {
        c.metrics
            .as_deref()
            .and_then(tessera_observe::dashboard_url)
    })
}

/// `show-config --json` (API.md §12.3, §12.5): the dashboard's URL (null
/// when no member serves one), the epoch, coordinators and
/// daemons with `id`, `addr`, `state` and `metrics` (null: the
/// configuration carries no metrics URL), transfers, and per space its
/// `name`, `tolerate` and `parts`, each with `kind`, `attributes`, `state`
/// (and `progress` in percent while building) and `regions` with `id`,
/// `bounds` (inclusive coordinate intervals, one per dimension) and
/// `chain` (daemon ids, head first).
pub fn config_json(config: &Configuration) -> Json {
    let coordinators: Vec<Json> = config
        .coordinators
        .iter()
        .map(|c| json!({"id": c.id, "addr": c.addr, "state": "member", "metrics": c.metrics}))
        .collect();
    let daemons: Vec<Json> = config
        .daemons
        .values()
        .map(|d| {
            json!({"id": d.id.0, "addr": d.addr, "state": daemon_state(d.state), "metrics": d.metrics})
        })
        .collect();
    let transfers: Vec<Json> = config
        .transfers
        .iter()
        .map(|t| json!({"id": t.id, "region": t.region.0, "from": t.from.0, "to": t.to.0}))
        .collect();
    let spaces: Vec<Json> = config.spaces.iter().map(space_json).collect();
    json!({
        "dashboard": dashboard_url(config),
        "epoch": config.epoch.0,
        "read_only": config.read_only,
        "tombstone_horizon": config.tombstone_horizon.0,
        "advisor": config.advisor,
        "coordinators": coordinators,
        "daemons": daemons,
        "transfers": transfers,
        "spaces": spaces,
    })
}

fn space_json(space: &Space) -> Json {
    let parts: Vec<Json> = space
        .parts()
        .iter()
        .map(|part| {
            let regions: Vec<Json> = part.layout.map_or_else(Vec::new, |layout| {
                layout
                    .regions
                    .iter()
                    .enumerate()
                    .map(|(i, region)| {
                        let bounds: Vec<[u64; 2]> = layout
                            .cell_bounds(i)
                            .into_iter()
                            .map(|(lo, hi)| [lo, hi])
                            .collect();
                        let chain: Vec<u64> = region.chain.iter().map(|d| d.0).collect();
                        json!({"id": region.id.0, "bounds": bounds, "chain": chain})
                    })
                    .collect()
            });
            let mut entry = json!({
                "id": part.id.0,
                "kind": part.kind.name(),
                "attributes": attr_names(space, part.attrs),
                "state": part.state.name(),
                "regions": regions,
            });
            if let PartState::Building { progress } = part.state {
                entry["progress"] = json!(progress);
            }
            if let (Some(path), PartKind::Index) = (part.path, part.kind) {
                entry["path"] = json!(path);
            }
            entry
        })
        .collect();
    json!({
        "name": space.desc.name,
        "id": space.id.0,
        "tolerate": space.desc.fault_tolerance,
        "partitions": space.desc.partitions,
        "parts": parts,
    })
}
