//! What the host takes: shot messages only from the probe it triggered (address and
//! source QP), and only within a bounded window ahead of the next shot — a forged message
//! from elsewhere is never recorded as a shot, and one numbered far ahead cannot make the
//! host give up the real shots.
#![allow(clippy::unwrap_used)]

use rocelink_transport::sim::{LinkConfig, Pair};
use rocelink_transport::{Datagram, Endpoint, EndpointConfig};
use rocelink_ultrasound::shot::Echoes;
use rocelink_ultrasound::{Geometry, Host, Probe, ProbeConfig, ShotHostConfig, ShotReport};
use rocelink_wire::ib::{BthRepr, DethRepr, IbRepr, Opcode};
use rocelink_wire::ultrasound::{Command, TriggerRepr, imm};
use std::net::SocketAddr;
use std::time::Instant;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// One UD SEND ONLY WITH IMMEDIATE as the probe sends them, from `src`.
#[allow(clippy::too_many_arguments)]
fn message(
    host: &mut Endpoint,
    now: Instant,
    src: SocketAddr,
    src_qp: u32,
    qpn: u32,
    qkey: u32,
    shot: u64,
    index: u32,
    bytes: &[u8],
) {
    let ib = IbRepr {
        bth: BthRepr {
            opcode: Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
            dest_qp: qpn,
            ..Default::default()
        },
        deth: Some(DethRepr { qkey, src_qp }),
        immdt: Some(imm::encode(shot, index)),
        payload_len: bytes.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, bytes);
    let dst = host.config().local;
    rocelink_wire::icrc::fill_socket(src, dst, &mut b).unwrap();
    host.handle_datagram(
        now,
        Datagram {
            src,
            dst,
            ip_header: None,
            payload: &b,
        },
    );
}

#[test]
fn forged_and_far_ahead_messages_are_stray_and_every_real_shot_arrives() {
    let g = Geometry::new(500, 96);
    let (pa, ha) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
    let mut pair = Pair::new(
        Endpoint::new(EndpointConfig::new(pa)),
        Endpoint::new(EndpointConfig::new(ha)),
        LinkConfig::default(),
        3,
        Instant::now(),
    );
    let mut probe = Probe::new(&mut pair.a, ProbeConfig::new(g)).unwrap();
    let hcfg = ShotHostConfig::new(g);
    let mut host = Host::new(&mut pair.b, hcfg).unwrap();
    host.accept_from(pa.ip(), Some(probe.qpn()));
    let shots = 40;
    let start = TriggerRepr {
        command: Command::Start {
            millihertz: 1_000_000,
            count: shots,
        },
        number: 0,
        host_ns: 0,
        qpn: host.qpn(),
        qkey: hcfg.qkey,
        port: 4791,
        samples: 0,
        channels: 0,
        cookie: 0,
    };
    probe.handle_trigger(pair.now, &start, ha.ip());
    let echoes = Echoes::new(1);
    let mut good = Vec::new();
    let mut reports: Vec<ShotReport> = Vec::new();
    let fake = vec![0xAB; g.message_range(0).len()];
    let mut forged = false;
    for _ in 0..1_000_000 {
        let now = pair.now;
        probe.poll(&mut pair.a, now).unwrap();
        if !forged && probe.stats().shots >= 3 {
            forged = true;
            let (qpn, qkey) = (host.qpn(), hcfg.qkey);
            // from the probe's address but another QP
            message(
                &mut pair.b,
                now,
                pa,
                probe.qpn() ^ 1,
                qpn,
                qkey,
                6,
                0,
                &fake,
            );
            // from the probe itself, three whole shots numbered 30 000 shots ahead, in a
            // row: while the probe's own messages keep coming they move nothing
            for (shot, i) in (30_000..30_003).flat_map(|s| (0..g.messages()).map(move |i| (s, i))) {
                let len = g.message_range(i).len();
                message(
                    &mut pair.b,
                    now,
                    pa,
                    probe.qpn(),
                    qpn,
                    qkey,
                    shot,
                    i,
                    &fake[..len],
                );
            }
            // 51 whole forged shots from another address, numbered where real ones come
            let intruder = addr("10.0.0.99:4791");
            for shot in 5..56 {
                for i in 0..g.messages() {
                    let len = g.message_range(i).len();
                    message(
                        &mut pair.b,
                        now,
                        intruder,
                        probe.qpn(),
                        qpn,
                        qkey,
                        shot,
                        i,
                        &fake[..len],
                    );
                }
            }
        }
        host.poll(&mut pair.b, now, &mut |r, b| {
            reports.push(*r);
            if let Some(b) = b {
                good.push(echoes.first_difference(&g, r.shot, b).is_none());
            }
        })
        .unwrap();
        if reports.len() as u64 == shots {
            break;
        }
        let wake = [probe.poll_timeout(), host.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        if !pair.step_until(wake) {
            break;
        }
    }
    assert!(forged);
    let st = host.stats();
    // what found a posted receive was refused as stray (the rest found none); the host
    // took exactly the probe's messages
    assert!(st.stray >= 2, "{st:?}");
    assert_eq!(
        st.resyncs, 0,
        "forged far-ahead numbers moved the host on: {st:?}"
    );
    assert_eq!(st.messages, shots * u64::from(g.messages()), "{st:?}");
    assert_eq!(reports.len() as u64, shots, "{st:?}");
    assert!(
        reports
            .iter()
            .enumerate()
            .all(|(i, r)| r.shot == i as u64 && r.complete),
        "{reports:?}"
    );
    assert_eq!(good.len() as u64, shots);
    assert!(
        good.iter().all(|&g| g),
        "every complete shot is the probe's bytes"
    );
}
