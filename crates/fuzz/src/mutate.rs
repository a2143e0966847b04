//! Byte-level mutations of a corpus input, in the manner of libFuzzer's
//! mutators: a few stacked edits per execution, some of them aware of the
//! encodings under test (postcard varints, dictionary tokens of the
//! description language and of JSON).

use rand::rngs::StdRng;
use rand::Rng;

/// Bytes that sit on boundaries of the encodings under test: varint
/// continuation bits, signed/unsigned edges, ASCII punctuation.
const INTERESTING_BYTES: [u8; 12] = [
    0x00, 0x01, 0x02, 0x7f, 0x80, 0x81, 0xfe, 0xff, b'"', b'\\', b'\n', b'#',
];

/// Integers worth writing as a varint: lengths and ids at the edges of
/// `u16`, `u32` and `u64`, and postcard's zigzag images of small negatives.
const INTERESTING_VARINTS: [u64; 12] = [
    0,
    1,
    2,
    127,
    128,
    255,
    0xffff,
    0x1_0000,
    0xffff_ffff,
    0x1_0000_0000,
    u64::MAX / 2,
    u64::MAX,
];

/// A mutator with its bounds.
pub struct Mutator<'a> {
    /// Tokens to insert or overwrite with (may be empty).
    pub dictionary: &'a [&'a [u8]],
    /// Inputs never grow beyond this many bytes.
    pub input_bytes_max: usize,
}

impl Mutator<'_> {
    /// Applies one to four edits to `input`; `other` is a second corpus
    /// entry to splice from.
    pub fn mutate(&self, rng: &mut StdRng, input: &mut Vec<u8>, other: &[u8]) {
        let edits = 1 + rng.gen_range(0..4);
        for _ in 0..edits {
            self.edit(rng, input, other);
        }
        input.truncate(self.input_bytes_max);
    }

    fn edit(&self, rng: &mut StdRng, input: &mut Vec<u8>, other: &[u8]) {
        let len = input.len();
        match rng.gen_range(0..11) {
            // Flip one bit.
            0 if len > 0 => {
                let at = rng.gen_range(0..len);
                input[at] ^= 1 << rng.gen_range(0..8);
            }
            // Overwrite one byte with a boundary value or a random one.
            1 if len > 0 => {
                let at = rng.gen_range(0..len);
                input[at] = if rng.gen_bool(0.5) {
                    INTERESTING_BYTES[rng.gen_range(0..INTERESTING_BYTES.len())]
                } else {
                    rng.gen()
                };
            }
            // Nudge one byte up or down a little.
            2 if len > 0 => {
                let at = rng.gen_range(0..len);
                let delta = rng.gen_range(1..=4u8);
                input[at] = if rng.gen_bool(0.5) {
                    input[at].wrapping_add(delta)
                } else {
                    input[at].wrapping_sub(delta)
                };
            }
            // Insert a few random bytes.
            3 => {
                let at = rng.gen_range(0..=len);
                let count = rng.gen_range(1..=8);
                let bytes: Vec<u8> = (0..count).map(|_| rng.gen()).collect();
                input.splice(at..at, bytes);
            }
            // Delete a range.
            4 if len > 0 => {
                let at = rng.gen_range(0..len);
                let end = (at + rng.gen_range(1..=16)).min(len);
                input.drain(at..end);
            }
            // Copy a range of the input elsewhere in it (repeats structure,
            // e.g. one more element of a sequence).
            5 if len > 0 => {
                let from = rng.gen_range(0..len);
                let end = (from + rng.gen_range(1..=32)).min(len);
                let chunk = input[from..end].to_vec();
                let at = rng.gen_range(0..=len);
                input.splice(at..at, chunk);
            }
            // Splice: a prefix of this input and a suffix of another.
            6 if !other.is_empty() => {
                let keep = rng.gen_range(0..=len);
                let from = rng.gen_range(0..other.len());
                input.truncate(keep);
                input.extend_from_slice(&other[from..]);
            }
            // Insert or overwrite with a dictionary token.
            7 if !self.dictionary.is_empty() => {
                let token = self.dictionary[rng.gen_range(0..self.dictionary.len())];
                let at = rng.gen_range(0..=len);
                if rng.gen_bool(0.5) {
                    input.splice(at..at, token.iter().copied());
                } else {
                    let end = (at + token.len()).min(len);
                    input.splice(at..end, token.iter().copied());
                }
            }
            // Replace a byte run with a varint of a boundary value (lengths,
            // enum tags and integers are varints in postcard).
            8 => {
                let value = INTERESTING_VARINTS[rng.gen_range(0..INTERESTING_VARINTS.len())];
                let at = rng.gen_range(0..=len);
                let end = (at + rng.gen_range(0..=2)).min(len);
                input.splice(at..end, varint(value));
            }
            // Cut the input short.
            9 if len > 0 => {
                input.truncate(rng.gen_range(0..len));
            }
            // Swap two bytes.
            _ if len > 1 => {
                let a = rng.gen_range(0..len);
                let b = rng.gen_range(0..len);
                input.swap(a, b);
            }
            _ => input.push(rng.gen()),
        }
    }
}

/// `value` as an unsigned LEB128 varint, the way postcard writes integers.
pub fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return out;
        }
        out.push(low | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn varints_are_leb128() {
        assert_eq!(varint(0), [0x00]);
        assert_eq!(varint(127), [0x7f]);
        assert_eq!(varint(128), [0x80, 0x01]);
        assert_eq!(varint(300), [0xac, 0x02]);
        assert_eq!(varint(u64::MAX).len(), 10);
    }

    #[test]
    fn mutation_respects_the_size_bound_and_changes_inputs() {
        let mutator = Mutator {
            dictionary: &[b"space", b"key"],
            input_bytes_max: 64,
        };
        let mut rng = StdRng::seed_from_u64(7);
        let seed = b"space s key k attributes a, b".to_vec();
        let mut changed = 0;
        for _ in 0..1000 {
            let mut input = seed.clone();
            mutator.mutate(&mut rng, &mut input, b"other input");
            assert!(input.len() <= 64);
            changed += usize::from(input != seed);
        }
        // A flip, nudge or swap can undo itself only rarely.
        assert!(changed > 900, "{changed} of 1000 inputs changed");
    }
}
