"""The model of the inputs: pin syntax, targets (target.toml) and their lock."""
