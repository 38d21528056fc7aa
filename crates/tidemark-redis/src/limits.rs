//! Upper bounds on what one key may be asked to allocate, and on the times and windows a
//! command takes: checked by every `CREATE`, every argument parser and every decoded value.

/// Upper bounds on what one key may be asked to allocate.
pub struct Limits;

impl Limits {
    /// The longest window, ms (about 8,900 years): times and windows stay far from `u64`'s
    /// edge, so no sum of a time and a window overflows.
    pub const MAX_WINDOW_MS: u64 = 1 << 48;
    /// The largest time accepted, ms since the epoch.
    pub const MAX_TIME_MS: u64 = 1 << 52;
    /// Buckets in a distinct ring (WINDOW / BUCKET).
    pub const MAX_RING_BUCKETS: u64 = 65_536;
    /// Buckets in a frequency ring (WINDOW / BUCKET).
    pub const MAX_FREQ_BUCKETS: u64 = 4_096;
    /// Bytes a key may reach at full size (all buckets dense), as computed at creation.
    pub const MAX_KEY_BYTES: u64 = 1 << 30;
    /// Bytes of one filter's table at creation.
    pub const MAX_FILTER_BYTES: u64 = 512 << 20;
    /// The largest `n` of one `TMCOUNT.ADD`.
    pub const MAX_COUNT_ADD: u64 = 1 << 40;
    /// The largest total a counter's window may hold.
    pub const MAX_COUNT_TOTAL: u64 = 1 << 62;
    /// The largest count of one item in one `TMFREQ.ADD`.
    pub const MAX_FREQ_ADD: u64 = 1 << 40;
    /// The longest item a frequency key takes, bytes: it keeps heavy items by name, and names
    /// are what tell items apart while it counts exactly.
    pub const MAX_FREQ_ITEM: usize = tidemark::frequency::ItemCounts::MAX_ITEM_LEN;
    /// Filter generations kept by an expiring filter: an item lives between EXPIRE and
    /// EXPIRE·(1 + 1/(GENERATIONS − 1)) ms.
    pub const GENERATIONS: u64 = 5;
}
