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
use std::cell::RefCell;
use std::sync::Arc;
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

/// Decodes a frame body, leaving the objects it carries in it: each
/// [`crate::ObjectBytes`] decoded holds a share of `body` and its range
/// instead of a copy (see [`read_frame_shared`]).
pub fn decode_shared(body: Vec<u8>) -> Result<Message, FrameError> {
    let body = Arc::new(body);
    let _in = InFrame::enter(body.clone());
    decode(&body)
}

thread_local! {
    /// The frame [`decode_shared`] is decoding on this thread.
    static DECODING: RefCell<Option<Arc<Vec<u8>>>> = const { RefCell::new(None) };
}

/// Sets the frame being decoded, and clears it when dropped (also when
/// decoding panics), so no later decode on the thread sees it.
struct InFrame;

impl InFrame {
    fn enter(frame: Arc<Vec<u8>>) -> InFrame {
        DECODING.with(|d| *d.borrow_mut() = Some(frame));
        InFrame
    }
}

impl Drop for InFrame {
    fn drop(&mut self) {
        DECODING.with(|d| *d.borrow_mut() = None);
    }
}

/// When `bytes` lie inside the frame [`decode_shared`] is decoding on this
/// thread: that frame and where they start in it.
pub(crate) fn shared_range(bytes: &[u8]) -> Option<(Arc<Vec<u8>>, usize)> {
    DECODING.with(|d| {
        let d = d.borrow();
        let frame = d.as_ref()?;
        let base = frame.as_ptr() as usize;
        let at = bytes.as_ptr() as usize;
        let start = at.checked_sub(base)?;
        (start.checked_add(bytes.len())? <= frame.len()).then(|| (frame.clone(), start))
    })
}

/// Reads one frame. `Closed` on a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    frame_bytes_max: usize,
) -> Result<Message, FrameError> {
    decode(&read_body(reader, frame_bytes_max).await?)
}

/// Reads one frame as [`read_frame`] does, and decodes it with
/// [`decode_shared`]: the objects it carries are not copied out of it.
/// For readers that hand objects to their callers whole (the client's);
/// a daemon, which keeps some of the objects it receives for long, copies
/// each (a kept object would keep its whole frame).
pub async fn read_frame_shared<R: AsyncRead + Unpin>(
    reader: &mut R,
    frame_bytes_max: usize,
) -> Result<Message, FrameError> {
    decode_shared(read_body(reader, frame_bytes_max).await?)
}

/// Reads one frame's body.
async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    frame_bytes_max: usize,
) -> Result<Vec<u8>, FrameError> {
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
    Ok(body)
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

    fn page_of(objects: &[tessera_types::Object]) -> Message {
        Message::DaemonResponse {
            id: 3,
            response: crate::messages::DaemonResponse::SearchPage {
                objects: objects
                    .iter()
                    .enumerate()
                    .map(|(i, o)| {
                        (
                            tessera_types::Version(i as u64 + 1),
                            crate::ObjectBytes::encode(o),
                        )
                    })
                    .collect(),
                more: true,
            },
        }
    }

    fn objects_of(message: Message) -> Vec<crate::ObjectBytes> {
        match message {
            Message::DaemonResponse {
                response: crate::messages::DaemonResponse::SearchPage { objects, .. },
                ..
            } => objects.into_iter().map(|(_, o)| o).collect(),
            other => panic!("expected a search page, got {other:?}"),
        }
    }

    /// A page read with `read_frame_shared` holds its objects in the frame
    /// (not copied), equal to what was sent; read with `read_frame` (and
    /// decoded on the same thread afterwards, or after a malformed frame)
    /// each object owns its bytes.
    #[tokio::test]
    async fn shared_frames_leave_objects_in_place_and_plain_ones_copy_them() {
        use tessera_types::{Object, Value};
        let sent: Vec<Object> = (0..3)
            .map(|n| Object {
                values: vec![Value::Int(n), Value::str(&"x".repeat(100 + n as usize))],
            })
            .collect();
        let bytes = frame(&page_of(&sent));
        let mut reader = &bytes[..];
        let shared = objects_of(read_frame_shared(&mut reader, 1 << 20).await.unwrap());
        assert!(shared.iter().all(|o| o.in_frame()));
        let back: Vec<Object> = shared.iter().map(|o| o.decode().unwrap()).collect();
        assert_eq!(back, sent);

        // A malformed body ends its decode with an error, and no later
        // decode on this thread takes its bytes for a frame's.
        assert!(decode_shared(vec![0xff; 9]).is_err());
        let mut reader = &bytes[..];
        let owned = objects_of(read_frame(&mut reader, 1 << 20).await.unwrap());
        assert!(owned.iter().all(|o| !o.in_frame()));
        assert_eq!(owned, shared);
        // Taken out of the frame, an object's bytes are a copy that
        // outlives it.
        let first = shared.into_iter().next().unwrap().into_vec();
        assert_eq!(crate::ObjectBytes::encode(&sent[0]).into_vec(), first);
    }
}
