//! A generated flow log with known truth, for the demo, the end-to-end tests and the bench.
//!
//! Sources, over `minutes` minutes of event time starting at [`FlowLog::START`]:
//!
//! - a health checker (`10.0.0.2`) hitting 4 targets every second: fan-out 4, huge volume;
//! - `users` ordinary users (`10.2.x.y`), each with a handful of favourite destinations,
//!   a flow every few seconds on average;
//! - `scanners` laptops (`10.9.0.n`), each probing 1,024 ports on each of 3 hosts in two
//!   minutes, starting at minute 2 + 2n: fan-out 3,072;
//! - late events: a share of the users' flows arrive `late_within` seconds after their event
//!   time (inside an allowed lateness of 30 s), and a smaller share `late_beyond` seconds
//!   after it (past it).
//!
//! Records come out in arrival order; each carries its event time. The generator is a
//! seeded splitmix64 stream, so a seed fixes the log byte for byte.
//!
//! Each flow also has a response time ([`Flow::latency_ms`], in the `latency_ms` column of
//! [`FlowLog::to_csv_with_latency`]): lognormal around a median of the destination's own
//! (4 to 40 ms, spread σ = 0.35: a p99 at most about 90 ms), and for one destination in
//! sixteen ([`Flow::has_incident`]) an incident from minute 10 to 14 (the median eight times
//! higher, σ = 0.6): its p99 over five minutes then passes 250 ms for most.
//! It is a function of the flow alone, so the log without it is what it always was.

/// One flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Event time, epoch seconds.
    pub ts: u64,
    /// Arrival time, epoch seconds (≥ ts).
    pub arrival: u64,
    /// Source address.
    pub src: String,
    /// Destination address.
    pub dst: String,
    /// Destination port.
    pub port: u16,
}

/// The generator's knobs.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Minutes of event time.
    pub minutes: u64,
    /// Ordinary users.
    pub users: u32,
    /// Mean seconds between a user's flows.
    pub user_gap: u64,
    /// Scanning laptops.
    pub scanners: u32,
    /// Share of user flows arriving late within the lateness.
    pub late_share: f64,
    /// Their delay, seconds.
    pub late_within: u64,
    /// Share of user flows arriving past the lateness.
    pub too_late_share: f64,
    /// Their delay, seconds.
    pub late_beyond: u64,
    /// Seed.
    pub seed: u64,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            minutes: 10,
            users: 200,
            user_gap: 5,
            scanners: 1,
            late_share: 0.02,
            late_within: 20,
            too_late_share: 0.005,
            late_beyond: 200,
            seed: 7,
        }
    }
}

/// A generated log.
#[derive(Clone, Debug)]
pub struct FlowLog {
    /// Flows in arrival order.
    pub flows: Vec<Flow>,
}

/// One splitmix64 step of `x`: a well-mixed 64-bit value.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hash of `text`'s bytes through [`mix`].
fn mix_text(text: &str) -> u64 {
    text.bytes().fold(0, |h, b| mix(h ^ u64::from(b)))
}

impl Flow {
    /// Whether destination `dst` has an incident in minutes 10 to 14 (one in sixteen does).
    pub fn has_incident(dst: &str) -> bool {
        mix_text(dst) % 16 == 0
    }

