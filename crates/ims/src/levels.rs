//! The service levels of a role's two channels. The specification's fabric configuration
//! keeps the status channel (a software path) and the data channel (the hardware path) on
//! separate service levels, typically SL0/VL0 and SL1/VL1, so they never share a lane. On
//! RoCE v2 a service level travels as the IP header's DSCP (and, on a tagged link, as the
//! 802.1Q priority): rocelink maps SL n to the class selector CSn, DSCP 8·n, whose upper
//! three bits are the priority n.

use crate::Error;

/// The DSCP each channel's packets carry (0..=63): what this role sends on its status
/// channel (status packets) and on its data channel (a worker's WRITEs, a unit's ACKs and
/// NACKs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServiceLevels {
    /// The status channel's DSCP (CS0 by default: SL0).
    pub status_dscp: u8,
    /// The data channel's DSCP (CS1 by default: SL1).
    pub data_dscp: u8,
}

impl Default for ServiceLevels {
    /// The specification's typical configuration: status SL0, data SL1 (CS0 and CS1).
    fn default() -> Self {
        ServiceLevels {
            status_dscp: dscp_of_sl(0),
            data_dscp: dscp_of_sl(1),
        }
    }
}

/// The DSCP rocelink gives service level `sl` (0..=7): the class selector CS`sl`.
pub const fn dscp_of_sl(sl: u8) -> u8 {
    (sl & 7) << 3
}

/// The service level whose class selector `dscp` is, if it is one.
pub const fn sl_of_dscp(dscp: u8) -> Option<u8> {
    if dscp & 7 == 0 && dscp < 64 {
        Some(dscp >> 3)
    } else {
        None
    }
}

impl ServiceLevels {
    /// Why these cannot be sent, if so (a DSCP is 6 bits).
    pub fn check(&self) -> Result<(), Error> {
        for (channel, dscp) in [("status", self.status_dscp), ("data", self.data_dscp)] {
            if dscp > 63 {
                return Err(Error::Dscp { channel, dscp });
            }
        }
        Ok(())
    }

    /// The status channel's traffic class byte (DSCP << 2, ECN not set).
    pub fn status_tc(&self) -> u8 {
        self.status_dscp << 2
    }

    /// The data channel's traffic class byte.
    pub fn data_tc(&self) -> u8 {
        self.data_dscp << 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_levels_are_class_selectors() {
        let d = ServiceLevels::default();
        assert_eq!((d.status_dscp, d.data_dscp), (0, 8));
        assert_eq!((d.status_tc(), d.data_tc()), (0, 0x20));
        for sl in 0..8 {
            assert_eq!(sl_of_dscp(dscp_of_sl(sl)), Some(sl));
        }
        assert_eq!(sl_of_dscp(26), None, "AF31 is no class selector");
        let bad = ServiceLevels {
            status_dscp: 64,
            ..d
        };
        assert!(bad.check().unwrap_err().to_string().contains("status"));
        assert!(d.check().is_ok());
    }
}
