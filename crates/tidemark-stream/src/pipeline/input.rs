//! Reading inputs: lines with a bound on their length, and a file's identity and fingerprint.

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::path::Path;

use super::state::{FileMark, FINGERPRINT_SPAN};

/// One line, or what stood in its place.
pub(crate) enum Line<'a> {
    /// A line's bytes (with its newline, if it had one).
    Text {
        /// The bytes.
        raw: &'a [u8],
        /// Its 1-based number.
        number: u64,
        /// The offset just after it.
        end: u64,
        /// Whether it ended with a newline (the last line of an input may not).
        terminated: bool,
    },
    /// A line longer than the limit: skipped without being held.
    TooLong {
        /// Its length, bytes (its newline not counted).
        len: u64,
        /// Its 1-based number.
        number: u64,
        /// The offset just after it.
        end: u64,
        /// Whether it ended with a newline (an unterminated one may still be growing).
        terminated: bool,
    },
    /// The end of the input.
    End,
}

/// Lines of a reader, parsed in place in its buffer where they fit (only a line that straddles
/// two buffer fills is copied), never holding more than `max` bytes of one line.
pub(crate) struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    /// Bytes of the reader's buffer the last line occupies, consumed at the next call.
    pending: usize,
    max: usize,
    /// Bytes consumed so far.
    pub offset: u64,
    /// Lines read so far.
    pub line: u64,
    /// Bytes already scanned of a too-long line that had no newline yet (see
    /// [`Lines::hold_too_long`]): the reader stands after them, `offset` at the line's start.
    held: u64,
    /// The last byte scanned of the line so far: a carriage return before a newline that
    /// comes with the next fill.
    last: u8,
    /// Whether a line past `max` is returned as soon as it is (unterminated), not scanned to
    /// its newline: a run that stops on a bad line needs no more of it, and an input that
    /// never ends its line (`/dev/zero`) would be scanned forever.
    stop_at_too_long: bool,
    /// Whether to tell when the next line is not in the buffer (see [`Lines::waits_next`]).
    telling_waits: bool,
    /// The next line is not wholly in the buffer: reading it reads the input.
    waits: bool,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(reader: R, max: usize) -> Lines<R> {
        Lines {
            reader,
            buf: Vec::new(),
            pending: 0,
            max,
            offset: 0,
            line: 0,
            held: 0,
            last: 0,
            stop_at_too_long: false,
            telling_waits: false,
            waits: false,
        }
    }

    /// The longest line it holds, bytes (`max_line_bytes`).
    pub(crate) fn max_line(&self) -> usize {
        self.max
    }

    /// Tells, after each line, whether the next is wholly in the buffer ([`Lines::waits_next`]):
    /// for an input whose reads may wait (a pipe, standard input), at the cost of looking
    /// for the next newline twice.
    pub(crate) fn telling_waits(mut self) -> Lines<R> {
        self.telling_waits = true;
        // Nothing is buffered yet.
        self.waits = true;
        self
    }

    /// Whether reading the next line reads the input (which, from a pipe, waits for it): the
    /// last line took the buffer's last whole line, or the input has ended, or nothing has
    /// been read yet, or bytes were discarded (then perhaps spuriously: never too seldom).
    /// Only for [`Lines::telling_waits`]; else false.
    pub(crate) fn waits_next(&self) -> bool {
        self.waits
    }

    /// Returns a line as soon as it passes the limit, unterminated, its length so far.
    pub(crate) fn stop_at_too_long(mut self) -> Lines<R> {
        self.stop_at_too_long = true;
        self
    }

    fn settle(&mut self) {
        if self.pending > 0 {
            self.reader.consume(self.pending);
            self.pending = 0;
        }
    }

    /// Discards `n` bytes (standard input, which cannot seek), showing each chunk to `seen`,
    /// returning how many there were.
    pub(crate) fn discard(&mut self, n: u64, seen: &mut dyn FnMut(&[u8])) -> io::Result<u64> {
        self.settle();
        self.held = 0;
        // Said to wait, whatever is left buffered: only ever too often.
        self.waits = self.telling_waits;
        let mut left = n;
        while left > 0 {
            let avail = self.reader.fill_buf()?;
            if avail.is_empty() {
                break;
            }
            let take = (avail.len() as u64).min(left) as usize;
            seen(&avail[..take]);
            self.reader.consume(take);
            left -= take as u64;
        }
        self.offset += n - left;
        Ok(n - left)
    }

    /// The next line. A line's length is its bytes before the newline, a carriage return
    /// just before it not counted; a longer line than `max` is skipped, never held whole.
    pub(crate) fn next_line(&mut self) -> io::Result<Line<'_>> {
        self.settle();
        self.buf.clear();
        // Bytes of the line so far, newline excluded: those of a held too-long line are not
        // read again.
        let mut raw_len = std::mem::take(&mut self.held);
        let mut too_long = raw_len > 0;
        if !too_long {
            self.last = 0;
        }
        loop {
            let avail = self.reader.fill_buf()?;
            if avail.is_empty() {
                self.waits = self.telling_waits;
                if raw_len == 0 {
                    return Ok(Line::End);
                }
                // A last line without a newline.
                self.offset += raw_len;
                self.line += 1;
                let cr = self.buf.last() == Some(&b'\r');
                let len = self.buf.len() - cr as usize;
                return Ok(if too_long || len > self.max {
                    Line::TooLong {
                        len: raw_len,
                        number: self.line,
                        end: self.offset,
                        terminated: false,
                    }
                } else {
                    Line::Text {
                        raw: &self.buf,
                        number: self.line,
                        end: self.offset,
                        terminated: false,
                    }
                });
            }
            match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    raw_len += i as u64;
                    self.offset += raw_len + 1;
                    self.line += 1;
                    let cr = if i > 0 {
                        avail[i - 1] == b'\r'
                    } else {
                        self.last == b'\r'
                    };
                    // Bytes before the newline, of every fill (a too-long line's earlier
                    // ones were not kept).
                    let len = raw_len as usize - cr as usize;
                    // Whether the buffer holds no whole line after this one.
                    self.waits =
                        self.telling_waits && memchr::memchr(b'\n', &avail[i + 1..]).is_none();
                    if too_long || len > self.max {
                        self.reader.consume(i + 1);
                        return Ok(Line::TooLong {
                            len: len as u64,
                            number: self.line,
                            end: self.offset,
                            terminated: true,
                        });
                    }
                    if self.buf.is_empty() {
                        self.pending = i + 1;
                        let avail = self.reader.fill_buf()?;
                        return Ok(Line::Text {
                            raw: &avail[..=i],
                            number: self.line,
                            end: self.offset,
                            terminated: true,
                        });
                    }
                    self.buf.extend_from_slice(&avail[..=i]);
                    self.reader.consume(i + 1);
                    return Ok(Line::Text {
                        raw: &self.buf,
                        number: self.line,
                        end: self.offset,
                        terminated: true,
                    });
                }
                None => {
                    let n = avail.len();
                    raw_len += n as u64;
                    self.last = avail[n - 1];
                    if !too_long {
                        // One byte of slack: it may be the carriage return before a newline.
                        if self.buf.len() + n > self.max + 1 {
                            too_long = true;
                            self.buf = Vec::new();
                        } else {
                            self.buf.extend_from_slice(avail);
                        }
                    }
                    self.reader.consume(n);
                    if too_long && self.stop_at_too_long {
                        self.waits = self.telling_waits;
                        self.offset += raw_len;
                        self.line += 1;
                        return Ok(Line::TooLong {
                            len: raw_len,
                            number: self.line,
                            end: self.offset,
                            terminated: false,
                        });
                    }
                }
            }
        }
    }

    /// Takes back the unterminated too-long line just returned (its start `offset`, its
    /// number `line + 1`) to wait for its newline, without reading its bytes again: the next
    /// call goes on from where the scan stopped, so waiting costs only the bytes appended.
    pub(crate) fn hold_too_long(&mut self, offset: u64, line: u64) {
        debug_assert!(self.held == 0 && self.offset >= offset);
        self.held = self.offset - offset;
        self.offset = offset;
        self.line = line;
    }
}

