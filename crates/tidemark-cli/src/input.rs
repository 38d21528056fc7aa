//! Input: lines from files, or from stdin when no file is given, with their location; and
//! saved summaries, read with their header checked before their body.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use tidemark::cardinality::redis::{REDIS_HEADER_LEN, REDIS_REGISTERS};
use tidemark::codec::{self, Family};
use tidemark::DecodeError;

use crate::UsageError;

/// Where a line came from.
#[derive(Clone, Debug)]
pub struct Loc {
    /// The file's name as given, or `<stdin>`.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
}

impl Loc {
    /// A usage error at this line.
    pub fn error(&self, message: impl std::fmt::Display) -> anyhow::Error {
        UsageError::Line {
            file: self.file.clone(),
            line: self.line,
            message: message.to_string(),
        }
        .into()
    }
}

/// Calls `f` on every line of every file in order (stdin if `files` is empty), without the
/// line ending. A blank line is no record: every command skips it, as `run` does. Stops at
/// the first error `f` returns.
pub fn for_each_line(
    files: &[PathBuf],
    mut f: impl FnMut(&Loc, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if files.is_empty() {
        let stdin = io::stdin();
        return read_lines(stdin.lock(), "<stdin>", &mut f);
    }
    for path in files {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| UsageError::file(&name, e))?;
        read_lines(BufReader::new(file), &name, &mut f)?;
    }
    Ok(())
}

/// The longest input line the subcommands read (an item, a tick and an item, …): a file with
/// no line breaks (`/dev/zero`, a binary) is refused at this length instead of filling memory.
pub const MAX_LINE_BYTES: u64 = 1 << 20;

/// The largest config file `run` and `config --check` read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

fn read_lines(
    mut reader: impl BufRead,
    name: &str,
    f: &mut impl FnMut(&Loc, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut loc = Loc {
        file: name.to_string(),
        line: 0,
    };
    loop {
        buf.clear();
        // One byte past the limit tells a line at the limit from a longer one.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| UsageError::file(name, e))?;
        if n == 0 {
            return Ok(());
        }
        loc.line += 1;
        if n as u64 > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
            return Err(loc.error(format!(
                "the line is longer than {MAX_LINE_BYTES} bytes (no line break within them)"
            )));
        }
        let mut bytes = &buf[..];
        if let Some(rest) = bytes.strip_suffix(b"\n") {
            bytes = rest;
        }
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
        }
        if bytes.is_empty() {
            continue;
        }
        let line = std::str::from_utf8(bytes).map_err(|e| loc.error(format!("not UTF-8: {e}")))?;
        f(&loc, line)?;
    }
}

/// A config file's text: a regular file of at most [`MAX_CONFIG_BYTES`] (a FIFO or device
/// would block or never end).
pub fn read_config(path: &std::path::Path) -> anyhow::Result<String> {
    let name = path.display().to_string();
    let refuse = |t: &std::fs::FileType| match not_regular(t) {
        Some(kind) => Err(UsageError::file(
            &name,
            format!("is {kind}, not a config file"),
        )),
        None => Ok(()),
    };
    // Before opening (a FIFO's open waits for a writer), and again after (the path may have
    // changed in between).
    refuse(
        &std::fs::metadata(path)
            .map_err(|e| UsageError::file(&name, e))?
            .file_type(),
    )?;
    let file = File::open(path).map_err(|e| UsageError::file(&name, e))?;
    refuse(
        &file
            .metadata()
            .map_err(|e| UsageError::file(&name, e))?
            .file_type(),
    )?;
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| UsageError::file(&name, e))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(UsageError::file(
            &name,
            format!("longer than {MAX_CONFIG_BYTES} bytes: not a config file"),
        ));
    }
    Ok(text)
}

/// A file a command writes where the user named it (`--save`, `demo --db`), under one rule:
/// a file already at that path is never replaced unless the user said `--force`. A saved
/// sketch, filter or store is often all that is left of its input, and a mistyped name must
/// not cost it. The write itself is whole or nothing: a temporary file beside the target,
/// synced, then moved into place.
#[derive(Clone, Copy, Debug)]
pub struct SaveTo<'a> {
    /// The path as given.
    pub path: &'a Path,
    /// The flag that named it, for messages (`--save`).
    pub flag: &'static str,
    /// Whether a file already at `path` may be replaced.
    pub force: bool,
    /// Said after the refusal of an existing file (`""` for nothing): what else may help.
    pub hint: &'static str,
}

impl<'a> SaveTo<'a> {
    /// A save to `path`, named by `flag`, replacing an existing file only with `force`.
    pub fn new(path: &'a Path, flag: &'static str, force: bool) -> Self {
        SaveTo {
            path,
            flag,
            force,
            hint: "",
        }
    }

    /// The same save, with a hint after the refusal of an existing file.
    pub fn hint(self, hint: &'static str) -> Self {
        SaveTo { hint, ..self }
    }

