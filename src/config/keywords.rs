//! The words the configuration and the command line use for its small
//! enums, both ways: `as_str` for what tether writes, `FromStr` for what it
//! reads, so that each word is spelled in one place.

use std::fmt;
use std::str::FromStr;

use super::{Exposure, HttpKind, Scope};
use crate::protocol::EraChoice;

/// A word that names none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// What was given.
    pub given: String,
    /// The words that would do.
    pub expected: &'static str,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not one of {}", self.given, self.expected)
    }
}

impl std::error::Error for UnknownWord {}

fn unknown(given: &str, expected: &'static str) -> UnknownWord {
    UnknownWord { given: given.to_owned(), expected }
}

impl Exposure {
    /// `direct`, `deferred`, `hidden` or `codemode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Direct => "direct",
            Exposure::Deferred => "deferred",
            Exposure::Hidden => "hidden",
            Exposure::Codemode => "codemode",
        }
    }
}

impl FromStr for Exposure {
    type Err = UnknownWord;

    fn from_str(word: &str) -> Result<Exposure, UnknownWord> {
        match word {
            "direct" => Ok(Exposure::Direct),
            "deferred" => Ok(Exposure::Deferred),
            "hidden" => Ok(Exposure::Hidden),
            "codemode" => Ok(Exposure::Codemode),
            _ => Err(unknown(word, "direct, deferred, hidden, codemode")),
        }
    }
}

impl Scope {
    /// `host`, `user`, `project` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Host => "host",
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Local => "local",
        }
    }
}

impl FromStr for Scope {
    type Err = UnknownWord;

    /// `user`, `project` or `local` (a host scope is never named by a
    /// person).
    fn from_str(word: &str) -> Result<Scope, UnknownWord> {
        match word {
            "user" => Ok(Scope::User),
            "project" => Ok(Scope::Project),
            "local" => Ok(Scope::Local),
            _ => Err(unknown(word, "user, project, local")),
        }
    }
}

impl HttpKind {
    /// `auto`, `http` or `sse`, as an entry's `type` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpKind::Auto => "auto",
            HttpKind::Streamable => "http",
            HttpKind::Sse => "sse",
        }
    }
}

impl FromStr for HttpKind {
    type Err = UnknownWord;

    /// What an entry's `type` may say: `http` (also `streamable-http` and
    /// `streamableHttp`, as other clients write it) or `sse`.
    fn from_str(word: &str) -> Result<HttpKind, UnknownWord> {
        match word {
            "http" | "streamable-http" | "streamableHttp" => Ok(HttpKind::Streamable),
            "sse" => Ok(HttpKind::Sse),
            _ => Err(unknown(word, "http, sse")),
        }
    }
}

impl EraChoice {
    /// `auto`, `legacy` or `modern`.
    pub fn as_str(self) -> &'static str {
        match self {
            EraChoice::Auto => "auto",
            EraChoice::Legacy => "legacy",
            EraChoice::Modern => "modern",
        }
    }
}

impl FromStr for EraChoice {
    type Err = UnknownWord;

    fn from_str(word: &str) -> Result<EraChoice, UnknownWord> {
        match word {
            "auto" => Ok(EraChoice::Auto),
            "legacy" => Ok(EraChoice::Legacy),
            "modern" => Ok(EraChoice::Modern),
            _ => Err(unknown(word, "auto, legacy, modern")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back() {
        for exposure in [Exposure::Direct, Exposure::Deferred, Exposure::Hidden, Exposure::Codemode]
        {
            assert_eq!(exposure.as_str().parse::<Exposure>(), Ok(exposure));
        }
        for scope in [Scope::User, Scope::Project, Scope::Local] {
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
        }
        for kind in [HttpKind::Streamable, HttpKind::Sse] {
            assert_eq!(kind.as_str().parse::<HttpKind>(), Ok(kind));
        }
        assert_eq!("streamable-http".parse::<HttpKind>(), Ok(HttpKind::Streamable));
        assert!("loud".parse::<Exposure>().unwrap_err().to_string().contains("deferred"));
    }
}
