//! A UC pair writing into a ring-window region (the IMS ring buffer): A's source region
//! filled with one byte value, B's ring of [`RING`] bytes with a window.

use rocelink_transport::sim::{LinkConfig, Pair, connect};
use rocelink_transport::*;
use std::time::{Duration, Instant};

/// Bytes of B's ring.
pub(crate) const RING: usize = 64 * 1024;

pub(crate) struct RingPair {
    pub(crate) pair: Pair,
    pub(crate) qa: u32,
    pub(crate) qb: u32,
    /// A's 16 KiB source region (VA 0), every byte `fill`.
    pub(crate) src: MrKeys,
    /// B's ring region.
    pub(crate) ring: MrKeys,
}

impl RingPair {
    /// UC QPs connected with `mtu` (B's reporting messages if `report_messages`); B's ring
    /// window starts at `start` and is `window` bytes long.
    pub(crate) fn new(
        fill: u8,
        start: u64,
        window: u64,
        report_messages: bool,
        mtu: Mtu,
        seed: u64,
    ) -> RingPair {
        let mut init = QpInit::new(QpType::Uc);
        init.report_messages = report_messages;
        RingPair::with_init(fill, start, window, init, mtu, seed)
    }

    /// As [`RingPair::new`] reporting messages, B's QP with `rules`.
    #[allow(dead_code)]
    pub(crate) fn with_rules(
        fill: u8,
        start: u64,
        window: u64,
        mtu: Mtu,
        rules: WriteRules,
        seed: u64,
    ) -> RingPair {
        let mut init = QpInit::new(QpType::Uc);
        init.report_messages = true;
        init.write_rules = rules;
        RingPair::with_init(fill, start, window, init, mtu, seed)
    }

    fn with_init(fill: u8, start: u64, window: u64, init: QpInit, mtu: Mtu, seed: u64) -> RingPair {
        let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
        let mut b = Endpoint::new(EndpointConfig::new("10.0.0.2:4791".parse().unwrap()));
        let src = a.register_mr(vec![fill; 16 * 1024], 0, Access::NONE);
        let ring = b
            .register_ring_mr(
                vec![0u8; RING],
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                start,
                window,
            )
            .unwrap();
        let qa = a.create_qp(QpInit::new(QpType::Uc)).unwrap();
        let qb = b.create_qp(init).unwrap();
        connect(&mut a, qa, &mut b, qb, mtu, 1, 1, 0).unwrap();
        RingPair {
            pair: Pair::new(a, b, LinkConfig::default(), seed, Instant::now()),
            qa,
            qb,
            src,
            ring,
        }
    }

    /// Post a UC WRITE of `len` bytes from A's source to `va` with `rkey`, and run the link
    /// for 20 ms of simulated time.
    pub(crate) fn write(&mut self, va: u64, rkey: u32, len: u32) {
        self.write_marked(va, rkey, len, 0);
    }

    /// [`RingPair::write`] with `marks` in the reserved BTH bits of its last packet.
    pub(crate) fn write_marked(&mut self, va: u64, rkey: u32, len: u32, marks: u8) {
        let wr = SendWr {
            wr_id: va,
            op: SendOp::Write { va, rkey },
            sg_list: Sge {
                lkey: self.src.lkey,
                va: 0,
                len,
            }
            .into(),
            signaled: false,
            solicited: false,
            marks,
        };
        self.pair.a.post_send(self.qa, wr).unwrap();
        self.pair.run_until(Duration::from_millis(20), |_| false);
    }

    /// B's ring bytes.
    pub(crate) fn ring_bytes(&self) -> &[u8] {
        self.pair.b.mr(self.ring.lkey).unwrap().bytes()
    }
}