    /// Checks before any input is read that the save can happen, so a refusal or an
    /// unwritable path is not found after minutes of input. A file that did not exist is
    /// not left behind.
    pub fn check(&self) -> anyhow::Result<()> {
        let target = self.target()?;
        if !self.force && exists(&target) {
            return Err(self.exists_error());
        }
        // The directory must take a new file: the temporary one the save will write.
        let tmp = self.temp_path()?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| {
                UsageError::flag(
                    self.flag,
                    format!("cannot write {}: {e}", self.path.display()),
                )
            })?;
        let _ = std::fs::remove_file(&tmp);
        Ok(())
    }

    /// Writes `bytes` to the file whole or not at all (see the type's rule).
    pub fn write(&self, bytes: &[u8]) -> anyhow::Result<()> {
        use std::io::Write as _;
        let tmp = self.temp_path()?;
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(UsageError::file(self.path.display(), e));
        }
        self.place(&tmp)
    }

    /// A temporary name beside the file the save replaces, in the same directory (so that
    /// moving it there replaces the file whole): for a command that writes the file itself
    /// (a store) and then calls [`SaveTo::place`].
    pub fn temp_path(&self) -> anyhow::Result<PathBuf> {
        Ok(temp_beside(&self.target()?))
    }

    /// Moves the finished temporary file `tmp` (from [`SaveTo::temp_path`]) to the path, or
    /// removes it and fails. Without `force` the move never replaces a file, even one that
    /// appeared after [`SaveTo::check`]: it links the new name, which fails on an existing
    /// one, where a rename would replace it.
    pub fn place(&self, tmp: &Path) -> anyhow::Result<()> {
        let target = match self.target() {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(tmp);
                return Err(e);
            }
        };
        let moved = if self.force {
            std::fs::rename(tmp, &target)
        } else {
            match std::fs::hard_link(tmp, &target) {
                Ok(()) => std::fs::remove_file(tmp),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(tmp);
                    return Err(self.exists_error());
                }
                // A file system without hard links: look, then rename.
                Err(_) if exists(&target) => {
                    let _ = std::fs::remove_file(tmp);
                    return Err(self.exists_error());
                }
                Err(_) => std::fs::rename(tmp, &target),
            }
        };
        if let Err(e) = moved {
            let _ = std::fs::remove_file(tmp);
            return Err(UsageError::file(self.path.display(), e));
        }
        Ok(())
    }

    fn exists_error(&self) -> anyhow::Error {
        UsageError::flag(
            self.flag,
            format!(
                "{} exists; --force replaces it{}",
                self.path.display(),
                self.hint
            ),
        )
    }

    /// The file the save replaces: the path, or the file it links to. A directory, FIFO or
    /// device is refused (writing one would fail, block, or never be a saved file).
    fn target(&self) -> anyhow::Result<PathBuf> {
        let path = self.path;
        let refuse = |what: &str| {
            UsageError::flag(
                self.flag,
                format!("{} is {what}, not a file", path.display()),
            )
        };
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => Err(refuse("a directory")),
            Ok(meta) => match not_regular(&meta.file_type()) {
                Some(kind) => Err(refuse(kind)),
                None => std::fs::canonicalize(path).map_err(|e| {
                    UsageError::flag(self.flag, format!("cannot write {}: {e}", path.display()))
                }),
            },
            Err(_) => Ok(path.to_path_buf()),
        }
    }
}

/// Whether anything is at `path`, a link to nothing included (replacing it loses the link).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// A temporary name beside `path`, in the same directory (so a rename replaces `path` whole).
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "save".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tidemark-{}.tmp", std::process::id()))
}

/// A saved summary read by [`read_saved`]: a tidemark envelope, or a Redis `HYLL` value.
pub enum Saved {
    /// A tidemark envelope of the given family, header checked, whole.
    Envelope(Family, Vec<u8>),
    /// A file that starts like a Redis `HYLL` value (only when the caller accepts them), at
    /// most [`REDIS_HYLL_MAX`] bytes and a newline (`redis-cli --raw GET` writes one after
    /// the value; the decoder decides whether the file is a value, or a value and that
    /// newline).
    RedisHyll(Vec<u8>),
}

/// The longest Redis `HYLL` value: the 16-byte header and, sparse, at most two bytes of
/// opcodes for each of its 16,384 registers (a dense value is shorter).
pub const REDIS_HYLL_MAX: u64 = (REDIS_HEADER_LEN + 2 * REDIS_REGISTERS) as u64;

