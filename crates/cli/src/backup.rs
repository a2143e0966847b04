//! `tessera backup DIR` and `tessera restore DIR --data DIR2`
//! (docs/design/backup.md).
//!
//! A restore builds the new cluster's data directory offline: it runs a
//! `tessera dev` cluster of the chosen size on a temporary sibling of
//! DIR2, creates the backup's spaces and writes every object through the
//! ordinary write path (so every subspace and index is built as for any
//! write), waits until the cluster is stable, stops it cleanly and renames
//! the directory into place. `tessera dev --data DIR2 --port P --daemons N`
//! then resumes that cluster.

use crate::dev::{self, DevOptions};
use crate::progress::Progress;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tessera_bench::cluster::{wait_ready, READY_TIMEOUT};
use tessera_client::backup::{restore_objects, BackupContents, BackupProgress};
use tessera_client::Admin;

/// How long the restored cluster may take to become stable once loaded.
const STABLE_TIMEOUT: Duration = Duration::from_secs(120);

/// `tessera backup DIR`.
pub async fn backup(coordinator: &str, dir: &Path) -> anyhow::Result<()> {
    let admin = Admin::new(coordinator);
    let started = Instant::now();
    let mut bar = Progress::new("backup");
    let report = admin
        .backup(dir, &mut |step| match step {
            BackupProgress::Frozen { epoch } => {
                bar.update(0, &format!("objects frozen at epoch {}", epoch.0))
            }
            BackupProgress::Resumed { pause } => {
                bar.update(0, &format!("writes resumed after {} ms", pause.as_millis()))
            }
            BackupProgress::Copied {
                done,
                total,
                objects,
            } => {
                let percent = u8::try_from(done * 100 / total.max(1)).unwrap_or(100);
                bar.update(
                    percent,
                    &format!("{done}/{total} regions, {objects} objects"),
                );
            }
        })
        .await;
    bar.finish();
    let report = report.with_context(|| format!("backup into {}", dir.display()))?;
    println!(
        "backup {}: epoch {}, {} objects in {} regions, {} bytes; writes paused {:.1} ms; took {:.2} s",
        dir.display(),
        report.epoch.0,
        report.objects,
        report.regions,
        report.bytes,
        report.pause.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `tessera restore DIR --data DATA --daemons N --port P`.
pub async fn restore(dir: &Path, data: &Path, daemons: usize, port: u16) -> anyhow::Result<()> {
    let started = Instant::now();
    // Every file is checked before anything is written.
    let contents = BackupContents::open(dir)
        .with_context(|| format!("reading the backup {}", dir.display()))?;
    if std::fs::read_dir(data).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!(
            "the data directory {} exists and is not empty; a restore writes a new cluster",
            data.display()
        );
    }
    let name = data
        .file_name()
        .with_context(|| format!("{} names no directory", data.display()))?;
    let partial = data.with_file_name(format!(
        ".{}.restoring-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let loaded = load(&contents, &partial, daemons, port).await;
    match loaded {
        Ok(objects) => {
            std::fs::rename(&partial, data)
                .with_context(|| format!("moving {} to {}", partial.display(), data.display()))?;
            println!(
                "restored {objects} objects of {} spaces into {} in {:.2} s; start it with: tessera dev --data {} --port {port} --daemons {daemons}",
                contents.config.spaces.len(),
                data.display(),
                started.elapsed().as_secs_f64(),
                data.display()
            );
            Ok(())
        }
        Err(e) => {
            // Nothing half-restored stays behind.
            let _ = std::fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

/// Runs a dev cluster on `partial`, loads the backup into it and stops it.
async fn load(
    contents: &BackupContents,
    partial: &Path,
    daemons: usize,
    port: u16,
) -> anyhow::Result<u64> {
    let options = DevOptions {
        daemons,
        port,
        data: PathBuf::from(partial),
        durability: tessera_daemon::Durability::default(),
        metrics: false,
        // A private loopback cluster that lives only for the restore.
        transport: tessera_client::Transport::plain(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cluster = tokio::spawn(dev::run(options, async move {
        let _ = stopped.await;
    }));
    let coordinator = format!("127.0.0.1:{port}");
    let loaded = async {
        wait_ready(
            &coordinator,
            &tessera_client::Transport::plain(),
            daemons,
            READY_TIMEOUT,
        )
        .await
        .context("the restoring cluster did not become ready")?;
        let total = contents.object_count();
        let mut bar = Progress::new("restore");
        let loaded = restore_objects(&coordinator, contents, &mut |n| {
            if n % 1024 == 0 || n == total {
                let percent = u8::try_from(n * 100 / total.max(1)).unwrap_or(100);
                bar.update(percent, &format!("{n}/{total} objects"));
            }
        })
        .await;
        bar.finish();
        let loaded = loaded.context("loading the backup")?;
        Admin::new(&coordinator)
            .wait_until_stable(STABLE_TIMEOUT, Duration::from_millis(200))
            .await
            .context("the restored cluster did not become stable")?;
        anyhow::Ok(loaded)
    }
    .await;
    let _ = stop.send(());
    let ran = cluster.await.context("the restoring cluster panicked")?;
    let loaded = loaded?;
    ran.context("the restoring cluster")?;
    Ok(loaded)
}
