use super::opcode::Opcode;
use crate::bytes::{be_u16, be_u24, set_be_u16, set_be_u24};
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: Field = 2..4;
    pub(super) const FB: usize = 4;
    pub(super) const DEST_QP: Field = 5..8;
    pub(super) const ACK: usize = 8;
    pub(super) const PSN: Field = 9..12;
}

/// BTH length.
pub const HEADER_LEN: usize = 12;

/// A view of a base transport header.
#[derive(Debug, Clone)]
pub struct Bth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Bth { buffer }
    }
    /// Wrap and check the 12 bytes fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }
    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[field::OPCODE])
    }
    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & 0x80 != 0
    }
    /// Migration request.
    pub fn migreq(&self) -> bool {
        self.b()[field::FLAGS] & 0x40 != 0
    }
    /// Pad count (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] >> 4) & 3
    }
    /// Transport header version (must be 0).
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & 0x0F
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        be_u16(&self.b()[field::PKEY])
    }
    /// Forward ECN.
    pub fn fecn(&self) -> bool {
        self.b()[field::FB] & 0x80 != 0
    }
    /// Backward ECN.
    pub fn becn(&self) -> bool {
        self.b()[field::FB] & 0x40 != 0
    }
    /// The six reserved bits after FECN/BECN.
    pub fn resv6(&self) -> u8 {
        self.b()[field::FB] & 0x3F
    }
    /// Destination QP (24 bits).
    pub fn dest_qp(&self) -> u32 {
        be_u24(&self.b()[field::DEST_QP])
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK] & 0x80 != 0
    }
    /// The seven reserved bits after AckReq.
    pub fn resv7(&self) -> u8 {
        self.b()[field::ACK] & 0x7F
    }
    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        be_u24(&self.b()[field::PSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Set the PSN (low 24 bits of `v`), keeping AckReq.
    pub fn set_psn(&mut self, v: u32) {
        set_be_u24(&mut self.m()[field::PSN], v);
    }
    /// Set AckReq (clears resv7).
    pub fn set_ack_req(&mut self, v: bool) {
        self.m()[field::ACK] = if v { 0x80 } else { 0 };
    }
    /// Set the destination QP (low 24 bits), keeping FECN/BECN.
    pub fn set_dest_qp(&mut self, v: u32) {
        set_be_u24(&mut self.m()[field::DEST_QP], v);
    }
    /// Set the opcode.
    pub fn set_opcode(&mut self, v: Opcode) {
        self.m()[field::OPCODE] = v.0;
    }
}

/// The meaning of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad bytes after the payload (0..=3).
    pub pad_count: u8,
    /// Transport version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// The 7 reserved bits after AckReq (zero on the wire per InfiniBand, ignored by
    /// receivers; covered by the ICRC). IMS carries its sender's bad-frame/bad-packet
    /// marks here ([`crate::ims::marks`]).
    pub resv7: u8,
    /// PSN (24 bits).
    pub psn: u32,
}

impl Default for BthRepr {
    fn default() -> Self {
        BthRepr {
            opcode: Opcode(0),
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: super::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: 0,
            ack_req: false,
            resv7: 0,
            psn: 0,
        }
    }
}

impl BthRepr {
    /// Read every field of a checked view (reserved bits are dropped, except `resv7`).
    pub fn parse<T: AsRef<[u8]>>(b: &Bth<T>) -> BthRepr {
        BthRepr {
            opcode: b.opcode(),
            solicited: b.solicited(),
            migreq: b.migreq(),
            pad_count: b.pad_count(),
            tver: b.tver(),
            pkey: b.pkey(),
            fecn: b.fecn(),
            becn: b.becn(),
            dest_qp: b.dest_qp(),
            ack_req: b.ack_req(),
            resv7: b.resv7(),
            psn: b.psn(),
        }
    }

