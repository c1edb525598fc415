//! The devices the library offers: one per local address, named `rocelink0`, `rocelink1`, …
//! in the order of `ROCELINK_VERBS` (`ROCELINK_VERBS=127.0.0.2` or `10.77.0.1,10.77.0.2`);
//! with nothing set, one per IPv4 address of an interface that is up and not loopback.

use rocelink_io::net;
use std::net::IpAddr;

/// The environment variable that names the devices' addresses.
pub const ENV: &str = "ROCELINK_VERBS";

/// One device: a local address RoCE v2 runs on (UDP port 4791).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceInfo {
    /// `rocelink0`, `rocelink1`, …
    pub name: String,
    /// The address its port's GID 0 holds and its socket binds.
    pub ip: IpAddr,
    /// The interface that has the address (`lo` for 127/8), if one does.
    pub ifname: Option<String>,
    /// The interface's MTU, if known.
    pub if_mtu: Option<usize>,
    /// The node GUID, in the bytes of the wire (EUI-64 of the interface's MAC, or made from
    /// the address where there is no MAC): the same for the same address every time.
    pub guid: [u8; 8],
}

/// Why the devices could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// An entry of `ROCELINK_VERBS` is not an IP address.
    #[error(
        "{ENV}: `{0}` is not an IP address (give addresses like 127.0.0.2 or 10.77.0.1,10.77.0.2)"
    )]
    NotAnAddress(String),
    /// An entry names an address no interface of this host has.
    #[error("{ENV}: no interface has {0} (see `ip addr`; any 127.x.y.z works on loopback)")]
    NotLocal(IpAddr),
    /// The same address twice.
    #[error("{ENV}: {0} is listed twice")]
    Duplicate(IpAddr),
}

/// IB MTU codes 1 (256) … 5 (4096).
pub const MTU_4096: u32 = 5;

/// The largest InfiniBand MTU (its code) whose packets fit the interface MTU with every
/// header (rxe's rule: 80 bytes of headers at most).
pub fn ib_mtu_for(if_mtu: Option<usize>) -> u32 {
    let room = if_mtu.unwrap_or(1500).saturating_sub(80);
    match room {
        4096.. => 5,
        2048..=4095 => 4,
        1024..=2047 => 3,
        512..=1023 => 2,
        _ => 1,
    }
}

/// The devices for `spec` (the value of [`ENV`], if set).
pub fn discover(spec: Option<&str>) -> Result<Vec<DeviceInfo>, DeviceError> {
    let ips = match spec.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => parse(s)?,
        None => net::interface_addrs()
            .into_iter()
            .filter(|a| a.up && !a.loopback && a.addr.is_ipv4())
            .map(|a| a.addr)
            .collect(),
    };
    let mut out = Vec::new();
    for (i, ip) in ips.into_iter().enumerate() {
        if out.iter().any(|d: &DeviceInfo| d.ip == ip) {
            return Err(DeviceError::Duplicate(ip));
        }
        out.push(describe(i, ip)?);
    }
    Ok(out)
}

fn parse(spec: &str) -> Result<Vec<IpAddr>, DeviceError> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| DeviceError::NotAnAddress(s.to_owned()))
        })
        .collect()
}

fn describe(index: usize, ip: IpAddr) -> Result<DeviceInfo, DeviceError> {
    let local = ip.is_loopback() || net::interface_addrs().iter().any(|a| a.addr == ip);
    if !local {
        return Err(DeviceError::NotLocal(ip));
    }
    let ifname = net::interface_addrs()
        .into_iter()
        .find(|a| a.addr == ip)
        .map(|a| a.name)
        .or_else(|| ip.is_loopback().then(|| "lo".to_owned()));
    let mac = net::mac_for_ip(ip).map(|m| m.0).filter(|m| m != &[0; 6]);
    Ok(DeviceInfo {
        name: format!("rocelink{index}"),
        ip,
        ifname,
        if_mtu: net::mtu_for_ip(ip),
        guid: guid(ip, mac),
    })
}

/// EUI-64 of `mac` (the universal/local bit flipped, FF:FE in the middle), as rxe and
/// RNICs make their node GUID; from the address where there is no MAC.
fn guid(ip: IpAddr, mac: Option<[u8; 6]>) -> [u8; 8] {
    match (mac, ip) {
        (Some(m), _) => [m[0] ^ 2, m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]],
        (None, IpAddr::V4(v4)) => {
            let o = v4.octets();
            [0x72, 0x6C, 0xFF, 0xFE, o[0], o[1], o[2], o[3]]
        }
        (None, IpAddr::V6(v6)) => {
            let o = v6.octets();
            [0x72, 0x6C, 0xFF, 0xFE, o[12], o[13], o[14], o[15]]
        }
    }
}

/// GID 0 of a device at `ip`: the IPv4-mapped address (`::ffff:a.b.c.d`), or the IPv6
/// address itself.
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The address a GID names (the inverse of [`gid_of`]).
pub fn ip_of_gid(gid: [u8; 16]) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_listed_in_order_and_checked() {
        let d = discover(Some(" 127.0.0.2, 127.0.0.3 ")).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].name.as_str(), d[0].ip),
            ("rocelink0", "127.0.0.2".parse().unwrap())
        );
        assert_eq!(d[1].name, "rocelink1");
        assert_eq!(d[0].ifname.as_deref(), Some("lo"));
        assert_eq!(d[0].guid, [0x72, 0x6C, 0xFF, 0xFE, 127, 0, 0, 2]);
        assert_eq!(
            discover(Some("127.0.0.2")).unwrap()[0].guid,
            d[0].guid,
            "stable"
        );
        assert_eq!(
            discover(Some("nonsense")),
            Err(DeviceError::NotAnAddress("nonsense".into()))
        );
        assert!(matches!(
            discover(Some("192.0.2.77")),
            Err(DeviceError::NotLocal(_))
        ));
        assert!(matches!(
            discover(Some("127.0.0.2,127.0.0.2")),
            Err(DeviceError::Duplicate(_))
        ));
        assert!(
            DeviceError::NotAnAddress("x".into())
                .to_string()
                .contains(ENV)
        );
    }

    #[test]
    fn gids_map_addresses_both_ways_and_mtus_leave_room_for_headers() {
        let ip: IpAddr = "10.77.0.1".parse().unwrap();
        let g = gid_of(ip);
        assert_eq!(&g[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]);
        assert_eq!(ip_of_gid(g), ip);
        let v6: IpAddr = "fd00::7".parse().unwrap();
        assert_eq!(ip_of_gid(gid_of(v6)), v6);
        assert_eq!(ib_mtu_for(Some(1500)), 3);
        assert_eq!(ib_mtu_for(Some(65536)), 5);
        assert_eq!(ib_mtu_for(Some(9000)), 5);
        assert_eq!(ib_mtu_for(Some(4000)), 4);
        assert_eq!(ib_mtu_for(Some(300)), 1);
    }
}
