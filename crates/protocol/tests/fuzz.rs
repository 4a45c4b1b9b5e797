//! A fuzz harness that runs on stable Rust in CI: a fixed number of random and mutated
//! control frames, from a seeded RNG, go through the frame decoder, the data hello decoder
//! and both sides of the handshake state machine. Nothing may panic, and no changed hello or
//! proof may authenticate.

use std::panic::{catch_unwind, AssertUnwindSafe};

use oscil_model::files::rows::{HostSample, Side};
use oscil_model::host::HostFacts;
use oscil_model::socket::SocketOptions;
use oscil_protocol::auth::{DaemonHandshake, ReaderHandshake};
use oscil_protocol::control::{
    decode_frame, encode_frame, DaemonMessage, DataHello, Ended, Hello, ReaderMessage, Welcome,
    MAX_FRAME_BYTES, MAX_PREAUTH_FRAME_BYTES, PROTOCOL_VERSION,
};
use oscil_protocol::key::Key;
use oscil_protocol::proof::HexBytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CASES: u32 = 200_000;
const SEED: u64 = 0x0005_c11f;

fn key() -> Option<Key> {
    Some(Key::new("0123456789abcdef0123456789abcdef").unwrap())
}

fn hello() -> Hello {
    Hello {
        version: PROTOCOL_VERSION,
        software: "fuzz".into(),
        nonce: HexBytes([1; 32]),
        flows: 4,
        options: SocketOptions {
            congestion: Some("cubic".into()),
            notsent_lowat_bytes: Some(16384),
            ..Default::default()
        },
        interval_us: 100_000,
        duration_us: 60_000_000,
        write_size_bytes: None,
        write_mode: Default::default(),
        marker_every_us: None,
        probe: false,
        trace: false,
        groups: Vec::new(),
    }
}

/// The daemon's nonce in every handshake of the harness.
const DAEMON_NONCE: HexBytes<32> = HexBytes([2; 32]);

/// A genuine handshake's messages: hello, challenge, proof.
fn genuine() -> (ReaderMessage, DaemonMessage, ReaderMessage) {
    let (reader, first) = ReaderHandshake::new(key(), hello());
    let (_, challenge) = DaemonHandshake::new(key(), DAEMON_NONCE)
        .on_hello(first.clone())
        .unwrap();
    let (proof, _) = reader.on_challenge(challenge.clone()).unwrap();
    (first, challenge, proof)
}

/// Valid frames of every kind, for the mutations to start from.
fn corpus() -> Vec<Vec<u8>> {
    let (first, challenge, proof) = genuine();
    let host = HostSample {
        t_s: 0.1,
        side: Side::Sender,
        tcp_inuse: 3,
        tcp_orphan: 0,
        tcp_tw: 0,
        tcp_alloc: 3,
        tcp_mem_pages: 12,
        tcp_mem_ns_bytes: Some(49152),
        ..HostSample::empty(0.0, Side::Reader)
    };
    let welcome = DaemonMessage::Welcome(Welcome {
        version: PROTOCOL_VERSION,
        software: "oscil-daemon".into(),
        session_id: HexBytes([5; 16]),
        host: HostFacts {
            hostname: "sender".into(),
            kernel_release: "6.18.0".into(),
            page_size_bytes: 4096,
            sysctls: [(
                "net.ipv4.tcp_wmem".to_string(),
                "4096 16384 4194304".to_string(),
            )]
            .into(),
            wall_clock_unix_ms: 1_764_000_000_000,
            clock: "CLOCK_MONOTONIC".into(),
            netns_inode: Some(4026531840),
            boot_id: None,
            tcp_info_bytes: Some(248),
            tcp_info_absent: Vec::new(),
        },
        options_in_force: Default::default(),
        probe: false,
        write_mode: Default::default(),
        groups_in_force: Vec::new(),
    });
    vec![
        encode_frame(&first),
        encode_frame(&proof),
        encode_frame(&ReaderMessage::Start),
        encode_frame(&ReaderMessage::ClockProbe { t1_unix_ns: 1 }),
        encode_frame(&ReaderMessage::Stop {
            reason: "done".into(),
            intervals: Some(3),
        }),
        encode_frame(&DaemonMessage::Ready),
        encode_frame(&challenge),
        encode_frame(&welcome),
        encode_frame(&DaemonMessage::Refused {
            reason: "refused".into(),
        }),
        encode_frame(&DaemonMessage::Samples {
            host,
            flows: vec![],
        }),
        encode_frame(&DaemonMessage::ClockEcho {
            t1_unix_ns: 1,
            t2_unix_ns: 2,
            t3_unix_ns: 3,
        }),
        encode_frame(&DaemonMessage::Markers {
            markers: vec![oscil_model::files::markers::Marker {
                flow: 0,
                k: 1,
                offset_bytes: 65536,
                sent_unix_ns: 4,
            }],
        }),
        encode_frame(&DaemonMessage::Ended(Ended {
            reason: "x".into(),
            tcpext_delta: Default::default(),
            wakeups: vec![],
            cost: None,
            trace: None,
            sampled_by: None,
        })),
    ]
}

