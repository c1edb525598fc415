//! BOOTP (RFC 951) as HSB devices use it: a v2 enumeration request broadcast once a second
//! from UDP 12268 to 12267 with an NVIDIA vendor area, and the set-IP reply a host unicasts
//! back to 12268.

use crate::bytes::{Mac, be_u16, be_u32, be_u64, le_u16, set_be_u16, set_be_u32, set_le_u16};
use crate::{Error, Result};
use core::net::Ipv4Addr;

/// Length of a BOOTP message (236-byte fixed part + 64-byte vendor area).
pub const PACKET_LEN: usize = 300;
/// Offset of the vendor area.
pub const VEND_OFFSET: usize = 236;
/// Vendor tag of the HSB vendor area.
pub const VENDOR_TAG: u8 = 0xE0;
/// Vendor id "NVDA".
pub const VENDOR_ID: u32 = 0x4E56_4441;

mod field {
    use crate::Field;
    pub(super) const OP: usize = 0;
    pub(super) const HTYPE: usize = 1;
    pub(super) const HLEN: usize = 2;
    pub(super) const XID: Field = 4..8;
    pub(super) const SECS: Field = 8..10;
    pub(super) const FLAGS: Field = 10..12;
    pub(super) const CIADDR: Field = 12..16;
    pub(super) const YIADDR: Field = 16..20;
    pub(super) const SIADDR: Field = 20..24;
    pub(super) const CHADDR: Field = 28..44;
}

/// A view of a BOOTP message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn ip(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap and check the 300 bytes fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// 1 = request, 2 = reply.
    pub fn op(&self) -> u8 {
        self.b()[field::OP]
    }
    /// Transaction id.
    pub fn xid(&self) -> u32 {
        be_u32(&self.b()[field::XID])
    }
    /// Seconds.
    pub fn secs(&self) -> u16 {
        be_u16(&self.b()[field::SECS])
    }
    /// Flags.
    pub fn flags(&self) -> u16 {
        be_u16(&self.b()[field::FLAGS])
    }
    /// Client's current address.
    pub fn ciaddr(&self) -> Ipv4Addr {
        ip(&self.b()[field::CIADDR])
    }
    /// "Your" address (the IP a set-IP reply assigns).
    pub fn yiaddr(&self) -> Ipv4Addr {
        ip(&self.b()[field::YIADDR])
    }
    /// Server address.
    pub fn siaddr(&self) -> Ipv4Addr {
        ip(&self.b()[field::SIADDR])
    }
    /// Client hardware address field (16 bytes).
    pub fn chaddr(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::CHADDR]);
        a
    }
    /// Client MAC (first six bytes of chaddr).
    pub fn mac(&self) -> Mac {
        Mac::from_bytes(&self.b()[field::CHADDR])
    }
    /// The 64-byte vendor area.
    pub fn vend(&self) -> &[u8] {
        &self.b()[VEND_OFFSET..PACKET_LEN]
    }
}

/// The HSB v2 vendor area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VendorV2 {
    /// Tag length byte (0x38 per the document, 0x04 from HSB's emulator; ignored by hosts).
    pub tag_len: u8,
    /// Ethernet port index of the device.
    pub data_plane: u8,
    /// Compatibility id (little-endian on the wire).
    pub compat_id: u16,
    /// Board UUID (printed 8-4-4-4-12).
    pub uuid: [u8; 16],
    /// Per-port transmitted packet count (24 bits).
    pub tx_packet_count: u32,
    /// Serial number bytes.
    pub serial: [u8; 7],
    /// HSB IP version (little-endian on the wire), e.g. 0x2606.
    pub hsb_ip_version: u16,
    /// FPGA CRC (little-endian on the wire).
    pub fpga_crc: u16,
    /// PTP seconds (48 bits).
    pub ptp_s: u64,
    /// PTP nanoseconds.
    pub ptp_ns: u32,
    /// BOOTP packet sequence.
    pub bootp_seq: u16,
    /// Status (bit 0: PTP synchronised).
    pub status: u8,
}

impl VendorV2 {
    /// Parse a 64-byte vendor area; wrong tag, vendor id or version: [`Error::Unsupported`].
    pub fn parse(v: &[u8]) -> Result<VendorV2> {
        if v.len() < 64 {
            return Err(Error::Truncated);
        }
        if v[0] != VENDOR_TAG || be_u32(&v[2..6]) != VENDOR_ID || v[7] != 2 {
            return Err(Error::Unsupported);
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&v[10..26]);
        let mut serial = [0u8; 7];
        serial.copy_from_slice(&v[30..37]);
        Ok(VendorV2 {
            tag_len: v[1],
            data_plane: v[6],
            compat_id: le_u16(&v[8..10]),
            uuid,
            tx_packet_count: u32::from_be_bytes([0, v[26], v[27], v[28]]),
            serial,
            hsb_ip_version: le_u16(&v[37..39]),
            fpga_crc: le_u16(&v[39..41]),
            ptp_s: be_u64(&[0, 0, v[45], v[46], v[47], v[48], v[49], v[50]]),
            ptp_ns: be_u32(&v[51..55]),
            bootp_seq: be_u16(&v[55..57]),
            status: v[57],
        })
    }

