//! The limits a codemode script runs under, and the top-level `"codemode"`
//! object of the user's `mcp.json` that changes them.
//!
//! Plain data, like the rest of `config/`: the engine that applies them
//! lives in `codemode/`, behind its cargo feature, while the limits are read
//! and checked whether or not the engine is built, so a file stays valid for
//! every build. Only the user's file may set them: a project file is written
//! by whoever can push to the repository, and must not raise how much of
//! this machine a script may take.

use std::time::Duration;

use serde_json::Value;

use crate::spelling::closest;

/// What one codemode script may use: the defaults, changed with the
/// `with_` methods or by the user file's `"codemode"` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptLimits {
    /// Wall time for the whole script, its tool calls included (30 s).
    pub timeout: Duration,
    /// The engine's heap (64 MiB).
    pub memory: usize,
    /// The engine's stack (1 MiB).
    pub stack: usize,
    /// Tool calls and resource reads per script (50).
    pub max_calls: usize,
    /// Calls running at once (8).
    pub max_in_flight: usize,
    /// The script's source, in bytes (64 KiB).
    pub max_source: usize,
    /// Captured console output, in bytes (40 KB); the rest is dropped and
    /// said so.
    pub max_output: usize,
}

impl Default for ScriptLimits {
    fn default() -> ScriptLimits {
        ScriptLimits {
            timeout: Duration::from_secs(30),
            memory: 64 << 20,
            stack: 1 << 20,
            max_calls: 50,
            max_in_flight: 8,
            max_source: 64 << 10,
            max_output: 40_000,
        }
    }
}

impl ScriptLimits {
    /// Wall time for the whole script.
    pub fn with_timeout(mut self, timeout: Duration) -> ScriptLimits {
        self.timeout = timeout;
        self
    }

    /// The engine's heap, in bytes.
    pub fn with_memory(mut self, bytes: usize) -> ScriptLimits {
        self.memory = bytes;
        self
    }

    /// The engine's stack, in bytes.
    pub fn with_stack(mut self, bytes: usize) -> ScriptLimits {
        self.stack = bytes;
        self
    }

    /// Tool calls and resource reads per script.
    pub fn with_max_calls(mut self, calls: usize) -> ScriptLimits {
        self.max_calls = calls;
        self
    }

    /// Calls running at once.
    pub fn with_max_in_flight(mut self, calls: usize) -> ScriptLimits {
        self.max_in_flight = calls;
        self
    }

    /// The script's source, in bytes.
    pub fn with_max_source(mut self, bytes: usize) -> ScriptLimits {
        self.max_source = bytes;
        self
    }

    /// Captured console output, in bytes.
    pub fn with_max_output(mut self, bytes: usize) -> ScriptLimits {
        self.max_output = bytes;
        self
    }
}

/// One key of the `"codemode"` object: its name, its unit in bytes (or 0
/// for seconds and counts), and the range a value may take.
struct Key {
    name: &'static str,
    unit: usize,
    least: f64,
    most: f64,
}

const KEYS: &[Key] = &[
    Key { name: "timeout", unit: 0, least: 0.001, most: 3600.0 },
    Key { name: "memoryMb", unit: 1 << 20, least: 1.0, most: 4096.0 },
    Key { name: "stackKb", unit: 1 << 10, least: 64.0, most: 65536.0 },
    Key { name: "maxCalls", unit: 0, least: 1.0, most: 10_000.0 },
    Key { name: "maxInFlight", unit: 0, least: 1.0, most: 64.0 },
    Key { name: "maxSourceKb", unit: 1 << 10, least: 1.0, most: 1024.0 },
    Key { name: "maxOutputKb", unit: 1000, least: 1.0, most: 10_240.0 },
];

/// Applies a file's `"codemode"` object to `limits`. A key that is unknown
/// or out of range is skipped with a warning naming it (and the known key
/// it is closest to); the others still apply.
pub(crate) fn apply(limits: &mut ScriptLimits, value: &Value, shown: &str) -> Vec<String> {
    let Some(object) = value.as_object() else {
        return vec![format!("{shown}: \"codemode\" must be an object of limits; it is ignored")];
    };
    let mut warnings = Vec::new();
    for (name, value) in object {
        let Some(key) = KEYS.iter().find(|key| key.name == name) else {
            let known: Vec<&str> = KEYS.iter().map(|key| key.name).collect();
            let hint = closest(name, &known)
                .map(|close| format!(" (did you mean {close:?}?)"))
                .unwrap_or_else(|| format!(" (known: {})", known.join(", ")));
            warnings.push(format!("{shown}: unknown \"codemode\" field {name:?}{hint}; ignored"));
            continue;
        };
        let number = value.as_f64().filter(|n| (key.least..=key.most).contains(n));
        let Some(number) = number else {
            warnings.push(format!(
                "{shown}: \"codemode\".{name} must be a number from {} to {}; ignored",
                key.least, key.most
            ));
            continue;
        };
        let whole = number.round() as usize;
        match key.name {
            "timeout" => limits.timeout = Duration::from_secs_f64(number),
            "memoryMb" => limits.memory = whole * key.unit,
            "stackKb" => limits.stack = whole * key.unit,
            "maxCalls" => limits.max_calls = whole,
            "maxInFlight" => limits.max_in_flight = whole,
            "maxSourceKb" => limits.max_source = whole * key.unit,
            _ => limits.max_output = whole * key.unit,
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let limits = ScriptLimits::default();
        assert_eq!(limits.timeout, Duration::from_secs(30));
        assert_eq!(limits.memory, 64 * 1024 * 1024);
        assert_eq!(limits.stack, 1024 * 1024);
        assert_eq!((limits.max_calls, limits.max_in_flight), (50, 8));
        assert_eq!((limits.max_source, limits.max_output), (65_536, 40_000));
    }

    #[test]
    fn a_files_keys_change_the_limits() {
        let mut limits = ScriptLimits::default();
        let warnings = apply(
            &mut limits,
            &json!({"timeout": 2.5, "memoryMb": 16, "stackKb": 256, "maxCalls": 5,
                    "maxInFlight": 2, "maxSourceKb": 8, "maxOutputKb": 4}),
            "mcp.json",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(limits.timeout, Duration::from_millis(2500));
        assert_eq!((limits.memory, limits.stack), (16 << 20, 256 << 10));
        assert_eq!((limits.max_calls, limits.max_in_flight), (5, 2));
        assert_eq!((limits.max_source, limits.max_output), (8 << 10, 4000));
    }

    #[test]
    fn a_bad_key_is_said_and_skipped_and_the_rest_apply() {
        let mut limits = ScriptLimits::default();
        let warnings = apply(
            &mut limits,
            &json!({"timout": 5, "maxCalls": 0, "memoryMb": "lots", "maxInFlight": 3}),
            "mcp.json",
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("did you mean \"timeout\""), "{}", warnings[0]);
        assert!(warnings[1].contains("maxCalls must be a number from 1"), "{}", warnings[1]);
        assert_eq!(limits.max_in_flight, 3);
        assert_eq!(limits.max_calls, 50);
        assert!(!apply(&mut limits, &json!(5), "f")[0].contains("unknown"));
    }
}
