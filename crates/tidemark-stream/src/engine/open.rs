//! A key's open buckets: the newest held inline (most events land there, so finding it costs
//! no pointer chase beyond the key's own table entry), older ones — still open within the
//! allowed lateness — in a vector.

use super::Summary;

/// Open buckets `(start, summary)` of one key, by increasing start.
#[derive(Clone, Debug, Default)]
pub(super) struct OpenBuckets {
    /// The newest bucket.
    newest: Option<(u64, Summary)>,
    /// Older open buckets, increasing, all before the newest.
    older: Vec<(u64, Summary)>,
}

impl OpenBuckets {
    pub(super) fn len(&self) -> usize {
        self.older.len() + usize::from(self.newest.is_some())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.newest.is_none()
    }

    /// Oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(u64, Summary)> {
        self.older.iter().chain(self.newest.iter())
    }

    pub(super) fn first_start(&self) -> Option<u64> {
        self.older.first().or(self.newest.as_ref()).map(|(s, _)| *s)
    }

    pub(super) fn last_start(&self) -> Option<u64> {
        self.newest.as_ref().map(|(s, _)| *s)
    }

    /// Removes the oldest bucket.
    pub(super) fn pop_first(&mut self) -> Option<(u64, Summary)> {
        if self.older.is_empty() {
            self.newest.take()
        } else {
            Some(self.older.remove(0))
        }
    }

    /// The bucket at `start`, if open.
    #[inline]
    pub(super) fn get_mut(&mut self, start: u64) -> Option<&mut Summary> {
        match &mut self.newest {
            Some((s, x)) if *s == start => Some(x),
            _ => self
                .older
                .iter_mut()
                .find(|(s, _)| *s == start)
                .map(|(_, x)| x),
        }
    }

    pub(super) fn contains(&self, start: u64) -> bool {
        self.iter().any(|(s, _)| *s == start)
    }

    /// Opens a bucket at `start` (not open yet).
    pub(super) fn insert(&mut self, start: u64, summary: Summary) {
        match &self.newest {
            None => self.newest = Some((start, summary)),
            Some((n, _)) if start > *n => {
                let previous = self.newest.replace((start, summary));
                self.older.extend(previous);
            }
            Some(_) => {
                let at = self.older.partition_point(|(s, _)| *s < start);
                self.older.insert(at, (start, summary));
            }
        }
    }
}
