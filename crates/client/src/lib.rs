//! tessera-client (in progress)
