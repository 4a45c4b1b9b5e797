//! Authentication as pure state machines (no I/O), driven by both ends and by the fuzz
//! harness: a mutual challenge-response over the pre-shared key.
//!
//! 1. reader to daemon: `Hello`, with a fresh reader nonce. Nothing secret.
//! 2. daemon to reader: `Challenge`, with a fresh daemon nonce and the daemon's proof
//!    `HMAC-SHA256(key, "daemon" | T)`, where `T` is SHA-256 over the hello (which holds the
//!    reader's nonce) and the daemon's nonce.
//! 3. The reader checks that proof in constant time and only then sends its own,
//!    `HMAC-SHA256(key, "reader" | T)`.
//! 4. The daemon checks it. Both ends derive the data key `HMAC-SHA256(key, "data" | T)`,
//!    which signs every data connection's `DataHello` and answers the daemon's fresh
//!    challenge on that connection (`DataKey::proof`), so a hello seen on the path and
//!    replayed on another connection proves nothing there.
//!
//! Each proof covers the other side's fresh nonce, so a captured handshake proves nothing on
//! a new connection, and the reader reveals nothing derived from the key to a daemon that
//! has not proved the key first. Without a key (a loopback daemon, or `--insecure-no-auth`)
//! the same messages flow with no proofs, and the data key is derived from the empty key.

use hmac::Mac;
use sha2::{Digest, Sha256};

