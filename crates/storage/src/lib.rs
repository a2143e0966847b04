//! tessera-storage (in progress)
