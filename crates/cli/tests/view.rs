//! The live view (`--view`) and the recording view (`rocelink view DIR`), as a user's
//! browser sees them: a real headless Chromium loads the page while a camera streams over a
//! lossy veth pair; the picture must be the emulator's colour bars, the frame number must
//! advance, the loss must show as damaged frames, and the page must end with the numbers
//! the command prints. Without a browser: the events end with the command's own summary,
//! and clients that never read cost the stream nothing.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_testkit::browser::Browser;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rocelink(prefix: &[&str], args: &[&str]) -> Command {
    let mut c = match prefix.split_first() {
        None => Command::new(env!("CARGO_BIN_EXE_rocelink")),
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(env!("CARGO_BIN_EXE_rocelink"));
            c
        }
    };
    c.args(args);
    c
}

/// Start `c` with stderr piped; return it once stderr names the view's address, with the
/// stderr lines read so far.
// the child is handed to the caller, who waits for it
#[allow(clippy::zombie_processes)]
fn with_view(mut c: Command) -> (Child, SocketAddr, BufReader<std::process::ChildStderr>) {
    let mut child = c
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            let status = child.wait();
            panic!("no view address; the command ended: {status:?}");
        }
        if let Some(at) = line.find("http://") {
            let url = line[at + 7..].split_whitespace().next().unwrap();
            return (child, url.trim_end_matches('/').parse().unwrap(), err);
        }
    }
}

/// One GET; the status and the body.
fn get(addr: SocketAddr, path: &str) -> (u32, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut b = Vec::new();
    s.read_to_end(&mut b).unwrap();
    let head_end = b.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&b[9..12]).unwrap().parse().unwrap();
    (status, b[head_end + 4..].to_vec())
}

/// Follow `/events` (reconnecting as the browser does) until the `end` event; its data.
fn end_event(addr: SocketAddr, limit: Duration) -> Value {
    let t = Instant::now();
    while t.elapsed() < limit {
        let Ok(mut s) = TcpStream::connect(addr) else {
            break;
        };
        write!(s, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let (mut line, mut event) = (String::new(), String::new());
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(e) = line.strip_prefix("event: ") {
                event = e.trim().to_string();
            } else if let (Some(d), "end") = (line.strip_prefix("data: "), event.as_str()) {
                return serde_json::from_str(d.trim()).unwrap();
            }
            line.clear();
        }
    }
    panic!("no end event within {limit:?}");
}

/// The eight bars of the emulator's pattern (white, yellow, cyan, green, magenta, red,
/// blue, black), each sampled at two columns near its middle (a moving white marker may
/// cover one): `px(x, y)` is the picture's RGB.
fn assert_colour_bars(w: usize, h: usize, px: &dyn Fn(usize, usize) -> [u8; 3]) {
    const BARS: [[bool; 3]; 8] = [
        [true, true, true],
        [true, true, false],
        [false, true, true],
        [false, true, false],
        [true, false, true],
        [true, false, false],
        [false, false, true],
        [false, false, false],
    ];
    let y = h * 9 / 10;
    for (k, bar) in BARS.iter().enumerate() {
        let mid = (2 * k + 1) * w / 16;
        let ok = [mid - 6, mid + 6].iter().any(|&x| {
            let p = px(x, y);
            (0..3).all(|c| if bar[c] { p[c] > 150 } else { p[c] < 40 })
        });
        assert!(
            ok,
            "bar {k} at ({mid}, {y}): {:?} / {:?}",
            px(mid - 6, y),
            px(mid + 6, y)
        );
    }
}

