"""Figure builders of the pages and the pure functions that compute what they draw."""