impl<R: BufRead + Seek> Lines<R> {
    /// Moves to `offset`, the start of line `line + 1`.
    pub(crate) fn seek_to(&mut self, offset: u64, line: u64) -> io::Result<()> {
        self.settle();
        self.reader.seek(SeekFrom::Start(offset))?;
        self.offset = offset;
        self.line = line;
        self.held = 0;
        Ok(())
    }
}

/// Whether `path` names a readable file whose first line is whole (a newline within its
/// first 1 MiB, or anything past that): a followed file may be there yet.
pub(crate) fn has_whole_line(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut head = Vec::new();
    match file.take(1 << 20).read_to_end(&mut head) {
        Ok(n) => n == 1 << 20 || head.contains(&b'\n'),
        Err(_) => false,
    }
}

/// A file's identity: device and inode.
#[cfg(unix)]
pub(crate) fn identity(meta: &std::fs::Metadata, _path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// A file's identity where there are no inodes: its canonical path.
#[cfg(not(unix))]
pub(crate) fn identity(_meta: &std::fs::Metadata, path: &Path) -> (u64, u64) {
    (
        0,
        xxhash_rust::xxh3::xxh3_64(path.to_string_lossy().as_bytes()),
    )
}

fn hash_range(file: &mut File, from: u64, len: u64) -> io::Result<u64> {
    file.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut buf)?;
    if buf.len() as u64 != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the file is shorter than the bytes already read",
        ));
    }
    Ok(xxhash_rust::xxh3::xxh3_64(&buf))
}

