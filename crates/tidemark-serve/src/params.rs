//! A request's query parameters, and the reading of each with its bounds: an unknown
//! parameter, one given twice that cannot be, or a value out of bounds is a 400 naming it.

use tidemark_stream::time::{parse_rfc3339, TimeFormat};

use crate::error::ApiError;

/// The most keys `/api/v1/top` ranks, and items a frequency row lists.
pub const MAX_N: u64 = 1000;

/// A query string's pairs, and the reading of each parameter with its bounds.
pub struct Params {
    /// The pairs, in the order sent.
    pub pairs: Vec<(String, String)>,
}

impl Params {
    /// Refuses a parameter not in `allowed` (the token aside), and a repeated one other than
    /// `quantile`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), ApiError> {
        for (i, (name, _)) in self.pairs.iter().enumerate() {
            if name == "access_token" {
                continue;
            }
            if !allowed.contains(&name.as_str()) {
                return Err(ApiError::bad(
                    name,
                    if allowed.is_empty() {
                        "unknown parameter: this path takes none".to_string()
                    } else {
                        format!("unknown parameter: expected {}", allowed.join(", "))
                    },
                ));
            }
            if name != "quantile" && self.pairs[..i].iter().any(|(n, _)| n == name) {
                return Err(ApiError::bad(name, "given twice"));
            }
        }
        Ok(())
    }

    /// The value of a parameter given at most once.
    pub fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        Ok(self
            .pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str()))
    }

    /// The value of a parameter that must be given once.
    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.one(name)?
            .ok_or_else(|| ApiError::bad(name, "required"))
    }

    /// A count in 1..=[`MAX_N`].
    pub fn count(&self, name: &str, default: u64) -> Result<u64, ApiError> {
        match self.one(name)? {
            None => Ok(default),
            Some(t) => t
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=MAX_N).contains(n))
                .ok_or_else(|| {
                    ApiError::bad(name, format!("expected an integer 1 to {MAX_N}, got {t:?}"))
                }),
        }
    }

    /// A time: RFC 3339 or epoch seconds, ms.
    pub fn time(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.one(name)?
            .map(|t| {
                parse_rfc3339(t)
                    .or_else(|_| TimeFormat::EpochSeconds.parse(t))
                    .map_err(|_| {
                        ApiError::bad(
                            name,
                            format!("expected RFC 3339 or epoch seconds, got {t:?}"),
                        )
                    })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http;

    #[test]
    fn parameters_are_checked_by_name() {
        let p = Params {
            pairs: http::parse_query("metric=a&n=0&n=3&bogus=1").unwrap(),
        };
        assert_eq!(
            p.only(&["metric", "n"]).unwrap_err().parameter.as_deref(),
            Some("n")
        );
        assert_eq!(
            p.only(&["metric", "n", "x"])
                .unwrap_err()
                .parameter
                .as_deref(),
            Some("n")
        );
        let p = Params {
            pairs: http::parse_query("n=0").unwrap(),
        };
        assert_eq!(p.count("n", 10).unwrap_err().status, 400);
        let p = Params {
            pairs: http::parse_query("n=1001").unwrap(),
        };
        assert!(p.count("n", 10).is_err());
        let p = Params {
            pairs: http::parse_query("at=yesterday").unwrap(),
        };
        assert_eq!(p.time("at").unwrap_err().parameter.as_deref(), Some("at"));
    }
}
