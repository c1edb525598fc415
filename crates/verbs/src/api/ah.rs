//! Address handles: where a UD send goes (a GID, so an IP address, and UDP port 4791).

use super::memory::{next_handle, pd};
use super::util::{minus_one, ptr_or_errno, status};
use crate::abi::*;
use crate::devices::{gid_of, ip_of_gid};
use crate::objects::{self, Kind, Obj};
use libc::c_int;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// An address handle.
#[derive(Debug)]
pub(crate) struct Ah {
    /// Where sends through it go.
    pub(crate) dest: SocketAddr,
    pd: usize,
}

impl Obj for Ah {
    type C = ibv_ah;
    const KIND: Kind = Kind::Ah;
}

/// The destination of the AH an `ibv_ah *` names.
pub(crate) fn ah_dest(p: *const ibv_ah) -> Option<SocketAddr> {
    objects::get::<Ah>(p).map(|o| o.r.dest)
}

/// The destination of `attr`: RoCE needs its global route (the GID), from GID index 0.
fn dest_of(attr: &ibv_ah_attr) -> Result<SocketAddr, i32> {
    if attr.is_global == 0 || attr.grh.sgid_index != 0 {
        return Err(libc::EINVAL);
    }
    Ok(SocketAddr::new(ip_of_gid(attr.grh.dgid.raw), 4791))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    ptr_or_errno(|| {
        let d = pd(p).ok_or(libc::EINVAL)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes an initialised attribute (non-null, checked).
        let dest = dest_of(unsafe { &*attr })?;
        if dest.is_ipv4() != d.nic.info.ip.is_ipv4() {
            return Err(libc::EINVAL);
        }
        d.users.fetch_add(1, Ordering::AcqRel);
        Ok(objects::publish(
            ibv_ah {
                // SAFETY: a live PD: its context was set when it was made.
                context: unsafe { (*p).context },
                pd: p,
                handle: next_handle(),
            },
            Ah {
                dest,
                pd: p as usize,
            },
        ))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    status(|| {
        let a = objects::retire::<Ah>(ah).ok_or(libc::EINVAL)?;
        if let Some(d) = pd(a.r.pd as *const ibv_pd) {
            d.users.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    })
}

/// The sender's GID from the 40 bytes in front of a UD receive (its IPv4 header in the
/// last 20, or its IPv6 header).
fn source_gid(grh: &[u8; 40]) -> Option<[u8; 16]> {
    use rocelink_wire::ib::grh::{NetworkHeader, parse};
    match parse(grh).ok()? {
        NetworkHeader::V4(h) => {
            let src: [u8; 4] = h.get(12..16)?.try_into().ok()?;
            Some(gid_of(std::net::Ipv4Addr::from(src).into()))
        }
        NetworkHeader::V6(h) => h.get(8..24)?.try_into().ok(),
    }
}

/// `ibv_init_ah_from_wc`: the attributes that answer the sender of a UD receive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    attr: *mut ibv_ah_attr,
) -> c_int {
    minus_one(|| {
        super::context::context(ctx).ok_or(libc::EINVAL)?;
        if wc.is_null() || grh.is_null() || attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes its completion, the 40 bytes of the receive's GRH
        // slot, and room for the attributes (non-null, checked).
        let (w, bytes) = unsafe { (&*wc, grh.cast::<[u8; 40]>().read()) };
        if w.wc_flags & IBV_WC_GRH == 0 {
            return Err(libc::EINVAL);
        }
        let sgid = source_gid(&bytes).ok_or(libc::EINVAL)?;
        let a = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: sgid },
                flow_label: 0,
                sgid_index: 0,
                hop_limit: 0xFF,
                traffic_class: 0,
            },
            dlid: w.slid,
            sl: w.sl,
            src_path_bits: w.dlid_path_bits,
            static_rate: 0,
            is_global: 1,
            port_num: port,
        };
        // SAFETY: room for the attributes (non-null, checked).
        unsafe { attr.write(a) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    p: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port: u8,
) -> *mut ibv_ah {
    ptr_or_errno(|| {
        // SAFETY: a live PD's context (checked by `pd`), or EINVAL.
        let ctx = pd(p).map(|_| unsafe { (*p).context }).ok_or(libc::EINVAL)?;
        let mut a = ibv_ah_attr::default();
        // SAFETY: arguments passed on as the program gave them; `a` is ours.
        if unsafe { ibv_init_ah_from_wc(ctx, port, wc, grh, &mut a) } != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: `a` is an initialised attribute of ours.
        let ah = unsafe { ibv_create_ah(p, &mut a) };
        if ah.is_null() {
            Err(libc::EINVAL)
        } else {
            Ok(ah)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sender_is_read_from_an_ipv4_header_or_a_grh() {
        let mut slot = [0u8; 40];
        slot[20] = 0x45;
        slot[32..36].copy_from_slice(&[10, 77, 0, 11]);
        assert_eq!(
            ip_of_gid(source_gid(&slot).unwrap()),
            "10.77.0.11".parse::<std::net::IpAddr>().unwrap()
        );
        let mut g = [0u8; 40];
        g[0] = 0x60;
        g[8..24].copy_from_slice(&"fd00::5".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(ip_of_gid(source_gid(&g).unwrap()).to_string(), "fd00::5");
        assert_eq!(source_gid(&[0; 40]), None);
        assert_eq!(dest_of(&ibv_ah_attr::default()), Err(libc::EINVAL));
    }
}
