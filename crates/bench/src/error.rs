//! The benchmarks' one error type: what went wrong, with its source kept.

use std::io;

/// Why a benchmark could not run or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A socket, a file or a process.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A socket, a file or a process, with what was being done.
    #[error("{what}")]
    Doing {
        /// What was being done (`bind 127.0.0.2:4791`, `create DIR`).
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Ctrl-C or SIGTERM stopped it (what had been measured is not reported).
    #[error("stopped")]
    Stopped,
    /// A setting the benchmark cannot run with.
    #[error("{0}")]
    Setting(String),
    /// A thread of the benchmark ended without its result.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    /// A receiver of the stream benchmark failed.
    #[error("receiver {name}")]
    Receiver {
        /// Its name.
        name: String,
        /// Why (`None`: it ended before saying).
        #[source]
        source: Option<Box<BenchError>>,
    },
    /// The HSB receiver could not be opened.
    #[error("the HSB receiver")]
    HsbReceiver(#[from] rocelink_hsb::host::receiver::ReceiverError),
    /// An ultrasound role (probe or host) could not be made.
    #[error("the {role}")]
    Ultrasound {
        /// Which.
        role: &'static str,
        /// Why.
        #[source]
        source: rocelink_ultrasound::Error,
    },
    /// The benchmark's own UDP ping-pong got a short answer.
    #[error("UDP ping-pong: an answer of {got} bytes to {sent}")]
    ShortAnswer {
        /// Bytes sent.
        sent: usize,
        /// Bytes answered.
        got: usize,
    },
    /// `ip` (iproute2) refused a step of setting up the veth pair.
    #[error("`ip {args}`: {stderr}")]
    Ip {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// The recorder stopped before the run's end.
    #[error("recording stopped: {0}")]
    RecordingStopped(String),
    /// `dd` failed both with and without direct I/O.
    #[error("dd failed with and without oflag=direct")]
    Dd,
    /// `bench perf`.
    #[error(transparent)]
    Perf(#[from] crate::perf::BenchPerfError),
    /// `bench verbs`.
    #[error(transparent)]
    Verbs(#[from] crate::verbs::BenchVerbsError),
}

/// A benchmark's result.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// `what` failed with `source`.
    pub(crate) fn doing(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Doing { what, source }
    }
}
