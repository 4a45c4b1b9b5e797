//! The bytes a handshake passes and what they prove: nonces, tags and session ids (hex on
//! the wire), and the data key that signs a session's data connections. Used by the
//! handshake (`auth`) and by the data connection's opening (`control`), so neither needs
//! the other for these.

use std::fmt;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::key::random_bytes;

/// Fixed-size bytes, written as lowercase hex on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HexBytes<const N: usize>(pub [u8; N]);

/// A handshake nonce: 256 bits from the CSPRNG, never used twice.
pub type Nonce = HexBytes<32>;
/// An HMAC-SHA256 tag.
pub type Tag = HexBytes<32>;
/// Names a session on its data connections: 128 bits from the CSPRNG.
pub type SessionId = HexBytes<16>;

impl<const N: usize> HexBytes<N> {
    /// Fresh bytes from the kernel's CSPRNG.
    pub fn random() -> std::io::Result<Self> {
        random_bytes().map(HexBytes)
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `None` unless `text` is exactly `2 * N` hex digits.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; N];
        for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        Some(HexBytes(out))
    }

    /// Compares in constant time, so a timing probe learns nothing about a tag.
    pub fn ct_eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl<const N: usize> fmt::Debug for HexBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl<const N: usize> fmt::Display for HexBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl<const N: usize> Serialize for HexBytes<N> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de, const N: usize> Deserialize<'de> for HexBytes<N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        HexBytes::from_hex(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("expected {N} bytes as {} hex digits", 2 * N))
        })
    }
}

/// Signs and checks the `DataHello` of one session's data connections.
#[derive(Clone)]
pub struct DataKey(pub(crate) [u8; 32]);

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

impl DataKey {
    /// The tag a data connection of `session_id` carries for `flow`.
    pub fn tag(&self, session_id: &SessionId, flow: u32) -> Tag {
        let mut mac = hmac_with(&self.0);
        mac.update(b"oscil data hello\0");
        mac.update(&session_id.0);
        mac.update(&flow.to_be_bytes());
        HexBytes(mac.finalize().into_bytes().into())
    }

    /// The answer for flow `flow` of `session_id` to the daemon's `challenge` on its data
    /// connection: only a holder of the data key can make it, and only for that challenge.
    pub fn proof(&self, session_id: &SessionId, flow: u32, challenge: &Nonce) -> Tag {
        let mut mac = hmac_with(&self.0);
        mac.update(b"oscil data proof\0");
        mac.update(&session_id.0);
        mac.update(&flow.to_be_bytes());
        mac.update(&challenge.0);
        HexBytes(mac.finalize().into_bytes().into())
    }
}

pub(crate) fn hmac_with(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length")
}
