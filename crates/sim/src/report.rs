//! What a run reports: one seed's figures, a failure with its replay
//! line, and the sum over many seeds.

/// What one run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub knobs: String,
    /// Simulated milliseconds until the checks ran.
    pub sim_ms: u64,
    pub operations: usize,
    pub messages: u64,
    pub dropped: u64,
    pub crashes: u32,
    pub partitions: u32,
    pub coordinator_outages: u32,
    pub disk_faults: u32,
    pub epochs: u64,
    pub transfers: u64,
}

/// A failed run: what went wrong, and how to replay it.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub knobs: String,
    pub at_ms: u64,
    pub what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at {} ms ({})\n{}\nreplay: cargo run -p tessera-sim -- --seed {} --trace",
            self.seed, self.at_ms, self.knobs, self.what, self.seed
        )
    }
}

/// What a run of many seeds did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub sim_ms: u64,
    pub operations: usize,
    pub crashes: u32,
    pub partitions: u32,
    pub coordinator_outages: u32,
    pub disk_faults: u32,
    pub transfers: u64,
    pub failed: Vec<u64>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} seeds: {:.0} simulated seconds, {} operations, {} daemon crashes, {} partitions, \
             {} coordinator outages, {} disk faults, {} state transfers; {} failed {:?}",
            self.seeds,
            self.sim_ms as f64 / 1000.0,
            self.operations,
            self.crashes,
            self.partitions,
            self.coordinator_outages,
            self.disk_faults,
            self.transfers,
            self.failed.len(),
            self.failed
        )
    }
}
