//! The exception runtime of Cranelift's run tests: `__cranelift_throw`.
//!
//! Cranelift's own test runner (the unpublished cranelift-filetests) gives run tests a host
//! function that throws: `__cranelift_throw(entry_fp, exit_fp, exit_pc, tag, payload1,
//! payload2)`. It walks the frame-pointer chain of JIT frames from `exit_fp` up to
//! `entry_fp`, finds the first `try_call` site whose handler list catches `tag` (a tag handler
//! or a catch-all), restores that frame's stack and frame pointers and jumps to the handler
//! with the two payloads in the payload registers (`rax`/`rdx` on x86-64), as the `tail`
//! calling convention's exception ABI expects. Code must keep frame pointers
//! (`preserve_frame_pointers`, which our JIT sets).
//!
//! The handler table comes from the compiled code itself: after each function is compiled
//! the JIT records its call sites with exception handlers (`MachBufferFinalized::call_sites`),
//! and once the code is finalized the sites are registered here by absolute return address.
//! A module unregisters its sites when it is dropped.

use cranelift_codegen::{FinalizedMachCallSite, FinalizedMachExceptionHandler};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A call site with handlers: the distance from FP down to SP at the call, and the handlers
/// in order (`None` tag = catch-all) with their absolute code addresses.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    sp_to_fp: u32,
    handlers: Vec<(Option<u32>, usize)>,
}

/// Call sites of one function before its code has an address: (return-address offset, site).
pub(crate) type PendingSites = Vec<(u32, Option<u32>, Vec<(Option<u32>, u32)>)>;

/// The sites of one compiled function that have exception handlers.
pub(crate) fn pending_sites<'a>(
    sites: impl Iterator<Item = FinalizedMachCallSite<'a>>,
) -> PendingSites {
    sites
        .filter(|s| !s.exception_handlers.is_empty())
        .map(|s| {
            let hs = s
                .exception_handlers
                .iter()
                .filter_map(|h| match h {
                    FinalizedMachExceptionHandler::Tag(t, off) => Some((Some(t.as_u32()), *off)),
                    FinalizedMachExceptionHandler::Default(off) => Some((None, *off)),
                    // Dynamic contexts do not occur in CLIF run tests.
                    FinalizedMachExceptionHandler::Context(_) => None,
                })
                .collect();
            (s.ret_addr, s.frame_offset, hs)
        })
        .collect()
}

static SITES: Mutex<BTreeMap<usize, Site>> = Mutex::new(BTreeMap::new());

/// Sites registered by one module; unregistered when dropped.
#[derive(Default)]
pub(crate) struct Registration {
    keys: Vec<usize>,
}

/// Register the sites of a function whose code starts at `base`.
pub(crate) fn register(reg: &mut Registration, base: usize, sites: &PendingSites) {
    let mut table = SITES.lock().unwrap_or_else(|e| e.into_inner());
    for (ret, frame_offset, hs) in sites {
        // A site without a known frame size cannot be resumed: leave it out (a throw
        // through it then finds no handler there).
        let Some(sp_to_fp) = *frame_offset else {
            continue;
        };
        let key = base + *ret as usize;
        let handlers = hs
            .iter()
            .map(|&(t, off)| (t, base + off as usize))
            .collect();
        table.insert(key, Site { sp_to_fp, handlers });
        reg.keys.push(key);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut table = SITES.lock().unwrap_or_else(|e| e.into_inner());
        for k in &self.keys {
            table.remove(k);
        }
    }
}

/// `__cranelift_throw(entry_fp, exit_fp, exit_pc, tag, payload1, payload2)`: unwind to the
/// innermost handler of `tag` between `exit_fp` and `entry_fp` and resume there. Without a
/// handler the process cannot continue (the JIT code has no unwind tables for Rust's
/// unwinder): it reports and aborts, which the run-test driver turns into a failed line.
pub(crate) extern "C" fn cranelift_throw(
    entry_fp: usize,
    exit_fp: usize,
    exit_pc: usize,
    tag: u32,
    payload1: usize,
    payload2: usize,
) -> ! {
    let (mut pc, mut fp) = (exit_pc, exit_fp);
    while fp != 0 && fp < entry_fp && fp % 16 == 0 {
        let hit = {
            let table = SITES.lock().unwrap_or_else(|e| e.into_inner());
            table.get(&pc).and_then(|s| {
                s.handlers
                    .iter()
                    .find(|(t, _)| t.is_none() || *t == Some(tag))
                    .map(|&(_, h)| (h, fp - s.sp_to_fp as usize))
            })
        };
        if let Some((handler, sp)) = hit {
            // SAFETY: `fp` is a live JIT frame below `entry_fp` whose call site has this
            // handler; the handler expects exactly this SP/FP and the payload registers.
            unsafe { resume(handler, sp, fp, payload1, payload2) }
        }
        // SAFETY: `fp` is a frame pointer of a frame between the thrower and `entry_fp`:
        // `[fp]` holds the caller's FP and `[fp + 8]` the return address into the caller.
        let (next_fp, ret) = unsafe { (*(fp as *const usize), *(fp as *const usize).add(1)) };
        if next_fp <= fp {
            break;
        }
        pc = ret;
        fp = next_fp;
    }
    eprintln!(
        "__cranelift_throw: no handler for tag {tag} between the thrower and the entry frame"
    );
    std::process::abort()
}

#[cfg(target_arch = "x86_64")]
unsafe fn resume(pc: usize, sp: usize, fp: usize, p1: usize, p2: usize) -> ! {
    // SAFETY: the caller guarantees a valid handler frame; nothing after the jump returns.
    unsafe {
        core::arch::asm!(
            "mov rsp, rcx",
            "mov rbp, rsi",
            "jmp rdi",
            in("rax") p1,
            in("rdx") p2,
            in("rcx") sp,
            in("rsi") fp,
            in("rdi") pc,
            options(noreturn, nostack),
        )
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn resume(_pc: usize, _sp: usize, _fp: usize, _p1: usize, _p2: usize) -> ! {
    eprintln!("__cranelift_throw: resuming is implemented for x86-64 only");
    std::process::abort()
}
