//! The charts each plate draws with `--out`.

use super::Plate;
use crate::chart::Chart;

const fn chart(title: &'static str, x: &'static str, ys: &'static [&'static str]) -> Chart {
    Chart {
        suffix: "",
        title,
        x,
        ys,
        group: None,
        band: None,
        log_x: false,
        log_y: false,
        y_label: "",
        only: &[],
        points_only: false,
    }
}

const HISTOGRAM_TWENTY: &[Chart] = &[Chart {
    y_label: "merges so far",
    ..chart(
        "Exponential histogram, k = 2: merges over the first twenty ones",
        "arrival",
        &["total_merges"],
    )
}];

const HISTOGRAM_WINDOW400: &[Chart] = &[Chart {
    band: Some(("low", "high")),
    y_label: "ones in the window",
    ..chart(
        "Window 400, k = 5: estimate and guaranteed bracket against the exact count",
        "seed",
        &["estimate", "exact"],
    )
}];

const HISTOGRAM_ERROR: &[Chart] = &[Chart {
    group: Some("window"),
    log_x: true,
    log_y: true,
    y_label: "worst relative error",
    ..chart(
        "Exponential histogram: worst relative error against ε, beside the bound ε/2",
        "epsilon",
        &["worst_rel_error", "bound"],
    )
}];

const HISTOGRAM_BITS: &[Chart] = &[Chart {
    group: Some("epsilon"),
    log_x: true,
    log_y: true,
    y_label: "buckets",
    ..chart(
        "Exponential histogram: buckets held against k·log2(N/k)",
        "ones",
        &["buckets", "k_log2_n_over_k"],
    )
}];

const DISTINCT_PER_BYTE: &[Chart] = &[Chart {
    group: Some("series"),
    log_x: true,
    // Linear: the sparse and exact forms' near-zero errors would otherwise take the axis.
    log_y: false,
    y_label: "relative RMSE rescaled to 1,024 bytes at rest",
    ..chart(
        "HyperLogLog and ExaLogLog at equal bytes: relative RMSE × √(bytes / 1,024)",
        "n",
        &["rmse_at_1kib"],
    )
}];

const HLL_ACCURACY: &[Chart] = &[
    Chart {
        group: Some("p"),
        log_x: true,
        log_y: true,
        y_label: "relative RMSE",
        ..chart(
            "HyperLogLog: relative RMSE against n (Ertl and HIP), 200 trials a point",
            "n",
            &["ertl_rmse", "hip_rmse"],
        )
    },
    Chart {
        suffix: "-ratio",
        group: Some("p"),
        log_x: true,
        y_label: "RMSE / theory (1.04/√m, 0.85/√m)",
        ..chart(
            "HyperLogLog: RMSE over its theoretical value",
            "n",
            &["ertl_vs_1.04", "hip_vs_0.85"],
        )
    },
];

const SLIDING_HLL: &[Chart] = &[Chart {
    band: Some(("sliding_low", "sliding_high")),
    y_label: "distinct users in the last 60 minutes",
    ..chart(
        "Sliding HyperLogLog (with 95% bracket) and ring against the exact count",
        "minute",
        &["sliding", "ring", "exact"],
    )
}];

const SLIDING_MEMORY: &[Chart] = &[Chart {
    log_x: true,
    log_y: true,
    y_label: "bytes",
    ..chart(
        "Sliding HyperLogLog memory against retention, beside the ring and one dense sketch",
        "retention_s",
        &[
            "sliding_bytes",
            "encoded_bytes",
            "ring_bytes",
            "dense_bytes",
        ],
    )
}];

const COUNTMIN_ACCURACY: &[Chart] = &[Chart {
    group: Some("stream"),
    only: &[("d", "5"), ("delta", "")],
    log_x: true,
    y_label: "error / (ε‖a‖₁)",
    ..chart(
        "Count-Min point queries (d = 5): mean and worst error in units of the bound",
        "w",
        &["mean_err", "worst_err"],
    )
}];