/// "N frames: G good, D damaged" in the command's summary: (G, D).
fn good_damaged(text: &str) -> (u64, u64) {
    let line = text
        .lines()
        .find(|l| l.contains(" good, ") && l.contains(" damaged"))
        .unwrap_or_else(|| panic!("no summary in {text}"));
    let num = |w: &str| -> u64 {
        let before = &line[..line.find(w).unwrap()];
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (num(" good"), num(" damaged"))
}

#[test]
fn the_view_ends_with_the_commands_summary_and_clients_that_never_read_cost_nothing() {
    let (mut demo, addr, mut err) = with_view(rocelink(
        &[],
        &[
            "demo",
            "--frames",
            "240",
            "--fps",
            "60",
            "--device-ip",
            "127.0.75.2",
            "--view",
            "127.0.0.1:0",
        ],
    ));
    // clients that never read: event streams and pictures asked for, a request never
    // finished; the stream must not notice
    let mut stalled = Vec::new();
    for i in 0..24 {
        let mut s = TcpStream::connect(addr).unwrap();
        let req = match i % 3 {
            0 => "GET /events HTTP/1.1\r\nHost: x\r\n\r\n",
            1 => "GET /frame.png HTTP/1.1\r\nHost: x\r\n\r\n",
            _ => "GET /status.js",
        };
        s.write_all(req.as_bytes()).unwrap();
        stalled.push(s);
    }
    let (code, status) = get(addr, "/status.json");
    assert_eq!(code, 200, "a reading client is still served");
    let status: Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(
        (status["mode"].as_str(), status["kind"].as_str()),
        (Some("live"), Some("camera"))
    );
    // a picture, once someone looks: the colour bars
    let t = Instant::now();
    let png = loop {
        let (code, body) = get(addr, "/frame.png");
        if code == 200 || t.elapsed() > Duration::from_secs(10) {
            break body;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut dec = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    let info = dec.next_frame(&mut buf).unwrap();
    assert_eq!(
        (info.width, info.height),
        (960, 540),
        "1080p cells, one pixel each"
    );
    let w = info.width as usize;
    assert_colour_bars(w, 540, &|x, y| {
        let i = (y * w + x) * 3;
        [buf[i], buf[i + 1], buf[i + 2]]
    });
    let end = end_event(addr, Duration::from_secs(60));
    let st = demo.wait().unwrap();
    let mut out = String::new();
    demo.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(
        st.success(),
        "demo failed with clients stalled: {out}\n{rest}"
    );
    let (good, damaged) = good_damaged(&out);
    assert_eq!((good, damaged), (240, 0), "{out}");
    assert_eq!(end["ended"], true);
    assert_eq!(end["frames_good"], good, "{end}");
    assert_eq!(end["frames_damaged"], damaged);
    // the session's summary: its one virtual port's counters
    assert_eq!(end["summary"]["ports"][0]["stats"]["good"], good, "{end}");
    assert_eq!(
        end["summary"]["ports"][0]["outcome"]["frames"], good,
        "{end}"
    );
    assert_eq!(end["last_frame_number"].as_u64().map(|n| n > 0), Some(true));
    drop(stalled);
}

#[test]
fn a_browser_shows_the_bars_the_frames_and_the_losses_then_the_recording() {
    if !common::root_or_ci()
        || !common::need(
            rocelink_testkit::browser::CHROMIUM,
            "chromium-headless-shell",
        )
    {
        return;
    }
    let dir = common::tmpdir("view_browser");
    let rec = dir.join("rec");
    let ns = common::VethPair::new(
        "view",
        &["192.168.0.2/24", "192.168.0.50/24"],
        &["192.168.0.101/24"],
    );
    let (dev, host, vd) = (ns.a.clone(), ns.b.clone(), ns.va.clone());
    let (d, h) = (common::VethPair::exec(&dev), common::VethPair::exec(&host));
    // 1 in 5000 packets lost on the wire: about a third of 1080p frames (1855 packets) damaged
    ns.nft(
        &dev,
        &format!(
            "table netdev rocelink_loss {{\n chain eg {{ type filter hook egress device \"{vd}\" priority 0; udp sport 12288 numgen random mod 5000 < 1 drop; }}\n}}\n"
        ),
    );
    let _emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &[
            "--ip",
            "192.168.0.50",
            "--bootp-target",
            "none",
            "--sensor",
            "imx274-1080p-raw10",
            "--fps",
            "30",
            "--seconds",
            "120",
            "--no-gso",
        ],
    );
    // the browser first: on a loaded machine it takes seconds to start, and the stream
    // must still run when the page opens
    let mut b = Browser::start(Some(&host));
    let (mut rx, addr, mut err) = with_view(rocelink(
        &h,
        &[
            "receive",
            "--device",
            "192.168.0.50",
            "--sensor",
            "imx274-1080p-raw10",
            "--frames",
            "480",
            "--timeout",
            "30",
            "--record",
            rec.to_str().unwrap(),
            // the first 40 frames (100 MiB): a CI machine's disk may be nearly full
            "--max-frames",
            "40",
            "--view",
            "127.0.0.1:0",
        ],
    ));
    let url = format!("http://{addr}/");
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.goto(&url)));
    if loaded.is_err() {
        // say why: whether `receive` (and its server) still runs, and what it said
        let state = rx.try_wait();
        let _ = rx.kill();
        let _ = rx.wait();
        let mut said = String::new();
        let _ = err.read_to_string(&mut said);
        panic!("the live page did not load; receive: {state:?}; its stderr:\n{said}");
    }
    // the picture
    let sample = "(() => { const i = document.getElementById('picture'); if (!i.complete || !i.naturalWidth) return null; \
        const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight; \
        const g = c.getContext('2d'); g.drawImage(i, 0, 0); \
        return {w: c.width, h: c.height, px: Array.from(g.getImageData(0, 0, c.width, c.height).data)}; })()";
    // generous: on a loaded 2-CPU machine the encoder and the browser share the CPUs with
    // the stream (the wait ends at the first picture)
    let pic = b.wait_for(sample, Duration::from_secs(45), |v| !v.is_null());
    assert!(
        !pic.is_null(),
        "no picture on the page; errors: {:?}",
        b.errors
    );
    let (w, hgt) = (
        pic["w"].as_u64().unwrap() as usize,
        pic["h"].as_u64().unwrap() as usize,
    );
    let px: Vec<u8> = pic["px"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect();
    assert_colour_bars(w, hgt, &|x, y| {
        let i = (y * w + x) * 4;
        [px[i], px[i + 1], px[i + 2]]
    });
    // the frame number advances; the loss shows
    let number = |b: &mut Browser| b.text("frame-number").parse::<u64>().unwrap_or(0);
    let first = number(&mut b);
    let later = b.wait_for(
        "Number(document.getElementById('frame-number').textContent) || 0",
        Duration::from_secs(10),
        |v| v.as_u64() > Some(first),
    );
    assert!(
        later.as_u64() > Some(first),
        "frame number stuck at {first}"
    );
    let damaged = b.wait_for(
        "Number(document.getElementById('damaged').textContent)",
        Duration::from_secs(30),
        |v| v.as_u64() > Some(0),
    );
    assert!(
        damaged.as_u64() > Some(0),
        "the loss never showed as damaged frames"
    );
    // the end: the page says what the command says
    let ended = b.wait_for(
        "document.getElementById('state').textContent",
        Duration::from_secs(60),
        |v| v == "ended",
    );
    assert_eq!(ended, "ended");
    let st = rx.wait().unwrap();
    let mut text = String::new();
    err.read_to_string(&mut text).unwrap();
    assert!(st.success(), "receive: {st:?}; its stderr:\n{text}");
    // the frames `receive` called damaged, from its per-frame lines
    let mut lines = String::new();
    rx.stdout
        .take()
        .unwrap()
        .read_to_string(&mut lines)
        .unwrap();
    let reported: std::collections::BTreeSet<u64> = lines
        .lines()
        .filter(|l| l.ends_with("DAMAGED"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    let (good, bad) = good_damaged(&text);
    assert_eq!(reported.len() as u64, bad, "{text}");
    assert!(bad > 0 && good > 0, "{text}");
    assert_eq!(b.text("good"), good.to_string(), "{text}");
    assert_eq!(b.text("damaged"), bad.to_string(), "{text}");
    assert!(
        b.errors.is_empty(),
        "the live page reported errors: {:?}",
        b.errors
    );

    // the recording: every frame listed, the damaged ones marked, each a picture
    let (mut view, vaddr, _e) = with_view(rocelink(
        &h,
        &["view", rec.to_str().unwrap(), "--addr", "127.0.0.1:0"],
    ));
    b.goto(&format!("http://{vaddr}/"));
    let listed = b.wait_for(
        "document.getElementById('damaged-list').textContent",
        Duration::from_secs(10),
        |v| v != "none",
    );
    let marked: Vec<u64> = listed
        .as_str()
        .unwrap()
        .split(", ")
        .map(|n| n.parse().unwrap())
        .collect();
    // what was recorded (a loaded disk may make the recorder drop a frame, counted)
    let out = rocelink(&h, &["inspect", rec.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let inspect: Value = serde_json::from_slice(&out.stdout).unwrap();
    let recorded = inspect["frames"].as_u64().unwrap();
    assert_eq!(recorded, 40, "{inspect}");
    assert_eq!(
        recorded + inspect["recorder_drops"].as_u64().unwrap(),
        480,
        "{inspect}"
    );
    assert_eq!(
        marked.len() as u64,
        inspect["damaged"].as_u64().unwrap(),
        "{listed}"
    );
    assert!(
        marked.iter().all(|n| reported.contains(n)),
        "marked {listed}, reported {reported:?}"
    );
    // exactly the damaged frames among those recorded are marked
    let numbers =
        b.eval("fetch('index.json').then(r => r.json()).then(ix => ix.frames.map(f => f[0]))");
    let numbers: std::collections::BTreeSet<u64> = numbers
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(numbers.len() as u64, recorded);
    let expected: Vec<u64> = reported.intersection(&numbers).copied().collect();
    assert_eq!(marked, expected, "damaged frames marked: {listed}");
    assert_eq!(
        b.eval("Number(document.getElementById('slider').max) + 1"),
        recorded
    );
    let pictures = b.eval(&format!("Promise.all(Array.from({{length: {recorded}}}, (_, i) => fetch(`frame/${{i}}.png`).then(r => r.ok && r.headers.get('content-type') === 'image/png'))).then(a => a.filter(Boolean).length)"));
    assert_eq!(pictures, recorded, "every frame is a picture");
    // step to a damaged frame: the page says so
    let info = b.eval("fetch('index.json').then(r => r.json()).then(ix => { const s = document.getElementById('slider'); \
        s.value = ix.frames.findIndex(f => f[1] === 0); s.dispatchEvent(new Event('input')); \
        return document.getElementById('frame-info').textContent; })");
    let info = info.as_str().unwrap();
    assert!(
        info.contains(&format!("number {}, damaged", marked[0])),
        "{info}"
    );
    // a frame as numpy: the sensor's pixels
    let npy = b.eval("fetch('frame/0.npy').then(r => r.arrayBuffer()).then(a => new TextDecoder().decode(new Uint8Array(a).slice(0, 128)))");
    let npy = npy.as_str().unwrap();
    assert!(
        npy.starts_with("\u{93}NUMPY") || npy.contains("NUMPY"),
        "{npy}"
    );
    assert!(npy.contains("'shape': (1080, 1920)"), "{npy}");
    assert!(
        b.errors.is_empty(),
        "the recording page reported errors: {:?}",
        b.errors
    );
    let _ = view.kill();
    let _ = view.wait();
}

/// Decode a PNG: (width, height, channels, samples).
fn decode_png(b: &[u8]) -> (usize, usize, usize, Vec<u8>) {
    let mut dec = png::Decoder::new(std::io::Cursor::new(b))
        .read_info()
        .unwrap();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    let info = dec.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let ch = info.color_type.samples();
    (info.width as usize, info.height as usize, ch, buf)
}

/// The picture the view makes while the page asks (polled up to 10 s).
fn picture(addr: SocketAddr) -> (usize, usize, usize, Vec<u8>) {
    let t = Instant::now();
    loop {
        let (code, body) = get(addr, "/frame.png");
        if code == 200 {
            return decode_png(&body);
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no picture");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn shots_are_shown_as_grey_echoes_samples_by_channels() {
    let mut probe = rocelink(&[], &["probe", "--bind", "127.0.68.1", "--seconds", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (mut shots, addr, _err) = with_view(rocelink(
        &[],
        &[
            "shots",
            "--bind",
            "127.0.68.2",
            "--probe",
            "127.0.68.1",
            "--samples",
            "500",
            "--shots",
            "5000",
            "--trigger-hz",
            "1000",
            "--verify",
            "--json",
            "--view",
            "127.0.0.1:0",
        ],
    ));
    // one JSON line per shot: read as they come
    let mut stdout = shots.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        out
    });
    let (w, h, ch, px) = picture(addr);
    assert_eq!(
        (w, h, ch),
        (96, 500, 1),
        "channels across, samples down, grey"
    );
    let (lo, hi) = (px.iter().min().unwrap(), px.iter().max().unwrap());
    assert!(*hi > 200 && *lo < 100, "an echo over noise: {lo}..{hi}");
    let end = end_event(addr, Duration::from_secs(30));
    assert!(shots.wait().unwrap().success());
    let out = reader.join().unwrap();
    let mut sum: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(end["frames_good"], sum["sink"]["complete"], "{end}");
    assert_eq!(end["kind"], "shots");
    // one summary: the CLI's --json is the view's end summary, key for key and value for
    // value, and the process's counters table besides
    assert!(sum.as_object_mut().unwrap().remove("counters").is_some());
    assert_eq!(sum, end["summary"]);
    let _ = probe.kill();
    let _ = probe.wait();
}

/// The HSB host has one summary: `receive --json` ends with the view's end summary, key for
/// key and value for value (and the process's counters table besides).
#[test]
fn a_receivers_json_summary_is_its_views_end() {
    let mut emu = rocelink(
        &[],
        &[
            "emulate",
            "--ip",
            "127.0.86.2",
            "--bootp-target",
            "none",
            "--fps",
            "60",
            "--no-control",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // the device's ECB socket is bound once it answers: wait for that, not a fixed time
    let t0 = Instant::now();
    while common::rocelink(&["read", "--device", "127.0.86.2", "0x80"]).0 != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the emulator did not come up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (mut rx, addr, _err) = with_view(rocelink(
        &[],
        &[
            "receive",
            "--device",
            "127.0.86.2",
            "--bind",
            "127.0.86.1",
            "--frame-size",
            "100000",
            "--frames",
            "20",
            "--json",
            "--view",
            "127.0.0.1:0",
        ],
    ));
    let end = end_event(addr, Duration::from_secs(30));
    let mut out = String::new();
    rx.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let st = rx.wait().unwrap();
    let _ = emu.kill();
    let _ = emu.wait();
    assert!(st.success(), "{out}");
    let (frames, mut sum) = common::frames_and_summary(&out);
    assert_eq!(frames.len(), 20, "{out}");
    assert_eq!(sum["ports"][0]["stats"]["good"], 20, "{sum}");
    assert_eq!(sum["counters"]["command"], "receive", "{sum}");
    sum.as_object_mut().unwrap().remove("counters");
    assert_eq!(sum, end["summary"]);
}

#[test]
fn ims_images_are_shown_as_their_pixels() {
    // an address of its own: RoCE's port there is free
    let (mut unit, addr, mut err) = with_view(rocelink(
        &[],
        &[
            "ims",
            "serve",
            "--bind",
            "127.0.74.1",
            "--ring",
            "16M",
            "--frames",
            "20000",
            "--view",
            "127.0.0.1:0",
            "--json",
        ],
    ));
    let mut worker = rocelink(
        &[],
        &["ims", "send", "127.0.74.1", "--image6", "--frames", "20000"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    if TcpStream::connect(addr).is_err() {
        let st = unit.wait();
        let mut text = String::new();
        err.read_to_string(&mut text).unwrap();
        panic!("the unit's view is gone ({st:?}): {text}");
    }
    let (w, h, ch, px) = picture(addr);
    assert_eq!((w, h, ch), (256, 256, 1));
    assert!(
        px.iter().all(|p| p % 4 == 0),
        "6-bit pixels, shifted to 8 bits"
    );
    assert!(
        px.iter().any(|&p| p >= 0xF0) && px.contains(&0),
        "the image's range"
    );
    assert!(worker.wait().unwrap().success());
    let end = end_event(addr, Duration::from_secs(30));
    let mut out = String::new();
    unit.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(unit.wait().unwrap().success());
    assert_eq!(end["frames_good"], 20000, "{end}");
    assert_eq!(end["summary"]["frames_consumed"], 20000);
    // one summary: the CLI's --json is the view's end summary, key for key and value for
    // value, and the process's counters table besides
    let mut cli: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(cli["counters"]["command"], "ims serve", "{cli}");
    cli.as_object_mut().unwrap().remove("counters");
    assert_eq!(cli, end["summary"]);
}
