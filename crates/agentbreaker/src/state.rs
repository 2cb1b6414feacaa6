//! The three circuit states shared by the FailureBreaker and the StagnationBreaker.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A circuit state: `"CLOSED"`, `"HALF_OPEN"` or `"OPEN"` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Normal operation.
    #[default]
    Closed,
    /// Testing whether to close again (FailureBreaker) or watching one more iteration
    /// (StagnationBreaker).
    HalfOpen,
    /// Refusing operations / loop terminated.
    Open,
}

impl State {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "CLOSED",
            State::HalfOpen => "HALF_OPEN",
            State::Open => "OPEN",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "CLOSED" => Ok(State::Closed),
            "HALF_OPEN" => Ok(State::HalfOpen),
            "OPEN" => Ok(State::Open),
            other => Err(Error::argument(format_args!(
                "unknown state {other:?} (expected CLOSED, HALF_OPEN or OPEN)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_its_spelling() {
        for s in [State::Closed, State::HalfOpen, State::Open] {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            "open".parse::<State>().unwrap_err().code(),
            "INVALID_ARGUMENT"
        );
    }
}
