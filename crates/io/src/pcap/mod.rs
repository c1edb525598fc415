//! pcap and pcapng capture files.
//!
//! ```
//! use rocelink_io::pcap::{PcapReader, PcapWriter, LINKTYPE_ETHERNET};
//! let mut file = Vec::new();
//! let mut w = PcapWriter::new(&mut file, LINKTYPE_ETHERNET).unwrap();
//! w.write(1_500_000_000, &[0xAB; 60]).unwrap();
//! drop(w);
//! let recs: Vec<_> = PcapReader::new(&file[..]).unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(recs[0].data, vec![0xAB; 60]);
//! assert_eq!(recs[0].ts_ns, 1_500_000_000);
//! ```

use rocelink_wire::dissect::LinkType;
use std::io::{self, Write};

/// Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Raw IP (v4 or v6), as written by most tools.
pub const LINKTYPE_RAW: u32 = 101;
/// Raw IP on OpenBSD-derived DLT numbering.
pub const LINKTYPE_RAW_DLT12: u32 = 12;
/// Linux cooked capture v1 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Raw IPv4.
pub const LINKTYPE_IPV4: u32 = 228;
/// Raw IPv6.
pub const LINKTYPE_IPV6: u32 = 229;
/// Linux cooked capture v2.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PcapError {
    /// Reading failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The bytes are not a valid capture at `offset`.
    #[error("at byte offset {offset}: {what}")]
    Format {
        /// Byte offset in the file where the problem starts.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

fn fmt_err<T>(offset: u64, what: impl Into<String>) -> Result<T, PcapError> {
    Err(PcapError::Format {
        offset,
        what: what.into(),
    })
}

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time in nanoseconds since the epoch.
    pub ts_ns: u64,
    /// Original length on the wire (≥ `data.len()` when the capture was cut short).
    pub orig_len: u32,
    /// Link type of this packet.
    pub linktype: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// Byte offset of the record header in the file.
    pub offset: u64,
}

impl Record {
    /// Where the decoder should start: the link type it understands and the offset of that
    /// layer in `data`. `None` for link types rocelink does not decode.
    pub fn network(&self) -> Option<(LinkType, usize)> {
        match self.linktype {
            LINKTYPE_ETHERNET => Some((LinkType::Ethernet, 0)),
            LINKTYPE_RAW | LINKTYPE_RAW_DLT12 | LINKTYPE_IPV4 | LINKTYPE_IPV6 => {
                Some((LinkType::RawIp, 0))
            }
            LINKTYPE_LINUX_SLL if self.data.len() >= 16 => Some((LinkType::RawIp, 16)),
            LINKTYPE_LINUX_SLL2 if self.data.len() >= 20 => Some((LinkType::RawIp, 20)),
            _ => None,
        }
    }
}

/// Largest record rocelink accepts (a corrupt length field must not allocate gigabytes).
pub const MAX_RECORD: u32 = 256 * 1024;

mod read;

pub use read::PcapReader;

