//! The run state committed with every batch: where each input stands, the counters, and the
//! engine's snapshot.
//!
//! # Input identity
//!
//! A file is known by what it is, not by how it was spelled: its device and inode (the same
//! file under `./access.jsonl`, an absolute path or a hard link is one file), and a
//! fingerprint of the bytes already consumed — their length, and the hashes of their first
//! and last 64 KiB. A run resumes a known file at its committed offset after checking the
//! fingerprint; a file whose consumed bytes changed (replaced, rewritten, truncated) is
//! refused rather than resumed in the middle of other content. An edit inside a consumed
//! prefix that keeps its length and both ends intact is not noticed: the price of a check that
//! reads 128 KiB instead of the whole prefix.
//!
//! The state remembers the [`MAX_FILES`] files used most recently; an older one is forgotten,
//! and read from its start if it is ever given again.
//!
//! Standard input has no identity: an interrupted run is resumed by skipping the committed
//! number of bytes (the same stream must be fed again); after a completed run, standard input
//! is new data — unless it begins with the same bytes (its first 64 KiB, or all of it) as the
//! stream that run read to its end: that is refused as the same stream fed twice (a run
//! killed after its last commit looks interrupted to whoever started it). A named pipe or a device given as a file (`<(zcat log.gz)`) has no identity
//! either: it is read from its start, as new data, every run.
//!
//! A message source (a Kafka topic) is known by its partitions: each `(topic, partition)` has
//! a [`PartitionMark`], the offset of the next message to read, committed with the state that
//! counted the messages before it (version 5 of the encoding; older states read with none).

use tidemark::codec::{Reader, Writer};
use tidemark::DecodeError;

/// How many files the state remembers (about 100 bytes each, plus the path).
pub const MAX_FILES: usize = 10_000;

/// How many bytes at each end of a consumed prefix its fingerprint hashes.
pub const FINGERPRINT_SPAN: u64 = 64 * 1024;

/// Where one input file stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileMark {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// The path it was last read under (canonical), for messages.
    pub path: String,
    /// Byte offset of the next unread line.
    pub offset: u64,
    /// Lines read so far.
    pub line: u64,
    /// Hash of the first `min(offset, 64 KiB)` bytes.
    pub head: u64,
    /// Hash of the `min(offset, 64 KiB)` bytes before `offset`.
    pub tail: u64,
    /// When it was last used (a sequence number: the least recent is forgotten first).
    pub used: u64,
}

/// Where one partition of a message source stands: the offset of the next message to read.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionMark {
    /// The topic.
    pub topic: String,
    /// The partition's number.
    pub partition: i32,
    /// The next offset to read (the offset after the last message counted).
    pub offset: i64,
}

/// How many partitions the state remembers (the writer refuses more, the reader too).
pub const MAX_PARTITIONS: usize = 100_000;

/// The longest topic name, in bytes, the state keeps (the writer refuses longer, the reader
/// too).
pub const MAX_TOPIC_LEN: usize = 1 << 10;

impl PartitionMark {
    /// Why the state cannot keep a partition `partition` of `topic` at `offset`, if it cannot:
    /// a topic over [`MAX_TOPIC_LEN`] bytes, a negative partition or a negative offset. The
    /// one check of the writer ([`RunState::set_partitions`]), the reader
    /// ([`RunState::from_bytes`]) and a message source's messages as they arrive.
    pub fn refusal(topic: &str, partition: i32, offset: i64) -> Option<String> {
        if topic.len() > MAX_TOPIC_LEN {
            Some(format!(
                "a topic name of {} bytes (at most {MAX_TOPIC_LEN})",
                topic.len()
            ))
        } else if partition < 0 {
            Some(format!("a negative partition ({partition})"))
        } else if offset < 0 {
            Some(format!("a negative offset ({offset})"))
        } else {
            None
        }
    }
}

/// The state committed with each batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunState {
    /// Whether the last run reached the end of its input.
    pub completed: bool,
    /// Standard input's byte offset and line count in an interrupted run.
    pub stdin: (u64, u64),
    /// The length (at most 64 KiB) and hash of the first bytes of the last stream read from
    /// standard input: the same stream again after a completed run is refused, not counted
    /// twice.
    pub stdin_head: (u64, u64),
    /// The length (at most 64 KiB, at most the committed offset) and hash of the first bytes
    /// of the stream an interrupted run was reading on standard input, as of its committed
    /// position: a resume must be fed that stream again. (0, 0) when unknown, and in states
    /// of version 3, whose head was not kept for this.
    pub stdin_resume: (u64, u64),
    /// The files read, most recently used last.
    pub files: Vec<FileMark>,
    /// A counter for [`FileMark::used`].
    pub sequence: u64,
    /// Each partition of a message source read so far, in (topic, partition) order.
    pub partitions: Vec<PartitionMark>,
    /// Records counted so far.
    pub records: u64,
    /// Malformed lines skipped so far (`--skip-bad`).
    pub bad_lines: u64,
    /// The engine's snapshot.
    pub engine: Vec<u8>,
    /// A state of version 2 (before file identities), to be converted against the input list
    /// it was written for.
    pub legacy: Option<LegacyPosition>,
}

