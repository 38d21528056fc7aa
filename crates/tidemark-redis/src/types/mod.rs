//! The value types a key can hold: one file each, holding the value, its bytes, its `TM.INFO`
//! fields and its commands.
//!
//! | type       | structure                                                     | `TM.DUMP` bytes            |
//! |------------|---------------------------------------------------------------|----------------------------|
//! | `count`    | exponential histogram over the last `WINDOW` ms               | core envelope, family 1    |
//! | `distinct` | ring of bucket HyperLogLogs, or the sliding HyperLogLog       | core envelope, family 17/18|
//! | `freq`     | ring of per-bucket item counts (Count-Min + named heavy items)| module bundle, kind 1      |
//! | `filter`   | quotient filter (in place or stacked), optionally generations | core envelope 48/49, or module bundle kind 2 (EXPIRE) |
//! | `quantile` | ring of bucket DDSketches with a sliding window aggregate     | core envelope, family 65   |
//! | `window`   | a pipeline metric's key: buckets per start and partition      | module bundle, kind 3      |
//!
//! A value that is one core structure dumps as exactly the envelope the CLI's `--save` writes,
//! so its bytes move between the module, the CLI and the store. The composite values (a ring
//! of item counts, generations of filters) dump as a *module bundle* ([`bundle`]) whose every
//! part is a core envelope.
//!
//! Every number a user gives that sizes an allocation is bounded ([`Limits`]), and the same
//! bounds are checked again on every decoded value, so neither a `CREATE` nor
//! `TM.LOAD`/`RESTORE` can make the server allocate without a bound it would refuse.
//!
//! The types' commands are written against what lives here with them, since a command reaches
//! [`Value`]s: a [`Call`] (the command's arguments, and its keys through a [`Keyspace`]) and a
//! [`Spec`] (the command as the module registers it). What knows no value — errors, argument
//! parsing, replies, the server's clock and defaults, the bounds — is below, in
//! [`crate::error`], [`crate::args`], [`crate::reply`], [`crate::env`](mod@crate::env) and [`crate::limits`];
//! the command list and the runner are above, in [`crate::command`].
//!
//! Adding a type is one file here beside these (its value implementing [`TmType`], its
//! commands as [`Spec`]s), one line in the `value_types!` list below and its commands' lines
//! in [`crate::command::COMMANDS`].

pub mod bundle;
pub mod call;
pub mod count;
pub mod distinct;
pub mod filter;
pub mod freq;
pub mod keyspace;
pub mod quantile;
pub mod spec;
pub mod window;

use tidemark::codec::{self, Family, Reader};
use tidemark::DecodeError;

use crate::limits::Limits;
use crate::reply::Reply;

pub use call::{Call, KeyAccess};
pub use count::Counter;
pub use distinct::Distinct;
pub use filter::{Filter, FilterCore, FilterSpec};
pub use freq::Freq;
pub use keyspace::{Keyspace, Lookup, Plain};
pub use quantile::Quantiles;
pub use spec::{Access, Clock, Keys, Run, Spec};
pub use window::Published;

