//! Region math: cutting a subspace into a grid and finding a point's cell.
//! TODO(types helper): implement.

use crate::config::{Region, SubspaceLayout};
use crate::value::Object;

/// Intervals per dimension for about `partitions` regions over `dims`
/// dimensions: counts as equal as possible, product as close as possible.
pub fn grid_for_partitions(partitions: u32, dims: usize) -> Vec<u32> {
    let _ = (partitions, dims);
    unimplemented!()
}

/// Split points cutting the whole `u64` axis into `intervals` equal intervals.
pub fn uniform_splits(intervals: u32) -> Vec<u64> {
    let _ = intervals;
    unimplemented!()
}

/// The interval of `coordinate` given sorted split points.
pub fn interval_index(splits: &[u64], coordinate: u64) -> usize {
    splits.partition_point(|s| *s <= coordinate)
}

impl SubspaceLayout {
    /// The index into `regions` of the cell holding this point (one
    /// coordinate per dimension).
    pub fn region_index(&self, coordinates: &[u64]) -> usize {
        let _ = coordinates;
        unimplemented!()
    }

    /// The region holding `object` in this subspace.
    pub fn region_of(&self, object: &Object) -> &Region {
        let _ = object;
        unimplemented!()
    }
}
