#![no_main]
//! Fuzzes `tether::fuzzing::config_file`; see `src/fuzzing.rs` for what it asserts.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tether::fuzzing::config_file(data));