/// What one type of value is: its name, memory, bytes, latest time, `TM.INFO` fields, and how
/// it reads itself back.
pub trait TmType: Clone + core::fmt::Debug + Sized {
    /// The type's name, as `TM.INFO`, `WRONGTYPE` errors and `INFO tidemark` say it.
    const NAME: &'static str;
    /// Bytes held in memory (`MEMORY USAGE`), beside the [`Value`] itself.
    fn heap_bytes(&self) -> usize;
    /// The bytes `TM.DUMP` returns, RDB stores and `TM.LOAD` reads.
    fn to_bytes(&self) -> Vec<u8>;
    /// The latest time the value has seen, when it keeps one.
    fn latest(&self) -> Option<u64>;
    /// The type's own `TM.INFO` fields (after `type`, before `serialized_bytes`).
    fn info(&self, m: &mut Vec<(&'static str, Reply)>);
    /// Reads a value of this type, or `None` when the bytes hold another type's.
    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>>;
}

/// Bytes handed to [`TmType::decode`]: a core envelope of a family, or the body of a module
/// bundle of a kind (its reader past the kind byte; checksum, magic and version checked).
pub enum Encoded<'a> {
    /// A core envelope.
    Envelope(Family, &'a [u8]),
    /// A module bundle.
    Bundle(u8, Reader<'a>),
}

/// Writes the value enum and its dispatch from one list of types, so that adding a type is a
/// line here (and its commands' lines in the command list).
macro_rules! value_types {
    ($($variant:ident($ty:ty)),+ $(,)?) => {
        /// A value held by a key.
        #[derive(Clone, Debug)]
        #[allow(missing_docs)] // each variant is its type, documented there
        pub enum Value {
            $($variant($ty)),+
        }

        /// Every type's name, in the order of [`Value::type_index`].
        pub const TYPE_NAMES: &[&str] = &[$(<$ty as TmType>::NAME),+];

        impl Value {
            /// The type's name, as `TM.INFO` and `WRONGTYPE` errors say it.
            pub fn type_name(&self) -> &'static str {
                match self { $(Value::$variant(_) => <$ty as TmType>::NAME),+ }
            }

            /// The type's place in [`TYPE_NAMES`].
            pub fn type_index(&self) -> usize {
                let name = self.type_name();
                TYPE_NAMES.iter().position(|n| *n == name).unwrap_or(0)
            }

            /// Bytes held, for `MEMORY USAGE`.
            pub fn bytes(&self) -> usize {
                core::mem::size_of::<Value>() + match self { $(Value::$variant(v) => v.heap_bytes()),+ }
            }

            /// The bytes `TM.DUMP` returns, RDB stores and `TM.LOAD` reads.
            pub fn to_bytes(&self) -> Vec<u8> {
                match self { $(Value::$variant(v) => v.to_bytes()),+ }
            }

            /// The latest time the value has seen, when it keeps one.
            pub fn latest(&self) -> Option<u64> {
                match self { $(Value::$variant(v) => v.latest()),+ }
            }

            fn type_info(&self, m: &mut Vec<(&'static str, Reply)>) {
                match self { $(Value::$variant(v) => v.info(m)),+ }
            }

            fn decode_as_any(encoded: &mut Encoded<'_>) -> Result<Value, LoadError> {
                $(
                    if let Some(v) = <$ty as TmType>::decode(encoded) {
                        return v.map(Value::$variant);
                    }
                )+
                Err(match encoded {
                    Encoded::Envelope(family, _) => LoadError::Family(*family),
                    Encoded::Bundle(kind, r) => LoadError::Decode(Reader::invalid(
                        "bundle kind",
                        r.offset(),
                        "1 (frequency), 2 (filter) or 3 (window)",
                        *kind as u64,
                    )),
                })
            }
        }

        $(
            impl Held for $ty {
                fn peel(v: &mut Value) -> Option<&mut Self> {
                    #[allow(unreachable_patterns)]
                    match v { Value::$variant(x) => Some(x), _ => None }
                }
                fn wrap(self) -> Value {
                    Value::$variant(self)
                }
            }
        )+
    };
}

value_types! {
    Count(Counter),
    Distinct(Distinct),
    Freq(Freq),
    Filter(Filter),
    Quantile(Quantiles),
    Window(Published),
}

/// A type a [`Value`] can hold, reached from it.
pub trait Held: TmType {
    /// The value as this type, if it is one.
    fn peel(v: &mut Value) -> Option<&mut Self>;
    /// The value holding this.
    fn wrap(self) -> Value;
}

impl Value {
    /// Reads what [`Value::to_bytes`] wrote (or a CLI `--save` file of a family a key can
    /// hold), checking every bound a `CREATE` would.
    pub fn from_bytes(bytes: &[u8]) -> Result<Value, LoadError> {
        let v = if bytes.starts_with(bundle::MAGIC) {
            let (kind, r) = bundle::open(bytes).map_err(LoadError::Decode)?;
            Value::decode_as_any(&mut Encoded::Bundle(kind, r))?
        } else {
            let family = codec::peek_family(bytes).map_err(LoadError::Decode)?;
            Value::decode_as_any(&mut Encoded::Envelope(family, bytes))?
        };
        // Every time a command handles stays at most 2^52 ms, so no sum of a time and a
        // window can overflow; a value claiming a later one is refused.
        if v.latest().is_some_and(|t| t > Limits::MAX_TIME_MS) {
            return Err(LoadError::Limit("a latest time beyond 2^52 ms"));
        }
        Ok(v)
    }

    /// `TM.INFO`: the type, its fields, and its size at rest. Every field is read from what
    /// the value's bytes hold, so a replica, a reload, `RESTORE`, `COPY` and `TM.LOAD` answer
    /// the same; memory (which depends on how buffers grew) is `MEMORY USAGE`'s.
    pub fn info(&self) -> Reply {
        let mut m: Vec<(&'static str, Reply)> = vec![("type", Reply::text(self.type_name()))];
        self.type_info(&mut m);
        m.push((
            "serialized_bytes",
            Reply::Integer(self.to_bytes().len() as i64),
        ));
        Reply::Map(m)
    }
}

/// Bytes that `TM.LOAD` or `RESTORE` refuse.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LoadError {
    /// The envelope or bundle is malformed.
    Decode(DecodeError),
    /// A valid summary of a family no key type holds.
    Family(Family),
    /// A valid summary in a shape keys do not take.
    Unsupported(&'static str),
    /// A valid summary beyond a bound a `CREATE` would refuse.
    Limit(&'static str),
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoadError::Decode(e) => write!(f, "{e}"),
            LoadError::Family(fam) => write!(f, "a {fam} is not a value a TM key holds"),
            LoadError::Unsupported(what) => write!(f, "{what} is not a value a TM key holds"),
            LoadError::Limit(what) => write!(f, "refused: {what}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Decode(e) => Some(e),
            _ => None,
        }
    }
}