/// JSON fragments that stress a parser.
const TOKENS: &[&str] = &[
    "1e308",
    "-1",
    "4294967296",
    "18446744073709551616",
    "null",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "{}",
    "[]",
    "true",
    "\"challenge\"",
    "\"proof\"",
    "\"hello\"",
    "0.0",
    "NaN",
];

fn mutate(rng: &mut StdRng, base: &[u8]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..7) {
            0 if !bytes.is_empty() => {
                let i = rng.random_range(0..bytes.len());
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
            1 => bytes.insert(at, rng.random()),
            2 => bytes.truncate(at),
            3 if bytes.len() > 4 => {
                let i = rng.random_range(4..bytes.len());
                let end = (i + rng.random_range(1..16)).min(bytes.len());
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                bytes.splice(i..end, token.bytes());
            }
            4 if bytes.len() >= 4 => {
                let len: u32 = if rng.random() {
                    rng.random()
                } else {
                    (bytes.len() - 4) as u32
                };
                bytes[..4].copy_from_slice(&len.to_be_bytes());
            }
            5 => {
                let depth = rng.random_range(1..4000);
                bytes.splice(at..at, std::iter::repeat_n(b'[', depth));
            }
            _ => bytes.extend((0..rng.random_range(0..64)).map(|_| rng.random::<u8>())),
        }
    }
    bytes
}

/// One input through every decoder and, where it decodes, the state machines.
fn exercise(bytes: &[u8], genuine: &(ReaderMessage, ReaderMessage)) {
    for limit in [MAX_PREAUTH_FRAME_BYTES, MAX_FRAME_BYTES] {
        if let Ok(Some((message, used))) = decode_frame::<ReaderMessage>(bytes, limit) {
            assert!(used <= bytes.len());
            daemon_side(message, &bytes[used..], genuine);
        }
        if let Ok(Some((message, _))) = decode_frame::<DaemonMessage>(bytes, limit) {
            let (reader, _) = ReaderHandshake::new(key(), hello());
            let _ = reader.on_challenge(message);
        }
    }
    if let Some(head) = bytes.first_chunk::<{ DataHello::LEN }>() {
        if let Some(data) = DataHello::decode(head) {
            assert_eq!(&data.encode(), head);
        }
    }
}

/// Feeds a decoded message to a daemon as the hello, and the rest of the input as the proof;
/// only the genuine hello with the genuine proof may authenticate.
fn daemon_side(first: ReaderMessage, rest: &[u8], genuine: &(ReaderMessage, ReaderMessage)) {
    let Ok((awaiting, _)) = DaemonHandshake::new(key(), DAEMON_NONCE).on_hello(first.clone())
    else {
        return;
    };
    let Ok(Some((proof, _))) = decode_frame::<ReaderMessage>(rest, MAX_PREAUTH_FRAME_BYTES) else {
        return;
    };
    if awaiting.on_proof(proof.clone()).is_ok() {
        assert_eq!(first, genuine.0, "a changed hello authenticated");
        assert_eq!(proof, genuine.1, "a changed proof authenticated");
    }
}

#[test]
fn random_and_mutated_frames_never_panic_nor_authenticate() {
    let corpus = corpus();
    let (first, _, proof) = genuine();
    // The genuine hello followed by its proof, for mutations that must not pass.
    let mut handshake = encode_frame(&first);
    handshake.extend(encode_frame(&proof));
    let genuine = (first, proof);
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut decoded = 0u32;
    for case in 0..CASES {
        let input: Vec<u8> = match case % 4 {
            0 => (0..rng.random_range(0..256))
                .map(|_| rng.random())
                .collect(),
            1 => mutate(&mut rng, &handshake),
            _ => {
                let base = &corpus[rng.random_range(0..corpus.len())];
                mutate(&mut rng, base)
            }
        };
        if let Ok(Some(_)) = decode_frame::<ReaderMessage>(&input, MAX_FRAME_BYTES) {
            decoded += 1;
        }
        if catch_unwind(AssertUnwindSafe(|| exercise(&input, &genuine))).is_err() {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("case {case} (seed {SEED:#x}) panicked on input {hex}");
        }
    }
    // The mutations must get past the decoder often enough to test the state machines.
    assert!(
        decoded > CASES / 20,
        "only {decoded} of {CASES} inputs decoded"
    );
}

#[test]
fn the_unchanged_handshake_passes_the_harness_oracle() {
    // The oracle above means something only if the genuine handshake does authenticate.
    let (first, _, proof) = genuine();
    let (awaiting, _) = DaemonHandshake::new(key(), DAEMON_NONCE)
        .on_hello(first)
        .unwrap();
    assert!(awaiting.on_proof(proof).is_ok());
}
