//! A ping-pong's every send is an answer and the acknowledgement of what it answers. The
//! driver sends them as two datagrams, the answer first — never as one segmented run
//! (the 20-byte ACK is short enough to end one), which the peer would receive whole and
//! handle completely before it could answer in turn. Checked over loopback on a receiving
//! socket with GRO, where a run would arrive as one super-datagram.
#![allow(clippy::unwrap_used)]

use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use rocelink_runtime::Driver;
use rocelink_transport::sim::connect;
use rocelink_transport::*;
use rocelink_wire::ib::Opcode;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const KEY_A: u32 = 0x0A00;
const KEY_B: u32 = 0x0B00;

fn endpoint(at: SocketAddr, key: u32) -> Endpoint {
    let mut ep = Endpoint::new(EndpointConfig::new(at));
    ep.register_mr_keyed(
        vec![0u8; 4096].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        key,
    )
    .unwrap();
    ep
}

fn write(rkey: u32, lkey: u32) -> SendWr {
    SendWr {
        wr_id: 7,
        op: SendOp::Write { va: 0, rkey },
        sg_list: Sge {
            lkey,
            va: 0,
            len: 2,
        }
        .into(),
        signaled: true,
        solicited: false,
        marks: 0,
    }
}

#[test]
fn an_answer_and_its_acknowledgement_leave_as_two_datagrams_answer_first() {
    let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let gro = UdpConfig {
        gro: true,
        ..UdpConfig::default()
    };
    let asock = UdpSocket::bind(SocketAddr::new(lo, 0), &gro).unwrap();
    let bsock = UdpSocket::bind(SocketAddr::new(lo, 0), &gro).unwrap();
    assert!(
        asock.gro(),
        "this kernel has no UDP GRO: the run could not show"
    );
    let (aa, ba) = (asock.local_addr(), bsock.local_addr());
    let (mut a, mut b) = (endpoint(aa, KEY_A), endpoint(ba, KEY_B));
    let qa = a.create_qp(QpInit::new(QpType::Rc)).unwrap();
    let qb = b.create_qp(QpInit::new(QpType::Rc)).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 100, 200, 0).unwrap();

    // A's WRITE (it asks for an acknowledgement) reaches B's driver
    a.post_send(qa, write(KEY_B, KEY_A)).unwrap();
    let mut buf = Vec::new();
    let t = a.poll_transmit(Instant::now(), &mut buf).unwrap();
    assert_eq!(asock.send_batch(&[(ba, &buf[..t.len])]).unwrap(), 1);
    let mut drv = Driver::new(bsock);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut answered = false;
    let got = drv
        .run(&mut b, deadline, |ep| {
            if !answered && ep.stats().rx_datagrams > 0 {
                // B answers at once, as a latency test does
                ep.post_send(qb, write(KEY_A, KEY_B)).unwrap();
                answered = true;
            }
            answered
        })
        .unwrap();
    assert!(got, "B never received A's WRITE");
    assert!(drv.transmit(&mut b, Instant::now()).unwrap());

    // what reaches A: the answer alone, then the acknowledgement alone
    let mut batch = RecvBatch::new(8, 65_536);
    let mut seen = Vec::new();
    while seen.len() < 2 && Instant::now() < deadline {
        asock
            .recv_batch_wait(&mut batch, Duration::from_millis(50))
            .unwrap();
        for i in 0..batch.len() {
            let (m, bytes) = batch.get(i);
            assert_eq!(
                m.len, m.segment,
                "one super-datagram: {} in segments of {}",
                m.len, m.segment
            );
            seen.push(Opcode::from(bytes[0]));
        }
    }
    assert_eq!(seen, [Opcode::RC_RDMA_WRITE_ONLY, Opcode::RC_ACKNOWLEDGE]);
}
