//! Membership: resizable quotient filters (issue 6).
//!
//! This module is reserved for the quotient-filter family; its structures arrive with their
//! issue. Nothing here is public yet.
