//! `show-config` and `list-subspaces`: the configuration as text.

use serde_json::{json, Value as Json};
use std::fmt::Write;
use tessera_types::replex::{at_risk_fraction, regions_beside_other_copies};
use tessera_types::{Configuration, DaemonState, PartKind, PartState, Space, SubspaceKind};

/// The configuration for humans: epoch, coordinators, daemons with their
/// state, running state transfers and replex rebuilds, and every space's subspaces with each
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
    if !config.rebuilds.is_empty() {
        let _ = writeln!(out, "rebuilds:");
        for r in &config.rebuilds {
            let sources: Vec<String> = r
                .sources
                .iter()
                .map(|(region, daemon)| format!("{region} on {daemon}"))
                .collect();
            let _ = writeln!(
                out,
                "  r{} region {} -> {} from {}",
                r.id,
                r.region,
                r.to,
                sources.join(", ")
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
    if let Some(replex) = &desc.replex {
        let _ = writeln!(
            out,
            "    replex space: {} copies, one daemon per region; {} placement; {} of objects \
             have two copies on one daemon",
            replex.copies(),
            if replex.relaxed { "relaxed" } else { "strict" },
            percent(at_risk_fraction(space))
        );
    }
    for subspace in &space.subspaces {
        let names: Vec<&str> = subspace
            .attrs
            .iter()
            .map(|&a| desc.attrs[a].name.as_str())
            .collect();
        let (what, regions) = match subspace.kind {
            SubspaceKind::Subspace => ("subspace", "regions"),
            SubspaceKind::GlobalIndex => ("global index", "indexlets"),
            SubspaceKind::Replex => ("replex", "regions"),
            SubspaceKind::Hybrid => ("hybrid", "regions"),
        };
        let groups = match (subspace.kind, subspace.grid().as_slice()) {
            (SubspaceKind::Hybrid, [n1, n2]) => format!(", groups {n1} x {n2}"),
            _ => String::new(),
        };
        let position = space
            .subspaces
            .iter()
            .position(|l| l.part == subspace.part)
            .unwrap_or_default();
        // Only a part being built may sit beside other copies (the parts
        // it sits beside wait for nothing).
        let beside = if matches!(subspace.state, PartState::Building { .. }) {
            regions_beside_other_copies(space, position)
        } else {
            0
        };
        let waiting = if beside > 0 {
            format!(
                "; {beside} wait beside other copies of their objects for a daemon that may hold \
                 them (one holding no region of the other replexes)"
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "    {what} {} ({}): {}, {} {regions}{groups}{waiting}",
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
                match config.waiting.get(&region.id) {
                    Some(d) => format!("(no replica; waits for {d} to return)"),
                    None => "(no replica)".to_string(),
                }
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

/// A fraction as a percentage with two decimals (`0.00%` when none).
fn percent(fraction: f64) -> String {
    format!("{:.2}%", fraction * 100.0)
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

/// `list-subspaces`: one line `N: a, b` per subspace, replex or hybrid, N
/// being its part id (what `rm-subspace` takes; 0 is the key subspace,
/// first). A dropping subspace is on its way out and is not listed, nor is
/// a global index (`list-indices` lists those).
pub fn subspaces_text(space: &Space) -> String {
    let mut out = String::new();
    for subspace in space
        .subspaces
        .iter()
        .filter(|l| l.state != PartState::Dropping && l.kind.holds_objects())
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
/// `chain` (daemon ids, head first). A replex space's parts are of kind
/// `key`, `hybrid` (with `groups`: its two group counts) and `replex`, each
/// region's chain one daemon; the space adds `replex`: its `copies`,
/// whether placement is `relaxed`, and `at_risk`, the fraction of objects
/// two of whose copies share a daemon.
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
    let rebuilds: Vec<Json> = config
        .rebuilds
        .iter()
        .map(|r| {
            let sources: Vec<Json> = r
                .sources
                .iter()
                .map(|(region, daemon)| json!({"region": region.0, "daemon": daemon.0}))
                .collect();
            json!({"id": r.id, "region": r.region.0, "to": r.to.0, "sources": sources})
        })
        .collect();
    let spaces: Vec<Json> = config
        .spaces
        .iter()
        .map(|space| space_json(space, &config.waiting))
        .collect();
    json!({
        "dashboard": dashboard_url(config),
        "epoch": config.epoch.0,
        "read_only": config.read_only,
        "tombstone_horizon": config.tombstone_horizon.0,
        "advisor": config.advisor,
        "coordinators": coordinators,
        "daemons": daemons,
        "transfers": transfers,
        "rebuilds": rebuilds,
        "spaces": spaces,
    })
}

/// A space's parts and regions; `waiting`: the daemon each emptied region
/// waits for (`waits_for`).
fn space_json(
    space: &Space,
    waiting: &std::collections::BTreeMap<tessera_types::RegionId, tessera_types::DaemonId>,
) -> Json {
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
                        let mut out = json!({"id": region.id.0, "bounds": bounds, "chain": chain});
                        if let Some(d) = waiting.get(&region.id) {
                            out["waits_for"] = json!(d.0);
                        }
                        out
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
            if let (Some(layout), PartKind::Hybrid) = (part.layout, part.kind) {
                entry["groups"] = json!(layout.grid());
            }
            let building = matches!(part.state, PartState::Building { .. });
            let position = space.subspaces.iter().position(|l| l.part == part.id);
            if let Some(position) = position.filter(|_| building) {
                let beside = regions_beside_other_copies(space, position);
                if beside > 0 {
                    entry["waiting"] = json!(beside);
                }
            }
            entry
        })
        .collect();
    let mut out = json!({
        "name": space.desc.name,
        "id": space.id.0,
        "tolerate": space.desc.fault_tolerance,
        "partitions": space.desc.partitions,
        "parts": parts,
    });
    if let Some(replex) = &space.desc.replex {
        out["replex"] = json!({
            "copies": replex.copies(),
            "relaxed": replex.relaxed,
            "at_risk": at_risk_fraction(space),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{DaemonId, DaemonInfo, SpaceId};

    /// A replex space laid out as a coordinator would, each region on one
    /// daemon: the key subspace on daemon 1, the hybrid on 2, the replex
    /// on 3.
    fn replex_config() -> Configuration {
        let desc = tessera_types::parse_space(
            "space r key k attributes a replex a hybrid k, a groups 2, 2 create 4 partitions",
        )
        .unwrap();
        let mut space = tessera_types::region::default_layout(SpaceId(1), desc);
        for (k, layout) in space.subspaces.iter_mut().enumerate() {
            for region in &mut layout.regions {
                region.chain = vec![DaemonId(k as u64 + 1)];
            }
        }
        let daemons = (1..=3)
            .map(|i| {
                let id = DaemonId(i);
                let info = DaemonInfo {
                    id,
                    addr: format!("127.0.0.1:{}", 2000 + i),
                    state: DaemonState::Available,
                    metrics: None,
                };
                (id, info)
            })
            .collect();
        Configuration {
            daemons,
            spaces: vec![space],
            ..Configuration::default()
        }
    }

    /// A replex being built whose regions sit beside other copies of
    /// their objects says how many wait, in text and in JSON; once they
    /// are apart nothing is said.
    #[test]
    fn a_building_replex_says_how_many_regions_wait_beside_other_copies() {
        let mut config = replex_config();
        let space = &mut config.spaces[0];
        let replex = &mut space.subspaces[2];
        replex.state = PartState::Building { progress: 99 };
        // Two of the replex's four regions on the key subspace's daemon.
        replex.regions[0].chain = vec![DaemonId(1)];
        replex.regions[1].chain = vec![DaemonId(1)];
        let text = config_text(&config);
        assert!(
            text.contains("replex 2 (a): building 99%, 4 regions; 2 wait beside other copies"),
            "{text}"
        );
        let json = config_json(&config);
        assert_eq!(json["spaces"][0]["parts"][2]["waiting"], json!(2));
        assert_eq!(json["spaces"][0]["parts"][1].get("waiting"), None);
        // The key subspace it sits beside is ready and waits for nothing.
        assert_eq!(json["spaces"][0]["parts"][0].get("waiting"), None);
        assert!(
            text.contains("subspace 0 (k): ready, 4 regions\n"),
            "{text}"
        );
        let apart = replex_config();
        assert!(!config_text(&apart).contains("wait beside"));
        assert_eq!(
            config_json(&apart)["spaces"][0]["parts"][2].get("waiting"),
            None
        );
    }

    #[test]
    fn replex_spaces_show_their_kinds_and_one_daemon_per_region() {
        let config = replex_config();
        let json = config_json(&config);
        let space = &json["spaces"][0];
        let kinds: Vec<&str> = space["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, vec!["key", "hybrid", "replex"]);
        for part in space["parts"].as_array().unwrap() {
            for region in part["regions"].as_array().unwrap() {
                assert_eq!(region["chain"].as_array().unwrap().len(), 1, "{part}");
            }
        }
        assert_eq!(space["parts"][1]["groups"], json!([2, 2]));
        assert_eq!(space["parts"][1]["attributes"], json!(["k", "a"]));
        assert_eq!(space["tolerate"], json!(2));
        assert_eq!(space["replex"]["copies"], json!(3));
        assert_eq!(space["replex"]["at_risk"], json!(0.0));
        let text = config_text(&config);
        assert!(text.contains("    replex space: 3 copies"), "{text}");
        assert!(text.contains("0.00% of objects"), "{text}");
        assert!(
            text.contains("    hybrid 1 (k, a): ready, 4 regions, groups 2 x 2"),
            "{text}"
        );
        assert!(
            text.contains("    replex 2 (a): ready, 4 regions"),
            "{text}"
        );
        assert_eq!(subspaces_text(&config.spaces[0]), "0: k\n1: k, a\n2: a\n");
    }

    #[test]
    fn a_running_rebuild_shows_its_region_target_and_sources() {
        let mut config = replex_config();
        let lost = config.spaces[0].subspaces[0].regions[0].id;
        config.spaces[0].subspaces[0].regions[0].chain.clear();
        let sources: Vec<(tessera_types::RegionId, DaemonId)> = config.spaces[0].subspaces[1]
            .regions
            .iter()
            .take(2)
            .map(|r| (r.id, r.chain[0]))
            .collect();
        config.rebuilds = vec![tessera_types::Rebuild {
            id: 7,
            region: lost,
            to: DaemonId(3),
            sources: sources.clone(),
        }];
        let json = config_json(&config);
        let rebuild = &json["rebuilds"][0];
        assert_eq!(rebuild["id"], json!(7));
        assert_eq!(rebuild["region"], json!(lost.0));
        assert_eq!(rebuild["to"], json!(3));
        let shown: Vec<(u64, u64)> = rebuild["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["region"].as_u64().unwrap(), s["daemon"].as_u64().unwrap()))
            .collect();
        let expected: Vec<(u64, u64)> = sources.iter().map(|(r, d)| (r.0, d.0)).collect();
        assert_eq!(shown, expected);
        let text = config_text(&config);
        let line = format!(
            "  r7 region {lost} -> {} from {} on {}, {} on {}",
            DaemonId(3),
            sources[0].0,
            sources[0].1,
            sources[1].0,
            sources[1].1
        );
        assert!(text.contains(&format!("rebuilds:\n{line}\n")), "{text}");
    }

    #[test]
    fn an_emptied_region_names_the_daemon_it_waits_for() {
        let mut config = replex_config();
        let emptied = config.spaces[0].subspaces[0].regions[0].id;
        let other = config.spaces[0].subspaces[0].regions[1].id;
        config.spaces[0].subspaces[0].regions[0].chain.clear();
        config.spaces[0].subspaces[0].regions[1].chain.clear();
        config.waiting.insert(emptied, DaemonId(2));
        let text = config_text(&config);
        assert!(
            text.contains(&format!("{emptied} "))
                && text.contains("(no replica; waits for d2 to return)"),
            "{text}"
        );
        assert_eq!(text.matches("(no replica)").count(), 1, "{text}");
        let json = config_json(&config);
        let regions = json["spaces"][0]["parts"][0]["regions"].as_array().unwrap();
        let by_id = |id: tessera_types::RegionId| {
            regions
                .iter()
                .find(|r| r["id"] == json!(id.0))
                .unwrap()
                .clone()
        };
        assert_eq!(by_id(emptied)["waits_for"], json!(2));
        assert!(by_id(other).get("waits_for").is_none());
    }
}
