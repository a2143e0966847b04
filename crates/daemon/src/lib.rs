//! tessera-daemon (in progress)
