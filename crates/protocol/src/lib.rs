//! `tessera-protocol`: every message that crosses a socket, the status codes
//! they carry, and the framing that delimits them.
//!
//! Only this crate knows byte layouts (see `docs/PROTOCOL.md`). A frame is a
//! 4-byte big-endian body length followed by the body, a postcard-encoded
//! [`Message`]. Decoders never panic and never allocate more than the
//! configured maximum frame size.

// A network client: its deadlines are real time.
#[allow(clippy::disallowed_methods)]
pub mod coord_client;
pub mod credential;
pub mod frame;
pub mod messages;
pub mod object_bytes;
pub mod report;
pub mod status;
#[cfg(any(test, feature = "test-certs"))]
pub mod test_certs;
pub mod transport;

pub use credential::{AdminToken, AdminTokenError};
pub use frame::{read_frame, read_frame_shared, write_frame, FrameError, FRAME_BYTES_MAX_DEFAULT};
pub use messages::*;
pub use object_bytes::{DecodeObjectError, ObjectBytes, ObjectView};
pub use status::{AdminStatus, Status};
pub use transport::{TlsFiles, Transport};
