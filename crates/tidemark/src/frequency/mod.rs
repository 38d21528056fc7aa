//! Frequencies: the Count-Min sketch (issue 5).
//!
//! This module is reserved for the Count-Min family; its structures arrive with their issue.
//! Nothing here is public yet.
