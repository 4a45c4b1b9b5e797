//! The few pcapng blocks a capture of the link needs (RFC draft-ietf-opsawg-pcapng), encoded
//! into a caller's buffer: a section header, one interface (raw IP, nanosecond timestamps)
//! and enhanced packet blocks with a comment. Written here rather than with the pcap-file
//! crate, whose blocks carry their options in a `Vec` and their comment in a `String`: an
//! allocation per packet on the forwarding thread. Little-endian, as the machines we run on.

use std::io::Write;

/// `LINKTYPE_RAW`: the packet starts at its IPv4 or IPv6 header, as a TUN read does.
pub const LINKTYPE_RAW: u16 = 101;

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 0x0000_0001;
const ENHANCED_PACKET: u32 = 0x0000_0006;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;

/// `if_tsresol` 9: timestamps count nanoseconds.
const TSRESOL_NS: u8 = 9;
/// `epb_flags` direction bits: the packet came in (entered the link).
pub const FLAG_INBOUND: u32 = 0b01;

/// Bytes an enhanced packet block takes beyond its captured bytes and comment: the block's
/// fields, the flags option, the comment's option header, padding of both and the end.
pub const PACKET_OVERHEAD_BYTES: usize = 28 + 8 + 4 + 3 + 3 + 4 + 4;

/// A section header block: one section of unknown length, written by `application`.
pub fn section_header(buf: &mut Vec<u8>, application: &str) {
    let start = begin_block(buf, SECTION_HEADER);
    put_u32(buf, BYTE_ORDER_MAGIC);
    put_u16(buf, 1); // major version
    put_u16(buf, 0); // minor version
    buf.extend_from_slice(&(-1i64).to_le_bytes()); // section length: not given
    option(buf, SHB_USERAPPL, application.as_bytes());
    end_block(buf, start);
}

/// An interface description block for raw IP with nanosecond timestamps; the first one in
/// a section is interface 0.
pub fn interface(buf: &mut Vec<u8>, name: &str, description: &str, snap_bytes: u32) {
    let start = begin_block(buf, INTERFACE_DESCRIPTION);
    put_u16(buf, LINKTYPE_RAW);
    put_u16(buf, 0); // reserved
    put_u32(buf, snap_bytes);
    option(buf, IF_NAME, name.as_bytes());
    option(buf, IF_DESCRIPTION, description.as_bytes());
    option(buf, IF_TSRESOL, &[TSRESOL_NS]);
    end_block(buf, start);
}

/// An enhanced packet block on interface 0: `captured` (the first bytes of a packet of
/// `original_bytes`) at `timestamp_ns` since the Unix epoch, with `epb_flags` and a comment.
/// Writes into `buf`'s spare capacity, so it allocates nothing when `buf` has room for
/// `PACKET_OVERHEAD_BYTES` plus the captured bytes and the comment.
pub fn enhanced_packet(
    buf: &mut Vec<u8>,
    timestamp_ns: u64,
    captured: &[u8],
    original_bytes: u32,
    flags: u32,
    comment: std::fmt::Arguments,
) {
    let start = begin_block(buf, ENHANCED_PACKET);
    put_u32(buf, 0); // interface
    put_u32(buf, (timestamp_ns >> 32) as u32);
    put_u32(buf, timestamp_ns as u32);
    put_u32(buf, captured.len() as u32);
    put_u32(buf, original_bytes);
    buf.extend_from_slice(captured);
    pad(buf);
    option(buf, EPB_FLAGS, &flags.to_le_bytes());
    // The comment's length is known once it is written: reserve the header, patch it.
    let header = buf.len();
    put_u16(buf, OPT_COMMENT);
    put_u16(buf, 0);
    buf.write_fmt(comment)
        .expect("writing to a Vec cannot fail");
    let len = (buf.len() - header - 4) as u16;
    buf[header + 2..header + 4].copy_from_slice(&len.to_le_bytes());
    pad(buf);
    end_block(buf, start);
}

fn begin_block(buf: &mut Vec<u8>, kind: u32) -> usize {
    let start = buf.len();
    put_u32(buf, kind);
    put_u32(buf, 0); // total length, patched by end_block
    start
}

/// Ends the options, then writes the block's total length at both of its ends.
fn end_block(buf: &mut Vec<u8>, start: usize) {
    put_u16(buf, OPT_END);
    put_u16(buf, 0);
    let total = (buf.len() - start + 4) as u32;
    buf[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
    put_u32(buf, total);
}

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    put_u16(buf, code);
    put_u16(buf, value.len() as u16);
    buf.extend_from_slice(value);
    pad(buf);
}

/// Pads to a multiple of 4 bytes, as every field of a block is.
fn pad(buf: &mut Vec<u8>) {
    let padded = buf.len().next_multiple_of(4);
    buf.resize(padded, 0);
}

fn put_u16(buf: &mut Vec<u8>, value: u16) {
    buf.extend_from_slice(&value.to_le_bytes());
}

fn put_u32(buf: &mut Vec<u8>, value: u32) {
    buf.extend_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The section header as the pcapng draft lays it out (section 4.1), byte by byte.
    #[test]
    fn section_header_matches_the_layout_of_the_draft() {
        let mut buf = Vec::new();
        section_header(&mut buf, "ab");
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x0A, 0x0D, 0x0D, 0x0A, 40, 0, 0, 0,   // type, total length 40
            0x4D, 0x3C, 0x2B, 0x1A, 1, 0, 0, 0,    // byte-order magic, version 1.0
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // section length -1
            4, 0, 2, 0, b'a', b'b', 0, 0,          // shb_userappl "ab", padded
            0, 0, 0, 0,                            // opt_endofopt
            40, 0, 0, 0,                           // total length again
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn enhanced_packet_pads_data_and_comment_and_splits_the_timestamp() {
        let mut buf = Vec::with_capacity(256);
        let capacity = buf.capacity();
        let ts = 0x0000_0001_0000_0002u64;
        enhanced_packet(
            &mut buf,
            ts,
            &[0x45, 1, 2],
            1500,
            FLAG_INBOUND,
            format_args!("x{}", 7),
        );
        assert_eq!(buf.capacity(), capacity, "no reallocation");
        #[rustfmt::skip]
        let expected: &[u8] = &[
            6, 0, 0, 0, 56, 0, 0, 0,   // type, total length 56
            0, 0, 0, 0,                // interface 0
            1, 0, 0, 0, 2, 0, 0, 0,    // timestamp high, low
            3, 0, 0, 0, 0xDC, 5, 0, 0, // captured 3, original 1500
            0x45, 1, 2, 0,             // data, padded
            2, 0, 4, 0, 1, 0, 0, 0,    // epb_flags: inbound
            1, 0, 2, 0, b'x', b'7', 0, 0, // opt_comment "x7", padded
            0, 0, 0, 0,                // opt_endofopt
            56, 0, 0, 0,               // total length again
        ];
        assert_eq!(buf, expected);
        assert!(buf.len() <= PACKET_OVERHEAD_BYTES + 3 + 2);
    }
}
