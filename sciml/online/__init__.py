"""Online surrogate training."""
