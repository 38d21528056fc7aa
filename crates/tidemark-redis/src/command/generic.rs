//! The commands that take a key of any TM type: `TM.INFO`, `TM.DUMP`, `TM.LOAD`.

use crate::args::show;
use crate::error::CmdError;
use crate::reply::{Replicate, Reply};
use crate::types::{Access, Call, Clock, Keys, LoadError, Spec, Value};

/// `TM.INFO key`.
pub const INFO: Spec = Spec {
    name: "TM.INFO",
    legacy: None,
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key",
    summary: "The key's type, structure, parameters, hash, latest time, size at rest, and what its bracket promises",
    complexity: "O(size of the value)",
    run: info,
};

/// `TM.DUMP key`.
pub const DUMP: Spec = Spec {
    name: "TM.DUMP",
    legacy: None,
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key",
    summary: "The value's bytes: the envelope the command line's --save writes, or a module bundle",
    complexity: "O(size of the value)",
    run: dump,
};

/// `TM.LOAD key bytes`.
pub const LOAD: Spec = Spec {
    name: "TM.LOAD",
    legacy: None,
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key bytes",
    summary:
        "Replaces the key (missing or a TM value) with the value in bytes, checked field by field",
    complexity: "O(size of the value)",
    run: load,
};

fn info(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let key = call.args.take()?;
    call.args.done()?;
    Ok(call.keys.any(key, false)?.info())
}

fn dump(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let key = call.args.take()?;
    call.args.done()?;
    Ok(Reply::Bulk(call.keys.any(key, false)?.to_bytes()))
}

fn load(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let key = call.args.take()?;
    let bytes = call.args.take()?;
    call.args.done()?;
    let cmd = call.name();
    if call.keys.is_foreign(key) {
        return Err(CmdError::WrongType {
            cmd,
            key: show(key),
            holds: None,
        });
    }
    let v = Value::from_bytes(bytes).map_err(|e| match e {
        LoadError::Limit(_) => CmdError::Limit {
            cmd,
            msg: format!("bytes refused: {e}"),
        },
        e => CmdError::Load {
            cmd,
            msg: e.to_string(),
        },
    })?;
    call.keys.store(key, v);
    call.rep = Replicate::Verbatim;
    Ok(Reply::Ok)
}