use crate::control::{
    Challenge, DaemonMessage, Hello, ReaderMessage, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use crate::key::Key;
use crate::proof::{hmac_with, DataKey, HexBytes, Nonce, Tag};

/// Why a handshake failed. Before authentication the daemon tells its peer none of this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The peer speaks another protocol version.
    #[error("the peer speaks protocol version {found}; this end speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}")]
    Version { found: u32 },
    /// A message came out of order.
    #[error("expected {expected}, got another message")]
    OutOfOrder { expected: &'static str },
    /// The reader's proof is missing or does not match the key.
    #[error("the reader did not prove it holds the key")]
    ReaderUnproven,
    /// The daemon's proof is missing or does not match the key.
    #[error("the daemon did not prove it holds the key (a different key, a daemon without one, or not the daemon meant); nothing secret was sent")]
    DaemonUnproven,
    /// The daemon has a key and this reader has none.
    #[error("the daemon asks for a key: give --key-file FILE or set $OSCIL_KEY")]
    KeyNeeded,
}

const DAEMON_ROLE: &[u8] = b"oscil daemon proof\0";
const READER_ROLE: &[u8] = b"oscil reader proof\0";
const DATA_ROLE: &[u8] = b"oscil data key\0";

/// SHA-256 over the session's version, the hello (canonical JSON, length first) and the
/// daemon's nonce.
fn transcript(hello: &Hello, daemon_nonce: &Nonce) -> [u8; 32] {
    let version = hello.version;
    let hello = serde_json::to_vec(hello).expect("a hello always serializes");
    let mut hash = Sha256::new();
    hash.update(b"oscil handshake\0");
    hash.update(version.to_be_bytes());
    hash.update((hello.len() as u64).to_be_bytes());
    hash.update(&hello);
    hash.update(daemon_nonce.0);
    hash.finalize().into()
}

fn tag(key: Option<&Key>, role: &[u8], transcript: &[u8; 32]) -> Tag {
    let mut mac = hmac_with(key.map_or(&[][..], Key::as_bytes));
    mac.update(role);
    mac.update(transcript);
    HexBytes(mac.finalize().into_bytes().into())
}

/// A hello's version this daemon serves: it answers in the same version.
fn served_version(found: u32) -> Result<(), AuthError> {
    match (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&found) {
        true => Ok(()),
        false => Err(AuthError::Version { found }),
    }
}

/// The daemon's challenge must speak the version of the reader's hello.
fn same_version(hello: &Hello, found: u32) -> Result<(), AuthError> {
    match found == hello.version {
        true => Ok(()),
        false => Err(AuthError::Version { found }),
    }
}

/// True when `found` is the tag `key` gives for `role`; always true without a key.
fn proves(key: Option<&Key>, role: &[u8], transcript: &[u8; 32], found: Option<&Tag>) -> bool {
    match (key, found) {
        (None, _) => true,
        (Some(key), Some(found)) => found.ct_eq(&tag(Some(key), role, transcript)),
        (Some(_), None) => false,
    }
}

/// The daemon's side, waiting for the hello.
#[derive(Debug)]
pub struct DaemonHandshake {
    key: Option<Key>,
    nonce: Nonce,
}

/// The daemon's side after its challenge, waiting for the reader's proof.
#[derive(Debug)]
pub struct AwaitingProof {
    key: Option<Key>,
    hello: Hello,
    transcript: [u8; 32],
}

/// A reader that proved the key (or any reader, on a daemon without one).
#[derive(Debug)]
pub struct Authenticated {
    pub hello: Hello,
    pub data_key: DataKey,
}

impl DaemonHandshake {
    /// `nonce` must be fresh from the CSPRNG ([`Nonce::random`]).
    pub fn new(key: Option<Key>, nonce: Nonce) -> Self {
        DaemonHandshake { key, nonce }
    }

    /// Takes the reader's first message: the challenge to send, or why not.
    pub fn on_hello(
        self,
        message: ReaderMessage,
    ) -> Result<(AwaitingProof, DaemonMessage), AuthError> {
        let ReaderMessage::Hello(hello) = message else {
            return Err(AuthError::OutOfOrder {
                expected: "a hello",
            });
        };
        served_version(hello.version)?;
        let transcript = transcript(&hello, &self.nonce);
        let challenge = DaemonMessage::Challenge(Challenge {
            version: hello.version,
            nonce: self.nonce,
            mac: self
                .key
                .as_ref()
                .map(|key| tag(Some(key), DAEMON_ROLE, &transcript)),
        });
        let next = AwaitingProof {
            key: self.key,
            hello,
            transcript,
        };
        Ok((next, challenge))
    }
}

impl AwaitingProof {
    /// Takes the reader's second message: authenticated, or why not.
    pub fn on_proof(self, message: ReaderMessage) -> Result<Authenticated, AuthError> {
        let ReaderMessage::Proof { mac } = message else {
            return Err(AuthError::OutOfOrder {
                expected: "a proof",
            });
        };
        if !proves(
            self.key.as_ref(),
            READER_ROLE,
            &self.transcript,
            mac.as_ref(),
        ) {
            return Err(AuthError::ReaderUnproven);
        }
        Ok(Authenticated {
            data_key: DataKey(tag(self.key.as_ref(), DATA_ROLE, &self.transcript).0),
            hello: self.hello,
        })
    }
}

/// The reader's side, after sending its hello.
#[derive(Debug)]
pub struct ReaderHandshake {
    key: Option<Key>,
    hello: Hello,
}

impl ReaderHandshake {
    /// Starts with `hello`, whose nonce must be fresh from the CSPRNG; returns the message to
    /// send first.
    pub fn new(key: Option<Key>, hello: Hello) -> (Self, ReaderMessage) {
        let first = ReaderMessage::Hello(hello.clone());
        (ReaderHandshake { key, hello }, first)
    }

    /// Checks the daemon's challenge: the proof to send and the data key, or why not. The
    /// proof is computed only once the daemon has proved the key.
    pub fn on_challenge(
        self,
        message: DaemonMessage,
    ) -> Result<(ReaderMessage, DataKey), AuthError> {
        let DaemonMessage::Challenge(challenge) = message else {
            return Err(AuthError::OutOfOrder {
                expected: "a challenge",
            });
        };
        same_version(&self.hello, challenge.version)?;
        let transcript = transcript(&self.hello, &challenge.nonce);
        if self.key.is_none() && challenge.mac.is_some() {
            return Err(AuthError::KeyNeeded);
        }
        let key = self.key.as_ref();
        if !proves(key, DAEMON_ROLE, &transcript, challenge.mac.as_ref()) {
            return Err(AuthError::DaemonUnproven);
        }
        let proof = ReaderMessage::Proof {
            mac: key.map(|key| tag(Some(key), READER_ROLE, &transcript)),
        };
        Ok((proof, DataKey(tag(key, DATA_ROLE, &transcript).0)))
    }
}

#[cfg(test)]
mod tests {
    use oscil_model::socket::SocketOptions;

    use super::*;
    use crate::proof::SessionId;

    fn key(text: &str) -> Option<Key> {
        Some(Key::new(&text.repeat(32)).unwrap())
    }

    fn hello(nonce: u8) -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            software: "test".into(),
            nonce: HexBytes([nonce; 32]),
            flows: 2,
            options: SocketOptions::default(),
            interval_us: 100_000,
            duration_us: 1_000_000,
            write_size_bytes: None,
            write_mode: Default::default(),
            marker_every_us: None,
            probe: false,
            trace: false,
            groups: Vec::new(),
        }
    }

    /// Runs a whole handshake; the reader's and the daemon's data keys, or the first error.
    fn run(
        reader_key: Option<Key>,
        daemon_key: Option<Key>,
    ) -> Result<(DataKey, DataKey), AuthError> {
        let (reader, first) = ReaderHandshake::new(reader_key, hello(1));
        let (daemon, challenge) =
            DaemonHandshake::new(daemon_key, HexBytes([2; 32])).on_hello(first)?;
        let (proof, reader_data) = reader.on_challenge(challenge)?;
        let done = daemon.on_proof(proof)?;
        assert_eq!(done.hello, hello(1));
        Ok((reader_data, done.data_key))
    }

    #[test]
    fn same_key_authenticates_both_ways_and_agrees_on_the_data_key() {
        let (r, d) = run(key("a"), key("a")).unwrap();
        let id = HexBytes([9; 16]);
        assert!(r.tag(&id, 3).ct_eq(&d.tag(&id, 3)));
        assert!(!r.tag(&id, 3).ct_eq(&d.tag(&id, 4)));
        let (r, d) = run(None, None).unwrap();
        assert!(r.tag(&id, 0).ct_eq(&d.tag(&id, 0)));
    }

    #[test]
    fn a_wrong_or_missing_key_fails_on_the_side_that_checks_first() {
        // The reader checks the daemon first, so it never sends a proof to the wrong daemon.
        assert_eq!(
            run(key("a"), key("b")).unwrap_err(),
            AuthError::DaemonUnproven
        );
        assert_eq!(run(key("a"), None).unwrap_err(), AuthError::DaemonUnproven);
        assert_eq!(run(None, key("a")).unwrap_err(), AuthError::KeyNeeded);
    }

    #[test]
    fn a_reader_without_the_key_is_refused_by_the_daemon() {
        let (daemon, _) = DaemonHandshake::new(key("a"), HexBytes([2; 32]))
            .on_hello(ReaderMessage::Hello(hello(1)))
            .unwrap();
        let forged = ReaderMessage::Proof {
            mac: Some(HexBytes([0; 32])),
        };
        assert_eq!(
            daemon.on_proof(forged).unwrap_err(),
            AuthError::ReaderUnproven
        );
    }

    #[test]
    fn a_captured_proof_fails_against_a_fresh_daemon_nonce() {
        let (reader, first) = ReaderHandshake::new(key("a"), hello(1));
        let (_, challenge) = DaemonHandshake::new(key("a"), HexBytes([2; 32]))
            .on_hello(first.clone())
            .unwrap();
        let (captured_proof, _) = reader.on_challenge(challenge).unwrap();
        // The attacker replays the hello and the proof on a new connection.
        let (replayed, _) = DaemonHandshake::new(key("a"), HexBytes([3; 32]))
            .on_hello(first)
            .unwrap();
        assert_eq!(
            replayed.on_proof(captured_proof).unwrap_err(),
            AuthError::ReaderUnproven
        );
    }

    #[test]
    fn a_challenge_for_another_hello_does_not_prove_the_daemon() {
        // A daemon proof captured for one reader nonce does not fit another.
        let (_, challenge) = DaemonHandshake::new(key("a"), HexBytes([2; 32]))
            .on_hello(ReaderMessage::Hello(hello(1)))
            .unwrap();
        let (reader, _) = ReaderHandshake::new(key("a"), hello(7));
        assert_eq!(
            reader.on_challenge(challenge).unwrap_err(),
            AuthError::DaemonUnproven
        );
    }

    #[test]
    fn out_of_order_and_other_versions_are_refused() {
        let daemon = DaemonHandshake::new(key("a"), HexBytes([2; 32]));
        assert!(matches!(
            daemon.on_hello(ReaderMessage::Start),
            Err(AuthError::OutOfOrder { .. })
        ));
        let mut old = hello(1);
        old.version = 1;
        let daemon = DaemonHandshake::new(key("a"), HexBytes([2; 32]));
        assert_eq!(
            daemon.on_hello(ReaderMessage::Hello(old)).unwrap_err(),
            AuthError::Version { found: 1 }
        );
    }

    #[test]
    fn a_version_4_hello_is_answered_in_version_4() {
        let mut old = hello(1);
        old.version = 4;
        let (reader, first) = ReaderHandshake::new(key("a"), old);
        let (_, challenge) = DaemonHandshake::new(key("a"), HexBytes([2; 32]))
            .on_hello(first)
            .unwrap();
        let DaemonMessage::Challenge(Challenge { version, .. }) = &challenge else {
            panic!("{challenge:?}");
        };
        assert_eq!(*version, 4);
        assert!(reader.on_challenge(challenge).is_ok());
    }

    #[test]
    fn hex_bytes_round_trip_and_reject_bad_text() {
        let id: SessionId = HexBytes([0xab; 16]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(16)));
        assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), id);
        for bad in [
            "\"ab\"",
            "\"zz\"",
            "7",
            &format!("\"+f{}\"", "a".repeat(30)),
            &format!("\"{}é\"", "a".repeat(30)),
        ] {
            assert!(serde_json::from_str::<SessionId>(bad).is_err(), "{bad}");
        }
        assert_ne!(Nonce::random().unwrap(), Nonce::random().unwrap());
    }
}
