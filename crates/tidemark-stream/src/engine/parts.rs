//! Work over many keys split between threads, its result put back in the keys' order.
//!
//! A close and a checkpoint visit every key of a metric, and each key's share of the work
//! reads and changes that key alone (its buckets, window, streaks and rows). Split into
//! parts, each worked by a thread into its own result, and the results appended in the parts'
//! order, the work ends as one pass over the keys in order would: the same closed buckets,
//! alerts and rows, in the same order.

/// Keys a part takes at least: fewer are worked in one thread (a thread costs tens of
/// microseconds to start; a key's close or rows about a microsecond).
pub(super) const KEYS_PER_THREAD: usize = 8192;

/// Runs `work` over `items` into `done` as one pass in order would, splitting `items` into up
/// to `threads` parts of at least `min` items when there are that many: the first part is
/// worked in this thread into `done`, each other in a thread of its own into a fresh `R`,
/// appended to `done` (`append`) in the parts' order. A part whose thread cannot start is
/// worked here, in its place; a panic in a part is raised again here.
pub(super) fn in_parts<T: Send, R: Default + Send>(
    items: &mut [T],
    threads: usize,
    min: usize,
    done: &mut R,
    work: impl Fn(&mut [T], &mut R) + Sync,
    append: impl Fn(&mut R, R),
) {
    let parts = threads.min(items.len() / min.max(1)).max(1);
    if parts == 1 {
        work(items, done);
        return;
    }
    let size = items.len().div_ceil(parts);
    // Per part after the first: its result, or `None` if its thread could not start.
    let mut helped: Vec<Option<R>> = Vec::new();
    let work = &work;
    std::thread::scope(|scope| {
        let mut chunks = items.chunks_mut(size);
        let first = chunks.next();
        let helpers: Vec<_> = chunks
            .map(|chunk| {
                std::thread::Builder::new()
                    .name("tidemark-part".into())
                    .spawn_scoped(scope, move || {
                        let mut part = R::default();
                        work(chunk, &mut part);
                        part
                    })
                    .ok()
            })
            .collect();
        if let Some(first) = first {
            work(first, done);
        }
        for h in helpers {
            helped.push(h.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
        }
    });
    for (n, part) in helped.into_iter().enumerate() {
        match part {
            Some(part) => append(done, part),
            None => {
                let from = (n + 1) * size;
                let to = (from + size).min(items.len());
                work(&mut items[from..to], done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each item doubled, pushed in order: any split ends as one pass does.
    fn doubled(items: &mut [u64], threads: usize, min: usize) -> Vec<u64> {
        let mut done = vec![7];
        in_parts(
            items,
            threads,
            min,
            &mut done,
            |chunk, out: &mut Vec<u64>| {
                for x in chunk.iter_mut() {
                    *x *= 2;
                    out.push(*x);
                }
            },
            |a, mut b| a.append(&mut b),
        );
        done
    }

    #[test]
    fn parts_end_as_one_pass_in_order() {
        for n in [0usize, 1, 5, 16, 17, 100, 1001] {
            let want: Vec<u64> = std::iter::once(7)
                .chain((0..n as u64).map(|x| 2 * x))
                .collect();
            for threads in 1..=5 {
                for min in [1, 3, 16] {
                    let mut items: Vec<u64> = (0..n as u64).collect();
                    assert_eq!(
                        doubled(&mut items, threads, min),
                        want,
                        "{n} {threads} {min}"
                    );
                    let changed: Vec<u64> = (0..n as u64).map(|x| 2 * x).collect();
                    assert_eq!(items, changed, "every item worked once");
                }
            }
        }
    }
}
