//! A metric's alert rule: the threshold a key's window estimate is compared with, and how
//! ([`AlertRule`]). The config reads rules from `[[metric.alert]]` tables, each kind checks the
//! rules it can answer, and the engine evaluates them as buckets close.

/// Which end of a window estimate an alert compares with its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertOn {
    /// The point estimate.
    Value,
    /// The bracket's upper end: never misses a real crossing (limits, quotas).
    High,
    /// The bracket's lower end: never fires on a key below the threshold (at the bracket's
    /// confidence).
    Low,
}

/// An alert rule on a metric's window estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlertRule {
    /// The threshold.
    pub above: f64,
    /// Margin in standard errors above the threshold (0 for exact and guaranteed answers).
    pub margin: f64,
    /// How many successive bucket closes the key must stay above the limit.
    pub consecutive: u32,
    /// Which end of the estimate is compared.
    pub on: AlertOn,
    /// Whether the alert may fire early: at the event that takes the window the next close
    /// will evaluate past the limit, before that close confirms or withdraws it.
    pub early: bool,
    /// The quantile a quantile metric's rule compares (`None` for other kinds).
    pub quantile: Option<f64>,
}
