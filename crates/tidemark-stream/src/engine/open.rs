//! A key's open buckets: the newest held inline (most events land there), older ones — still
//! open within the allowed lateness — in a vector.

use super::Summary;

/// One open bucket of one key.
#[derive(Clone, Debug)]
#[repr(C)]
pub(super) struct Open {
    /// The bucket's start.
    pub(super) start: u64,
    /// Its summary so far.
    pub(super) summary: Summary,
}

/// Open buckets of one key, by increasing start.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub(super) struct OpenBuckets {
    /// The newest bucket.
    newest: Option<Open>,
    /// Older open buckets, increasing, all before the newest.
    older: Vec<Open>,
}

impl OpenBuckets {
    pub(super) fn len(&self) -> usize {
        self.older.len() + usize::from(self.newest.is_some())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.newest.is_none()
    }

    /// Oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Open> {
        self.older.iter().chain(self.newest.iter())
    }

    pub(super) fn first_start(&self) -> Option<u64> {
        self.older.first().or(self.newest.as_ref()).map(|o| o.start)
    }

    pub(super) fn last_start(&self) -> Option<u64> {
        self.newest.as_ref().map(|o| o.start)
    }

    /// Removes the oldest bucket if it starts at `start`, returning its summary.
    pub(super) fn pop_first_at(&mut self, start: u64) -> Option<Summary> {
        if self.first_start() != Some(start) {
            return None;
        }
        let first = if self.older.is_empty() {
            self.newest.take()
        } else {
            Some(self.older.remove(0))
        };
        first.map(|o| o.summary)
    }

    /// The summary of the bucket at `start`, if open.
    #[inline]
    pub(super) fn get_mut(&mut self, start: u64) -> Option<&mut Summary> {
        match &mut self.newest {
            Some(o) if o.start == start => Some(&mut o.summary),
            _ => self
                .older
                .iter_mut()
                .find(|o| o.start == start)
                .map(|o| &mut o.summary),
        }
    }

    /// The summary of the bucket at `start`, if open.
    #[inline]
    pub(super) fn get(&self, start: u64) -> Option<&Summary> {
        match &self.newest {
            Some(o) if o.start == start => Some(&o.summary),
            _ => self
                .older
                .iter()
                .find(|o| o.start == start)
                .map(|o| &o.summary),
        }
    }

    pub(super) fn contains(&self, start: u64) -> bool {
        self.iter().any(|o| o.start == start)
    }

    /// Opens a bucket at `start` (not open yet).
    pub(super) fn insert(&mut self, start: u64, summary: Summary) {
        let open = Open { start, summary };
        match &self.newest {
            None => self.newest = Some(open),
            Some(n) if start > n.start => {
                let previous = self.newest.replace(open);
                self.older.extend(previous);
            }
            Some(_) => {
                let at = self.older.partition_point(|o| o.start < start);
                self.older.insert(at, open);
            }
        }
    }
}