    /// Always 12.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write 12 bytes; reserved bits other than `resv7` are zero, fields are masked to
    /// their widths.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, b: &mut Bth<T>) {
        let m = &mut b.buffer.as_mut()[..HEADER_LEN];
        m[field::OPCODE] = self.opcode.0;
        m[field::FLAGS] = (u8::from(self.solicited) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad_count & 3) << 4)
            | (self.tver & 0x0F);
        set_be_u16(&mut m[field::PKEY], self.pkey);
        m[field::FB] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        set_be_u24(&mut m[field::DEST_QP], self.dest_qp);
        m[field::ACK] = (u8::from(self.ack_req) << 7) | (self.resv7 & 0x7F);
        set_be_u24(&mut m[field::PSN], self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An HSB FPGA data packet BTH: UC RDMA WRITE ONLY, P_Key 0xFFFF, QP 0xCAF0, PSN 0x1000.
    static HSB_BTH: [u8; 12] = [
        0x2A, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0xCA, 0xF0, 0x00, 0x00, 0x10, 0x00,
    ];
    // An RC ACK request with every flag set: SE, M, pad 3, FECN, BECN, AckReq, PSN 0xFFFFFF.
    static FLAGS: [u8; 12] = [
        0x08, 0xF0, 0x80, 0x01, 0xC0, 0x12, 0x34, 0x56, 0x80, 0xFF, 0xFF, 0xFF,
    ];

    #[test]
    fn deconstruct() {
        let b = Bth::new_checked(&HSB_BTH[..]).unwrap();
        assert_eq!(b.opcode(), Opcode::UC_RDMA_WRITE_ONLY);
        assert_eq!(b.pkey(), 0xFFFF);
        assert_eq!(b.dest_qp(), 0xCAF0);
        assert_eq!(b.psn(), 0x1000);
        assert!(!b.ack_req() && !b.fecn() && !b.becn() && !b.solicited());

        let f = Bth::new_checked(&FLAGS[..]).unwrap();
        assert!(f.solicited() && f.migreq() && f.fecn() && f.becn() && f.ack_req());
        assert_eq!((f.pad_count(), f.tver(), f.pkey()), (3, 0, 0x8001));
        assert_eq!((f.dest_qp(), f.psn()), (0x123456, 0xFFFFFF));
    }

    // An IMS UC RDMA WRITE LAST marked "end of bad frame" (resv7 = 0x02), PSN 7.
    static MARKED: [u8; 12] = [
        0x28, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x02, 0x00, 0x00, 0x07,
    ];

    #[test]
    fn reserved_bits_after_ack_req_are_kept() {
        let b = Bth::new_checked(&MARKED[..]).unwrap();
        let r = BthRepr::parse(&b);
        assert_eq!((r.resv7, r.ack_req, r.psn), (0x02, false, 7));
        assert_eq!(
            BthRepr::parse(&Bth::new_checked(&FLAGS[..]).unwrap()).resv7,
            0
        );
        // an out-of-range value cannot reach AckReq
        let mut out = [0u8; 12];
        BthRepr { resv7: 0xFF, ..r }.emit(&mut Bth::new_unchecked(&mut out[..]));
        assert_eq!(out[8], 0x7F);
    }

    #[test]
    fn construct() {
        for bytes in [HSB_BTH, FLAGS, MARKED] {
            let repr = BthRepr::parse(&Bth::new_checked(&bytes[..]).unwrap());
            let mut out = [0xA5u8; 12];
            repr.emit(&mut Bth::new_unchecked(&mut out[..]));
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn setters_and_short() {
        let mut b = HSB_BTH;
        let mut v = Bth::new_unchecked(&mut b[..]);
        v.set_psn(0x1_ABCDEF);
        v.set_ack_req(true);
        v.set_dest_qp(0x77);
        assert_eq!(v.psn(), 0xABCDEF);
        assert!(v.ack_req());
        assert_eq!(v.dest_qp(), 0x77);
        assert_eq!(
            Bth::new_checked(&HSB_BTH[..11]).unwrap_err(),
            Error::Truncated
        );
    }
}
