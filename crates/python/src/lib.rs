//! The native part of the Python package `rocelink` (built by maturin from `python/`): each
//! role's session, driven from Python. Waiting and receiving happen with the GIL released;
//! a frame's bytes reach numpy without a copy (a read-only view of the receiver's ring page,
//! held until the last array of it is gone). Errors are the exceptions of `rocelink.errors`,
//! with the messages the CLI prints.

use pyo3::prelude::*;

mod data;
mod errors;
mod hsb;
mod ims;
mod ultrasound;
mod view;
mod wait;

/// The module `rocelink._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<hsb::Emulator>()?;
    m.add_class::<hsb::Receiver>()?;
    m.add_class::<hsb::Frame>()?;
    m.add_class::<hsb::FrameIter>()?;
    m.add_class::<ims::BufferUnit>()?;
    m.add_class::<ims::UnitFrameIter>()?;
    m.add_class::<ims::UnitFrame>()?;
    m.add_class::<ims::Worker>()?;
    m.add_class::<ultrasound::Probe>()?;
    m.add_class::<ultrasound::Host>()?;
    m.add_class::<ultrasound::Shot>()?;
    m.add_class::<ultrasound::ShotIter>()?;
    Ok(())
}