/// A version-2 state's input position: a fingerprint of the file names as spelled, and an
/// index into that list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LegacyPosition {
    /// xxh3 of the names as given, each followed by NUL (or `<stdin>`).
    pub inputs: u64,
    /// Index of the file in the list.
    pub file: u64,
    /// Byte offset in that file.
    pub offset: u64,
    /// Lines read from it.
    pub line: u64,
}

const STATE_VERSION: u8 = 5;

impl RunState {
    /// The mark of a file, by identity.
    pub fn file(&self, dev: u64, ino: u64) -> Option<&FileMark> {
        self.files.iter().find(|f| f.dev == dev && f.ino == ino)
    }

    /// Forgets a file's mark: it is read again from its start.
    pub fn forget_file(&mut self, dev: u64, ino: u64) {
        self.files.retain(|f| !(f.dev == dev && f.ino == ino));
    }

    /// Records a file's mark (replacing the one of the same identity), forgetting the least
    /// recently used beyond [`MAX_FILES`].
    pub fn set_file(&mut self, mut mark: FileMark) {
        self.sequence += 1;
        mark.used = self.sequence;
        match self
            .files
            .iter_mut()
            .find(|f| f.dev == mark.dev && f.ino == mark.ino)
        {
            Some(f) => *f = mark,
            None => {
                if self.files.len() >= MAX_FILES {
                    if let Some(i) = (0..self.files.len()).min_by_key(|&i| self.files[i].used) {
                        self.files.swap_remove(i);
                    }
                }
                self.files.push(mark);
            }
        }
    }

