//! The XDP program that steers RoCE v2 to AF_XDP sockets, built as BPF instructions here —
//! no clang, no object file, nothing a fresh clone has to build — loaded with `bpf(2)` and
//! attached with a BPF link (the program comes off the interface when the link is closed,
//! so a crashed process leaves nothing behind).
//!
//! The program: an IPv4 (option-less) UDP datagram to the chosen port, untagged, goes to
//! the AF_XDP socket of its receive queue in the XSKMAP (`bpf_redirect_map`, falling back
//! to the kernel when no socket is there); everything else passes to the kernel.

use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// One BPF instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// Destination register.
    pub dst: u8,
    /// Source register.
    pub src: u8,
    /// Offset.
    pub off: i16,
    /// Immediate.
    pub imm: i32,
}

impl Insn {
    /// The 8-byte encoding (little-endian host).
    pub fn bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xF) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

// opcode pieces (linux/bpf.h)
pub(crate) const LDX_MEM: u8 = 0x61; // BPF_LDX | BPF_MEM; | size
pub(crate) const W: u8 = 0x00;
pub(crate) const H: u8 = 0x08;
pub(crate) const B: u8 = 0x10;
pub(crate) const ALU64_MOV_X: u8 = 0xbf;
pub(crate) const ALU64_MOV_K: u8 = 0xb7;
pub(crate) const ALU64_ADD_K: u8 = 0x07;
pub(crate) const JMP_JGT_X: u8 = 0x2d;
pub(crate) const JMP_JNE_K: u8 = 0x55;
const CALL: u8 = 0x85;
pub(crate) const EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;

/// XDP verdicts.
const XDP_PASS: i32 = 2;

pub(crate) fn i(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

pub(crate) const JMP_JEQ_K: u8 = 0x15;
const JMP_JLT_K: u8 = 0xa5;
const JMP_JGT_K: u8 = 0x25;
pub(crate) const ALU_END_TO_BE: u8 = 0xdc;
const JMP32_JNE_K: u8 = 0x56;

/// What the program sends to the AF_XDP sockets; everything else goes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Steer {
    /// Untagged, option-less IPv4 UDP to a destination port in `first..=last` (a host:
    /// the kernel keeps ARP, ICMP and everything else on the interface).
    UdpPorts {
        /// Lowest port.
        first: u16,
        /// Highest port.
        last: u16,
    },
    /// Everything a device owning this address handles: ARP, MAC control (PFC), CoE
    /// (0x22F0), 802.1Q-tagged frames, and IPv4 to this address.
    Device(std::net::Ipv4Addr),
    /// Untagged frames of one EtherType (a host taking raw frames: CoE, 0x22F0); the
    /// kernel keeps everything else.
    EtherType(u16),
}

/// Jumps to patch: (instruction index, label).
#[derive(Default)]
struct Asm {
    p: Vec<Insn>,
    to_pass: Vec<usize>,
    to_redirect: Vec<usize>,
}

