//! The bounds of a plan's input, a leaf that the model, the caps and the errors all name.

/// Most moves one plan may hold: bounds what a plan may claim in memory and in the store.
pub const MAX_PLAN_MOVES: usize = 1_000_000;

/// Highest cap accepted: beyond it a cap limits nothing, and a bound keeps bad input harmless.
pub const MAX_CAP: u32 = 100_000;