    /// Write 64 bytes.
    pub fn emit(&self, v: &mut [u8]) {
        let v = &mut v[..64];
        v.fill(0);
        v[0] = VENDOR_TAG;
        v[1] = self.tag_len;
        set_be_u32(&mut v[2..6], VENDOR_ID);
        v[6] = self.data_plane;
        v[7] = 2;
        set_le_u16(&mut v[8..10], self.compat_id);
        v[10..26].copy_from_slice(&self.uuid);
        v[26..29].copy_from_slice(&self.tx_packet_count.to_be_bytes()[1..]);
        v[30..37].copy_from_slice(&self.serial);
        set_le_u16(&mut v[37..39], self.hsb_ip_version);
        set_le_u16(&mut v[39..41], self.fpga_crc);
        v[45..51].copy_from_slice(&self.ptp_s.to_be_bytes()[2..]);
        set_be_u32(&mut v[51..55], self.ptp_ns);
        set_be_u16(&mut v[55..57], self.bootp_seq);
        v[57] = self.status;
    }

    /// UUID as 8-4-4-4-12 hex.
    pub fn uuid_string(&self) -> String {
        let u = &self.uuid;
        let h = |r: core::ops::Range<usize>| {
            u[r].iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        format!(
            "{}-{}-{}-{}-{}",
            h(0..4),
            h(4..6),
            h(6..8),
            h(8..10),
            h(10..16)
        )
    }

    /// Serial number as a hex string (as hololink-enumerate prints it).
    pub fn serial_string(&self) -> String {
        self.serial.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// An HSB enumeration request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EnumerationRepr {
    /// Transaction id (the device's host-interface index).
    pub xid: u32,
    /// Seconds field.
    pub secs: u16,
    /// Flags field (FPGA: 1).
    pub flags: u16,
    /// The device's current IP.
    pub ciaddr: Option<Ipv4Addr>,
    /// Device MAC.
    pub mac: Mac,
    /// Vendor area.
    pub vendor: VendorV2,
}

impl EnumerationRepr {
    /// Parse a BOOTP request (op 1, Ethernet) with an HSB v2 vendor area.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<EnumerationRepr> {
        let b = p.b();
        if p.op() != 1 || b[field::HTYPE] != 1 || b[field::HLEN] != 6 {
            return Err(Error::Unsupported);
        }
        let ci = p.ciaddr();
        Ok(EnumerationRepr {
            xid: p.xid(),
            secs: p.secs(),
            flags: p.flags(),
            ciaddr: (!ci.is_unspecified()).then_some(ci),
            mac: p.mac(),
            vendor: VendorV2::parse(p.vend())?,
        })
    }

    /// Write the 300-byte request.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..PACKET_LEN];
        b.fill(0);
        b[field::OP] = 1;
        b[field::HTYPE] = 1;
        b[field::HLEN] = 6;
        set_be_u32(&mut b[field::XID], self.xid);
        set_be_u16(&mut b[field::SECS], self.secs);
        set_be_u16(&mut b[field::FLAGS], self.flags);
        b[field::CIADDR].copy_from_slice(&self.ciaddr.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
        b[field::CHADDR.start..field::CHADDR.start + 6].copy_from_slice(&self.mac.0);
        self.vendor.emit(&mut b[VEND_OFFSET..]);
    }
}

/// The set-IP BOOTP reply (op 2): assigns `yiaddr` to the device whose request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SetIpRepr {
    /// Copied from the request.
    pub xid: u32,
    /// Copied from the request.
    pub secs: u16,
    /// Copied from the request (the device's MAC + 10 zero bytes).
    pub chaddr: [u8; 16],
    /// The new device IP.
    pub yiaddr: Ipv4Addr,
    /// The host interface's IP.
    pub siaddr: Ipv4Addr,
}

