//! The client context: where librdkafka's callbacks land while the source polls.
//!
//! librdkafka calls back from inside `BaseConsumer::poll`, on the polling thread: rebalances,
//! errors and log lines. The context only records what happened; the source turns the records
//! into [`Event`](crate::Event)s after the client's poll returns. The one decision taken here
//! is to *defer* rebalances: see [`Context::rebalance`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Statistics, TopicPartitionList};

use crate::{Notice, Partition};

/// A rebalance the group asked for, not yet carried out.
#[derive(Debug)]
pub(crate) enum Rebalanced {
    /// These partitions are ours once the source assigns them.
    Assign(Vec<Partition>),
    /// These partitions go once the source unassigns them; `lost` when the group already gave
    /// them away (the session timed out).
    Revoke {
        partitions: Vec<Partition>,
        lost: bool,
    },
}

/// One partition's offsets as the client's last statistics gave them; `None` where the
/// client did not know yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The high watermark of the last fetch answer (or the last stable offset under
    /// `read_committed`, the end a consumer can read to).
    pub(crate) end: Option<i64>,
    /// The next offset the client hands to the application.
    pub(crate) app: Option<i64>,
    /// The offset at which the client last signalled the end of this partition (per topic and
    /// partition, unlike the end-of-partition event, which names only the number).
    pub(crate) eof: Option<i64>,
}

/// What the callbacks saw.
#[derive(Default)]
pub(crate) struct Context {
    rebalances: Mutex<VecDeque<Rebalanced>>,
    notices: Mutex<VecDeque<Notice>>,
    /// The last description librdkafka gave for `auto.offset.reset = error` refusing a start.
    no_start: Mutex<Option<String>>,
    /// The client's latest statistics, per partition it fetches.
    seen: Mutex<BTreeMap<Partition, Seen>>,
    /// Whether the consumer reads committed messages only (its end is the last stable offset).
    pub(crate) read_committed: bool,
    /// Set while the consumer closes: then rebalances are carried out at once, nobody being
    /// left to hand them to.
    closing: AtomicBool,
    /// Set after a rebalance, a notice or a refused start is recorded: the source looks at
    /// their queues only then, not with three locks at every message.
    pending: AtomicBool,
}

impl Context {
    pub(crate) fn new(read_committed: bool) -> Context {
        Context {
            read_committed,
            ..Context::default()
        }
    }

    /// Whether something may have been recorded since the last call (which clears it): a
    /// caller that then finds something takes it and calls [`Context::mark_pending`], so the
    /// rest is looked at next time.
    pub(crate) fn take_pending(&self) -> bool {
        self.pending.swap(false, Ordering::AcqRel)
    }

    /// Says that something is recorded (after recording it).
    pub(crate) fn mark_pending(&self) {
        self.pending.store(true, Ordering::Release);
    }

    pub(crate) fn next_rebalance(&self) -> Option<Rebalanced> {
        lock(&self.rebalances).pop_front()
    }

    pub(crate) fn next_notice(&self) -> Option<Notice> {
        lock(&self.notices).pop_front()
    }

    pub(crate) fn notice(&self, notice: Notice) {
        lock(&self.notices).push_back(notice);
        self.mark_pending();
    }

    pub(crate) fn take_no_start(&self) -> Option<String> {
        lock(&self.no_start).take()
    }

    pub(crate) fn seen(&self, partition: &Partition) -> Seen {
        lock(&self.seen).get(partition).copied().unwrap_or_default()
    }

    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The callbacks cannot panic while holding a lock: a poisoned one still holds good data.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn partitions(list: &TopicPartitionList) -> Vec<Partition> {
    let mut out: Vec<Partition> = list
        .elements()
        .iter()
        .map(|e| Partition::new(e.topic(), e.partition()))
        .collect();
    out.sort();
    out
}

fn valid(offset: i64) -> Option<i64> {
    (offset >= 0).then_some(offset)
}

impl ClientContext for Context {
    fn stats(&self, statistics: Statistics) {
        let mut seen = lock(&self.seen);
        for (name, topic) in &statistics.topics {
            for (&number, p) in &topic.partitions {
                if number < 0 || !p.desired {
                    continue;
                }
                // Under read_committed the end is the last stable offset; a broker that
                // gives none (no transactions) leaves the high watermark.
                let end = if self.read_committed {
                    valid(p.ls_offset).or(valid(p.hi_offset))
                } else {
                    valid(p.hi_offset)
                };
                seen.insert(
                    Partition::new(name.as_str(), number),
                    Seen {
                        end,
                        app: valid(p.app_offset),
                        eof: valid(p.eof_offset),
                    },
                );
            }
        }
    }

    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        // Faults reach the caller as notices (below); librdkafka's log lines stay quiet, as
        // the caller owns stderr, except the one that says a position was moved because the
        // broker lost or deleted the offset: no error event reports that (under
        // `auto.offset.reset` other than `error`), and messages may have been skipped.
        if facility == "OFFSET" && level as i32 <= RDKafkaLogLevel::Warning as i32 {
            self.notice(Notice::PositionReset {
                message: message.to_string(),
            });
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        match code {
            // The end of a partition is an event of the source's, not a fault.
            Some(RDKafkaErrorCode::PartitionEOF) => {}
            Some(RDKafkaErrorCode::AutoOffsetReset) => {
                *lock(&self.no_start) = Some(reason.to_string());
                self.mark_pending();
            }
            _ => self.notice(Notice::Broker {
                message: if reason.is_empty() {
                    error.to_string()
                } else {
                    reason.to_string()
                },
            }),
        }
    }
}

impl ConsumerContext for Context {
    /// A commit's outcome, served at a poll: a refusal becomes a notice. Commits are
    /// asynchronous because they are for monitoring (and a start for consumers without a
    /// store): a synchronous one would hold the pipeline for as long as the broker is away.
    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        if let Err(error) = result {
            self.notice(Notice::CommitFailed {
                message: error.to_string(),
            });
        }
    }

