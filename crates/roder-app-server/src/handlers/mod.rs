//! Request handlers, one file per method group. Each takes the connection's
//! [`Context`](crate::connection::Context) and its typed params and returns
//! its typed result; the method table (`methods.rs`) wires them up.

pub(crate) mod rewind;
pub(crate) mod runners;
pub(crate) mod session;
pub(crate) mod threads;
pub(crate) mod tools;
pub(crate) mod turns;
pub(crate) mod workdirs;
