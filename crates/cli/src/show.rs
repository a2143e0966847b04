//! `show-config` and `list-subspaces`: the configuration as text.

use std::fmt::Write;
use tessera_types::{Configuration, DaemonState, Space};

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
        let state = match daemon.state {
            DaemonState::Available => "available",
            DaemonState::Offline => "offline",
        };
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
    for (index, subspace) in space.subspaces.iter().enumerate() {
        let names: Vec<&str> = subspace
            .attrs
            .iter()
            .map(|&a| desc.attrs[a].name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "    subspace {index} ({}): {} regions",
            names.join(", "),
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
}

/// `list-subspaces`: one line per subspace with its attribute names.
pub fn subspaces_text(space: &Space) -> String {
    let mut out = String::new();
    for (index, subspace) in space.subspaces.iter().enumerate() {
        let names: Vec<&str> = subspace
            .attrs
            .iter()
            .map(|&a| space.desc.attrs[a].name.as_str())
            .collect();
        let _ = writeln!(out, "{index}: {}", names.join(", "));
    }
    out
}
