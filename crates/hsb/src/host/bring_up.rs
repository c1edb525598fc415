//! What HSB's player does on a board before the frames: PTP set up and waited for, then the
//! camera feeding a virtual port configured over I2C (its mode table, digital gain ×4,
//! started) — and the camera stopped at the end.

use super::board::{self, BoardError};
use super::control::{Control, EcbError};
use super::i2c::{I2c, I2cError};
use super::imx274::Camera;
use crate::catalogue::SensorSpec;
use crate::imx274::REG_DIGITAL_GAIN;
use crate::regs::i2c::CAM_BUS;
use crate::sensor::Imx274Mode;
use std::time::Duration;

/// What to bring up: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct BringUp {
    /// Set up PTP and wait this long at most for the board to report synchronised.
    pub ptp: Option<Duration>,
    /// Configure and start the IMX274 feeding each virtual port, in this mode.
    pub camera: Option<Imx274Mode>,
}

/// What was brought up on one virtual port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroughtUp {
    /// PTP was set up and reported synchronised.
    pub ptp: bool,
    /// The camera started, to stop at the end ([`stop_camera`]), and the I2C transactions
    /// its bring-up took.
    pub camera: Option<(Camera, u64)>,
}

/// Why a bring-up failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BringUpError {
    /// A register access to the board failed.
    #[error("PTP set-up")]
    Ecb(#[from] EcbError),
    /// PTP did not come up.
    #[error("PTP")]
    Ptp(#[from] BoardError),
    /// The virtual port has no camera output.
    #[error("virtual port {vp}: {why}")]
    NoCameraOutput {
        /// The virtual port.
        vp: u32,
        /// Why.
        why: String,
    },
    /// The camera did not take its configuration.
    #[error("configuring the IMX274 camera {camera} for {sensor}{}", if *.no_camera {
        " — the device has no camera on its I2C bus (an emulated device needs cameras configured)"
    } else { "" })]
    Configure {
        /// Which camera.
        camera: usize,
        /// The mode asked for.
        sensor: SensorSpec,
        /// The camera expander (0x70) did not answer: no camera at all.
        no_camera: bool,
        /// The I2C error.
        #[source]
        source: I2cError,
    },
    /// The camera did not start (or an I2C set-up failed).
    #[error("starting IMX274 {camera}")]
    Start {
        /// Which camera.
        camera: usize,
        /// The I2C error.
        #[source]
        source: I2cError,
    },
}

impl BringUp {
    /// The sensor the camera streams, when one is brought up.
    pub fn sensor(&self) -> Option<SensorSpec> {
        self.camera.map(SensorSpec::Imx274)
    }

    /// PTP (when `with_ptp`: the first virtual port of a board), then the camera feeding
    /// `vp`.
    pub fn run(
        &self,
        ctl: &mut Control,
        vp: u32,
        with_ptp: bool,
    ) -> Result<BroughtUp, BringUpError> {
        let ptp = match self.ptp.filter(|_| with_ptp) {
            Some(timeout) => {
                board::configure_ptp(ctl)?;
                board::ptp_synchronize(ctl, timeout)?;
                true
            }
            None => false,
        };
        let Some(mode) = self.camera else {
            return Ok(BroughtUp { ptp, camera: None });
        };
        let cam =
            Camera::new(vp as usize).map_err(|why| BringUpError::NoCameraOutput { vp, why })?;
        let start = |source| BringUpError::Start {
            camera: cam.index(),
            source,
        };
        let mut bus = I2c::new(ctl, CAM_BUS).map_err(|e| start(I2cError::from(e)))?;
        cam.configure(&mut bus, mode)
            .map_err(|source| BringUpError::Configure {
                camera: cam.index(),
                sensor: SensorSpec::Imx274(mode),
                no_camera: matches!(source, I2cError::Nak { address: 0x70, .. }),
                source,
            })?;
        cam.set_register(&mut bus, REG_DIGITAL_GAIN, 0x02)
            .map_err(start)?;
        cam.start(&mut bus).map_err(start)?;
        Ok(BroughtUp {
            ptp,
            camera: Some((cam, bus.transactions)),
        })
    }
}

/// Stop a camera [`BringUp::run`] started.
pub fn stop_camera(cam: Camera, ctl: &mut Control) -> Result<(), I2cError> {
    let mut bus = I2c::new(ctl, CAM_BUS)?;
    cam.stop(&mut bus)
}
