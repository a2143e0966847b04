//! Length-prefixed framing.
//!
//! ```text
//! +----------------------+-------------------------------+
//! | body length: u32 BE  | body: postcard(Message)       |
//! +----------------------+-------------------------------+
//! ```
//!
//! A length above the reader's maximum is refused before anything is
//! allocated; a body that does not decode is a typed error, never a panic.

use crate::messages::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The default largest frame body, in bytes (16 MiB).
pub const FRAME_BYTES_MAX_DEFAULT: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Encodes a message as one frame (length prefix included).
pub fn encode(message: &Message) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    let body =
        postcard::to_extend(message, out.split_off(4)).expect("encoding to a Vec cannot fail");
    let len = body.len() as u32;
    out.copy_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes a frame body.
pub fn decode(body: &[u8]) -> Result<Message, FrameError> {
    postcard::from_bytes(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Reads one frame. `Closed` on a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    frame_bytes_max: usize,
) -> Result<Message, FrameError> {
    let mut len_bytes = [0u8; 4];
    match reader.read_exact(&mut len_bytes).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let len = u32::from_be_bytes(len_bytes) as usize;
    if len > frame_bytes_max {
        return Err(FrameError::TooLarge {
            len,
            max: frame_bytes_max,
        });
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    decode(&body)
}

/// Writes one frame (not flushed).
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Message,
) -> Result<(), FrameError> {
    writer.write_all(&encode(message)).await?;
    Ok(())
}
