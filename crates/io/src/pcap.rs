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
use std::io::{self, Read, Write};

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

enum Format {
    Classic {
        swapped: bool,
        nanos: bool,
        linktype: u32,
    },
    Ng {
        swapped: bool,
        interfaces: Vec<(u32, u64)>,
    },
}

/// Reads classic pcap or pcapng from any `Read`.
pub struct PcapReader<R: Read> {
    r: R,
    pos: u64,
    format: Format,
    done: bool,
}

impl<R: Read> std::fmt::Debug for PcapReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapReader")
            .field("pos", &self.pos)
            .finish()
    }
}

/// Fill `buf` completely; `Ok(false)` at a clean end of file before any byte.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8], pos: u64) -> Result<bool, PcapError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return fmt_err(
                    pos,
                    format!(
                        "truncated: needed {} bytes, file ends after {got}",
                        buf.len()
                    ),
                );
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

fn u32_at(b: &[u8], swapped: bool) -> u32 {
    let v = [b[0], b[1], b[2], b[3]];
    if swapped {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

fn u16_at(b: &[u8], swapped: bool) -> u16 {
    let v = [b[0], b[1]];
    if swapped {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

const NG_SHB: u32 = 0x0A0D_0D0A;
const NG_IDB: u32 = 1;
const NG_SPB: u32 = 3;
const NG_EPB: u32 = 6;
const NG_BOM: u32 = 0x1A2B_3C4D;

impl<R: Read> PcapReader<R> {
    /// Read the file header.
    pub fn new(mut r: R) -> Result<Self, PcapError> {
        let mut magic = [0u8; 4];
        if !read_full(&mut r, &mut magic, 0)? {
            return fmt_err(0, "empty file: no pcap header");
        }
        let m = u32::from_le_bytes(magic);
        if m == NG_SHB {
            let mut rd = PcapReader {
                r,
                pos: 0,
                format: Format::Ng {
                    swapped: false,
                    interfaces: Vec::new(),
                },
                done: false,
            };
            rd.read_shb_rest()?;
            return Ok(rd);
        }
        let (swapped, nanos) = match m {
            0xA1B2_C3D4 => (false, false),
            0xD4C3_B2A1 => (true, false),
            0xA1B2_3C4D => (false, true),
            0x4D3C_B2A1 => (true, true),
            _ => return fmt_err(0, format!("not a pcap or pcapng file (magic {m:#010x})")),
        };
        let mut h = [0u8; 20];
        if !read_full(&mut r, &mut h, 4)? {
            return fmt_err(4, "truncated: pcap header ends after the magic number");
        }
        let major = u16_at(&h[0..2], swapped);
        if major != 2 {
            return fmt_err(4, format!("unsupported pcap version {major}"));
        }
        let linktype = u32_at(&h[16..20], swapped) & 0x0FFF_FFFF;
        Ok(PcapReader {
            r,
            pos: 24,
            format: Format::Classic {
                swapped,
                nanos,
                linktype,
            },
            done: false,
        })
    }

    /// Link type of a classic pcap file (pcapng: of its first interface, once read).
    pub fn linktype(&self) -> Option<u32> {
        match &self.format {
            Format::Classic { linktype, .. } => Some(*linktype),
            Format::Ng { interfaces, .. } => interfaces.first().map(|i| i.0),
        }
    }

    fn read_shb_rest(&mut self) -> Result<(), PcapError> {
        let start = self.pos;
        let mut h = [0u8; 8];
        if !read_full(&mut self.r, &mut h, start + 4)? {
            return fmt_err(start + 4, "truncated: pcapng section header");
        }
        let bom_le = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let swapped = match bom_le {
            NG_BOM => false,
            0x4D3C_2B1A => true,
            _ => {
                return fmt_err(
                    start + 8,
                    "pcapng section header with a bad byte-order magic",
                );
            }
        };
        let total = u32_at(&h[0..4], swapped);
        if !(28..=MAX_RECORD).contains(&total) || !total.is_multiple_of(4) {
            return fmt_err(
                start,
                format!("pcapng section header length {total} is invalid"),
            );
        }
        self.skip(u64::from(total) - 12, start)?;
        self.pos = start + u64::from(total);
        if let Format::Ng {
            swapped: s,
            interfaces,
        } = &mut self.format
        {
            *s = swapped;
            interfaces.clear();
        }
        Ok(())
    }

    fn skip(&mut self, n: u64, at: u64) -> Result<(), PcapError> {
        let copied = io::copy(&mut (&mut self.r).take(n), &mut io::sink())?;
        if copied != n {
            return fmt_err(
                at,
                format!("truncated: block needs {n} more bytes, file has {copied}"),
            );
        }
        Ok(())
    }

    fn next_classic(
        &mut self,
        swapped: bool,
        nanos: bool,
        linktype: u32,
    ) -> Result<Option<Record>, PcapError> {
        let offset = self.pos;
        let mut h = [0u8; 16];
        if !read_full(&mut self.r, &mut h, offset)? {
            return Ok(None);
        }
        let sec = u64::from(u32_at(&h[0..4], swapped));
        let frac = u64::from(u32_at(&h[4..8], swapped));
        let incl = u32_at(&h[8..12], swapped);
        let orig = u32_at(&h[12..16], swapped);
        if incl > MAX_RECORD {
            return fmt_err(
                offset,
                format!("record length {incl} exceeds {MAX_RECORD} (corrupt file?)"),
            );
        }
        let mut data = vec![0u8; incl as usize];
        if !read_full(&mut self.r, &mut data, offset + 16)? && incl > 0 {
            return fmt_err(
                offset + 16,
                format!("truncated: record of {incl} bytes has no data"),
            );
        }
        self.pos = offset + 16 + u64::from(incl);
        let ts_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        Ok(Some(Record {
            ts_ns,
            orig_len: orig,
            linktype,
            data,
            offset,
        }))
    }

    fn next_ng(&mut self) -> Result<Option<Record>, PcapError> {
        loop {
            let offset = self.pos;
            let mut h = [0u8; 8];
            if !read_full(&mut self.r, &mut h, offset)? {
                return Ok(None);
            }
            let Format::Ng { swapped, .. } = self.format else {
                return Ok(None);
            };
            let btype = u32_at(&h[0..4], swapped);
            if btype == NG_SHB {
                self.pos = offset;
                self.read_shb_rest()?;
                continue;
            }
            let total = u32_at(&h[4..8], swapped);
            if !(12..=MAX_RECORD + 64).contains(&total) || !total.is_multiple_of(4) {
                return fmt_err(offset, format!("pcapng block length {total} is invalid"));
            }
            let mut body = vec![0u8; total as usize - 8];
            if !read_full(&mut self.r, &mut body, offset + 8)? {
                return fmt_err(offset + 8, "truncated: pcapng block body missing");
            }
            self.pos = offset + u64::from(total);
            let trailer = u32_at(&body[body.len() - 4..], swapped);
            if trailer != total {
                return fmt_err(
                    offset,
                    format!("pcapng block length {total} does not match its trailer {trailer}"),
                );
            }
            let body = &body[..body.len() - 4];
            let Format::Ng {
                swapped,
                interfaces,
            } = &mut self.format
            else {
                return Ok(None);
            };
            let sw = *swapped;
            match btype {
                NG_IDB => {
                    if body.len() < 8 {
                        return fmt_err(offset, "pcapng interface block too short");
                    }
                    let link = u32::from(u16_at(&body[0..2], sw));
                    interfaces.push((link, ng_tsresol(&body[8..], sw)));
                }
                NG_EPB => {
                    if body.len() < 20 {
                        return fmt_err(offset, "pcapng packet block too short");
                    }
                    let ifid = u32_at(&body[0..4], sw) as usize;
                    let Some(&(link, units_per_sec)) = interfaces.get(ifid) else {
                        return fmt_err(
                            offset,
                            format!("packet names interface {ifid}, which is not defined"),
                        );
                    };
                    let ts = (u64::from(u32_at(&body[4..8], sw)) << 32)
                        | u64::from(u32_at(&body[8..12], sw));
                    let cap = u32_at(&body[12..16], sw) as usize;
                    let orig = u32_at(&body[16..20], sw);
                    if 20 + cap > body.len() {
                        return fmt_err(offset, format!("packet length {cap} overruns its block"));
                    }
                    let ts_ns =
                        (u128::from(ts) * 1_000_000_000 / u128::from(units_per_sec.max(1))) as u64;
                    return Ok(Some(Record {
                        ts_ns,
                        orig_len: orig,
                        linktype: link,
                        data: body[20..20 + cap].to_vec(),
                        offset,
                    }));
                }
                NG_SPB => {
                    if body.len() < 4 {
                        return fmt_err(offset, "pcapng simple packet block too short");
                    }
                    let Some(&(link, _)) = interfaces.first() else {
                        return fmt_err(offset, "simple packet block before any interface block");
                    };
                    let orig = u32_at(&body[0..4], sw);
                    let cap = (orig as usize).min(body.len() - 4);
                    return Ok(Some(Record {
                        ts_ns: 0,
                        orig_len: orig,
                        linktype: link,
                        data: body[4..4 + cap].to_vec(),
                        offset,
                    }));
                }
                _ => {} // statistics, name resolution, custom: skip
            }
        }
    }
}

/// Timestamp units per second from the options of an interface description block.
fn ng_tsresol(mut opts: &[u8], sw: bool) -> u64 {
    while opts.len() >= 4 {
        let code = u16_at(&opts[0..2], sw);
        let len = usize::from(u16_at(&opts[2..4], sw));
        let padded = (len + 3) & !3;
        if code == 0 || opts.len() < 4 + padded {
            break;
        }
        if code == 9 && len >= 1 {
            let v = opts[4];
            let exp = u32::from(v & 0x7F);
            return if v & 0x80 != 0 {
                2u64.checked_pow(exp)
            } else {
                10u64.checked_pow(exp)
            }
            .unwrap_or(1_000_000);
        }
        opts = &opts[4 + padded..];
    }
    1_000_000
}

impl<R: Read> Iterator for PcapReader<R> {
    type Item = Result<Record, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = match self.format {
            Format::Classic {
                swapped,
                nanos,
                linktype,
            } => self.next_classic(swapped, nanos, linktype),
            Format::Ng { .. } => self.next_ng(),
        };
        match r {
            Ok(Some(rec)) => Some(Ok(rec)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

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
