//! A response body written as it is sent: whole parts, and parts written
//! piece by piece ([`Chunks`]) into buffers of about [`CHUNK`] bytes.
//!
//! A scrape of 50,000 announced Services is 5.5 MB of text: built as one
//! `String`, it was as much transient memory, and its render held the
//! speaker's one thread from start to end. Streamed, the transient is a
//! chunk or two, and other tasks run between chunks. The length is
//! measured first, chunk by chunk too (the same pieces, written into one
//! buffer and dropped), so the response keeps its `Content-Length`:
//! clients see the same headers and bytes as before.

use std::collections::VecDeque;

use bytes::Bytes;

/// About how many bytes a piece of a [`Chunks`] part holds (a line more,
/// at most).
pub const CHUNK: usize = 64 * 1024;

/// A part of a body written piece by piece. Every pass from a
/// [`Chunks::rewind`] must write the same bytes (an immutable snapshot):
/// the length measured in one pass is the `Content-Length` of the next.
pub trait Chunks: Send + 'static {
    /// Appends the next lines to `out`, stopping once this call appended
    /// at least `min` bytes; `false` once no line is left after them.
    fn fill(&mut self, out: &mut String, min: usize) -> bool;

    /// Starts again from the first line.
    fn rewind(&mut self);
}

/// A body: whole parts and [`Chunks`], in order.
#[derive(Default)]
pub struct Text {
    parts: VecDeque<Part>,
}

enum Part {
    Whole(Bytes),
    Chunks(Box<dyn Chunks>),
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        let mut t = Self::default();
        t.push_str(s);
        t
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Text")
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl Text {
    /// Appends a whole part (nothing if empty).
    pub fn push_str(&mut self, s: String) {
        if !s.is_empty() {
            self.parts.push_back(Part::Whole(Bytes::from(s)));
        }
    }

    /// Appends a part written piece by piece.
    pub fn push_chunks(&mut self, chunks: impl Chunks) {
        self.parts.push_back(Part::Chunks(Box::new(chunks)));
    }

    /// The whole text in one `String` (tests, small bodies).
    pub fn into_string(self) -> String {
        let mut out = String::new();
        for part in self.parts {
            match part {
                Part::Whole(b) => out.push_str(std::str::from_utf8(&b).unwrap_or_default()),
                Part::Chunks(mut c) => while c.fill(&mut out, CHUNK) {},
            }
        }
        out
    }

    /// The body's length in bytes: the whole parts' and each [`Chunks`]
    /// written once into one reused buffer, piece by piece, letting other
    /// tasks run between pieces; then rewound.
    pub async fn measure(&mut self) -> u64 {
        let mut total = 0u64;
        let mut buf = String::new();
        for part in &mut self.parts {
            match part {
                Part::Whole(b) => total += b.len() as u64,
                Part::Chunks(c) => {
                    loop {
                        buf.clear();
                        let more = c.fill(&mut buf, CHUNK);
                        total += buf.len() as u64;
                        if !more {
                            break;
                        }
                        tokio::task::yield_now().await;
                    }
                    c.rewind();
                }
            }
        }
        total
    }

    /// The next piece to send: a whole part as it is, or the next piece
    /// of a [`Chunks`] in a new buffer; `None` at the end. After
    /// [`Text::measure`], the pieces add up to its length.
    pub fn next_piece(&mut self) -> Option<Bytes> {
        loop {
            match self.parts.front_mut()? {
                Part::Whole(b) => {
                    let b = std::mem::take(b);
                    self.parts.pop_front();
                    return Some(b);
                }
                Part::Chunks(c) => {
                    // A line more than a chunk, at most.
                    let mut s = String::with_capacity(CHUNK + 512);
                    if !c.fill(&mut s, CHUNK) {
                        self.parts.pop_front();
                    }
                    if !s.is_empty() {
                        return Some(Bytes::from(s));
                    }
                }
            }
        }
    }

    /// Whether the next piece is written as it is sent (the sender lets
    /// other tasks run first).
    pub(super) fn next_is_written(&self) -> bool {
        matches!(self.parts.front(), Some(Part::Chunks(_)))
    }

    /// Whether nothing is left to send.
    pub(super) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` numbered lines, written `per` lines at least per piece.
    struct Numbered {
        n: usize,
        at: usize,
    }

    impl Chunks for Numbered {
        fn fill(&mut self, out: &mut String, min: usize) -> bool {
            let start = out.len();
            while self.at < self.n && out.len() - start < min {
                out.push_str(&format!("line {}\n", self.at));
                self.at += 1;
            }
            self.at < self.n
        }

        fn rewind(&mut self) {
            self.at = 0;
        }
    }

    #[tokio::test]
    async fn streamed_pieces_are_the_whole_text_and_its_measured_length() {
        let build = || {
            let mut t = Text::from("head\n".to_owned());
            t.push_chunks(Numbered { n: 20_000, at: 0 });
            t.push_str(String::new());
            t.push_str("tail\n".to_owned());
            t
        };
        let whole = build().into_string();
        assert!(whole.starts_with("head\nline 0\nline 1\n"));
        assert!(whole.ends_with("line 19999\ntail\n"));
        let mut t = build();
        assert_eq!(t.measure().await, whole.len() as u64);
        let mut sent = Vec::new();
        let mut pieces = 0;
        while let Some(piece) = t.next_piece() {
            // A chunk and a line at most.
            assert!(
                piece.len() <= CHUNK + "line 19999\n".len(),
                "{}",
                piece.len()
            );
            sent.extend_from_slice(&piece);
            pieces += 1;
        }
        assert!(t.is_empty());
        assert_eq!(String::from_utf8(sent).unwrap(), whole);
        assert!(pieces > whole.len() / CHUNK, "{pieces} pieces");
    }
}
