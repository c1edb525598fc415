//! A real headless browser for tests: Chromium (Debian's `chromium-headless-shell`) driven
//! through the DevTools protocol over a pipe (`--remote-debugging-pipe`: JSON messages, each
//! ended by a NUL byte, on the browser's descriptors 3 and 4). A pipe needs no port, so the
//! browser can run inside a test's network namespace.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The browser's binary.
pub const CHROMIUM: &str = "chromium-headless-shell";

/// A headless Chromium with one page, killed on drop.
#[derive(Debug)]
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next: u64,
    session: String,
    /// Console errors, uncaught exceptions and failed loads the page reported.
    pub errors: Vec<String>,
    profile: std::path::PathBuf,
}

impl Browser {
    /// Start Chromium (inside network namespace `netns` if given) with an empty page.
    pub fn start(netns: Option<&str>) -> Browser {
        let profile = std::env::temp_dir().join(format!(
            "rocelink-chromium-{}-{}",
            std::process::id(),
            crate::ports::free_udp_port(&["127.0.0.1"])
        ));
        // the shell hands the pipe's ends to the browser as descriptors 3 and 4
        let script = format!(
            "exec {CHROMIUM} --headless --no-sandbox --disable-gpu --remote-debugging-pipe \
             --no-first-run --user-data-dir={} --window-size=1280,1600 about:blank \
             3<&0 4>&1 0</dev/null 1>/dev/null 2>/dev/null",
            profile.display()
        );
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "sh", "-c", &script]);
                c
            }
            None => {
                let mut c = Command::new("sh");
                c.args(["-c", &script]);
                c
            }
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let to = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let (tx, from) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                buf.pop_if(|b| *b == 0);
                if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                    && tx.send(v).is_err()
                {
                    return;
                }
                buf.clear();
            }
        });
        let mut b = Browser {
            child,
            to,
            from,
            next: 0,
            session: String::new(),
            errors: Vec::new(),
            profile,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let id = target["targetId"].as_str().expect("a page").to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        for m in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(m, json!({}));
        }
        b
    }

    /// Send `method` and wait for its answer (events meanwhile are noted).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = self.session.clone().into();
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"].as_u64() == Some(id) => {
                    assert!(v.get("error").is_none(), "{method}: {}", v["error"]);
                    return v["result"].clone();
                }
                Ok(v) => self.note(&v),
                Err(RecvTimeoutError::Timeout) => panic!("chromium: no answer to {method}"),
                Err(RecvTimeoutError::Disconnected) => panic!("chromium exited during {method}"),
            }
        }
    }

    /// Keep what an event says went wrong on the page.
    fn note(&mut self, v: &Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.exceptionThrown") => self.errors.push(format!(
                "exception: {}",
                p["exceptionDetails"]["exception"]["description"]
            )),
            Some("Runtime.consoleAPICalled") if p["type"] == "error" => {
                self.errors.push(format!("console.error: {}", p["args"]))
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                self.errors.push(format!("log: {}", p["entry"]["text"]))
            }
            _ => {}
        }
    }

    /// Open `url` in the page and wait until it has loaded: up to 10 s, navigating again
    /// up to twice (a machine under load may see a first navigation fail to an error page).
    pub fn goto(&mut self, url: &str) {
        let js = format!("location.href === {url:?} && document.readyState === 'complete'");
        for _ in 0..3 {
            self.call("Page.navigate", json!({"url": url}));
            if self.wait_for(&js, Duration::from_secs(10), |v| v == true) == true {
                return;
            }
        }
        let at = self.eval("[location.href, document.readyState]");
        panic!("{url} did not load (the page is at {at})");
    }

    /// The value of the JavaScript expression `js` in the page (promises awaited).
    pub fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{js}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Evaluate `js` until `ok` holds of its value (every 100 ms, up to `limit`); the last
    /// value.
    pub fn wait_for(&mut self, js: &str, limit: Duration, ok: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let v = self.eval(js);
            if ok(&v) || t.elapsed() > limit {
                return v;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The text of the element with id `id`.
    pub fn text(&mut self, id: &str) -> String {
        let v = self.eval(&format!("document.getElementById({id:?}).textContent"));
        v.as_str().unwrap_or_default().to_string()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
