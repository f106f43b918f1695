//! The host ISA at an opt level, as the JIT and the tools use it.

use crate::error::Error;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

/// Cranelift optimization level for the final compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OptLevel {
    /// `opt_level=none`: what a JIT compiles with first.
    #[default]
    None,
    /// `opt_level=speed`.
    Speed,
}

impl OptLevel {
    /// `none` or `speed`.
    pub fn parse(s: &str) -> Option<OptLevel> {
        match s {
            "none" => Some(OptLevel::None),
            "speed" => Some(OptLevel::Speed),
            _ => None,
        }
    }
    /// The setting's value, as Cranelift spells it.
    pub fn name(self) -> &'static str {
        match self {
            OptLevel::None => "none",
            OptLevel::Speed => "speed",
        }
    }
}

/// The host ISA with the given optimization level (and the JIT's required settings).
pub fn host_isa(opt: OptLevel) -> Result<OwnedTargetIsa, Error> {
    let mut fb = settings::builder();
    fb.set("opt_level", opt.name())
        .map_err(|e| Error::Other(e.to_string()))?;
    fb.set("is_pic", "false")
        .map_err(|e| Error::Other(e.to_string()))?;
    fb.set("use_colocated_libcalls", "false")
        .map_err(|e| Error::Other(e.to_string()))?;
    // Wasmtime's code reads the frame pointer and return address (`get_frame_pointer`).
    fb.set("preserve_frame_pointers", "true")
        .map_err(|e| Error::Other(e.to_string()))?;
    let ib = cranelift_native::builder()
        .map_err(|e| Error::Other(format!("host machine is not supported: {e}")))?;
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| Error::Other(e.to_string()))
}
