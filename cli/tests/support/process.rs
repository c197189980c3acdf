//! Feeding a started `palisade` its input: used by the test modules that run hook commands.

use std::io::Write;
use std::process::Child;

/// `child` with `input` written to its stdin, which is then closed (dropped): the whole event
/// a hook command reads.
pub fn fed(mut child: Child, input: &str) -> Child {
    child
        .stdin
        .take()
        .expect("the child's stdin is piped")
        .write_all(input.as_bytes())
        .unwrap();
    child
}
