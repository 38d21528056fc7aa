//! What a command answers ([`Reply`], before it becomes RESP), what a bracket promises as
//! `TM.INFO` says it ([`bracket_text`]), and how a write goes to replicas and the AOF
//! ([`Replicate`]).

/// A reply, before it becomes RESP.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// An integer.
    Integer(i64),
    /// A double (RESP3 `,`; RESP2 a bulk string).
    Double(f64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// `[estimate, low, high]`: an array of three doubles.
    Estimate([f64; 3]),
    /// An array.
    Array(Vec<Reply>),
    /// A map (RESP3 `%`; RESP2 a flat array of field, value, …), in this order.
    Map(Vec<(&'static str, Reply)>),
    /// Null.
    Null,
}

impl Reply {
    /// `[estimate, low, high]`.
    pub fn estimate(value: f64, low: f64, high: f64) -> Reply {
        Reply::Estimate([value, low, high])
    }

    /// A bulk string from text.
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Bulk(s.into().into_bytes())
    }
}

impl From<tidemark::Estimate> for Reply {
    fn from(e: tidemark::Estimate) -> Reply {
        Reply::estimate(e.value, e.low, e.high)
    }
}

/// How a write goes to replicas and the AOF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replicate {
    /// Not at all: a read, or a write that changed nothing.
    Nothing,
    /// As the client sent it.
    Verbatim,
    /// As the client sent it, but with argument `pos` (a `*` time) replaced by `time`.
    WithTime {
        /// The argument's position in the vector (0: the command's name).
        pos: usize,
        /// The resolved time, ms.
        time: u64,
    },
    /// As this argument vector (the clock resolved).
    Rewritten(Vec<Vec<u8>>),
}

impl Replicate {
    /// A `CREATE` as replicas and the AOF must run it: with every parameter written out
    /// (`words` after the key), so a server loaded with other defaults builds the same value.
    pub fn create(cmd: &str, key: &[u8], words: &[String]) -> Replicate {
        let mut v = vec![cmd.as_bytes().to_vec(), key.to_vec()];
        v.extend(words.iter().map(|w| w.as_bytes().to_vec()));
        Replicate::Rewritten(v)
    }
}

/// What a bracket promises, as `TM.INFO` says it.
pub fn bracket_text(b: tidemark::Bracket) -> String {
    match b {
        tidemark::Bracket::Guaranteed => {
            "guaranteed: the true value is always within [low, high]".into()
        }
        tidemark::Bracket::Probabilistic { confidence } => {
            format!(
                "probabilistic: the true value is within [low, high] with probability {confidence}"
            )
        }
        _ => "see the documentation".into(),
    }
}
