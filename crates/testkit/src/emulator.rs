//! An HSB emulator that is ready when started.

use rocelink_hsb::emulator::{EmulatorConfig, EmulatorSession, EmulatorStats, Handles, Session};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// An emulator serving in a thread of this process; stopped (and joined) on drop.
#[derive(Debug)]
pub struct Running(Option<EmulatorSession>);

impl Running {
    /// Bind every socket of the device (so a host can talk to it as soon as this returns),
    /// then serve in a thread. Panics, naming the address, if it cannot bind.
    pub fn start(cfg: &EmulatorConfig) -> Running {
        let s = EmulatorSession::start(cfg, Handles::default())
            .unwrap_or_else(|e| panic!("emulator at {}: {e}", cfg.device.ip));
        Running(Some(s))
    }

    /// Stop serving; its counters.
    pub fn stop(mut self) -> EmulatorStats {
        self.0.take().unwrap().stop().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let _ = s.stop();
        }
    }
}

/// `rocelink emulate` running as a process (killed on drop), returned once it is ready.
#[derive(Debug)]
pub struct Process {
    child: Child,
    /// The lines it wrote to stderr after its banner.
    pub stderr: Receiver<String>,
    /// Its banner (the first stderr line).
    pub banner: String,
}

impl Process {
    /// Run `rocelink emulate ARGS` (`bin`: the rocelink binary), behind `prefix` (say
    /// `ip netns exec NS`) if any, with stdout discarded; return once its banner — printed
    /// after every socket is bound — arrives on stderr. Panics with whatever it printed if
    /// it exits or stays silent for 30 s.
    pub fn spawn(bin: &Path, prefix: &[&str], args: &[&str]) -> Process {
        let mut c = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = c
            .arg("emulate")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.contains("HSB device") => {
                    return Process {
                        child,
                        stderr: rx,
                        banner: l,
                    };
                }
                Ok(l) => seen.push(l),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "rocelink emulate {args:?} never said it was ready:\n{}",
                        seen.join("\n")
                    );
                }
            }
        }
    }

    /// The process, to signal or wait for.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Wait (at most 30 s) for the process to exit; return its status and what it printed
    /// on stderr after the banner.
    pub fn wait_output(&mut self) -> (std::process::ExitStatus, String) {
        let mut lines = Vec::new();
        // the reader thread ends when the process closes stderr
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_secs(30)) {
            lines.push(l);
        }
        let status = self.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
        (status, lines.join("\n"))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
