//! The UDP baselines every RoCE figure is held against, measured in the same run: the UDP
//! ceiling (one thread sending datagrams of a WRITE MIDDLE packet's size — BTH + 4096 +
//! ICRC — to a thread receiving them with `recvmmsg`, once plain with `sendmmsg` of 64 and
//! once with the socket features rocelink's driver uses: GSO runs of 15 and `UDP_GRO`;
//! goodput counts the 4096-byte payloads that arrived) and a bare UDP ping-pong on blocking
//! sockets. Threads are pinned to CPUs 0 and 1 unless told otherwise.

use crate::BenchError;
use rocelink_io::cpu::{pin_current_thread, thread_cpu_time};
use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// BTH + ICRC around each MTU-sized payload of a WRITE MIDDLE packet.
const OVERHEAD: usize = 12 + 4;
const MTU: usize = 4096;

/// (BTH + 4096 + ICRC)-byte datagrams for `dur`, sent with `sendmmsg` (64 per call) or,
/// with `offload`, as GSO super-datagrams of 15 to a `UDP_GRO` receiver (what rocelink's
/// driver does), against a `recvmmsg` receiver: payload MB/s that arrived, and the
/// receiver's CPU.
pub fn udp_ceiling(pin: bool, dur: Duration, offload: bool) -> crate::Result<(f64, f64)> {
    let rx = UdpSocket::bind(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        &UdpConfig {
            recv_buffer: 16 << 20,
            gro: offload,
            ..UdpConfig::default()
        },
    )?;
    let dst = rx.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    let (st, g) = (stop.clone(), got.clone());
    let recv = std::thread::spawn(move || -> crate::Result<Duration> {
        if pin {
            let _ = pin_current_thread(1);
        }
        let cpu0 = thread_cpu_time();
        let mut batch = RecvBatch::new(64, if offload { 65_536 } else { 9216 });
        let mut n = 0u64;
        while !st.load(Ordering::Relaxed) {
            if rx.recv_batch(&mut batch)? == 0 {
                rx.wait_readable(Some(Duration::from_millis(5)))?;
                continue;
            }
            n += batch.segments().count() as u64;
            g.store(n, Ordering::Relaxed);
        }
        Ok(thread_cpu_time() - cpu0)
    });
    if pin {
        let _ = pin_current_thread(0);
    }
    let tx = UdpSocket::bind(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        &UdpConfig {
            send_buffer: 16 << 20,
            ..UdpConfig::default()
        },
    )?;
    let pkt = vec![0x5Au8; OVERHEAD + MTU];
    let batch: Vec<(SocketAddr, &[u8])> = (0..64).map(|_| (dst, &pkt[..])).collect();
    let parts: Vec<std::io::IoSlice<'_>> = (0..15).map(|_| std::io::IoSlice::new(&pkt)).collect();
    let start = Instant::now();
    let got0 = got.load(Ordering::Relaxed);
    while start.elapsed() < dur {
        let n = if offload {
            tx.send_gso(dst, &parts, pkt.len() as u16)?
        } else {
            tx.send_batch(&batch)?
        };
        if n == 0 {
            tx.wait_writable(Some(Duration::from_millis(1)))?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(50));
    let n = got.load(Ordering::Relaxed) - got0;
    stop.store(true, Ordering::Relaxed);
    let cpu = recv
        .join()
        .map_err(|_| BenchError::Panicked("UDP receiver"))??;
    Ok((
        (n as usize * MTU) as f64 / secs / 1e6,
        cpu.as_secs_f64() / secs * 100.0,
    ))
}

/// Receive one datagram on a non-blocking socket, polling without sleeping (as perftest
/// polls its completion queue), for at most a second.
fn recv_polling(s: &std::net::UdpSocket, buf: &mut [u8]) -> io::Result<usize> {
    let give_up = Instant::now() + Duration::from_secs(1);
    loop {
        match s.recv(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= give_up {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "UDP ping-pong: no answer within 1 s",
                    ));
                }
                std::hint::spin_loop();
            }
            r => return r,
        }
    }
}

/// Bare UDP ping-pong of `len`-byte datagrams, both ends polling their sockets without
/// sleeping (as perftest's latency tests and rocelink's `perf` poll): one-way µs samples.
pub fn udp_pingpong(len: usize, iters: usize, pin: bool) -> crate::Result<Vec<f64>> {
    let len = len.min(65_000);
    let a = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let b = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let (aa, ba) = (a.local_addr()?, b.local_addr()?);
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    let server = std::thread::spawn(move || -> crate::Result<()> {
        if pin {
            let _ = pin_current_thread(1);
        }
        let mut buf = vec![0u8; 65_536];
        for _ in 0..iters {
            let n = recv_polling(&b, &mut buf)?;
            b.send_to(&buf[..n], aa)?;
        }
        Ok(())
    });
    if pin {
        let _ = pin_current_thread(0);
    }
    let msg = vec![0xA5u8; len];
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        a.send_to(&msg, ba)?;
        let n = recv_polling(&a, &mut buf)?;
        if n != len {
            return Err(BenchError::ShortAnswer { sent: len, got: n });
        }
        out.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    server
        .join()
        .map_err(|_| BenchError::Panicked("UDP ping-pong server"))??;
    Ok(out)
}