    /// Defers the rebalance to the caller.
    ///
    /// rdkafka's default `rebalance` runs `pre_rebalance`, assigns or unassigns, then runs
    /// `post_rebalance`, all inside the client's poll. A revocation handled there would take
    /// the partitions away before [`KafkaSource::poll`](crate::KafkaSource::poll) could return
    /// to a caller that still has to checkpoint them, and an assignment would start reading
    /// before the caller could say where. So this context only records the rebalance; the
    /// source returns it as [`Event::Revoked`](crate::Event::Revoked) or
    /// [`Event::Assigned`](crate::Event::Assigned) and carries it out (unassign, or assign at
    /// the caller's positions) at the start of the next `poll`, once the caller has acted.
    /// librdkafka allows this: until the application assigns or unassigns, the group waits
    /// (the eager protocol's members do not rejoin, the cooperative protocol's do not ack),
    /// within `max.poll.interval.ms`.
    ///
    /// While the consumer closes nobody is left to defer to: the rebalance is carried out here.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Context>,
        err: RDKafkaRespErr,
        list: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let closing = self.closing.load(Ordering::SeqCst);
        let done = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS if closing => {
                // Closing: take nothing new.
                if cooperative {
                    consumer.incremental_assign(&TopicPartitionList::new())
                } else {
                    consumer.unassign()
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                lock(&self.rebalances).push_back(Rebalanced::Assign(partitions(list)));
                self.mark_pending();
                Ok(())
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS if closing => {
                if cooperative {
                    consumer.incremental_unassign(list)
                } else {
                    consumer.unassign()
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                lock(&self.rebalances).push_back(Rebalanced::Revoke {
                    partitions: partitions(list),
                    lost: consumer.assignment_lost(),
                });
                self.mark_pending();
                Ok(())
            }
            other => {
                // A failed rebalance: the assignment is dropped, as rdkafka's default handling
                // does, and librdkafka rejoins the group by itself. The caller hears of it as a
                // lost revocation.
                let code: RDKafkaErrorCode = other.into();
                self.notice(Notice::Broker {
                    message: format!("consumer group rebalance failed: {code}"),
                });
                let held = consumer
                    .assignment()
                    .map(|list| partitions(&list))
                    .unwrap_or_default();
                if held.is_empty() || closing {
                    consumer.unassign()
                } else {
                    lock(&self.rebalances).push_back(Rebalanced::Revoke {
                        partitions: held,
                        lost: true,
                    });
                    self.mark_pending();
                    Ok(())
                }
            }
        };
        if let Err(error) = done {
            self.notice(Notice::Broker {
                message: format!("consumer group rebalance: {error}"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_moved_for_a_lost_offset_is_a_notice_and_other_log_lines_are_quiet() {
        let context = Context::new(false);
        // librdkafka's words when a fetch meets "offset out of range" under `earliest`.
        let moved = "flows [2]: offset reset (at offset 30 (leader epoch -1), broker 1) to \
                     offset BEGINNING (leader epoch -1): fetch failed due to requested offset \
                     not available on the broker: Broker: Offset out of range";
        context.log(RDKafkaLogLevel::Warning, "OFFSET", moved);
        // A reset without an error is only a debug line; other facilities stay quiet.
        context.log(
            RDKafkaLogLevel::Debug,
            "OFFSET",
            "flows [0]: offset reset to 0",
        );
        context.log(
            RDKafkaLogLevel::Warning,
            "FAIL",
            "127.0.0.1:9092: Disconnected",
        );
        context.log(RDKafkaLogLevel::Info, "CGRPOP", "joined");
        assert_eq!(
            context.next_notice(),
            Some(Notice::PositionReset {
                message: moved.to_string()
            })
        );
        assert_eq!(context.next_notice(), None);
        let said = Notice::PositionReset {
            message: moved.to_string(),
        }
        .to_string();
        assert!(
            said.contains("flows [2]") && said.contains("no longer holds"),
            "{said}"
        );
    }
}
