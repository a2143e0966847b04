//! tessera-coordinator (in progress)
