//! Reading classic pcap (µs and ns, either byte order) and pcapng, with errors that name
//! the byte offset.

use super::*;
use std::io::Read;

enum Format {
    Classic {
        swapped: bool,
        nanos: bool,
        linktype: u32,
        /// The file's snapshot length: no record may hold more (0: none given).
        snaplen: u32,
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

pub(super) const NG_SHB: u32 = 0x0A0D_0D0A;
pub(super) const NG_IDB: u32 = 1;
pub(super) const NG_SPB: u32 = 3;
pub(super) const NG_EPB: u32 = 6;
pub(super) const NG_BOM: u32 = 0x1A2B_3C4D;

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
        let snaplen = u32_at(&h[12..16], swapped);
        Ok(PcapReader {
            r,
            pos: 24,
            format: Format::Classic {
                swapped,
                nanos,
                linktype,
                snaplen,
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
        snaplen: u32,
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
        if snaplen > 0 && incl > snaplen {
            return fmt_err(
                offset,
                format!(
                    "record length {incl} exceeds the file's snapshot length {snaplen} (corrupt file?)"
                ),
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
                NG_EPB => return epb(body, sw, interfaces, offset).map(Some),
                NG_SPB => return spb(body, sw, interfaces, offset).map(Some),
                _ => {} // statistics, name resolution, custom: skip
            }
        }
    }
}

/// An enhanced packet block's record (`body` without its header and trailer, at
/// `offset`): its interface's link type, its timestamp in that interface's units.
fn epb(body: &[u8], sw: bool, interfaces: &[(u32, u64)], offset: u64) -> Result<Record, PcapError> {
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
    let ts = (u64::from(u32_at(&body[4..8], sw)) << 32) | u64::from(u32_at(&body[8..12], sw));
    let cap = u32_at(&body[12..16], sw) as usize;
    let orig = u32_at(&body[16..20], sw);
    if 20 + cap > body.len() {
        return fmt_err(offset, format!("packet length {cap} overruns its block"));
    }
    let ts_ns = (u128::from(ts) * 1_000_000_000 / u128::from(units_per_sec.max(1))) as u64;
    Ok(Record {
        ts_ns,
        orig_len: orig,
        linktype: link,
        data: body[20..20 + cap].to_vec(),
        offset,
    })
}

/// A simple packet block's record: the first interface's link type, no timestamp.
fn spb(body: &[u8], sw: bool, interfaces: &[(u32, u64)], offset: u64) -> Result<Record, PcapError> {
    if body.len() < 4 {
        return fmt_err(offset, "pcapng simple packet block too short");
    }
    let Some(&(link, _)) = interfaces.first() else {
        return fmt_err(offset, "simple packet block before any interface block");
    };
    let orig = u32_at(&body[0..4], sw);
    let cap = (orig as usize).min(body.len() - 4);
    Ok(Record {
        ts_ns: 0,
        orig_len: orig,
        linktype: link,
        data: body[4..4 + cap].to_vec(),
        offset,
    })
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
                snaplen,
            } => self.next_classic(swapped, nanos, linktype, snaplen),
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
