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
    let mut out = Vec::new();
    encode_into(message, &mut out);
    out
}

/// Appends a message to `out` as one frame (length prefix included), so
/// that a writer can gather several frames into one buffer and hand them
/// to the socket with one write.
pub fn encode_into(message: &Message, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    *out =
        postcard::to_extend(message, std::mem::take(out)).expect("encoding to a Vec cannot fail");
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
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
    // Grow the buffer as the body arrives rather than reserving the
    // declared length up front: four bytes from a peer must not pin the
    // frame maximum in memory while the rest never comes.
    let mut body = Vec::with_capacity(len.min(FRAME_PREALLOC_BYTES_MAX));
    let read = (&mut *reader)
        .take(len as u64)
        .read_to_end(&mut body)
        .await?;
    if read < len {
        return Err(FrameError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the connection closed {read} bytes into a frame of {len}"),
        )));
    }
    decode(&body)
}

/// The most a frame's buffer reserves before its bytes arrive.
const FRAME_PREALLOC_BYTES_MAX: usize = 64 * 1024;

/// Writes one frame (not flushed).
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Message,
) -> Result<(), FrameError> {
    writer.write_all(&encode(message)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::CoordRequest;

    fn frame(message: &Message) -> Vec<u8> {
        encode(message)
    }

    /// Frames gathered into one buffer read back one by one, in order,
    /// each the same bytes `encode` gives alone.
    #[tokio::test]
    async fn frames_appended_to_one_buffer_read_back_in_order() {
        let messages: Vec<Message> = (0..5)
            .map(|id| Message::CoordRequest {
                id,
                request: CoordRequest::Status,
            })
            .collect();
        let mut gathered = b"left alone".to_vec();
        for message in &messages {
            encode_into(message, &mut gathered);
        }
        let alone: Vec<u8> = messages.iter().flat_map(encode).collect();
        assert_eq!(&gathered[..10], b"left alone");
        assert_eq!(&gathered[10..], &alone[..]);
        let mut reader = &gathered[10..];
        for message in &messages {
            assert_eq!(&read_frame(&mut reader, 1 << 20).await.unwrap(), message);
        }
        assert!(matches!(
            read_frame(&mut reader, 1 << 20).await,
            Err(FrameError::Closed)
        ));
    }

    #[tokio::test]
    async fn a_frame_reads_back_and_a_truncated_one_is_an_error() {
        let message = Message::CoordRequest {
            id: 7,
            request: CoordRequest::Status,
        };
        let bytes = frame(&message);
        let mut reader = &bytes[..];
        assert_eq!(read_frame(&mut reader, 1 << 20).await.unwrap(), message);
        assert!(matches!(
            read_frame(&mut reader, 1 << 20).await,
            Err(FrameError::Closed)
        ));
        // A header that promises far more than ever arrives.
        let mut truncated = ((1u32 << 20) - 1).to_be_bytes().to_vec();
        truncated.extend_from_slice(&bytes[4..]);
        let mut reader = &truncated[..];
        match read_frame(&mut reader, 1 << 20).await {
            Err(FrameError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof),
            other => panic!("expected a truncated frame error, got {other:?}"),
        }
        // And one above the maximum is refused before its body is read.
        let mut reader = &truncated[..];
        assert!(matches!(
            read_frame(&mut reader, 1024).await,
            Err(FrameError::TooLarge { .. })
        ));
    }
}