impl SetIpRepr {
    /// Parse a BOOTP reply.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<SetIpRepr> {
        if p.op() != 2 {
            return Err(Error::Unsupported);
        }
        Ok(SetIpRepr {
            xid: p.xid(),
            secs: p.secs(),
            chaddr: p.chaddr(),
            yiaddr: p.yiaddr(),
            siaddr: p.siaddr(),
        })
    }

    /// Answer an enumeration request.
    pub fn answering<T: AsRef<[u8]>>(
        req: &Packet<T>,
        new_ip: Ipv4Addr,
        host_ip: Ipv4Addr,
    ) -> SetIpRepr {
        SetIpRepr {
            xid: req.xid(),
            secs: req.secs(),
            chaddr: req.chaddr(),
            yiaddr: new_ip,
            siaddr: host_ip,
        }
    }

    /// The MAC the reply is for.
    pub fn mac(&self) -> Mac {
        Mac::from_bytes(&self.chaddr)
    }

    /// Write the 300-byte reply (flags 0, ciaddr 0, sname/file/vend zero).
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..PACKET_LEN];
        b.fill(0);
        b[field::OP] = 2;
        b[field::HTYPE] = 1;
        b[field::HLEN] = 6;
        set_be_u32(&mut b[field::XID], self.xid);
        set_be_u16(&mut b[field::SECS], self.secs);
        b[field::YIADDR].copy_from_slice(&self.yiaddr.octets());
        b[field::SIADDR].copy_from_slice(&self.siaddr.octets());
        b[field::CHADDR].copy_from_slice(&self.chaddr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EnumerationRepr {
        EnumerationRepr {
            xid: 0xCAFE_BABE,
            secs: 26203,
            flags: 1,
            ciaddr: Some(Ipv4Addr::new(192, 168, 0, 2)),
            mac: Mac([2, 0, 0, 0, 0, 1]),
            vendor: VendorV2 {
                tag_len: 0x38,
                data_plane: 1,
                compat_id: 0x2603,
                uuid: [
                    0x88, 0x9b, 0x7c, 0xe3, 0x65, 0xa5, 0x42, 0x47, 0x8b, 0x05, 0x4f, 0xf1, 0x90,
                    0x4c, 0x33, 0x59,
                ],
                tx_packet_count: 0x01_0203,
                serial: [0x90, 0x15, 0x5f, 0x43, 0x43, 0x53, 0x4c],
                hsb_ip_version: 0x2606,
                fpga_crc: 0x5AA5,
                ptp_s: 0x0000_1234_5678_9ABC,
                ptp_ns: 42,
                bootp_seq: 7,
                status: 1,
            },
        }
    }

    #[test]
    fn enumeration_layout() {
        let mut b = [0xA5u8; 300];
        sample().emit(&mut b);
        assert_eq!(&b[0..4], &[1, 1, 6, 0]);
        assert_eq!(&b[4..8], &[0xCA, 0xFE, 0xBA, 0xBE]);
        assert_eq!(&b[10..12], &[0, 1]);
        let v = &b[236..];
        assert_eq!(&v[0..8], &[0xE0, 0x38, b'N', b'V', b'D', b'A', 1, 2]);
        assert_eq!(&v[8..10], &[0x03, 0x26]); // compat id LE
        assert_eq!(&v[26..29], &[1, 2, 3]); // packet count BE24
        assert_eq!(&v[37..41], &[0x06, 0x26, 0xA5, 0x5A]); // version and crc LE
        assert_eq!(&v[45..51], &[0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC]);
        let p = Packet::new_checked(&b[..]).unwrap();
        let r = EnumerationRepr::parse(&p).unwrap();
        assert_eq!(r, sample());
        assert_eq!(
            r.vendor.uuid_string(),
            "889b7ce3-65a5-4247-8b05-4ff1904c3359"
        );
        assert_eq!(r.vendor.serial_string(), "90155f4343534c");
    }

    #[test]
    fn rejects_foreign_vendor() {
        let mut b = [0u8; 300];
        sample().emit(&mut b);
        b[238] = b'X';
        assert_eq!(
            EnumerationRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        assert_eq!(
            Packet::new_checked(&b[..299]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn set_ip_reply() {
        let mut req = [0u8; 300];
        sample().emit(&mut req);
        let p = Packet::new_checked(&req[..]).unwrap();
        let r = SetIpRepr::answering(
            &p,
            Ipv4Addr::new(192, 168, 0, 50),
            Ipv4Addr::new(192, 168, 0, 101),
        );
        let mut out = [0xA5u8; 300];
        r.emit(&mut out);
        assert_eq!(out[0], 2);
        assert_eq!(&out[16..20], &[192, 168, 0, 50]);
        assert_eq!(&out[20..24], &[192, 168, 0, 101]);
        assert_eq!(&out[28..34], &[2, 0, 0, 0, 0, 1]);
        assert!(out[236..].iter().all(|&x| x == 0));
        let back = SetIpRepr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.mac(), Mac([2, 0, 0, 0, 0, 1]));
    }
}
