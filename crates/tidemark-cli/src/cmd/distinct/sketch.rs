//! `--sketch`: which sketch `tidemark distinct` counts with, over all lines or over a window.

/// Which sketch counts the distinct items.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SketchArg {
    /// HyperLogLog: 6 bits a register at rest, standard error about 1.04/√(2^p).
    Hyperloglog,
    /// ExaLogLog (t, d) = (2, 20): 28 bits a register (about 17 range-coded at rest),
    /// standard error about 0.36/√(2^p): the same error as HyperLogLog in about 43% fewer
    /// register bits and 60% fewer bytes saved; p 11 ≈ HyperLogLog's 14.
    Exaloglog,
}