const FILTERS: &[Chart] = &[
    Chart {
        group: Some("design"),
        log_x: true,
        log_y: true,
        y_label: "false-positive rate (%)",
        ..chart(
            "Resizable quotient filters: measured rate against growth",
            "growth",
            &["fpr_pct"],
        )
    },
    Chart {
        suffix: "-bits",
        group: Some("design"),
        log_x: true,
        log_y: true,
        y_label: "bits held",
        ..chart(
            "Resizable quotient filters: bits against growth",
            "growth",
            &["bits"],
        )
    },
];

const FILTERS_GENERATIONS: &[Chart] = &[Chart {
    group: Some("step"),
    y_label: "share of the rate (%)",
    ..chart(
        "Lengthening fingerprints: each generation's share of the rate",
        "generation",
        &["rate_share_pct"],
    )
}];

const FILTERS_REBUILD: &[Chart] = &[
    Chart {
        group: Some("design"),
        log_x: true,
        log_y: true,
        y_label: "bits held",
        ..chart(
            "Rebuild, stack or reserve: bits against growth",
            "growth",
            &["bits"],
        )
    },
    Chart {
        suffix: "-reread",
        group: Some("design"),
        log_x: true,
        y_label: "keys re-read from the store",
        ..chart(
            "Rebuild, stack or reserve: keys re-read against growth",
            "growth",
            &["keys_reread"],
        )
    },
];

/// One stream's chart of the quantile-error plate: each sketch's worst relative error against
/// the tail 1 − q.
const fn quantile_stream(
    suffix: &'static str,
    title: &'static str,
    stream: &'static [(&'static str, &'static str)],
) -> Chart {
    Chart {
        suffix,
        group: Some("sketch"),
        only: stream,
        log_x: true,
        log_y: true,
        y_label: "worst relative error |answer − exact| / exact",
        ..chart(title, "tail", &["worst_rel_error"])
    }
}

const QUANTILE_ERROR: &[Chart] = &[
    quantile_stream(
        "",
        "Quantiles at equal bytes, Pareto (1.1): relative error against the tail 1 − q",
        &[("stream", "pareto-1.1")],
    ),
    quantile_stream(
        "-lognormal",
        "Quantiles at equal bytes, lognormal: relative error against the tail 1 − q",
        &[("stream", "lognormal")],
    ),
    quantile_stream(
        "-bimodal",
        "Quantiles at equal bytes, bimodal latencies: relative error against the tail 1 − q",
        &[("stream", "bimodal")],
    ),
    Chart {
        suffix: "-window",
        group: Some("quantile"),
        only: &[("tick", "")],
        band: Some(("low", "high")),
        log_y: true,
        y_label: "value (the last hour)",
        ..chart(
            "QuantileRing, α = 1%: the last hour's quantiles with their brackets, and the exact ones",
            "tick",
            &["estimate", "exact"],
        )
    },
];

/// The charts of a plate.
pub fn charts(plate: Plate) -> &'static [Chart] {
    match plate {
        Plate::HistogramTwenty => HISTOGRAM_TWENTY,
        Plate::HistogramWindow400 => HISTOGRAM_WINDOW400,
        Plate::HistogramError => HISTOGRAM_ERROR,
        Plate::HistogramBits => HISTOGRAM_BITS,
        Plate::HllAccuracy => HLL_ACCURACY,
        Plate::DistinctPerByte => DISTINCT_PER_BYTE,
        Plate::SlidingHll => SLIDING_HLL,
        Plate::SlidingMemory => SLIDING_MEMORY,
        Plate::CountminAccuracy => COUNTMIN_ACCURACY,
        Plate::Filters => FILTERS,
        Plate::FiltersGenerations => FILTERS_GENERATIONS,
        Plate::FiltersRebuild => FILTERS_REBUILD,
        Plate::QuantileError => QUANTILE_ERROR,
        Plate::All => &[],
    }
}