/// Writes classic pcap (microsecond timestamps, host byte order).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header.
    pub fn new(mut w: W, linktype: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xA1B2_C3D4u32.to_ne_bytes());
        h.extend_from_slice(&2u16.to_ne_bytes());
        h.extend_from_slice(&4u16.to_ne_bytes());
        h.extend_from_slice(&0i32.to_ne_bytes());
        h.extend_from_slice(&0u32.to_ne_bytes());
        h.extend_from_slice(&MAX_RECORD.to_ne_bytes());
        h.extend_from_slice(&linktype.to_ne_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    /// Append one packet captured at `ts_ns` (nanoseconds since the epoch).
    pub fn write(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        self.write_parts(ts_ns, &[data])
    }

    /// Append one packet gathered from several slices (e.g. header | payload | ICRC).
    pub fn write_parts(&mut self, ts_ns: u64, parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len = u32::try_from(len).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "packet too large for pcap")
        })?;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000 / 1000) as u32).to_ne_bytes());
        h[8..12].copy_from_slice(&len.to_ne_bytes());
        h[12..16].copy_from_slice(&len.to_ne_bytes());
        self.w.write_all(&h)?;
        for p in parts {
            self.w.write_all(p)?;
        }
        Ok(())
    }

    /// Push buffered records to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Flush and give back the writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::read::{NG_EPB, NG_IDB, NG_SHB};
    use super::*;

    fn classic(swapped: bool, nanos: bool) -> Vec<u8> {
        let p32 = |v: u32| {
            if swapped {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let p16 = |v: u16| {
            if swapped {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut f = Vec::new();
        f.extend_from_slice(&p32(if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 }));
        f.extend_from_slice(&p16(2));
        f.extend_from_slice(&p16(4));
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&p32(65535));
        f.extend_from_slice(&p32(LINKTYPE_RAW));
        f.extend_from_slice(&p32(7));
        f.extend_from_slice(&p32(5));
        f.extend_from_slice(&p32(3));
        f.extend_from_slice(&p32(3));
        f.extend_from_slice(&[1, 2, 3]);
        f
    }

    #[test]
    fn reads_all_classic_variants() {
        for swapped in [false, true] {
            for nanos in [false, true] {
                let f = classic(swapped, nanos);
                let recs: Vec<_> = PcapReader::new(&f[..])
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                assert_eq!(recs.len(), 1);
                assert_eq!(recs[0].data, [1, 2, 3]);
                assert_eq!(recs[0].ts_ns, 7_000_000_000 + if nanos { 5 } else { 5000 });
                assert_eq!(recs[0].network(), Some((LinkType::RawIp, 0)));
                assert_eq!(recs[0].offset, 24);
            }
        }
    }

    #[test]
    fn truncation_names_the_offset() {
        let f = classic(false, false);
        let err = PcapReader::new(&f[..f.len() - 1])
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().starts_with("at byte offset 40: truncated"),
            "{err}"
        );
        let err = PcapReader::new(&f[..30])
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().starts_with("at byte offset 24: truncated"),
            "{err}"
        );
        let err = PcapReader::new(&b"GARBAGE!"[..]).unwrap_err();
        assert!(
            err.to_string().contains("at byte offset 0: not a pcap"),
            "{err}"
        );
        let err = PcapReader::new(&f[..10]).unwrap_err();
        assert!(err.to_string().contains("offset 4"), "{err}");
        let mut huge = f.clone();
        huge[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = PcapReader::new(&huge[..])
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
        // a record longer than the file's own snapshot length
        let mut small = f.clone();
        small[16..20].copy_from_slice(&2u32.to_le_bytes());
        let err = PcapReader::new(&small[..])
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "at byte offset 24: record length 3 exceeds the file's snapshot length 2"
            ),
            "{err}"
        );
    }

    #[test]
    fn writer_round_trip_with_parts() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        w.write_parts(3_000_000_123_000, &[&[1, 2], &[], &[3]])
            .unwrap();
        w.write(4, &[9; 70]).unwrap();
        let f = w.into_inner().unwrap();
        let recs: Vec<_> = PcapReader::new(&f[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(recs[0].data, [1, 2, 3]);
        assert_eq!(recs[0].ts_ns, 3_000_000_123_000);
        assert_eq!(recs[1].data.len(), 70);
        assert_eq!(recs[1].linktype, LINKTYPE_ETHERNET);
    }

    fn ng_block(btype: u32, body: &[u8]) -> Vec<u8> {
        let total = (12 + body.len()) as u32;
        let mut b = btype.to_le_bytes().to_vec();
        b.extend_from_slice(&total.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&total.to_le_bytes());
        b
    }

    #[test]
    fn reads_pcapng() {
        let mut f = ng_block(
            NG_SHB,
            &[
                0x4D, 0x3C, 0x2B, 0x1A, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            ],
        );
        // IDB: Ethernet, snaplen, if_tsresol = 9 (ns)
        let mut idb = vec![1, 0, 0, 0, 0, 0, 1, 0];
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        f.extend(ng_block(NG_IDB, &idb));
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&1234u32.to_le_bytes());
        epb.extend_from_slice(&5u32.to_le_bytes());
        epb.extend_from_slice(&5u32.to_le_bytes());
        epb.extend_from_slice(&[1, 2, 3, 4, 5, 0, 0, 0]);
        f.extend(ng_block(NG_EPB, &epb));
        let recs: Vec<_> = PcapReader::new(&f[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].data, [1, 2, 3, 4, 5]);
        assert_eq!(recs[0].ts_ns, 1234);
        assert_eq!(recs[0].linktype, LINKTYPE_ETHERNET);
        // a packet block naming a missing interface
        let mut bad = f.clone();
        let at = bad.len() - epb.len() - 4;
        bad[at] = 3;
        let err = PcapReader::new(&bad[..])
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("interface 3"), "{err}");
    }
}