/// The fingerprint of a file's first `offset` bytes: the hashes of their first and last 64 KiB.
pub(crate) fn fingerprint(file: &mut File, offset: u64) -> io::Result<(u64, u64)> {
    let span = offset.min(FINGERPRINT_SPAN);
    Ok((
        hash_range(file, 0, span)?,
        hash_range(file, offset - span, span)?,
    ))
}

/// Why a known file cannot be resumed: its consumed bytes are not what was read.
pub(crate) fn changed(mark: &FileMark, file: &mut File, size: u64) -> io::Result<Option<String>> {
    if size < mark.offset {
        return Ok(Some(format!(
            "it is {size} bytes, shorter than the {} bytes already read (truncated or \
             replaced)",
            mark.offset
        )));
    }
    let (head, tail) = fingerprint(file, mark.offset)?;
    if (head, tail) != (mark.head, mark.tail) {
        return Ok(Some(format!(
            "its first {} bytes are not the ones already read (rewritten or replaced)",
            mark.offset
        )));
    }
    if size > mark.offset && mark.offset > 0 {
        let mut last = [0u8];
        file.seek(SeekFrom::Start(mark.offset - 1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            return Ok(Some(
                "its last line was read without a newline (as the end of the input), and the \
                 file has grown since: that line's record was counted as it then stood"
                    .to_string(),
            ));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A file that grows while it is read: the bytes written so far, and how many were read.
    #[derive(Clone, Default)]
    struct Growing {
        bytes: Rc<RefCell<Vec<u8>>>,
        read: Rc<RefCell<u64>>,
        at: u64,
    }

    impl Read for Growing {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let bytes = self.bytes.borrow();
            let from = (self.at as usize).min(bytes.len());
            let n = out.len().min(bytes.len() - from);
            out[..n].copy_from_slice(&bytes[from..from + n]);
            self.at += n as u64;
            *self.read.borrow_mut() += n as u64;
            Ok(n)
        }
    }

    impl Seek for Growing {
        fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
            let SeekFrom::Start(at) = to else {
                unreachable!("Lines seeks from the start only")
            };
            self.at = at;
            Ok(at)
        }
    }

    /// A line as a comparable tuple: whether it was too long, its length (text: its bytes),
    /// number, end, and whether it had its newline; `None` at the end.
    fn next<R: BufRead>(lines: &mut Lines<R>) -> Option<(bool, u64, u64, u64, bool)> {
        match lines.next_line().unwrap() {
            Line::Text {
                raw,
                number,
                end,
                terminated,
            } => Some((false, raw.len() as u64, number, end, terminated)),
            Line::TooLong {
                len,
                number,
                end,
                terminated,
            } => Some((true, len, number, end, terminated)),
            Line::End => None,
        }
    }

    /// A pipe: at most `chunk` bytes a read; counts the reads.
    struct Pipe {
        bytes: Vec<u8>,
        at: usize,
        chunk: usize,
        reads: Rc<RefCell<u64>>,
    }

    impl Read for Pipe {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            *self.reads.borrow_mut() += 1;
            let n = out.len().min(self.chunk).min(self.bytes.len() - self.at);
            out[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    proptest::proptest! {
        /// `waits_next` against the reads made: after a line it says false only if the next
        /// line comes without reading the input (which, from a pipe, could wait), and true
        /// only if reading it does read — for lines of any length, over the buffer's and the
        /// limit's, and reads of any size.
        #[test]
        fn waits_next_says_when_the_next_line_reads(
            lines in proptest::collection::vec((0usize..40, proptest::bool::ANY), 0..30),
            last_terminated in proptest::bool::ANY,
            chunk in 1usize..24,
            capacity in 4usize..32,
            stop_at_too_long in proptest::bool::ANY,
        ) {
            let mut bytes = Vec::new();
            for (len, crlf) in &lines {
                bytes.extend(std::iter::repeat_n(b'x', *len));
                bytes.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
            if !last_terminated && !lines.is_empty() {
                bytes.pop();
            }
            let reads = Rc::new(RefCell::new(0));
            let pipe = Pipe { bytes, at: 0, chunk, reads: reads.clone() };
            let mut l = Lines::new(io::BufReader::with_capacity(capacity, pipe), 30).telling_waits();
            if stop_at_too_long {
                l = l.stop_at_too_long();
            }
            loop {
                let waits = l.waits_next();
                let before = *reads.borrow();
                let line = next(&mut l);
                let read = *reads.borrow() > before;
                proptest::prop_assert_eq!(waits, read, "line {:?}", line);
                if line.is_none() {
                    break;
                }
            }
        }
    }

    #[test]
    fn a_held_too_long_line_is_not_read_again_while_it_grows() {
        let file = Growing::default();
        let (bytes, read) = (file.bytes.clone(), file.read.clone());
        let append = |b: &[u8]| bytes.borrow_mut().extend_from_slice(b);
        append(b"a,b\n");
        append(&[b'x'; 100]);
        let mut lines = Lines::new(io::BufReader::with_capacity(16, file), 10);
        assert_eq!(next(&mut lines), Some((false, 4, 1, 4, true)));
        let start = (lines.offset, lines.line);
        assert_eq!(next(&mut lines), Some((true, 100, 2, 104, false)));
        assert_eq!(*read.borrow(), 104);
        // Held, then 50 bytes more: only those are read.
        lines.hold_too_long(start.0, start.1);
        assert_eq!((lines.offset, lines.line), (4, 1));
        append(&[b'y'; 50]);
        assert_eq!(next(&mut lines), Some((true, 150, 2, 154, false)));
        assert_eq!(*read.borrow(), 154);
        lines.hold_too_long(start.0, start.1);
        // Its newline at last: one too-long line, whole (its carriage return not counted),
        // then the next line as usual.
        append(b"zz\r\nq,r\n");
        assert_eq!(next(&mut lines), Some((true, 152, 2, 158, true)));
        assert_eq!(next(&mut lines), Some((false, 4, 3, 162, true)));
        // 4 + 154 + 4 bytes in all.
        assert_eq!(*read.borrow(), 162, "no byte read twice");
        assert_eq!(next(&mut lines), None);
        // A carriage return held at the end of the scan, its newline in the next fill: not
        // counted in the length, as within one fill.
        append(&[b'w'; 30]);
        append(b"\r");
        let tail = (lines.offset, lines.line);
        assert_eq!(next(&mut lines), Some((true, 31, 4, 193, false)));
        lines.hold_too_long(tail.0, tail.1);
        append(b"\n");
        assert_eq!(next(&mut lines), Some((true, 30, 4, 194, true)));
        // Seeking forgets a held line: read from its start again, it is the same line.
        lines.seek_to(start.0, start.1).unwrap();
        assert_eq!(next(&mut lines), Some((true, 152, 2, 158, true)));
    }
}
