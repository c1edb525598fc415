//! The exported libibverbs entry points, one file per kind of object, and the functions of
//! the context's ops tables. Every one checks the pointers it is given against the live
//! objects, answers errors as libibverbs does (errno, or the return value), and never lets
//! a panic reach C. Each `ibv_*` function is the libibverbs function of that name (its man
//! page says what it does); they are public so that Rust tests can drive the same C API.
//!
//! # Safety
//! Every function here takes what the libibverbs function of its name takes: object
//! pointers are checked against the live objects (anything else is refused), and memory
//! the caller passes — attribute structures, WR lists, completion arrays, output slots —
//! must be valid for the access the man page describes, as with libibverbs.
#![allow(missing_docs, clippy::missing_safety_doc)]

pub mod ah;
pub mod context;
pub mod cq;
pub mod cq_ex;
pub mod cq_make;
pub mod device;
pub mod events;
pub mod files;
pub mod memory;
pub mod post;
pub mod qp;
pub mod qp_ex;
pub mod qp_make;
pub mod query;
pub mod srq;
pub mod stubs;
pub mod util;
pub mod wr;
