"""`make demo`: the whole toolkit on one machine, with an emulated AWS and no account."""