    /// Records where partitions stand (replacing their earlier marks). A mark the state could
    /// not read back ([`PartitionMark::refusal`]), or one partition more than
    /// [`MAX_PARTITIONS`], is refused, and the marks before it kept.
    pub fn set_partitions<'m>(
        &mut self,
        marks: impl IntoIterator<Item = &'m PartitionMark>,
    ) -> Result<(), String> {
        for mark in marks {
            if let Some(why) = PartitionMark::refusal(&mark.topic, mark.partition, mark.offset) {
                return Err(format!(
                    "topic {} partition {} offset {}: {why}",
                    mark.topic, mark.partition, mark.offset
                ));
            }
            let at = self.partitions.binary_search_by(|m| {
                (m.topic.as_str(), m.partition).cmp(&(&mark.topic, mark.partition))
            });
            match at {
                Ok(i) => self.partitions[i].offset = mark.offset,
                Err(i) => {
                    if self.partitions.len() >= MAX_PARTITIONS {
                        return Err(format!(
                            "topic {} partition {}: more than {MAX_PARTITIONS} partitions",
                            mark.topic, mark.partition
                        ));
                    }
                    self.partitions.insert(i, mark.clone());
                }
            }
        }
        Ok(())
    }

    /// Encodes the state (version 5).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(STATE_VERSION)
            .u8(self.completed as u8)
            .u64(self.stdin.0)
            .u64(self.stdin.1)
            .u64(self.stdin_head.0)
            .u64(self.stdin_head.1)
            .u64(self.stdin_resume.0)
            .u64(self.stdin_resume.1)
            .u64(self.sequence)
            .u64(self.files.len() as u64);
        for f in &self.files {
            w.u64(f.dev)
                .u64(f.ino)
                .u64(f.offset)
                .u64(f.line)
                .u64(f.head)
                .u64(f.tail)
                .u64(f.used)
                .u64(f.path.len() as u64)
                .raw(f.path.as_bytes());
        }
        w.u64(self.partitions.len() as u64);
        for p in &self.partitions {
            w.u64(p.topic.len() as u64)
                .raw(p.topic.as_bytes())
                .u64(p.partition as u32 as u64)
                .u64(p.offset as u64);
        }
        w.u64(self.records)
            .u64(self.bad_lines)
            .u64(self.engine.len() as u64)
            .raw(&self.engine);
        w.into_bytes()
    }

    /// Decodes a state of version 5, 4 (without partitions), 3 (nor the resume head), or 2
    /// (its position kept in [`RunState::legacy`]), checking every field.
    pub fn from_bytes(bytes: &[u8]) -> Result<RunState, DecodeError> {
        let mut r = Reader::new(bytes);
        let off = r.offset();
        let v = r.u8("state version")?;
        let bool_at = |r: &mut Reader<'_>, field: &'static str| -> Result<bool, DecodeError> {
            let off = r.offset();
            match r.u8(field)? {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(Reader::invalid(field, off, "0 or 1", other as u64)),
            }
        };
        let mut s = RunState::default();
        match v {
            2 => {
                let inputs = r.u64("inputs")?;
                s.completed = bool_at(&mut r, "completed")?;
                s.legacy = Some(LegacyPosition {
                    inputs,
                    file: r.u64("file")?,
                    offset: r.u64("offset")?,
                    line: r.u64("line")?,
                });
            }
            3..=5 => {
                s.completed = bool_at(&mut r, "completed")?;
                s.stdin = (r.u64("stdin offset")?, r.u64("stdin line")?);
                s.stdin_head = (r.u64("stdin head length")?, r.u64("stdin head hash")?);
                if v >= 4 {
                    s.stdin_resume = (r.u64("stdin resume length")?, r.u64("stdin resume hash")?);
                }
                s.sequence = r.u64("sequence")?;
                // 7 u64 and a length: at least 64 bytes a file.
                let n = r.count("files", 64, MAX_FILES as u64)?;
                for _ in 0..n {
                    let mut f = FileMark {
                        dev: r.u64("file device")?,
                        ino: r.u64("file inode")?,
                        offset: r.u64("file offset")?,
                        line: r.u64("file line")?,
                        head: r.u64("file head hash")?,
                        tail: r.u64("file tail hash")?,
                        used: r.u64("file used")?,
                        path: String::new(),
                    };
                    let off = r.offset();
                    let len = r.count("file path", 1, 1 << 16)?;
                    let path = r.bytes(len as u64, "file path")?;
                    f.path = String::from_utf8(path.to_vec())
                        .map_err(|_| Reader::invalid("file path", off, "UTF-8", len as u64))?;
                    if s.files.iter().any(|g| g.dev == f.dev && g.ino == f.ino) {
                        return Err(Reader::invalid("files", off, "each file once", f.ino));
                    }
                    s.files.push(f);
                }
                if v >= 5 {
                    // A topic's length and bytes, the partition and the offset: at least 25
                    // bytes a partition.
                    let n = r.count("partitions", 25, MAX_PARTITIONS as u64)?;
                    for _ in 0..n {
                        let off = r.offset();
                        let len = r.count("partition topic", 1, MAX_TOPIC_LEN as u64)?;
                        let topic = r.bytes(len as u64, "partition topic")?;
                        let topic = String::from_utf8(topic.to_vec()).map_err(|_| {
                            Reader::invalid("partition topic", off, "UTF-8", len as u64)
                        })?;
                        let off = r.offset();
                        let partition = r.u64("partition")?;
                        let partition = u32::try_from(partition)
                            .map_err(|_| Reader::invalid("partition", off, "a u32", partition))?
                            as i32;
                        let off = r.offset();
                        let offset = r.u64("partition offset")?;
                        let offset = i64::try_from(offset).map_err(|_| {
                            Reader::invalid("partition offset", off, "at most i64::MAX", offset)
                        })?;
                        if PartitionMark::refusal(&topic, partition, offset).is_some() {
                            return Err(Reader::invalid(
                                "partition",
                                off,
                                "a partition and offset of at least 0",
                                offset as u64,
                            ));
                        }
                        let mark = PartitionMark {
                            topic,
                            partition,
                            offset,
                        };
                        let in_order = s.partitions.last().is_none_or(|last| {
                            (last.topic.as_str(), last.partition)
                                < (mark.topic.as_str(), mark.partition)
                        });
                        if !in_order {
                            return Err(Reader::invalid(
                                "partitions",
                                off,
                                "each partition once, in order",
                                offset as u64,
                            ));
                        }
                        s.partitions.push(mark);
                    }
                }
            }
            _ => {
                return Err(Reader::invalid(
                    "state version",
                    off,
                    "2, 3, 4 or 5",
                    v as u64,
                ))
            }
        }
        s.records = r.u64("records")?;
        s.bad_lines = r.u64("bad lines")?;
        let n = r.count("engine snapshot", 1, u64::MAX)?;
        s.engine = r.bytes(n as u64, "engine snapshot")?.to_vec();
        r.finish()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_forgets_the_least_recent_file() {
        let mut s = RunState {
            records: 7,
            engine: vec![1, 2, 3],
            ..RunState::default()
        };
        for i in 0..(MAX_FILES as u64 + 5) {
            s.set_file(FileMark {
                dev: 1,
                ino: i,
                path: format!("/f{i}"),
                offset: i,
                ..FileMark::default()
            });
        }
        assert_eq!(s.files.len(), MAX_FILES);
        assert!(s.file(1, 4).is_none() && s.file(1, 5).is_some());
        let back = RunState::from_bytes(&s.to_bytes()).unwrap();
        assert_eq!(back, s);
        for cut in [0, 1, 10, 100] {
            assert!(RunState::from_bytes(&s.to_bytes()[..cut]).is_err());
        }
    }

    /// A version 3 state (before the resume head) reads with the resume head unknown, so a
    /// resume of its stdin run is not checked against a head it never kept.
    #[test]
    fn version_3_reads_without_a_resume_head() {
        let s = RunState {
            stdin: (100, 3),
            stdin_head: (50, 7),
            stdin_resume: (100, 9),
            engine: vec![1],
            ..RunState::default()
        };
        let mut v3 = s.to_bytes();
        assert_eq!(v3[0], 5);
        // version, completed, stdin (16 bytes), head (16): the resume head's 16 bytes follow;
        // after them the sequence and the file count (no files), then the partition count.
        v3.drain(66..74);
        v3.drain(34..50);
        v3[0] = 3;
        let back = RunState::from_bytes(&v3).expect("a version 3 run state still reads");
        assert_eq!(back.stdin_resume, (0, 0));
        assert_eq!(
            back,
            RunState {
                stdin_resume: (0, 0),
                ..s
            }
        );
    }

    /// Partitions round-trip in order; a version 4 state reads with none; a partition twice
    /// is refused.
    #[test]
    fn partitions_round_trip_and_version_4_reads_with_none() {
        let mut s = RunState {
            records: 3,
            engine: vec![9],
            ..RunState::default()
        };
        let mark = |topic: &str, partition, offset| PartitionMark {
            topic: topic.into(),
            partition,
            offset,
        };
        s.set_partitions(&[mark("b", 1, 10), mark("a", 2, 5), mark("a", 0, 7)])
            .unwrap();
        s.set_partitions(&[mark("a", 2, 6)]).unwrap();
        assert_eq!(
            s.partitions,
            [mark("a", 0, 7), mark("a", 2, 6), mark("b", 1, 10)]
        );
        let bytes = s.to_bytes();
        assert_eq!(RunState::from_bytes(&bytes).unwrap(), s);
        for cut in [bytes.len() - 20, bytes.len() - 30] {
            assert!(RunState::from_bytes(&bytes[..cut]).is_err());
        }
        let old = RunState {
            records: 3,
            engine: vec![9],
            ..RunState::default()
        };
        let mut v4 = old.to_bytes();
        // version … sequence, file count (no files): the partition count's 8 bytes follow.
        v4.drain(66..74);
        v4[0] = 4;
        assert_eq!(RunState::from_bytes(&v4).unwrap(), old);
        let mut twice = s.clone();
        twice.partitions[1] = mark("a", 0, 1);
        assert!(RunState::from_bytes(&twice.to_bytes()).is_err());
    }

    /// What the writer keeps at the limits the reader reads back; past them the writer
    /// refuses, and a state encoded past them anyway is refused by the reader.
    #[test]
    fn writer_and_reader_share_the_partition_limits() {
        let mark = |topic: &str, partition, offset| PartitionMark {
            topic: topic.into(),
            partition,
            offset,
        };
        let long = "t".repeat(MAX_TOPIC_LEN);
        let mut s = RunState {
            engine: vec![1],
            ..RunState::default()
        };
        s.set_partitions(&[mark(&long, i32::MAX, i64::MAX), mark("a", 0, 0)])
            .unwrap();
        assert_eq!(RunState::from_bytes(&s.to_bytes()).unwrap(), s);

        let too_long = "t".repeat(MAX_TOPIC_LEN + 1);
        for bad in [mark(&too_long, 0, 1), mark("a", -1, 1), mark("a", 1, -5)] {
            let mut t = s.clone();
            let error = t.set_partitions(std::slice::from_ref(&bad)).unwrap_err();
            assert!(error.contains(&format!("offset {}", bad.offset)), "{error}");
            assert_eq!(t, s, "nothing of a refused mark is kept");
            // Encoded anyway (the field is public): the reader refuses it.
            let mut forced = s.clone();
            forced.partitions.insert(0, bad);
            forced.partitions.sort();
            assert!(RunState::from_bytes(&forced.to_bytes()).is_err());
        }

        let mut full = RunState::default();
        let many: Vec<PartitionMark> = (0..MAX_PARTITIONS as i32)
            .map(|p| mark("m", p, 1))
            .collect();
        full.set_partitions(&many).unwrap();
        assert!(full
            .set_partitions(&[mark("m", MAX_PARTITIONS as i32, 1)])
            .is_err());
        assert!(full.set_partitions(&[mark("m", 0, 2)]).is_ok());
        assert_eq!(RunState::from_bytes(&full.to_bytes()).unwrap(), full);
    }
}