/// `a`/`an` and a family's name: "an exponential histogram".
fn with_article(family: Family) -> String {
    let name = family.name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

/// Reads a saved summary file without trusting it: a file that is not a regular file
/// (a directory, a FIFO, a device such as `/dev/zero`) is refused before it is opened, so
/// nothing blocks or reads forever; then the fixed header alone is read, and magic, version,
/// family and the total length the header declares are checked against `families` and the
/// file's size; only then is the body read, exactly as long as declared. `what` names the
/// summaries `families` stands for in messages ("a filter"). With `redis`, a Redis `HYLL`
/// value is accepted too, bounded by its own format's size.
pub fn read_saved(
    path: &Path,
    families: &[Family],
    what: &str,
    redis: bool,
) -> anyhow::Result<Saved> {
    let name = path.display().to_string();
    let io = |e: io::Error| UsageError::file(&name, e);
    let bad = |message: String| UsageError::saved(&name, message);
    let meta = std::fs::metadata(path).map_err(io)?;
    not_regular(&meta.file_type()).map_or(Ok(()), |kind| {
        Err(bad(format!("is {kind}, not a saved summary file")))
    })?;
    let mut file = File::open(path).map_err(io)?;
    // The file may have been replaced between the two looks: its own metadata decides.
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = not_regular(&meta.file_type()) {
        return Err(bad(format!("is {kind}, not a saved summary file")));
    }
    let size = meta.len();
    let mut head = Vec::with_capacity(codec::HEADER_LEN);
    (&mut file)
        .take(codec::HEADER_LEN as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    if redis && head.starts_with(b"HYLL") {
        if size > REDIS_HYLL_MAX + 1 {
            return Err(bad(format!(
                "starts like a Redis HYLL value but has {size} bytes; a HYLL value has at most \
                 {REDIS_HYLL_MAX} (and one newline after them)"
            )));
        }
        let mut bytes = head;
        (&mut file)
            .take(REDIS_HYLL_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        return Ok(Saved::RedisHyll(bytes));
    }
    if redis && head.starts_with(b"\"HYLL") {
        // `redis-cli --no-raw`, or redis-cli writing to a terminal, quotes the value and
        // escapes its bytes.
        return Err(bad(
            "holds a Redis value as redis-cli prints it for a person (in quotes, its bytes \
             escaped), not the value itself: save it with `redis-cli --raw GET KEY > FILE`"
                .to_string(),
        ));
    }
    if head.is_empty() {
        return Err(bad(format!("is empty, not {what}")));
    }
    if !head.starts_with(&codec::MAGIC) {
        // A file shorter than a magic that begins like one was cut, not foreign.
        let cut = head.len() < 4
            && (codec::MAGIC.starts_with(&head) || (redis && b"HYLL".starts_with(&head)));
        return Err(bad(if cut {
            format!("is truncated: {size} bytes, less than any summary's header")
        } else if redis {
            "is not a tidemark sketch or a Redis HYLL value (it starts with neither TDMK nor \
             HYLL)"
                .to_string()
        } else {
            "is not a tidemark sketch (it does not start with TDMK)".to_string()
        }));
    }
    if head.len() < codec::HEADER_LEN {
        return Err(bad(format!(
            "is truncated: {size} bytes, less than the {}-byte header of a tidemark sketch",
            codec::HEADER_LEN
        )));
    }
    let (family, total) = codec::declared_len(&head).map_err(|e| bad(header_message(&e)))?;
    if !families.contains(&family) {
        return Err(bad(format!(
            "holds {} summary, not {what}",
            with_article(family)
        )));
    }
    if total > size {
        return Err(bad(format!(
            "is truncated: its header declares {total} bytes, the file has {size}"
        )));
    }
    if total < size {
        return Err(bad(format!(
            "has {} bytes after the {total} its header declares",
            size - total
        )));
    }
    let mut bytes = Vec::new();
    usize::try_from(total)
        .ok()
        .and_then(|n| bytes.try_reserve_exact(n).ok())
        .ok_or_else(|| bad(format!("cannot allocate {total} bytes to read it")))?;
    bytes.extend_from_slice(&head);
    (&mut file)
        .take(total - codec::HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 != total {
        return Err(bad(format!(
            "changed while it was read: {} bytes read, {total} declared",
            bytes.len()
        )));
    }
    Ok(Saved::Envelope(family, bytes))
}

/// [`read_saved`] for files that must hold a tidemark envelope of one of `families`.
pub fn read_envelope(
    path: &Path,
    families: &[Family],
    what: &str,
) -> anyhow::Result<(Family, Vec<u8>)> {
    match read_saved(path, families, what, false)? {
        Saved::Envelope(family, bytes) => Ok((family, bytes)),
        Saved::RedisHyll(_) => Err(anyhow::anyhow!(
            "internal: a Redis value was read where none is accepted"
        )),
    }
}

/// What a file type is when it is not a regular file, for messages.
fn not_regular(t: &std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    if t.is_dir() {
        Some("a directory")
    } else if t.is_file() {
        None
    } else {
        Some("a special file (not a regular file)")
    }
}

/// A header check's failure, in words for a person (not the decoder's field dump).
fn header_message(e: &DecodeError) -> String {
    match e {
        DecodeError::UnsupportedVersion { got, newest } => {
            format!("was written in format version {got}; this build reads versions up to {newest}")
        }
        DecodeError::UnknownFamily { got } => {
            format!("holds a summary family this build does not know (byte 5 is {got})")
        }
        DecodeError::UnknownHash { got } => {
            format!("names a hash this build does not know (byte 7 is {got})")
        }
        other => format!("has a damaged header: {other}"),
    }
}
