//! Reassignment controller (filled in by the reassignment issue).
