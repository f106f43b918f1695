//! What the command-line tests share.

use std::process::Command;

/// Run the `mergelift` binary with `args`: its exit code (-1 if killed), stdout and stderr.
pub fn mergelift(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(args)
        .output()
        .expect("run mergelift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
