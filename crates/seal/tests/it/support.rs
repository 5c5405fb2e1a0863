//! Test randomness: a scripted source that hands out exactly the bytes a vector pins.

use std::collections::VecDeque;
use std::convert::Infallible;

use rand_core::{TryCryptoRng, TryRng};

/// Yields the given bytes in order and panics when asked for more, so a vector that draws a
/// different amount of randomness than documented fails loudly.
pub struct ScriptedRng(VecDeque<u8>);

impl ScriptedRng {
    pub fn new(chunks: &[&[u8]]) -> Self {
        Self(chunks.iter().flat_map(|c| c.iter().copied()).collect())
    }

    pub fn is_spent(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryRng for ScriptedRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for byte in dst {
            *byte = self
                .0
                .pop_front()
                .expect("the vector pins fewer random bytes than were drawn");
        }
        Ok(())
    }
}

impl TryCryptoRng for ScriptedRng {}

pub fn hex32(text: &str) -> [u8; 32] {
    hex::decode(text)
        .expect("hex")
        .try_into()
        .expect("32 bytes")
}

pub fn hex16(text: &str) -> [u8; 16] {
    hex::decode(text)
        .expect("hex")
        .try_into()
        .expect("16 bytes")
}
