//! Distinct counts: HyperLogLog and its windowed forms (issues 3 and 4).
//!
//! This module is reserved for the HyperLogLog family; its structures arrive with their
//! issues. Nothing here is public yet.