impl Asm {
    fn op(&mut self, insn: Insn) {
        self.p.push(insn);
    }
    fn jump_pass(&mut self, insn: Insn) {
        self.to_pass.push(self.p.len());
        self.p.push(insn);
    }
    fn jump_redirect(&mut self, insn: Insn) {
        self.to_redirect.push(self.p.len());
        self.p.push(insn);
    }
    /// Frames shorter than `n` bytes pass (r4 = data + n; r4 > data_end).
    fn need(&mut self, n: i32) {
        self.op(i(ALU64_MOV_X, 4, 2, 0, 0));
        self.op(i(ALU64_ADD_K, 4, 0, 0, n));
        self.jump_pass(i(JMP_JGT_X, 4, 3, 0, 0));
    }
    fn finish(mut self, map_fd: i32) -> Vec<Insn> {
        let redirect = self.p.len();
        // bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS)
        self.p.extend([
            i(LDX_MEM | W, 2, 6, 16, 0),
            i(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
            i(0, 0, 0, 0, 0),
            i(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
            i(CALL, 0, 0, 0, HELPER_REDIRECT_MAP),
            i(EXIT, 0, 0, 0, 0),
        ]);
        let pass = self.p.len();
        self.p
            .extend([i(ALU64_MOV_K, 0, 0, 0, XDP_PASS), i(EXIT, 0, 0, 0, 0)]);
        for at in self.to_pass {
            self.p[at].off = (pass - at - 1) as i16;
        }
        for at in self.to_redirect {
            self.p[at].off = (redirect - at - 1) as i16;
        }
        self.p
    }
}

/// The steering program for `steer`, redirecting into the XSKMAP `map_fd`.
pub fn program(steer: Steer, map_fd: i32) -> Vec<Insn> {
    let mut a = Asm::default();
    // r6 = ctx; r2 = data; r3 = data_end
    a.op(i(ALU64_MOV_X, 6, 1, 0, 0));
    a.op(i(LDX_MEM | W, 2, 1, 0, 0));
    a.op(i(LDX_MEM | W, 3, 1, 4, 0));
    match steer {
        Steer::UdpPorts { first, last } => {
            a.need(42); // Ethernet, IPv4, UDP
            // EtherType 0x0800 (read as little-endian u16: 0x0008)
            a.op(i(LDX_MEM | H, 5, 2, 12, 0));
            a.jump_pass(i(JMP_JNE_K, 5, 0, 0, 0x0008));
            // version 4, header 20 bytes
            a.op(i(LDX_MEM | B, 5, 2, 14, 0));
            a.jump_pass(i(JMP_JNE_K, 5, 0, 0, 0x45));
            // UDP
            a.op(i(LDX_MEM | B, 5, 2, 23, 0));
            a.jump_pass(i(JMP_JNE_K, 5, 0, 0, 17));
            // destination port, to host order
            a.op(i(LDX_MEM | H, 5, 2, 36, 0));
            a.op(i(ALU_END_TO_BE, 5, 0, 0, 16));
            a.jump_pass(i(JMP_JLT_K, 5, 0, 0, i32::from(first)));
            a.jump_pass(i(JMP_JGT_K, 5, 0, 0, i32::from(last)));
        }
        Steer::EtherType(et) => {
            a.need(14);
            a.op(i(LDX_MEM | H, 5, 2, 12, 0));
            a.jump_pass(i(JMP_JNE_K, 5, 0, 0, i32::from(et.swap_bytes())));
        }
        Steer::Device(ip) => {
            a.need(14);
            a.op(i(LDX_MEM | H, 5, 2, 12, 0));
            for et in [0x0806u16, 0x8808, 0x22F0, 0x8100] {
                a.jump_redirect(i(JMP_JEQ_K, 5, 0, 0, i32::from(et.swap_bytes())));
            }
            a.jump_pass(i(JMP_JNE_K, 5, 0, 0, 0x0008));
            a.need(34);
            // destination address, compared as 32 bits (no sign extension)
            a.op(i(LDX_MEM | W, 5, 2, 30, 0));
            a.jump_pass(i(JMP32_JNE_K, 5, 0, 0, i32::from_ne_bytes(ip.octets())));
        }
    }
    a.finish(map_fd)
}

/// The steering program for UDP destination `port` (see [`Steer::UdpPorts`]).
pub fn steer_udp(port: u16, map_fd: i32) -> Vec<Insn> {
    program(
        Steer::UdpPorts {
            first: port,
            last: port,
        },
        map_fd,
    )
}

/// Put AF_XDP socket `xsk_fd` in slot `queue` of the XSKMAP `map`.
pub fn set_socket(map: &OwnedFd, queue: u32, xsk_fd: i32) -> io::Result<()> {
    let key = queue;
    let value = xsk_fd as u32;
    let mut a = [0u8; 128];
    put32(&mut a, 0, map.as_raw_fd() as u32);
    put64(&mut a, 8, &key as *const u32 as u64);
    put64(&mut a, 16, &value as *const u32 as u64);
    sys::bpf(MAP_UPDATE_ELEM, &mut a)
        .map(|_| ())
        .map_err(|e| explain(e, &format!("cannot put the AF_XDP socket in slot {queue}")))
}

/// The steering program attached to an interface with its XSKMAP: detached when dropped.
#[derive(Debug)]
pub struct XdpProgram {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    ifname: String,
}

impl XdpProgram {
    /// Load the program for `steer` with a map of `queues` slots and attach it to `ifname`.
    pub fn attach(ifname: &str, steer: Steer, queues: u32) -> io::Result<XdpProgram> {
        let map = create_xskmap(queues)?;
        let prog = load_xdp(&program(steer, map.as_raw_fd()))?;
        let link = attach(&prog, ifname)?;
        Ok(XdpProgram {
            map,
            _prog: prog,
            _link: link,
            ifname: ifname.to_owned(),
        })
    }

    /// Steer queue `queue`'s frames to `xsk`.
    pub fn register(&self, queue: u32, xsk: &super::Xsk) -> io::Result<()> {
        set_socket(&self.map, queue, xsk.fd())
    }

    /// The interface it is attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }
}

const MAP_CREATE: u32 = 0;
const MAP_UPDATE_ELEM: u32 = 2;
const PROG_LOAD: u32 = 5;
const LINK_CREATE: u32 = 28;
const MAP_TYPE_XSKMAP: u32 = 17;
const PROG_TYPE_XDP: u32 = 6;
const ATTACH_XDP: u32 = 37;

pub(crate) fn put32(a: &mut [u8; 128], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

pub(crate) fn put64(a: &mut [u8; 128], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// Why XDP could not be set up, with what to do about it.
pub(crate) fn explain(e: io::Error, what: &str) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (XDP needs CAP_NET_ADMIN and CAP_BPF: run as root, or grant them with setcap)"
        }
        Some(libc::ENOSYS) | Some(libc::EINVAL) => {
            " (this kernel lacks the feature: AF_XDP and BPF links need Linux 5.9 or later)"
        }
        Some(libc::ERANGE) => {
            " (the interface's MTU is too large for XDP on its driver: veth takes 3506 at most)"
        }
        Some(libc::EBUSY) | Some(libc::EEXIST) => {
            " (another XDP program is attached: remove it with `ip link set dev IFACE xdp off`)"
        }
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

/// An XSKMAP with `entries` slots (one per receive queue).
pub fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, MAP_TYPE_XSKMAP);
    put32(&mut a, 4, 4);
    put32(&mut a, 8, 4);
    put32(&mut a, 12, entries.max(1));
    a[28..36].copy_from_slice(b"rocelink"); // map_name
    sys::bpf_fd(MAP_CREATE, &mut a).map_err(|e| explain(e, "cannot create the XSKMAP"))
}

/// Load `prog` as an XDP program; a refusal carries the verifier's log.
pub fn load_xdp(prog: &[Insn]) -> io::Result<OwnedFd> {
    load(PROG_TYPE_XDP, ATTACH_XDP, prog, "XDP")
}

/// Load `prog` as a program of type `kind` (expected attach type `attach`); a refusal
/// carries the verifier's log. `what` names it in errors.
pub(crate) fn load(kind: u32, attach: u32, prog: &[Insn], what: &str) -> io::Result<OwnedFd> {
    let code: Vec<u8> = prog.iter().flat_map(|i| i.bytes()).collect();
    let license = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 1 << 16];
    let attr = |log: Option<&mut Vec<u8>>| {
        let mut a = [0u8; 128];
        put32(&mut a, 0, kind);
        put32(&mut a, 4, prog.len() as u32);
        put64(&mut a, 8, code.as_ptr() as u64);
        put64(&mut a, 16, license.as_ptr() as u64);
        if let Some(l) = log {
            put32(&mut a, 24, 1);
            put32(&mut a, 28, l.len() as u32);
            put64(&mut a, 32, l.as_mut_ptr() as u64);
        }
        a[48..56].copy_from_slice(b"rocelink");
        put32(&mut a, 68, attach);
        a
    };
    let mut a = attr(None);
    match sys::bpf_fd(PROG_LOAD, &mut a) {
        Ok(fd) => Ok(fd),
        Err(e)
            if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EINVAL) =>
        {
            // again with the verifier's log, to say why
            let mut a = attr(Some(&mut log));
            let again = sys::bpf_fd(PROG_LOAD, &mut a);
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)])
                    .trim()
                    .to_owned();
            match again {
                Ok(fd) => Ok(fd),
                Err(e) if text.is_empty() => Err(explain(
                    e,
                    &format!("the kernel refused the {what} program"),
                )),
                Err(e) => Err(io::Error::new(
                    e.kind(),
                    format!("the kernel refused the {what} program: {e}; verifier: {text}"),
                )),
            }
        }
        Err(e) => Err(explain(e, &format!("cannot load the {what} program"))),
    }
}