    /// The flow's response time, ms, to 0.1 ms: lognormal around its destination's median,
    /// heavier during its destination's incident, if it has one (see the module's doc).
    pub fn latency_ms(&self) -> f64 {
        let service = mix_text(&self.dst);
        let median = 4.0 * (1 + service % 10) as f64;
        let minute = self.ts.saturating_sub(FlowLog::START) / 60;
        let incident = Flow::has_incident(&self.dst) && (10..14).contains(&minute);
        let (median, sigma) = if incident {
            (8.0 * median, 0.6)
        } else {
            (median, 0.35)
        };
        // Two uniforms from the flow's fields, a normal deviate by Box–Muller.
        let h = mix(service ^ mix(self.ts ^ mix(mix_text(&self.src) ^ u64::from(self.port))));
        let unit = |x: u64| ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let (u, v) = (unit(h), unit(mix(h)));
        let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
        ((median * (sigma * z).exp()) * 10.0).round() / 10.0
    }
}

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        let z = mix(self.0);
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl FlowLog {
    /// Epoch seconds of the log's first second (2023-11-14T22:13:20Z).
    pub const START: u64 = 1_700_000_000;
    /// The health checker's address.
    pub const HEALTH: &'static str = "10.0.0.2";

    /// A scanner's address.
    pub fn scanner(n: u32) -> String {
        format!("10.9.0.{}", n + 1)
    }

    /// Generates a log.
    pub fn generate(spec: &FlowSpec) -> FlowLog {
        let mut rng = SplitMix(spec.seed);
        let secs = spec.minutes * 60;
        let mut flows = Vec::new();
        let mut push = |ts: u64, arrival: u64, src: String, dst: String, port: u16| {
            flows.push(Flow {
                ts,
                arrival,
                src,
                dst,
                port,
            })
        };
        for s in 0..secs {
            let t = Self::START + s;
            for target in 1..=4 {
                push(t, t, Self::HEALTH.into(), format!("10.1.0.{target}"), 443);
            }
        }
        for u in 0..spec.users {
            let src = format!("10.2.{}.{}", u / 250, u % 250 + 1);
            let favourites = 1 + rng.below(12);
            let mut s = rng.below(spec.user_gap.max(1));
            while s < secs {
                let t = Self::START + s;
                let f = rng.below(favourites);
                let dst = format!("172.16.{}.{}", (u as u64 * 7 + f) % 200, f + 1);
                let port = [443u16, 80, 22, 8080][(f % 4) as usize];
                let x = rng.unit();
                let arrival = if x < spec.too_late_share {
                    t + spec.late_beyond
                } else if x < spec.too_late_share + spec.late_share {
                    t + spec.late_within
                } else {
                    t
                };
                push(t, arrival, src.clone(), dst, port);
                s += 1 + rng.below(2 * spec.user_gap.max(1));
            }
        }
        for n in 0..spec.scanners {
            let src = Self::scanner(n);
            let begin = Self::START + 120 + 120 * n as u64;
            // 3 hosts × 1,024 ports in 120 s.
            for i in 0..3 * 1024u64 {
                let t = begin + i * 120 / 3072;
                let host = i / 1024;
                let port = (i % 1024) as u16 + 1;
                push(t, t, src.clone(), format!("192.168.7.{}", host + 10), port);
            }
        }
        // Arrival order; ties keep generation order (stable), so the log is deterministic.
        flows.sort_by_key(|f| f.arrival);
        FlowLog { flows }
    }

    /// The log as CSV with a header `ts,src_ip,dst_ip,dst_port,latency_ms`: each flow's
    /// response time too ([`Flow::latency_ms`]).
    pub fn to_csv_with_latency(&self) -> String {
        let mut s = String::with_capacity(self.flows.len() * 48 + 48);
        s.push_str("ts,src_ip,dst_ip,dst_port,latency_ms\n");
        for f in &self.flows {
            s.push_str(&format!(
                "{},{},{},{},{}\n",
                f.ts,
                f.src,
                f.dst,
                f.port,
                f.latency_ms()
            ));
        }
        s
    }

    /// The log as CSV with a header: `ts,src_ip,dst_ip,dst_port`.
    pub fn to_csv(&self) -> String {
        let mut s = String::with_capacity(self.flows.len() * 40 + 32);
        s.push_str("ts,src_ip,dst_ip,dst_port\n");
        for f in &self.flows {
            s.push_str(&format!("{},{},{},{}\n", f.ts, f.src, f.dst, f.port));
        }
        s
    }
}

/// The fan-out detector's config: distinct (dst_ip, dst_port) per src_ip in 5 minutes,
/// alerting 3 standard errors above 500, as in the fan-out detector's design figures.
pub const FANOUT_CONFIG: &str = r#"[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"

[[metric]]
name = "fanout"
kind = "distinct"
key = ["src_ip"]
item = ["dst_ip", "dst_port"]
bucket = "1m"
window = "5m"
precision = 10
retention = "1d"
allowed_lateness = "30s"
late = "drop"

[[metric.alert]]
above = 500
margin = 3.0
consecutive = 1
early = true
"#;