/// Attach program `prog` to interface `ifname`; it stays attached while the returned link
/// is open.
pub fn attach(prog: &OwnedFd, ifname: &str) -> io::Result<OwnedFd> {
    link(prog, ifname, ATTACH_XDP, "XDP")
}

/// A BPF link of `prog` to interface `ifname` at attach point `attach`.
pub(crate) fn link(prog: &OwnedFd, ifname: &str, attach: u32, what: &str) -> io::Result<OwnedFd> {
    let ifindex = sys::if_index(ifname).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {ifname:?}"),
        )
    })?;
    let mut a = [0u8; 128];
    put32(&mut a, 0, prog.as_raw_fd() as u32);
    put32(&mut a, 4, ifindex);
    put32(&mut a, 8, attach);
    sys::bpf_fd(LINK_CREATE, &mut a)
        .map_err(|e| explain(e, &format!("cannot attach {what} to {ifname}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_kernel_layout() {
        // r1 = r6 (mov64 reg): 0xbf, dst 1 | src 6 << 4
        assert_eq!(
            i(ALU64_MOV_X, 1, 6, 0, 0).bytes(),
            [0xbf, 0x61, 0, 0, 0, 0, 0, 0]
        );
        // if r5 != 0x45 goto +7
        assert_eq!(
            i(JMP_JNE_K, 5, 0, 7, 0x45).bytes(),
            [0x55, 0x05, 7, 0, 0x45, 0, 0, 0]
        );
    }

    #[test]
    fn device_program_redirects_its_ethertypes_and_address() {
        let ip = std::net::Ipv4Addr::new(10, 0, 0, 200);
        let p = program(Steer::Device(ip), 3);
        let redirect = p
            .iter()
            .position(|x| x.code == LDX_MEM | W && x.dst == 2 && x.src == 6)
            .unwrap();
        let pass = p.len() - 2;
        let target = |at: usize| (at as i64 + 1 + i64::from(p[at].off)) as usize;
        for et in [0x0608, 0x0888, 0xF022, 0x0081] {
            let at = p
                .iter()
                .position(|x| x.code == JMP_JEQ_K && x.imm == et)
                .unwrap();
            assert_eq!(target(at), redirect, "EtherType {et:#06x}");
        }
        // the address compare is 32-bit, so .200 (high bit set) is not sign-extended away
        let at = p.iter().position(|x| x.code == JMP32_JNE_K).unwrap();
        assert_eq!(p[at].imm, i32::from_ne_bytes([10, 0, 0, 200]));
        assert_eq!(target(at), pass);
    }

    #[test]
    fn ethertype_program_redirects_only_its_ethertype() {
        let p = program(Steer::EtherType(0x22F0), 3);
        let pass = p.len() - 2;
        // the EtherType, read as a little-endian u16, is compared byte-swapped
        let at = p.iter().position(|x| x.code == JMP_JNE_K).unwrap();
        assert_eq!((p[at].dst, p[at].imm), (5, 0xF022));
        assert_eq!(at as i64 + 1 + i64::from(p[at].off), pass as i64);
        assert_eq!(p[at + 1], i(LDX_MEM | W, 2, 6, 16, 0), "then the redirect");
    }

    #[test]
    fn every_check_jumps_to_pass() {
        let p = steer_udp(4791, 3);
        let pass = p.len() - 2;
        assert_eq!(p[pass], i(ALU64_MOV_K, 0, 0, 0, XDP_PASS));
        for (at, insn) in p.iter().enumerate() {
            if [JMP_JNE_K, JMP_JGT_X, JMP_JLT_K, JMP_JGT_K].contains(&insn.code) {
                assert_eq!(
                    at as i64 + 1 + i64::from(insn.off),
                    pass as i64,
                    "jump at {at}"
                );
            }
        }
        // the port is swapped to host order, then compared as a range
        let at = p.iter().position(|x| x.code == ALU_END_TO_BE).unwrap();
        assert_eq!((p[at].dst, p[at].imm), (5, 16));
        assert_eq!((p[at + 1].code, p[at + 1].imm), (JMP_JLT_K, 4791));
        assert_eq!((p[at + 2].code, p[at + 2].imm), (JMP_JGT_K, 4791));
        // the map reference is a two-slot load
        let ld = p.iter().position(|x| x.code == LD_IMM64).unwrap();
        assert_eq!((p[ld].src, p[ld].imm), (PSEUDO_MAP_FD, 3));
        assert_eq!(p[ld + 1], i(0, 0, 0, 0, 0));
    }
}
